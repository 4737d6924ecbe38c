"""Continuation keys: which recorded step a request's history continues.

A step's key is a keyed hash chained over its whole input plus its output. A later request
whose history extends that step carries the same chain value at the end of the echoed
assistant turn, so one indexed lookup per assistant-turn boundary finds the trace. When an
echo was rewritten, the tool call ids it keeps name the step instead (`last_call_turn`);
when it was re-rendered as text, the step's whole input is still its prefix (`Scan.starts`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from hashlib import blake2b

from gateway import jsoncodec
from gateway.items import ASSISTANT_KINDS, EXECUTED_BY, PROVIDER, Item, ItemKind
from gateway.protocols.base import REFERENCE_TYPE

# Kinds a client commonly drops or rewrites when it echoes an assistant turn.
_IGNORED = frozenset({ItemKind.REASONING})
_OTHER = ItemKind.OTHER


def _skipped(item: Item) -> bool:
    """Items left out of the chain: reasoning, and references nothing recorded resolves
    (they most often stand for reasoning a client echoes by id)."""
    return item.kind in _IGNORED or (
        item.kind is ItemKind.OTHER and item.attrs.get("type") == REFERENCE_TYPE
    )


def _assistant(item: Item) -> bool:
    """Part of an assistant turn: what a model says, and the results of the calls its
    provider ran inside the turn."""
    kind = item.kind
    if kind is ItemKind.TOOL_RESULT:
        return item.attrs.get(EXECUTED_BY) == PROVIDER
    return kind in ASSISTANT_KINDS


def _canonical(item: Item) -> bytes:
    """The fields that identify an item across an echo; null and "" are the same text."""
    arguments = item.arguments
    if arguments:
        # Deeply nested arguments compare as the text they are.
        with contextlib.suppress(ValueError, RecursionError):
            arguments = jsoncodec.canonical(arguments, ensure_ascii=True)
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


@dataclass(frozen=True, slots=True)
class Scan:
    boundaries: list[Boundary]  # ends of assistant turns, shortest first
    starts: list[Boundary]  # starts of assistant turns: a recorded input may end there
    state: bytes  # the chain over the whole input

    def attempt_key(self, model: str | None, stream: bool) -> str:
        """What says two requests are the same attempt: the same input, model and mode."""
        tail = f"\x1f{model or ''}\x1f{int(stream)}".encode()
        return blake2b(self.state + tail, digest_size=16).hexdigest()


class ContinuationKeys:
    """Computes chain values with the per-install secret, so stored keys reveal nothing."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret[:64]

    def _step(self, state: bytes, item: Item) -> bytes:
        return blake2b(state + _canonical(item), key=self._secret, digest_size=20).digest()

    def chain(self, items: Iterable[Item], state: bytes = b"") -> bytes:
        for item in items:
            if not _skipped(item):
                state = self._step(state, item)
        return state

    def boundaries(self, items: list[Item]) -> tuple[list[Boundary], bytes]:
        """Keys at the end of every assistant turn, shortest first, and the full chain."""
        scan = self.scan(items)
        return scan.boundaries, scan.state

    def scan(self, items: list[Item]) -> Scan:
        """One pass over a history: the chain value at the end of every assistant turn, at
        the start of every assistant turn after the first item, and over the whole input."""
        found: list[Boundary] = []
        starts: list[Boundary] = []
        state = b""
        kept = [index for index, item in enumerate(items) if not _skipped(item)]
        in_turn = False  # after an assistant item, with only `other` items since
        for k, index in enumerate(kept):
            item = items[index]
            assistant = _assistant(item)
            if k and assistant and not _assistant(items[kept[k - 1]]):
                starts.append(Boundary(index, state.hex()))
            state = self._step(state, item)
            following = items[kept[k + 1]] if k + 1 < len(kept) else None
            if assistant and (following is None or not _assistant(following)):
                found.append(Boundary(_end_of_turn(items, index + 1), state.hex()))
            elif in_turn and _closes_extras(item, following):
                # The answer may end in items of a type the adapter could not type: the
                # turn with them is a boundary too, as their step recorded them.
                found.append(Boundary(_end_of_turn(items, index + 1), state.hex()))
            in_turn = assistant or (in_turn and item.kind is _OTHER)
        return Scan(found, starts, state)

    def step_key(self, input_state: bytes, output_items: Sequence[Item]) -> str | None:
        """The key a later request's history carries if it continues this step."""
        if not any(item.kind in ASSISTANT_KINDS - _IGNORED for item in output_items):
            return None
        return self.chain(output_items, input_state).hex()


def _closes_extras(item: Item, following: Item | None) -> bool:
    """`item` is the last of the `other` items that follow an assistant turn."""
    if item.kind is not _OTHER:
        return False
    return following is None or not (following.kind is _OTHER or _assistant(following))


def _end_of_turn(items: list[Item], position: int) -> int:
    """Reasoning items right after a turn belong to it, not to what is new."""
    while position < len(items) and _skipped(items[position]):
        position += 1
    return position


def real_call_id(item: Item) -> str | None:
    """The call id the provider gave, or None for one the gateway invented."""
    if not item.call_id or item.attrs.get("internal_call_id") or item.attrs.get("internal_id"):
        return None
    return item.call_id


def call_filter_key(call_id: str) -> str:
    """A call id as the key filter takes keys: hex of a hash (uniform bits)."""
    return blake2b(call_id.encode(), digest_size=16, person=b"loopwatch-call").hexdigest()


@dataclass(frozen=True, slots=True)
class CallTurn:
    """The last assistant turn of a history that echoes tool calls with provider ids."""

    end: int  # the position right after the turn: what follows is new
    call_ids: tuple[str, ...]


def last_call_turn(items: list[Item]) -> CallTurn | None:
    """Frameworks rewrite the text and reasoning of the turns they echo, but keep call ids."""
    end: int | None = None
    ids: list[str] = []
    for position in range(len(items) - 1, -1, -1):
        item = items[position]
        in_turn = _assistant(item) or _skipped(item)
        if end is not None and not in_turn:
            break
        call_id = real_call_id(item) if item.kind is ItemKind.TOOL_CALL else None
        if call_id is not None:
            if end is None:
                end = _end_of_turn(items, position + 1)
            ids.append(call_id)
    if end is None:
        return None
    return CallTurn(end, tuple(reversed(ids)))


# A call id more than one recorded step emitted (a provider that counts ids from 0 in every
# response) names no step.
AMBIGUOUS = "ambiguous"


def sole_emitter(emitters: Iterable[StepRef | str | None]) -> StepRef | None:
    """The one step that emitted every known id of a turn, or None if there is not exactly one."""
    found: StepRef | None = None
    for ref in emitters:
        if ref is None:
            continue
        if isinstance(ref, str) or (found is not None and ref.step_id != found.step_id):
            return None
        found = ref
    return found


def resolve_references(
    items: list[Item], recorded: Callable[[str], Sequence[Item] | None]
) -> tuple[list[Item], bool]:
    """Responses `item_reference` inputs replaced by the recorded output items they name.

    One reference may name several recorded items (a call the provider ran and its result),
    several references one recorded item (messages merged into one text): it is kept once.
    Returns the history and whether any reference stayed unresolved.
    """
    if not any(
        item.kind is ItemKind.OTHER and item.attrs.get("type") == REFERENCE_TYPE for item in items
    ):
        return items, False
    resolved: list[Item] = []
    unresolved = False
    previous: Item | None = None
    for item in items:
        reference = item.attrs.get("id") if item.attrs.get("type") == REFERENCE_TYPE else None
        targets = recorded(reference) if isinstance(reference, str) else None
        if reference is not None and not targets:
            unresolved = True
        if not targets:
            resolved.append(item)
            previous = None
            continue
        index = item.attrs.get("message_index")
        for target in targets:
            if target is not previous:
                resolved.append(target.with_changes(attrs={**target.attrs, "message_index": index}))
            previous = target
    return resolved, unresolved


@dataclass(frozen=True, slots=True)
class StepRef:
    trace_id: str
    step_id: str
    output_items: tuple[Item, ...] = ()
