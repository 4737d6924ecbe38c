"""Anthropic Messages adapter: request history → typed items, completion limits, errors.

Stream events and response bodies are decoded in `gateway.protocols.anthropic.events`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import msgspec

from gateway.config import Settings
from gateway.errors import BadRequest, GatewayError
from gateway.items import DIGESTS, RETURNS, SIGNED_TEXT, Item, ItemKind
from gateway.opaque import UNKEYED, Digests
from gateway.protocols.anthropic.blocks import (
    TOOL_TYPES,
    caller_attrs,
    is_provider_call,
    is_provider_result,
    kept,
    provider_result,
    whole_provider_call,
)
from gateway.protocols.anthropic.events import (
    THINKING,
    MessagesEventDecoder,
    decode_message,
    error_delta,
    returned_thinking,
)
from gateway.protocols.base import (
    HistoryRules,
    ParsedRequest,
    PreparedBody,
    SessionFields,
    declared_functions,
    shape_of,
    untyped_field,
)
from gateway.protocols.json_values import as_dict, as_int, as_str, compact
from gateway.protocols.request_body import Remembered
from gateway.routing import Wire
from gateway.stream.deltas import Delta, EndDelta
from gateway.stream.sse import SSEEvent

# The smallest `thinking.budget_tokens` the API accepts.
MIN_THINKING_BUDGET = 1024

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _system_items(system: Any, attrs: dict[str, Any] | None = None) -> list[Item]:
    """Top-level `system`, or the content of a `system` turn inside `messages`."""
    attrs = attrs or {}
    if system is None:
        return []
    if isinstance(system, str):
        return [Item(ItemKind.INSTRUCTION, role="system", text=system, attrs=attrs)]
    if not isinstance(system, list):
        return [Item(ItemKind.OTHER, role="system", attrs={**attrs, "shape": shape_of(system)})]
    texts = [
        b["text"]
        for b in system
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    # Cache breakpoints split one prompt into blocks arbitrarily: keep it one instruction.
    if not texts:
        return []
    return [Item(ItemKind.INSTRUCTION, role="system", text="\n".join(texts), attrs=attrs)]


def _media_attrs(kind: str, block: dict[str, Any]) -> dict[str, Any]:
    source = as_dict(block.get("source"))
    # Only the shape of the attachment: its data, URL or file id is never recorded.
    return {
        "type": kind,
        "media_type": as_str(source.get("media_type")),
        "source": as_str(source.get("type")),
    }


def _tool_result(role: str, block: dict[str, Any], attrs: dict[str, Any]) -> Item:
    content = block.get("content")
    texts: list[str] = []
    omitted: list[str] = []
    for part in map(as_dict, content if isinstance(content, list) else []):
        text = as_str(part.get("text"))
        if part.get("type") == "text" and text is not None:
            texts.append(text)
        else:
            omitted.append(as_str(part.get("type")) or "unknown")
    if omitted.count("image"):
        attrs["images"] = omitted.count("image")
    if any(kind != "image" for kind in omitted):
        attrs["omitted"] = [kind for kind in omitted if kind != "image"]
    text = content if isinstance(content, str) else ("\n".join(texts) if texts else None)
    return Item(
        ItemKind.TOOL_RESULT,
        role=role,
        text=text,
        call_id=as_str(block.get("tool_use_id")),
        is_error=block.get("is_error") is True,
        attrs=attrs,
    )


def _block_item(role: str, block: dict[str, Any], message_index: int, digests: Digests) -> Item:
    kind = as_str(block.get("type")) or "unknown"
    attrs: dict[str, Any] = {"message_index": message_index}
    if kind == "text":
        text_kind = ItemKind.USER if role == "user" else ItemKind.ASSISTANT_TEXT
        return Item(text_kind, role=role, text=as_str(block.get("text")) or "", attrs=attrs)
    if kind == "tool_use":
        call_id, name = as_str(block.get("id")), as_str(block.get("name"))
        arguments = compact(block.get("input", {}))
        attrs.update(caller_attrs(block))
        return Item(ItemKind.TOOL_CALL, role, None, call_id, name, arguments, attrs=attrs)
    if is_provider_call(kind):
        return whole_provider_call(role, block, attrs)
    if is_provider_result(kind):
        return provider_result(role, block, attrs)
    if kind == "tool_result":
        return _tool_result(role, block, attrs)
    if kind == "thinking":
        # The size of the thinking, never its text nor its signature: the signature's digest.
        attrs["chars"] = len(as_str(block.get("thinking")) or "")
        signature = block.get("signature")
        if digests.keep and signature:
            attrs.update(kept(digests, "signature", signature), **_SIGNED)
        return _thinking(role, attrs, returned_thinking(signature, digests))
    if kind == "redacted_thinking":
        attrs["redacted"] = True
        if digests.keep:
            attrs.update(kept(digests, "data", block.get("data")))
        return _thinking(role, attrs, returned_thinking(block.get("data"), digests))
    if kind in ("image", "document"):
        return Item(ItemKind.OTHER, role=role, attrs={**attrs, **_media_attrs(kind, block)})
    # Search results, container uploads, compaction ...: the type only.
    return Item(ItemKind.OTHER, role=role, attrs={**attrs, "type": kind})


_SIGNED = {SIGNED_TEXT: True}  # a thinking block's signature signs its text


def _thinking(role: str, attrs: dict[str, Any], returned: tuple[str, ...]) -> Item:
    if returned:
        attrs.update({RETURNS: THINKING, DIGESTS: list(returned)})
    return Item(ItemKind.REASONING, role=role, attrs=attrs)


def _typed(digests: Digests, index: int, message: Any) -> tuple[Item, ...]:
    return tuple(_message_items(index, message, digests))


def _message_items(index: int, message: Any, digests: Digests) -> list[Item]:
    """A turn's items. What the gateway cannot type (an unknown role, content of another
    shape) is forwarded as sent and recorded as `other`: the provider judges it."""
    attrs: dict[str, Any] = {"message_index": index}
    if not isinstance(message, dict):
        return [Item(ItemKind.OTHER, attrs={**attrs, "shape": shape_of(message)})]
    role, content = message.get("role"), message.get("content")
    if role == "system":  # a per-turn instruction (beta `per-turn-control-2026-07-01`)
        return _system_items(content, attrs)
    if role not in ("user", "assistant"):
        named = role if isinstance(role, str) else shape_of(role)
        return [Item(ItemKind.OTHER, role=as_str(role), attrs={**attrs, "role": named})]
    if isinstance(content, str):
        kind = ItemKind.USER if role == "user" else ItemKind.ASSISTANT_TEXT
        return [Item(kind, role=role, text=content, attrs=attrs)]
    if not isinstance(content, list):
        return [Item(ItemKind.OTHER, role=role, attrs={**attrs, "shape": shape_of(content)})]
    items = [
        _block_item(role, block, index, digests)
        if isinstance(block, dict)
        else Item(ItemKind.OTHER, role=role, attrs={**attrs, "shape": shape_of(block)})
        for block in content
    ]
    return _joined_texts(items) if role == "assistant" else items


def _joined_texts(items: list[Item]) -> list[Item]:
    """An assistant turn's text blocks with nothing but thinking between them are one text,
    as the answer they echo was recorded (an answer's text is split into blocks by citations
    and by thinking, not by meaning)."""
    joined: list[Item] = []
    text_at: int | None = None  # where the text being joined is, in `joined`
    for item in items:
        if item.kind is ItemKind.ASSISTANT_TEXT and text_at is not None:
            earlier = joined[text_at]
            joined[text_at] = earlier.with_changes(text=(earlier.text or "") + (item.text or ""))
            continue
        if item.kind is ItemKind.ASSISTANT_TEXT:
            text_at = len(joined)
        elif item.kind is not ItemKind.REASONING:
            text_at = None
        joined.append(item)
    return joined


def _clamped(body: dict[str, Any], current: int, limit: int) -> PreparedBody:
    """`max_tokens` lowered to `limit`, keeping an extended-thinking budget valid inside it.

    The API rejects `thinking.budget_tokens` below 1024 or not below `max_tokens`: with
    thinking on, the limit stays above that floor and the thinking budget shrinks with it,
    in proportion, so that a token budget never turns the request into a 400.
    """
    thinking = as_dict(body.get("thinking"))
    budget = as_int(thinking.get("budget_tokens")) if thinking.get("type") == "enabled" else None
    if budget is None:
        return PreparedBody({**body, "max_tokens": limit}, clamped_max_tokens=limit)
    limit = max(limit, MIN_THINKING_BUDGET + 1)
    if limit >= current:
        return PreparedBody(body)
    changes: dict[str, Any] = {"max_tokens": limit}
    if budget >= limit:
        scaled = max(MIN_THINKING_BUDGET, min(limit - 1, limit * budget // current))
        changes["thinking"] = {**thinking, "budget_tokens": scaled}
    return PreparedBody({**body, **changes}, clamped_max_tokens=limit)


def _declared_tools(body: dict[str, Any]) -> dict[str, Any] | None:
    """Client tools by name (server tools, typed like `web_search_20250305`, answer in
    blocks of their own). A continued thread's tools are held by the server."""
    if "tools" not in body and _continued_message(body.get("thread")) is not None:
        return None
    return declared_functions(
        body.get("tools"),
        lambda t: t.get("name"),
        lambda t: t.get("input_schema"),
        is_function=lambda t: t.get("type") in (None, "custom"),
    )


def _thinking_off(body: dict[str, Any]) -> bool:
    """Thinking turned off: the API asks thinking blocks back only while thinking is on. An
    absent `thinking` is not off: some models think by default."""
    return as_dict(body.get("thinking")).get("type") == "disabled"


def _continued_message(thread: Any) -> str | None:
    """A message thread's `continue` names the response it resumes from: the server holds
    the earlier turns, so the request carries only the new one (like `previous_response_id`)."""
    thread = as_dict(thread)
    if thread.get("type") != "continue":
        return None
    return as_str(thread.get("previous_message_id"))


def _anthropic_upstream(settings: Settings) -> str:
    return settings.anthropic_upstream_url


class AnthropicMessagesAdapter:
    """`POST /v1/messages`, streamed or not."""

    name = "messages"
    path: str = "/v1/messages"
    history_field: str | None = "messages"
    history: HistoryRules = HistoryRules("messages", results_follow_their_turn=True)
    wire: Wire = Wire(name, "anthropic", _anthropic_upstream, "x-api-key")
    # Its other endpoints (count_tokens, batches): passthrough, routed as Messages.
    passthrough_paths: tuple[str, ...] = ("/v1/messages/",)
    not_params: frozenset[str] = frozenset({"messages", "tools", "system"})
    tool_fields: tuple[str, ...] = ("tools",)
    recorded_headers: tuple[str, ...] = ("anthropic-version", "anthropic-beta")
    session_fields: SessionFields = (("metadata", "user_id"),)
    span_attributes: Mapping[str, Mapping[str, str]] = {}
    provider_tool_types: frozenset[str] = TOOL_TYPES

    def contained_tools(self, body: dict[str, Any]) -> list[Any] | None:
        return None  # tools are declared only at the top

    def is_separate_instruction(self, item: Item) -> bool:
        return item.kind is ItemKind.INSTRUCTION  # `system` sits outside `messages`

    def __init__(self, digests: Digests = UNKEYED) -> None:
        self._digests = digests
        self._remembered = Remembered()

    def keyed(self, digests: Digests) -> AnthropicMessagesAdapter:
        return AnthropicMessagesAdapter(digests)

    def parse_request(self, body: Any) -> ParsedRequest:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object", param="body")
        messages = body.get("messages")
        items = _system_items(body.get("system"))
        if isinstance(messages, list):
            for index, message in enumerate(messages):
                if isinstance(message, msgspec.Raw):  # as the client wrote it: typed once
                    typed = partial(_typed, self._digests, index)
                    items.extend(self._remembered.get(index, message, typed))
                else:
                    items.extend(_message_items(index, message, self._digests))
        else:  # forwarded as sent: the provider answers it
            items.append(untyped_field("messages", messages))
        return ParsedRequest(
            model=as_str(body.get("model")),
            stream=body.get("stream") is True,
            items=items,
            previous_response_id=_continued_message(body.get("thread")),
            # A `compaction` block hides no call a result may answer: Anthropic's results
            # answer the assistant turn just before them, which the request always holds.
            max_output_tokens=as_int(body.get("max_tokens")),
            tools=_declared_tools(body),
            reasoning_off=_thinking_off(body),
        )

    def prepare_body(
        self, body: dict[str, Any], parsed: ParsedRequest, *, max_tokens: int | None
    ) -> PreparedBody:
        # Anthropic streams report usage by themselves: only the completion limit may change.
        current = parsed.max_output_tokens
        if max_tokens is None or current is None or current <= max_tokens:
            return PreparedBody(body)
        return _clamped(body, current, max_tokens)

    def new_event_decoder(self) -> MessagesEventDecoder:
        return MessagesEventDecoder(self._digests)

    def is_injected_usage_event(self, event: SSEEvent) -> bool:
        return False

    def decode_body(self, body: Any) -> list[Delta]:
        if not isinstance(body, dict):
            return []
        # Some gateways in front of Anthropic answer with a bare {"error": {...}} object.
        if body.get("type") == "error" or (
            isinstance(body.get("error"), dict) and "content" not in body
        ):
            return [error_delta(body), EndDelta()]
        return decode_message(body, self._digests)

    def decode_error(self, body: Any) -> dict[str, Any] | None:
        if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
            return None
        error = error_delta(body)
        return {"message": error.message, "type": error.type, "code": error.code}

    def error_body(self, error: GatewayError) -> dict[str, Any]:
        status = error.status
        kind = _ERROR_TYPES.get(status) or (
            "api_error" if status >= 500 else "invalid_request_error"
        )
        # The SDKs show only type and message: our code leads the message so it stays visible.
        message = f"{error.code}: {error.message}"
        return {"type": "error", "error": {"type": kind, "message": message, **error.details}}


# Typed here: compiling the package with mypyc needs it before registry.py infers it.
ADAPTER: AnthropicMessagesAdapter = AnthropicMessagesAdapter()
