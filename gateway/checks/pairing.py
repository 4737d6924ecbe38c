"""Tool call ↔ result pairing over typed items (sans-IO, one pass: it runs on every request).

A history's orphan, missing or duplicate ids; across steps, a dropped recorded call is missing.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gateway.errors import PairingViolation
from gateway.items import (
    ASSISTANT_KINDS,
    EXECUTED_BY,
    PROVIDER,
    Item,
    ItemKind,
    Violation,
    ViolationKind,
    provider_run,
)
from gateway.protocols.base import HistoryRules

ENFORCEABLE = frozenset(
    {
        ViolationKind.ORPHAN_TOOL_RESULT,
        ViolationKind.MISSING_TOOL_RESULT,
        ViolationKind.DUPLICATE_CALL_ID,
    }
)

_ORPHAN = ViolationKind.ORPHAN_TOOL_RESULT
_MISSING = ViolationKind.MISSING_TOOL_RESULT
_DUPLICATE = ViolationKind.DUPLICATE_CALL_ID
_CALL = ItemKind.TOOL_CALL
_RESULT = ItemKind.TOOL_RESULT
_USER = ItemKind.USER
_INSTRUCTION = ItemKind.INSTRUCTION
# Kinds that open an assistant turn; REASONING too, as Responses and Anthropic put it first.
_TURN_KINDS = tuple(ASSISTANT_KINDS)


def _key(item: Item) -> str | None:
    """The id that pairs this item, or None when the provider gave none.

    An id the gateway invented (attrs "internal_call_id") is not one the client knows,
    so such items pair by order like id-less ones.
    """
    if not item.call_id or (item.attrs and item.attrs.get("internal_call_id")):
        return None
    return item.call_id


def _label(item: Item) -> str | None:
    """The id to name in a violation: the real one, else the gateway's internal one."""
    internal = item.attrs.get("internal_id")
    return item.call_id or (internal if isinstance(internal, str) else None)


def _where(item: Item, pos: int) -> str:
    # Adapters may know the wire position (messages.[N]); that is what a person can find.
    index = item.attrs.get("message_index")
    return f"message {index}" if isinstance(index, int) else f"item {pos}"


def _describe(item: Item, pos: int, what: str) -> str:
    """E.g. 'tool call call_1 (get_weather, message 2)'."""
    label = _label(item) or "without id"
    name = f"{item.tool_name}, " if item.tool_name else ""
    return f"{what} {label} ({name}{_where(item, pos)})"


@dataclass(slots=True)
class _Call:
    item: Item
    pos: int
    turn: int
    pending: int = 1  # results still owed; 2+ only when one turn repeats an id
    answer: tuple[Item, int] | None = None  # its last result, for duplicate details


class _Checker:
    """State of one pass; `feed` items in order, then `finish`."""

    def __init__(self, history: HistoryRules) -> None:
        self.same_turn = history.results_follow_their_turn
        self.found: list[tuple[int, Violation]] = []
        self.calls: dict[str, _Call] = {}
        self.turn = 0
        self.in_turn = False
        self.turn_calls: list[_Call] = []  # calls of the open turn, still to be answered
        # Id-less calls of the current turn, in order; answered entries are skipped lazily.
        self.anon_any: deque[_Call] = deque()
        self.anon_by_name: dict[str, deque[_Call]] = {}

    def flag(self, pos: int, kind: ViolationKind, item: Item, detail: str) -> None:
        self.found.append((pos, Violation(kind=kind, detail=detail, call_id=_label(item))))

    def feed(self, pos: int, item: Item) -> None:
        kind = item.kind
        if (kind is _CALL or kind is _RESULT) and item.attrs.get(EXECUTED_BY) == PROVIDER:
            # Run and answered by the provider inside its own answer: the client owes
            # nothing for it, and it is part of the assistant turn it sits in.
            if not self.in_turn:
                self.start_turn(pos, item)
            return
        # Tuple, not the frozenset: membership then stays an identity test, while hashing
        # an enum member runs Python code, once per item on the hot path.
        if kind in _TURN_KINDS:
            if not self.in_turn:
                self.start_turn(pos, item)
            if kind is _CALL:
                self.add_call(pos, item)
        elif kind is _RESULT:
            self.in_turn = False
            self.add_result(pos, item)
        elif kind is _USER:
            self.in_turn = False
            if self.turn_calls:
                self.close_turn(pos, item, "the next user message")
        elif kind is _INSTRUCTION:
            self.in_turn = False
        # OTHER items (provider-specific extras) neither open nor close a turn.

    def start_turn(self, pos: int, item: Item) -> None:
        if self.turn_calls:
            self.close_turn(pos, item, "the next assistant turn")
        self.turn += 1
        self.in_turn = True
        if self.anon_any or self.anon_by_name:
            self.anon_any = deque()
            self.anon_by_name = {}

    def close_turn(self, pos: int, item: Item, boundary: str) -> None:
        for call in self.turn_calls:
            if call.pending > 0:
                text = _describe(call.item, call.pos, "Tool call")
                detail = f"{text} has no tool result before {boundary} at {_where(item, pos)}."
                self.flag(call.pos, _MISSING, call.item, detail)
        self.turn_calls = []

    def finish(self) -> list[Violation]:
        for call in self.turn_calls:
            if call.pending > 0:
                text = _describe(call.item, call.pos, "Tool call")
                detail = f"{text} has no tool result: the history ends without answering it."
                self.flag(call.pos, _MISSING, call.item, detail)
        # Missing calls are found at the turn's end; report them where the call stands.
        self.found.sort(key=lambda found: found[0])
        return [violation for _, violation in self.found]

    def add_call(self, pos: int, item: Item) -> None:
        key = _key(item)
        if key is None:
            call = _Call(item, pos, self.turn)
            self.anon_any.append(call)
            self.anon_by_name.setdefault(item.tool_name or "", deque()).append(call)
            self.turn_calls.append(call)
            return
        earlier = self.calls.get(key)
        if earlier is not None:
            first = _describe(earlier.item, earlier.pos, "tool call")
            text = _describe(item, pos, "Tool call")
            self.flag(pos, _DUPLICATE, item, f"{text} reuses the call id of {first}.")
            if earlier.turn == self.turn:
                # Same turn: one entry owes two results, so each result is counted once.
                earlier.pending += 1
                return
        call = _Call(item, pos, self.turn)
        self.calls[key] = call
        self.turn_calls.append(call)

    def add_result(self, pos: int, item: Item) -> None:
        key = _key(item)
        call = self.calls.get(key) if key is not None else self.match_anon(item)
        if call is None:
            text = _describe(item, pos, "Tool result for")
            detail = f"{text} answers no earlier tool call."
            if key is None:
                name = f"of tool {item.tool_name} " if item.tool_name else ""
                detail = f"{text} has no unanswered id-less call {name}in the preceding turn."
            self.flag(pos, _ORPHAN, item, detail)
            return
        if call.pending == 0 and call.answer is not None:
            text = _describe(item, pos, "Tool result for")
            where = _where(*call.answer)
            self.flag(pos, _DUPLICATE, item, f"{text} answers a call already answered at {where}.")
            return
        call.pending -= 1
        call.answer = (item, pos)
        if self.same_turn and call.turn != self.turn:
            text = _describe(item, pos, "Tool result for")
            first = _describe(call.item, call.pos, "tool call")
            detail = (
                f"{text} answers {first} of an earlier assistant turn; Anthropic requires "
                "tool results to answer the immediately preceding assistant turn."
            )
            self.flag(pos, _ORPHAN, item, detail)

    def match_anon(self, item: Item) -> _Call | None:
        """Chat Completions without ids: results follow their calls in order."""
        queue = self.anon_by_name.get(item.tool_name) if item.tool_name else self.anon_any
        while queue:
            if queue[0].pending > 0:
                return queue.popleft()
            queue.popleft()
        return None


def check_history(items: Sequence[Item], *, history: HistoryRules) -> list[Violation]:
    """Pairing violations of one request's whole item history, in history order.

    - orphan_tool_result: a result whose id answers no earlier unanswered call; for
      a protocol whose results follow their turn (Anthropic's) also one answering a call
      older than the preceding assistant turn.
    - missing_tool_result: a call without a result before the next assistant turn, the next
      user item or the end of the history (the same rule for every protocol: each provider
      refuses a history whose last tool calls are unanswered).
    - duplicate_call_id: a call id used twice (in one turn or across turns), or a second
      result for one call.
    Ids pair calls and results; id-less ones pair by order and tool name within a turn.
    With `previous_response_id` the provider holds the earlier turns: prepend them first.
    """
    checker = _Checker(history)
    for pos, item in enumerate(items):
        checker.feed(pos, item)
    return checker.finish()


def check_continuation(
    previous_output: Sequence[Item], new_input: Sequence[Item]
) -> list[Violation]:
    """Calls the previous step of the trace emitted that this request drops: missing_tool_result.

    `new_input` holds the items new since that step. A recorded call is fine when the new
    items answer it or echo it (an echoed, unanswered call is check_history's to report).
    A client that rewrote the assistant turn (other ids) leaves the recorded calls
    unanswered. Calls cut off mid-stream (attrs "incomplete") are exempt: truncated_tool_call
    covers them and a client may rightly drop them.
    """
    seen: set[str] = set()
    anon_named: Counter[str] = Counter()
    anon_unnamed = 0
    anon_echoed = False
    for item in new_input:
        if item.kind is _CALL or item.kind is _RESULT:
            key = _key(item)
            if key is not None:
                seen.add(key)
            elif item.kind is _CALL:
                anon_echoed = True
            elif item.tool_name:
                anon_named[item.tool_name] += 1
            else:
                anon_unnamed += 1
    found: list[Violation] = []
    for item in _owed(previous_output, seen):
        key = _key(item)
        if key is not None:
            if key in seen:
                continue
        elif anon_echoed:
            continue  # the echoed id-less calls pair within the history itself
        elif item.tool_name and anon_named[item.tool_name] > 0:
            anon_named[item.tool_name] -= 1
            continue
        elif anon_unnamed > 0:
            anon_unnamed -= 1
            continue
        name = f" ({item.tool_name})" if item.tool_name else ""
        label = _label(item) or "without id"
        detail = (
            f"The previous step emitted call {label}{name} but this request does not answer it."
        )
        found.append(Violation(kind=_MISSING, detail=detail, call_id=_label(item)))
    return found


def _owed(previous_output: Sequence[Item], seen: set[str]) -> list[Item]:
    """The previous step's calls the client is to answer: complete, run by the client, of
    the choice it goes on from (`n > 1`)."""
    kept = _kept_choices(previous_output, seen)
    return [
        item
        for item in previous_output
        if item.kind is _CALL
        and not item.attrs.get("incomplete")
        and not provider_run(item)
        and (item.attrs.get("choice") or 0) in kept
    ]


def _kept_choices(previous_output: Sequence[Item], seen: set[str]) -> set[int]:
    """The choices of the previous answer this request goes on from: those whose calls it
    echoes or answers; the first when it names none (one choice is all most answers have)."""
    kept = {
        item.attrs.get("choice") or 0
        for item in previous_output
        if item.kind is _CALL and (key := _key(item)) is not None and key in seen
    }
    return kept or {0}


# A result with an unknown id also leaves its intended call unanswered: the orphan is the
# cause the client can act on, so it is named first.
_REFUSAL_ORDER = (_ORPHAN, _DUPLICATE, _MISSING)


def first_enforceable(violations: Iterable[Violation]) -> Violation | None:
    """The violation that refuses the request in enforce mode, if any: orphan results first."""
    found = [v for v in violations if v.kind in ENFORCEABLE]
    return min(found, key=lambda v: _REFUSAL_ORDER.index(v.kind), default=None)


def to_error(violation: Violation, *, history: HistoryRules) -> PairingViolation:
    """The 400 error naming the rule, the call id and the client's history field."""
    message = (
        f"Loopwatch pairing check failed: {violation.kind.value}: {violation.detail} "
        "Set LOOPWATCH_PAIRING=observe to forward such requests."
    )
    rule, call_id = violation.kind.value, violation.call_id
    return PairingViolation(message, rule=rule, call_id=call_id, param=history.param)


def check_request(
    items: list[Item],
    *,
    history: HistoryRules,
    new_items: list[Item],
    previous_output: list[Item] | None,
    continues_response: bool,
    unseen_calls: bool = False,
) -> list[Violation]:
    """Every pairing rule a request is held to, given what its trace's last step emitted.

    `continues_response`: the request names a previous response (Responses API, Anthropic
    message threads) or a conversation, whose turns the provider holds instead of the
    request: the calls recorded for its last step are prepended, so a result for one of them
    pairs and a dropped one is missing.
    `unseen_calls`: the history refers to items the gateway cannot see (an unresolved
    `item_reference`, a compaction item, a conversation that may hold items added without
    the gateway), so a result answering none of the calls it saw is no orphan.
    """
    if continues_response:
        if previous_output is not None:
            # The calls to answer are the ones recorded for that response.
            return _without_orphans(
                check_history([*previous_output, *items], history=history), unseen_calls
            )
        # A response never recorded here: its calls are unknown, so a result answering one
        # of them cannot be called an orphan.
        return _without_orphans(check_history(items, history=history), True)
    found = _without_orphans(check_history(items, history=history), unseen_calls)
    if previous_output is not None:
        flagged = {(v.kind, v.call_id) for v in found}  # one problem is reported once
        found += [
            v
            for v in check_continuation(previous_output, new_items)
            if (v.kind, v.call_id) not in flagged
        ]
    return found


def _without_orphans(found: list[Violation], unseen_calls: bool) -> list[Violation]:
    if not unseen_calls:
        return found
    return [v for v in found if v.kind is not ViolationKind.ORPHAN_TOOL_RESULT]
