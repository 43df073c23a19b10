"""A request as every channel's card shows it: the one ``ApprovalView`` (``cards.view``) built
from the engine as things stand (its run, the approval page's address, the clock, whether
admins exist). Slack, Teams and email render it; the webhook and the web page build theirs with
their own links."""

from __future__ import annotations

from bot.api.views import approval_url
from cards.view import ApprovalView, build_view
from engine.assembly import Engine
from engine.domain.errors import NotFound
from engine.domain.model import Run, TakeoverRequest


async def approval_view(
    engine: Engine, request: TakeoverRequest, run: Run | None = None
) -> ApprovalView:
    """``request``'s view now; ``run``: its run when the caller has it already."""
    if run is None or run.id != request.run_id:
        try:
            run = await engine.queries.get_run(request.run_id)
        except NotFound:
            run = None
    return build_view(
        request,
        run,
        approval_url=approval_url(engine.config.server.public_url, request.id),
        run_url=None,
        now=engine.clock.now(),
        admins=bool(engine.config.admins),
    )
