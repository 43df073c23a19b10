"""Render an ``ApprovalView`` or a notice as an Adaptive Card 1.5 for Teams.

As for Block Kit (``cards.slack.render``): the card is rendered once without arguments to
measure it, then with the excerpt that fits below ``TEAMS_CARD_TARGET``; a card that still
breaks the limit raises ``CardTooLarge``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cards.notices import Mention, mention_id, mention_name
from cards.render import CardRenderer, CardTooLarge
from cards.teams.limits import check_teams_card, teams_card_bytes, teams_cost
from cards.teams.templating import TEAMS
from cards.templating import render_json
from cards.text import Excerpt, Flavor, excerpt_arguments, visible
from cards.view import ApprovalView

# Below TEAMS_MAX_CARD_BYTES, leaving room for the activity that carries the card.
TEAMS_CARD_TARGET = 26_000
_MARGIN = 40  # the truncation line's number may grow by a few digits after measuring
_TEAMS_REFRESH_USERS = 60  # refresh.userIds holds at most 60 users (PLATFORM.md)


def _teams(
    view: ApprovalView, excerpt: Excerpt, refresh_user_ids: Sequence[str] | None
) -> dict[str, Any]:
    users = None if refresh_user_ids is None else list(refresh_user_ids)[:_TEAMS_REFRESH_USERS]
    card: dict[str, Any] = render_json(
        TEAMS,
        "teams/card.json.j2",
        v=view,
        arguments=excerpt.text,
        omitted=excerpt.omitted,
        refresh_user_ids=users,
    )
    return card


def render_teams_card(
    view: ApprovalView, *, refresh_user_ids: Sequence[str] | None = None
) -> dict[str, Any]:
    """The Adaptive Card 1.5 for Teams, with ``Action.Execute`` verbs and a ``refresh``.

    ``refresh_user_ids``: Teams user MRIs that refresh the card automatically (at most 60 are
    kept); None leaves ``userIds`` out, so Teams refreshes it for everyone in conversations of
    up to 60 members.
    """
    canonical = view.arguments_json
    if canonical is None:
        card = _teams(view, Excerpt((), 0), refresh_user_ids)
    else:
        base = _teams(view, Excerpt((), len(canonical)), refresh_user_ids)
        budget = TEAMS_CARD_TARGET - teams_card_bytes(base) - 2 * _MARGIN
        excerpt = excerpt_arguments(
            canonical, Flavor.CARD_TEXT, budget=budget, chunk_size=max(budget, 1), cost=teams_cost
        )
        card = _teams(view, excerpt, refresh_user_ids)
        if check_teams_card(card):
            card = base
    problems = check_teams_card(card)
    if problems:
        raise CardTooLarge(problems)
    return card


def render_teams_notice(name: str, notice: Any) -> dict[str, Any]:
    """The notice template ``name`` (``notice_<kind>``) for ``notice`` (``cards.notices``)."""
    card: dict[str, Any] = render_json(TEAMS, f"teams/{name}.json.j2", n=notice)
    problems = check_teams_card(card)
    if problems:
        raise CardTooLarge(problems)
    return card


_TEAMS_ID = re.compile(r"[0-9A-Za-z:._@-]{1,200}")
_AT_UNSAFE = re.compile(r"[<>\[\]*_`\\]")


def teams_mention_activity(mentions: Sequence[Mention]) -> dict[str, Any]:
    """``{"text", "entities"}`` for the Teams activity that carries an escalation card.

    Mentions cannot live in the card itself (``msteams.entities`` is not in the Adaptive Card
    1.5 schema), so the bot puts them on the activity. Malformed ids are left out.
    """
    tags: list[str] = []
    entities: list[dict[str, Any]] = []
    for mention in mentions:
        user_id = mention_id(mention)
        if not _TEAMS_ID.fullmatch(user_id):
            continue
        name = _AT_UNSAFE.sub("", visible(mention_name(mention)))[:100] or user_id
        tag = f"<at>{name}</at>"
        tags.append(tag)
        mentioned = {"id": user_id, "name": name}
        entities.append({"type": "mention", "text": tag, "mentioned": mentioned})
    return {"text": " ".join(tags), "entities": entities}


def _card(view: ApprovalView) -> dict[str, Any]:
    return render_teams_card(view)


RENDERER = CardRenderer(card=_card, notice=render_teams_notice)
