"""What a reason or summary says when a value in it is empty: nothing about it.

A template such as ``Send email to {{ args.to | plural('recipient') }}, subject {{ args.subject
}}`` read "Send email to 1 recipient, subject " when the subject was empty, and ``Refund
{{ amount }} to {{ customer }}`` read "Refund  to ". The prose environments render an empty
value (a null, an empty or blank text, an empty list or mapping, a missing variable when
lenient) as ``EMPTY``, a mark no value can carry (``shown`` removes it from values), and
``omit_empty`` then leaves out what the empty value would have said:

- a later clause (after ``,``, ``;``, `` · ``, `` — ``) whose value is a word of its own is left
  out whole: "Send email to 1 recipient, subject " is "Send email to 1 recipient";
- in the first clause, which holds the verb, the value goes with the little words that led to
  it (``to``, ``from``, ``for`` ...): "Refund  to " is "Refund", "Post 0 items to " is
  "Post 0 items".

A count of zero is not empty: "0 recipients" is said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

EMPTY = "\x00"  # printed for an empty value; never in a value (``shown``) nor a written text

_CONNECTIVES = "to|from|for|with|by|in|into|on|onto|at|of|via|as|and|or|per|about"
# The empty value with the little words and the colon that lead to it, and the space before.
_LED_TO = re.compile(rf"(?:\s*\b(?:{_CONNECTIVES})\b)*\s*:?\s*{EMPTY}", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"(\s*[,;]\s+|\s+[·\u2014\u2013|]\s+)")
_ALONE = re.compile(rf"(?:^|\s){EMPTY}+(?=$|[\s.,;:!?)])")
_EDGES = " ,;:·\u2014\u2013|"


def is_empty(value: Any) -> bool:
    """Whether ``value`` says nothing: a null, a blank text, an empty list or mapping."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, list | tuple | Mapping) and not value


def shown(value: Any) -> str:
    """``value`` as prose prints it: ``EMPTY`` when it is empty, else its text."""
    return EMPTY if is_empty(value) else str(value).replace(EMPTY, "")


def omit_empty(text: str) -> str:
    """``text`` without what its ``EMPTY`` values would have said (see the module)."""
    if EMPTY not in text:
        return text
    parts = _CLAUSE_BREAK.split(text)  # clause, break, clause, break, ...
    kept = [_LED_TO.sub("", parts[0])]
    for brk, clause in zip(parts[1::2], parts[2::2], strict=True):
        if _ALONE.search(clause):
            continue
        kept += [brk, _LED_TO.sub("", clause)]
    joined = re.sub(r"  +", " ", "".join(kept).replace(EMPTY, ""))
    return joined.lstrip(_EDGES + ".!?").rstrip(_EDGES)
