"""The admins' chat commands for the gate: one parser and executor for Slack and Teams.

    gate status [agent=<name>] [node=<type>]
    gate on | gate off
    gate threshold <0..1> [agent=<name>] [node=<tool|connector|ai-step>]
    gate estimator verbalization|self-consistency
    gate samples <1..9>
    gate calibrate on|off
    help

Every setting command also takes ``agent=<name>`` or ``node=<type>`` (one of them) to set a
per-agent or per-node-type override instead of a global one. A front end hands over the text
after its own prefix (the slash command, the bot mention) and the acting ``Principal``, and
posts ``CommandResult.text`` back. ``help`` and ``status`` are open to anyone the front end
knows (reading is harmless, and the REST ``GET /v1/gate`` is readable by any role too); every
change needs an admin. Bad arguments give a usage line and non-admins a refusal; nothing
changes then. A change is stored and audited through ``GateSettings.change`` (who, when, old,
new), the same path as ``PATCH /v1/gate``, so chat and API cannot drift: ``samples`` outside
1..9 becomes 5 with a warning there too, as the design says of every layer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engine.domain.confidence import Estimator
from engine.domain.errors import CommandUsageError, InvalidRequest
from engine.domain.model import Principal
from engine.gate.gate import ConfidenceGate, GateStatus
from engine.gate.settings import GATED_NODE_TYPES, Change, Scope, check_scope

USAGE = (
    "gate status",
    "gate on | gate off",
    "gate threshold <0..1> [agent=<name>] [node=<tool|connector|ai-step>]",
    "gate estimator verbalization|self-consistency",
    "gate samples <1..9>",
    "gate calibrate on|off",
    "help",
)
HELP_TEXT = (
    "Confidence gate commands:\n"
    + "\n".join(f"  {line}" for line in USAGE)
    + "\nA setting command may end with agent=<name> or node=<type> to override it for one "
    "agent or one kind of step. Changes need an admin."
)
_ON_OFF = {"on": True, "off": False}


class Outcome(StrEnum):
    STATUS = "status"  # read only: the effective settings
    HELP = "help"  # the grammar
    CHANGED = "changed"  # stored and audited
    UNCHANGED = "unchanged"  # valid, and already so: nothing written
    USAGE = "usage"  # bad arguments: nothing changed
    REFUSED = "refused"  # not an admin: nothing changed


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What to post back. ``ok`` is False for a usage line or a refusal."""

    outcome: Outcome
    text: str
    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome not in (Outcome.USAGE, Outcome.REFUSED)


@dataclass(frozen=True, slots=True)
class GateCommand:
    """A parsed command: ``status``, ``help`` or ``set`` (``values`` at ``scope``/``key``)."""

    action: str
    values: Mapping[str, Any] = field(default_factory=dict)
    scope: Scope = Scope.GLOBAL
    key: str = ""


def parse(text: str) -> GateCommand:
    """Parse one command; ``CommandUsageError`` for anything that does not fit the grammar."""
    words = text.split()
    lowered = [w.lower() for w in words]
    if not lowered or lowered in (["help"], ["gate"], ["gate", "help"]):
        return GateCommand("help")
    if lowered[0] != "gate":
        raise _usage(f"unknown command {words[0]!r}")
    verb = lowered[1]
    args, options = _split(words[2:], verb)
    scope, key = _scope(options, verb)
    if verb == "status":
        _arity(args, 0, verb)
        return GateCommand("status", scope=scope, key=key)
    if verb in _ON_OFF:
        _arity(args, 0, verb)
        return GateCommand("set", {"enabled": _ON_OFF[verb]}, scope, key)
    if verb not in ("threshold", "estimator", "samples", "calibrate"):
        raise _usage(f"unknown gate command {words[1]!r}")
    _arity(args, 1, verb)
    return GateCommand("set", {verb: _value(verb, args[0])}, scope, key)


def _value(verb: str, raw: str) -> Any:
    if verb == "threshold":
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not 0.0 <= value <= 1.0:
            raise _usage(f"the threshold must be a number from 0 to 1, got {raw!r}", verb)
        return value
    if verb == "estimator":
        if raw.lower() not in {e.value for e in Estimator}:
            raise _usage(f"unknown estimator {raw!r}", verb)
        return raw.lower()
    if verb == "samples":
        try:
            return int(raw)  # outside 1..9 becomes 5 with a warning, as everywhere
        except ValueError:
            raise _usage(f"samples must be a whole number, got {raw!r}", verb) from None
    if raw.lower() not in _ON_OFF:
        raise _usage(f"calibrate takes on or off, got {raw!r}", verb)
    return _ON_OFF[raw.lower()]


def _split(words: list[str], verb: str) -> tuple[list[str], dict[str, str]]:
    args: list[str] = []
    options: dict[str, str] = {}
    for word in words:
        name, eq, value = word.partition("=")
        if not eq:
            args.append(word)
            continue
        name = name.lower()
        if name not in ("agent", "node") or not value or name in options:
            raise _usage(f"unexpected {word!r}", verb)
        options[name] = value
    return args, options


def _scope(options: dict[str, str], verb: str) -> tuple[Scope, str]:
    if len(options) > 1:
        raise _usage("name agent= or node=, not both", verb)
    if "node" in options:
        node = options["node"].lower()
        if node not in GATED_NODE_TYPES:
            raise _usage(f"node must be one of {', '.join(GATED_NODE_TYPES)}", verb)
        return Scope.NODE_TYPE, node
    if "agent" in options:
        return check_scope(Scope.AGENT.value, options["agent"])
    return Scope.GLOBAL, ""


def _arity(args: list[str], count: int, verb: str) -> None:
    if len(args) != count:
        raise _usage("wrong number of arguments", verb)


def _usage(reason: str, verb: str | None = None) -> CommandUsageError:
    lines = [line for line in USAGE if verb and line.split(" ")[1:2] == [verb]]
    if verb in _ON_OFF:
        lines = ["gate on | gate off"]
    usage = lines[0] if lines else "; ".join(USAGE)
    return CommandUsageError(f"{reason}. Usage: {usage}")


async def run_command(gate: ConfidenceGate, text: str, who: Principal) -> CommandResult:
    """Parse and execute one chat command as ``who``."""
    try:
        command = parse(text)
    except CommandUsageError as exc:
        return CommandResult(Outcome.USAGE, exc.message)
    if command.action == "help":
        return CommandResult(Outcome.HELP, HELP_TEXT)
    if command.action == "status":  # anyone known may read the settings
        agent = command.key if command.scope == Scope.AGENT else None
        node = command.key if command.scope == Scope.NODE_TYPE else None
        return CommandResult(Outcome.STATUS, status_text(await gate.status(agent, node)))
    if not who.is_admin:
        return CommandResult(
            Outcome.REFUSED, "Only an admin can change the confidence gate; nothing changed."
        )
    try:
        result = await gate.settings.change(who, command.values, command.scope, command.key)
    except InvalidRequest as exc:
        return CommandResult(Outcome.USAGE, exc.message)
    where = _where(command.scope, command.key)
    warnings = "".join(f"\nWarning: {w}" for w in result.warnings)
    if not result.changes:
        (name, value), *_ = result.requested.items()
        text = f"Gate {name} is already {_shown(name, value)}{where}; nothing changed.{warnings}"
        return CommandResult(Outcome.UNCHANGED, text, warnings=result.warnings)
    lines = [
        f"Gate {c.setting} set to {_shown(c.setting, c.new)}{where} by {who.name} "
        f"(previous override: {'none' if c.old is None else _shown(c.setting, c.old)})."
        for c in result.changes
    ]
    return CommandResult(
        Outcome.CHANGED, "\n".join(lines) + warnings, result.changes, result.warnings
    )


def status_text(status: GateStatus) -> str:
    """The ``gate status`` reply: each effective value with the layer it came from."""
    e, src = status.effective, status.effective.sources
    scope = ""
    if status.agent:
        scope = f" for agent {status.agent}"
    elif status.node_type:
        scope = f" for {status.node_type} steps"
    lines = [
        f"Confidence gate{scope}: {'ON' if e.enabled else 'OFF'} ({src['enabled']})",
        f"threshold {e.threshold:g} ({src['threshold']}); estimator {e.estimator.value} "
        f"({src['estimator']}); samples {e.samples} ({src['samples']}); calibration "
        f"{'on' if e.calibrate else 'off'} ({src['calibrate']})",
    ]
    if not status.llm_configured:
        lines.append("LLM: not configured, so self-consistency falls back to verbalization")
    lines.append(
        "Diverted steps go to their own channels, else "
        + (", ".join(e.channels) + " (gate.channels)" if e.channels else "nowhere (auto-approve)")
    )
    if status.overrides:
        shown = [
            f"{o.setting}={_shown(o.setting, o.value)}{_where(o.scope, o.key)} (by {o.updated_by})"
            for o in status.overrides
        ]
        lines.append("Overrides: " + "; ".join(shown))
    lines += [f"Warning: {w}" for w in status.warnings]
    return "\n".join(lines)


def _where(scope: Scope, key: str) -> str:
    if scope == Scope.AGENT:
        return f" for agent {key}"
    if scope == Scope.NODE_TYPE:
        return f" for {key} steps"
    return ""


def _shown(name: str, value: Any) -> str:
    if name in ("enabled", "calibrate"):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
