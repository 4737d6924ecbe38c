"""Builders of Chat Completions provider payloads, shaped like real OpenAI answers."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.provider import Reply, sse

MODEL = "gpt-4o-2024-08-06"


def usage(
    prompt: int = 20, completion: int = 10, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }


def call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    response_id: str = "chatcmpl-fake1",
    use: dict[str, Any] | None = None,
    extra_message: dict[str, Any] | None = None,
    model: str = MODEL,
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    message.update(extra_message or {})
    body = {
        "id": response_id,
        "object": "chat.completion",
        "created": 1766084439,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": use or usage(),
        "system_fingerprint": "fp_e413f45763",
    }
    return Reply(body=body, headers={"x-request-id": f"req_{response_id}"})


def _chunk(
    response_id: str, delta: dict[str, Any], finish: str | None = None, model: str = MODEL
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "chat.completion.chunk",
        "created": 1766084439,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def stream_chunks(
    text: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    response_id: str = "chatcmpl-fakes1",
    use: dict[str, Any] | None = None,
    reasoning: str | None = None,
    done: bool = True,
    usage_chunk: bool = True,
    model: str = MODEL,
) -> list[bytes]:
    """A stream as OpenAI sends it: role, content pieces, tool-call fragments, finish, usage
    (the usage chunk only when asked for, as `stream_options.include_usage` does)."""
    first = {"role": "assistant", "content": ""}
    payloads: list[dict[str, Any]] = [_chunk(response_id, first, model=model)]
    if reasoning:
        for piece in (reasoning[: len(reasoning) // 2], reasoning[len(reasoning) // 2 :]):
            payloads.append(_chunk(response_id, {"reasoning_content": piece}, model=model))
    for piece in _pieces(text or ""):
        payloads.append(_chunk(response_id, {"content": piece}, model=model))
    for index, tc in enumerate(tool_calls or []):
        start = {
            "index": index,
            "id": tc["id"],
            "type": "function",
            "function": {"name": tc["function"]["name"], "arguments": ""},
        }
        payloads.append(_chunk(response_id, {"tool_calls": [start]}, model=model))
        for piece in _pieces(tc["function"]["arguments"], 7):
            frag = {"index": index, "function": {"arguments": piece}}
            payloads.append(_chunk(response_id, {"tool_calls": [frag]}, model=model))
    finish = finish or ("tool_calls" if tool_calls else "stop")
    payloads.append(_chunk(response_id, {}, finish, model))
    if usage_chunk:
        last = _chunk(response_id, {}, model=model)
        payloads.append({**last, "choices": [], "usage": use or usage()})
    return sse(*payloads, done=done)


def streamed(text: str | None = None, *, linger: float = 0.0, **kwargs: Any) -> Reply:
    response_id = kwargs.get("response_id", "chatcmpl-fakes1")
    return Reply(
        events=stream_chunks(text, **kwargs),
        headers={"x-request-id": f"req_{response_id}"},
        linger=linger,
    )


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
