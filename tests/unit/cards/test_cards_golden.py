"""Every card state and every notice on every platform, compared with committed golden files.

``SIGNOFF_UPDATE_GOLDEN=1 pytest tests/unit/cards`` rewrites them; review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cardchecks import assert_valid_html, assert_valid_slack, assert_valid_teams

from cards.render import NoticeKind, render_notice
from cards.samples import SAMPLE_NOTICES, STATES, sample_view
from cards.slack.render import render_slack_card
from cards.teams.render import render_teams_card
from cards.web.render import render_web_card

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "cards"
UPDATE = os.environ.get("SIGNOFF_UPDATE_GOLDEN") == "1"
PLATFORMS = ("slack", "teams", "web")


def _card(platform: str, state: str) -> Any:
    view = sample_view(state)
    if platform == "slack":
        return render_slack_card(view)
    if platform == "teams":
        return render_teams_card(view)
    return render_web_card(view, csrf_token="sample-csrf-token", form_action="/approvals/decide")


def _check(platform: str, rendered: Any) -> None:
    if platform == "slack":
        assert_valid_slack(rendered)
    elif platform == "teams":
        assert_valid_teams(rendered)
    else:
        assert_valid_html(rendered)


def _compare(path: Path, rendered: Any) -> None:
    text = (
        rendered
        if isinstance(rendered, str)
        else json.dumps(rendered, indent=2, ensure_ascii=False)
    )
    text = text.rstrip("\n") + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with SIGNOFF_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.relative_to(GOLDEN)} differs; if intended, rerun with SIGNOFF_UPDATE_GOLDEN=1"
    )


def _suffix(platform: str) -> str:
    return "html" if platform == "web" else "json"


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("state", STATES)
def test_card_matches_golden(platform: str, state: str) -> None:
    rendered = _card(platform, state)
    _check(platform, rendered)
    _compare(GOLDEN / platform / f"card_{state}.{_suffix(platform)}", rendered)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("kind", list(NoticeKind))
def test_notice_matches_golden(platform: str, kind: NoticeKind) -> None:
    rendered = render_notice(kind, platform, **SAMPLE_NOTICES[kind])  # type: ignore[arg-type]
    _check(platform, rendered)
    _compare(GOLDEN / platform / f"notice_{kind.value}.{_suffix(platform)}", rendered)


def test_succeeded_step_result_on_every_platform() -> None:
    data = {"run_id": "run_1", "step_id": "refund", "ok": True, "output_summary": "refunded"}
    assert_valid_slack(render_notice("step_result", "slack", **data))
    assert_valid_teams(render_notice("step_result", "teams", **data))
    assert_valid_html(render_notice("step_result", "web", **data))


def test_every_golden_file_is_produced() -> None:
    expected = {f"{p}/card_{s}.{_suffix(p)}" for p in PLATFORMS for s in STATES} | {
        f"{p}/notice_{k.value}.{_suffix(p)}" for p in PLATFORMS for k in NoticeKind
    }
    found = {str(f.relative_to(GOLDEN)) for f in GOLDEN.rglob("*") if f.is_file()}
    assert found == expected
