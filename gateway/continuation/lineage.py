"""Which run started a new run (a sub-agent), decided at its first request, never guessed.

In order: the `X-Loopwatch-Parent-Trace-Id` header (and `-Parent-Call-Id`); a W3C
`traceparent` naming a step's `execute_tool` span; the task text: the new run's first user
turn contains a string argument (16 characters or more) of exactly one recent tool call of
the same client. `Lineages` keeps, in memory, those recent calls (fed at each step's end, so
a sub-agent whose request comes before its parent's step is stored is found) and the place
of each run this process linked; the store answers for what another replica saw.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from gateway.continuation.keys import real_call_id
from gateway.items import Item, ItemKind
from gateway.memory import ByteLru, text_bytes
from gateway.step import Lineage

PARENT_TRACE_HEADER = "X-Loopwatch-Parent-Trace-Id"
PARENT_CALL_HEADER = "X-Loopwatch-Parent-Call-Id"
# A task text shorter than this names no run: "main", "yes" or a path could be anyone's.
MIN_TASK_CHARS = 16
RECENT_CALLS = 4096  # the newest tool calls kept for matching, whatever the window
LINKED_BYTES = 4 * 1024 * 1024  # the places of runs linked here (a run's later requests)
_STRINGS_PER_CALL = 64  # a call's string arguments looked at (a task is one of the first)
_DEPTH = 8  # how deep into an argument's JSON its strings are looked for

HEADER, TRACEPARENT, CONTENT = "header", "traceparent", "content"


@dataclass(frozen=True, slots=True)
class RecentCall:
    """A tool call a step answered with, as a sub-agent's first request may name it."""

    at: float  # clock() when its step ended
    client: str | None  # the calling client's key fingerprint
    trace_id: str
    call_id: str
    texts: tuple[str, ...]  # its string arguments long enough to be a task
    lineage: Lineage  # the calling run's place in its tree


@dataclass(frozen=True, slots=True)
class Ambiguous:
    """Several recent calls hold the task text: no link."""

    count: int


def task_texts(arguments: str | None) -> tuple[str, ...]:
    """The string values of a call's JSON arguments long enough to be a task, nested ones
    included (bounded); none when they do not parse."""
    if not arguments or len(arguments) < MIN_TASK_CHARS:
        return ()
    try:
        value = json.loads(arguments)
    except ValueError:
        return ()
    found: list[str] = []
    for text in _strings(value, _DEPTH):
        text = text.strip()
        if len(text) >= MIN_TASK_CHARS and text not in found:
            found.append(text)
            if len(found) >= _STRINGS_PER_CALL:
                break
    return tuple(found)


def _strings(value: object, depth: int) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif depth and isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner, depth - 1)
    elif depth and isinstance(value, list):
        for inner in value:
            yield from _strings(inner, depth - 1)


def first_user_turn(items: Sequence[Item]) -> str:
    """The text of the user turn a run opens with: its user items before any answer."""
    texts: list[str] = []
    for item in items:
        if item.kind is ItemKind.USER:
            if item.text:
                texts.append(item.text)
        elif item.kind is not ItemKind.INSTRUCTION:
            break
    return "\n".join(texts)


def recent_calls(
    at: float, client: str | None, trace_id: str, lineage: Lineage, outputs: Iterable[Item]
) -> list[RecentCall]:
    """The tool calls of a step's answer that carry a task text."""
    calls = []
    for item in outputs:
        if item.kind is not ItemKind.TOOL_CALL or item.attrs.get("executed_by") == "provider":
            continue
        call_id = real_call_id(item)
        texts = task_texts(item.arguments)
        if call_id is not None and texts:
            calls.append(RecentCall(at, client, trace_id, call_id, texts, lineage))
    return calls


def match(
    calls: Iterable[RecentCall], client: str | None, text: str, since: float
) -> RecentCall | Ambiguous | None:
    """The one call of this client since `since` whose task text the turn contains."""
    if len(text) < MIN_TASK_CHARS:
        return None
    found: dict[tuple[str, str], RecentCall] = {}
    for call in calls:
        if call.at < since or call.client != client:
            continue
        if any(task in text for task in call.texts):
            found[(call.trace_id, call.call_id)] = call
    if len(found) > 1:
        return Ambiguous(len(found))
    return next(iter(found.values()), None)


def _lineage_bytes(trace_id: str, lineage: Lineage) -> int:
    ids = (lineage.root_trace_id, lineage.parent_trace_id, lineage.parent_call_id)
    return text_bytes(trace_id) + 96 + sum(map(text_bytes, ids))


class Lineages:
    """Recent tool calls and the runs linked here, in memory, bounded."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_s
        self._clock = clock
        self._calls: deque[RecentCall] = deque(maxlen=RECENT_CALLS)
        self._linked = ByteLru[str, Lineage](LINKED_BYTES, _lineage_bytes)

    def step_ended(
        self, client: str | None, trace_id: str, lineage: Lineage | None, outputs: Sequence[Item]
    ) -> None:
        """A step answered: its tool calls may start sub-agents (cheap when it made none)."""
        if not any(item.kind is ItemKind.TOOL_CALL for item in outputs):
            return
        place = lineage or Lineage(trace_id)
        self._calls.extend(recent_calls(self._clock(), client, trace_id, place, outputs))

    def by_content(self, client: str | None, text: str) -> RecentCall | Ambiguous | None:
        """The one recent call of this client whose task the run's first user turn holds."""
        return match(self._calls, client, text, self._clock() - self._window)

    def linked(self, trace_id: str, lineage: Lineage) -> None:
        """A run was linked to its parent here: its later requests know their tree."""
        if lineage.parent_trace_id is not None:
            self._linked.put(trace_id, lineage)

    def of(self, trace_id: str) -> Lineage | None:
        """The place of a run linked here (None: a root, or linked by another replica)."""
        return self._linked.get(trace_id)
