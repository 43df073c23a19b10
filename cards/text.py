"""Text as the cards show it: canonical JSON, visible escapes, platform escaping, truncation.

Three rules hold for every string that came from outside Signoff (arguments, reasons, notes,
names, errors) before it reaches a card:

1. ``visible`` first: a character that cannot be seen, or that changes how its neighbours are
   drawn (zero-width, bidi controls such as U+202E, control characters, unusual spaces,
   combining marks with nothing to sit on), is written as ``\\uXXXX``. Inside the canonical
   JSON of the arguments those escapes are JSON escapes of the same characters, so the shown
   text still reads back as the exact arguments; ``undo_visible`` maps it back.
2. Then the platform's own escaping (Slack mrkdwn ``&<>``; HTML is left to jinja2 autoescape;
   Adaptive Card text goes into ``TextRun``, which has no markdown).
3. Truncation counts what the platform counts and cuts only between *atoms*: one character,
   one JSON escape (``\\"``, ``\\u001f``), one visible escape (a surrogate pair is one atom) or
   one entity (``&amp;``). Nothing is ever cut in half.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

ELLIPSIS = "…"

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt) beyond the C* categories:
# Hangul fillers, variation selectors, the combining grapheme joiner, Khmer vowels inherent,
# Mongolian free variation selectors. U+2800 (braille blank) is drawn as blank space too.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0D),  # FE0E/FE0F (text/emoji presentation) are treated as marks below
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE0FFF),
)
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_KEPT = frozenset({"\n", "\t", " "})
MAX_MARKS = 4  # combining marks kept on one base character; the rest are shown as escapes


def canonical_json(value: object) -> str:
    """The arguments as everyone sees and hashes them: sorted keys, two-space indent, UTF-8."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, separators=(",", ": "))


def _escape_char(ch: str) -> str:
    cp = ord(ch)
    if cp > 0xFFFF:  # a JSON-compatible surrogate pair, so the arguments stay valid JSON
        cp -= 0x10000
        return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
    return f"\\u{cp:04x}"


def _class(codepoints: Iterable[int]) -> str:
    parts: list[str] = []
    start = prev = -2
    for cp in [*codepoints, -10]:
        if cp == prev + 1:
            prev = cp
            continue
        if start >= 0:
            parts.append(f"\\u{start:04x}" if start == prev else f"\\u{start:04x}-\\u{prev:04x}")
        start = prev = cp
    return "".join(parts)


_IGNORABLE = frozenset(cp for lo, hi in _IGNORABLE_RANGES for cp in range(lo, hi + 1))
_HIDDEN, _MARK, _OTHER = 0, 1, 2


@functools.lru_cache(maxsize=65536)
def _kind(ch: str) -> int:
    category = unicodedata.category(ch)
    if ch in _KEPT:
        return _OTHER
    if category in _HIDDEN_CATEGORIES or ord(ch) in _IGNORABLE:
        return _HIDDEN
    if category[0] == "M" or ch in "\ufe0e\ufe0f":
        return _MARK
    return _OTHER


@functools.cache
def _candidates() -> re.Pattern[str]:
    """Runs of characters that may need an escape. The class lists the BMP exactly and takes
    every astral character as a candidate: a BMP-only class compiles to a bitmap, which is
    about 50 times faster on megabyte arguments than a class with astral ranges."""
    bmp = [cp for cp in range(0x10000) if _kind(chr(cp)) != _OTHER]
    _kind.cache_clear()
    return re.compile(f"[{_class(bmp)}\\U00010000-\\U0010ffff]+")


def _attachable(ch: str) -> bool:
    """Whether a combining mark after ``ch`` sits on a letter rather than on punctuation."""
    return bool(ch) and not (ch.isascii() and not ch.isalnum()) and _kind(ch) == _OTHER


def _run_replacements(match: re.Match[str]) -> list[str]:
    """What each character of one candidate run is shown as."""
    start = match.start()
    attach = _attachable(match.string[start - 1] if start else "")
    marks = 0
    out: list[str] = []
    for ch in match.group():
        kind = _kind(ch)
        if kind == _OTHER:
            out.append(ch)
            attach, marks = _attachable(ch), 0
        elif kind == _MARK and attach and marks < MAX_MARKS:
            out.append(ch)
            marks += 1
        else:
            # Hidden, or a mark that would draw over punctuation, a quote or an escape.
            out.append(_escape_char(ch))
            attach = False
    return out


def visible(text: str) -> str:
    """``text`` with every invisible or look-altering character written as ``\\uXXXX``."""
    return _candidates().sub(lambda m: "".join(_run_replacements(m)), text)


def visible_chars(text: str) -> list[str]:
    """``visible`` character by character: element *i* is what ``text[i]`` is shown as."""
    shown = list(text)
    for match in _candidates().finditer(text):
        shown[match.start() : match.end()] = _run_replacements(match)
    return shown


_UNDO = re.compile(
    r"\\\\|\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})"
)


def undo_visible(shown: str) -> str:
    """Map the visible escapes in shown canonical JSON back to characters.

    JSON's own escapes stay: a backslash pair is one unit, and ``\\u0000``-``\\u001f`` are what
    ``json.dumps`` itself writes for control characters, which ``visible`` never adds there.
    """

    def back(m: re.Match[str]) -> str:
        if m.group(1):
            high, low = int(m.group(1), 16), int(m.group(2), 16)
            return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        if m.group(3):
            cp = int(m.group(3), 16)
            return m.group() if cp < 0x20 else chr(cp)
        return m.group()

    return _UNDO.sub(back, shown)


_MRKDWN = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape_mrkdwn(text: str) -> str:
    """Slack's three control characters as entities, so nothing can become a link or mention."""
    return text.translate(_MRKDWN)


class Flavor(Enum):
    """Where shown text goes; decides the escaping applied after ``visible``."""

    PLAIN = "plain"  # Slack plain_text, HTML (autoescaped later by jinja2)
    MRKDWN = "mrkdwn"  # Slack mrkdwn text
    MRKDWN_CODE = "mrkdwn_code"  # Slack mrkdwn inside a ``` code block
    CARD_TEXT = "card_text"  # Adaptive Card TextRun text (Teams)


# Adaptive Card hosts replace {{DATE(...)}} / {{TIME(...)}} in text: break "{{" + 4 capitals + "(".
_AC_FUNCTION = re.compile(r"\{(?=\{[A-Z]{4}\()")
# Two or more backticks could close a Slack code block early.
_BACKTICKS = re.compile(r"`{2,}")


def _apply_flavor(raw: str, shown: list[str], flavor: Flavor) -> list[str]:
    if flavor is Flavor.CARD_TEXT:
        for m in _AC_FUNCTION.finditer(raw):
            shown[m.start()] = _escape_char("{")
    elif flavor is Flavor.MRKDWN_CODE:
        for m in _BACKTICKS.finditer(raw):
            shown[m.start() : m.end()] = [_escape_char("`")] * (m.end() - m.start())
    if flavor in (Flavor.MRKDWN, Flavor.MRKDWN_CODE):
        shown = [s.translate(_MRKDWN) for s in shown]
    return shown


Atom = tuple[int, str]  # (characters of the source it stands for, what is shown)


def atoms(text: str, flavor: Flavor, *, json_escapes: bool = False) -> list[Atom]:
    """``text`` as indivisible shown units. ``json_escapes``: ``text`` is JSON, keep its
    backslash escapes whole."""
    shown = _apply_flavor(text, visible_chars(text), flavor)
    out: list[Atom] = []
    i, n = 0, len(text)
    while i < n:
        if json_escapes and text[i] == "\\" and i + 1 < n:
            size = 6 if text[i + 1] == "u" else 2
            out.append((min(size, n - i), text[i : i + size]))
            i += size
        else:
            out.append((1, shown[i]))
            i += 1
    return out


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: never less than the code point count platforms may use."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def truncate(text: str, limit: int, flavor: Flavor, cost: Callable[[str], int] = utf16_len) -> str:
    """Shown ``text`` in at most ``limit`` cost units; a cut one ends with an ellipsis."""
    window = text[: limit + 16]  # every source character costs at least one unit
    parts = atoms(window, flavor)
    total = sum(cost(s) for _, s in parts)
    if len(window) == len(text) and total <= limit:
        return "".join(s for _, s in parts)
    budget = limit - cost(ELLIPSIS)
    if budget < 0:
        return ""
    kept: list[str] = []
    for _, s in parts:
        budget -= cost(s)
        if budget < 0:
            break
        kept.append(s)
    return "".join(kept) + ELLIPSIS


@dataclass(frozen=True)
class Excerpt:
    """The part of the canonical arguments that fits, in chunks, and how much was left out."""

    chunks: tuple[str, ...]
    omitted: int  # characters of the canonical JSON not shown; 0 when complete

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def excerpt_arguments(
    canonical: str,
    flavor: Flavor,
    *,
    budget: int,
    chunk_size: int,
    cost: Callable[[str], int] = utf16_len,
) -> Excerpt:
    """Fit shown canonical JSON into ``budget`` cost units, split in chunks of ``chunk_size``.

    A chunk ends after a newline when one falls in its second half, so chunks are whole lines
    where they can be; a single long line is split between atoms.
    """
    window = canonical[: max(budget, 0) + 16]
    chunks: list[str] = []
    current: list[Atom] = []
    current_cost = used = consumed = 0
    last_newline = -1
    for raw_len, piece in atoms(window, flavor, json_escapes=True):
        c = cost(piece)
        if used + c > budget:
            break
        if current and current_cost + c > chunk_size:
            cut = len(current)
            if last_newline >= len(current) // 2:
                rest = sum(cost(s) for _, s in current[last_newline + 1 :])
                if rest + c <= chunk_size:
                    cut = last_newline + 1
            chunks.append("".join(s for _, s in current[:cut]))
            current = current[cut:]
            current_cost = sum(cost(s) for _, s in current)
            last_newline = -1  # the newline cut on is gone; what is left has none
        current.append((raw_len, piece))
        current_cost += c
        used += c
        consumed += raw_len
        if piece == "\n":
            last_newline = len(current) - 1
    if current:
        chunks.append("".join(s for _, s in current))
    return Excerpt(chunks=tuple(chunks), omitted=len(canonical) - consumed)


# -- text from agents -------------------------------------------------------------------------
# A card's title and reason come from the agent (its summary, the node's reason rendered with
# the run's input). Signoff's own status lines ("✅ Approved by alice", "Taken over by ...")
# start a line with a status emoji or phrase; agent text must not be able to draw one. So it is
# shown on one line (line breaks collapsed), and when it begins like a status line it is shown
# in quotation marks, as something said, not something that happened.
STATUS_MARKS = (
    *("✅", "⛔", "🙋", "▶", "🚫", "⌛", "⏳", "⏰", "📣"),
    *("\u2139", "❌", "⚠", "👍", "👎"),  # U+2139 information source
)
STATUS_PHRASES = (
    "approved",
    "denied",
    "taken over",
    "took over",
    "released",
    "cancelled",
    "canceled",
    "expired",
    "escalated",
    "reminder",
    "waiting for",
    "signoff",
)
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")
_LEADING_MARKUP = re.compile(r"^[\s*_~`>•·|#-]+")


def agent_text(text: str) -> str:
    """Agent-supplied ``text`` as a card may show it: one line, and quoted when it would read
    as one of Signoff's status lines (``✅ Approved by alice`` -> ``“✅ Approved by alice”``)."""
    line = _LINE_BREAKS.sub(" ", text).strip()
    start = _LEADING_MARKUP.sub("", line).lower()
    if start.startswith(STATUS_MARKS) or start.startswith(STATUS_PHRASES):
        return f"“{line}”"
    return line
