"""Raw-HTTP model calls for the demo agents: Chat Completions and Anthropic Messages, streamed or
not, assembled the way an SDK would, noticing a stream that ends before its protocol's end."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

TRACE_HEADER = "X-Loopwatch-Trace-Id"


@dataclass(slots=True)
class Reply:
    status: int
    trace_id: str | None
    message: dict[str, Any] = field(default_factory=dict)  # the assistant turn to echo back
    stop: str | None = None  # finish_reason / stop_reason
    error: str | None = None
    interrupted: bool = False  # the stream ended without its protocol's completion

    def tool_calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(call id, tool name, arguments) of either protocol's assistant turn."""
        calls = []
        for call in self.message.get("tool_calls") or []:
            args = json.loads(call["function"]["arguments"] or "{}")
            calls.append((call["id"], call["function"]["name"], args))
        content = self.message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                calls.append((block["id"], block["name"], block["input"]))
        return calls


async def _error(response: aiohttp.ClientResponse, trace_id: str | None) -> Reply:
    try:
        error = (await response.json()).get("error") or {}
    except (aiohttp.ContentTypeError, ValueError):
        error = {}
    message = error.get("message") or response.reason or "error"
    return Reply(response.status, trace_id, error=str(message))


async def _events(response: aiohttp.ClientResponse) -> Any:
    """`data:` payloads of an SSE stream; the literal [DONE] is passed through as a string."""
    async for line in response.content:
        text = line.decode().strip()
        if text.startswith("data:"):
            data = text[5:].strip()
            yield data if data == "[DONE]" else json.loads(data)


async def chat(
    http: aiohttp.ClientSession, base: str, body: dict[str, Any], headers: dict[str, str]
) -> Reply:
    async with http.post(f"{base}/v1/chat/completions", json=body, headers=headers) as response:
        trace_id = response.headers.get(TRACE_HEADER)
        if response.status != 200:
            return await _error(response, trace_id)
        if not body.get("stream"):
            choice = (await response.json())["choices"][0]
            return Reply(200, trace_id, choice["message"], choice["finish_reason"])
        reply = Reply(200, trace_id, interrupted=True)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        try:
            async for event in _events(response):
                if event == "[DONE]":
                    reply.interrupted = False
                    continue
                for choice in event.get("choices") or []:
                    _chat_delta(choice, text, calls)
                    reply.stop = choice.get("finish_reason") or reply.stop
        except aiohttp.ClientPayloadError:
            pass  # the connection broke: `interrupted` stays set
    reply.message = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        reply.message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return reply


def _chat_delta(choice: dict[str, Any], text: list[str], calls: dict[int, dict[str, Any]]) -> None:
    delta = choice.get("delta") or {}
    # reasoning_content is read and dropped: the demo's chat answers that reason call no
    # tool, and outside a tool loop DeepSeek ignores it (within one it must go back).
    if delta.get("content"):
        text.append(delta["content"])
    for fragment in delta.get("tool_calls") or []:
        call = calls.setdefault(
            fragment["index"],
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        call["id"] = fragment.get("id") or call["id"]
        function = fragment.get("function") or {}
        call["function"]["name"] = function.get("name") or call["function"]["name"]
        call["function"]["arguments"] += function.get("arguments") or ""


async def messages(
    http: aiohttp.ClientSession, base: str, body: dict[str, Any], headers: dict[str, str]
) -> Reply:
    headers = {"anthropic-version": "2023-06-01", **headers}
    async with http.post(f"{base}/v1/messages", json=body, headers=headers) as response:
        trace_id = response.headers.get(TRACE_HEADER)
        if response.status != 200:
            return await _error(response, trace_id)
        if not body.get("stream"):
            data = await response.json()
            turn = {"role": "assistant", "content": data["content"]}
            return Reply(200, trace_id, turn, data["stop_reason"])
        reply = Reply(200, trace_id, interrupted=True)
        blocks: dict[int, dict[str, Any]] = {}
        try:
            async for event in _events(response):
                reply.stop = _messages_event(event, blocks) or reply.stop
                reply.interrupted = event.get("type") != "message_stop"
        except aiohttp.ClientPayloadError:
            reply.interrupted = True
    reply.message = {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}
    return reply


def _messages_event(event: dict[str, Any], blocks: dict[int, dict[str, Any]]) -> str | None:
    kind = event.get("type")
    if kind == "content_block_start":
        blocks[event["index"]] = dict(event["content_block"])
    elif kind == "content_block_delta":
        block, delta = blocks[event["index"]], event["delta"]
        if delta["type"] == "text_delta":
            block["text"] += delta["text"]
        elif delta["type"] == "thinking_delta":
            block["thinking"] += delta["thinking"]
        elif delta["type"] == "signature_delta":
            block["signature"] = delta["signature"]
        elif delta["type"] == "input_json_delta":
            block["_json"] = block.get("_json", "") + delta["partial_json"]
    elif kind == "content_block_stop":
        block = blocks[event["index"]]
        if block.get("type") == "tool_use":
            block["input"] = json.loads(block.pop("_json", "") or "{}")
    elif kind == "message_delta":
        stop = (event.get("delta") or {}).get("stop_reason")
        return stop if isinstance(stop, str) else None
    return None


_MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def mcp_session(http: aiohttp.ClientSession, url: str) -> dict[str, str]:
    """Initialize an MCP session over Streamable HTTP; the headers its later requests carry."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "loopwatch-demo", "version": "1"},
        },
    }
    async with http.post(url, json=hello, headers=_MCP_HEADERS) as response:
        result = (await response.json())["result"]
        headers = {
            **_MCP_HEADERS,
            "Mcp-Session-Id": response.headers.get("Mcp-Session-Id", ""),
            "MCP-Protocol-Version": result["protocolVersion"],
        }
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, json=done, headers=headers) as response:
        await response.read()
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with http.post(url, json=listing, headers=headers) as response:
        await response.read()
    return headers


async def mcp_call(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], tool: str, args: Any
) -> str:
    """A `tools/call`; its text content, as an agent hands it to the model."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }
    async with http.post(url, json=call, headers=headers) as response:
        answer = await response.json()
    blocks = (answer.get("result") or {}).get("content") or []
    return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict))
