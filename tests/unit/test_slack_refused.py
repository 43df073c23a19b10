"""How a copy of a card is named to the decider told that Slack refused to update it."""

from __future__ import annotations

from bot.slack.refused import _copy_name


def test_a_copy_is_named_by_its_channel_or_its_person() -> None:
    assert _copy_name("slack:C0456") == "the copy of the card in <#C0456>"
    # A workspace-qualified channel (OAuth) is linked by its channel id alone: Slack reads
    # <#T0123/C0456> as no channel at all.
    assert _copy_name("slack:T0123/C0456") == "the copy of the card in <#C0456>"
    assert _copy_name("slack:@bob") == "the copy of the card sent to bob"
