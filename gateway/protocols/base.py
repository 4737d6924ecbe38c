"""The interface every wire-protocol adapter implements, and what it returns.

Only adapters know wire field names and their protocol's ways; the rest of the gateway reads
them as the adapter's fields. The proxy calls them in this order: parse_request →
prepare_body → (stream: new_event_decoder().decode per SSE event | body: decode_body) →
the assembler; error_body renders our errors for the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.config import Settings
from gateway.errors import GatewayError
from gateway.items import Item, ItemKind
from gateway.opaque import Digests
from gateway.routing import Wire
from gateway.stream.deltas import Delta
from gateway.stream.sse import SSEEvent


@dataclass(slots=True)
class ParsedRequest:
    """What the gateway needs to know of a request, in neutral terms."""

    model: str | None
    stream: bool
    items: list[Item]  # the whole history the client sent, in order
    # The response this request continues on the provider's side (Responses
    # `previous_response_id`, an Anthropic message thread's `previous_message_id`).
    previous_response_id: str | None = None
    # The provider-side conversation the request belongs to (Responses `conversation`): the
    # provider prepends its items, so the request carries only the new ones.
    conversation_id: str | None = None
    # The history holds state only the provider can read (a compaction item or block, a
    # conversation): calls may live there that the gateway never saw, so a result
    # answering an unknown call is no orphan.
    held_state: bool = False
    max_output_tokens: int | None = None  # the request's own completion limit, if any
    # The function tools the request declares, by name → JSON Schema of their arguments;
    # None when they are not known here (held by the provider: a continued thread, a
    # stored prompt), so calls are not judged against them.
    tools: dict[str, Any] | None = None
    # The request turns its provider's reasoning off (Anthropic `thinking.type: disabled`): it
    # owes back no reasoning of earlier answers (`checks.reasoning`).
    reasoning_off: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)
    # The provider answers at once and works on in the background (Responses `background`):
    # the step ends with whichever later exchange sees the response's end.
    background: bool = False
    # The request asks the provider to compact its history, not to answer it (Responses
    # `/responses/compact`): a call it leaves unanswered is owed by the request that goes
    # on from the compaction, not by this one.
    compaction: bool = False


@dataclass(slots=True)
class PreparedBody:
    """The body to send upstream, and what was rewritten in it."""

    body: dict[str, Any]
    hide_usage_event: bool = False  # usage was requested by us, not the client: hide it
    clamped_max_tokens: int | None = None


SessionFields = tuple[tuple[str, ...], ...]  # paths of keys into a request body


@dataclass(frozen=True, slots=True)
class HistoryRules:
    """How the protocol's history pairs tool calls with results (`checks.pairing`)."""

    param: str  # the request field holding the history, named by an error about it
    # A result must answer a call of the assistant turn just before it (Anthropic's rule),
    # not any earlier unanswered one.
    results_follow_their_turn: bool = False


class EventDecoder(Protocol):
    """Per-stream decoder state (one per response)."""

    def decode(self, event: SSEEvent) -> list[Delta]: ...


class ProtocolAdapter(Protocol):
    name: str  # the protocol's name in settings (routes) and records
    path: str  # the endpoint it is served on
    # The history field whose elements `parse_request` may get as their JSON text
    # (`protocols.request_body`); None: the body comes decoded whole.
    history_field: str | None
    history: HistoryRules
    wire: Wire  # its route name, default upstream and key header (`routing`)
    passthrough_paths: tuple[str, ...]  # other endpoints of its API, routed by its wire
    # The fields that are the conversation or the tools, recorded apart (as items and as
    # the tool set); every other top-level field is a parameter (`request_facts`).
    not_params: frozenset[str]
    tool_fields: tuple[str, ...]  # where the tools are declared, first present wins
    # Request headers of the protocol itself (no credential) recorded with each step, so
    # that a cassette sends them again.
    recorded_headers: tuple[str, ...]
    # Body fields naming the session, each a path of keys, most specific first: a declared
    # session beats an end-user id (`continuation.sessions`).
    session_fields: SessionFields
    # OpenTelemetry span attributes of this protocol's steps, by GenAI provider name.
    span_attributes: Mapping[str, Mapping[str, str]]
    # The `tool_type`s it gives calls the provider ran (`web_search`, `mcp`, ...): a metric
    # labels them by it, folding any other into `other`.
    provider_tool_types: frozenset[str]

    def keyed(self, digests: Digests) -> ProtocolAdapter:
        """This adapter recording the payloads a provider wants back as `digests` makes
        them (an app's adapters use its install secret; see `gateway.opaque`)."""
        ...

    def is_separate_instruction(self, item: Item) -> bool:
        """True for an instruction the wire keeps outside the message history."""
        ...

    def contained_tools(self, body: dict[str, Any]) -> list[Any] | None:
        """The tools the request declares inside its history instead of a top-level field
        (the very list in `body`), when that is its one declaration; None otherwise."""
        ...

    def parse_request(self, body: Any) -> ParsedRequest:
        """Typed items from a request body; raises BadRequest naming the bad field."""
        ...

    def prepare_body(
        self, body: dict[str, Any], parsed: ParsedRequest, *, max_tokens: int | None
    ) -> PreparedBody:
        """The upstream body: usage for streams, completion limit clamped to `max_tokens`."""
        ...

    def new_event_decoder(self) -> EventDecoder: ...

    def is_injected_usage_event(self, event: SSEEvent) -> bool:
        """True for the usage-only event that exists only because prepare_body asked for it."""
        ...

    def decode_body(self, body: Any) -> list[Delta]:
        """A whole non-streamed response body as deltas, ending with EndDelta."""
        ...

    def decode_error(self, body: Any) -> dict[str, Any] | None:
        """The provider's error object from an error body, as {"message","type","code"}."""
        ...

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        """Our error in this protocol's error format."""
        ...


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the store keeps of one step, in neutral terms, for writing it back to the wire:
    its parameters and declared tools as sent (redacted), its whole input (every item so
    far in the trace) and the part of it new in this step, and the provider's answer."""

    params: Mapping[str, Any]
    tools: tuple[Any, ...] | None
    items: tuple[Item, ...]
    new_items: tuple[Item, ...]  # of `items`, those new in this step
    output: tuple[Item, ...]
    model: str | None
    stream: bool
    response_id: str | None
    raw_stop_reason: str | None
    usage: Mapping[str, int | None]
    created: int  # the step's start, in Unix seconds


class CassetteEncoder(Protocol):
    """A protocol's recorded step back on the wire (cassettes): the request body the provider
    received and an answer an SDK assembles to the same message."""

    def request_body(self, step: Recorded) -> dict[str, Any]: ...

    def canonical(self, items: list[Item]) -> list[Any]:
        """History elements spelled the usual way for a run of items without wire shapes:
        what a shape is recorded against (an element spelled so needs none)."""
        ...

    def response_body(self, step: Recorded) -> dict[str, Any]: ...

    def response_events(self, step: Recorded) -> list[dict[str, Any]]:
        """`{"event"?, "data"}` each, `data` a JSON text (or the protocol's end marker)."""
        ...


# The type of a history element that only names an earlier output item by its id
# (Responses' `item_reference`): an `other` item with the id in its attrs.
REFERENCE_TYPE = "item_reference"
# Request headers a client's provider key may come in (a bearer `Authorization` first).
KEY_HEADERS = ("authorization", "x-api-key", "api-key")
# Response headers that carry the provider's request id, most specific first.
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "apim-request-id", "x-ms-request-id", "cf-ray")


def provider_request_id(headers: Mapping[str, str]) -> str | None:
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def declared_functions(
    tools: Any, name_of: Any, schema_of: Any, *, is_function: Any
) -> dict[str, Any]:
    """name → schema of each declared function tool; other tool kinds (hosted tools) make
    calls of their own item types, never function calls, so they are left out."""
    declared: dict[str, Any] = {}
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict) and is_function(tool):
            name = name_of(tool)
            if isinstance(name, str) and name:
                declared[name] = schema_of(tool)
    return declared


def _openai_upstream(settings: Settings) -> str:
    return settings.upstream_url


def openai_wire(protocol: str, paths: tuple[tuple[str, Wire], ...] = ()) -> Wire:
    """How OpenAI-style protocols route: the OpenAI upstream, the key as a bearer token."""
    return Wire(protocol, "openai", _openai_upstream, "Authorization", "Bearer ", paths)


# Where OpenAI's request bodies name a session or an end user, most specific first.
OPENAI_SESSION_FIELDS: SessionFields = (
    ("metadata", "session_id"),
    ("safety_identifier",),
    ("user",),
)


def openai_error_body(error: GatewayError) -> dict[str, Any]:
    """Our error in OpenAI's format, shared by the Chat Completions and Responses adapters."""
    return {
        "error": {
            "message": error.message,
            "type": error.type,
            "code": error.code,
            "param": error.param,
            **error.details,
        }
    }


_SHAPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def untyped_field(name: str, value: Any) -> Item:
    """A top-level field of a shape the adapter cannot type: forwarded as sent, the
    provider judges it; only its name and JSON type are recorded."""
    return Item(ItemKind.OTHER, attrs={"field": name, "shape": shape_of(value)})


def shape_of(value: Any) -> str:
    """The JSON type of a value an adapter did not expect there, for an `other` item."""
    return _SHAPES.get(type(value)) or ("number" if isinstance(value, int | float) else "unknown")
