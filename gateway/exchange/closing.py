"""The step's end, decided: a pure function of what the exchange decided, the timings and
what the run knows, returning the frozen record and the I/O to perform (settle or give back
the budget, remember the continuation, the response's end, the anomalies to count and log).
Nothing here writes, awaits or logs; `gateway.proxy.finisher.StepBus` performs the result.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

from gateway.checks.budgets import Limits, Reservation, Settlement, cost_used_nano, nano_usd
from gateway.continuation.keys import ContinuationKeys, StepRef, call_filter_key, real_call_id
from gateway.exchange.machine import Anomaly, Outcome
from gateway.items import ItemKind, StopReason, Usage, ViolationKind
from gateway.runs.pricing import Cost
from gateway.runs.status import mark_terminal
from gateway.runs.timing import tool_gap_ms
from gateway.step import StepRecord, StepStart, response_end

# What a step's record takes as its request's start had it (the id, the path, the budget,
# the declared tools, ...): a field both declare needs no line here.
_CARRIED = tuple(
    sorted(
        {f.name for f in fields(StepStart)}
        & {f.name for f in fields(StepRecord)} - {"model", "violations"}
    )
)


@dataclass(frozen=True, slots=True)
class Threading:
    """What placement learned that the step's end needs."""

    input_state: bytes  # the chain over the whole input
    attempt: str  # equal for the same request sent again
    retry_of: str | None = None  # the failed attempt this request repeats


@dataclass(frozen=True, slots=True)
class Budget:
    """What admission reserved for the step, and what its settlement counted spent."""

    limits: Limits
    reservation: Reservation | None = None
    settled: bool = False
    charged: tuple[int, int] = (0, 0)  # tokens and nano-dollars


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What the run knows of the step when it ends."""

    start: StepStart
    started: float  # perf_counter() when the request arrived
    sent_at: float  # perf_counter() when the gateway's own work before upstream ended
    model_call: bool = True  # priced, timed between tools (a passthrough step is neither)
    threading: Threading | None = None
    provider_request_id: str | None = None
    terminal_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Clocks:
    """The step's timings, in perf_counter() seconds, and the trace's previous response end."""

    ended: float  # when the exchange finished
    first_chunk_at: float | None = None
    observe_seconds: float = 0.0  # time spent in the exchange
    previous_end: datetime | None = None  # of the trace's last response in this process


@dataclass(frozen=True, slots=True)
class Remember:
    """What later requests of the trace will look up: its continuation and failed attempt."""

    key: str | None
    response_id: str | None
    conversation_id: str | None
    ref: StepRef
    input_key: str
    answered: bool  # remembered as a step to continue
    failed_attempt: str | None  # remembered as an attempt its retry repeats
    known_keys: tuple[str, ...]  # for the filter of keys the store may hold


@dataclass(frozen=True, slots=True)
class Closed:
    """A step's end: the record, built once, and everything to perform with it."""

    record: StepRecord
    overhead_seconds: float
    settlement: Settlement | None = None  # a give-back of a failed attempt
    remember: Remember | None = None
    response_end: datetime | None = None  # the trace's latest response end, to keep
    anomalies: tuple[Anomaly, ...] = ()  # counted by kind and logged once
    tree_settlement: Settlement | None = None  # the same give-back, of the tree's budget


def settle(budget: Budget, usage: Usage, cost: Cost | None) -> tuple[Budget, Settlement | None]:
    """Swap the held tokens and dollars for the real usage and cost, once: the budget after
    and the settlement to write (None: nothing to settle)."""
    reservation, limits = budget.reservation, budget.limits
    if budget.settled or reservation is None:
        return budget, None
    if limits.max_tokens is None and limits.max_cost_usd is None:
        return budget, None  # only token and cost budgets have anything to settle
    known = usage.total_tokens is not None or usage.prompt_tokens is not None
    # Without a usage report (a cancelled stream) assume the held tokens were spent.
    used = usage.total() if known else reservation.tokens
    used_cost = cost_used_nano(
        None if cost is None else cost.usd, reservation.cost_held_nano, known
    )
    settled = replace(budget, settled=True, charged=(used, used_cost))
    return settled, Settlement(reservation, used, used_cost)


def give_back(budget: Budget, *, step: bool = True) -> Settlement | None:
    """A failed attempt (an error status, an unreachable provider: no answer) takes nothing
    from the run's budgets: its step and what its settlement counted are given back. A
    request its client gave up on before the answer (`step` False) was the provider's to
    work on: its step counts, its unknown usage is given back."""
    reservation = budget.reservation
    if reservation is None:
        return None
    tokens, cost = budget.charged
    if not step and tokens == 0 and cost == 0:
        return None  # nothing was counted: nothing to give back
    nothing_held = replace(reservation, tokens=0, cost_held_nano=0)
    return Settlement(nothing_held, -tokens, -cost, steps_back=int(step))


def left_open(outcome: Outcome) -> bool:
    """The provider answered a background request before the response's end (queued, in
    progress, or a stream that stopped short): a later exchange about it ends the step."""
    if outcome.response_id is None or outcome.no_answer or outcome.error is not None:
        return False
    return outcome.pending or not outcome.complete


def ends_response(outcome: Outcome) -> bool:
    """A follow-up exchange (a poll, a resumed stream, a cancel) saw the response's end."""
    return outcome.complete and not outcome.pending and not outcome.no_answer


def unended(outcome: Outcome) -> Outcome:
    """A background response whose end the gateway never saw, as far as it got: its stop is
    unknown; a stream cut short is no violation (the provider worked on)."""
    kept = tuple(v for v in outcome.violations if v.kind is not ViolationKind.STREAM_INTERRUPTED)
    return replace(outcome, stop_reason=StopReason.UNKNOWN, violations=kept)


def close(
    outcome: Outcome,
    clocks: Clocks,
    facts: StepFacts,
    *,
    budget: Budget | None,
    cost: Cost | None,
    keys: ContinuationKeys,
    tree: Budget | None = None,
) -> Closed:
    """The step's end decided: `cost` is the priced outcome (None: not a priced step);
    `tree` the budget of a sub-agent's whole tree, given back as its own is."""
    settlement = tree_settlement = None
    if outcome.no_answer:
        step = not outcome.left_waiting
        settlement = None if budget is None else give_back(budget, step=step)
        tree_settlement = None if tree is None else give_back(tree, step=step)
    key = None
    if facts.threading is not None and outcome.continuable:
        key = keys.step_key(facts.threading.input_state, outcome.output_items)
    times = _times(facts, clocks)
    record = _record(outcome, clocks, facts, cost, key, times)
    overhead = facts.sent_at - facts.started + clocks.observe_seconds
    return Closed(
        record,
        overhead,
        settlement,
        _remember(record, outcome, facts.threading),
        times["ended_at"] if facts.model_call else None,
        outcome.anomalies,
        tree_settlement,
    )


def _record(
    outcome: Outcome,
    clocks: Clocks,
    facts: StepFacts,
    cost: Cost | None,
    key: str | None,
    times: dict[str, Any],
) -> StepRecord:
    """The step's record, every field given here, once."""
    start, threading = facts.start, facts.threading
    outputs = mark_terminal(outcome.output_items, facts.terminal_tools)
    return StepRecord(
        **{name: getattr(start, name) for name in _CARRIED},
        model=outcome.model or start.model,
        http_status=outcome.http_status,
        stop_reason=outcome.stop_reason,
        raw_stop_reason=outcome.raw_stop_reason,
        usage=outcome.usage,
        provider_request_id=facts.provider_request_id,
        response_id=outcome.response_id,
        ttft_ms=_ms(facts.started, clocks.first_chunk_at),
        output_items=tuple(outputs),
        error=outcome.error,
        violations=(*start.violations, *outcome.violations),
        continuation_key=key,
        cost_nano=None if cost is None or cost.usd is None else nano_usd(cost.usd),
        cost_source=None if cost is None else cost.source.value,
        retry_of=None if threading is None else threading.retry_of,
        attrs=step_attrs(outcome, start.model),
        **times,
    )


def step_attrs(outcome: Outcome, requested: str | None) -> dict[str, Any] | None:
    """The step's facts beyond its columns, each only when there is something to say: the
    model asked for when another one answered, a refusal's category, the requests of the
    tools the provider ran, its sampling iterations when more than one, the cache writes
    kept for an hour, and each model's usage when several ran."""
    attrs: dict[str, Any] = {}
    answered, billing = outcome.model, outcome.billing
    if requested and answered and answered != requested:
        attrs["requested_model"] = requested
    if outcome.refusal_category:
        attrs["refusal_category"] = outcome.refusal_category
    if billing.server_tool_requests:
        attrs["server_tool_requests"] = dict(billing.server_tool_requests)
    if billing.iterations:
        attrs["iterations"] = billing.iterations
    if billing.cache_write_1h_tokens:
        attrs["cache_write_1h_tokens"] = billing.cache_write_1h_tokens
    shares = billing.by_model(answered or requested)
    if shares:
        attrs["usage_by_model"] = {
            share.model or "unknown": {k: v for k, v in share.usage.to_json().items() if v}
            for share in shares
        }
    return attrs or None


def _times(facts: StepFacts, clocks: Clocks) -> dict[str, Any]:
    """How long the step took, when its response ended, and the tool time before it."""
    start = facts.start
    latency_ms = _ms(facts.started, clocks.ended)
    ended_at = response_end(start.started_at, latency_ms)
    tool_ms = None
    if facts.model_call:
        retry = facts.threading is not None and facts.threading.retry_of is not None
        previous = clocks.previous_end
        gap = None if previous is None else (start.started_at - previous).total_seconds() * 1000
        tool_ms = tool_gap_ms(gap, retry=retry)
    return {"latency_ms": latency_ms, "ended_at": ended_at, "tool_ms": tool_ms}


def _remember(record: StepRecord, outcome: Outcome, threading: Threading | None) -> Remember | None:
    if threading is None:
        return None
    known = [] if record.continuation_key is None else [record.continuation_key]
    for item in record.output_items:
        call_id = real_call_id(item) if item.kind is ItemKind.TOOL_CALL else None
        if call_id is not None:
            known.append(call_filter_key(call_id))
    failed = outcome.stop_reason.broke or outcome.no_answer
    return Remember(
        key=record.continuation_key,
        response_id=record.response_id,
        conversation_id=record.conversation_id,
        ref=StepRef(record.trace_id, record.id, tuple(record.output_items)),
        input_key=threading.input_state.hex(),
        answered=outcome.continuable and not outcome.no_answer,
        failed_attempt=threading.attempt if failed else None,
        known_keys=tuple(known),
    )


def _ms(started: float, at: float | None) -> float | None:
    return None if at is None else round((at - started) * 1000, 3)
