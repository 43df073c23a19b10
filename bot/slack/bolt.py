"""The slack-bolt ``AsyncApp`` behind ``POST /slack/events``.

Choices, and why:

* ``process_before_response=True``: a listener runs to its end before bolt answers, so a
  decision is committed before Slack sees the acknowledgement, and bolt's default mode (the
  listener in an unreferenced task, the answer polled for every 10 ms) stays out of the path.
  Slow work after the acknowledgement goes to ``Background`` tasks or the outbox.
* Signatures are bolt's own ``RequestVerification`` with the signing secret: a bad signature, or
  a timestamp more than 5 minutes away, is answered 401 before any listener runs. Within
  those 5 minutes the same signed bytes act once (``ActOnce``, ``bot/slack/once.py``).
* ``authorize`` returns the configured bot token without a network call: bolt's single-team mode
  would call ``auth.test`` on the first request and turn a Slack outage into failed clicks.
* Signed requests no listener takes (an ``app_home_opened`` or ``message`` event, a click on an
  ``action_id`` we do not know, a ``view_closed``) are acknowledged with an empty 200, not
  bolt's 404: Slack retries a refused event and turns event delivery off for an app that keeps
  failing. This is bolt's ``raise_error_for_unhandled_request`` with an error handler that
  answers 200 (``acknowledge_unhandled``), so it applies only after every listener declined:
  whatever listener is added, in whatever order, a real handler always wins over it. An
  unsigned request never gets this far (401), and over Socket Mode bolt leaves an envelope it
  answered with 404 unacknowledged, so Slack would resend it, the same way.
* Installed through OAuth (``slack.clientId``), it is ``InstalledAuthorize``: the workspace's
  bot from the sealed installation store, still without ``auth.test``; a workspace not (or no
  longer) installed gets bolt's refusal and no listener runs. bolt's OAuth flow
  (``bot/slack/oauth.py``) serves the install pages, and its token revocation listeners
  delete a workspace's installation on ``app_uninstalled`` and its bot token on
  ``tokens_revoked``.
* The Web API client bolt keeps is never used for our calls; ``SlackApi`` makes them all.
  bolt also reads ``SLACK_BOT_TOKEN`` from the environment on its own, and with a ``client``
  given it then warns at every start that the token will be unused: that one line is
  filtered out (``_NoTokenWarning``), since giving the client is the point.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.actions import Interactions
from bot.slack.api import SlackApi
from bot.slack.background import Background
from bot.slack.commands import Commands
from bot.slack.home import HomeTabs
from bot.slack.installs import InstalledAuthorize
from bot.slack.oauth import oauth_flow
from bot.slack.once import ActOnce
from bot.slack.people import SlackPeople
from engine.assembly import Engine

log = logging.getLogger("bot.slack")


class _NoTokenWarning(logging.Filter):
    """Drops bolt's "As you gave `client` as well, `token` will be unused." (see above)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


log.addFilter(_NoTokenWarning())


async def _token_gone(event: dict[str, Any]) -> None:
    log.error(
        "Slack sent %s: slack.botToken no longer works; install the app again and set the new "
        "token",
        event.get("type"),
    )


NOT_INSTALLED = (
    "Signoff is not installed in this Slack workspace (or was removed from it), so nothing "
    "happened. An admin can install it again."
)


def build_bolt_app(
    engine: Engine,
    api: SlackApi,
    background: Background,
    people: SlackPeople,
    home: HomeTabs,
) -> AsyncApp:
    config = engine.config.slack

    async def authorize(
        enterprise_id: str | None, team_id: str | None, user_id: str | None
    ) -> AuthorizeResult | None:
        if not config.allows(team_id):
            log.warning("a signed Slack request from %s, which is not in slack.workspaces", team_id)
            return None
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
            bot_token=config.bot_token,
        )

    client = AsyncWebClient(base_url=config.api_base_url, retry_handlers=[])
    # slack_sdk took HTTPS_PROXY from the environment, NO_PROXY unread: curl's rules instead.
    client.proxy = engine.config.proxies.proxy_for(config.api_base_url)
    store = api.workspaces.store if api.workspaces is not None else None
    # bolt takes an ``AsyncAuthorize`` instance as it is; its annotation names only functions.
    auth: dict[str, Any] = (
        {"authorize": authorize}  # None: not authorized
        if store is None
        else {
            "authorize": InstalledAuthorize(store, config.allows),
            "oauth_flow": oauth_flow(
                client,
                config.client_id,
                config.client_secret,
                config.scopes,
                config.workspaces,
                engine.config.server.public_url,
                store,
            ),
        }
    )
    app = AsyncApp(
        name="signoff",
        logger=log,
        signing_secret=config.signing_secret,
        user_facing_authorize_error_message=NOT_INSTALLED,
        client=client,
        process_before_response=True,
        raise_error_for_unhandled_request=True,
        **auth,
    )
    if store is None:
        # The manifest subscribes to these for OAuth installs; here they leave a log line.
        app.event("app_uninstalled")(_token_gone)
        app.event("tokens_revoked")(_token_gone)
    else:
        app.enable_token_revocation_listeners()
    app.error(acknowledge_unhandled)
    app.use(ActOnce(engine.replays))  # after bolt's verification, before any listener
    Interactions(engine, api, background, people, home).register(app)
    Commands(engine, api, background, people).register(app)
    home.register(app)
    return app


async def acknowledge_unhandled(error: Exception, body: object) -> BoltResponse | None:
    """bolt's error handler: a signed request no listener took is acknowledged (200, nothing
    done); a listener's or middleware's failure is logged, as bolt's default handlers do, and
    stays 500."""
    if isinstance(error, BoltUnhandledRequestError):
        log.debug("acknowledged a Slack request Signoff does not handle: %s", _kind(body))
        return BoltResponse(status=200, body="")
    log.exception("handling a Slack request failed: %s", error, exc_info=error)
    return None


def _kind(body: object) -> str:
    """What the request was, for the log: its type and, for an event, the event's type."""
    if not isinstance(body, dict):
        return "?"
    event = body.get("event")
    inner = event.get("type") if isinstance(event, dict) else None
    return str(body.get("type") or body.get("command") or "?") + (f"/{inner}" if inner else "")
