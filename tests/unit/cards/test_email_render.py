"""The email rendering of the one approval view: subjects that stay one line, escaped HTML
with nothing that runs or loads, arguments bounded with the cards' words, times in the
reader's zone; and headers that cannot be injected."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from bot.email.message import Envelope, build_message, message_id, thread_id
from cards.email.render import (
    EMAIL_ARGUMENT_CHARS,
    render_email_card,
    render_email_notice,
    subject_line,
    thread_subject,
)
from cards.email.templating import local
from cards.notices import NOTICES, NoticeKind
from cards.samples import SAMPLE_NOTICES, sample_view
from cards.view import build_view
from tests.support.requests import NOW, takeover_request

LINK = "https://signoff.example.com/approvals/tk-1?p=bob&exp=1&sig=ab"


def _view(**fields: object):  # type: ignore[no-untyped-def]
    request = takeover_request(expires_at=NOW + timedelta(hours=1), **fields)
    return build_view(request, None, approval_url=LINK, run_url=None, now=NOW)


def test_a_subject_is_one_bounded_line_whatever_the_summary_holds() -> None:
    view = _view(details={"summary": "Pay\r\nBcc: all@example.com\u2028x" + "y" * 400})
    subject = thread_subject(view)
    assert "\r" not in subject and "\n" not in subject and "\u2028" not in subject
    assert subject.startswith("Approval needed: Pay Bcc: all@example.com")
    assert len(subject) <= 150 and subject.endswith("…")
    assert subject_line("\x00\x1b") == "Signoff" and subject_line("a\r\nb") == "a b"


def test_the_html_part_escapes_everything_and_runs_and_loads_nothing() -> None:
    evil = '<script>alert(1)</script><img src="http://evil.example/x.png">'
    view = _view(reason=evil, details={"args": {"note": evil}})
    email = render_email_card(view, link=LINK, personal=True)
    lowered = email.html.lower()
    assert not re.search(r"<(script|img|form|style|link|iframe|object|embed)\b", lowered)
    assert not re.search(r"<[^>]*\s(src|on[a-z]+)=", lowered)
    assert "&lt;script&gt;" in email.html
    assert evil in email.text  # the text part is shown as written
    assert 'href="https://signoff.example.com/approvals/tk-1?p=bob&amp;exp=1&amp;sig=ab"' in (
        email.html
    )
    assert "yours alone" in email.text


def test_arguments_are_bounded_with_the_cards_words() -> None:
    view = _view(details={"args": {"blob": "z" * (EMAIL_ARGUMENT_CHARS * 2)}})
    email = render_email_card(view, link=LINK)
    assert "more characters — full arguments on the approval page" in email.text
    assert email.text.count("z") <= EMAIL_ARGUMENT_CHARS
    assert len(email.html.encode()) < 100_000  # Gmail clips a message's HTML at 102 KB


def test_times_are_in_the_readers_zone_named_else_utc() -> None:
    moment = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    assert local(moment, "Europe/Berlin") == "Wed 1 Jul 2026, 14:00 CEST (Europe/Berlin)"
    assert local(moment, None) == "Wed 1 Jul 2026, 12:00 UTC"
    assert local(moment, "Not/AZone") == "Wed 1 Jul 2026, 12:00 UTC"
    view = _view()
    assert "Expires: Thu 1 Jan 2026, 02:00 CET (Europe/Berlin)" in (
        render_email_card(view, link=None, tz="Europe/Berlin").text
    )


def test_a_decided_request_offers_no_link_to_decide() -> None:
    email = render_email_card(sample_view("denied"), link=LINK)
    assert "Open to approve or deny" not in email.text + email.html
    assert "Denied" in email.text


@pytest.mark.parametrize("kind", list(NoticeKind))
def test_every_notice_renders_both_parts_in_the_thread(kind: NoticeKind) -> None:
    notice = NOTICES[kind](**SAMPLE_NOTICES[kind])
    email = render_email_notice(
        f"notice_{kind.value}", notice, tz="Europe/Berlin", link=LINK, subject="Re: Approval"
    )
    assert email.subject == "Re: Approval"
    assert email.text.strip() and "<html" in email.html
    assert "Open the approval page" in email.html and LINK in email.text


def test_headers_thread_and_refuse_what_could_inject_a_header() -> None:
    email = render_email_card(sample_view(), link=LINK)
    root = thread_id("tk-1", "email:@bob", "example.com")
    assert (
        root
        == thread_id("tk-1", "email:@bob", "example.com")
        != thread_id("tk-1", "email:@carol", "example.com")
    )
    envelope = Envelope(
        "signoff@example.com",
        "bob@example.com",
        message_id("notice:reminder:tk-1:email:@bob", "example.com"),
        root,
        datetime(2026, 1, 1, tzinfo=UTC),
    )
    msg = build_message(envelope, email)
    assert msg["Subject"] == f"Re: {email.subject}"
    assert msg["In-Reply-To"] == root and msg["References"] == root
    assert msg["Date"] == "Thu, 01 Jan 2026 00:00:00 +0000"
    for bad in ("bob@example.com\r\nBcc: all@example.com", "Bob <bob@example.com>", "bob"):
        with pytest.raises(ValueError):
            build_message(Envelope("signoff@example.com", bad, "<x@y>", None, NOW), email)
