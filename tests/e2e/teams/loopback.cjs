// Keeps a Node process on loopback (PLATFORM.md, "Network safety"). Preloaded with `node -r`
// (and through NODE_OPTIONS for any child process) before the Agents Playground starts:
//
// - every listen() that names no host binds 127.0.0.1 instead of all interfaces;
// - every outbound TCP/TLS connect to anything but 127.0.0.0/8, ::1 or "localhost" fails
//   before a DNS lookup or a packet leaves (its bundled Application Insights SDK included);
// - UDP sockets may only send to loopback.
//
// Refusals are logged once per host on stderr, so a test log shows what was kept in.
"use strict";

if (!globalThis.__signoffLoopbackOnly) {
  globalThis.__signoffLoopbackOnly = true;

  const net = require("net");
  const dgram = require("dgram");

  const LOOPBACK_NAMES = new Set(["localhost", "ip6-localhost", "ip6-loopback"]);
  const refused = new Set();

  function isLoopback(host) {
    if (host === undefined || host === null || host === "") return true; // Node's default
    const h = String(host).toLowerCase().replace(/^\[|\]$/g, "");
    if (LOOPBACK_NAMES.has(h) || h.endsWith(".localhost")) return true;
    if (net.isIPv4(h)) return h.startsWith("127.");
    if (net.isIPv6(h)) {
      if (h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
      const mapped = h.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/);
      return mapped !== null && mapped[1].startsWith("127.");
    }
    return false;
  }

  function note(host) {
    if (!refused.has(host)) {
      refused.add(host);
      process.stderr.write(`[loopback.cjs] refused a connection to non-loopback ${host}\n`);
    }
  }

  // connect(options[, cb]) | connect(path[, cb]) | connect(port[, host][, cb]) | the internal
  // normalized form, an array [options, cb].
  function targetHost(args) {
    let first = args[0];
    if (Array.isArray(first)) first = first[0];
    if (first !== null && typeof first === "object") {
      return first.path !== undefined && first.port === undefined ? undefined : first.host;
    }
    if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
      return typeof args[1] === "string" ? args[1] : undefined;
    }
    return undefined; // an IPC path
  }

  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (...args) {
    const host = targetHost(args);
    if (!isLoopback(host)) {
      note(host);
      const error = Object.assign(new Error(`loopback.cjs: connect to ${host} refused`), {
        code: "ECONNREFUSED",
      });
      process.nextTick(() => this.destroy(error));
      return this;
    }
    return connect.apply(this, args);
  };

  // listen(port[, host][, backlog][, cb]) | listen(options[, cb]) | listen(path | handle)
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    const first = args[0];
    if (first !== null && typeof first === "object" && !Array.isArray(first)) {
      if (first.port !== undefined && first.path === undefined && first.host === undefined) {
        args[0] = { ...first, host: "127.0.0.1" };
      }
    } else if (
      first === undefined ||
      typeof first === "function" ||
      typeof first === "number" ||
      (typeof first === "string" && /^\d+$/.test(first))
    ) {
      if (typeof first === "function" || first === undefined) {
        args.unshift(0);
      }
      if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
    }
    return listen.apply(this, args);
  };

  const send = dgram.Socket.prototype.send;
  dgram.Socket.prototype.send = function (...args) {
    // send(msg, [offset, length,] port, address[, cb]): the address is the last string argument
    const address = args.slice(1).filter((a) => typeof a === "string").pop();
    if (!isLoopback(address)) {
      note(address);
      const cb = args[args.length - 1];
      if (typeof cb === "function") process.nextTick(cb, new Error("loopback.cjs: refused"));
      return;
    }
    return send.apply(this, args);
  };
}
