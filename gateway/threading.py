"""Continuation keys: which recorded step a request's history continues.

A step's key is a keyed hash chained over its whole input plus its output. A later request
whose history extends that step carries the same chain value at the end of the echoed
assistant turn, so one indexed lookup per assistant-turn boundary finds the trace.
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from hashlib import blake2b

from gateway.items import ASSISTANT_KINDS, Item, ItemKind

# Kinds a client commonly drops or rewrites when it echoes an assistant turn.
_IGNORED = frozenset({ItemKind.REASONING})


def _canonical(item: Item) -> bytes:
    """The fields that identify an item across an echo; null and "" are the same text."""
    arguments = item.arguments
    if arguments:
        with contextlib.suppress(ValueError):
            arguments = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    parts = (
        item.kind.value,
        item.text or "",
        item.call_id or "",
        item.tool_name or "",
        arguments or "",
        "1" if item.is_error else "",
    )
    return "\x1f".join(f"{len(p)}:{p}" for p in parts).encode()


@dataclass(frozen=True, slots=True)
class Boundary:
    """After `position` items of a history, the chain value is `key`."""

    position: int
    key: str


class ContinuationKeys:
    """Computes chain values with the per-install secret, so stored keys reveal nothing."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret[:64]

    def _step(self, state: bytes, item: Item) -> bytes:
        return blake2b(state + _canonical(item), key=self._secret, digest_size=20).digest()

    def chain(self, items: list[Item], state: bytes = b"") -> bytes:
        for item in items:
            if item.kind not in _IGNORED:
                state = self._step(state, item)
        return state

    def boundaries(self, items: list[Item]) -> tuple[list[Boundary], bytes]:
        """Keys at the end of every assistant turn, shortest first, and the full chain."""
        found: list[Boundary] = []
        state = b""
        for index, item in enumerate(items):
            if item.kind in _IGNORED:
                continue
            state = self._step(state, item)
            following = _next_relevant(items, index + 1)
            if item.kind in ASSISTANT_KINDS and (
                following is None or following.kind not in ASSISTANT_KINDS
            ):
                found.append(Boundary(_end_of_turn(items, index + 1), state.hex()))
        return found, state

    def step_key(self, input_state: bytes, output_items: list[Item]) -> str | None:
        """The key a later request's history carries if it continues this step."""
        if not any(item.kind in ASSISTANT_KINDS - _IGNORED for item in output_items):
            return None
        return self.chain(output_items, input_state).hex()


def _next_relevant(items: list[Item], start: int) -> Item | None:
    for item in items[start:]:
        if item.kind not in _IGNORED:
            return item
    return None


def _end_of_turn(items: list[Item], position: int) -> int:
    """Reasoning items right after a turn belong to it, not to what is new."""
    while position < len(items) and items[position].kind in _IGNORED:
        position += 1
    return position


@dataclass(frozen=True, slots=True)
class StepRef:
    trace_id: str
    step_id: str
    output_items: tuple[Item, ...] = ()


class RecentSteps:
    """A bounded in-memory index of recent steps, so threading rarely waits on the database.

    It also covers steps still queued for writing. Several replicas fall back to the store.
    """

    def __init__(self, capacity: int = 50_000) -> None:
        self._capacity = capacity
        self._by_key: OrderedDict[str, StepRef] = OrderedDict()
        self._by_response: OrderedDict[str, StepRef] = OrderedDict()
        self._last_of_trace: OrderedDict[str, StepRef] = OrderedDict()

    def remember(self, key: str | None, response_id: str | None, ref: StepRef) -> None:
        pairs = (
            (self._by_key, key),
            (self._by_response, response_id),
            (self._last_of_trace, ref.trace_id),
        )
        for index, value in pairs:
            if value:
                index[value] = ref
                index.move_to_end(value)
                if len(index) > self._capacity:
                    index.popitem(last=False)

    def longest(self, boundaries: list[Boundary]) -> tuple[Boundary, StepRef] | None:
        for boundary in reversed(boundaries):
            ref = self._by_key.get(boundary.key)
            if ref is not None:
                return boundary, ref
        return None

    def by_response(self, response_id: str) -> StepRef | None:
        return self._by_response.get(response_id)

    def last_of(self, trace_id: str) -> StepRef | None:
        """The newest step this process recorded for the trace."""
        return self._last_of_trace.get(trace_id)
