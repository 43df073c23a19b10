"""The small sections of ``app.yaml``: database, server, people, llm, gate, approvals and
policy (a channel's own section is ``engine.config.channels``'s). Each ``parse_*`` reads one
section, records every problem at its YAML path and returns a frozen value (defaults where a
value was bad, so reading continues)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.config.values import Section, Substituted, join, type_name
from engine.domain.confidence import Estimator
from engine.domain.outbound import IPNetwork
from engine.domain.policy_rules import PolicyMode

GATE_ENV = (
    "SIGNOFF_CONFIDENCE_GATE",
    "SIGNOFF_CONFIDENCE_GATE_THRESHOLD",
    "SIGNOFF_CONFIDENCE_ESTIMATOR",
    "SIGNOFF_CONFIDENCE_SAMPLES",
    "SIGNOFF_CONFIDENCE_CALIBRATE",
)
DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./signoff.db"
_SCHEMES = {
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "sqlite": "sqlite+aiosqlite",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}
_DURATION_RE = re.compile(r"(\d+)\s*([smhd]?)\Z")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class DatabaseConfig:
    url: str = DEFAULT_DATABASE_URL  # always sqlite+aiosqlite:// or postgresql+asyncpg://

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str = "http://127.0.0.1:8080"  # no trailing slash
    # True when app.yaml or SIGNOFF_PUBLIC_URL set publicUrl; False when it is derived from
    # host and port, and so follows the address ``signoff serve`` actually binds.
    public_url_set: bool = False
    secret_key: str = ""  # signs approval links
    # Runs advanced at once per process: each is a task, not a thread, and most of its time
    # waits on the database or a remote, so a slot costs little. 8 held a burst of 64 decisions
    # to 660-720 resumed runs/s; 64 took 880-1,080/s (bench/peers.py, signoff-http).
    workers: int = 64
    lease_seconds: int = 30
    poll_seconds: float = 2.0
    # Networks that URLs arriving through the API (callbackUrl) may reach though internal.
    allow_internal_targets: tuple[IPNetwork, ...] = ()


_NO_IDS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Person:
    """One identity across platforms: ``ids`` maps a channel to the person's id on it, as
    the ``people:`` field of that name says (``engine.config.channels.PERSON_IDS``)."""

    name: str
    email: str | None = None
    ids: Mapping[str, str] = field(default_factory=lambda: _NO_IDS, hash=False)
    tz: str | None = None  # an IANA time zone (``Europe/Berlin``) times are shown to them in

    def reached_by(self, field: str) -> str | None:
        """Their ``people:`` field ``field``: their ``email``, or their id on a channel."""
        return self.email if field == "email" else self.ids.get(field) or None


@dataclass(frozen=True)
class PersonId:
    """A ``people:`` field holding a person's id on one channel (its name is the channel's)."""

    channel: str
    pattern: re.Pattern[str] | None = None  # what a valid id looks like, if anything
    bad: str = ""  # the problem for an id not matching it ({value}: the id, as JSON)


@dataclass(frozen=True, slots=True)
class LlmConfig:
    base_url: str = ""  # an OpenAI-compatible chat-completions endpoint
    model: str = ""
    api_key: str = ""
    timeout_seconds: float = 20.0
    max_retries: int = 2

    @property
    def enabled(self) -> bool:
        return bool(self.base_url and self.model)


@dataclass(frozen=True, slots=True)
class GateConfig:
    """The ``gate:`` section as written; None means "not set here" (the gate resolves
    env -> app.yaml -> runtime overrides, then its own defaults)."""

    enabled: bool | None = None
    threshold: float | None = None
    estimator: Estimator | None = None
    samples: int | None = None  # kept even outside 1..9: the gate falls back with a warning
    calibrate: bool | None = None
    channels: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ApprovalsConfig:
    ttl_seconds: int = 86400  # an undecided held call (and its link) expires after this


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    default_mode: PolicyMode = PolicyMode.ALLOW_ALL


def normalize_database_url(url: str) -> str | None:
    """The async-driver form of ``url`` (``postgres://`` -> ``postgresql+asyncpg://``,
    ``sqlite:///x`` -> ``sqlite+aiosqlite:///x``), or None when the scheme is unsupported."""
    scheme, sep, rest = url.partition("://")
    target = _SCHEMES.get(scheme.lower()) if sep else None
    return None if target is None else f"{target}://{rest}"


def parse_database(raw: Any, env: Mapping[str, str], problems: list[str]) -> DatabaseConfig:
    local: list[str] = []
    s = Section(_overlay(raw, env, {"url": "SIGNOFF_DATABASE_URL"}), "database", local, ["url"])
    url = s.text("url", DEFAULT_DATABASE_URL, required=s.has("url")) or DEFAULT_DATABASE_URL
    normalized = normalize_database_url(url)
    if normalized is None:
        # Never echo the URL: it may carry a password.
        scheme = url.partition("://")[0] if "://" in url else ""
        s.error(
            "url",
            f"unsupported database URL scheme {json.dumps(scheme)} "
            "(use sqlite+aiosqlite:///path or postgresql+asyncpg://user@host/db)",
        )
        normalized = DEFAULT_DATABASE_URL
    _blame_env(local, problems, "database", env, {"url": "SIGNOFF_DATABASE_URL"})
    return DatabaseConfig(url=normalized)


_SERVER_ENV = {
    "host": "SIGNOFF_HOST",
    "port": "SIGNOFF_PORT",
    "publicUrl": "SIGNOFF_PUBLIC_URL",
    "secretKey": "SIGNOFF_SECRET_KEY",
}
_SERVER_KEYS = (*_SERVER_ENV, "workers", "leaseSeconds", "pollSeconds", "allowInternalTargets")


def default_public_url(host: str, port: int) -> str:
    """``server.publicUrl`` when it is not set: this host and port, a wildcard address shown
    as loopback (a browser on this machine can open it)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}"


def parse_server(raw: Any, env: Mapping[str, str], problems: list[str]) -> ServerConfig:
    local: list[str] = []
    s = Section(_overlay(raw, env, _SERVER_ENV), "server", local, _SERVER_KEYS)
    host = s.text("host", "127.0.0.1", required=s.has("host")) or "127.0.0.1"
    port = s.integer("port", 8080, 1, 65535) or 8080
    derived = default_public_url(host, port)
    public_url = s.url("publicUrl", derived) or derived
    config = ServerConfig(
        host=host,
        port=port,
        public_url=public_url.rstrip("/"),
        public_url_set=s.has("publicUrl"),
        secret_key=s.text("secretKey", "") or "",
        workers=s.integer("workers", 64, 1, 256) or 64,
        lease_seconds=s.integer("leaseSeconds", 30, 5, 3600) or 30,
        poll_seconds=s.number("pollSeconds", 2.0, 0.05, 60.0) or 2.0,
        allow_internal_targets=_networks(s, "allowInternalTargets"),
    )
    _blame_env(local, problems, "server", env, _SERVER_ENV)
    return config


def _networks(s: Section, key: str) -> tuple[IPNetwork, ...]:
    networks: list[IPNetwork] = []
    for i, value in enumerate(s.texts(key)):
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            s.problems.append(
                f"{join(s.at(key), i)}: must be an IP network like 10.1.2.0/24, got {value!r}"
            )
    return tuple(networks)


def _overlay(raw: Any, env: Mapping[str, str], names: Mapping[str, str]) -> Any:
    """``raw`` with the set (non-empty) environment overrides in place of its keys."""
    overrides = {key: Substituted(env[var]) for key, var in names.items() if env.get(var)}
    if not overrides or not isinstance(raw, dict | None):
        return raw
    return {**(raw or {}), **overrides}


def _blame_env(
    local: list[str],
    problems: list[str],
    path: str,
    env: Mapping[str, str],
    names: Mapping[str, str],
) -> None:
    """Move ``local`` into ``problems``, naming the variable a bad overridden value came from."""
    for line in local:
        key_path = line.partition(":")[0]
        for key, var in names.items():
            if key_path == f"{path}.{key}" and env.get(var):
                line = f"{line} (from {var})"
        problems.append(line)


def parse_people(
    raw: Any, path: str, problems: list[str], name_re: re.Pattern[str], ids: Sequence[PersonId]
) -> Mapping[str, Person]:
    """``people:``; ``ids``: the fields naming a person's id on a channel, in order."""
    people: dict[str, Person] = {}
    owner_of: dict[tuple[str, str], str] = {}
    section = Section(raw, path, problems)
    for name, value in section.data.items():
        s = Section(value, section.at(name), problems, ("email", "tz", *(i.channel for i in ids)))
        if not name_re.match(name):
            problems.append(f"{s.path}: invalid person name (lowercase letters, digits, _ . -)")
        email = s.text("email") or None
        if email is not None and not re.match(r"[^@\s]+@[^@\s]+\Z", email):
            s.error("email", f"not an email address: {json.dumps(email)}")
        found: dict[str, str] = {}
        for spec in ids:
            value_id = s.text(spec.channel) or None
            if value_id is None:
                continue
            if spec.pattern is not None and not spec.pattern.match(value_id):
                s.error(spec.channel, spec.bad.format(value=json.dumps(value_id)))
            found[spec.channel] = value_id
        for key, value_id in found.items():
            other = owner_of.setdefault((key, value_id), name)
            if other != name:
                s.error(key, f"same {key} id as {path}.{other}.{key}")
        people[name] = Person(
            name=name, email=email, ids=MappingProxyType(found), tz=_time_zone(s, "tz")
        )
    return MappingProxyType(people)


def _time_zone(s: Section, key: str) -> str | None:
    """An IANA time zone name (``Europe/Berlin``) that this machine's zoneinfo knows."""
    name = s.text(key) or None
    if name is None:
        return None
    try:
        if len(name) > 64:
            raise ValueError(name)
        ZoneInfo(name)
    except (ValueError, ZoneInfoNotFoundError):
        s.error(key, f"not a time zone name like Europe/Berlin: {json.dumps(name[:64])}")
        return None
    return name


def parse_llm(raw: Any, path: str, problems: list[str]) -> LlmConfig:
    s = Section(raw, path, problems, ("baseUrl", "model", "apiKey", "timeoutSeconds", "maxRetries"))
    return LlmConfig(
        base_url=s.url("baseUrl", "") or "",
        model=s.text("model", "") or "",
        api_key=s.text("apiKey", "") or "",
        timeout_seconds=s.number("timeoutSeconds", 20.0, 0.1, 600.0) or 20.0,
        max_retries=s.integer("maxRetries", 2, 0, 10) or 0,
    )


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` can be reached from this machine only."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def parse_gate(raw: Any, path: str, problems: list[str]) -> GateConfig:
    keys = ("enabled", "threshold", "estimator", "samples", "calibrate", "channels", "approvers")
    s = Section(raw, path, problems, keys)
    estimator = s.choice("estimator", None, [e.value for e in Estimator])
    return GateConfig(
        enabled=s.flag("enabled", None),
        threshold=s.number("threshold", None, 0.0, 1.0),
        estimator=Estimator(estimator) if estimator else None,
        samples=s.integer("samples", None, None),
        calibrate=s.flag("calibrate", None),
        channels=tuple(dict.fromkeys(s.texts("channels"))),
        approvers=tuple(dict.fromkeys(s.texts("approvers"))),
    )


def parse_approvals(raw: Any, path: str, problems: list[str]) -> ApprovalsConfig:
    s = Section(raw, path, problems, ("ttl",))
    value = s.raw("ttl")
    if value is None:
        return ApprovalsConfig()
    seconds: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and (m := _DURATION_RE.match(value.strip())):
        seconds = int(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    if seconds is None or seconds <= 0:
        s.error(
            "ttl",
            f'must be a positive duration like 3600, "90s", "30m", "24h" or "7d", '
            f"got {type_name(value)}",
        )
        return ApprovalsConfig()
    return ApprovalsConfig(ttl_seconds=seconds)


def parse_policy(raw: Any, path: str, problems: list[str]) -> PolicyConfig:
    s = Section(raw, path, problems, ("defaultMode",))
    mode = s.choice("defaultMode", PolicyMode.ALLOW_ALL, [m.value for m in PolicyMode])
    return PolicyConfig(default_mode=PolicyMode(mode or PolicyMode.ALLOW_ALL))
