"""A bounded in-memory index of recent steps, so threading rarely waits on the database.

It also covers steps still queued for writing. Several replicas fall back to the store.
Besides continuation keys it keeps what only this process needs to know: each step's whole
input (re-rendered histories), which request continued which step (identical runs in
parallel), and the failed attempts a retry may repeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from gateway.continuation.keys import AMBIGUOUS, Boundary, StepRef, real_call_id
from gateway.items import Item, ItemKind
from gateway.memory import DICT, RECENT_STEPS_BYTES, SLOTS, TUPLE, ByteLru, text_bytes

# Identical runs in parallel share keys: the steps of this many traces are kept per key.
PER_KEY = 16
# A retry repeats a failed attempt within this many seconds (SDK back-off is far shorter).
RETRY_WINDOW_SECONDS = 600.0
# Each index's share of the byte budget, in sixteenths: the steps' keys (the lookup of
# every agent step, which must still find steps the recorder has not written) get the
# most, the small maps of ids the least.
SHARES = {
    "key": 7,
    "input": 2,
    "response": 1,
    "conversation": 1,
    "held": 1,
    "trace": 2,
    "call": 1,
    "item": 1,
    "claim": 1,
    "failed": 1,
}


def item_bytes(item: Item) -> int:
    strings = (item.text, item.call_id, item.tool_name, item.arguments)
    attrs = item.attrs
    return SLOTS + sum(map(text_bytes, strings)) + (DICT + 64 * len(attrs) if attrs else 0)


def ref_bytes(ref: StepRef) -> int:
    items = ref.output_items
    ids = text_bytes(ref.trace_id) + text_bytes(ref.step_id)
    return SLOTS + ids + TUPLE + 8 * len(items) + sum(map(item_bytes, items))


def _refs_bytes(key: str, refs: tuple[StepRef, ...]) -> int:
    return text_bytes(key) + TUPLE + sum(map(ref_bytes, refs))


def _ref_bytes(key: str, ref: StepRef | str) -> int:
    return text_bytes(key) + (ref_bytes(ref) if isinstance(ref, StepRef) else 0)


def _items_bytes(key: str, items: tuple[Item, ...]) -> int:
    return text_bytes(key) + TUPLE + sum(map(item_bytes, items))


def _ids_bytes(key: str, value: str) -> int:
    return text_bytes(key) + text_bytes(value)


def _failed_bytes(key: str, value: tuple[StepRef, float]) -> int:
    return text_bytes(key) + TUPLE + 24 + ref_bytes(value[0])


class RecentSteps:
    """Bounded in bytes (`budget`), each index by its share; the oldest entries go first, and
    what is gone is looked up in the store, as with several replicas."""

    def __init__(
        self, budget: int = RECENT_STEPS_BYTES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        part = budget // sum(SHARES.values())
        self._clock = clock
        self._by_key = ByteLru[str, tuple[StepRef, ...]](part * SHARES["key"], _refs_bytes)
        self._by_input = ByteLru[str, tuple[StepRef, ...]](part * SHARES["input"], _refs_bytes)
        self._by_response = ByteLru[str, StepRef](part * SHARES["response"], _ref_bytes)
        self._by_conversation = ByteLru[str, StepRef](part * SHARES["conversation"], _ref_bytes)
        self._by_held_state = ByteLru[str, StepRef](part * SHARES["held"], _ref_bytes)
        self._last_of_trace = ByteLru[str, StepRef](part * SHARES["trace"], _ref_bytes)
        self._by_call_id = ByteLru[str, StepRef | str](part * SHARES["call"], _ref_bytes)
        self._by_item_id = ByteLru[str, tuple[Item, ...]](part * SHARES["item"], _items_bytes)
        # step id -> attempt key
        self._claims = ByteLru[str, str](part * SHARES["claim"], _ids_bytes)
        half = part * SHARES["failed"] // 2
        self._failed = ByteLru[str, tuple[StepRef, float]](half, _failed_bytes)
        self._failed_of_trace = ByteLru[str, str](half, _ids_bytes)

    def remember(
        self,
        key: str | None,
        response_id: str | None,
        ref: StepRef,
        input_key: str | None = None,
        *,
        conversation_id: str | None = None,
        held_state: str | None = None,
    ) -> None:
        """A step that answered: later requests may continue it (the newest step of a
        conversation stands for it, and the step whose output holds a compaction for
        the requests carrying it)."""
        size = ref_bytes(ref)  # once: the same step goes into several indexes
        if key:
            self._add(self._by_key, key, ref, size)
        if input_key:
            self._add(self._by_input, input_key, ref, size)
        for index, value in (
            (self._by_response, response_id),
            (self._by_conversation, conversation_id),
            (self._by_held_state, held_state),
            (self._last_of_trace, ref.trace_id),
        ):
            if value:
                index.put(value, ref, text_bytes(value) + size)
        # An answer after a failed attempt: the trace's next request is no retry of it.
        attempt = self._failed_of_trace.pop(ref.trace_id)
        if attempt is not None:
            self._failed.pop(attempt)
        # One provider item may be recorded as several (a call the provider ran and its
        # result): a reference to it stands for all of them.
        by_item_id: dict[str, tuple[Item, ...]] = {}
        for item in ref.output_items:
            call_id = real_call_id(item) if item.kind is ItemKind.TOOL_CALL else None
            if call_id is not None:
                earlier = self._by_call_id.get(call_id)
                same = isinstance(earlier, StepRef) and earlier.step_id == ref.step_id
                emitter = ref if earlier is None or same else AMBIGUOUS
                self._by_call_id.put(call_id, emitter, text_bytes(call_id) + size)
            item_ids = item.attrs.get("item_ids")
            for item_id in item_ids if isinstance(item_ids, list) else ():
                if isinstance(item_id, str):
                    by_item_id[item_id] = (*by_item_id.get(item_id, ()), item)
        for item_id, items in by_item_id.items():
            self._by_item_id.put(item_id, items)

    def _add(
        self, index: ByteLru[str, tuple[StepRef, ...]], key: str, ref: StepRef, size: int
    ) -> None:
        """One step per trace under a key (its newest), oldest trace first."""
        earlier = index.get(key)
        if not earlier:  # the common case: a key is one step's
            index.put(key, (ref,), text_bytes(key) + TUPLE + size)
            return
        kept = tuple(r for r in earlier if r.trace_id != ref.trace_id)
        index.put(key, (*kept, ref)[-PER_KEY:])

    def emitters(self, call_ids: Iterable[str]) -> dict[str, StepRef | str]:
        """The step that emitted each known call id (AMBIGUOUS where several did)."""
        return {c: ref for c in call_ids if (ref := self._by_call_id.get(c)) is not None}

    def output_items(self, item_id: str) -> tuple[Item, ...] | None:
        """The recorded output items of one provider item id (what `item_reference` names)."""
        return self._by_item_id.get(item_id)

    def continued(self, boundaries: list[Boundary]) -> tuple[Boundary, tuple[StepRef, ...]] | None:
        """The longest boundary that continues recorded steps, and those steps (one a trace)."""
        return _longest(self._by_key, boundaries)

    def prefixed(self, starts: list[Boundary]) -> tuple[Boundary, tuple[StepRef, ...]] | None:
        """The longest assistant-turn start where a recorded step's whole input ends."""
        return _longest(self._by_input, starts)

    def by_response(self, response_id: str) -> StepRef | None:
        return self._by_response.get(response_id)

    def by_conversation(self, conversation_id: str) -> StepRef | None:
        """The newest step this process recorded of a provider-side conversation."""
        return self._by_conversation.get(conversation_id)

    def by_held_state(self, held_state: str) -> StepRef | None:
        """The step this process recorded whose output holds this provider-held history."""
        return self._by_held_state.get(held_state)

    def last_of(self, trace_id: str) -> StepRef | None:
        """The newest step this process recorded for the trace."""
        return self._last_of_trace.get(trace_id)

    def claim(self, step_id: str, attempt: str) -> None:
        """A request (its attempt key) continues this step."""
        self._claims.put(step_id, attempt)

    def claimed_by(self, step_id: str) -> str | None:
        return self._claims.get(step_id)

    def failed(self, attempt: str, ref: StepRef) -> None:
        """An attempt got no answer: the same request again is its retry."""
        self._failed.put(attempt, (ref, self._clock()))
        self._failed_of_trace.put(ref.trace_id, attempt)

    def take_failed(self, attempt: str) -> StepRef | None:
        """The failed attempt this request repeats, once: a second copy is not its retry."""
        found = self._failed.pop(attempt)
        if found is None:
            return None
        ref, at = found
        if self._failed_of_trace.get(ref.trace_id) == attempt:
            self._failed_of_trace.pop(ref.trace_id)
        return ref if self._clock() - at <= RETRY_WINDOW_SECONDS else None


def _longest(
    index: ByteLru[str, tuple[StepRef, ...]], boundaries: list[Boundary]
) -> tuple[Boundary, tuple[StepRef, ...]] | None:
    for boundary in reversed(boundaries):
        refs = index.get(boundary.key)
        if refs:
            return boundary, refs
    return None
