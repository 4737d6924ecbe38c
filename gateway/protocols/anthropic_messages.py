"""Anthropic Messages adapter: request history → typed items; stream events and bodies → deltas.
Stop reasons: end_turn/stop_sequence → completed, tool_use → tool_calls, max_tokens and
model_context_window_exceeded → length, refusal → refusal, pause_turn and others → unknown."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import BadRequest, GatewayError
from gateway.items import Item, ItemKind, StopReason, Usage
from gateway.protocols.base import ParsedRequest, PreparedBody
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    MetaDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from gateway.stream.sse import SSEEvent

_STOP_REASONS = {
    "end_turn": StopReason.COMPLETED,
    "stop_sequence": StopReason.COMPLETED,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.LENGTH,
    "model_context_window_exceeded": StopReason.LENGTH,
    "refusal": StopReason.REFUSAL,
    # The server paused a long-running turn (server tools) and the client is expected to send it
    # back to continue: not completed, not cut off, not failed. Unknown, with the raw value kept.
    "pause_turn": StopReason.UNKNOWN,
}

_INPUT_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _finish(raw: Any) -> list[Delta]:
    if not isinstance(raw, str):
        return []
    return [FinishDelta(_STOP_REASONS.get(raw, StopReason.UNKNOWN), raw)]


def _error_delta(payload: dict[str, Any]) -> ErrorDelta:
    error = _dict(payload.get("error"))
    kind = _str(error.get("type"))
    return ErrorDelta(_str(error.get("message")) or kind or "unknown error", kind, kind)


@dataclass(slots=True)
class _UsageState:
    """Running token counts: message_start reports input, message_delta cumulative output.

    Every report yields a whole Usage computed from this state, so a merge of the deltas in
    any order of arrival ends with prompt, completion and total that agree with each other.
    """

    counts: dict[str, int] = field(default_factory=dict)

    def update(self, raw: Any) -> list[Delta]:
        if not isinstance(raw, dict):
            return []
        for name in (*_INPUT_FIELDS, "output_tokens"):
            value = _int(raw.get(name))
            if value is not None:
                self.counts[name] = value
        thinking = _int(_dict(raw.get("output_tokens_details")).get("thinking_tokens"))
        if thinking is not None:
            self.counts["thinking_tokens"] = thinking
        return [UsageDelta(self.usage())]

    def usage(self) -> Usage:
        counts = self.counts
        inputs = [counts[name] for name in _INPUT_FIELDS if name in counts]
        prompt = sum(inputs) if inputs else None
        completion = counts.get("output_tokens")
        both = prompt is not None and completion is not None
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=(prompt or 0) + (completion or 0) if both else None,
            cached_tokens=counts.get("cache_read_input_tokens"),
            reasoning_tokens=counts.get("thinking_tokens"),
            cache_creation_tokens=counts.get("cache_creation_input_tokens"),
        )


@dataclass(slots=True)
class _Block:
    type: str | None
    tool_input: Any = None  # the `input` of a tool_use block's start event
    args_seen: bool = False


def _whole_args(index: int, value: Any) -> ToolCallArgs:
    return ToolCallArgs(index, _compact(value if isinstance(value, dict) else {}))


def _block_deltas(index: int, block: dict[str, Any], *, whole: bool) -> list[Delta]:
    """A content block's opening (stream) or the whole block (body) as deltas."""
    kind = block.get("type")
    if kind == "text":
        text = _str(block.get("text"))
        return [TextDelta(text)] if text else []
    if kind == "thinking":
        return [ReasoningDelta(chars=len(_str(block.get("thinking")) or ""))]
    if kind == "redacted_thinking":
        return [ReasoningDelta(attrs={"redacted": True})]
    if kind != "tool_use":
        # Server tool blocks (web search, code execution, MCP) run at the provider; the
        # client never answers them, so they are not tool calls to pair.
        return []
    start = ToolCallStart(index, _str(block.get("id")), _str(block.get("name")))
    return [start, _whole_args(index, block.get("input")), ToolCallEnd(index)] if whole else [start]


class MessagesEventDecoder:
    """Per-stream state: content block types by index, and the running usage."""

    def __init__(self) -> None:
        self._usage = _UsageState()
        self._blocks: dict[int, _Block] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], list[Delta]]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": lambda _: [EndDelta()],
            "error": lambda payload: [_error_delta(payload)],
        }

    def decode(self, event: SSEEvent) -> list[Delta]:
        # A tap must never break forwarding: what cannot be read is skipped, not raised.
        try:
            payload = json.loads(event.data)
        except ValueError:
            return []
        if not isinstance(payload, dict):
            return []
        kind = _str(payload.get("type")) or event.event
        handler = self._handlers.get(kind or "")
        return handler(payload) if handler else []

    def _message_start(self, payload: dict[str, Any]) -> list[Delta]:
        message = _dict(payload.get("message"))
        meta = MetaDelta(_str(message.get("id")), _str(message.get("model")))
        return [meta, *self._usage.update(message.get("usage"))]

    def _block_start(self, payload: dict[str, Any]) -> list[Delta]:
        index = _int(payload.get("index"))
        block = _dict(payload.get("content_block"))
        if index is None:
            return []
        self._blocks[index] = _Block(_str(block.get("type")), block.get("input"))
        return _block_deltas(index, block, whole=False)

    def _block_delta(self, payload: dict[str, Any]) -> list[Delta]:
        index = _int(payload.get("index"))
        delta = _dict(payload.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            text = _str(delta.get("text"))
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta":
            return [ReasoningDelta(chars=len(_str(delta.get("thinking")) or ""))]
        # signature_delta carries an opaque reasoning signature: never recorded.
        fragment = _str(delta.get("partial_json"))
        if kind != "input_json_delta" or index is None or not fragment:
            return []
        block = self._blocks.get(index)
        if block is None or block.type != "tool_use":
            return []
        block.args_seen = True
        return [ToolCallArgs(index, fragment)]

    def _block_stop(self, payload: dict[str, Any]) -> list[Delta]:
        index = _int(payload.get("index"))
        block = self._blocks.get(index) if index is not None else None
        if index is None or block is None or block.type != "tool_use":
            return []
        if block.args_seen:
            return [ToolCallEnd(index)]
        # No input deltas (a tool without parameters, or a server that sends the input whole
        # in the start event): the start event's input is the complete arguments.
        return [_whole_args(index, block.tool_input), ToolCallEnd(index)]

    def _message_delta(self, payload: dict[str, Any]) -> list[Delta]:
        stop = _finish(_dict(payload.get("delta")).get("stop_reason"))
        return [*stop, *self._usage.update(payload.get("usage"))]


def _decode_message(body: dict[str, Any]) -> list[Delta]:
    out: list[Delta] = [MetaDelta(_str(body.get("id")), _str(body.get("model")))]
    content = body.get("content")
    for index, block in enumerate(content if isinstance(content, list) else []):
        if isinstance(block, dict):
            out.extend(_block_deltas(index, block, whole=True))
    out.extend(_UsageState().update(body.get("usage")))
    out.extend(_finish(body.get("stop_reason")))
    out.append(EndDelta())
    return out


def _system_items(system: Any) -> list[Item]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Item(ItemKind.INSTRUCTION, role="system", text=system)]
    if not isinstance(system, list) or not all(isinstance(b, dict) for b in system):
        raise BadRequest("'system' must be a string or an array of text blocks", param="system")
    texts = [
        b["text"] for b in system if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    # Cache breakpoints split one prompt into blocks arbitrarily: keep it one instruction.
    return [Item(ItemKind.INSTRUCTION, role="system", text="\n".join(texts))] if texts else []


def _media_attrs(kind: str, block: dict[str, Any]) -> dict[str, Any]:
    source = _dict(block.get("source"))
    # Only the shape of the attachment: its data, URL or file id is never recorded.
    return {
        "type": kind,
        "media_type": _str(source.get("media_type")),
        "source": _str(source.get("type")),
    }


def _tool_result(role: str, block: dict[str, Any], attrs: dict[str, Any]) -> Item:
    content = block.get("content")
    texts: list[str] = []
    omitted: list[str] = []
    for part in map(_dict, content if isinstance(content, list) else []):
        text = _str(part.get("text"))
        if part.get("type") == "text" and text is not None:
            texts.append(text)
        else:
            omitted.append(_str(part.get("type")) or "unknown")
    if omitted.count("image"):
        attrs["images"] = omitted.count("image")
    if any(kind != "image" for kind in omitted):
        attrs["omitted"] = [kind for kind in omitted if kind != "image"]
    text = content if isinstance(content, str) else ("\n".join(texts) if texts else None)
    return Item(
        ItemKind.TOOL_RESULT,
        role=role,
        text=text,
        call_id=_str(block.get("tool_use_id")),
        is_error=block.get("is_error") is True,
        attrs=attrs,
    )


def _block_item(role: str, block: dict[str, Any], message_index: int) -> Item:
    kind = _str(block.get("type")) or "unknown"
    attrs: dict[str, Any] = {"message_index": message_index}
    if kind == "text":
        text_kind = ItemKind.USER if role == "user" else ItemKind.ASSISTANT_TEXT
        return Item(text_kind, role=role, text=_str(block.get("text")) or "", attrs=attrs)
    if kind == "tool_use":
        call_id, name = _str(block.get("id")), _str(block.get("name"))
        arguments = _compact(block.get("input", {}))
        return Item(ItemKind.TOOL_CALL, role, None, call_id, name, arguments, attrs=attrs)
    if kind == "tool_result":
        return _tool_result(role, block, attrs)
    if kind == "thinking":
        # The size of the thinking, never its text nor its signature.
        attrs["chars"] = len(_str(block.get("thinking")) or "")
        return Item(ItemKind.REASONING, role=role, attrs=attrs)
    if kind == "redacted_thinking":
        return Item(ItemKind.REASONING, role=role, attrs={**attrs, "redacted": True})
    if kind in ("image", "document"):
        return Item(ItemKind.OTHER, role=role, attrs={**attrs, **_media_attrs(kind, block)})
    # Server tool use and its results, search results, container uploads ...: the type only.
    return Item(ItemKind.OTHER, role=role, attrs={**attrs, "type": kind})


def _message_items(index: int, message: Any) -> list[Item]:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise BadRequest(f"'{where}' must be an object", param=where)
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise BadRequest(f"'{where}.role' must be 'user' or 'assistant'", param=f"{where}.role")
    content = message.get("content")
    if isinstance(content, str):
        kind = ItemKind.USER if role == "user" else ItemKind.ASSISTANT_TEXT
        return [Item(kind, role=role, text=content, attrs={"message_index": index})]
    if not isinstance(content, list):
        raise BadRequest(
            f"'{where}.content' must be a string or an array", param=f"{where}.content"
        )
    items = []
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            param = f"{where}.content[{position}]"
            raise BadRequest(f"'{param}' must be a content block object", param=param)
        items.append(_block_item(role, block, index))
    return items


class AnthropicMessagesAdapter:
    """`POST /v1/messages`, streamed or not."""

    name = "messages"

    def parse_request(self, body: Any) -> ParsedRequest:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object", param="body")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise BadRequest("'messages' must be an array of messages", param="messages")
        items = _system_items(body.get("system"))
        for index, message in enumerate(messages):
            items.extend(_message_items(index, message))
        return ParsedRequest(
            model=_str(body.get("model")),
            stream=body.get("stream") is True,
            items=items,
            max_output_tokens=_int(body.get("max_tokens")),
        )

    def prepare_body(
        self, body: dict[str, Any], parsed: ParsedRequest, *, max_tokens: int | None
    ) -> PreparedBody:
        # Anthropic streams report usage by themselves: only the completion limit may change.
        current = parsed.max_output_tokens
        if max_tokens is None or current is None or current <= max_tokens:
            return PreparedBody(body)
        return PreparedBody({**body, "max_tokens": max_tokens}, clamped_max_tokens=max_tokens)

    def new_event_decoder(self) -> MessagesEventDecoder:
        return MessagesEventDecoder()

    def is_injected_usage_event(self, event: SSEEvent) -> bool:
        return False

    def decode_body(self, body: Any) -> list[Delta]:
        if not isinstance(body, dict):
            return []
        # Some gateways in front of Anthropic answer with a bare {"error": {...}} object.
        if body.get("type") == "error" or (
            isinstance(body.get("error"), dict) and "content" not in body
        ):
            return [_error_delta(body), EndDelta()]
        return _decode_message(body)

    def decode_error(self, body: Any) -> dict[str, Any] | None:
        if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
            return None
        error = _error_delta(body)
        return {"message": error.message, "type": error.type, "code": error.code}

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        status = error.status
        kind = _ERROR_TYPES.get(status) or (
            "api_error" if status >= 500 else "invalid_request_error"
        )
        # The SDKs show only type and message: our code leads the message so it stays visible.
        message = f"{error.code}: {error.message}"
        return {"type": "error", "error": {"type": kind, "message": message}}


ADAPTER = AnthropicMessagesAdapter()
