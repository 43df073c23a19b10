"""Reading a reply to an approval email (``bot.email.replies``): the first word decides, the
rest of its paragraph is the reason, and what mail clients quote or add below is not read."""

from __future__ import annotations

import pytest

from bot.email.replies import MAX_REASON, ReplyReading, read_reply

GMAIL = "On Sat, Dec 5, 2026 at 1:02 PM Signoff <signoff@example.com> wrote:\n> Approve"
GMAIL_WRAPPED = "On Sat, Dec 5, 2026 at 1:02 PM Signoff Approvals <\nsignoff@example.com> wrote:"
OUTLOOK = "________________________________\nFrom: Signoff <signoff@example.com>\nSent: ..."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("approve", ReplyReading("grant", None, "approve")),
        ("Approve.", ReplyReading("grant", None, "Approve")),
        ("APPROVED!", ReplyReading("grant", None, "APPROVED")),
        ("deny: the order was cancelled", ReplyReading("deny", "the order was cancelled", "deny")),
        (
            "Denied - duplicate\nrefund, see A-1041",
            ReplyReading("deny", "duplicate refund, see A-1041", "Denied"),
        ),
        (
            "\n\n  approve checked with the customer\n\nThanks, Bob",
            ReplyReading("grant", "checked with the customer", "approve"),
        ),
        (f"deny not ours\n\n{GMAIL}", ReplyReading("deny", "not ours", "deny")),
        (f"approve\n{GMAIL_WRAPPED}\n> deny", ReplyReading("grant", None, "approve")),
        (f"Approve\r\n\r\n{OUTLOOK}\r\nDeny", ReplyReading("grant", None, "Approve")),
        ("approve\n-- \nBob, Finance", ReplyReading("grant", None, "approve")),
        ("approve\nSent from my iPhone", ReplyReading("grant", None, "approve")),
        # Anything else decides nothing, and says what was read.
        ("I approve", ReplyReading(None, "approve", "I")),
        ("yes", ReplyReading(None, None, "yes")),
        ("approves", ReplyReading(None, None, "approves")),
        ("> approve\nquoted only", ReplyReading(None, None, None)),
        ("", ReplyReading(None, None, None)),
        ("   \n\n", ReplyReading(None, None, None)),
        ("👍", ReplyReading(None, None, "👍")),
        (f"{GMAIL}\napprove", ReplyReading(None, None, None)),
    ],
)
def test_read_reply(text: str, expected: ReplyReading) -> None:
    assert read_reply(text) == expected


def test_a_long_reason_is_cut_and_nul_bytes_dropped() -> None:
    reading = read_reply("deny " + "x" * (MAX_REASON * 2) + "\x00")

    assert reading.verb == "deny"
    assert reading.reason is not None and len(reading.reason) == MAX_REASON
    assert reading.reason.endswith("…") and "\x00" not in reading.reason


def test_a_huge_reply_is_read_only_as_far_as_its_start() -> None:
    reading = read_reply("approve fine\n" + "more words\n" * 1_000_000)

    assert reading.verb == "grant" and reading.reason is not None
    assert len(reading.reason) <= MAX_REASON
