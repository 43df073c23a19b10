"""The email channel's section of ``app.yaml``, ``smtp:``: the server Signoff sends through.

    smtp:
      host: mail.example.com
      port: 587                  # default: 587 (starttls), 465 (tls), 25 (none)
      security: starttls         # starttls (default) | tls | none (loopback servers only)
      user: signoff
      password: "${SMTP_PASSWORD}"
      from: signoff@example.com
      timeoutSeconds: 30         # one connection's and each command's time limit
      minIntervalSeconds: 0      # at least this long between two messages to the server
      inbound:                   # reply to decide (off without it): Signoff's own SMTP server
        port: 2525               # where your mail server relays the reply domain's mail
        host: 127.0.0.1          # default: this machine only
        domain: replies.example.com   # the domain of the reply addresses
        local: signoff           # reply addresses are signoff+<token>@<domain>

``inbound`` listens for replies to approval emails (``bot.email.inbound``); it is meant to sit
behind the deployment's own mail server, which checks senders (SPF, DKIM, DMARC) and relays only
the reply domain to it, so listening on another address than this machine's is a warning.

``security: none`` sends the password and every approval link in the clear, so it is refused
unless ``host`` is this machine (a relay on localhost, or a test server). The password is kept
out of the record's ``repr`` so that no log of the configuration shows it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engine.config.sections import ServerConfig, is_loopback
from engine.config.values import Section

__all__ = [
    "MAILBOX",
    "MAILBOX_RE",
    "InboundConfig",
    "SmtpConfig",
    "parse_smtp",
    "smtp_state",
    "smtp_warnings",
]

# An address as Signoff writes it into a header: local@domain, with none of the characters
# that could end a header or start another address (no spaces, CR, LF, quotes, <>, commas).
# One pattern for Python and the stored workflows' JSON Schema (JavaScript) alike.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
MAILBOX = rf"[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]{{1,64}}@{_LABEL}(?:\.{_LABEL})+"
MAILBOX_RE = re.compile(MAILBOX + r"\Z")
SECURITY = ("starttls", "tls", "none")
_DEFAULT_PORT = {"starttls": 587, "tls": 465, "none": 25}


@dataclass(frozen=True, slots=True)
class InboundConfig:
    """Reply to decide: where Signoff's SMTP server listens, and its reply addresses."""

    port: int
    domain: str
    host: str = "127.0.0.1"
    local: str = "signoff"


@dataclass(frozen=True, slots=True)
class SmtpConfig:
    """Where email goes out: the server, how the connection is secured, who signs in, and the
    address messages come from."""

    host: str = ""
    port: int = 587
    security: str = "starttls"  # one of SECURITY
    user: str = ""
    password: str = field(default="", repr=False)
    from_address: str = ""  # a MAILBOX
    timeout_seconds: float = 30.0
    min_interval_seconds: float = 0.0
    inbound: InboundConfig | None = None  # reply to decide, when configured

    @property
    def enabled(self) -> bool:
        return bool(self.host and self.from_address)

    @property
    def from_domain(self) -> str:
        """The domain of ``from``: the right-hand side of the Message-IDs Signoff makes."""
        return self.from_address.rpartition("@")[2].lower() or "signoff.invalid"


def parse_smtp(raw: Any, path: str, problems: list[str], server: ServerConfig) -> SmtpConfig:
    keys = (
        "host",
        "port",
        "security",
        "user",
        "password",
        "from",
        "timeoutSeconds",
        "minIntervalSeconds",
        "inbound",
    )
    s = Section(raw, path, problems, keys)
    host = (s.text("host", "") or "").strip()
    if host and not re.fullmatch(r"[A-Za-z0-9.:\[\]-]{1,253}", host):
        s.error("host", f"not a host name or IP address: {json.dumps(host[:80])}")
        host = ""
    security = s.choice("security", "starttls", SECURITY) or "starttls"
    if security == "none" and host and not is_loopback(host):
        s.error(
            "security",
            "none sends the password and the approval links unencrypted, so it is allowed "
            f"only to a server on this machine (127.0.0.1, ::1 or localhost), got {host!r}: "
            "use starttls or tls",
        )
        security = "starttls"
    from_address = s.text("from", "") or ""
    if from_address and not MAILBOX_RE.match(from_address):
        s.error("from", f"not an email address like signoff@example.com: {from_address!r}")
        from_address = ""
    user, password = s.text("user", "") or "", s.text("password", "") or ""
    if password and not user:
        s.error("user", "required with smtp.password (the name to sign in with)")
    if host and not from_address and not s.has("from"):
        s.error("from", "required with smtp.host (the address approval emails come from)")
    return SmtpConfig(
        host=host,
        port=s.integer("port", _DEFAULT_PORT[security], 1, 65535) or _DEFAULT_PORT[security],
        security=security,
        user=user,
        password=password,
        from_address=from_address,
        timeout_seconds=s.number("timeoutSeconds", 30.0, 1.0, 600.0) or 30.0,
        min_interval_seconds=s.number("minIntervalSeconds", 0.0, 0.0, 3600.0) or 0.0,
        inbound=_inbound(s.raw("inbound"), s.at("inbound"), problems) if s.has("inbound") else None,
    )


def _inbound(raw: Any, path: str, problems: list[str]) -> InboundConfig | None:
    s = Section(raw, path, problems, ("port", "host", "domain", "local"))
    port = s.integer("port", None, 1, 65535)
    if port is None and not s.has("port"):
        s.error("port", "required: the port Signoff listens on for replies")
    host = (s.text("host", "127.0.0.1") or "127.0.0.1").strip()
    domain = (s.text("domain", "") or "").strip().lower()
    if not re.fullmatch(rf"{_LABEL}(?:\.{_LABEL})+", domain):
        s.error("domain", f"the reply addresses' domain, like replies.example.com, got {domain!r}")
    local = s.text("local", "signoff") or "signoff"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,15}", local):
        s.error("local", f"letters, digits, '.', '_' or '-', at most 16, got {local[:40]!r}")
    if port is None or not s.valid or any(p.startswith(f"{path}.") for p in problems):
        return None
    return InboundConfig(port=port, domain=domain, host=host, local=local)


def smtp_state(config: SmtpConfig) -> str:
    """What ``signoff check`` says of ``smtp:`` (never the password)."""
    if not config.host:
        return "unset"
    signs_in = f", signing in as {config.user}" if config.user else ""
    return (
        f"set ({config.host}:{config.port}, {config.security}{signs_in}, "
        f"from {config.from_address})"
    )


def smtp_warnings(config: SmtpConfig) -> list[str]:
    out = []
    if config.user and not config.password:
        out.append("smtp.password: empty while smtp.user is set (the server may refuse to send)")
    inbound = config.inbound
    if inbound is not None and not is_loopback(inbound.host):
        out.append(
            f"smtp.inbound.host: {inbound.host} takes mail from anyone who can reach it; put it "
            "behind your mail server, which checks senders, and listen on 127.0.0.1"
        )
    if inbound is not None and not config.enabled:
        out.append("smtp.inbound: replies are read, but no approval email is sent (smtp.host)")
    return out
