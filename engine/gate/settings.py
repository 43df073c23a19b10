"""The gate's settings: where each value comes from, and how admins change them at runtime.

Layers, lowest to highest (a higher layer wins wherever it says something):

    1. built-in defaults          off, threshold 0.75, self-consistency, 5 samples, no calibration
    2. ``app.yaml`` ``gate:``       what the project file says
    3. environment                ``SIGNOFF_CONFIDENCE_*`` (as captured in ``AppConfig.gate_env``;
                                  this module never reads ``os.environ``)
    4. runtime overrides          set by admins (``PATCH /v1/gate``, chat ``gate ...`` commands),
                                  stored in ``gate_overrides`` and audited; among them the most
                                  specific wins: global, then node type, then agent

so an operator's environment beats the checked-in file, and an admin's decision at runtime beats
both, for everyone (global), for one kind of step (``node_type=connector``) or for one agent.
Every effective value carries its source: ``default``, ``app.yaml``, ``env``,
``override:global``, ``override:node_type=connector`` or ``override:agent=<name>``.
``gate.channels`` and ``gate.approvers`` come from ``app.yaml`` only.

Bad values never stop the service: an environment value that does not parse is logged and
ignored; ``samples`` outside 1..9 (from any layer) becomes 5 with a warning. A threshold outside
[0, 1] cannot get in: ``app.yaml`` refuses it at load, an env value is ignored with a warning, and
a runtime change is refused with ``InvalidRequest`` naming the field.

Overrides are read through a short cache (``cache_seconds``, 1 s by default, on the injected
clock), invalidated at once by a change made through this object. So the hot path adds no
database query per step, not even while the gate is off, and a change made on another replica
is seen within a second.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from engine.config.sections import GateConfig
from engine.domain.approvers import agent_layers
from engine.domain.confidence import Estimator
from engine.domain.errors import Forbidden, InvalidRequest
from engine.domain.model import NodeType, Principal
from engine.ports import Clock
from engine.ports.store import GateStore

log = logging.getLogger(__name__)

SETTINGS = ("enabled", "threshold", "estimator", "samples", "calibrate")
DEFAULTS: Mapping[str, Any] = {
    "enabled": False,
    "threshold": 0.75,
    "estimator": Estimator.SELF_CONSISTENCY.value,
    "samples": 5,
    "calibrate": False,
}
GATED_NODE_TYPES = (NodeType.TOOL.value, NodeType.CONNECTOR.value, NodeType.AI_STEP.value)
MIN_SAMPLES, MAX_SAMPLES, FALLBACK_SAMPLES = 1, 9, 5
_ENV = {
    "enabled": "SIGNOFF_CONFIDENCE_GATE",
    "threshold": "SIGNOFF_CONFIDENCE_GATE_THRESHOLD",
    "estimator": "SIGNOFF_CONFIDENCE_ESTIMATOR",
    "samples": "SIGNOFF_CONFIDENCE_SAMPLES",
    "calibrate": "SIGNOFF_CONFIDENCE_CALIBRATE",
}
_TRUE = frozenset({"1", "true", "on", "yes"})
_FALSE = frozenset({"0", "false", "off", "no", ""})


class Scope(StrEnum):
    GLOBAL = "global"  # everyone
    NODE_TYPE = "node_type"  # one kind of step: tool, connector, ai-step
    AGENT = "agent"  # one agent (the run's agent)


@dataclass(frozen=True, slots=True)
class Override:
    scope: Scope
    key: str  # "" for global
    setting: str
    value: Any
    updated_by: str
    updated_at: datetime

    @property
    def source(self) -> str:
        if self.scope == Scope.GLOBAL:
            return "override:global"
        return f"override:{self.scope.value}={self.key}"


@dataclass(frozen=True, slots=True)
class EffectiveSettings:
    """The settings for one (agent, node type), each with the layer it came from."""

    enabled: bool
    threshold: float
    estimator: Estimator
    samples: int
    calibrate: bool
    channels: tuple[str, ...]
    approvers: tuple[str, ...]
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Change:
    """One stored change: ``old``/``new`` are the override values (None: no override)."""

    setting: str
    scope: Scope
    key: str
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class ChangeResult:
    changes: tuple[Change, ...]  # only what actually changed; an equal value is not rewritten
    warnings: tuple[str, ...] = ()
    requested: Mapping[str, Any] = field(default_factory=dict)  # as stored (after fallbacks)


class GateSettings:
    """Resolves the layers for a step and applies admins' changes (validated, audited)."""

    def __init__(
        self,
        config: GateConfig,
        env: Mapping[str, str],
        store: GateStore,
        clock: Clock,
        *,
        cache_seconds: float = 1.0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.channels = config.channels
        self.approvers = config.approvers
        self.cache = timedelta(seconds=cache_seconds)
        warnings: list[str] = []
        self._base = _base_layers(config, env, warnings)
        self.warnings = tuple(warnings)
        for warning in self.warnings:
            log.warning("confidence gate: %s", warning)
        self._overrides: tuple[Override, ...] = ()
        self._loaded_at: datetime | None = None
        self._lock = asyncio.Lock()
        # ``effective`` for each (agent, node type), for the snapshot ``_resolved_for``.
        self._resolved_for: tuple[Override, ...] | None = None
        self._resolved: dict[tuple[str | None, str | None], EffectiveSettings] = {}

    # -- reading -------------------------------------------------------------------------------

    async def effective(
        self, agent: str | None = None, node_type: str | None = None, *, fresh: bool = False
    ) -> EffectiveSettings:
        """The settings that apply to a step of ``node_type`` in a run of ``agent`` (either may
        be None: the global view)."""
        if fresh:
            self.invalidate()
        overrides = await self.overrides()
        if overrides is not self._resolved_for:  # a new snapshot: resolve every view again
            self._resolved_for, self._resolved = overrides, {}
        found = self._resolved.get((agent, node_type))
        if found is None:
            found = self._resolved[agent, node_type] = self.resolve(overrides, agent, node_type)
        return found

    def resolve(
        self, overrides: tuple[Override, ...], agent: str | None, node_type: str | None
    ) -> EffectiveSettings:
        values = dict(self._base)
        layers = [(Scope.GLOBAL, "")]
        if node_type is not None:
            layers.append((Scope.NODE_TYPE, node_type))
        if agent is not None:  # a sub-agent (``bot/refunds``) has its token's settings first
            layers += [(Scope.AGENT, name) for name in agent_layers(agent)]
        for scope, key in layers:
            for o in overrides:
                if o.scope == scope and o.key == key:
                    values[o.setting] = (o.value, o.source)
        return EffectiveSettings(
            enabled=bool(values["enabled"][0]),
            threshold=float(values["threshold"][0]),
            estimator=Estimator(values["estimator"][0]),
            samples=int(values["samples"][0]),
            calibrate=bool(values["calibrate"][0]),
            channels=self.channels,
            approvers=self.approvers,
            sources={name: source for name, (_, source) in values.items()},
        )

    async def overrides(self) -> tuple[Override, ...]:
        """Every stored override, through the cache. A database error keeps the last good
        snapshot (or none at all), logged: a step is not failed for want of a setting."""
        now = self.clock.now()
        if self._fresh(now):
            return self._overrides
        async with self._lock:
            if self._fresh(now):
                return self._overrides
            try:
                rows = await self.store.gate_overrides()
            except Exception:
                log.exception("confidence gate: cannot read overrides; using the last known")
            else:
                self._overrides = tuple(o for o in map(_override, rows) if o is not None)
            self._loaded_at = now
            return self._overrides

    def _fresh(self, now: datetime) -> bool:
        return self._loaded_at is not None and abs(now - self._loaded_at) < self.cache

    def invalidate(self) -> None:
        self._loaded_at = None

    # -- changing ------------------------------------------------------------------------------

    async def change(
        self,
        who: Principal,
        values: Mapping[str, Any],
        scope: str = Scope.GLOBAL.value,
        key: str | None = None,
    ) -> ChangeResult:
        """Set (``None``: remove) overrides at one scope, all or nothing, each change audited
        with who, when, old and new. Raises ``Forbidden`` for a non-admin and
        ``InvalidRequest`` (with ``field``) for a bad value; nothing is stored then."""
        if not who.is_admin:
            raise Forbidden("only an admin can change the confidence gate")
        the_scope, the_key = check_scope(scope, key)
        if not values:
            raise InvalidRequest(f"nothing to change: name one of {', '.join(SETTINGS)}")
        warnings: list[str] = []
        clean = {name: check_value(name, value, warnings) for name, value in values.items()}
        old = await self.store.set_gate_overrides(
            the_scope.value, the_key, clean, who.name, self.clock.now()
        )
        self.invalidate()
        changes = tuple(
            Change(name, the_scope, the_key, old.get(name), clean[name])
            for name in clean
            if name in old
        )
        return ChangeResult(changes, tuple(warnings), clean)


def check_scope(scope: str, key: str | None) -> tuple[Scope, str]:
    """A valid (scope, key) pair: global has no key; node_type names a gated node type."""
    try:
        the_scope = Scope(scope)
    except ValueError:
        raise InvalidRequest(
            f"scope: must be one of {', '.join(s.value for s in Scope)}, got {scope!r}",
            field="scope",
        ) from None
    if the_scope == Scope.GLOBAL:
        if key:
            raise InvalidRequest("key: a global setting takes no key", field="key")
        return the_scope, ""
    if not key or len(key) > 200:
        raise InvalidRequest(f"key: scope {scope} needs a key (1..200 characters)", field="key")
    if the_scope == Scope.NODE_TYPE and key not in GATED_NODE_TYPES:
        raise InvalidRequest(
            f"key: node type must be one of {', '.join(GATED_NODE_TYPES)}, got {key!r}",
            field="key",
        )
    return the_scope, key


def check_value(name: str, value: Any, warnings: list[str]) -> Any:
    """The value to store for ``name`` (None: remove the override)."""
    if name not in SETTINGS:
        raise InvalidRequest(f"{name}: not a gate setting (use {', '.join(SETTINGS)})", field=name)
    if value is None:
        return None
    if name in ("enabled", "calibrate"):
        if not isinstance(value, bool):
            raise InvalidRequest(f"{name}: must be true or false", field=name)
        return value
    if name == "threshold":
        number = _number(value)
        if number is None or not 0.0 <= number <= 1.0:
            raise InvalidRequest(
                f"threshold: must be a number between 0 and 1, got {value!r}", field=name
            )
        return number
    if name == "estimator":
        if value not in {e.value for e in Estimator}:
            choices = " or ".join(e.value for e in Estimator)
            raise InvalidRequest(f"estimator: must be {choices}, got {value!r}", field=name)
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"samples: must be a whole number, got {value!r}", field=name)
    return _samples(value, "samples", warnings)


def _samples(value: int, where: str, warnings: list[str]) -> int:
    if MIN_SAMPLES <= value <= MAX_SAMPLES:
        return value
    warnings.append(
        f"{where}: {value} is outside {MIN_SAMPLES}..{MAX_SAMPLES}; using {FALLBACK_SAMPLES}"
    )
    return FALLBACK_SAMPLES


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _base_layers(
    config: GateConfig, env: Mapping[str, str], warnings: list[str]
) -> dict[str, tuple[Any, str]]:
    """Defaults, then ``app.yaml``, then the environment: ``{setting: (value, source)}``."""
    values: dict[str, tuple[Any, str]] = {k: (v, "default") for k, v in DEFAULTS.items()}
    written = {
        "enabled": config.enabled,
        "threshold": config.threshold,
        "estimator": config.estimator.value if config.estimator else None,
        "samples": config.samples,
        "calibrate": config.calibrate,
    }
    for name, value in written.items():
        if value is not None:
            if name == "samples":
                value = _samples(int(value), "gate.samples (app.yaml)", warnings)
            values[name] = (value, "app.yaml")
    for name, var in _ENV.items():
        raw = env.get(var)
        if raw is None:
            continue
        parsed = _parse_env(name, raw.strip(), var, warnings)
        if parsed is not None:
            values[name] = (parsed, "env")
    return values


def _parse_env(name: str, raw: str, var: str, warnings: list[str]) -> Any:
    """One environment value, or None (with a warning) when it does not parse."""
    if name in ("enabled", "calibrate"):
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        warnings.append(f"{var}={raw!r} is not 1/true/on or 0/false/off; ignored")
        return None
    if name == "threshold":
        try:
            number = float(raw)
        except ValueError:
            number = math.nan
        if not 0.0 <= number <= 1.0:
            warnings.append(f"{var}={raw!r} is not a number in [0, 1]; ignored")
            return None
        return number
    if name == "estimator":
        if raw.lower() in {e.value for e in Estimator}:
            return raw.lower()
        warnings.append(f"{var}={raw!r} is not verbalization or self-consistency; ignored")
        return None
    try:
        count = int(raw)
    except ValueError:
        warnings.append(f"{var}={raw!r} is not a whole number; ignored")
        return None
    return _samples(count, var, warnings)


def _override(row: Mapping[str, Any]) -> Override | None:
    """A stored row, or None (logged) when it holds what no change could have written."""
    try:
        scope, key = check_scope(row["scope"], row["scope_key"] or None)
        value = check_value(row["setting"], row["value"], [])
    except InvalidRequest as exc:
        log.warning("confidence gate: ignoring stored override %s: %s", dict(row), exc.message)
        return None
    if value is None:
        return None
    return Override(scope, key, row["setting"], value, row["updated_by"], row["updated_at"])
