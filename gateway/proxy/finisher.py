"""The step's end, done: `StepEnd` is the relay's handler for one step, which asks the pure
close (gateway.exchange.closing) what the step's end is; `StepBus`, one per app, performs it:
settle or give back the budget, remember the continuation, spool the record, fire the sinks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from gateway.checks.budgets import Settlement
from gateway.continuation.keyfilter import KeyFilter
from gateway.continuation.keys import ContinuationKeys, StepRef
from gateway.continuation.lineage import Lineages
from gateway.continuation.recent_steps import RecentSteps
from gateway.exchange import closing
from gateway.exchange.closing import Budget, Closed, StepFacts
from gateway.exchange.machine import Outcome, Settle
from gateway.items import Billing, Usage
from gateway.proxy.relay import Timing
from gateway.proxy.response_ends import ResponseEnds
from gateway.recording.spooler import SpoolRecorder
from gateway.runs.pricing import Cost, Pricer
from gateway.sinks.base import Sinks
from gateway.step import RefusalRecord, StepRecord, StepStart
from gateway.store.ledger.core import Ledger

log = logging.getLogger(__name__)


class StepBus:
    """Performs what the step's end decided (and what a refusal is), in one order: budget,
    memory, spool, sinks. Quick and on the event loop; the ledger's write starts now and
    the trace's next reservation waits for it (SettlementWrites)."""

    def __init__(
        self,
        ledger: Ledger,
        recorder: SpoolRecorder,
        recent: RecentSteps,
        known_keys: KeyFilter,
        ends: ResponseEnds,
        sinks: Sinks,
        lineages: Lineages,
        marks: Callable[[StepRecord], StepRecord] | None = None,
    ) -> None:
        self.lineages = lineages
        self.marks = marks  # a replay's: each record says what it replays
        self.ledger = ledger
        self.recorder = recorder
        self.recent = recent
        self.known_keys = known_keys
        self.ends = ends
        self.sinks = sinks

    def settle(self, settlement: Settlement | None) -> None:
        if settlement is not None:
            self.ledger.settle_later(settlement)

    def closed(self, closed: Closed, client: str | None = None) -> None:
        self.settle(closed.settlement)
        self.settle(closed.tree_settlement)
        record = closed.record if self.marks is None else self.marks(closed.record)
        if closed.remember is not None:
            self._remember(closed.remember)
        try:
            self.lineages.step_ended(client, record.trace_id, record.lineage, record.output_items)
        except Exception:  # what sub-agents are matched by is never worth a lost record
            log.exception("keeping step %s's calls for sub-agent links failed", record.id)
        if closed.response_end is not None:
            self.ends.remember(record.trace_id, closed.response_end)
        self.recorder.submit(record)
        self.sinks.step_finished(record, closed.overhead_seconds)
        if closed.anomalies:
            kinds = tuple(anomaly.kind.value for anomaly in closed.anomalies)
            self.sinks.exchange_anomalies(record, kinds)
            details = "; ".join(f"{a.kind.value}: {a.detail}" for a in closed.anomalies)
            log.warning(
                "step %s of trace %s: illegal transitions ignored: %s",
                record.id,
                record.trace_id,
                details,
            )

    def refused(self, refusal: RefusalRecord) -> None:
        self.recorder.submit(refusal)
        self.sinks.request_refused(refusal)

    def _remember(self, remember: closing.Remember) -> None:
        ref = remember.ref
        if remember.answered:
            self.recent.remember(
                remember.key,
                remember.response_id,
                ref,
                remember.input_key,
                conversation_id=remember.conversation_id,
                held_state=remember.held_state,
            )
        # After `remember`: a cut stream answered in part, and its retry is still expected.
        if remember.failed_attempt is not None:
            self.recent.failed(remember.failed_attempt, StepRef(ref.trace_id, ref.step_id))
        for key in remember.known_keys:
            self.known_keys.add(key)


class StepEnd:
    """The relay's handler for one step (see `gateway.proxy.relay.Handler`): what it is told
    goes to the pure close, what the close returns to the bus."""

    def __init__(
        self,
        bus: StepBus,
        facts: StepFacts,
        *,
        pricer: Pricer,
        keys: ContinuationKeys,
        budget: Budget | None = None,
        tree: Budget | None = None,
    ) -> None:
        self._bus = bus
        self._facts = facts
        self._pricer = pricer
        self._keys = keys
        self._budget = budget
        self._tree = tree  # a sub-agent's tree's budget, on its root's ledger row
        # The last cost computed and what it priced.
        self._priced: tuple[tuple[Usage, str | None, Billing], Cost] | None = None

    @property
    def protocol(self) -> str:
        return self._facts.start.protocol

    @property
    def start(self) -> StepStart:
        return self._facts.start

    def upstream_answered(self, provider_request_id: str | None) -> None:
        """The provider's response headers arrived; the record will carry its request id."""
        self._facts = replace(self._facts, provider_request_id=provider_request_id)

    def settle(self, spent: Settle) -> None:
        if self._budget is None and self._tree is None:
            return
        cost = self._cost(spent.usage, spent.model, spent.billing)
        if self._budget is not None:
            self._budget, settlement = closing.settle(self._budget, spent.usage, cost)
            self._bus.settle(settlement)
        if self._tree is not None:
            self._tree, settlement = closing.settle(self._tree, spent.usage, cost)
            self._bus.settle(settlement)

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        try:
            facts = self._facts
            previous = None
            if facts.model_call:
                previous = self._bus.ends.last(facts.start.trace_id)
            clocks = closing.Clocks(
                time.perf_counter(), timing.first_chunk_at, timing.observe_seconds, previous
            )
            cost = None
            if facts.model_call:
                cost = self._cost(outcome.usage, outcome.model, outcome.billing)
            closed = closing.close(
                outcome,
                clocks,
                facts,
                budget=self._budget,
                cost=cost,
                keys=self._keys,
                tree=self._tree,
            )
            self._bus.closed(closed, facts.start.client)
        except Exception:  # recording must never break the request
            log.exception("finishing a step failed; the step is not recorded")

    def opened(self, seen: Outcome, timing: Timing) -> closing.Opened:
        """The step as far as a background response's creation saw it (gateway.proxy.
        background), for whichever gateway on the store sees the response's end."""
        facts = self._facts
        previous = self._bus.ends.last(facts.start.trace_id) if facts.model_call else None
        clocks = closing.Clocks(
            time.perf_counter(), timing.first_chunk_at, timing.observe_seconds, previous
        )
        cost = self._cost(seen.usage, seen.model, seen.billing) if facts.model_call else None
        return closing.opened(seen, clocks, facts, budget=self._budget, cost=cost, keys=self._keys)

    def _cost(self, usage: Usage, model: str | None, billing: Billing) -> Cost:
        """The step's cost; settling and the record usually price the same usage, model and
        billing, so the second asks the pricer nothing."""
        start = self._facts.start
        priced = (usage, model or start.model, billing)
        if self._priced is not None and self._priced[0] == priced:
            return self._priced[1]
        cost = self._pricer.cost(usage, priced[1], billing=billing, upstream_url=start.upstream_url)
        self._priced = (priced, cost)
        return cost
