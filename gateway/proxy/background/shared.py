"""Open background steps in the store, shared by every gateway on it: an open step as the
text of its row and back, the store's calls off the event loop, and the end of a step that
another gateway (or this one before a restart) opened.

A row holds only what redaction lets through, as a stored step does: the gateway that ends
the step records it through the recording pipeline, which redacts it again (redaction gives
the same result on its own output, so the step is stored as one gateway would store it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.engine import Engine

from gateway import jsoncodec
from gateway.checks.budgets import Limits, Reservation
from gateway.continuation.keys import ContinuationKeys
from gateway.exchange import closing
from gateway.exchange.closing import Budget, Opened
from gateway.exchange.machine import Outcome
from gateway.proxy.finisher import StepBus
from gateway.proxy.relay import Timing
from gateway.recording import codec
from gateway.redaction.redactor import Redactor, without_reasoning_summaries
from gateway.runs.pricing import Pricer
from gateway.step import StepRecord
from gateway.store import open_responses as rows

log = logging.getLogger(__name__)


class SharedSteps:
    """The store's open steps, each call in a worker thread; `redactor` and `keep_summaries`
    are the recording pipeline's, applied before a step reaches its row."""

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], datetime],
        redactor: Redactor,
        keep_summaries: bool,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._redactor = redactor
        self._keep_summaries = keep_summaries

    async def put(self, response_id: str, step: Opened) -> None:
        await asyncio.to_thread(self._put, response_id, step, self._clock())

    def _put(self, response_id: str, step: Opened, at: datetime) -> None:
        """Runs in the worker thread: redaction is CPU work the loop should not do."""
        record, text = step.record, encode(self.redacted(step))
        rows.put(self._engine, response_id, record.trace_id, record.id, at, text)

    def redacted(self, step: Opened) -> Opened:
        """What of the step may be stored: its record as the recording pipeline stores it,
        its declared tools as the record's, the provider's URL (the client's query) as the
        record's path. The continuation state is a digest; the budget holds counts."""
        record = step.record
        if not self._keep_summaries:
            record = without_reasoning_summaries(record)
        redactor = self._redactor
        url, tools = step.upstream_url, step.tools
        return replace(
            step,
            record=redactor.redact_step(record),
            upstream_url=None if url is None else redactor.redact_text(url),
            tools=None if tools is None else redactor.redact_json(tools),
        )

    async def find(self, response_id: str) -> Opened | None:
        text = await asyncio.to_thread(rows.find, self._engine, response_id)
        return None if text is None else decode(text)

    async def take(self, response_id: str) -> Opened | None:
        text = await asyncio.to_thread(rows.take, self._engine, response_id)
        return None if text is None else decode(text)


def encode(step: Opened) -> str:
    """The row's text: the record as the spool writes it, and what its end needs."""
    fields = {
        "record": codec.encode(step.record)[:-1].decode(),
        "input_state": None if step.input_state is None else step.input_state.hex(),
        "terminal_tools": list(step.terminal_tools),
        "budget": None if step.budget is None else _budget_json(step.budget),
        "upstream_url": step.upstream_url,
        "tools": None if step.tools is None else dict(step.tools),
    }
    return jsoncodec.dumps(fields).decode()


def decode(text: str) -> Opened:
    fields = jsoncodec.loads(text.encode())
    record = codec.decode(fields["record"].encode())
    assert isinstance(record, StepRecord)
    state = fields["input_state"]
    budget = fields["budget"]
    return Opened(
        record,
        None if state is None else bytes.fromhex(state),
        tuple(fields["terminal_tools"]),
        None if budget is None else _budget_of(budget),
        fields["upstream_url"],
        fields["tools"],
    )


def _budget_json(budget: Budget) -> dict[str, Any]:
    limits = asdict(budget.limits)
    if limits["max_cost_usd"] is not None:
        limits["max_cost_usd"] = str(limits["max_cost_usd"])
    reservation = None if budget.reservation is None else asdict(budget.reservation)
    return {
        "limits": limits,
        "reservation": reservation,
        "settled": budget.settled,
        "charged": list(budget.charged),
    }


def _budget_of(fields: dict[str, Any]) -> Budget:
    limits = dict(fields["limits"])
    if limits["max_cost_usd"] is not None:
        limits["max_cost_usd"] = Decimal(limits["max_cost_usd"])
    reservation = fields["reservation"]
    tokens, cost = fields["charged"]
    return Budget(
        Limits(**limits),
        None if reservation is None else Reservation(**reservation),
        fields["settled"],
        (tokens, cost),
    )


class EndElsewhere:
    """Ends a step from its stored row, as the gateway that opened it would have: priced,
    its budget settled once, handed to the bus (spool, sinks)."""

    def __init__(
        self, bus: StepBus, pricer: Pricer, keys: ContinuationKeys, clock: Callable[[], datetime]
    ) -> None:
        self._bus = bus
        self._pricer = pricer
        self._keys = keys
        self._clock = clock

    def __call__(self, step: Opened, outcome: Outcome, timing: Timing) -> None:
        try:
            requested = (step.record.attrs or {}).get("requested_model", step.record.model)
            model = outcome.model or requested
            cost = self._pricer.cost(
                outcome.usage, model, billing=outcome.billing, upstream_url=step.upstream_url
            )
            closed = closing.ended_elsewhere(
                step, outcome, self._clock(), cost=cost, keys=self._keys
            )
            self._bus.closed(replace(closed, overhead_seconds=timing.observe_seconds))
        except Exception:  # recording must never break the request
            log.exception("ending a background step failed; the step is not recorded")
