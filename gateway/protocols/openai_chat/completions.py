"""OpenAI Chat Completions adapter (`POST /v1/chat/completions`) and its compatibles.

Requests → typed items here; responses → deltas in `decode`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any

import msgspec

from gateway import jsoncodec
from gateway.errors import BadRequest, GatewayError
from gateway.items import DIGESTS, RETURNS, Item, ItemKind
from gateway.opaque import UNKEYED, Digests
from gateway.protocols import request_body
from gateway.protocols.base import (
    OPENAI_SESSION_FIELDS,
    HistoryRules,
    ParsedRequest,
    PreparedBody,
    SessionFields,
    declared_functions,
    openai_error_body,
    openai_wire,
    shape_of,
    untyped_field,
)
from gateway.protocols.openai_chat import decode
from gateway.protocols.openai_chat.reasoning import (
    REASONING_CONTENT,
    REASONING_DETAILS,
    returned_details,
)
from gateway.routing import Wire
from gateway.stream.deltas import Delta
from gateway.stream.sse import SSEEvent

_LIMIT_FIELDS = ("max_completion_tokens", "max_tokens")


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, dict) else {}


def _custom(tool: dict[str, Any]) -> dict[str, Any]:
    custom = tool.get("custom")
    return custom if isinstance(custom, dict) else {}


def _declared_tools(body: dict[str, Any]) -> dict[str, Any] | None:
    """`tools` (and the legacy `functions`); a custom tool (`{"type": "custom", "custom":
    {"name", "format"}}`) takes free-form input: declared, with no schema. A tool of a type
    not known here makes the declarations unknown: names are then not judged."""
    tools, functions = body.get("tools"), body.get("functions")
    if isinstance(tools, list) and any(
        isinstance(t, dict) and t.get("type") not in (None, "function", "custom") for t in tools
    ):
        return None
    declared = declared_functions(
        tools,
        lambda t: _function(t).get("name"),
        lambda t: _function(t).get("parameters"),
        is_function=lambda t: t.get("type") != "custom",
    )
    declared |= declared_functions(
        tools,
        lambda t: _custom(t).get("name"),
        lambda t: None,
        is_function=lambda t: t.get("type") == "custom",
    )
    declared |= declared_functions(
        functions,
        lambda f: f.get("name"),
        lambda f: f.get("parameters"),
        is_function=lambda f: True,
    )
    return declared


class OpenAIChatAdapter:
    name = "chat"
    path: str = "/v1/chat/completions"
    history_field: str | None = "messages"
    history: HistoryRules = HistoryRules("messages")
    wire: Wire = openai_wire(name)
    passthrough_paths: tuple[str, ...] = ()
    not_params: frozenset[str] = frozenset({"messages", "tools", "functions"})
    tool_fields: tuple[str, ...] = ("tools", "functions")  # `functions`: the legacy form
    recorded_headers: tuple[str, ...] = ("OpenAI-Beta",)
    session_fields: SessionFields = OPENAI_SESSION_FIELDS
    span_attributes: Mapping[str, Mapping[str, str]] = {
        "openai": {"openai.api.type": "chat_completions"}
    }
    provider_tool_types: frozenset[str] = frozenset()  # its providers run no tools

    def __init__(self, digests: Digests = UNKEYED) -> None:
        self._digests = digests
        self._remembered = request_body.Remembered()

    def keyed(self, digests: Digests) -> OpenAIChatAdapter:
        return OpenAIChatAdapter(digests)

    def contained_tools(self, body: dict[str, Any]) -> list[Any] | None:
        return None  # tools are declared only at the top

    def is_separate_instruction(self, item: Item) -> bool:
        return False  # system and developer messages are in the history

    def parse_request(self, body: Any) -> ParsedRequest:
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.", param="body")
        messages = body.get("messages")
        items: list[Item] = []
        if not isinstance(messages, list):  # forwarded as sent: the provider answers it
            items.append(untyped_field("messages", messages))
        for position, message in enumerate(messages if isinstance(messages, list) else ()):
            if isinstance(message, msgspec.Raw):  # as the client wrote it: typed once
                typed = partial(_typed, self._digests, position)
                items.extend(self._remembered.get(position, message, typed))
            else:
                items.extend(_typed(self._digests, position, message))
        model = body.get("model")
        return ParsedRequest(
            model=model if isinstance(model, str) else None,
            stream=body.get("stream") is True,
            items=items,
            max_output_tokens=_limit(body),
            tools=_declared_tools(body),
        )

    def prepare_body(
        self, body: dict[str, Any], parsed: ParsedRequest, *, max_tokens: int | None
    ) -> PreparedBody:
        changes: dict[str, Any] = {}
        hide = False
        if parsed.stream:
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                base = options if isinstance(options, dict) else {}
                changes["stream_options"] = {**base, "include_usage": True}
                hide = True
        clamped = None
        if max_tokens is not None:
            present = [name for name in _LIMIT_FIELDS if _int(body.get(name)) is not None]
            # Keep the client's field: many compatible servers know only `max_tokens`.
            for name in present or ["max_completion_tokens"]:
                current = _int(body.get(name))
                if current is None or current > max_tokens:
                    changes[name] = max_tokens
                    clamped = max_tokens
        if not changes:
            return PreparedBody(body=body)
        return PreparedBody(
            body={**body, **changes}, hide_usage_event=hide, clamped_max_tokens=clamped
        )

    def new_event_decoder(self) -> decode.ChatEventDecoder:
        return decode.ChatEventDecoder(self._digests)

    def is_injected_usage_event(self, event: SSEEvent) -> bool:
        data = event.data
        # Cheap rejections first: this runs on every event of a stream whose usage we hide,
        # and OpenAI repeats `"usage":null` on every chunk.
        if '"usage"' not in data or '"usage":null' in data or '"usage": null' in data:
            return False
        try:
            chunk = jsoncodec.loads(data)
        except ValueError:
            return False
        # Never hide a chunk that also carries an error (OpenRouter sends both).
        return (
            isinstance(chunk, dict)
            and not chunk.get("choices")
            and isinstance(chunk.get("usage"), dict)
            and chunk.get("error") is None
        )

    def decode_body(self, body: Any) -> list[Delta]:
        return decode.decode_body(body, self._digests)

    def decode_error(self, body: Any) -> dict[str, Any] | None:
        if isinstance(body, dict) and "error" in body:
            return decode.error_fields(body["error"])
        return decode.error_fields(body)

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        return openai_error_body(error)


# Typed here: compiling the package with mypyc needs it before registry.py infers it.
ADAPTER: OpenAIChatAdapter = OpenAIChatAdapter()


def _typed(digests: Digests, position: int, message: Any) -> tuple[Item, ...]:
    items: list[Item] = []
    if isinstance(message, dict):
        _message_items(message, position, items, digests)
    else:
        attrs = {"message_index": position, "shape": shape_of(message)}
        items.append(Item(ItemKind.OTHER, attrs=attrs))
    return tuple(items)


def _message_items(
    message: dict[str, Any], position: int, items: list[Item], digests: Digests
) -> None:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        _user_items(content, items)
    elif role == "assistant":
        _assistant_items(message, position, items, digests)
    elif role == "tool":
        call_id = message.get("tool_call_id")
        items.append(
            Item(
                ItemKind.TOOL_RESULT,
                role="tool",
                text=_content_text(content),
                call_id=call_id if isinstance(call_id, str) and call_id else None,
            )
        )
    elif role in ("system", "developer"):
        items.append(Item(ItemKind.INSTRUCTION, role=role, text=_content_text(content)))
    elif role == "function":  # legacy function results carry the name, not an id
        name = message.get("name")
        items.append(
            Item(
                ItemKind.TOOL_RESULT,
                role="function",
                text=_content_text(content),
                tool_name=name if isinstance(name, str) else None,
            )
        )
    else:
        text_role = role if isinstance(role, str) else None
        attrs = {"type": "message", "role": text_role or shape_of(role)}
        items.append(Item(ItemKind.OTHER, role=text_role, attrs=attrs))


def _user_items(content: Any, items: list[Item]) -> None:
    if isinstance(content, str) or content is None:
        items.append(Item(ItemKind.USER, role="user", text=content or ""))
        return
    if not isinstance(content, list):
        items.append(Item(ItemKind.USER, role="user", text=str(content)))
        return
    texts: list[str] = []
    others: list[Item] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
            texts.append(text if isinstance(text, str) else "")
        else:
            # Images, audio and files are noted by type only: their data is never stored.
            kind = part.get("type") if isinstance(part, dict) else None
            others.append(Item(ItemKind.OTHER, role="user", attrs={"type": str(kind)}))
    if texts or not others:
        items.append(Item(ItemKind.USER, role="user", text="\n".join(texts)))
    items.extend(others)


def _assistant_items(
    message: dict[str, Any], position: int, items: list[Item], digests: Digests
) -> None:
    reasoning = _reasoning_attrs(message, digests)
    if reasoning:
        items.append(Item(ItemKind.REASONING, role="assistant", attrs=reasoning))
    text = _content_text(message.get("content"))
    if text:
        items.append(Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=text))
    refusal = message.get("refusal")
    if not isinstance(refusal, str):
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        refusal = "".join(
            p["refusal"] for p in parts if isinstance(p, dict) and isinstance(p.get("refusal"), str)
        )
    if refusal:
        items.append(Item(ItemKind.REFUSAL, role="assistant", text=refusal))
    calls = message.get("tool_calls")
    entries = calls if isinstance(calls, list) else []
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        entries = [*entries, {"function": legacy}]
    for k, entry in enumerate(entries):
        if isinstance(entry, dict):
            items.append(_call_item(entry, position, k, digests))


def _reasoning_attrs(message: dict[str, Any], digests: Digests) -> dict[str, Any]:
    """The size of the message's reasoning and what of it the provider wants back: that
    `reasoning_content` is there, the digests of signed or encrypted `reasoning_details`."""
    attrs: dict[str, Any] = {}
    for key in (REASONING_CONTENT, "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            attrs["chars"] = len(value)
            if key == REASONING_CONTENT:
                attrs[RETURNS] = REASONING_CONTENT
            break
    details = message.get(REASONING_DETAILS)
    signed = returned_details(details, digests) if isinstance(details, list) else ()
    if signed:
        attrs.update({RETURNS: REASONING_DETAILS, DIGESTS: list(signed)})
    return attrs


def _call_item(entry: dict[str, Any], position: int, k: int, digests: Digests) -> Item:
    name, arguments, attrs = decode.call_parts(entry, digests)
    call_id = entry.get("id")
    if not isinstance(arguments, str) and arguments is not None:
        arguments = json.dumps(arguments)
    has_id = isinstance(call_id, str) and bool(call_id)
    if not has_id:
        attrs = {**attrs, "internal_id": f"lwcall_m{position}_{k}"}
    return Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=call_id if has_id else None,
        tool_name=name,
        arguments=arguments,
        attrs=attrs,
    )


def _content_text(content: Any) -> str | None:
    """A message's text: the string, or its text parts joined with newlines."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return str(content)


def _limit(body: dict[str, Any]) -> int | None:
    for name in _LIMIT_FIELDS:
        value = _int(body.get(name))
        if value is not None:
            return value
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
