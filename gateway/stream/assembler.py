"""Assembly state machine: neutral deltas in, one step's output out.

The transition table below is the only place the stream's state changes; a delta that is
illegal in the current state is recorded as an anomaly and dropped, never raised.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from gateway.items import (
    DIGESTS,
    NO_BILLING,
    TOOL_TYPE,
    Billing,
    Item,
    ItemKind,
    StopReason,
    Usage,
    Violation,
    provider_run,
)
from gateway.stream.deltas import (
    BillingDelta,
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    ItemsDelta,
    MessageIdDelta,
    MetaDelta,
    ReasoningDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)


@dataclass(slots=True)
class Assembled:
    output_items: list[Item]
    stop_reason: StopReason
    raw_stop_reason: str | None
    usage: Usage
    response_id: str | None = None
    model: str | None = None
    error: dict[str, Any] | None = None  # {"message","type","code"} of an error event
    complete: bool = False  # the protocol's completion marker arrived
    violations: list[Violation] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)  # illegal deltas, for logs and tests
    billing: Billing = NO_BILLING
    refusal_category: str | None = None
    pending: bool = False  # the provider is still working on it (see FinishDelta)


class State(Enum):
    # Members are singletons: identity hashing, in C, for the transition tables.
    __hash__ = object.__hash__

    OPEN = "open"  # deltas flowing, no choice finished yet
    FINISHED = "finished"  # a choice reported its finish reason
    FAILED = "failed"  # an error event arrived
    ENDED = "ended"  # the protocol's completion marker arrived; nothing may follow


class Event(Enum):
    # Members are singletons: identity hashing, in C, for the transition tables.
    __hash__ = object.__hash__

    META = "meta"
    CONTENT = "content"
    USAGE = "usage"
    FINISH = "finish"
    ERROR = "error"
    END = "end"


_ANY_BUT_END = {Event.META, Event.CONTENT, Event.USAGE, Event.FINISH}

# (state, event) → next state. A pair missing here is illegal. Content stays legal after a
# finish because choices of an n>1 response finish one by one; usage often follows the finish.
TRANSITIONS: dict[tuple[State, Event], State] = {
    **{(State.OPEN, e): State.OPEN for e in _ANY_BUT_END - {Event.FINISH}},
    (State.OPEN, Event.FINISH): State.FINISHED,
    **{(State.FINISHED, e): State.FINISHED for e in _ANY_BUT_END},
    **{(State.FAILED, e): State.FAILED for e in _ANY_BUT_END},
    **{(s, Event.ERROR): State.FAILED for s in (State.OPEN, State.FINISHED, State.FAILED)},
    **{(s, Event.END): State.ENDED for s in (State.OPEN, State.FINISHED, State.FAILED)},
}

_EVENT_OF: dict[type, Event] = {
    MetaDelta: Event.META,
    TextDelta: Event.CONTENT,
    RefusalDelta: Event.CONTENT,
    ReasoningDelta: Event.CONTENT,
    ReasoningSummaryDelta: Event.CONTENT,
    ToolCallStart: Event.CONTENT,
    MessageIdDelta: Event.CONTENT,
    ItemsDelta: Event.CONTENT,
    ToolCallArgs: Event.CONTENT,
    ToolCallEnd: Event.CONTENT,
    UsageDelta: Event.USAGE,
    FinishDelta: Event.FINISH,
    ErrorDelta: Event.ERROR,
    EndDelta: Event.END,
    BillingDelta: Event.USAGE,
}


@dataclass(slots=True)
class _Call:
    call_id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)
    ended: bool = False
    item_id: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Text:
    """Text up to the next whole item: one assistant text item."""

    parts: list[str] = field(default_factory=list)
    # The provider's ids of the output messages merged into it (Responses), so an echoed
    # `item_reference` can be resolved to what it stands for.
    message_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Choice:
    # Text and whole items (ItemsDelta) in the order they came.
    sequence: list[_Text | Item] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    reasoning_chars: int | None = None  # None: no reasoning seen
    reasoning_attrs: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    reasoning_ids: list[str] = field(default_factory=list)
    reasoning_digests: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: FinishDelta | None = None


class Assembler:
    """Feed every delta of one response in order; the exchange then reads `output()`."""

    def __init__(self) -> None:
        self.state = State.OPEN
        self._choices: dict[int, _Choice] = {}
        self._usage = Usage()
        self._response_id: str | None = None
        self._model: str | None = None
        self._error: dict[str, Any] | None = None
        self._anomalies: list[str] = []
        self._billing = NO_BILLING

    def feed(self, delta: Delta) -> None:
        event = _EVENT_OF[type(delta)]
        following = TRANSITIONS.get((self.state, event))
        if following is None:
            self._anomalies.append(f"{type(delta).__name__} in state {self.state.value}")
            return
        self.state = following
        self._apply(delta)

    def _apply(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta):
            _text(self._content(delta.choice)).parts.append(delta.text)
        elif isinstance(delta, ToolCallArgs):
            self._call(delta.choice, delta.index).fragments.append(delta.fragment)
        elif isinstance(delta, ToolCallStart):
            self._start_call(delta)
        elif isinstance(delta, ReasoningDelta):
            choice = self._content(delta.choice)
            choice.reasoning_chars = (choice.reasoning_chars or 0) + delta.chars
            choice.reasoning_attrs.update(delta.attrs)
            if delta.item_id and delta.item_id not in choice.reasoning_ids:
                choice.reasoning_ids.append(delta.item_id)
            if delta.digests:
                choice.reasoning_digests.extend(delta.digests)
        elif isinstance(delta, RefusalDelta):
            self._content(delta.choice).refusal.append(delta.text)
        elif isinstance(delta, ReasoningSummaryDelta):
            choice = self._content(delta.choice)
            choice.summary.append(delta.text)
            choice.reasoning_chars = choice.reasoning_chars or 0
        elif isinstance(delta, ToolCallEnd):
            call = self._call(delta.choice, delta.index)
            call.ended = True
            if delta.arguments is not None:
                call.fragments = [delta.arguments]
        elif isinstance(delta, UsageDelta):
            self._usage = self._usage.merged(delta.usage)
        elif isinstance(delta, FinishDelta):
            self._choice(delta.choice).finish = delta
        elif isinstance(delta, MetaDelta):
            self._response_id = delta.response_id or self._response_id
            self._model = delta.model or self._model
        elif isinstance(delta, ErrorDelta):
            self._error = {"message": delta.message, "type": delta.type, "code": delta.code}
        elif isinstance(delta, MessageIdDelta):
            ids = _text(self._content(delta.choice)).message_ids
            if delta.item_id not in ids:
                ids.append(delta.item_id)
        elif isinstance(delta, ItemsDelta):
            self._content(delta.choice).sequence.extend(delta.items)
        elif isinstance(delta, BillingDelta):
            self._billing = self._billing.merged(delta.billing)

    def _choice(self, index: int) -> _Choice:
        choice = self._choices.get(index)
        if choice is None:
            choice = self._choices[index] = _Choice()
        return choice

    def _content(self, index: int) -> _Choice:
        choice = self._choice(index)
        if choice.finish is not None:
            self._anomalies.append(f"content for choice {index} after its finish")
        return choice

    def _call(self, choice_index: int, index: int) -> _Call:
        calls = self._content(choice_index).calls
        call = calls.get(index)
        if call is None:
            call = calls[index] = _Call()
        return call

    def _start_call(self, delta: ToolCallStart) -> None:
        call = self._call(delta.choice, delta.index)
        # The first non-empty id and name win: continuation deltas may repeat them or send "".
        if delta.call_id:
            if call.call_id is None:
                call.call_id = delta.call_id
            elif call.call_id != delta.call_id:
                self._anomalies.append(
                    f"tool call {delta.index} of choice {delta.choice} changed id "
                    f"{call.call_id!r} → {delta.call_id!r}"
                )
        if delta.name and call.name is None:
            call.name = delta.name
        if delta.item_id and call.item_id is None:
            call.item_id = delta.item_id
        if delta.attrs:
            call.attrs.update(delta.attrs)

    @property
    def usage(self) -> Usage:
        """The usage reported so far, without assembling the output."""
        return self._usage

    @property
    def billing(self) -> Billing:
        """What else the provider reported billing so far. A provider that reports no
        counts of the tools it ran (the Responses API) bills each call it ran: those in
        the answer are counted by their tool type."""
        billing = self._billing
        if billing.server_tool_requests:
            return billing
        ran = Counter(
            part.attrs.get(TOOL_TYPE)
            for choice in self._choices.values()
            for part in choice.sequence
            if isinstance(part, Item) and part.kind is ItemKind.TOOL_CALL and provider_run(part)
        )
        counts = {tool: n for tool, n in ran.items() if isinstance(tool, str)}
        return replace(billing, server_tool_requests=counts) if counts else billing

    @property
    def model(self) -> str | None:
        """The model the response named so far (the one that answered)."""
        return self._model

    @property
    def anomalies(self) -> tuple[str, ...]:
        """The illegal deltas so far, dropped: for the exchange to count."""
        return tuple(self._anomalies)

    @property
    def failed(self) -> bool:
        """An error event arrived."""
        return self._error is not None

    def assemble(
        self, items: list[Item], first: FinishDelta | None, stop_reason: StopReason
    ) -> Assembled:
        """The output (from `output()`) under the stop reason the exchange's table decided."""
        return Assembled(
            output_items=items,
            stop_reason=stop_reason,
            raw_stop_reason=first.raw_reason if first else None,
            usage=self._usage,
            response_id=self._response_id,
            model=self._model,
            error=self._error,
            complete=self.state is State.ENDED,
            anomalies=list(self._anomalies),
            billing=self.billing,
            refusal_category=first.category if first else None,
            pending=first is not None and first.pending,
        )

    def output(self) -> tuple[list[Item], FinishDelta | None]:
        """The output items so far and the first choice's finish, which the stop table reads."""
        ended = self.state is State.ENDED
        items: list[Item] = []
        for index in sorted(self._choices):
            items.extend(self._items_of(index, self._choices[index], ended))
        self._add_reasoning_tokens(items)
        first = self._choices[min(self._choices)].finish if self._choices else None
        return items, first

    def _items_of(self, index: int, choice: _Choice, ended: bool) -> list[Item]:
        base: dict[str, Any] = {"choice": index} if index else {}
        items: list[Item] = []
        if choice.reasoning_chars is not None:
            attrs = {**base, "chars": choice.reasoning_chars, **choice.reasoning_attrs}
            if choice.reasoning_ids:
                attrs["item_ids"] = choice.reasoning_ids
            if choice.reasoning_digests:
                attrs[DIGESTS] = list(choice.reasoning_digests)
            summary = "".join(choice.summary) or None
            items.append(Item(ItemKind.REASONING, role="assistant", text=summary, attrs=attrs))
        for part in choice.sequence:
            if isinstance(part, Item):
                items.append(part.with_changes(attrs={**base, **part.attrs}) if base else part)
                continue
            text = "".join(part.parts)
            if text:
                ids = part.message_ids
                attrs = {**base, "item_ids": ids} if ids else dict(base)
                items.append(
                    Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=text, attrs=attrs)
                )
        refusal = "".join(choice.refusal)
        if refusal:
            items.append(Item(ItemKind.REFUSAL, role="assistant", text=refusal, attrs=dict(base)))
        # A finished choice's calls are complete even when the stream's end marker is missing.
        finished = ended or choice.finish is not None
        for call_index in sorted(choice.calls):
            items.append(_call_item(index, call_index, choice.calls[call_index], finished, base))
        return items

    def _add_reasoning_tokens(self, items: list[Item]) -> None:
        tokens = self._usage.reasoning_tokens
        if not tokens:
            return
        for position, item in enumerate(items):
            if item.kind is ItemKind.REASONING:
                items[position] = item.with_changes(attrs={**item.attrs, "tokens": tokens})
                return
        # Reasoning that streamed no text (hidden by the provider) still happened.
        items.insert(0, Item(ItemKind.REASONING, role="assistant", attrs={"tokens": tokens}))


def _text(choice: _Choice) -> _Text:
    """The text item being written: the last one, unless a whole item came after it."""
    sequence = choice.sequence
    if sequence and isinstance(sequence[-1], _Text):
        return sequence[-1]
    text = _Text()
    sequence.append(text)
    return text


def _call_item(choice: int, index: int, call: _Call, finished: bool, base: dict[str, Any]) -> Item:
    attrs = {**base, **call.attrs}
    if not call.call_id:
        attrs["internal_id"] = f"lwcall_{choice}_{index}"
    if not (finished or call.ended):
        attrs["incomplete"] = True
    if call.item_id:
        attrs["item_ids"] = [call.item_id]
    return Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=call.call_id or None,
        tool_name=call.name,
        arguments="".join(call.fragments),
        attrs=attrs,
    )
