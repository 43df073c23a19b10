"""Installing Signoff in a Slack workspace: slack-bolt's OAuth flow, on Signoff's database.

    GET /slack/install         an "Add to Slack" page; sets the state cookie
    GET /slack/oauth_redirect  Slack sends the installer back here with a code and the state

bolt's ``AsyncOAuthFlow`` does the work: it issues a one-use ``state`` (kept in
``slack_oauth_states`` by slack_sdk's ``AsyncSQLAlchemyOAuthStateStore``) and binds it to the
installer's browser with a ``Secure``, ``HttpOnly`` cookie; on the way back it refuses a state
that is missing, foreign to this browser, expired or used before, exchanges the code through
``oauth.v2.access`` (with the client secret) and saves the installation in the sealed store
(``bot/slack/installs.py``). The pages it answers with are Signoff's: what was installed and
where, or what went wrong, in plain words.
"""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from slack_bolt.error import BoltError
from slack_bolt.oauth.async_callback_options import (
    AsyncCallbackOptions,
    AsyncFailureArgs,
    AsyncSuccessArgs,
)
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.oauth.installation_store import Installation
from slack_sdk.oauth.sqlalchemy_utils import normalize_datetime_for_db
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.installs import SealedInstallationStore

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
STATE_SECONDS = 600  # an install link is good for 10 minutes
MANIFEST = Path(__file__).resolve().parents[1] / "manifests" / "slack.yaml"

# What went wrong, by bolt's failure reason, as the installer reads it.
FAILURES: dict[str, str] = {
    "access_denied": "The installation was cancelled in Slack, so nothing was installed.",
    "invalid_browser": (
        "This install link was not started in this browser (or its cookie has expired), so "
        "nothing was installed. Start again from the install page, in the same browser."
    ),
    "invalid_state": (
        "This install link has already been used or has expired, so nothing was installed. "
        "Start again from the install page."
    ),
    "missing_code": "Slack sent no installation code, so nothing was installed. Start again.",
    "invalid_code": (
        "Slack did not accept the installation (the code was refused or has expired), so "
        "nothing was installed. Start again; if it keeps failing, check slack.clientId and "
        "slack.clientSecret."
    ),
    "not_allowed": (
        "This Slack workspace is not one Signoff may be installed in (slack.workspaces), so "
        "nothing was installed."
    ),
    "storage_error": (
        "Slack approved the installation but Signoff could not save it, so it is not "
        "installed. Try again in a moment."
    ),
}
UNKNOWN_FAILURE = "Slack did not complete the installation ({reason}), so nothing was installed."


def manifest_scopes() -> tuple[str, ...]:
    """The bot scopes of ``bot/manifests/slack.yaml``: what an install asks for by default."""
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return tuple(manifest["oauth_config"]["scopes"]["bot"])


class _OAuthClient(AsyncWebClient):
    """The client of the code exchange. slack_sdk sends the app's credentials through aiohttp's
    ``BasicAuth``, which aiohttp 3.14 deprecates (a warning on every install): the same
    ``Authorization: Basic`` header, built here."""

    async def oauth_v2_access(
        self,
        *,
        client_id: str,
        client_secret: str,
        code: str | None = None,
        redirect_uri: str | None = None,
        **kwargs: Any,
    ) -> Any:
        credentials = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        data = {"code": code, "redirect_uri": redirect_uri, **kwargs}
        return await self.api_call(
            "oauth.v2.access",
            data={k: v for k, v in data.items() if v is not None},
            headers={"Authorization": f"Basic {credentials}"},
        )


class SweptStateStore(AsyncSQLAlchemyOAuthStateStore):
    """slack_sdk's state store, which deletes a state only when it is used: each new state
    first sweeps the expired ones, so anyone loading the install page fills the table with
    at most the last ``STATE_SECONDS``' states."""

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        now = normalize_datetime_for_db(datetime.now(tz=UTC))
        expired = self.oauth_states.delete().where(self.oauth_states.c.expire_at <= now)
        async with self.engine.begin() as conn:
            await conn.execute(expired)
        state: str = await super().async_issue(*args, **kwargs)
        return state


class NotAllowed(BoltError):
    """An install into a workspace not in ``slack.workspaces``: not saved."""


class SignoffOAuthFlow(AsyncOAuthFlow):
    """bolt's flow with Signoff's install page (bolt's own loads its button image from Slack's
    site, which the console's Content-Security-Policy, images from this server only, blocks),
    and ``slack.workspaces`` checked before an installation is saved."""

    workspaces: tuple[str, ...] = ()

    async def store_installation(
        self, request: AsyncBoltRequest, installation: Installation
    ) -> None:
        if self.workspaces and installation.team_id not in self.workspaces:
            raise NotAllowed(f"Slack workspace {installation.team_id} is not in slack.workspaces")
        await super().store_installation(request, installation)

    async def build_install_page_html(self, url: str, request: AsyncBoltRequest) -> str:
        body = (
            "<p>Signoff posts approval cards into Slack channels and takes the decisions "
            "made with their buttons. Installing it asks Slack for these permissions: "
            f"{_e(', '.join(self.settings.scopes or ()))}.</p>"
            f'<p><a href="{_e(url)}"><b>Add to Slack</b></a></p>'
            "<p>Slack will ask which workspace, then send you back here.</p>"
        )
        return _html("Install Signoff in Slack", body)


def oauth_flow(
    client: AsyncWebClient,
    client_id: str,
    client_secret: str,
    scopes: tuple[str, ...],
    workspaces: tuple[str, ...],
    public_url: str,
    store: SealedInstallationStore,
) -> AsyncOAuthFlow:
    """bolt's OAuth flow on ``client`` (``slack.apiBaseUrl``): Signoff's stores, paths,
    redirect URL and pages."""
    exchange = _OAuthClient(base_url=client.base_url, retry_handlers=[])
    exchange.proxy = client.proxy
    flow = SignoffOAuthFlow(
        client=exchange,
        logger=store.logger,
        settings=_settings(client_id, client_secret, scopes, public_url, store),
    )
    flow.workspaces = workspaces
    return flow


def _settings(
    client_id: str,
    client_secret: str,
    scopes: tuple[str, ...],
    public_url: str,
    store: SealedInstallationStore,
) -> AsyncOAuthSettings:
    return AsyncOAuthSettings(
        client_id=client_id,
        client_secret=client_secret,
        scopes=list(scopes or manifest_scopes()),
        redirect_uri=public_url + REDIRECT_PATH,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        installation_store=store,
        installation_store_bot_only=True,
        state_store=SweptStateStore(
            expiration_seconds=STATE_SECONDS, engine=store.engine, logger=store.logger
        ),
        state_expiration_seconds=STATE_SECONDS,
        callback_options=AsyncCallbackOptions(success=_installed, failure=_failed),
        logger=store.logger,
    )


async def _installed(args: AsyncSuccessArgs) -> BoltResponse:
    found = args.installation
    name = found.team_name or found.team_id or "your workspace"
    team = found.team_id or "?"
    body = (
        f"<p>Signoff is installed in the Slack workspace <b>{_e(name)}</b> ({_e(team)}).</p>"
        "<p>Invite it to a channel (<code>/invite @Signoff</code>) and name the channel in "
        f"<code>channels:</code> as <code>slack:{_e(team)}/C0123ABCD</code> (or "
        "<code>slack:C0123ABCD</code> while this is the only workspace). People of this "
        f"workspace are mapped in <code>people:</code> as <code>slack: {_e(team)}/U0123ABCD"
        "</code>.</p>"
    )
    return _page(200, "Signoff is installed", body, args)


async def _failed(args: AsyncFailureArgs) -> BoltResponse:
    if isinstance(args.error, NotAllowed):
        args.reason, args.suggested_status_code = "not_allowed", 403
    reason = FAILURES.get(args.reason) or UNKNOWN_FAILURE.format(reason=args.reason)
    body = f'<p>{_e(reason)}</p><p><a href="{_e(INSTALL_PATH)}">Install page</a></p>'
    return _page(args.suggested_status_code, "Signoff was not installed", body, args)


def _page(status: int, title: str, body: str, args: Any) -> BoltResponse:
    # The state cookie has done its work: delete it either way.
    cookie = args.settings.state_utils.build_set_cookie_for_deletion()
    return BoltResponse(
        status=status,
        body=_html(title, body),
        headers={"Content-Type": "text/html; charset=utf-8", "Set-Cookie": cookie},
    )


def _html(title: str, body: str) -> str:
    """A page in the console's look (its stylesheet, served by the console)."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)} · Signoff</title>"
        '<link rel="stylesheet" href="/static/signoff.css">'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml"></head><body>'
        '<header class="top"><span class="brand">Signoff</span></header>'
        f"<main><h1>{_e(title)}</h1>{body}</main></body></html>"
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)
