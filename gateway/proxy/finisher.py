"""What the proxy does with an exchange's decisions: settle the budget, build the step's
frozen record once, remember its continuation (or, for a failed attempt, what a retry
repeats), hand it to the recorder and the sinks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from gateway.checks.budgets import nano_usd
from gateway.continuation.keys import StepRef, call_filter_key, real_call_id
from gateway.exchange.machine import Outcome
from gateway.exchange.stops import Ending
from gateway.items import ItemKind, StopReason, Usage, Violation
from gateway.proxy.admission import Admission, give_back, settle
from gateway.proxy.deps import Deps
from gateway.proxy.relay import Timing
from gateway.runs.pricing import Cost
from gateway.runs.status import mark_terminal
from gateway.sinks.base import notify_step
from gateway.step import StepRecord, StepStart

# Ended without a proper answer: the same request again is a retry of this attempt.


@dataclass(frozen=True, slots=True)
class Threading:
    """What placement learned that the step's end needs."""

    input_state: bytes  # the chain over the whole input
    attempt: str  # equal for the same request sent again
    retry_of: str | None = None  # the failed attempt this request repeats


def no_answer(outcome: Outcome) -> bool:
    """The provider gave no answer at all: an error status, or it could not be reached."""
    return outcome.ending is Ending.UNREACHABLE or (outcome.http_status or 0) >= 400


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
        self.provider_request_id: str | None = None

    def settle(self, usage: Usage) -> None:
        if self._admission is not None:
            settle(self._deps, self._admission, usage, self._cost(usage))

    def _cost(self, usage: Usage, model: str | None = None) -> Cost:
        start = self._start
        return self._deps.pricer.cost(usage, model or start.model, upstream_url=start.upstream_url)

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        try:
            if self._admission is not None and no_answer(outcome):
                give_back(self._deps, self._admission)
            record = self._record(outcome, timing)
            self._remember(record, outcome)
            self._deps.recorder.submit(record)
            overhead = self._sent_at - self._started + timing.observe_seconds
            notify_step(self._deps.sinks, record, overhead)
        except Exception:  # recording must never break the request
            log.exception("finishing a step failed; the step is not recorded")

    def _checks(self, outcome: Outcome) -> list[Violation]:
        """What the step's tool calls break: undeclared tools, schemas, repeated calls."""
        start, deps = self._start, self._deps
        if start.protocol == "passthrough" or not outcome.output_items:
            return []
        truncated = outcome.stop_reason is StopReason.LENGTH
        found = deps.tool_checker.check(start.tools, outcome.output_items, truncated=truncated)
        return found + deps.loops.of(start.trace_id).observe(outcome.output_items)

    def _record(self, outcome: Outcome, timing: Timing) -> StepRecord:
        start, threading = self._start, self._threading
        key = None
        if threading is not None and outcome.continuable:
            key = self._deps.keys.step_key(threading.input_state, outcome.output_items)
        outputs = mark_terminal(outcome.output_items, self._deps.settings.terminal_tools)
        cost = self._cost(outcome.usage, outcome.model) if start.protocol != "passthrough" else None
        return StepRecord(
            id=start.id,
            trace_id=start.trace_id,
            protocol=start.protocol,
            method=start.method,
            path=start.path,
            started_at=start.started_at,
            model=outcome.model or start.model,
            stream=start.stream,
            http_status=outcome.http_status,
            stop_reason=outcome.stop_reason,
            raw_stop_reason=outcome.raw_stop_reason,
            usage=outcome.usage,
            provider_request_id=self.provider_request_id,
            response_id=outcome.response_id,
            latency_ms=_ms(self._started, time.perf_counter()),
            ttft_ms=_ms(self._started, timing.first_chunk_at),
            input_items=start.input_items,
            output_items=outputs,
            error=outcome.error,
            violations=[*start.violations, *outcome.violations, *self._checks(outcome)],
            continuation_key=key,
            budget_max_steps=start.budget_max_steps,
            budget_max_tokens=start.budget_max_tokens,
            traceparent=start.traceparent,
            session_id=start.session_id,
            cost_nano=None if cost is None or cost.usd is None else nano_usd(cost.usd),
            cost_source=None if cost is None else cost.source.value,
            retry_of=None if threading is None else threading.retry_of,
            declared_tools=start.declared_tools,
            params=start.params,
        )

    def _remember(self, record: StepRecord, outcome: Outcome) -> None:
        threading, recent = self._threading, self._deps.recent
        if threading is None:
            return
        if outcome.continuable and not no_answer(outcome):
            ref = StepRef(record.trace_id, record.id, tuple(record.output_items))
            input_key = threading.input_state.hex()
            recent.remember(record.continuation_key, record.response_id, ref, input_key)
        # After `remember`: a cut stream answered in part, and its retry is still expected.
        if outcome.stop_reason.broke or no_answer(outcome):
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
