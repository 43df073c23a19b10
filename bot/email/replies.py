"""What a reply to an approval email asks for: its first word, approve or deny, and the reason
that follows it (``read_reply``). Pure: the inbound server (``bot.email.inbound``) hands in the
reply's text and acts on what this reads.

Only what the person wrote counts: the reply is read up to the first line of what mail clients
quote or add below it (``> `` lines, "On … wrote:", Outlook's "From:" block and rule, a
signature's "-- "). The first word, without case or trailing punctuation, is the verb:
``approve``/``approved`` grants, ``deny``/``denied`` denies; anything else decides nothing and
the answer says what was read. The reason is the rest of that first paragraph, one line per
line, at most ``MAX_REASON`` characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_REASON = 3000  # as a reason typed in Slack (the API allows 4000)
MAX_SCANNED = 64 * 1024  # characters of a reply read at all; what follows is not the person's
VERBS = {"approve": "grant", "approved": "grant", "deny": "deny", "denied": "deny"}

# Where the person's own words end: lines mail clients put below a reply.
_QUOTE_START = re.compile(
    r"""^(?:
        >                                   # a quoted line
      | On\s.+\swrote:\s*$                  # Gmail, Apple Mail, Thunderbird
      | -{2,}\s*Original\sMessage\s*-{2,}   # Outlook (plain text)
      | _{10,}\s*$                          # Outlook's rule above the quoted headers
      | From:\s                             # Outlook's quoted headers
      | --\s*$                              # a signature
      | Sent\sfrom\smy\s                    # phones
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_AFTER_WORD = " \t:,.;!-\u2013\u2014"  # what may stand between the verb and the reason
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class ReplyReading:
    """What a reply says: ``verb`` ("grant", "deny") or None, the ``reason`` after it, and the
    ``first_word`` as written (for an answer that says what was read)."""

    verb: str | None
    reason: str | None
    first_word: str | None


def own_words(text: str) -> list[str]:
    """The lines the person wrote: leading blank lines dropped, up to what is quoted or added."""
    lines = text[:MAX_SCANNED].replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        if _QUOTE_START.match(line.strip()) or _wrapped_attribution(lines, i):
            break
        out.append(line.replace("\x00", "").rstrip())
    while out and not out[0].strip():
        out.pop(0)
    return out


def _wrapped_attribution(lines: list[str], i: int) -> bool:
    """Gmail's "On <date> <name> <address> wrote:", wrapped over two lines."""
    if not lines[i].strip().startswith("On ") or i + 1 >= len(lines):
        return False
    return lines[i + 1].strip().endswith("wrote:")


def read_reply(text: str) -> ReplyReading:
    """The verb and reason of a reply's text (module docstring)."""
    lines = own_words(text)
    if not lines:
        return ReplyReading(None, None, None)
    first = lines[0].strip()
    found = _WORD.match(first)
    if found is None:
        return ReplyReading(None, None, first[:40] or None)
    word = found.group(0)
    paragraph = [first[found.end() :].lstrip(_AFTER_WORD)]
    for line in lines[1:]:
        if not line.strip():
            break
        paragraph.append(line.strip())
    reason = " ".join(part for part in paragraph if part).strip() or None
    if reason is not None and len(reason) > MAX_REASON:
        reason = reason[: MAX_REASON - 1] + "…"
    return ReplyReading(VERBS.get(word.casefold()), reason, word[:40])
