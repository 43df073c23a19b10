"""Render an ``ApprovalView`` or a notice as an HTML fragment for the approval page."""

from __future__ import annotations

from typing import Any

from cards.render import CardRenderer
from cards.text import visible
from cards.view import ApprovalView
from cards.web.templating import WEB


def render_web_card(view: ApprovalView, *, csrf_token: str | None, form_action: str | None) -> str:
    """An HTML fragment: the card with the complete arguments and, when ``form_action`` is
    given, one form whose buttons post ``action`` = grant | deny | takeover | release with
    ``request_id``, ``reason`` and ``csrf_token``."""
    arguments = visible(view.arguments_json) if view.arguments_json is not None else None
    return WEB.get_template("web/card.html.j2").render(
        v=view, arguments=arguments, csrf_token=csrf_token, form_action=form_action
    )


def render_web_notice(name: str, notice: Any) -> str:
    """The notice template ``name`` (``notice_<kind>``) for ``notice`` (``cards.notices``)."""
    return WEB.get_template(f"web/{name}.html.j2").render(n=notice)


def _sample_card(view: ApprovalView) -> str:
    """The card as ``signoff cards render`` prints it: a sample form with a sample token."""
    return render_web_card(
        view, csrf_token="sample-csrf-token", form_action=f"/approvals/{view.request_id}/decide"
    )


RENDERER = CardRenderer(card=_sample_card, notice=render_web_notice)
