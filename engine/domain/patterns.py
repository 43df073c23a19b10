"""Regular expressions of policy conditions (``match: "re:..."``), on RE2.

A condition's pattern comes from ``app.yaml`` and the text it reads comes from an agent, so the
match must take time linear in the text whatever the pattern: Python's ``re`` backtracks, and
``re:^(\\w+\\s?)*$`` against ``"a" * 24 + "!"`` took seconds (doubling per character) while the
server stopped answering. RE2 (``google-re2``) never backtracks. What it cannot promise linear
time for it does not accept: backreferences (``\\1``), lookaround (``(?=``, ``(?!``, ``(?<=``),
possessive quantifiers and atomic groups. Such a pattern is refused when ``app.yaml`` loads, with
its YAML path (``engine.config.policies``).

RE2's ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII; ``\\pL``, ``\\p{Greek}`` and ``\\p{Z}``
name Unicode classes. ``\\z`` (not ``\\Z``) is the end of the text.

A condition reads at most ``MAX_MATCHED_CHARS`` of an argument: the policy treats a longer value
as unreadable and fails closed (``engine.domain.policy``). Text with a lone surrogate (JSON
allows ``"\\ud800"``) is matched with U+FFFD in its place, since RE2 reads UTF-8 only. This
module is the one importer of ``re2``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import re2

__all__ = ["MAX_MATCHED_CHARS", "PatternError", "TextPattern", "compile_pattern"]

MAX_MATCHED_CHARS = 64 * 1024
"""The longest text (an argument as a string, or as its canonical JSON) a condition matches."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is a config error, not a line on stderr


class PatternError(ValueError):
    """A pattern RE2 does not accept; the message says why in the reader's words."""


@dataclass(frozen=True, slots=True)
class TextPattern:
    """A compiled ``re:`` pattern; equal to another when their sources are."""

    source: str
    _compiled: Any = field(compare=False, repr=False)

    def search(self, text: str) -> bool:
        """Whether the pattern occurs anywhere in ``text`` (``re.search`` semantics)."""
        try:
            return self._compiled.search(text) is not None
        except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8 only
            readable = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return self._compiled.search(readable) is not None


_HINTS = (
    ("invalid perl operator: (?=", "lookahead is not supported"),
    ("invalid perl operator: (?!", "lookahead is not supported"),
    ("invalid perl operator: (?<", "lookbehind is not supported"),
    ("invalid perl operator: (?>", "atomic groups are not needed"),
    ("bad repetition operator: ++", "possessive quantifiers are not needed"),
    ("bad repetition operator: *+", "possessive quantifiers are not needed"),
    ("invalid escape sequence: \\Z", "write \\z (or $) for the end of the text"),
)


def compile_pattern(source: str) -> TextPattern:
    """``source`` compiled by RE2, or ``PatternError`` saying why it cannot be."""
    try:
        return TextPattern(source, re2.compile(source, options=_OPTIONS))
    except re2.error as exc:
        raise PatternError(_reason(exc)) from exc
    except UnicodeError as exc:  # a lone surrogate: not text RE2 can read
        raise PatternError("not valid text (a lone surrogate)") from exc


def _reason(exc: Any) -> str:
    raw = exc.args[0] if exc.args else str(exc)
    said = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if said.startswith("invalid escape sequence: \\") and said[-1:].isdigit():
        return f"{said}: backreferences are not supported (RE2 matches in linear time)"
    for prefix, hint in _HINTS:
        if said.startswith(prefix):
            return f"{said}: {hint} (RE2 matches in linear time)"
    return said
