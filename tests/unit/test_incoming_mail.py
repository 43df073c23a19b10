"""Reading an incoming reply within bounds (``bot.email.incoming``): what the ``email``
package reads slowly or not at all is refused before it is read, and a real reply, with the
long headers mail servers add, is read whole."""

from __future__ import annotations

import time

import pytest

from bot.email.incoming import MAX_HEADER_CHARS, MAX_PARTS, Unreadable, read

REPLY = (
    "From: Bob <bob@example.com>\r\n"
    "To: signoff+abc@replies.example.com\r\n"
    "Subject: Re: Approval needed\r\n"
    "Message-ID: <reply-1@mail.example.com>\r\n"
    "{extra}"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "approve\r\n"
)


def reply(extra: str = "") -> bytes:
    return REPLY.format(extra=extra).encode()


def folded(name: str, value: str, width: int = 900) -> str:
    """A header of any length in lines SMTP carries (at most 1,000 characters)."""
    lines = [value[i : i + width] for i in range(0, len(value), width)]
    return f"{name}: " + "\r\n ".join(lines) + "\r\n"


def nested(depth: int) -> bytes:
    head = tail = ""
    for i in range(depth):
        head += f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n'
        tail = f"\r\n--b{i}--\r\n" + tail
    return f"From: bob@example.com\r\n{head}Content-Type: text/plain\r\n\r\napprove{tail}".encode()


def parts(count: int) -> bytes:
    body = "".join(f"--b\r\nContent-Type: text/plain\r\n\r\npart {i}\r\n" for i in range(count))
    return (
        'From: bob@example.com\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n'
        f"{body}--b--\r\n"
    ).encode()


def test_a_reply_is_read() -> None:
    found = read(reply(), "bob@example.com")

    assert (found.sender, found.subject, found.message_id) == (
        "bob@example.com",
        "Re: Approval needed",
        "<reply-1@mail.example.com>",
    )
    assert found.text.strip() == "approve" and not found.automatic


def test_long_headers_signoff_does_not_read_are_left_alone() -> None:
    references = " ".join(f"<n{i}@mail.example.com>" for i in range(500))  # a long thread
    extra = folded("References", references) + folded("X-Microsoft-Antispam", "a;" * 4000)

    assert read(reply(extra), "bob@example.com").sender == "bob@example.com"
    assert read(parts(MAX_PARTS - 1), "bob@example.com").text.strip() == "part 0"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        # 50,000 quotes in From: took 22 s to parse; 420 KB of encoded words in Subject: 10 s.
        (reply().replace(b"Bob ", folded("X", '"' * 50_000)[3:-2].encode() + b" "), "From"),
        (reply(folded("Subject", "=?utf-8?q?a?= " * 30_000)), "Subject"),
        (reply().replace(b"<reply-1@", ("(" * 50_000).encode() + b"<reply-1@"), "Message-ID"),
        (reply(folded("Content-Type", "text/plain; a=" + "\\" * 10_000)), "Content-Type"),
        # Nesting: RecursionError inside the package; parts: each one walked when reading.
        (nested(1000), "structure"),
        (parts(MAX_PARTS + 1), f"more than {MAX_PARTS} parts"),
    ],
    ids=["from", "subject", "message-id", "content-type", "nesting", "parts"],
)
def test_made_up_messages_are_unreadable_at_once(raw: bytes, why: str) -> None:
    started = time.perf_counter()

    with pytest.raises(Unreadable) as refused:
        read(raw, "bob@example.com")

    assert why in str(refused.value)
    assert time.perf_counter() - started < 10  # quadratic parsing took 10 to 22 s of these


def test_the_header_bound_is_a_headers_whole_length() -> None:
    at_bound = "x" * (MAX_HEADER_CHARS - len("Re: "))
    assert read(reply().replace(b"Re: Approval needed", f"Re: {at_bound}".encode()), None)
    with pytest.raises(Unreadable):
        read(reply().replace(b"Re: Approval needed", f"Re: {at_bound}x".encode()), None)
