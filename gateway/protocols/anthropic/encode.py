"""Recorded Anthropic Messages steps back on the wire, for cassettes: `system` and
`messages` from the trace's items (each input item keeps the index of its message), and an
answer (a Message or its events) from the step's output.

Elements with a recorded wire shape are spelled as the client sent them (`wire_shapes`);
the others (older records) in their usual form: `system` as one string; a user
turn of one text as a string, else as blocks; a tool result's content as a string. Thinking
text is never stored: thinking blocks are left out. Images and documents are noted by type
only: they are left out too.
"""

from __future__ import annotations

import json
from itertools import groupby
from typing import Any

from gateway.items import Item, ItemKind
from gateway.protocols.base import Recorded
from gateway.protocols.wire_shapes import spell

_INDEX = "message_index"


class MessagesEncoder:
    def canonical(self, items: list[Item]) -> list[Any]:
        return messages(items)

    def request_body(self, step: Recorded) -> dict[str, Any]:
        system = [i for i in step.items if i.kind is ItemKind.INSTRUCTION and _INDEX not in i.attrs]
        turns = [
            i for i in step.items if not (i.kind is ItemKind.INSTRUCTION and _INDEX not in i.attrs)
        ]
        body: dict[str, Any] = {**step.params, "messages": spell.history(turns, messages)}
        cover = spell.covered(system[0]) if len(system) == 1 else None
        if cover is not None:
            body["system"] = spell.fill(cover[1][0], system)
        elif system:
            body["system"] = "\n".join(i.text or "" for i in system)
        if step.tools:
            body["tools"] = list(step.tools)
        return body

    def response_body(self, step: Recorded) -> dict[str, Any]:
        return {
            **_message_head(step),
            "content": _blocks(step.output),
            "stop_reason": step.raw_stop_reason,
            "stop_sequence": None,
            "usage": _usage(step),
        }

    def response_events(self, step: Recorded) -> list[dict[str, Any]]:
        usage = _usage(step)
        start = {**_message_head(step), "content": [], "stop_reason": None}
        start["stop_sequence"] = None
        start["usage"] = {**usage, "output_tokens": 0}
        events = [_event("message_start", {"message": start})]
        for index, block in enumerate(_blocks(step.output)):
            events += _block_events(index, block)
        delta = {"stop_reason": step.raw_stop_reason, "stop_sequence": None}
        events.append(_event("message_delta", {"delta": delta, "usage": usage}))
        events.append(_event("message_stop", {}))
        return events


ENCODER = MessagesEncoder()


def messages(items: list[Item]) -> list[Any]:
    """A turn for each message index (an answer's output items, without one, are a turn)."""
    out: list[dict[str, Any]] = []
    for (_, role), group in groupby(items, key=lambda i: (i.attrs.get(_INDEX), i.role)):
        turn = list(group)
        if role == "assistant":
            out.append({"role": "assistant", "content": _blocks(turn)})
        elif len(turn) == 1 and turn[0].kind is ItemKind.USER:
            out.append({"role": role or "user", "content": turn[0].text or ""})
        else:
            out.append({"role": role or "user", "content": _blocks(turn)})
    return out


def _blocks(items: Any) -> list[dict[str, Any]]:
    blocks = [_block(item) for item in items]
    return [b for b in blocks if b is not None]


def _block(item: Item) -> dict[str, Any] | None:
    if item.kind in (ItemKind.USER, ItemKind.ASSISTANT_TEXT, ItemKind.INSTRUCTION):
        return {"type": "text", "text": item.text or ""}
    if item.kind is ItemKind.TOOL_CALL:
        arguments = json.loads(item.arguments) if item.arguments else {}
        return {"type": "tool_use", "id": item.call_id, "name": item.tool_name, "input": arguments}
    if item.kind is ItemKind.TOOL_RESULT:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": item.call_id}
        if item.text is not None:
            block["content"] = item.text
        if item.is_error:
            block["is_error"] = True
        return block
    return None  # thinking, images, documents: not stored


def _message_head(step: Recorded) -> dict[str, Any]:
    return {"id": step.response_id, "type": "message", "role": "assistant", "model": step.model}


def _usage(step: Recorded) -> dict[str, Any]:
    cached = step.usage.get("cached_tokens") or 0
    created = step.usage.get("cache_creation_tokens") or 0
    prompt = step.usage.get("prompt_tokens")
    return {
        "input_tokens": None if prompt is None else prompt - cached - created,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": created,
        "output_tokens": step.usage.get("completion_tokens"),
    }


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "tool_use":
        opening = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        opening = {**block, "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    return [
        _event("content_block_start", {"index": index, "content_block": opening}),
        _event("content_block_delta", {"index": index, "delta": delta}),
        _event("content_block_stop", {"index": index}),
    ]


def _event(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"event": name, "data": json.dumps({"type": name, **payload})}
