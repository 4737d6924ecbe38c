"""Provider-neutral vocabulary: typed items, token usage and what else was billed, stop
reasons, violations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class ItemKind(StrEnum):
    INSTRUCTION = "instruction"
    USER = "user"
    ASSISTANT_TEXT = "assistant_text"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    REASONING = "reasoning"
    REFUSAL = "refusal"
    OTHER = "other"


# Kinds a model produces; a run of them closes an assistant turn.
ASSISTANT_KINDS = frozenset(
    {ItemKind.ASSISTANT_TEXT, ItemKind.TOOL_CALL, ItemKind.REASONING, ItemKind.REFUSAL}
)


# `attrs["executed_by"]` of a tool call the provider ran itself (web search, code execution,
# its MCP connector) and of its result: the client owes no result for such a call.
EXECUTED_BY = "executed_by"
PROVIDER = "provider"
# `attrs["tool_type"]` of a call of a tool the provider defines (web_search, mcp ...), and of
# its result: such a tool is declared by its type, never by a name and a JSON schema.
TOOL_TYPE = "tool_type"


# `attrs["returns"]` of an output item carrying what its provider requires back when the next
# request answers the step's tool calls (a thinking block's signature, a call's thought
# signature, reasoning text), named as the wire names it; `attrs["digests"]` the short keyed
# hashes of those payloads, absent when their presence is all that is asked. Never the
# payloads themselves.
RETURNS = "returns"
DIGESTS = "digests"
# `attrs["signed_text"]` of a reasoning item whose kept payload (`keep_opaque_reasoning`)
# signs its readable text (an Anthropic thinking block's signature): that text is never
# stored, so the item cannot go back to its provider as it came.
SIGNED_TEXT = "signed_text"


# `attrs["held_state"]` of an item standing for history only its provider can read (a
# Responses `compaction` item): its id. A request whose history carries it continues the
# trace of the step whose output held it.
HELD_STATE = "held_state"


# The attrs of an item that has none: one shared, read-only empty mapping.
NO_ATTRS: Mapping[str, Any] = MappingProxyType({})


_set = object.__setattr__


@dataclass(frozen=True, slots=True, init=False)
class Item:
    """One typed piece of a step's input or output.

    `text` never holds reasoning text: a REASONING item keeps only that reasoning happened,
    its token count (attrs["tokens"]) and at most a provider summary in `text`.
    `attrs` is a small JSON object: e.g. {"internal_call_id": True} when the provider sent
    no call id, {"incomplete": True} for a tool call cut off mid-stream, {"text_length": n}
    after truncation. It is read-only: a dict handed in becomes the item's own, wrapped
    without a copy (its creator must not keep changing it); a change is a new item
    (`with_changes(attrs={**item.attrs, ...})`). Values inside it are plain JSON values
    that nothing changes after parsing.
    """

    kind: ItemKind
    role: str | None
    text: str | None
    call_id: str | None
    tool_name: str | None
    arguments: str | None
    is_error: bool | None
    attrs: Mapping[str, Any]

    # Written out: a request's history is parsed into items by the hundred, and this is
    # quicker than the generated one while it wraps `attrs` in the same pass.
    def __init__(
        self,
        kind: ItemKind,
        role: str | None = None,
        text: str | None = None,
        call_id: str | None = None,
        tool_name: str | None = None,
        arguments: str | None = None,
        is_error: bool | None = None,
        attrs: Mapping[str, Any] = NO_ATTRS,
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "role", role)
        _set(self, "text", text)
        _set(self, "call_id", call_id)
        _set(self, "tool_name", tool_name)
        _set(self, "arguments", arguments)
        _set(self, "is_error", is_error)
        _set(self, "attrs", MappingProxyType(attrs) if type(attrs) is dict else attrs)

    def with_changes(self, **changes: Any) -> Item:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "role": self.role,
            "text": self.text,
            "call_id": self.call_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "is_error": self.is_error,
            "attrs": dict(self.attrs),
        }


def provider_run(item: Item) -> bool:
    """A tool call the provider ran, or its result: both lie inside the provider's answer."""
    return item.attrs.get(EXECUTED_BY) == PROVIDER


def provider_tool(item: Item) -> bool:
    """A call of a tool the provider defines, whoever answers it (the client answers an MCP
    approval request the provider makes)."""
    return TOOL_TYPE in item.attrs


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them; None: not reported."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_creation_tokens: int | None = None

    def merged(self, other: Usage) -> Usage:
        """Every field `other` knows over this one's; later reports win (streams repeat
        usage)."""
        known = {name: getattr(other, name) for name in USAGE_FIELDS}
        return replace(self, **{name: value for name, value in known.items() if value is not None})

    def total(self) -> int:
        if self.total_tokens is not None:
            return self.total_tokens
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def to_json(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in USAGE_FIELDS}


# Usage's field names in order (compiled classes have no __slots__ to read them from).
USAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Usage))


def summed(first: Usage, second: Usage) -> Usage:
    """Two reports' counts added; None only where neither knows the count."""
    return Usage(
        *(
            None if a is None and b is None else (a or 0) + (b or 0)
            for a, b in zip(_row(first), _row(second), strict=True)
        )
    )


def _row(usage: Usage) -> tuple[int | None, ...]:
    return tuple(getattr(usage, name) for name in USAGE_FIELDS)


@dataclass(frozen=True, slots=True)
class Share:
    """One model's part of a step's usage, when more than one model ran in it (a fallback,
    an advisor); `model` None: the step's own model."""

    model: str | None
    usage: Usage
    cache_write_1h_tokens: int = 0  # of its cache-write tokens, those kept for an hour


@dataclass(frozen=True, slots=True)
class Billing:
    """What the provider billed beside a step's token totals (its Usage, which already sums
    every sampling iteration the provider ran): requests of the tools it ran itself, by a
    neutral name ({"web_search": 3}); how many iterations it ran, when more than one
    (compaction, a fallback model, an advisor); each iteration's model and usage, when one
    names a model; and the cache-write tokens kept for an hour, dearer than the others."""

    server_tool_requests: Mapping[str, int] = field(default_factory=lambda: NO_ATTRS)
    iterations: int | None = None
    shares: tuple[Share, ...] = ()
    cache_write_1h_tokens: int | None = None

    def merged(self, other: Billing) -> Billing:
        """What `other` reports over this; later reports win (a stream's last is cumulative)."""
        return Billing(
            other.server_tool_requests or self.server_tool_requests,
            self.iterations if other.iterations is None else other.iterations,
            other.shares or self.shares,
            _later(self.cache_write_1h_tokens, other.cache_write_1h_tokens),
        )

    def by_model(self, model: str | None) -> tuple[Share, ...]:
        """The step's usage model by model when more than one model ran in it (a share
        without a model is `model`'s); empty when one model answered it all."""
        grouped: dict[str | None, Share] = {}
        for share in self.shares:
            name = share.model or model
            usage, hour = share.usage, share.cache_write_1h_tokens
            held = grouped.get(name)
            if held is not None:
                usage, hour = summed(held.usage, usage), held.cache_write_1h_tokens + hour
            grouped[name] = Share(name, usage, hour)
        return tuple(grouped.values()) if len(grouped) > 1 else ()


def _later(before: int | None, after: int | None) -> int | None:
    return before if after is None else after


NO_BILLING = Billing()


class StopReason(StrEnum):
    COMPLETED = "completed"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    # The provider stopped mid-turn and expects the turn sent back to go on (Anthropic
    # `pause_turn`, `compaction`): the run is not over, like a step awaiting tool results.
    PAUSED = "paused"
    INTERRUPTED = "interrupted"  # stream ended without its protocol's completion
    CANCELLED = "cancelled"  # the client went away
    ERROR = "error"  # provider error status or error event
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, value: str | None) -> StopReason | None:
        """A stored stop reason read back; None for a value this version does not know."""
        try:
            return None if value is None else cls(value)
        except ValueError:
            return None

    @property
    def broke(self) -> bool:
        """The attempt itself broke (provider error, cut stream, client gone): a retry of
        it is a fresh attempt, and its span is an error."""
        return self in _BROKE

    @property
    def fails_run(self) -> bool:
        """A run whose last step stopped so failed: a broken attempt, or an answer cut off
        by the length limit or a content filter."""
        return self in _FAILS_RUN

    @property
    def answered(self) -> bool:
        """The provider answered, in part if the stream was cut: a later request may
        continue a step that stopped so."""
        return self not in _UNANSWERED

    @property
    def final(self) -> bool:
        """The model gave its final answer (or declined to): the run is over if no tool
        call is open."""
        return self in _FINAL


_BROKE = frozenset({StopReason.ERROR, StopReason.INTERRUPTED, StopReason.CANCELLED})
_FAILS_RUN = _BROKE | {StopReason.LENGTH, StopReason.CONTENT_FILTER}
_FINAL = frozenset({StopReason.COMPLETED, StopReason.REFUSAL})
_UNANSWERED = frozenset({StopReason.ERROR, StopReason.CANCELLED})


class ViolationKind(StrEnum):
    ORPHAN_TOOL_RESULT = "orphan_tool_result"
    MISSING_TOOL_RESULT = "missing_tool_result"
    DUPLICATE_CALL_ID = "duplicate_call_id"
    TRUNCATED_TOOL_CALL = "truncated_tool_call"
    INVALID_TOOL_ARGUMENTS = "invalid_tool_arguments"
    STOP_REASON_MISMATCH = "stop_reason_mismatch"
    STREAM_INTERRUPTED = "stream_interrupted"
    STEP_BUDGET_EXCEEDED = "step_budget_exceeded"
    TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"
    UNDECLARED_TOOL = "undeclared_tool"
    REPEATED_TOOL_CALL = "repeated_tool_call"
    COST_BUDGET_EXCEEDED = "cost_budget_exceeded"
    TIME_BUDGET_EXCEEDED = "time_budget_exceeded"
    REASONING_NOT_RETURNED = "reasoning_not_returned"
    INVALID_REQUEST = "invalid_request"  # refused: a body or header the gateway cannot use


@dataclass(frozen=True, slots=True)
class Violation:
    """A rule broken by a step; ids and time are added when it is recorded."""

    kind: ViolationKind
    detail: str
    call_id: str | None = None
    enforced: bool = False
