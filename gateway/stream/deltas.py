"""Neutral stream fragments: what every protocol adapter decodes its events and bodies into.

A non-streamed body is decoded into the same fragments as a stream, so one assembler
builds every step's output. Reasoning text never becomes a fragment: only its size does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.items import Billing, Item, StopReason, Usage


@dataclass(frozen=True, slots=True)
class MetaDelta:
    """Response-level identity, from the first chunk or the body."""

    response_id: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class RefusalDelta:
    text: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """Reasoning happened; `chars` counts its text, which is dropped here, never stored.

    `attrs` carries safe facts such as {"encrypted": True} or {"redacted": True}, and
    {"returns": …} when the provider wants it back in a tool loop; `digests` the keyed
    digests of the opaque payloads it wants back (`gateway.opaque`), never the payloads.
    """

    chars: int = 0
    choice: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    item_id: str | None = None  # the provider's id of the reasoning item (Responses `rs_…`)
    digests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReasoningSummaryDelta:
    """A provider's reasoning *summary* (Responses API); may be stored, redacted."""

    text: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins at `index` within its choice; id or name may be missing or empty."""

    index: int
    call_id: str | None = None
    name: str | None = None
    choice: int = 0
    item_id: str | None = None  # the provider's id of the output item (Responses `fc_…`)
    # Facts about the call kept on its item: {"free_form": True} for input that is text,
    # not JSON (Responses custom tools); {"namespace": "…"} for a namespaced tool.
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageIdDelta:
    """The provider's id of an output message (Responses `msg_…`), which a client may later
    echo as an `item_reference` instead of the message itself."""

    item_id: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ItemsDelta:
    """Whole output items the adapter typed itself, in their place in the answer: a call
    the provider ran and its result, or a block of a type the adapter does not know
    (`other`). Text after them starts a new text item, so the order matches the echo."""

    items: tuple[Item, ...]
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallArgs:
    index: int
    fragment: str
    choice: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The protocol said this call's arguments are complete (Responses, Anthropic)."""

    index: int
    arguments: str | None = None  # the full arguments when the protocol repeats them
    choice: int = 0


@dataclass(frozen=True, slots=True)
class UsageDelta:
    usage: Usage


@dataclass(frozen=True, slots=True)
class FinishDelta:
    """A choice finished; the adapter has already normalized the provider's reason."""

    stop_reason: StopReason
    raw_reason: str | None
    choice: int = 0
    category: str | None = None  # the provider's policy category of a refusal
    # The provider is still working on the response (a background response queued or in
    # progress): a later exchange about the same response carries its end.
    pending: bool = False


@dataclass(frozen=True, slots=True)
class ErrorDelta:
    """An error object inside a stream or an error body."""

    message: str
    type: str | None = None
    code: str | None = None


@dataclass(frozen=True, slots=True)
class EndDelta:
    """The protocol's own completion marker: `[DONE]`, `message_stop`, a terminal response event."""


@dataclass(frozen=True, slots=True)
class BillingDelta:
    """What the provider billed beside the token counts (server tool requests, iterations,
    the models that ran); like usage, a later report replaces an earlier one."""

    billing: Billing


Delta = (
    MetaDelta
    | TextDelta
    | RefusalDelta
    | ReasoningDelta
    | ReasoningSummaryDelta
    | ToolCallStart
    | MessageIdDelta
    | ItemsDelta
    | ToolCallArgs
    | ToolCallEnd
    | UsageDelta
    | FinishDelta
    | ErrorDelta
    | EndDelta
    | BillingDelta
)
