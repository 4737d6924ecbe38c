"""The demo's built-in provider: an aiohttp app that speaks Chat Completions and Anthropic
Messages, streamed or not, answering from `script.decide` instead of a model."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from gateway.demo.script import Answer, Conversation, decide, usage_numbers

CREATED = 1767225600  # a fixed timestamp keeps every body reproducible


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return " ".join(
        p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def _chat_conversation(body: dict[str, Any]) -> Conversation:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    first = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    results = tuple(_text_of(m.get("content")) for m in messages if m.get("role") == "tool")
    return Conversation(first, results, "call_")


def _messages_conversation(body: dict[str, Any]) -> Conversation:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    first = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    results = tuple(
        _text_of(block.get("content"))
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )
    return Conversation(first, results, "toolu_01")


def _sse(payload: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedProvider:
    """Deterministic: each answer depends on the request body only, except that a `flaky`
    answer breaks its stream the first time its exact request arrives, so a retry succeeds."""

    def __init__(self) -> None:
        self._broken: set[str] = set()
        self._served = 0  # numbers request ids: a retried request must get a new one
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._chat)
        self.app.router.add_post("/v1/messages", self._messages)

    def _request_id(self, prefix: str, digest: str) -> str:
        self._served += 1
        return f"{prefix}{self._served:04d}{digest[20:36]}"

    def _should_break(self, answer: Answer, digest: str) -> bool:
        if not answer.flaky or digest in self._broken:
            return False
        self._broken.add(digest)
        return True

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        conversation = _chat_conversation(body)
        answer = decide(conversation)
        digest = hashlib.sha256(raw).hexdigest()
        response_id = f"chatcmpl-demo{digest[:20]}"
        use = _chat_usage(usage_numbers(raw, answer, len(conversation.results)))
        model = str(body.get("model") or "gpt-4o-mini")
        headers = {"x-request-id": self._request_id("req_demo", digest)}
        if not body.get("stream"):
            message = _chat_message(answer)
            finish = "tool_calls" if answer.calls else "stop"
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            payload = {
                "id": response_id,
                "object": "chat.completion",
                "created": CREATED,
                "model": model,
                "choices": [choice],
                "usage": use,
            }
            return web.json_response(payload, headers=headers)
        include_usage = (body.get("stream_options") or {}).get("include_usage") is True
        events = list(_chat_events(answer, response_id, model, use if include_usage else None))
        cut = _cut_point(events) if self._should_break(answer, digest) else None
        return await _stream(request, events, headers, cut)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        conversation = _messages_conversation(body)
        answer = decide(conversation)
        if not isinstance(body.get("thinking"), dict) or body["thinking"].get("type") != "enabled":
            answer = Answer(answer.text, answer.calls, None, answer.flaky)
        digest = hashlib.sha256(raw).hexdigest()
        message_id = f"msg_01Demo{digest[:18]}"
        numbers = usage_numbers(raw, answer, len(conversation.results))
        model = str(body.get("model") or "claude-sonnet-4-5")
        headers = {"request-id": self._request_id("req_01Demo", digest)}
        if not body.get("stream"):
            payload = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": _anthropic_blocks(answer),
                "stop_reason": _anthropic_stop(answer),
                "stop_sequence": None,
                "usage": _anthropic_usage(numbers),
            }
            return web.json_response(payload, headers=headers)
        events = list(_anthropic_events(answer, message_id, model, numbers))
        cut = _cut_point(events) if self._should_break(answer, digest) else None
        return await _stream(request, events, headers, cut)


async def _stream(
    request: web.Request, events: list[bytes], headers: dict[str, str], cut: int | None
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await response.prepare(request)
    for number, event in enumerate(events):
        if number == cut:
            # A provider dying mid-answer: the connection closes without the final events.
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write(event)
    await response.write_eof()
    return response


def _cut_point(events: list[bytes]) -> int:
    """Halfway through the tool-call argument fragments: the classic broken agent stream."""
    fragments = [i for i, e in enumerate(events) if b'"arguments"' in e or b"partial_json" in e]
    return fragments[len(fragments) // 2] if fragments else len(events) // 2


def _chat_usage(n: dict[str, int]) -> dict[str, Any]:
    return {
        "prompt_tokens": n["prompt"],
        "completion_tokens": n["completion"],
        "total_tokens": n["prompt"] + n["completion"],
        "prompt_tokens_details": {"cached_tokens": n["cached"], "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": n["reasoning"], "audio_tokens": 0},
    }


def _chat_message(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None, "refusal": None}
    if answer.calls:
        message["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json},
            }
            for c in answer.calls
        ]
    return message


def _chat_events(
    answer: Answer, response_id: str, model: str, use: dict[str, Any] | None
) -> Iterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse(
            {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [choice],
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(answer.thinking or "", 24):  # DeepSeek-style reasoning_content
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(answer.text, 12):
        yield chunk({"content": piece})
    for index, call in enumerate(answer.calls):
        start = {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [start]})
        for piece in _pieces(call.arguments_json, 9):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if answer.calls else "stop")
    if use is not None:
        yield _sse(
            {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [],
                "usage": use,
            }
        )
    yield b"data: [DONE]\n\n"


def _signature(thinking: str) -> str:
    # Opaque like the real one; derived from a hash so it never contains the thinking text.
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest() * 2).decode()


def _anthropic_blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.thinking:
        blocks.append(
            {
                "type": "thinking",
                "thinking": answer.thinking,
                "signature": _signature(answer.thinking),
            }
        )
    if answer.text:
        blocks.append({"type": "text", "text": answer.text})
    blocks.extend(
        {"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.arguments}
        for c in answer.calls
    )
    return blocks


def _anthropic_stop(answer: Answer) -> str:
    return "tool_use" if answer.calls else "end_turn"


def _anthropic_usage(n: dict[str, int]) -> dict[str, Any]:
    fresh = n["prompt"] - n["cached"]
    use: dict[str, Any] = {
        "input_tokens": fresh - min(fresh, 24),
        "cache_creation_input_tokens": min(fresh, 24),
        "cache_read_input_tokens": n["cached"],
        "output_tokens": n["completion"],
    }
    if n["reasoning"]:
        use["output_tokens_details"] = {"thinking_tokens": n["reasoning"]}
    return use


def _block_delta(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block["type"]
    if kind == "thinking":
        for piece in _pieces(block["thinking"], 24):
            yield {"type": "thinking_delta", "thinking": piece}
        yield {"type": "signature_delta", "signature": block["signature"]}
    elif kind == "text":
        for piece in _pieces(block["text"], 12):
            yield {"type": "text_delta", "text": piece}
    else:
        for piece in _pieces(json.dumps(block["input"], ensure_ascii=False), 9):
            yield {"type": "input_json_delta", "partial_json": piece}


def _anthropic_events(
    answer: Answer, message_id: str, model: str, n: dict[str, int]
) -> Iterator[bytes]:
    use = _anthropic_usage(n)
    start: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**use, "output_tokens": 1},
    }
    yield _sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(_anthropic_blocks(answer)):
        empty = {"thinking": "", "signature": ""} if block["type"] == "thinking" else {}
        opening = {**block, **empty, **({"text": ""} if block["type"] == "text" else {})}
        if block["type"] == "tool_use":
            opening["input"] = {}
        yield _sse(
            {"type": "content_block_start", "index": index, "content_block": opening},
            "content_block_start",
        )
        for delta in _block_delta(index, block):
            yield _sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    delta = {"stop_reason": _anthropic_stop(answer), "stop_sequence": None}
    yield _sse({"type": "message_delta", "delta": delta, "usage": use}, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")
