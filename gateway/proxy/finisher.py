"""What the proxy does with an exchange's decisions: settle the budget, build the step's
frozen record once, remember its continuation (or, for a failed attempt, what a retry
repeats), hand it to the recorder and the sinks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, fields
from typing import Any

from gateway.checks.budgets import nano_usd
from gateway.continuation.keys import StepRef, call_filter_key, real_call_id
from gateway.exchange.machine import Anomaly, Outcome
from gateway.items import ItemKind, Usage
from gateway.proxy.admission import Admission, give_back, settle
from gateway.proxy.deps import Deps
from gateway.proxy.relay import Timing
from gateway.runs.pricing import Cost
from gateway.runs.status import mark_terminal
from gateway.sinks.base import notify_step
from gateway.step import StepRecord, StepStart, response_end

# What a step's record takes as its request's start had it (the id, the path, the budget,
# the declared tools, ...): a field both declare needs no line here.
_CARRIED = tuple(
    sorted(
        {f.name for f in fields(StepStart)}
        & {f.name for f in fields(StepRecord)} - {"model", "violations"}
    )
)

# Ended without a proper answer: the same request again is a retry of this attempt.


@dataclass(frozen=True, slots=True)
class Threading:
    """What placement learned that the step's end needs."""

    input_state: bytes  # the chain over the whole input
    attempt: str  # equal for the same request sent again
    retry_of: str | None = None  # the failed attempt this request repeats


log = logging.getLogger(__name__)


class StepFinisher:
    """The relay's handler for one step (see `gateway.proxy.relay.Handler`)."""

    def __init__(
        self,
        deps: Deps,
        start: StepStart,
        started: float,
        admission: Admission | None = None,
        threading: Threading | None = None,
    ) -> None:
        self._deps = deps
        self._start = start
        self._started = started  # perf_counter() when the request arrived
        self._sent_at = time.perf_counter()  # when the gateway's own work before upstream ended
        self._admission = admission
        self._threading = threading
        self._provider_request_id: str | None = None
        self._priced: tuple[Usage, str | None, Cost] | None = None  # the last cost computed

    @property
    def protocol(self) -> str:
        return self._start.protocol

    def upstream_answered(self, provider_request_id: str | None) -> None:
        """The provider's response headers arrived; the record will carry its request id."""
        self._provider_request_id = provider_request_id

    def settle(self, usage: Usage) -> None:
        if self._admission is not None:
            settle(self._deps, self._admission, usage, self._cost(usage))

    def _cost(self, usage: Usage, model: str | None = None) -> Cost:
        """The step's cost; settling and the record usually price the same usage and model,
        so the second asks the pricer nothing."""
        start = self._start
        model = model or start.model
        priced = self._priced
        if priced is not None and priced[0] == usage and priced[1] == model:
            return priced[2]
        cost = self._deps.pricer.cost(usage, model, upstream_url=start.upstream_url)
        self._priced = (usage, model, cost)
        return cost

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        try:
            if self._admission is not None and outcome.no_answer:
                give_back(self._deps, self._admission, step=not outcome.left_waiting)
            record = self._record(outcome, timing)
            self._remember(record, outcome)
            self._deps.recorder.submit(record)
            overhead = self._sent_at - self._started + timing.observe_seconds
            notify_step(self._deps.sinks, record, overhead)
            if outcome.anomalies:
                self._note(outcome.anomalies)
        except Exception:  # recording must never break the request
            log.exception("finishing a step failed; the step is not recorded")

    def _record(self, outcome: Outcome, timing: Timing) -> StepRecord:
        """The step's record, every field given here, once."""
        start, threading = self._start, self._threading
        key = None
        if threading is not None and outcome.continuable:
            key = self._deps.keys.step_key(threading.input_state, outcome.output_items)
        outputs = mark_terminal(outcome.output_items, self._deps.settings.terminal_tools)
        cost = self._cost(outcome.usage, outcome.model) if start.protocol != "passthrough" else None
        return StepRecord(
            **{name: getattr(start, name) for name in _CARRIED},
            model=outcome.model or start.model,
            http_status=outcome.http_status,
            stop_reason=outcome.stop_reason,
            raw_stop_reason=outcome.raw_stop_reason,
            usage=outcome.usage,
            provider_request_id=self._provider_request_id,
            response_id=outcome.response_id,
            ttft_ms=_ms(self._started, timing.first_chunk_at),
            output_items=tuple(outputs),
            error=outcome.error,
            violations=(*start.violations, *outcome.violations),
            continuation_key=key,
            cost_nano=None if cost is None or cost.usd is None else nano_usd(cost.usd),
            cost_source=None if cost is None else cost.source.value,
            retry_of=None if threading is None else threading.retry_of,
            **self._times(),
        )

    def _note(self, anomalies: tuple[Anomaly, ...]) -> None:
        """Counted by kind, logged once: the exchange noted and ignored them."""
        if self._deps.metrics is not None:
            self._deps.metrics.anomalies(anomaly.kind.value for anomaly in anomalies)
        start = self._start
        details = "; ".join(f"{a.kind.value}: {a.detail}" for a in anomalies)
        log.warning(
            "step %s of trace %s: illegal transitions ignored: %s",
            start.id,
            start.trace_id,
            details,
        )

    def _times(self) -> dict[str, Any]:
        """How long the step took, when its response ended, and the tool time before it."""
        start = self._start
        latency_ms = _ms(self._started, time.perf_counter())
        ended_at = response_end(start.started_at, latency_ms)
        tool_ms = None
        if start.protocol != "passthrough":
            retry = self._threading is not None and self._threading.retry_of is not None
            tool_ms = self._deps.ends.tool_ms(
                start.trace_id, start.started_at, ended_at, retry=retry
            )
        return {"latency_ms": latency_ms, "ended_at": ended_at, "tool_ms": tool_ms}

    def _remember(self, record: StepRecord, outcome: Outcome) -> None:
        threading, recent = self._threading, self._deps.recent
        if threading is None:
            return
        if outcome.continuable and not outcome.no_answer:
            ref = StepRef(record.trace_id, record.id, tuple(record.output_items))
            input_key = threading.input_state.hex()
            recent.remember(record.continuation_key, record.response_id, ref, input_key)
        # After `remember`: a cut stream answered in part, and its retry is still expected.
        if outcome.stop_reason.broke or outcome.no_answer:
            recent.failed(threading.attempt, StepRef(record.trace_id, record.id))
        known = self._deps.known_keys
        if record.continuation_key is not None:
            known.add(record.continuation_key)
        for item in record.output_items:
            call_id = real_call_id(item) if item.kind is ItemKind.TOOL_CALL else None
            if call_id is not None:
                known.add(call_filter_key(call_id))


def _ms(started: float, at: float | None) -> float | None:
    return None if at is None else round((at - started) * 1000, 3)
