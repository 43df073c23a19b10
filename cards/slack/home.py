"""A person's Slack Home tab, and the "Show arguments" dialog it opens, as Block Kit views.

The Home tab lists the requests waiting for the viewer (``HomePage.pending``: one page, newest
first; a run they took over comes first, with its Release button), each with its summary, a
short preview of the exact arguments, the time left and the card's own buttons (the same
``action_id`` values, so a click there decides exactly like a click on the card), then the
viewer's recent decisions. Slack has no fold: the preview is the first ``PREVIEW_CHARS`` of the
canonical arguments, and "Show arguments" opens a dialog with all of them
(``render_arguments_view``). A Home tab holds at most 100 blocks: a page shows ``PAGE_SIZE``
requests and a "More" button publishes the next page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cards.render import CardTooLarge
from cards.slack.limits import SLACK_MAX_SECTION_TEXT, check_blocks
from cards.slack.templating import SLACK, slack_code_edges
from cards.templating import render_json
from cards.text import Flavor, excerpt_arguments, truncate
from cards.view import ApprovalView

VIEW_MAX_BLOCKS = 100  # a Home tab or a modal (https://docs.slack.dev/reference/views)
VIEW_MAX_METADATA = 3000
PER_REQUEST = 4  # blocks: summary, time left, buttons, divider
PAGE_SIZE = 20  # 80 blocks of requests, and room for the header, notice, pages and decisions
RECENT = 5  # recent decisions shown
PREVIEW_CHARS = 300
ARGUMENTS_CHUNK = SLACK_MAX_SECTION_TEXT - 6 - 10  # as the card's: fences and edge escapes
ARGUMENTS_SECTIONS = 20  # in the dialog; more is left to the approval page
ARGUMENTS_TITLE = "Arguments"


@dataclass(frozen=True)
class HomePage:
    """What one Home tab shows (module docstring); texts are raw, the template escapes them,
    except ``notice``, which is mrkdwn already (a reply to a click, escaped where written)."""

    user_id: str
    linked: bool
    pending: tuple[ApprovalView, ...] = ()  # this page's, newest first
    total: int = 0  # pending requests on all pages
    page: int = 0
    recent: tuple[ApprovalView, ...] = ()
    notice: str | None = None
    page_size: int = PAGE_SIZE

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


def render_slack_home(home: HomePage) -> dict[str, Any]:
    """The ``view`` for ``views.publish``; ``CardTooLarge`` rather than a view Slack refuses."""
    previews = {v.request_id: _preview(v) for v in home.pending if v.arguments_json}
    notice = truncate(home.notice, 2900, Flavor.PLAIN) if home.notice else None
    page = dataclasses.replace(home, notice=notice)
    view: dict[str, Any] = render_json(SLACK, "slack/home.json.j2", h=page, previews=previews)
    _check_view(view)
    return view


def render_arguments_view(view: ApprovalView) -> dict[str, Any]:
    """A dialog (``views.open``) with a request's exact arguments, in code blocks."""
    canonical = view.arguments_json or ""
    excerpt = excerpt_arguments(
        canonical,
        Flavor.MRKDWN_CODE,
        budget=ARGUMENTS_SECTIONS * ARGUMENTS_CHUNK,
        chunk_size=ARGUMENTS_CHUNK,
    )
    chunks = [slack_code_edges(c) for c in excerpt.chunks]
    dialog: dict[str, Any] = render_json(
        SLACK, "slack/arguments.json.j2", v=view, chunks=chunks, omitted=excerpt.omitted
    )
    _check_view(dialog)
    return dialog


def _preview(view: ApprovalView) -> str:
    canonical = view.arguments_json or ""
    excerpt = excerpt_arguments(
        canonical, Flavor.MRKDWN_CODE, budget=PREVIEW_CHARS, chunk_size=PREVIEW_CHARS
    )
    shown = slack_code_edges(excerpt.text)
    return shown + (" …" if excerpt.omitted else "")


def _check_view(view: dict[str, Any]) -> None:
    """A view's limits: 100 blocks, each block's own (``check_blocks``), its metadata."""
    blocks: Sequence[Any] = view.get("blocks") or []
    problems = [p for block in blocks for p in check_blocks([block])]
    if len(blocks) > VIEW_MAX_BLOCKS:
        problems.append(f"blocks: {len(blocks)} blocks, limit {VIEW_MAX_BLOCKS}")
    if len(str(view.get("private_metadata", ""))) > VIEW_MAX_METADATA:
        problems.append(f"private_metadata: longer than {VIEW_MAX_METADATA} characters")
    if problems:
        raise CardTooLarge(problems)
