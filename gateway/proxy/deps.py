"""The frozen dependencies object every handler reads, built once by `create_app`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Engine

from gateway.checks.loops import TraceCounters
from gateway.checks.tools import ToolChecker
from gateway.config import Settings
from gateway.continuation.keyfilter import KeyFilter
from gateway.continuation.keys import ContinuationKeys
from gateway.continuation.recent_steps import RecentSteps
from gateway.proxy.response_ends import ResponseEnds
from gateway.proxy.upstream import Upstream
from gateway.recording.spooler import SpoolRecorder
from gateway.runs.pricing import Pricer
from gateway.sinks.base import Sink
from gateway.sinks.metrics import MetricsSink
from gateway.store.ledger.core import Ledger


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
    sinks: tuple[Sink, ...] = ()
    metrics: MetricsSink | None = None  # also among `sinks`; the proxy counts on it directly
    # Continuation keys the store may hold: placement skips the store lookup for others.
    known_keys: KeyFilter = field(
        default_factory=lambda: KeyFilter(authoritative_when_loaded=False)
    )
    pricer: Pricer = field(default_factory=Pricer)
    tool_checker: ToolChecker = field(default_factory=ToolChecker)
    loops: TraceCounters = field(default_factory=TraceCounters)
    ends: ResponseEnds = field(default_factory=ResponseEnds)  # the tool time on records
