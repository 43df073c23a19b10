"""Issue 31: the web draws its own icons. A page cannot count on an emoji font (without one,
"⏳ Approval needed" shows an empty box); Slack and Teams draw their emoji themselves."""

from __future__ import annotations

import json
import re

import pytest

from cards.notices import NoticeKind
from cards.render import render_notice
from cards.samples import SAMPLE_NOTICES, STATES, sample_view
from cards.slack.render import render_slack_card
from cards.teams.render import render_teams_card
from cards.web.render import render_web_card

# Pictographs, dingbats, technical symbols (⏳ ⌛), arrows and stars, and the emoji selector.
EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2300-\u23ff\u2b00-\u2bff\ufe0f]")
WORDS = {
    "pending": "Approval needed",
    "granted": "Taken over, awaiting release",
    "released": "Approved",
    "denied": "Denied",
    "expired": "Expired",
    "cancelled": "Cancelled",
}


@pytest.mark.parametrize("state", STATES)
def test_a_web_card_draws_its_state_with_no_emoji(state: str) -> None:
    html = render_web_card(sample_view(state), csrf_token="t", form_action="/x")
    assert EMOJI.findall(html) == []
    header = re.search(r'<p class="signoff-card__state">(.*?)</p>', html)
    assert header is not None
    assert re.fullmatch(r'<svg class="signoff-card__icon" [^>]*aria-hidden="true"[^>]*>.+</svg> '
                        + re.escape(WORDS[state]), header.group(1))  # fmt: skip


@pytest.mark.parametrize("kind", list(NoticeKind))
def test_web_notices_have_no_emoji(kind: NoticeKind) -> None:
    assert EMOJI.findall(render_notice(kind, "web", **SAMPLE_NOTICES[kind])) == []


@pytest.mark.parametrize("state", STATES)
def test_chat_cards_keep_the_same_words_after_their_emoji(state: str) -> None:
    slack = render_slack_card(sample_view(state))["blocks"][0]["text"]["text"]
    teams = render_teams_card(sample_view(state))["body"][0]["text"]
    assert slack == teams
    emoji, _, words = slack.partition(" ")
    assert EMOJI.fullmatch(emoji) and words == WORDS[state], json.dumps(slack)
