"""OpenAI Responses API adapter (`POST /v1/responses`): request items, limits and errors.

Stream events and response bodies are decoded in `openai_responses_events`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import BadRequest, GatewayError
from gateway.items import Item, ItemKind
from gateway.protocols.base import (
    ParsedRequest,
    PreparedBody,
    ProtocolAdapter,
    declared_functions,
    openai_error_body,
)
from gateway.protocols.openai_responses_events import (
    SUMMARY_SEPARATOR,
    ResponsesEventDecoder,
    arguments_text,
    as_code,
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_response_body,
)
from gateway.stream.deltas import Delta
from gateway.stream.sse import SSEEvent

_MESSAGE_KINDS = {
    "user": ItemKind.USER,
    "system": ItemKind.INSTRUCTION,
    "developer": ItemKind.INSTRUCTION,
    "assistant": ItemKind.ASSISTANT_TEXT,
}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})

# The API rejects max_output_tokens below 16; clamping lower would turn a budget into a 400.
MIN_OUTPUT_TOKENS = 16


def _attrs(index: int, **extra: Any) -> dict[str, Any]:
    return {"message_index": index, **{k: v for k, v in extra.items() if v is not None}}


def _input_items(value: Any) -> list[Item]:
    if value is None:
        return []
    if isinstance(value, str):
        return [Item(ItemKind.USER, role="user", text=value, attrs=_attrs(0))]
    if not isinstance(value, list):
        raise BadRequest("'input' must be a string or an array of input items.", param="input")
    items: list[Item] = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise BadRequest(f"'input[{index}]' must be an object.", param=f"input[{index}]")
        items += _entry_items(entry, index)
    return items


def _entry_items(entry: dict[str, Any], index: int) -> list[Item]:
    kind = entry.get("type")
    if kind == "message" or (kind is None and "role" in entry):
        return _message_items(entry, index)
    if kind == "function_call":
        call = Item(
            ItemKind.TOOL_CALL,
            role="assistant",
            call_id=as_str(entry.get("call_id")),
            tool_name=as_str(entry.get("name")),
            arguments=arguments_text(entry.get("arguments")),
            attrs=_attrs(index, item_id=as_str(entry.get("id"))),
        )
        return [call]
    if kind == "function_call_output":
        result = Item(
            ItemKind.TOOL_RESULT,
            role="tool",
            call_id=as_str(entry.get("call_id")),
            text=_output_text(entry.get("output")),
            attrs=_attrs(index),
        )
        return [result]
    if kind == "reasoning":
        return [_reasoning_item(entry, index)]
    if kind == "item_reference":
        return [Item(ItemKind.OTHER, attrs=_attrs(index, type=kind, id=as_str(entry.get("id"))))]
    return [Item(ItemKind.OTHER, attrs=_attrs(index, type=as_str(kind) or "unknown"))]


def _message_items(entry: dict[str, Any], index: int) -> list[Item]:
    role = as_str(entry.get("role"))
    kind = _MESSAGE_KINDS.get(role or "")
    if kind is None:
        return [Item(ItemKind.OTHER, role=role, attrs=_attrs(index, type="message", role=role))]
    content = entry.get("content")
    if content is None or isinstance(content, str):
        return [Item(kind, role=role, text=content, attrs=_attrs(index))]
    if not isinstance(content, list):
        raise BadRequest(
            f"'input[{index}].content' must be a string or an array of content parts.",
            param=f"input[{index}].content",
        )
    items: list[Item] = []
    texts: list[str] = []
    for part in map(as_dict, content):
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
    texts = [as_str(p.get("text")) or "" for p in parts if p.get("type") in _TEXT_PARTS]
    return "\n".join(texts)


def _reasoning_item(entry: dict[str, Any], index: int) -> Item:
    """Only the summary may be kept (the proxy decides); content and encrypted_content never."""
    summaries = (as_str(as_dict(part).get("text")) for part in as_list(entry.get("summary")))
    text = SUMMARY_SEPARATOR.join(s for s in summaries if s) or None
    encrypted = True if entry.get("encrypted_content") else None
    attrs = _attrs(index, item_id=as_str(entry.get("id")), encrypted=encrypted)
    return Item(ItemKind.REASONING, role="assistant", text=text, attrs=attrs)


def _declared_tools(body: dict[str, Any]) -> dict[str, Any] | None:
    """Function tools by name; a stored `prompt` may declare tools the request does not."""
    if body.get("prompt") is not None:
        return None
    return declared_functions(
        body.get("tools"),
        lambda t: t.get("name"),
        lambda t: t.get("parameters"),
        is_function=lambda t: t.get("type") == "function",
    )


class OpenAIResponsesAdapter:
    name = "responses"

    def parse_request(self, body: Any) -> ParsedRequest:
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.", param="body")
        items: list[Item] = []
        instructions = body.get("instructions")
        if isinstance(instructions, str):
            attrs = {"field": "instructions"}
            items.append(Item(ItemKind.INSTRUCTION, role="system", text=instructions, attrs=attrs))
        items += _input_items(body.get("input"))
        return ParsedRequest(
            model=as_str(body.get("model")),
            stream=body.get("stream") is True,
            items=items,
            previous_response_id=as_str(body.get("previous_response_id")),
            max_output_tokens=as_int(body.get("max_output_tokens")),
            tools=_declared_tools(body),
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
        return ResponsesEventDecoder()

    def is_injected_usage_event(self, event: SSEEvent) -> bool:
        return False

    def decode_body(self, body: Any) -> list[Delta]:
        return decode_response_body(body)

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


ADAPTER = OpenAIResponsesAdapter()

if TYPE_CHECKING:
    # mypy proves here that the adapter satisfies the interface; nothing to do at run time.
    _conforms: ProtocolAdapter = ADAPTER
