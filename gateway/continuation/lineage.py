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

from gateway import ids
from gateway.continuation.keys import real_call_id
from gateway.items import Item, ItemKind
from gateway.memory import SLOTS, ByteLru, text_bytes
from gateway.step import Lineage

PARENT_TRACE_HEADER = "X-Loopwatch-Parent-Trace-Id"
PARENT_CALL_HEADER = "X-Loopwatch-Parent-Call-Id"
# A task text shorter than this names no run: "main", "yes" or a path could be anyone's.
MIN_TASK_CHARS = 16
RECENT_CALLS = 4096  # the newest tool calls kept for matching, whatever the window
RECENT_CALL_BYTES = 16 * 1024 * 1024  # and no more text than this, the oldest dropped first
MAX_TASK_CHARS = 32 * 1024  # a longer string is a file's content, not a task
_MAX_ARGUMENTS = 256 * 1024  # arguments longer than this are not parsed for tasks
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
    if not arguments or not MIN_TASK_CHARS <= len(arguments) <= _MAX_ARGUMENTS:
        return ()
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # a hostile provider's nesting: no task text
        return ()
    found: list[str] = []
    for text in _strings(value, _DEPTH):
        text = text.strip()
        if MIN_TASK_CHARS <= len(text) <= MAX_TASK_CHARS and text not in found:
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


def stored_call(
    at: float, client: str | None, stored: tuple[str, str, str | None, Lineage]
) -> RecentCall | None:
    """A call another replica stored, as a recent call; None when it carries no task."""
    trace_id, call_id, arguments, lineage = stored
    texts = task_texts(arguments)
    return RecentCall(at, client, trace_id, call_id, texts, lineage) if texts else None


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


def _call_bytes(call: RecentCall) -> int:
    return SLOTS + sum(map(text_bytes, call.texts))


def _span_bytes(_: int, call: RecentCall) -> int:
    return 160 + text_bytes(call.trace_id) + text_bytes(call.call_id)


def _lineage_bytes(trace_id: str, lineage: Lineage) -> int:
    ids = (lineage.root_trace_id, lineage.parent_trace_id, lineage.parent_call_id)
    return text_bytes(trace_id) + 96 + sum(map(text_bytes, ids))


class Lineages:
    """Recent tool calls and the runs linked here, in memory, bounded."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_s
        self._clock = clock
        self._calls: deque[RecentCall] = deque()
        self._call_bytes = 0
        self._linked = ByteLru[str, Lineage](LINKED_BYTES, _lineage_bytes)
        # Each recent call by its `execute_tool` span id (ids.tool_span_id).
        self._spans = ByteLru[int, RecentCall](LINKED_BYTES, _span_bytes)

    def step_ended(
        self, client: str | None, trace_id: str, lineage: Lineage | None, outputs: Sequence[Item]
    ) -> None:
        """A step answered: its tool calls may start sub-agents (cheap when it made none)."""
        if not any(item.kind is ItemKind.TOOL_CALL for item in outputs):
            return
        place, at = lineage or Lineage(trace_id), self._clock()
        for item in outputs:
            call_id = real_call_id(item) if item.kind is ItemKind.TOOL_CALL else None
            if call_id is not None and item.attrs.get("executed_by") != "provider":
                call = RecentCall(at, client, trace_id, call_id, (), place)
                self._spans.put(ids.tool_span_id(trace_id, call_id), call)
        for recent in recent_calls(at, client, trace_id, place, outputs):
            self._calls.append(recent)
            self._call_bytes += _call_bytes(recent)
        while self._calls and (
            len(self._calls) > RECENT_CALLS or self._call_bytes > RECENT_CALL_BYTES
        ):
            self._call_bytes -= _call_bytes(self._calls.popleft())

    def by_span(self, span_id: int) -> RecentCall | None:
        """The recent call whose `execute_tool` span a sub-agent's `traceparent` names."""
        call = self._spans.get(span_id)
        if call is None or call.at < self._clock() - self._window:
            return None
        return call

    def by_content(
        self, client: str | None, text: str, stored: Iterable[RecentCall] = ()
    ) -> RecentCall | Ambiguous | None:
        """The one recent call of this client whose task the run's first user turn holds,
        among those seen here and `stored` (another replica's, from the store)."""
        return match((*self._calls, *stored), client, text, self._clock() - self._window)

    @property
    def window_s(self) -> float:
        """How long a call may start a sub-agent found by its task (seconds)."""
        return self._window

    def stored(
        self, client: str | None, rows: Iterable[tuple[str, str, str | None, Lineage]]
    ) -> list[RecentCall]:
        """Calls another replica stored in the window, as recent calls of this client."""
        now = self._clock()
        return [call for row in rows if (call := stored_call(now, client, row)) is not None]

    def linked(self, trace_id: str, lineage: Lineage) -> None:
        """A run was linked to its parent here: its later requests know their tree."""
        if lineage.parent_trace_id is not None:
            self._linked.put(trace_id, lineage)

    def of(self, trace_id: str) -> Lineage | None:
        """The place of a run linked here (None: a root, or linked by another replica)."""
        return self._linked.get(trace_id)
