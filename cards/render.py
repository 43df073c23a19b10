"""Render an ``ApprovalView`` or a notice for Slack, Teams or the web.

Approach (see ``cards.templating``): the templates write the JSON or HTML; Python only
measures and cuts the argument excerpt, since its budget depends on everything else on the
card. Each card is rendered once without arguments to measure it, then with the excerpt that
fits; a Slack card or notice that still breaks a limit raises ``CardTooLarge`` instead of
being sent and rejected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from cards.limits import (
    SLACK_MAX_SECTION_TEXT,
    SLACK_MAX_TOTAL_TEXT,
    blocks_text_length,
    check_message,
    check_teams_card,
    teams_card_bytes,
)
from cards.notices import NOTICES, Mention, NoticeKind, mention_id, mention_name
from cards.templating import SLACK, TEAMS, WEB, render_json
from cards.text import (
    Excerpt,
    Flavor,
    excerpt_arguments,
    slack_code_edges,
    teams_cost,
    visible,
)
from cards.view import ApprovalView

__all__ = [
    "CardTooLarge",
    "NoticeKind",
    "render_notice",
    "render_slack_card",
    "render_teams_card",
    "render_web_card",
    "teams_mention_activity",
]

Platform = Literal["slack", "teams", "web"]

# Each argument section is "```" + chunk + "```"; 10 more characters leave room to escape a
# backtick at either edge of a chunk, where it would merge with the fence.
SLACK_ARGUMENT_CHUNK = SLACK_MAX_SECTION_TEXT - 6 - 10
SLACK_ARGUMENT_SECTIONS = 4
# Below TEAMS_MAX_CARD_BYTES, leaving room for the activity that carries the card.
TEAMS_CARD_TARGET = 26_000
_MARGIN = 40  # the truncation line's number may grow by a few digits after measuring
_TEAMS_REFRESH_USERS = 60  # refresh.userIds holds at most 60 users (PLATFORM.md)


class CardTooLarge(ValueError):
    """A rendering breaks a platform limit even without its arguments."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def _slack(view: ApprovalView, excerpt: Excerpt) -> dict[str, Any]:
    chunks = [slack_code_edges(c) for c in excerpt.chunks]
    card: dict[str, Any] = render_json(
        SLACK, "slack/card.json.j2", v=view, chunks=chunks, omitted=excerpt.omitted
    )
    return card


def render_slack_card(view: ApprovalView) -> dict[str, Any]:
    """``{"text": fallback, "blocks": [...]}`` for ``chat.postMessage`` / ``chat.update``."""
    canonical = view.arguments_json
    if canonical is None:
        return _checked_slack(_slack(view, Excerpt((), 0)))
    nothing = Excerpt((), len(canonical))
    base = _slack(view, nothing)
    fences = SLACK_ARGUMENT_SECTIONS * (6 + 10)
    room = SLACK_MAX_TOTAL_TEXT - blocks_text_length(base["blocks"]) - fences - _MARGIN
    budget = min(room, SLACK_ARGUMENT_SECTIONS * SLACK_ARGUMENT_CHUNK)
    excerpt = excerpt_arguments(
        canonical, Flavor.SLACK_CODE, budget=budget, chunk_size=SLACK_ARGUMENT_CHUNK
    )
    card = _slack(view, excerpt)
    if check_message(card):
        card = base  # cannot happen by the budget above; never send a card Slack rejects
    return _checked_slack(card)


def _checked_slack(message: dict[str, Any]) -> dict[str, Any]:
    problems = check_message(message)
    if problems:
        raise CardTooLarge(problems)
    return message


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
            canonical, Flavor.TEAMS, budget=budget, chunk_size=max(budget, 1), cost=teams_cost
        )
        card = _teams(view, excerpt, refresh_user_ids)
        if check_teams_card(card):
            card = base
    problems = check_teams_card(card)
    if problems:
        raise CardTooLarge(problems)
    return card


def render_web_card(view: ApprovalView, *, csrf_token: str | None, form_action: str | None) -> str:
    """An HTML fragment: the card with the complete arguments and, when ``form_action`` is
    given, one form whose buttons post ``action`` = grant | deny | takeover | release with
    ``request_id``, ``reason`` and ``csrf_token``."""
    arguments = visible(view.arguments_json) if view.arguments_json is not None else None
    return WEB.get_template("web/card.html.j2").render(
        v=view, arguments=arguments, csrf_token=csrf_token, form_action=form_action
    )


def render_notice(kind: NoticeKind | str, platform: Platform, **data: Any) -> dict[str, Any] | str:
    """A thread notice. ``data`` are the fields of the kind's dataclass in ``cards.notices``.

    Slack: ``{"text", "blocks"}``; Teams: an Adaptive Card; web: an HTML fragment.
    """
    notice = NOTICES[NoticeKind(kind)](**data)
    name = f"notice_{NoticeKind(kind).value}"
    if platform == "slack":
        return _checked_slack(render_json(SLACK, f"slack/{name}.json.j2", n=notice))
    if platform == "teams":
        card: dict[str, Any] = render_json(TEAMS, f"teams/{name}.json.j2", n=notice)
        problems = check_teams_card(card)
        if problems:
            raise CardTooLarge(problems)
        return card
    if platform == "web":
        return WEB.get_template(f"web/{name}.html.j2").render(n=notice)
    raise ValueError(f"unknown platform {platform!r}")


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
