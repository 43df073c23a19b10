"""The small sections of ``app.yaml``: database, server, people, llm, slack, teams, gate,
approvals, policy and webhooks. Each ``parse_*`` reads one section, records every problem at its
YAML path and returns a frozen value (defaults where a value was bad, so reading continues)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engine.config.values import NAME_RE, Section, Substituted, join, type_name
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
_SLACK_USER_RE = re.compile(r"[UW][A-Z0-9]{2,}\Z")
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
    secret_key: str = ""  # signs approval links
    workers: int = 8  # concurrent runs per process
    lease_seconds: int = 30
    poll_seconds: float = 2.0
    # Networks that URLs arriving through the API (callbackUrl) may reach though internal.
    allow_internal_targets: tuple[IPNetwork, ...] = ()


@dataclass(frozen=True, slots=True)
class Person:
    """One identity across platforms."""

    name: str
    email: str | None = None
    slack: str | None = None  # Slack user id, U... or W...
    teams: str | None = None  # Azure AD object id


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
class SlackConfig:
    bot_token: str = ""
    signing_secret: str = ""
    api_base_url: str = "https://slack.com/api/"  # always ends with "/"

    @property
    def enabled(self) -> bool:
        return bool(self.bot_token and self.signing_secret)


@dataclass(frozen=True, slots=True)
class TeamsConfig:
    """With an app id the Teams endpoint checks every request's Bot Framework token. Without
    one it is not mounted at all, unless ``insecureLocalDev`` (loopback servers only) asks
    for it to accept unsigned requests, as the Agents Playground sends them. ``tenant_id``
    makes the app single-tenant (with an app id) and refuses other tenants' activities."""

    app_id: str = ""
    app_password: str = ""
    tenant_id: str = ""
    open_id_metadata_url: str | None = None
    token_issuer: str | None = None
    insecure_local_dev: bool = False

    @property
    def authenticated(self) -> bool:
        return bool(self.app_id)

    @property
    def enabled(self) -> bool:
        """Whether ``/api/messages`` is mounted: an app id, or the development switch."""
        return self.authenticated or self.insecure_local_dev


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


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    name: str
    url: str
    secret: str = ""  # signs the payload when set


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


def parse_server(raw: Any, env: Mapping[str, str], problems: list[str]) -> ServerConfig:
    local: list[str] = []
    s = Section(_overlay(raw, env, _SERVER_ENV), "server", local, _SERVER_KEYS)
    host = s.text("host", "127.0.0.1", required=s.has("host")) or "127.0.0.1"
    port = s.integer("port", 8080, 1, 65535) or 8080
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    public_url = s.url("publicUrl", f"http://{shown}:{port}") or f"http://{shown}:{port}"
    config = ServerConfig(
        host=host,
        port=port,
        public_url=public_url.rstrip("/"),
        secret_key=s.text("secretKey", "") or "",
        workers=s.integer("workers", 8, 1, 256) or 8,
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
    raw: Any, path: str, problems: list[str], name_re: re.Pattern[str]
) -> Mapping[str, Person]:
    people: dict[str, Person] = {}
    owner_of: dict[tuple[str, str], str] = {}
    section = Section(raw, path, problems)
    for name, value in section.data.items():
        s = Section(value, section.at(name), problems, ("email", "slack", "teams"))
        if not name_re.match(name):
            problems.append(f"{s.path}: invalid person name (lowercase letters, digits, _ . -)")
        email = s.text("email") or None
        if email is not None and not re.match(r"[^@\s]+@[^@\s]+\Z", email):
            s.error("email", f"not an email address: {json.dumps(email)}")
        slack = s.text("slack") or None
        if slack is not None and not _SLACK_USER_RE.match(slack):
            s.error("slack", f"must be a Slack user id like U012ABCDEF, got {json.dumps(slack)}")
        teams = s.text("teams") or None
        for key, value_id in (("slack", slack), ("teams", teams)):
            if value_id is None:
                continue
            other = owner_of.setdefault((key, value_id), name)
            if other != name:
                s.error(key, f"same {key} id as {path}.{other}.{key}")
        people[name] = Person(name=name, email=email, slack=slack, teams=teams)
    return MappingProxyType(people)


def parse_llm(raw: Any, path: str, problems: list[str]) -> LlmConfig:
    s = Section(raw, path, problems, ("baseUrl", "model", "apiKey", "timeoutSeconds", "maxRetries"))
    return LlmConfig(
        base_url=s.url("baseUrl", "") or "",
        model=s.text("model", "") or "",
        api_key=s.text("apiKey", "") or "",
        timeout_seconds=s.number("timeoutSeconds", 20.0, 0.1, 600.0) or 20.0,
        max_retries=s.integer("maxRetries", 2, 0, 10) or 0,
    )


def parse_slack(raw: Any, path: str, problems: list[str]) -> SlackConfig:
    s = Section(raw, path, problems, ("botToken", "signingSecret", "apiBaseUrl"))
    api = s.url("apiBaseUrl", "https://slack.com/api/") or "https://slack.com/api/"
    return SlackConfig(
        bot_token=s.text("botToken", "") or "",
        signing_secret=s.text("signingSecret", "") or "",
        api_base_url=api if api.endswith("/") else api + "/",
    )


def parse_teams(raw: Any, path: str, problems: list[str], server_host: str) -> TeamsConfig:
    keys = (
        "appId",
        "appPassword",
        "tenantId",
        "openIdMetadataUrl",
        "tokenIssuer",
        "insecureLocalDev",
    )
    s = Section(raw, path, problems, keys)
    insecure = bool(s.flag("insecureLocalDev", False))
    if insecure and not is_loopback(server_host):
        # Unsigned activities act as whoever they name: only this machine may send them.
        s.error(
            "insecureLocalDev",
            f"accepts unsigned Teams requests, so it needs server.host on loopback "
            f"(127.0.0.1, ::1 or localhost), got {server_host!r}",
        )
        insecure = False
    app_id = s.text("appId", "") or ""
    app_password = s.text("appPassword", "") or ""
    tenant_id = s.text("tenantId", "") or ""
    if app_id and tenant_id and not app_password:
        # The Bot Framework SDK would raise at start: a single-tenant app signs in with it.
        s.error("appPassword", "required for a single-tenant app (teams.tenantId is set)")
    return TeamsConfig(
        app_id=app_id,
        app_password=app_password,
        tenant_id=tenant_id,
        open_id_metadata_url=s.url("openIdMetadataUrl"),
        token_issuer=s.text("tokenIssuer") or None,
        insecure_local_dev=insecure,
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


def parse_webhooks(raw: Any, path: str, problems: list[str]) -> Mapping[str, WebhookConfig]:
    webhooks: dict[str, WebhookConfig] = {}
    section = Section(raw, path, problems)
    for name, value in section.data.items():
        s = Section(value, section.at(name), problems, ("url", "secret"))
        if not NAME_RE.match(name):
            problems.append(f"{s.path}: invalid webhook name (letters, digits, _ . -)")
        if value is None:
            problems.append(f"{s.path}: must be a mapping with url, got null")
        url = s.url("url", required=True)
        if url is not None:
            webhooks[name] = WebhookConfig(name=name, url=url, secret=s.text("secret", "") or "")
    return MappingProxyType(webhooks)
