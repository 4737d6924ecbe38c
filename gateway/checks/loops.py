"""Repeated tool calls: one tool called with the same arguments again and again in a trace,
the mark of an agent stuck in a loop. Sans-IO: a per-trace counter and the refusal decision.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from hashlib import blake2b
from json.encoder import encode_basestring  # json.dumps of a str, ensure_ascii=False
from typing import Literal

from gateway import jsoncodec
from gateway.checks.output import call_label
from gateway.errors import RepeatedToolCall
from gateway.items import Item, ItemKind, Violation, ViolationKind

LoopMode = Literal["observe", "enforce"]

DEFAULT_THRESHOLD = 3
MAX_DISTINCT = 4096  # distinct calls remembered per trace; the least recently seen go first
SHOWN_ARGUMENT_CHARS = 120


def canonical_call(name: str, arguments: str | None, *, free_form: bool = False) -> str:
    """The call as one string: its quoted name, then its canonical arguments."""
    return encode_basestring(name) + canonical_arguments(arguments, free_form)


def canonical_arguments(arguments: str | None, free_form: bool = False) -> str:
    """The arguments' JSON with sorted keys and no spacing, so key order and whitespace do
    not hide a repeat; arguments that do not parse (or are too deep to) as their trimmed
    text, quoted. Free-form input (custom tools) is its text, quoted: it is not JSON even
    when it looks like it, and its spacing may matter."""
    if free_form:
        return encode_basestring(arguments or "")
    if arguments is None or not arguments.strip():
        return "{}"  # providers send "" for a call without parameters
    try:
        return jsoncodec.canonical(arguments, ensure_ascii=False)
    except (ValueError, RecursionError):
        return encode_basestring(arguments.strip())


def call_key(name: str, arguments: str | None, *, free_form: bool = False) -> bytes:
    text = canonical_call(name, arguments, free_form=free_form)
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Loop:
    """The first call of a trace that reached the threshold."""

    tool_name: str
    arguments: str
    count: int
    call_id: str | None


class CallCounter:
    """One trace's tool calls by canonical form; fed each step's output, in order.

    Only calls that run are counted: the first choice's (not `n > 1` alternatives'), not
    calls cut off mid-stream; calls the provider ran count too (a model that searches the
    same query again and again is as stuck as one that calls a function so).
    """

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, *, max_distinct: int = MAX_DISTINCT):
        if threshold < 2:
            raise ValueError("a loop needs a threshold of at least 2 calls")
        self.threshold = threshold
        self._max = max_distinct
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self.loop: Loop | None = None

    def count(self, name: str, arguments: str | None) -> int:
        return self._counts.get(call_key(name, arguments), 0)

    def observe(self, output_items: Iterable[Item]) -> list[Violation]:
        """Count a step's tool calls; a `repeated_tool_call` for each distinct call that
        reaches the threshold now (once: later repeats of it add none)."""
        violations: list[Violation] = []
        for item in output_items:
            name = item.tool_name
            if not name or not _counted(item):
                continue
            key = call_key(name, item.arguments, free_form=bool(item.attrs.get("free_form")))
            seen = self._counts.pop(key, 0) + 1
            self._counts[key] = seen  # last: most recently seen
            if len(self._counts) > self._max:
                self._counts.popitem(last=False)
            if seen == self.threshold:
                violations.append(self._reached(item, seen))
        return violations

    def _reached(self, item: Item, seen: int) -> Violation:
        shown = canonical_arguments(item.arguments, bool(item.attrs.get("free_form")))
        if len(shown) > SHOWN_ARGUMENT_CHARS:
            shown = shown[: SHOWN_ARGUMENT_CHARS - 1] + "…"
        if self.loop is None:
            self.loop = Loop(item.tool_name or "", shown, seen, item.call_id)
        detail = (
            f"Tool call {call_label(item)} repeats a call made {seen - 1} time(s) before in "
            f"this trace with the same arguments {shown}: the agent may be stuck in a loop."
        )
        return Violation(ViolationKind.REPEATED_TOOL_CALL, detail, call_id=item.call_id)


def _counted(item: Item) -> bool:
    return (
        item.kind is ItemKind.TOOL_CALL
        and not item.attrs.get("choice")
        and not item.attrs.get("incomplete")
    )


def loop_refusal(loop: Loop | None, mode: LoopMode) -> tuple[RepeatedToolCall, Violation] | None:
    """Whether the trace's next request is refused: under `enforce`, every request after a
    loop was seen (the trace cannot go on, as with a spent budget); never under `observe`."""
    if loop is None or mode != "enforce":
        return None
    detail = (
        f"Tool {loop.tool_name!r} was called {loop.count} times with the same arguments "
        f"{loop.arguments} in this trace."
    )
    error = RepeatedToolCall(
        f"Loopwatch refused this request: {detail} The agent appears stuck in a loop and may "
        "not call the model again in this run."
    )
    return error, Violation(ViolationKind.REPEATED_TOOL_CALL, detail, loop.call_id, enforced=True)


class TraceCounters:
    """The call counters of recent traces, in this process's memory (bounded: the oldest
    trace is forgotten first). A loop is judged per replica."""

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, *, traces: int = 10_000) -> None:
        self._threshold = threshold
        self._traces = traces
        self._by_trace: OrderedDict[str, CallCounter] = OrderedDict()

    def of(self, trace_id: str) -> CallCounter:
        counter = self._by_trace.pop(trace_id, None) or CallCounter(self._threshold)
        self._by_trace[trace_id] = counter
        if len(self._by_trace) > self._traces:
            self._by_trace.popitem(last=False)
        return counter

    def loop_of(self, trace_id: str) -> Loop | None:
        counter = self._by_trace.get(trace_id)
        return None if counter is None else counter.loop

    def for_trace(self, trace_id: str) -> TraceLoops:
        """The trace's counter as the exchange counts a step's calls with it."""
        return TraceLoops(self, trace_id)


@dataclass(frozen=True, slots=True)
class TraceLoops:
    """One trace's counter, looked up only when a step's calls are counted: a step without
    tool calls leaves the recent traces as they were."""

    counters: TraceCounters
    trace_id: str

    def observe(self, output_items: Iterable[Item]) -> list[Violation]:
        return self.counters.of(self.trace_id).observe(output_items)
