"""The decision and expiry notices, told to the person who asked ("@dave bob approved your
request ..."): every channel with a card format renders them, valid for its platform."""

from __future__ import annotations

from typing import Any

import pytest
from cardchecks import VALID

from cards.notices import NoticeKind
from cards.render import card_channels, render_notice
from cards.samples import SAMPLE_NOTICES

REQUESTER = {"id": "U0CAROL01", "name": "carol"}


def _data(kind: NoticeKind, **changes: Any) -> dict[str, Any]:
    data = {**SAMPLE_NOTICES[kind], **changes}
    if kind == NoticeKind.DECISION:
        data.update(status="released", quorum=None)
    return data


@pytest.mark.parametrize("title", ["demo-ledger · refund", None])
@pytest.mark.parametrize("channel", card_channels())
@pytest.mark.parametrize("kind", [NoticeKind.DECISION, NoticeKind.EXPIRED])
def test_every_channel_renders_the_requester(
    channel: str, kind: NoticeKind, title: str | None
) -> None:
    """A channel whose template leaves the requester out fails here (each kind of each channel
    with a card format: ``cards/<channel>/``), as does one without a validity check here. Who
    is mentioned is each channel's own way (Teams puts the mention on the activity): their
    integration tests check it."""
    told = render_notice(kind, channel, **_data(kind, requester=REQUESTER, title=title))
    plain = render_notice(kind, channel, **_data(kind, title=title))
    VALID[channel](told)
    assert "your request" in str(told).lower() and "your request" not in str(plain).lower()
    assert ("this request" in str(told)) is False  # "your request", never both
