"""The Home tab and its arguments dialog as Block Kit views: within Slack's view limits, and
escaped as every card is."""

from __future__ import annotations

import dataclasses

import pytest

from cards.render import CardTooLarge
from cards.samples import sample_view
from cards.slack.home import PAGE_SIZE, HomePage, render_arguments_view, render_slack_home
from cards.slack.limits import check_blocks
from tests.fakes.slack import view_problems


def full_page(n: int, **over: object) -> HomePage:
    views = tuple(
        dataclasses.replace(sample_view(), request_id=f"tk_{i:03d}", reason="x" * 500)
        for i in range(n)
    )
    recent = tuple(sample_view(s) for s in ("released", "denied", "granted", "released", "denied"))
    fields = {"total": 3 * n, "page": 1, "recent": recent, "notice": "Already approved."}
    return HomePage("U0ALICE01", linked=True, pending=views, **(fields | over))  # type: ignore[arg-type]


def test_a_full_page_fits_a_home_tab() -> None:
    view = render_slack_home(full_page(PAGE_SIZE))
    assert view["type"] == "home"
    assert len(view["blocks"]) <= 100
    assert view_problems(view, kind="home") == []
    assert all(check_blocks([b]) == [] for b in view["blocks"])
    pages = [b for b in view["blocks"] if b.get("block_id") == "home_pages"]
    assert [e["value"] for e in pages[0]["elements"]] == ["0", "2"]  # newer, more


def test_more_than_100_blocks_is_refused_before_slack_sees_it() -> None:
    with pytest.raises(CardTooLarge, match="limit 100"):
        render_slack_home(full_page(30, page_size=30))


def test_arguments_are_escaped_in_the_preview_and_the_dialog() -> None:
    view = dataclasses.replace(
        sample_view(), arguments_json='{"to": "<!channel> & <@U123>", "x": "```"}'
    )
    home = render_slack_home(HomePage("U0ALICE01", linked=True, pending=(view,), total=1))
    text = str(home)
    assert "<!channel>" not in text and "&lt;!channel&gt; &amp; &lt;@U123&gt;" in text
    dialog = render_arguments_view(view)
    assert view_problems(dialog) == []
    assert "<!channel>" not in str(dialog)


def test_someone_not_linked_is_told_how_to_get_linked() -> None:
    home = render_slack_home(HomePage("U0STRANGER", linked=False))
    text = str(home)
    assert "add your Slack user id (U0STRANGER) or your email address under people:" in text
    assert not any(b["type"] == "actions" for b in home["blocks"])
