"""A bounded in-memory index of recent steps, so threading rarely waits on the database.

It also covers steps still queued for writing. Several replicas fall back to the store.
Besides continuation keys it keeps what only this process needs to know: each step's whole
input (re-rendered histories), which request continued which step (identical runs in
parallel), and the failed attempts a retry may repeat.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from gateway.continuation.keys import AMBIGUOUS, Boundary, StepRef, real_call_id
from gateway.items import Item, ItemKind

# Identical runs in parallel share keys: the steps of this many traces are kept per key.
PER_KEY = 16
# A retry repeats a failed attempt within this many seconds (SDK back-off is far shorter).
RETRY_WINDOW_SECONDS = 600.0


class RecentSteps:
    def __init__(self, capacity: int = 50_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = capacity
        self._clock = clock
        self._by_key: OrderedDict[str, tuple[StepRef, ...]] = OrderedDict()
        self._by_input: OrderedDict[str, tuple[StepRef, ...]] = OrderedDict()
        self._by_response: OrderedDict[str, StepRef] = OrderedDict()
        self._last_of_trace: OrderedDict[str, StepRef] = OrderedDict()
        self._by_call_id: OrderedDict[str, StepRef | str] = OrderedDict()
        self._by_item_id: OrderedDict[str, Item] = OrderedDict()
        self._claims: OrderedDict[str, str] = OrderedDict()  # step id -> attempt key
        self._failed: OrderedDict[str, tuple[StepRef, float]] = OrderedDict()
        self._failed_of_trace: OrderedDict[str, str] = OrderedDict()

    def remember(
        self, key: str | None, response_id: str | None, ref: StepRef, input_key: str | None = None
    ) -> None:
        """A step that answered: later requests may continue it."""
        if key:
            self._add(self._by_key, key, ref)
        if input_key:
            self._add(self._by_input, input_key, ref)
        for index, value in ((self._by_response, response_id), (self._last_of_trace, ref.trace_id)):
            if value:
                self._put(index, value, ref)
        # An answer after a failed attempt: the trace's next request is no retry of it.
        attempt = self._failed_of_trace.pop(ref.trace_id, None)
        if attempt is not None:
            self._failed.pop(attempt, None)
        for item in ref.output_items:
            call_id = real_call_id(item) if item.kind is ItemKind.TOOL_CALL else None
            if call_id is not None:
                earlier = self._by_call_id.get(call_id)
                same = isinstance(earlier, StepRef) and earlier.step_id == ref.step_id
                emitter = ref if earlier is None or same else AMBIGUOUS
                self._put(self._by_call_id, call_id, emitter)
            item_ids = item.attrs.get("item_ids")
            for item_id in item_ids if isinstance(item_ids, list) else ():
                if isinstance(item_id, str):
                    self._put(self._by_item_id, item_id, item)

    def _add(self, index: OrderedDict[str, tuple[StepRef, ...]], key: str, ref: StepRef) -> None:
        """One step per trace under a key (its newest), oldest trace first."""
        kept = tuple(r for r in index.get(key, ()) if r.trace_id != ref.trace_id)
        self._put(index, key, (*kept, ref)[-PER_KEY:])

    def _put(self, index: OrderedDict[str, Any], key: str, value: Any) -> None:
        index[key] = value
        index.move_to_end(key)
        if len(index) > self._capacity:
            index.popitem(last=False)

    def emitters(self, call_ids: Iterable[str]) -> dict[str, StepRef | str]:
        """The step that emitted each known call id (AMBIGUOUS where several did)."""
        return {c: ref for c in call_ids if (ref := self._by_call_id.get(c)) is not None}

    def output_item(self, item_id: str) -> Item | None:
        """A recorded output item by the provider's item id (what `item_reference` names)."""
        return self._by_item_id.get(item_id)

    def longest(self, boundaries: list[Boundary]) -> tuple[Boundary, StepRef] | None:
        """The step whose key is the longest boundary (the newest if several share it)."""
        found = self.continued(boundaries)
        return None if found is None else (found[0], found[1][-1])

    def continued(self, boundaries: list[Boundary]) -> tuple[Boundary, tuple[StepRef, ...]] | None:
        """The longest boundary that continues recorded steps, and those steps (one a trace)."""
        return _longest(self._by_key, boundaries)

    def prefixed(self, starts: list[Boundary]) -> tuple[Boundary, tuple[StepRef, ...]] | None:
        """The longest assistant-turn start where a recorded step's whole input ends."""
        return _longest(self._by_input, starts)

    def by_response(self, response_id: str) -> StepRef | None:
        return self._by_response.get(response_id)

    def last_of(self, trace_id: str) -> StepRef | None:
        """The newest step this process recorded for the trace."""
        return self._last_of_trace.get(trace_id)

    def claim(self, step_id: str, attempt: str) -> None:
        """A request (its attempt key) continues this step."""
        self._put(self._claims, step_id, attempt)

    def claimed_by(self, step_id: str) -> str | None:
        return self._claims.get(step_id)

    def failed(self, attempt: str, ref: StepRef) -> None:
        """An attempt got no answer: the same request again is its retry."""
        self._put(self._failed, attempt, (ref, self._clock()))
        self._put(self._failed_of_trace, ref.trace_id, attempt)

    def take_failed(self, attempt: str) -> StepRef | None:
        """The failed attempt this request repeats, once: a second copy is not its retry."""
        found = self._failed.pop(attempt, None)
        if found is None:
            return None
        ref, at = found
        if self._failed_of_trace.get(ref.trace_id) == attempt:
            del self._failed_of_trace[ref.trace_id]
        return ref if self._clock() - at <= RETRY_WINDOW_SECONDS else None


def _longest(
    index: OrderedDict[str, tuple[StepRef, ...]], boundaries: list[Boundary]
) -> tuple[Boundary, tuple[StepRef, ...]] | None:
    for boundary in reversed(boundaries):
        refs = index.get(boundary.key)
        if refs:
            return boundary, refs
    return None
