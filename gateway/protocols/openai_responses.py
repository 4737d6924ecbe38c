"""OpenAI Responses API adapter (`POST /v1/responses`): request items, limits and errors.

Stream events and response bodies are decoded in `openai_responses_events`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from gateway.errors import BadRequest, GatewayError
from gateway.items import Item, ItemKind
from gateway.opaque import Digests
from gateway.protocols.base import (
    OPENAI_SESSION_FIELDS,
    REFERENCE_TYPE,
    HistoryRules,
    ParsedRequest,
    PreparedBody,
    ProtocolAdapter,
    SessionFields,
    openai_error_body,
    openai_wire,
    shape_of,
)
from gateway.protocols.json_values import as_dict, as_int, as_list, as_str
from gateway.protocols.openai_responses_events import (
    ENCRYPTED_CONTENT,
    SUMMARY_SEPARATOR,
    ResponsesEventDecoder,
    arguments_text,
    as_code,
    caller_attrs,
    decode_response_body,
)
from gateway.protocols.openai_responses_hosted import (
    COMPACTION,
    TOOL_TYPES,
    TYPED,
    held_state,
    typed_items,
)
from gateway.protocols.openai_responses_outcomes import loaded_tools
from gateway.protocols.openai_responses_tools import (
    BUILTIN_CALLS,
    BUILTIN_RESULTS,
    contained_tools,
    declared_tools,
    qualified,
)
from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.routing import Wire
from gateway.stream.deltas import Delta
from gateway.stream.sse import SSEEvent

_MESSAGE_KINDS = {
    "user": ItemKind.USER,
    "system": ItemKind.INSTRUCTION,
    "developer": ItemKind.INSTRUCTION,
    "assistant": ItemKind.ASSISTANT_TEXT,
}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
_RESULT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})

# The API rejects max_output_tokens below 16; clamping lower would turn a budget into a 400.
MIN_OUTPUT_TOKENS = 16


def _attrs(index: int, **extra: Any) -> dict[str, Any]:
    return {"message_index": index, **{k: v for k, v in extra.items() if v is not None}}


def _input_items(value: Any, keep: bool = False) -> list[Item]:
    if value is None:
        return []
    if isinstance(value, str):
        return [Item(ItemKind.USER, role="user", text=value, attrs=_attrs(0))]
    if not isinstance(value, list):
        # Forwarded as sent: the provider judges it; only its shape is recorded.
        return [Item(ItemKind.OTHER, attrs={"field": "input", "shape": shape_of(value)})]
    items: list[Item] = []
    shells: set[str] = set()  # hosted shell calls: their outputs are the provider's
    for index, entry in enumerate(value):
        if isinstance(entry, dict):
            items += _entry_items(entry, index, shells, keep)
        else:
            items.append(Item(ItemKind.OTHER, attrs=_attrs(index, shape=shape_of(entry))))
    return items


def _entry_items(
    entry: dict[str, Any], index: int, shells: set[str], keep: bool = False
) -> list[Item]:
    raw_kind = entry.get("type")
    if raw_kind == "message" or (raw_kind is None and "role" in entry):
        return message_items(entry, index)
    kind = as_str(raw_kind) or "unknown"  # sets below need a hashable type name
    if kind in _CALL_TYPES:
        return [_call_item(entry, index, free_form=kind == "custom_tool_call")]
    if kind in TYPED:
        # Echoed output of a tool the provider defines, typed as its response was.
        typed = typed_items(entry, _attrs(index), shells)
        if typed is not None:
            return typed
    if kind in BUILTIN_CALLS:
        return [_builtin_call(entry, index, kind)]
    if kind in _RESULT_TYPES or kind in BUILTIN_RESULTS:
        return [_result_item(entry, index, kind)]
    if kind == "reasoning":
        return [_reasoning_item(entry, index, keep)]
    if kind == REFERENCE_TYPE:
        return [Item(ItemKind.OTHER, attrs=_attrs(index, type=kind, id=as_str(entry.get("id"))))]
    if kind == "additional_tools":
        tools = entry.get("tools")
        count = len(tools) if isinstance(tools, list) else None
        return [Item(ItemKind.OTHER, attrs=_attrs(index, type=kind, tools=count))]
    if kind == COMPACTION:
        item_id = as_str(entry.get("id"))
        return [
            Item(ItemKind.OTHER, attrs=_attrs(index, type=kind, id=item_id, **held_state(entry)))
        ]
    return [Item(ItemKind.OTHER, attrs=_attrs(index, type=kind))]


def _conversation(value: Any) -> str | None:
    """The conversation a request belongs to: its id, or an object naming it
    (openai `ResponseConversationParamParam`)."""
    if isinstance(value, dict):
        return as_str(value.get("id"))
    return as_str(value)


def _is_compaction(item: Item) -> bool:
    """A `compaction` item (`POST /v1/responses/compact`): earlier turns, encrypted."""
    return item.kind is ItemKind.OTHER and item.attrs.get("type") == COMPACTION


def _result_item(entry: dict[str, Any], index: int, kind: str) -> Item:
    """The client's result of its own call: a function's output, a built-in tool's, or the
    tools a client-run tool search loaded."""
    tools = entry.get("tools")
    if kind == "tool_search_output":
        text = loaded_tools(tools)
    elif kind in _RESULT_TYPES:
        text = _output_text(entry.get("output"))
    else:
        text = _builtin_output(entry.get("output"))
    count = len(tools) if isinstance(tools, list) else None
    return Item(
        ItemKind.TOOL_RESULT,
        role="tool",
        call_id=as_str(entry.get("call_id")),
        text=text,
        attrs=_attrs(index, type=kind if kind != "function_call_output" else None, tools=count),
    )


def _builtin_call(entry: dict[str, Any], index: int, kind: str) -> Item:
    """A call of a built-in tool the client runs: what it asks (`action`, `operation`) as
    its arguments, the tool type as its name."""
    name, field = BUILTIN_CALLS[kind]
    return Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=as_str(entry.get("call_id")),
        tool_name=name,
        arguments=arguments_text(entry.get(field)),
        attrs=_attrs(index, item_id=as_str(entry.get("id")), type=kind, **caller_attrs(entry)),
    )


def _builtin_output(output: Any) -> str | None:
    """A built-in tool's output: text, or structured (a shell's stdout, stderr and outcome)."""
    return output if output is None or isinstance(output, str) else arguments_text(output)


def _call_item(entry: dict[str, Any], index: int, *, free_form: bool) -> Item:
    """A function call (JSON `arguments`) or a custom tool call (free-form `input` text)."""
    namespace = as_str(entry.get("namespace"))
    if free_form:
        value = entry.get("input")
        arguments = value if isinstance(value, str) else arguments_text(value)
    else:
        arguments = arguments_text(entry.get("arguments"))
    return Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=as_str(entry.get("call_id")),
        tool_name=qualified(as_str(entry.get("name")), namespace),
        arguments=arguments,
        attrs=_attrs(
            index,
            item_id=as_str(entry.get("id")),
            namespace=namespace or None,
            free_form=True if free_form else None,
            **caller_attrs(entry),
        ),
    )


def message_items(entry: dict[str, Any], index: int) -> list[Item]:
    """A message of the history (or a compacted history's kept one) as typed items."""
    role = as_str(entry.get("role"))
    kind = _MESSAGE_KINDS.get(role or "")
    if kind is None:
        return [Item(ItemKind.OTHER, role=role, attrs=_attrs(index, type="message", role=role))]
    content = entry.get("content")
    if content is None or isinstance(content, str):
        return [Item(kind, role=role, text=content, attrs=_attrs(index))]
    if not isinstance(content, list):
        attrs = _attrs(index, type="message", shape=shape_of(content))
        return [Item(ItemKind.OTHER, role=role, attrs=attrs)]
    items: list[Item] = []
    texts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            attrs = _attrs(index, shape=shape_of(part))
            items.append(Item(ItemKind.OTHER, role=role, attrs=attrs))
            continue
        part_type = as_str(part.get("type"))
        if part_type in _TEXT_PARTS:
            texts.append(as_str(part.get("text")) or "")
        elif part_type == "refusal":
            text = as_str(part.get("refusal"))
            items.append(Item(ItemKind.REFUSAL, role=role, text=text, attrs=_attrs(index)))
        else:
            # Images and files are recorded by type only: their data is never stored.
            attrs = _attrs(index, type=part_type or "unknown")
            items.append(Item(ItemKind.OTHER, role=role, attrs=attrs))
    # Parts are concatenated, as the streamed output they echo was assembled.
    if texts or not items:
        items.insert(0, Item(kind, role=role, text="".join(texts), attrs=_attrs(index)))
    return items


def _output_text(output: Any) -> str | None:
    if output is None or isinstance(output, str):
        return output
    parts = (as_dict(part) for part in as_list(output))
    texts = [as_str(p.get("text")) or "" for p in parts if as_str(p.get("type")) in _TEXT_PARTS]
    return "\n".join(texts)


def _reasoning_item(entry: dict[str, Any], index: int, keep: bool = False) -> Item:
    """Only the summary may be kept (the proxy decides); content never, encrypted_content
    only as an opaque blob with `keep` (`keep_opaque_reasoning`)."""
    summaries = (as_str(as_dict(part).get("text")) for part in as_list(entry.get("summary")))
    text = SUMMARY_SEPARATOR.join(s for s in summaries if s) or None
    payload = entry.get(ENCRYPTED_CONTENT)
    attrs = _attrs(index, item_id=as_str(entry.get("id")), encrypted=True if payload else None)
    if keep and isinstance(payload, str) and payload:
        attrs[OPAQUE] = {ENCRYPTED_CONTENT: payload}
    return Item(ItemKind.REASONING, role="assistant", text=text, attrs=attrs)


class OpenAIResponsesAdapter:
    name = "responses"
    path: str = "/v1/responses"
    history_field: str | None = None
    history: HistoryRules = HistoryRules("input")
    wire: Wire = openai_wire(name)
    passthrough_paths: tuple[str, ...] = ()
    not_params: frozenset[str] = frozenset({"input", "tools", "instructions"})
    tool_fields: tuple[str, ...] = ("tools",)
    recorded_headers: tuple[str, ...] = ("OpenAI-Beta",)
    session_fields: SessionFields = OPENAI_SESSION_FIELDS
    # OpenTelemetry's OpenAI conventions name the API a call went to.
    span_attributes: Mapping[str, Mapping[str, str]] = {"openai": {"openai.api.type": "responses"}}
    provider_tool_types: frozenset[str] = TOOL_TYPES

    # `keep_opaque_reasoning`: reasoning items keep their `encrypted_content` (gateway.opaque).
    keep_opaque: bool = False

    def keyed(self, digests: Digests) -> Self:
        # No payload of this protocol is recorded as a digest: its reasoning items are
        # recognised by their ids; `encrypted_content` is kept only when payloads are.
        if not digests.keep:
            return self
        keeping = copy.copy(self)
        keeping.keep_opaque = True
        return keeping

    def is_separate_instruction(self, item: Item) -> bool:
        """`instructions` sits outside the `input` history; system messages in it do not."""
        return item.kind is ItemKind.INSTRUCTION and item.attrs.get("field") == "instructions"

    def contained_tools(self, body: dict[str, Any]) -> list[Any] | None:
        return contained_tools(body)

    def parse_request(self, body: Any) -> ParsedRequest:
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.", param="body")
        items: list[Item] = []
        instructions = body.get("instructions")
        if isinstance(instructions, str):
            attrs = {"field": "instructions"}
            items.append(Item(ItemKind.INSTRUCTION, role="system", text=instructions, attrs=attrs))
        entries = body.get("input")
        items += _input_items(entries, self.keep_opaque)
        conversation = _conversation(body.get("conversation"))
        return ParsedRequest(
            model=as_str(body.get("model")),
            stream=body.get("stream") is True,
            items=items,
            previous_response_id=as_str(body.get("previous_response_id")),
            conversation_id=conversation,
            held_state=conversation is not None or any(map(_is_compaction, items)),
            max_output_tokens=as_int(body.get("max_output_tokens")),
            tools=declared_tools(body, entries if isinstance(entries, list) else []),
            background=body.get("background") is True,
        )

    def prepare_body(
        self, body: dict[str, Any], parsed: ParsedRequest, *, max_tokens: int | None
    ) -> PreparedBody:
        # Usage always arrives in the terminal response event: nothing to ask for or hide.
        if max_tokens is None:
            return PreparedBody(body=body)
        limit = max(max_tokens, MIN_OUTPUT_TOKENS)
        current = parsed.max_output_tokens
        if current is not None and current <= limit:
            return PreparedBody(body=body)
        return PreparedBody(body={**body, "max_output_tokens": limit}, clamped_max_tokens=limit)

    def new_event_decoder(self) -> ResponsesEventDecoder:
        return ResponsesEventDecoder(keep_opaque=self.keep_opaque)

    def is_injected_usage_event(self, event: SSEEvent) -> bool:
        return False

    def decode_body(self, body: Any) -> list[Delta]:
        return decode_response_body(body, keep_opaque=self.keep_opaque)

    def decode_error(self, body: Any) -> dict[str, Any] | None:
        if not isinstance(body, dict):
            return None
        error = body.get("error")
        if isinstance(error, str):  # some compatible servers send a bare message
            return {"message": error, "type": None, "code": None}
        if not isinstance(error, dict):
            return None
        return {
            "message": as_str(error.get("message")) or "",
            "type": as_str(error.get("type")),
            "code": as_code(error.get("code")),
        }

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        return openai_error_body(error)


# Typed here: compiling the package with mypyc needs it before registry.py infers it.
ADAPTER: OpenAIResponsesAdapter = OpenAIResponsesAdapter()

if TYPE_CHECKING:
    # mypy proves here that the adapter satisfies the interface; nothing to do at run time.
    _conforms: ProtocolAdapter = ADAPTER
