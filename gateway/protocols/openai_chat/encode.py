"""Recorded Chat Completions steps back on the wire, for cassettes: the request's `messages`
from the trace's items, and an answer (a body or its chunks) from the step's output.

Elements with a recorded wire shape are spelled as the client sent them (`wire_shapes`);
the others (older records) in their usual form: an echoed assistant message is
`{"role", "content", "tool_calls"?}` (no `refusal: null`, no `annotations`); reasoning
text is never stored, so `reasoning_content` is not sent back; images and files are noted
by type only, so a user part that is not text is left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.items import ASSISTANT_KINDS, Item, ItemKind
from gateway.protocols.base import Recorded
from gateway.protocols.wire_shapes import spell

_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens")


class ChatEncoder:
    def canonical(self, items: list[Item]) -> list[Any]:
        return messages(items)

    def request_body(self, step: Recorded) -> dict[str, Any]:
        body: dict[str, Any] = {**step.params, "messages": spell.history(step.items, messages)}
        if step.tools:
            legacy = all(isinstance(t, dict) and "type" not in t for t in step.tools)
            body["functions" if legacy else "tools"] = list(step.tools)
        if body.get("stream") is True:  # the gateway asks for usage (prepare_body)
            options = body.get("stream_options")
            base = options if isinstance(options, dict) else {}
            body["stream_options"] = {**base, "include_usage": True}
        return body

    def response_body(self, step: Recorded) -> dict[str, Any]:
        return {
            "id": step.response_id,
            "object": "chat.completion",
            "created": step.created,
            "model": step.model,
            "choices": [
                {
                    "index": 0,
                    "message": _assistant(list(step.output)) or _message(None, []),
                    "finish_reason": step.raw_stop_reason,
                }
            ],
            "usage": _usage(step),
        }

    def response_events(self, step: Recorded) -> list[dict[str, Any]]:
        head: dict[str, Any] = {
            "id": step.response_id,
            "object": "chat.completion.chunk",
            "created": step.created,
            "model": step.model,
        }
        message = _assistant(list(step.output)) or _message(None, [])
        delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
        chunks: list[dict[str, Any]] = [
            {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        ]
        for index, call in enumerate(message.get("tool_calls", ())):
            entry = {"index": index, **call}
            choice = {"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}
            chunks.append({**head, "choices": [choice]})
        end = {"index": 0, "delta": {}, "finish_reason": step.raw_stop_reason}
        chunks.append({**head, "choices": [end]})
        chunks.append({**head, "choices": [], "usage": _usage(step)})
        return [{"data": json.dumps(c)} for c in chunks] + [{"data": "[DONE]"}]


ENCODER = ChatEncoder()


def messages(items: Sequence[Item]) -> list[Any]:
    """The history as messages: each run of assistant items is one assistant message."""
    out: list[dict[str, Any]] = []
    turn: list[Item] = []
    for item in items:
        if item.kind in ASSISTANT_KINDS:
            turn.append(item)
            continue
        if turn:
            out.append(_assistant(turn) or _message(None, []))
            turn = []
        message = _message_of(item)
        if message is not None:
            out.append(message)
    if turn:
        out.append(_assistant(turn) or _message(None, []))
    return out


def _message_of(item: Item) -> dict[str, Any] | None:
    if item.kind in (ItemKind.INSTRUCTION, ItemKind.USER):
        return {"role": item.role or "user", "content": item.text or ""}
    if item.kind is ItemKind.TOOL_RESULT and item.role == "function":
        return {"role": "function", "name": item.tool_name, "content": item.text}
    if item.kind is ItemKind.TOOL_RESULT:
        return {"role": "tool", "tool_call_id": item.call_id, "content": item.text}
    return None  # an image or file part, an unknown message: not stored


def _assistant(turn: list[Item]) -> dict[str, Any] | None:
    texts = [i.text for i in turn if i.kind is ItemKind.ASSISTANT_TEXT and i.text]
    calls = [_call(i) for i in turn if i.kind is ItemKind.TOOL_CALL]
    if not texts and not calls:
        return None
    return _message("".join(texts) or None, calls)


def _message(content: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def _call(item: Item) -> dict[str, Any]:
    if item.attrs.get("free_form"):
        custom = {"name": item.tool_name, "input": item.arguments}
        return {"id": item.call_id, "type": "custom", "custom": custom}
    function = {"name": item.tool_name, "arguments": item.arguments or ""}
    return {"id": item.call_id, "type": "function", "function": function}


def _usage(step: Recorded) -> dict[str, Any]:
    return {name: step.usage.get(name) for name in _USAGE}
