"""Anthropic Messages stream events and response bodies → neutral deltas.

Stop reasons: end_turn/stop_sequence → completed, tool_use → tool_calls, max_tokens and
model_context_window_exceeded → length, refusal → refusal, pause_turn and compaction → paused,
others → unknown.
Thinking text never leaves this module: only its size, flags and the keyed digests of the
signatures (and of redacted thinking's data) the API wants back in a tool loop; the payloads
themselves only as opaque blobs, with `keep_opaque_reasoning` (`gateway.opaque`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway import jsoncodec
from gateway.items import RETURNS, SIGNED_TEXT, Item, ItemKind, StopReason
from gateway.opaque import Digests
from gateway.protocols.anthropic.blocks import (
    caller_attrs,
    is_provider_call,
    is_provider_result,
    kept,
    provider_call,
    provider_result,
    whole_provider_call,
)
from gateway.protocols.anthropic.usage import UsageState
from gateway.protocols.json_values import as_dict, as_int, as_str, compact
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    ItemsDelta,
    MetaDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from gateway.stream.sse import SSEEvent

_STOP_REASONS = {
    "end_turn": StopReason.COMPLETED,
    "stop_sequence": StopReason.COMPLETED,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.LENGTH,
    "model_context_window_exceeded": StopReason.LENGTH,
    "refusal": StopReason.REFUSAL,
    # The server paused a long-running turn (server tools) or stopped after compacting the
    # context, and the client is expected to send the turn back to continue: not completed,
    # not cut off, not failed.
    "pause_turn": StopReason.PAUSED,
    "compaction": StopReason.PAUSED,
}

ROLE = "assistant"

# A tool-use turn's thinking and redacted_thinking blocks must come back unchanged, with
# their signature or data, in the request that answers its tool calls.
THINKING = "thinking"
_RETURNS_THINKING: dict[str, Any] = {RETURNS: THINKING}
# A kept signature signs the block's text, which is never stored (`items.SIGNED_TEXT`).
_SIGNED = {SIGNED_TEXT: True}


def _finish(raw: Any, details: Any = None) -> list[Delta]:
    if not isinstance(raw, str):
        return []
    # `stop_details` of a refusal names its policy category (anthropic.types.RefusalStopDetails).
    category = as_str(as_dict(details).get("category"))
    return [FinishDelta(_STOP_REASONS.get(raw, StopReason.UNKNOWN), raw, category=category)]


def error_delta(payload: dict[str, Any]) -> ErrorDelta:
    error = as_dict(payload.get("error"))
    kind = as_str(error.get("type"))
    return ErrorDelta(as_str(error.get("message")) or kind or "unknown error", kind, kind)


@dataclass(slots=True)
class _Block:
    type: str | None
    start: dict[str, Any]  # the block as its start event gave it
    args_seen: bool = False
    fragments: list[str] = field(default_factory=list)  # a provider-run call's input


def _whole_args(index: int, value: Any) -> ToolCallArgs:
    return ToolCallArgs(index, compact(value if isinstance(value, dict) else {}))


def returned_thinking(payload: Any, digests: Digests) -> tuple[str, ...]:
    """The digest of a thinking block's signature or a redacted block's data, if it has one."""
    return (digests.of(payload),) if isinstance(payload, str) and payload else ()


def _block_deltas(
    index: int, block: dict[str, Any], digests: Digests, *, whole: bool
) -> list[Delta]:
    """A content block's opening (stream) or the whole block (body) as deltas."""
    kind = as_str(block.get("type"))
    if kind == "text":
        text = as_str(block.get("text"))
        return [TextDelta(text)] if text else []
    if kind == "thinking":
        chars = len(as_str(block.get("thinking")) or "")
        signed = returned_thinking(block.get("signature"), digests)  # streamed: "" at first
        if not signed:
            return [ReasoningDelta(chars=chars)]
        returns = _RETURNS_THINKING
        if digests.keep:
            returns = {**returns, **kept(digests, "signature", block.get("signature")), **_SIGNED}
        return [ReasoningDelta(chars=chars, attrs=returns, digests=signed)]
    if kind == "redacted_thinking":
        data = returned_thinking(block.get("data"), digests)
        attrs: dict[str, Any] = (
            {"redacted": True, RETURNS: THINKING} if data else {"redacted": True}
        )
        if digests.keep:
            attrs.update(kept(digests, "data", block.get("data")))
        return [ReasoningDelta(attrs=attrs, digests=data)]
    if kind == "tool_use":
        call_id, name = as_str(block.get("id")), as_str(block.get("name"))
        start = ToolCallStart(index, call_id, name, attrs=caller_attrs(block))
        if not whole:
            return [start]
        return [start, _whole_args(index, block.get("input")), ToolCallEnd(index)]
    if is_provider_call(kind):
        # Streamed, its input follows in deltas: the call is whole at its block's stop.
        return [ItemsDelta((whole_provider_call(ROLE, block, {}),))] if whole else []
    if is_provider_result(kind):
        return [ItemsDelta((provider_result(ROLE, block, {}),))]
    # A block of a type not known here is kept in its place, as its echo will be typed.
    return [ItemsDelta((Item(ItemKind.OTHER, role=ROLE, attrs={"type": kind or "unknown"}),))]


class MessagesEventDecoder:
    """Per-stream state: content block types by index, and the running usage."""

    def __init__(self, digests: Digests) -> None:
        self._digests = digests
        self._usage = UsageState()
        self._blocks: dict[int, _Block] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], list[Delta]]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": lambda _: [EndDelta()],
            "error": lambda payload: [error_delta(payload)],
        }

    def decode(self, event: SSEEvent) -> list[Delta]:
        # A tap must never break forwarding: what cannot be read is skipped, not raised.
        try:
            payload = jsoncodec.loads(event.data)
        except ValueError:
            return []
        if not isinstance(payload, dict):
            return []
        kind = as_str(payload.get("type")) or event.event
        handler = self._handlers.get(kind or "")
        return handler(payload) if handler else []

    def _message_start(self, payload: dict[str, Any]) -> list[Delta]:
        message = as_dict(payload.get("message"))
        meta = MetaDelta(as_str(message.get("id")), as_str(message.get("model")))
        return [meta, *self._usage.update(message.get("usage"))]

    def _block_start(self, payload: dict[str, Any]) -> list[Delta]:
        index = as_int(payload.get("index"))
        block = as_dict(payload.get("content_block"))
        if index is None:
            return []
        self._blocks[index] = _Block(as_str(block.get("type")), block)
        return _block_deltas(index, block, self._digests, whole=False)

    def _block_delta(self, payload: dict[str, Any]) -> list[Delta]:
        index = as_int(payload.get("index"))
        delta = as_dict(payload.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            text = as_str(delta.get("text"))
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta":
            return [ReasoningDelta(chars=len(as_str(delta.get("thinking")) or ""))]
        if kind == "signature_delta":  # whole in one event: its digest (and, kept, itself)
            signature = delta.get("signature")
            signed = returned_thinking(signature, self._digests)
            if not signed:
                return []
            attrs = _RETURNS_THINKING
            if self._digests.keep:
                attrs = {**attrs, **kept(self._digests, "signature", signature), **_SIGNED}
            return [ReasoningDelta(attrs=attrs, digests=signed)]
        fragment = as_str(delta.get("partial_json"))
        if kind != "input_json_delta" or index is None or not fragment:
            return []
        block = self._blocks.get(index)
        if block is None:
            return []
        if block.type != "tool_use":
            if is_provider_call(block.type):
                block.fragments.append(fragment)
            return []
        block.args_seen = True
        return [ToolCallArgs(index, fragment)]

    def _block_stop(self, payload: dict[str, Any]) -> list[Delta]:
        index = as_int(payload.get("index"))
        block = self._blocks.get(index) if index is not None else None
        if index is None or block is None:
            return []
        if is_provider_call(block.type):
            if not block.fragments:
                return [ItemsDelta((whole_provider_call(ROLE, block.start, {}),))]
            arguments = "".join(block.fragments)
            return [ItemsDelta((provider_call(ROLE, block.start, arguments, {}),))]
        if block.type != "tool_use":
            return []
        if block.args_seen:
            return [ToolCallEnd(index)]
        # No input deltas (a tool without parameters, or a server that sends the input whole
        # in the start event): the start event's input is the complete arguments.
        return [_whole_args(index, block.start.get("input")), ToolCallEnd(index)]

    def _message_delta(self, payload: dict[str, Any]) -> list[Delta]:
        delta = as_dict(payload.get("delta"))
        stop = _finish(delta.get("stop_reason"), delta.get("stop_details"))
        return [*stop, *self._usage.update(payload.get("usage"))]


def decode_message(body: dict[str, Any], digests: Digests) -> list[Delta]:
    out: list[Delta] = [MetaDelta(as_str(body.get("id")), as_str(body.get("model")))]
    content = body.get("content")
    for index, block in enumerate(content if isinstance(content, list) else []):
        if isinstance(block, dict):
            out.extend(_block_deltas(index, block, digests, whole=True))
    out.extend(UsageState().update(body.get("usage")))
    out.extend(_finish(body.get("stop_reason"), body.get("stop_details")))
    out.append(EndDelta())
    return out
