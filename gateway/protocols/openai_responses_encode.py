"""Recorded Responses steps back on the wire, for cassettes: `instructions` and `input`
from the trace's items, and an answer (a Response or its events) from the step's output.

A request continuing `previous_response_id` or a `conversation` sent only its new items
(the provider holds the rest): so does the rebuild. Elements with a recorded wire shape are
spelled as the client sent them (`wire_shapes`); the others (older records) in their usual
form: a message's content as one text part (a string when it was one), no
`status` on an echoed item. Reasoning items, images and files (noted by type only) and
items of the provider's own tools are left out.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.items import Item, ItemKind
from gateway.protocols.base import Recorded
from gateway.protocols.wire_shapes import spell

_INDEX = "message_index"
_RESULTS = frozenset({"function_call_output", "custom_tool_call_output"})
_INCOMPLETE = frozenset({"max_output_tokens", "content_filter"})


class ResponsesEncoder:
    def canonical(self, items: list[Item]) -> list[Any]:
        return _canonical(items)

    def request_body(self, step: Recorded) -> dict[str, Any]:
        held = step.params.get("previous_response_id") or step.params.get("conversation")
        items = step.new_items if held else step.items
        body: dict[str, Any] = {**step.params, "input": input_of(items, step.tools)}
        for item in items:
            if item.kind is ItemKind.INSTRUCTION and item.attrs.get("field") == "instructions":
                cover = spell.covered(item)
                body["instructions"] = spell.fill(cover[1][0], [item]) if cover else item.text
        if step.tools and not spell.refers_to_tools(items):  # else sent inside `input`
            body["tools"] = list(step.tools)
        return body

    def response_body(self, step: Recorded) -> dict[str, Any]:
        incomplete = step.raw_stop_reason in _INCOMPLETE
        return {
            "id": step.response_id,
            "object": "response",
            "created_at": step.created,
            "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": step.raw_stop_reason} if incomplete else None,
            "model": step.model,
            "output": [_output(item, n) for n, item in enumerate(_answered(step.output))],
            "usage": _usage(step),
        }

    def response_events(self, step: Recorded) -> list[dict[str, Any]]:
        final = self.response_body(step)
        start = {**final, "status": "in_progress", "output": [], "usage": None}
        events: list[tuple[str, dict[str, Any]]] = [("response.created", {"response": start})]
        for index, item in enumerate(final["output"]):
            placed = {"output_index": index, "item": item}
            events += [
                ("response.output_item.added", placed),
                ("response.output_item.done", placed),
            ]
        name = "response.completed" if final["status"] == "completed" else "response.incomplete"
        events.append((name, {"response": final}))
        return [_event(name, payload, n) for n, (name, payload) in enumerate(events)]


ENCODER = ResponsesEncoder()


def input_of(
    items: tuple[Item, ...], tools: tuple[Any, ...] | None = None
) -> list[dict[str, Any]] | str:
    """The history as input items: a lone user string stays a string; `tools`: the step's
    declared tools, for an element that held them."""
    turns = [i for i in items if i.attrs.get("field") != "instructions"]
    lone = len(turns) == 1 and turns[0].kind is ItemKind.USER and _INDEX in turns[0].attrs
    if lone and spell.covered(turns[0]) is None:
        return turns[0].text or ""
    return spell.history(turns, _canonical, tools)


def _canonical(turns: list[Item]) -> list[Any]:
    out = [_input(item) for item in turns]
    return [entry for entry in out if entry is not None]


def _input(item: Item) -> dict[str, Any] | None:
    if item.kind in (ItemKind.USER, ItemKind.INSTRUCTION):
        return {"role": item.role or "user", "content": item.text or ""}
    if item.kind is ItemKind.ASSISTANT_TEXT:
        return _output(item, 0)
    if item.kind is ItemKind.TOOL_CALL and "tool_type" not in item.attrs:
        return _output(item, 0)
    kind = item.attrs.get("type") or "function_call_output"
    if item.kind is ItemKind.TOOL_RESULT and kind in _RESULTS:
        return {"type": kind, "call_id": item.call_id, "output": item.text}
    return None  # reasoning, images, files, the provider's own tools: not stored


def _answered(output: tuple[Item, ...]) -> list[Item]:
    return [i for i in output if _input(i) is not None]


def _output(item: Item, n: int) -> dict[str, Any]:
    item_id = _item_id(item)
    if item.kind is ItemKind.TOOL_CALL:
        entry: dict[str, Any] = {"call_id": item.call_id, "name": item.tool_name}
        if item.attrs.get("free_form"):
            entry = {"type": "custom_tool_call", **entry, "input": item.arguments}
        else:
            entry = {"type": "function_call", **entry, "arguments": item.arguments or ""}
        return {"id": item_id, **entry} if item_id else entry
    part = {"type": "output_text", "text": item.text or "", "annotations": []}
    message = {"type": "message", "role": "assistant", "content": [part]}
    return {"id": item_id, **message} if item_id else message


def _item_id(item: Item) -> str | None:
    ids = item.attrs.get("item_ids")
    if isinstance(ids, list) and ids:
        return str(ids[0])
    found = item.attrs.get("item_id")
    return found if isinstance(found, str) else None


def _usage(step: Recorded) -> dict[str, Any]:
    return {
        "input_tokens": step.usage.get("prompt_tokens"),
        "input_tokens_details": {"cached_tokens": step.usage.get("cached_tokens") or 0},
        "output_tokens": step.usage.get("completion_tokens"),
        "output_tokens_details": {"reasoning_tokens": step.usage.get("reasoning_tokens") or 0},
        "total_tokens": step.usage.get("total_tokens"),
    }


def _event(name: str, payload: dict[str, Any], number: int) -> dict[str, Any]:
    data = {"type": name, "sequence_number": number, **payload}
    return {"event": name, "data": json.dumps(data)}
