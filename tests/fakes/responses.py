"""Builders of OpenAI Responses API payloads shaped like real answers: bodies and event streams."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.provider import Reply, named_sse
from tests.fakes.responses_hosted import in_progress, progress_events

MODEL = "gpt-5-2025-08-07"


def usage(
    input_tokens: int = 20, output_tokens: int = 10, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def function_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": "fc_" + call_id.removeprefix("call_"),
        "type": "function_call",
        "status": "completed",
        "arguments": args,
        "call_id": call_id,
        "name": name,
    }


def custom_tool_call(call_id: str, name: str, text: str, **extra: Any) -> dict[str, Any]:
    """A call of a custom tool: free-form `input` text (e.g. Codex's `exec`)."""
    return {
        "id": "ctc_" + call_id.removeprefix("call_"),
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "input": text,
        **extra,
    }


def message(text: str, item_id: str = "msg_68c42d26866c819da8d5") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}],
        "role": "assistant",
    }


def reasoning(
    summary: list[str] | None = None,
    *,
    encrypted: str | None = None,
    text: str | None = None,
    item_id: str = "rs_68c42d1d0878819d8266007cd3d1",
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": s} for s in summary or []],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    if text is not None:
        item["content"] = [{"type": "reasoning_text", "text": text}]
    return item


def response(
    output: list[dict[str, Any]],
    *,
    response_id: str = "resp_fake1",
    status: str = "completed",
    use: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
    previous_response_id: str | None = None,
    max_output_tokens: int | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1757687080,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": max_output_tokens,
        "model": MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": previous_response_id,
        "reasoning": {"effort": "low", "summary": "detailed"},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": use if use is not None else usage(),
        "user": None,
        "metadata": {},
    }


def reply(body: dict[str, Any], *, status: int = 200) -> Reply:
    return Reply(status=status, body=body, headers={"x-request-id": f"req_{body.get('id')}"})


def _pieces(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _in_progress(item: dict[str, Any]) -> dict[str, Any]:
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    if item["type"] == "custom_tool_call":
        return {**item, "status": "in_progress", "input": ""}
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    return {**item, "summary": []} if item["type"] == "reasoning" else in_progress(item)


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The events that stream one output item, as the API sends them."""
    ref = {"item_id": item.get("id"), "output_index": index}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": _in_progress(item)},
        *progress_events(item, ref),
    ]
    if item["type"] == "function_call":
        for piece in _pieces(item["arguments"]):
            events.append({"type": "response.function_call_arguments.delta", **ref, "delta": piece})
        events.append(
            {"type": "response.function_call_arguments.done", **ref, "arguments": item["arguments"]}
        )
    elif item["type"] == "custom_tool_call":  # free-form input, streamed as raw text
        for piece in _pieces(item["input"]):
            events.append({"type": "response.custom_tool_call_input.delta", **ref, "delta": piece})
        events.append(
            {"type": "response.custom_tool_call_input.done", **ref, "input": item["input"]}
        )
    elif item["type"] == "reasoning":
        for number, part in enumerate(item["summary"]):
            where = {**ref, "summary_index": number}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **where,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            for piece in _pieces(part["text"]):
                events.append(
                    {"type": "response.reasoning_summary_text.delta", **where, "delta": piece}
                )
            events.append(
                {"type": "response.reasoning_summary_text.done", **where, "text": part["text"]}
            )
            events.append({"type": "response.reasoning_summary_part.done", **where, "part": part})
        for part in item.get("content") or []:
            for piece in _pieces(part["text"]):
                events.append(
                    {
                        "type": "response.reasoning_text.delta",
                        **ref,
                        "content_index": 0,
                        "delta": piece,
                    }
                )
    elif item["type"] == "message":
        for number, part in enumerate(item["content"]):
            where = {**ref, "content_index": number}
            empty = {**part, "text": ""}
            events.append({"type": "response.content_part.added", **where, "part": empty})
            for piece in _pieces(part["text"]):
                events.append(
                    {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
                )
            events.append(
                {"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []}
            )
            events.append({"type": "response.content_part.done", **where, "part": part})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_events(
    body: dict[str, Any], *, terminal: bool = True, error_event: dict[str, Any] | None = None
) -> list[bytes]:
    """The event stream of a response: created, in_progress, each item, then its terminal event."""
    start = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(body["output"]):
        events += _item_events(index, item)
    if error_event is not None:
        events.append({"type": "error", **error_event})
    if terminal:
        kind = {"completed": "completed", "incomplete": "incomplete"}.get(body["status"], "failed")
        events.append({"type": f"response.{kind}", "response": body})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return named_sse(*events)


def streamed(body: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(
        events=stream_events(body, **kwargs), headers={"x-request-id": f"req_{body.get('id')}"}
    )
