"""Which call a tool result answers, and which steps retry a failed one.

A result answers the most recent earlier call with its id: an agent that retries after a
stream died mid tool-call gets the call emitted again, and its result answers the retry. A
tool the provider ran is answered inside an answer: its result follows it in the output.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.items import StopReason
from gateway.ui.views.items import ItemView
from gateway.ui.views.shapes import StepView

Href = Callable[[ItemView, StepView], str]  # (target, the step the link sits in)


@dataclass(slots=True)
class CallRecord:
    """One emission of a tool call and what answered it."""

    view: ItemView
    holder: StepView  # the step the call sits in
    emitted: bool  # in the holder's output; otherwise the client sent it as history
    result: ItemView | None = None
    answered_by: StepView | None = None

    @property
    def step(self) -> StepView | None:
        """The step that emitted the call, if a recorded response did."""
        return self.holder if self.emitted else None

    @property
    def owed(self) -> bool:
        """The agent owes its result: a call the provider ran is none of the agent's."""
        return not self.view.provider


def link_calls(steps: list[StepView], href: Href) -> list[CallRecord]:
    """Pair results with calls in the order the agent saw them; mark re-emitted calls."""
    latest: dict[str, CallRecord] = {}
    records: list[CallRecord] = []
    for step in steps:
        for item in step.inputs:
            if item.call_id is None:
                continue
            if item.kind == "tool_result":
                record = latest.get(item.call_id)
                if record is not None:
                    _pair(record, item, step, href)
            elif item.kind == "tool_call" and item.call_id not in latest:
                record = latest[item.call_id] = CallRecord(item, step, emitted=False)
                records.append(record)
        for item in step.outputs:
            if item.call_id is None:
                continue
            if item.kind == "tool_result":  # one the provider ran, inside its answer
                record = latest.get(item.call_id)
                if record is not None and record.view.provider:
                    _pair_ran(record, item, step, href)
                continue
            if item.kind != "tool_call":
                continue
            earlier = latest.get(item.call_id)
            if earlier is not None and earlier.result is None and earlier.step is not None:
                _mark_retry(earlier, item, step)
            record = latest[item.call_id] = CallRecord(item, step, emitted=True)
            records.append(record)
            if item.caller is not None:
                _link_caller(item, latest.get(item.caller), step, href)
    return records


def _pair(record: CallRecord, result: ItemView, step: StepView, href: Href) -> None:
    call, emitter = record.view, record.step
    result.link, result.link_step = href(call, step), call.step_id
    result.link_label = "↑ call" + (f" · step {emitter.seq}" if emitter else "")
    if record.result is not None:
        return  # a second answer to the same call: it points back, the call keeps the first
    record.result, record.answered_by = result, step
    call.link, call.link_step = href(result, record.holder), step.id
    call.link_label = f"result ↓ step {step.seq}"
    if emitter is not None:
        call.wait_ms = max(step.offset_ms - emitter.end_ms, 0.0)


def _pair_ran(record: CallRecord, result: ItemView, step: StepView, href: Href) -> None:
    """A result the provider gave for a call it ran: in the same answer, or a later one
    (code it ran waited on a client tool). No wait time: the provider tells none."""
    call, holder = record.view, record.holder
    same = holder is step
    result.link, result.link_step = href(call, step), call.step_id
    result.link_label = "↑ call" if same else f"↑ call · step {holder.seq}"
    if record.result is not None:
        return
    record.result, record.answered_by = result, step
    call.link, call.link_step = href(result, holder), step.id
    call.link_label = "result ↓" if same else f"result ↓ step {step.seq}"


def _link_caller(call: ItemView, caller: CallRecord | None, step: StepView, href: Href) -> None:
    """A client call made by code the provider ran points at that code's call."""
    if caller is not None and caller.view.provider:
        call.caller_link, call.caller_tool = href(caller.view, step), caller.view.tool_name


def _mark_retry(earlier: CallRecord, again: ItemView, step: StepView) -> None:
    assert earlier.step is not None
    cut = earlier.view.incomplete or _broke(earlier.step.step.get("stop_reason"))
    verb = "cut off, retried" if cut else "emitted again"
    earlier.view.retry_note = f"{verb} at step {step.seq}"
    again.retry_note = f"retry of step {earlier.step.seq}"
    _retry(earlier.step, step)


def _retry(failed: StepView, retry: StepView) -> None:
    if retry.retry_of is None:
        retry.retry_of = failed.seq
    if failed.retried_by is None:
        failed.retried_by = retry.seq


def _signature(step: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (item.get("kind"), item.get("call_id"), item.get("text"), item.get("arguments"))
        for item in step.get("input_items") or []
    ]


def mark_repeats(steps: list[StepView]) -> None:
    """A step that repeats the request of the failed step before it is that step's retry."""
    for failed, retry in itertools.pairwise(steps):
        if not _broke(failed.step.get("stop_reason")):
            continue
        if _signature(failed.step) == _signature(retry.step):
            _retry(failed, retry)


def link_refused_results(
    refused: list[ItemView], at_ms: float, calls: list[CallRecord], href: Callable[[ItemView], str]
) -> None:
    """A refused request's tool results point at the call they answer: the latest one with
    their id that a step before the refusal holds (the refusal recorded no step itself)."""
    latest: dict[str, CallRecord] = {}
    for call in calls:
        if call.holder.offset_ms <= at_ms and call.view.call_id is not None:
            latest[call.view.call_id] = call
    for item in refused:
        record = latest.get(item.call_id or "") if item.kind == "tool_result" else None
        if record is None:
            continue
        item.link, item.link_step = href(record.view), record.view.step_id
        emitter = record.step
        item.link_label = "↑ call" + (f" · step {emitter.seq}" if emitter else "")


def _broke(stop: str | None) -> bool:
    reason = StopReason.of(stop)
    return reason is not None and reason.broke
