"""Reading an HTML-only reply (``bot.email.incoming``): what it quotes is dropped, and the
reading takes time in proportion to the reply, whatever markup a sender makes up (the server
takes up to 1 MB and reads it on the app's event loop)."""

from __future__ import annotations

import time
from email.message import EmailMessage

import pytest

from bot.email.inbound import MAX_MESSAGE_BYTES
from bot.email.incoming import text_of
from bot.email.replies import read_reply


def html_reply(markup: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "bob@example.com"
    message.set_content(markup, subtype="html")
    return message


@pytest.mark.parametrize(
    ("markup", "verb", "reason"),
    [
        ("<div>Approve<br>checked</div><blockquote>Deny</blockquote>", "grant", "checked"),
        (
            "<p>deny</p><blockquote>a<blockquote>b</blockquote>approve</blockquote>after",
            "deny",
            "after",
        ),
        ("<blockquote>approve</blockquote><div>deny: late</div>", "deny", "late"),
        ("<div>approve</div><blockquote>open to the end <b>deny</b>", "grant", None),
        ("<p>Approve &amp; ship</p></blockquote><p>x</p>", "grant", "& ship x"),
    ],
)
def test_an_html_reply_is_read_without_what_it_quotes(
    markup: str, verb: str, reason: str | None
) -> None:
    reading = read_reply(text_of(html_reply(markup)))

    assert (reading.verb, reading.reason) == (verb, reason)


@pytest.mark.parametrize(
    "filler",
    ["<", "<blockquote", "<blockquote</blockquote", "<br", "</blockquote", "<b<blockquote>"],
)
def test_made_up_markup_of_the_largest_size_is_read_at_once(filler: str) -> None:
    # Each of these took quadratic time with the earlier patterns: over 20 s for 200 KB, so
    # some minutes for 1 MB. Read in one pass, 1 MB takes well under a second; the bound
    # below leaves room for a loaded machine and still fails the quadratic reading.
    markup = "<p>approve</p>" + filler * ((MAX_MESSAGE_BYTES - 100) // len(filler))
    started = time.perf_counter()

    reading = read_reply(text_of(html_reply(markup)))

    assert time.perf_counter() - started < 30
    assert reading.verb == "grant"
