"""Running one step: the call itself, the policy that tries it again, the gate's question
about it, and the callback a held call announces its outcome with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.domain.errors import SignoffError, StepError, StoreError
from engine.domain.expressions import render_text
from engine.domain.model import Node, NodeType, OutboxMessage, Run, RunStatus
from engine.ports import ChatMessage, ConnectorCall, GateQuestion

if TYPE_CHECKING:
    from engine.services.context import Services


MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a step that failed with a retryable ``StepError`` is tried again: up to
    ``max_attempts`` calls in all, each after ``backoff(attempt)`` seconds on the injected
    clock (a test moves time instead of sleeping). Every attempt is its own idempotency key
    (``{run}:{step}:{attempt}``); a failure that is not retryable is never tried again."""

    max_attempts: int = MAX_ATTEMPTS
    delays: tuple[float, ...] = (0.2, 1.0)  # seconds after the 1st, 2nd (and later) failure

    def retries(self, exc: StepError, attempt: int) -> bool:
        """Whether the failure of attempt ``attempt`` (1, 2 ...) is tried again."""
        return exc.retryable and attempt < self.max_attempts

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after attempt ``attempt`` failed, before the next."""
        return self.delays[min(attempt, len(self.delays)) - 1]


RETRY = RetryPolicy()


def gate_question(run: Run, node: Node, args: Any, context: dict[str, Any]) -> GateQuestion:
    """What the confidence gate is asked about ``node`` about to run with ``args``."""
    return GateQuestion(
        run_id=run.id,
        workflow=run.workflow,
        agent=run.agent,
        step_id=node.id,
        node_type=node.type.value,
        connector=node.connector,
        action=node.action,
        args=args,
        prior_outputs={k: v["output"] for k, v in context["steps"].items()},
        requires_confidence=node.requires_confidence,
        channels=node.channels,
        approvers=node.approvers,
    )


async def call_step(
    s: Services, run: Run, node: Node, args: Any, attempt: int, context: dict[str, Any]
) -> Any:
    """Perform a tool, connector or ai-step node once, with the idempotency key of this
    attempt; every failure comes out as ``StepError``."""
    key = f"{run.id}:{node.id}:{attempt}"
    try:
        if node.type == NodeType.CONNECTOR:
            connector = s.connectors.get(node.connector or "")
            return await connector.call(
                ConnectorCall(
                    connector=node.connector or "",
                    action=node.action or "",
                    args=args,
                    idempotency_key=key,
                    run_id=run.id,
                    step_id=node.id,
                )
            )
        if node.type == NodeType.TOOL:
            return await s.call_python(node, args if isinstance(args, dict) else {})
        if node.type == NodeType.AI_STEP:
            if s.sampler is None:
                raise StepError("no LLM is configured (llm.baseUrl, llm.model)")
            prompt = render_text(node.prompt or "", context, strict=True)
            text = await s.sampler.complete([ChatMessage("user", prompt)])
            return {"text": text}
    except StoreError:
        raise  # our own database failed, not the step: the worker advances the run again
    except SignoffError as exc:
        if isinstance(exc, StepError):
            raise
        raise StepError(exc.message) from exc
    except Exception as exc:  # a tool's own exception: the step fails, the worker lives
        raise StepError(f"{node.id}: {type(exc).__name__}: {exc}") from exc
    raise StepError(f"node type {node.type.value} cannot be executed")


def callback_message(run: Run, status: RunStatus) -> list[OutboxMessage]:
    """A held call (workflow ``call:...``, see ``engine.domain.call_workflow``) that gave a
    ``callbackUrl``: its signed outcome (``engine.adapters.callbacks``) is queued in the
    transaction that makes the run final, so a crash neither loses nor repeats it. Other runs never
    call out."""
    url = run.input.get("callbackUrl") if run.workflow.startswith("call:") else None
    if not isinstance(url, str) or not url:
        return []
    return [
        OutboxMessage(
            channel=f"callback:{run.id}",
            kind="callback",
            dedupe_key=f"callback:{run.id}",
            payload={"url": url, "executionId": run.id, "status": status.value},
            run_id=run.id,
        )
    ]
