"""The frozen dependencies object every handler reads, built once by `create_app`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Engine

from gateway.budgets import PendingSettlements
from gateway.config import Settings
from gateway.protocols.base import ProtocolAdapter
from gateway.recorder import Recorder
from gateway.sinks import Sink
from gateway.store.ledger import Ledger
from gateway.threading import ContinuationKeys, RecentSteps
from gateway.upstream import Upstream


@dataclass(frozen=True, slots=True)
class Deps:
    settings: Settings
    upstream: Upstream
    recorder: Recorder
    engine: Engine
    ledger: Ledger  # budget reservations
    keys: ContinuationKeys
    secret: bytes  # the per-install key of continuation keys and key fingerprints
    recent: RecentSteps
    adapters: Mapping[str, ProtocolAdapter]
    clock: Callable[[], datetime]
    sinks: tuple[Sink, ...] = ()
    settlements: PendingSettlements = field(default_factory=PendingSettlements)
