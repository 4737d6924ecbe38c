"""The frozen dependencies object every handler reads, built once by `create_app`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.checks.budgets import Limits
from gateway.checks.loops import TraceCounters
from gateway.checks.tools import ToolChecker
from gateway.config import Settings
from gateway.continuation.keyfilter import KeyFilter
from gateway.continuation.keys import ContinuationKeys
from gateway.continuation.lineage import Lineages
from gateway.continuation.recent_steps import RecentSteps
from gateway.memory import ByteLru
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.registry import keyed
from gateway.proxy.background.open_responses import OpenResponses
from gateway.proxy.finisher import StepBus
from gateway.proxy.upstream import Upstream
from gateway.recording.spooler import SpoolRecorder
from gateway.runs.pricing import Pricer
from gateway.sinks.base import Sinks
from gateway.store.ledger.core import Ledger

TREE_LIMITS_BYTES = 1024 * 1024


def tree_budgets() -> ByteLru[str, Limits]:
    return ByteLru(TREE_LIMITS_BYTES, lambda trace_id, _: len(trace_id) + 200)


@dataclass(frozen=True, slots=True)
class Deps:
    settings: Settings
    upstream: Upstream
    recorder: SpoolRecorder  # spools each record; a recorder stores it
    engine: Engine
    ledger: Ledger  # budget reservations
    keys: ContinuationKeys
    secret: bytes  # the per-install key of continuation keys and key fingerprints
    recent: RecentSteps
    clock: Callable[[], datetime]
    bus: StepBus  # performs each step's end and refusal: budget, memory, spool, sinks
    work: Background  # starts what a request runs beside its handler (a socket's other side)
    pricer: Pricer = field(default_factory=Pricer)
    tool_checker: ToolChecker = field(default_factory=ToolChecker)
    loops: TraceCounters = field(default_factory=TraceCounters)
    # Steps of background responses whose end a later exchange brings.
    open_responses: OpenResponses = field(default_factory=OpenResponses)
    # Each root's budget, which its sub-agents' runs are held to as a tree (gateway.proxy.
    # admission); bounded, the oldest roots forgotten first.
    tree_limits: ByteLru[str, Limits] = field(default_factory=tree_budgets)
    # The protocols' adapters as this app serves them: keyed with `secret` (gateway.opaque).
    adapters: Mapping[str, ProtocolAdapter] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "adapters", keyed(self.secret, keep_opaque=self.settings.keep_opaque_reasoning)
        )

    @property
    def sinks(self) -> Sinks:
        return self.bus.sinks

    @property
    def lineages(self) -> Lineages:
        """Recent tool calls and the runs linked here: a new run's parent, found."""
        return self.bus.lineages

    @property
    def known_keys(self) -> KeyFilter:
        """Continuation keys the store may hold: placement skips the store lookup for others."""
        return self.bus.known_keys
