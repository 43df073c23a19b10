"""What an incoming reply says, read within bounds: its sender, subject, ``Message-ID``, whether
it answers itself, and the person's own text (``read``).

The server takes up to 1 MB from anyone who can reach it, and the standard library's ``email``
package reads some made-up headers in quadratic time (50,000 ``"`` in ``From:`` took 22 s,
420 KB of encoded words in ``Subject:`` 10 s) and raises ``RecursionError`` on deeply nested
parts or comments. So before anything is read (``parse``): at most ``MAX_PARTS`` parts, and
every header Signoff reads (``READ_HEADERS``) at most ``MAX_HEADER_CHARS`` characters; others
(``References``, ``Received``, a mail server's long signatures) are never parsed. Whatever the
package raises on the bounded message is ``Unreadable`` too: nothing made up reaches a decision.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

MAX_PARTS = 50  # a reply is a text part, an HTML part and a few attachments
MAX_HEADER_CHARS = 2000  # of each header read: an address, a subject, an id, a content type
READ_HEADERS = frozenset(
    {
        "from",
        "subject",
        "message-id",
        "auto-submitted",
        "precedence",
        "content-type",
        "content-transfer-encoding",
        "content-disposition",
    }
)
_DROPPED_PRECEDENCE = {"bulk", "junk", "list", "auto_reply"}
# Linear on any input: a tag cannot hold "<", so no match runs past the next one.
_TAG = re.compile(r"<[^<>]*>")
_HTML_BREAK = re.compile(r"<(?:br|/p|/div|/tr|/li)\b[^<>]*>", re.IGNORECASE)
_QUOTE_TAG = re.compile(r"<(/?)blockquote\b", re.IGNORECASE)


class Unreadable(Exception):
    """A message Signoff does not read; its text says why, for the SMTP answer."""


@dataclass(frozen=True)
class Incoming:
    """What a reply says (``read``)."""

    sender: str | None  # the one address of From:, None for none, several or a malformed one
    subject: str  # one line
    message_id: str | None
    automatic: bool  # a bounce, an auto-reply, a list: answering it could start a mail loop
    text: str  # the person's text: the plain part, else the HTML part without its quotes


def read(raw: bytes, mail_from: str | None) -> Incoming:
    """The reply ``raw`` (sent with envelope sender ``mail_from``); ``Unreadable`` when it is
    outside the bounds (module docstring) or the ``email`` package cannot read it."""
    message = parse(raw)
    try:
        return Incoming(
            sender=_sender(message),
            subject=_one_line(str(message.get("Subject", ""))),
            message_id=_one_line(str(message.get("Message-ID", ""))) or None,
            automatic=_answers_itself(mail_from, message),
            text=text_of(message),
        )
    except Exception as exc:  # anything the package raises on made-up input
        raise Unreadable("Signoff cannot read its headers") from exc


def parse(raw: bytes) -> EmailMessage:
    """``raw`` parsed, its parts counted and the headers Signoff reads measured (none of them
    parsed yet: the ``email`` package parses a header when it is read)."""
    try:
        message = BytesParser(policy=policy.default).parsebytes(raw)
    except Exception as exc:  # RecursionError on nesting, and the like
        raise Unreadable("Signoff cannot read its structure") from exc
    assert isinstance(message, EmailMessage)
    parts: list[Any] = [message]
    counted = 0
    while parts:
        part = parts.pop()
        counted += 1
        if counted > MAX_PARTS:
            raise Unreadable(f"it has more than {MAX_PARTS} parts")
        for name, value in part.raw_items():
            if name.lower() in READ_HEADERS and len(str(value)) > MAX_HEADER_CHARS:
                raise Unreadable(f"its {name[:40]} header is over {MAX_HEADER_CHARS} characters")
        payload = part.get_payload()
        if part.is_multipart() and isinstance(payload, list):
            parts.extend(payload)
    return message


def _answers_itself(mail_from: str | None, message: EmailMessage) -> bool:
    if not mail_from or mail_from.strip() in ("<>", ""):
        return True  # a bounce
    auto = str(message.get("Auto-Submitted", "no")).strip().lower()
    precedence = str(message.get("Precedence", "")).strip().lower()
    return auto != "no" or precedence in _DROPPED_PRECEDENCE or "List-Id" in message


def _sender(message: EmailMessage) -> str | None:
    try:
        addresses: tuple[Any, ...] = tuple(getattr(message["From"], "addresses", ()))
    except (ValueError, IndexError, TypeError):  # the email package's header parse errors
        return None
    spec = str(addresses[0].addr_spec) if len(addresses) == 1 else ""
    return spec if "@" in spec else None


def text_of(message: EmailMessage) -> str:
    """The reply's own text: its plain part, else its HTML part without what it quotes."""
    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    try:
        content = body.get_content()
    except (LookupError, ValueError):  # an unknown charset, a malformed transfer encoding
        return ""
    if not isinstance(content, str):
        return ""
    if body.get_content_subtype() == "html":
        content = _without_quotes(content)
        content = html.unescape(_TAG.sub("", _HTML_BREAK.sub("\n", content)))
    return content


def _without_quotes(markup: str) -> str:
    """``markup`` without its ``<blockquote>`` elements (nested ones too; one left open runs to
    the end), in one pass: a reply's HTML is as large as the server takes."""
    kept: list[str] = []
    depth, start = 0, 0
    for tag in _QUOTE_TAG.finditer(markup):
        if not tag.group(1):
            if depth == 0:
                kept.append(markup[start : tag.start()])
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                close = markup.find(">", tag.end())
                if close < 0:
                    return "".join(kept)  # the rest is inside an unfinished tag
                start = close + 1
    if depth == 0:
        kept.append(markup[start:])
    return "".join(kept)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:998]
