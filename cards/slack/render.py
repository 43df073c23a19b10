"""Render an ``ApprovalView`` or a notice as Block Kit: ``{"text", "blocks"}``.

Approach (see ``cards.templating``): the templates write the JSON; Python only measures and
cuts the argument excerpt, since its budget depends on everything else on the card. Each card
is rendered once without arguments to measure it, then with the excerpt that fits; a card or
notice that still breaks a limit raises ``CardTooLarge`` instead of being sent and rejected.
"""

from __future__ import annotations

from typing import Any

from cards.render import CardRenderer, CardTooLarge
from cards.slack.limits import (
    SLACK_MAX_SECTION_TEXT,
    SLACK_MAX_TOTAL_TEXT,
    blocks_text_length,
    check_message,
)
from cards.slack.templating import SLACK, slack_code_edges
from cards.templating import render_json
from cards.text import Excerpt, Flavor, excerpt_arguments
from cards.view import ApprovalView

# Each argument section is "```" + chunk + "```"; 10 more characters leave room to escape a
# backtick at either edge of a chunk, where it would merge with the fence.
SLACK_ARGUMENT_CHUNK = SLACK_MAX_SECTION_TEXT - 6 - 10
SLACK_ARGUMENT_SECTIONS = 4
_MARGIN = 40  # the truncation line's number may grow by a few digits after measuring


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
        canonical, Flavor.MRKDWN_CODE, budget=budget, chunk_size=SLACK_ARGUMENT_CHUNK
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


def render_slack_notice(name: str, notice: Any) -> dict[str, Any]:
    """The notice template ``name`` (``notice_<kind>``) for ``notice`` (``cards.notices``)."""
    return _checked_slack(render_json(SLACK, f"slack/{name}.json.j2", n=notice))


RENDERER = CardRenderer(card=render_slack_card, notice=render_slack_notice)
