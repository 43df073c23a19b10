"""The renderers of every channel, keyed by channel name, and what they share.

A channel that shows cards has a package ``cards/<channel>/`` whose ``render`` module
registers one ``CardRenderer`` as ``RENDERER``: its card format (Block Kit, Adaptive Card, HTML,
...) for the one ``ApprovalView``, and its rendering of each notice (``cards.notices``; the
wording is shared, in ``cards/templates/words.j2``). Nothing here names a channel: the
registry is the set of those packages, so adding a format adds a package.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cards.notices import NOTICES, NoticeKind
from cards.view import ApprovalView

__all__ = [
    "CardRenderer",
    "CardTooLarge",
    "NoticeKind",
    "card_channels",
    "render_card",
    "render_notice",
    "renderer",
]


class CardTooLarge(ValueError):
    """A rendering breaks a platform limit even without its arguments."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class CardRenderer:
    """One channel's card format. ``card``: the approval card for a view (with sample page
    values where the format needs a page's, as ``signoff cards render`` prints it);
    ``notice(name, notice)``: a notice dataclass through its template ``notice_<kind>``."""

    card: Callable[[ApprovalView], Any]
    notice: Callable[[str, Any], Any]


@functools.cache
def card_channels() -> tuple[str, ...]:
    """The channels with a card format: the packages under ``cards/`` with a ``render``."""
    here = Path(__file__).parent
    return tuple(
        sorted(
            info.name
            for info in pkgutil.iter_modules([str(here)])
            if info.ispkg and (here / info.name / "render.py").exists()
        )
    )


def renderer(channel: str) -> CardRenderer:
    """``channel``'s renderer; ``ValueError`` for a channel without a card format."""
    if channel not in card_channels():
        raise ValueError(f"unknown platform {channel!r}")
    found = importlib.import_module(f"cards.{channel}.render").RENDERER
    assert isinstance(found, CardRenderer)
    return found


def render_card(channel: str, view: ApprovalView) -> Any:
    """``view`` as ``channel`` shows it."""
    return renderer(channel).card(view)


def render_notice(kind: NoticeKind | str, platform: str, **data: Any) -> dict[str, Any] | str:
    """A thread notice. ``data`` are the fields of the kind's dataclass in ``cards.notices``.

    Slack: ``{"text", "blocks"}``; Teams: an Adaptive Card; web: an HTML fragment.
    """
    notice = NOTICES[NoticeKind(kind)](**data)
    rendered: dict[str, Any] | str = renderer(platform).notice(
        f"notice_{NoticeKind(kind).value}", notice
    )
    return rendered
