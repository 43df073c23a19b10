"""Each channel's own section of ``app.yaml`` (``slack:``, ``teams:``, ``webhooks:``, and
``smtp:`` in ``.smtp``): its record, its parser and what ``signoff check`` and the load warnings
say of it, and the table that lists them, ``CHANNEL_SECTIONS``; the rest of the configuration
reads them through ``AppConfig.channel_sections``."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engine.config.channels.smtp import parse_smtp, smtp_warnings
from engine.config.sections import ServerConfig, is_loopback
from engine.config.values import NAME_RE, Section

__all__ = [
    "CHANNEL_SECTIONS",
    "SLACK_TEAM",
    "ChannelSection",
    "SlackConfig",
    "TeamsConfig",
    "WebhookConfig",
    "WebhooksConfig",
    "bind_problems",
    "parse_slack",
    "parse_teams",
    "parse_webhooks",
    "slack_state",
    "slack_warnings",
    "teams_bind_problem",
    "teams_state",
    "teams_warnings",
]


@dataclass(frozen=True, slots=True)
class SlackConfig:
    """Slack in one of two modes. One workspace: ``botToken``. Installed like a distributed app
    in one or many workspaces (OAuth, ``/slack/install``): ``clientId`` + ``clientSecret``,
    with the bot tokens kept in the database, encrypted with a key from ``server.secretKey``.
    ``scopes`` (OAuth) defaults to the manifest's bot scopes. ``teams``, when set, are the only
    workspaces that may install it or be answered.

    Over HTTP Slack signs each request with the signing secret. In Socket Mode
    (``socket_mode``, one workspace: ``botToken``) Signoff opens a WebSocket to Slack with the
    app-level token (``app_token``, ``xapp-...``) and takes everything through it: no HTTP
    endpoint is mounted, so the signing secret is not needed."""

    bot_token: str = ""
    signing_secret: str = ""
    api_base_url: str = "https://slack.com/api/"  # always ends with "/"
    socket_mode: bool = False
    app_token: str = ""
    client_id: str = ""
    client_secret: str = ""
    scopes: tuple[str, ...] = ()  # empty: the bot scopes of bot/manifests/slack.yaml
    workspaces: tuple[str, ...] = ()  # empty: any workspace

    def allows(self, team: str | None) -> bool:
        """Whether workspace ``team`` may install Signoff and be answered (``workspaces``)."""
        return not self.workspaces or team in self.workspaces

    @property
    def oauth(self) -> bool:
        """Installed through OAuth: tokens per workspace, from the database."""
        return bool(self.client_id and self.client_secret and not self.bot_token)

    @property
    def enabled(self) -> bool:
        if self.socket_mode:
            return bool(self.bot_token and self.app_token)
        return bool(self.signing_secret and (self.bot_token or self.oauth))


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
class WebhookConfig:
    name: str
    url: str
    secret: str = ""  # signs the payload when set


@dataclass(frozen=True, slots=True)
class WebhooksConfig:
    """The ``webhooks:`` section: the webhooks by name (the targets of ``webhook:<name>``)."""

    hooks: Mapping[str, WebhookConfig]


APP_TOKEN_PREFIX = "xapp-"  # Slack's app-level tokens, the only ones apps.connections.open takes
SLACK_TEAM = r"T[A-Z0-9]{2,}"  # a workspace id (``slack.workspaces``, addresses and ids)


def parse_slack(raw: Any, path: str, problems: list[str], server: ServerConfig) -> SlackConfig:
    keys = (
        "botToken",
        "signingSecret",
        "apiBaseUrl",
        "socketMode",
        "appToken",
        "clientId",
        "clientSecret",
        "scopes",
        "workspaces",
    )
    s = Section(raw, path, problems, keys)
    api = s.url("apiBaseUrl", "https://slack.com/api/") or "https://slack.com/api/"
    socket_mode = bool(s.flag("socketMode", False))
    app_token = s.text("appToken", "") or ""
    bot_token = s.text("botToken", "") or ""
    client_id = s.text("clientId", "") or ""
    client_secret = s.text("clientSecret", "") or ""
    scopes = s.texts("scopes")
    for i, scope in enumerate(scopes):
        if not re.fullmatch(r"[a-z_.]+(:[a-z_.]+)*", scope):
            problems.append(f"{s.at('scopes')}[{i}]: not a Slack scope like chat:write")
    workspaces = s.texts("workspaces")
    for i, team in enumerate(workspaces):
        if not re.fullmatch(SLACK_TEAM, team):
            problems.append(f"{s.at('workspaces')}[{i}]: not a Slack workspace id like T0123ABCD")
    if app_token and not app_token.startswith(APP_TOKEN_PREFIX):
        s.error(
            "appToken",
            "must be an app-level token (xapp-..., made under Basic Information -> App-Level "
            "Tokens with the connections:write scope), not a bot or user token",
        )
        app_token = ""
    elif socket_mode and not app_token:
        s.error(
            "appToken",
            "is required with slack.socketMode: true (an app-level token, xapp-..., with the "
            "connections:write scope; the signing secret is not needed then)",
        )
    if socket_mode and client_id:
        s.error(
            "socketMode",
            "serves the one workspace of slack.botToken; installing through OAuth "
            "(slack.clientId) needs Signoff's public HTTPS URL for /slack/install: use one or "
            "the other",
        )
    elif bot_token and client_id:
        s.error(
            "clientId",
            "set together with slack.botToken: use botToken for one workspace, or clientId "
            "and clientSecret to install through OAuth (/slack/install), not both",
        )
    elif bool(client_id) != bool(client_secret):
        missing = "clientSecret" if client_id else "clientId"
        s.error(missing, "required for the OAuth install (clientId and clientSecret go together)")
    elif client_id and not server.secret_key:
        # The bot tokens of installed workspaces are kept encrypted with a key derived from it.
        problems.append(
            "server.secretKey: required when Slack is installed through OAuth (slack.clientId): "
            "the workspaces' bot tokens are stored encrypted with a key derived from it"
        )
    return SlackConfig(
        bot_token=bot_token,
        signing_secret=s.text("signingSecret", "") or "",
        api_base_url=api if api.endswith("/") else api + "/",
        socket_mode=socket_mode,
        app_token=app_token,
        client_id=client_id,
        client_secret=client_secret,
        scopes=scopes,
        workspaces=workspaces,
    )


def parse_teams(raw: Any, path: str, problems: list[str], server: ServerConfig) -> TeamsConfig:
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
    if insecure and not is_loopback(server.host):
        # Unsigned activities act as whoever they name: only this machine may send them.
        s.error(
            "insecureLocalDev",
            f"accepts unsigned Teams requests, so it needs server.host on loopback "
            f"(127.0.0.1, ::1 or localhost), got {server.host!r}",
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


def parse_webhooks(
    raw: Any, path: str, problems: list[str], server: ServerConfig
) -> WebhooksConfig:
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
    return WebhooksConfig(MappingProxyType(webhooks))


def slack_state(config: SlackConfig) -> str:
    token, secret = config.bot_token, config.signing_secret
    if not token and not secret and not config.socket_mode and not config.client_id:
        return "unset"
    problems = []
    if config.oauth:
        if len(secret) < 16:
            return "invalid: signingSecret is too short"
        return "set (OAuth: workspaces install at /slack/install)"
    if not token.startswith("xoxb-"):
        problems.append("botToken does not look like a bot token (xoxb-...)")
    if config.socket_mode:
        if not config.app_token:
            problems.append("appToken is not set (xapp-...)")
    elif len(secret) < 16:
        problems.append("signingSecret is too short")
    if problems:
        return "invalid: " + "; ".join(problems)
    return "set (Socket Mode)" if config.socket_mode else "set"


def teams_state(config: TeamsConfig) -> str:
    if not config.app_id:
        if config.insecure_local_dev:
            return "unset, insecureLocalDev ON: unsigned requests accepted (local testing only)"
        return "unset (/api/messages not mounted)"
    if not config.app_password:
        return "invalid: appId set without appPassword"
    return "set"


def slack_warnings(config: SlackConfig) -> list[str]:
    if config.socket_mode:
        if not config.bot_token:
            return [
                "slack.botToken: needed in Socket Mode too (it posts the cards); Slack is disabled"
            ]
        return []
    if config.oauth and not config.signing_secret:
        return ["slack: clientId/clientSecret need signingSecret too; Slack is disabled"]
    if not config.oauth and bool(config.bot_token) != bool(config.signing_secret):
        return ["slack: botToken and signingSecret are both needed; Slack is disabled"]
    if config.app_token:
        return ["slack.appToken: used only with slack.socketMode: true; it is ignored"]
    return []


def teams_warnings(config: TeamsConfig) -> list[str]:
    if config.app_id and not config.app_password:
        return ["teams.appPassword: empty while teams.appId is set"]
    return []


def teams_bind_problem(config: TeamsConfig, bound: str, by: str) -> str | None:
    """``teams.insecureLocalDev`` lets anyone who reaches the port act as anyone: a problem
    unless the address actually bound is loopback, whatever chose it (``by``: ``--host``,
    ``SIGNOFF_HOST``, ``server.host``; the config check sees only the last two)."""
    if not config.insecure_local_dev or is_loopback(bound):
        return None
    return (
        "teams.insecureLocalDev: accepts unsigned Teams requests, so serve must "
        f"listen on loopback only (127.0.0.1, ::1 or localhost), but {by} has it listening on "
        f"{bound}: listen on loopback, or remove teams.insecureLocalDev"
    )


@dataclass(frozen=True)
class ChannelSection:
    """A channel's own top-level section of ``app.yaml``."""

    channel: str  # the channel it configures: its key in ``AppConfig.channel_sections``
    key: str  # its YAML key
    parse: Callable[[Any, str, list[str], ServerConfig], object]  # (raw, path, problems, server)
    # The targets ``<channel>:<target>`` may name, when the section declares them; such a
    # section is read before the addresses that name them are checked.
    targets: Callable[[Any], Collection[str]] | None = None
    warnings: Callable[[Any], list[str]] = lambda _: []  # what loads but is likely a mistake
    # Why serving on the address bound (``by`` chose it) is refused, or None.
    bind_problem: Callable[[Any, str, str], str | None] | None = None


CHANNEL_SECTIONS: tuple[ChannelSection, ...] = (
    ChannelSection("webhook", "webhooks", parse_webhooks, targets=lambda s: s.hooks),
    ChannelSection("slack", "slack", parse_slack, warnings=slack_warnings),
    ChannelSection(
        "teams", "teams", parse_teams, warnings=teams_warnings, bind_problem=teams_bind_problem
    ),
    ChannelSection("email", "smtp", parse_smtp, warnings=smtp_warnings),
)


def bind_problems(sections: Mapping[str, object], bound: str, by: str) -> list[str]:
    """Why the channels' ``sections`` refuse serving on ``bound`` (``by`` chose it)."""
    return [
        problem
        for each in CHANNEL_SECTIONS
        if each.bind_problem is not None and each.channel in sections
        if (problem := each.bind_problem(sections[each.channel], bound, by)) is not None
    ]
