"""Slack installed in one or many workspaces: whose bot token speaks for which workspace.

Two modes (``SlackConfig``): one workspace with ``slack.botToken``, or OAuth installs
(``slack.clientId``), where ``/slack/install`` adds a workspace and its bot token is kept in
Signoff's own database through slack_sdk's ``AsyncSQLAlchemyInstallationStore`` (tables made by
migration 0005, never by the store). ``SealedInstallationStore`` is that store with every token
sealed on the way in and opened on the way out (``bot/slack/sealed.py``); the rest of Signoff
asks ``Workspaces``:

* ``token_for(team)``: the bot token to call Slack with for a message in workspace ``team``
  (None: the default workspace, below); ``NotInstalled`` when there is none;
* ``person(team, user)``: who a Slack user of a workspace is in ``people:``.

The default workspace. With a bot token it is the token's. With OAuth it is the only installed
workspace, and there is none while two or more are installed: an address ``slack:C0456`` and a
person's ``slack: U012ABCDEF`` then name nothing, and ``slack:T0123/C0456`` /
``slack: T0123/U012ABCDEF`` must say which workspace. So a click from user U1 of workspace T1 is
never taken as the person mapped to U1 of workspace T2.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.async_authorize import AsyncAuthorize
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.sqlalchemy import (
    AsyncSQLAlchemyInstallationStore,
    SQLAlchemyInstallationStore,
)

from bot.slack.sealed import PREFIX, TokenSeal, Unsealed
from engine.config import AppConfig
from engine.config.sections import Person

log = logging.getLogger(__name__)

NOT_INSTALLED = "not_installed"  # the ``error`` of ``NotInstalled``, as Slack's errors read
_BOT_TOKENS = ("bot_token", "bot_refresh_token")
_USER_TOKENS = ("user_token", "user_refresh_token")


class NotInstalled(SlackApiError):
    """No bot token for the workspace a call is for. A ``SlackApiError`` so that every caller's
    handling of a refused call applies; ``reason`` says what happened in plain words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, {"ok": False, "error": NOT_INSTALLED})  # type: ignore[no-untyped-call]
        self.reason = reason


def workspace_key(enterprise_id: str | None, team_id: str | None) -> str:
    """What a sealed token is bound to (its associated data)."""
    return f"{enterprise_id or '-'}:{team_id or '-'}"


def split_target(target: str) -> tuple[str | None, str]:
    """``T0123/C0456`` -> ("T0123", "C0456"); ``C0456`` -> (None, "C0456"). The same for users."""
    team, _, rest = target.rpartition("/")
    return team or None, rest


class SealedInstallationStore(AsyncSQLAlchemyInstallationStore):
    """slack_sdk's store on Signoff's database, tokens sealed at rest."""

    def __init__(self, client_id: str, engine: Any, seal: TokenSeal, *, reader: Any = None) -> None:
        super().__init__(client_id, engine, logger=log)
        self.seal = seal
        # Our own reads (a bot token for each Web API call) on an engine whose transactions do
        # not take SQLite's write lock (``Engine.shared_sql_engine(reads_only=True)``): on the
        # writing one every Slack call queued for that lock behind every decision's commit.
        self.reader = reader if reader is not None else engine

    def _sealed(self, entity: Any, names: tuple[str, ...]) -> Any:
        out = copy.copy(entity)
        key = workspace_key(entity.enterprise_id, entity.team_id)
        for name in names:
            value = getattr(out, name)
            # super().async_save hands its (sealed) installation on to async_save_bot: a value
            # sealed already is not sealed twice. A Slack token never starts with the prefix.
            if value is not None and not value.startswith(PREFIX):
                setattr(out, name, self.seal.seal(value, key))
        return out

    def _opened(self, entity: Any, names: tuple[str, ...]) -> Any:
        key = workspace_key(entity.enterprise_id, entity.team_id)
        for name in names:
            setattr(entity, name, self.seal.open(getattr(entity, name), key))
        return entity

    async def async_save(self, installation: Installation) -> None:
        await super().async_save(self._sealed(installation, _BOT_TOKENS + _USER_TOKENS))

    async def async_save_bot(self, bot: Bot) -> None:
        await super().async_save_bot(self._sealed(bot, _BOT_TOKENS))

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        found = await super().async_find_bot(
            enterprise_id=enterprise_id,
            team_id=team_id,
            is_enterprise_install=is_enterprise_install,
        )
        return None if found is None else self._opened(found, _BOT_TOKENS)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        found = await super().async_find_installation(
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
            is_enterprise_install=is_enterprise_install,
        )
        if found is None:
            return None
        # The bot's fields were replaced by async_find_bot's (opened) unless no bot row is left.
        sealed_bot = tuple(n for n in _BOT_TOKENS if (getattr(found, n) or "").startswith(PREFIX))
        opened: Installation = self._opened(found, sealed_bot + _USER_TOKENS)
        return opened

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """The bot row goes, and the bot's token with it from the installation rows
        (``tokens_revoked``): no revoked token is kept, even sealed."""
        await super().async_delete_bot(enterprise_id=enterprise_id, team_id=team_id)
        c = self.installations.c
        clear = (
            self.installations.update()
            .where(c.client_id == self.client_id)
            .where(c.enterprise_id == enterprise_id)
            .where(c.team_id == team_id)
            .values(bot_token=None, bot_refresh_token=None)
        )
        async with self.engine.begin() as conn:
            await conn.execute(clear)

    async def bot_of_team(self, team_id: str) -> Bot | None:
        """The newest bot of workspace ``team_id`` (in or out of an Enterprise Grid org)."""
        c = self.bots.c
        query = (
            self.bots.select()
            .where(c.client_id == self.client_id)
            .where(c.team_id == team_id)
            .where(c.bot_token.is_not(None))
            .order_by(c.installed_at.desc())
            .limit(1)
        )
        async with self.reader.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        if not rows:
            return None
        bot: Bot = self._opened(SQLAlchemyInstallationStore.build_bot_entity(rows[0]), _BOT_TOKENS)
        return bot

    async def workspaces(self) -> list[str]:
        """The workspaces with a bot installed, sorted."""
        c = self.bots.c
        query = (
            self.bots.select()
            .with_only_columns(c.team_id)
            .where(c.client_id == self.client_id)
            .where(c.bot_token.is_not(None))
            .distinct()
        )
        async with self.reader.connect() as conn:
            return sorted(str(t) for (t,) in (await conn.execute(query)).all() if t)


class InstalledAuthorize(AsyncAuthorize):
    """bolt's authorize for OAuth installs: the workspace's bot from the store, or None (bolt
    then answers that the app is not installed and runs no listener). Unlike bolt's own
    ``AsyncInstallationStoreAuthorize`` it makes no ``auth.test`` call per request."""

    def __init__(self, store: SealedInstallationStore, allows: Callable[[str], bool]) -> None:
        self.store = store
        self.allows = allows  # ``SlackConfig.allows``: slack.workspaces, when set

    async def __call__(
        self,
        *,
        context: AsyncBoltContext,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None,
        actor_enterprise_id: str | None = None,
        actor_team_id: str | None = None,
        actor_user_id: str | None = None,
    ) -> AuthorizeResult | None:
        if not team_id:
            return None  # org-wide installs are not supported (docs/slack.md)
        if not self.allows(team_id):
            log.warning("a signed Slack request from %s, which is not in slack.workspaces", team_id)
            return None
        try:
            bot = await self.store.bot_of_team(team_id)
        except Unsealed as exc:
            log.error("Slack workspace %s: %s", team_id, exc)
            return None
        if bot is None:
            log.warning("a signed Slack request from %s, where Signoff is not installed", team_id)
            return None
        return AuthorizeResult(
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
            bot_token=bot.bot_token,
            bot_id=bot.bot_id,
            bot_user_id=bot.bot_user_id,
            bot_scopes=bot.bot_scopes,
        )


class Workspaces:
    """Bot tokens and people by workspace (module docstring). ``store`` None: one workspace,
    ``slack.botToken``."""

    def __init__(
        self, settings: Callable[[], AppConfig], store: SealedInstallationStore | None = None
    ) -> None:
        self.settings = settings  # the configuration now: people: may be reloaded while serving
        self.store = store

    @property
    def config(self) -> AppConfig:
        return self.settings()

    async def token_for(self, team: str | None) -> str:
        if self.store is None:
            return self.config.slack.bot_token
        if team is None:
            team = await self._default_team()
        try:
            bot = await self.store.bot_of_team(team)
        except Unsealed as exc:
            raise NotInstalled(f"the bot token of Slack workspace {team} does not open") from exc
        if bot is None or not bot.bot_token:
            raise NotInstalled(
                f"Signoff is not installed in Slack workspace {team} (or was removed from it)"
            )
        return bot.bot_token

    async def _default_team(self) -> str:
        assert self.store is not None
        installed = await self.store.workspaces()
        if len(installed) == 1:
            return installed[0]
        if not installed:
            raise NotInstalled("Signoff is not installed in any Slack workspace yet")
        raise NotInstalled(
            f"{len(installed)} Slack workspaces are installed ({', '.join(installed)}): name one "
            f"in the address, like slack:{installed[0]}/C0123ABCD"
        )

    async def is_default(self, team: str | None) -> bool:
        """Whether ``team`` is the default workspace (module docstring)."""
        if self.store is None:
            return True
        return team is not None and await self.store.workspaces() == [team]

    async def person(self, team: str | None, user: str) -> Person | None:
        """Who Slack user ``user`` of workspace ``team`` is: ``slack: <team>/<user>``, else
        ``slack: <user>`` when ``team`` is the default workspace; None for nobody."""
        if not user:
            return None
        if team and (found := self.config.person_by("slack", f"{team}/{user}")) is not None:
            return found
        bare = self.config.person_by("slack", user)
        if bare is None or not await self.is_default(team):
            return None
        return bare
