"""Builders of Anthropic Messages payloads, shaped like real answers (bodies and event streams)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.provider import Reply, named_sse

MODEL = "claude-sonnet-4-6"
SIGNATURE = "EroCCmUIDhgCKkC+NWw0dWjXDUtFhxyU7T1jL1I74woU7bJADq7xTdoI1tp+nO7qMqierdttTR4TOf3q7J11"


def usage(
    input_tokens: int = 20,
    output_tokens: int = 10,
    cache_read: int = 0,
    cache_creation: int = 0,
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_creation,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str, signature: str = SIGNATURE) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


# Blocks of tools the provider runs itself. Shapes: anthropic.types.ServerToolUseBlock,
# WebSearchToolResultBlock / WebSearchResultBlock, CodeExecutionToolResultBlock /
# CodeExecutionResultBlock, ToolUseBlock.caller (ServerToolCaller), and the beta MCP
# connector's BetaMCPToolUseBlock / BetaMCPToolResultBlock (anthropic 2.17).


def server_tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "server_tool_use", "id": call_id, "name": name, "input": arguments}


def web_search_result(call_id: str, *pages: tuple[str, str]) -> dict[str, Any]:
    return {
        "type": "web_search_tool_result",
        "tool_use_id": call_id,
        "content": [
            {
                "type": "web_search_result",
                "title": title,
                "url": url,
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3",
                "page_age": "April 30, 2026",
            }
            for title, url in pages
        ],
    }


def web_search_error(call_id: str, code: str = "max_uses_exceeded") -> dict[str, Any]:
    """A search that failed: anthropic.types.WebSearchToolResultErrorObject as its content."""
    return {
        "type": "web_search_tool_result",
        "tool_use_id": call_id,
        "content": {"type": "web_search_tool_result_error", "error_code": code},
    }


def code_execution_result(call_id: str, stdout: str, return_code: int = 0) -> dict[str, Any]:
    return {
        "type": "code_execution_tool_result",
        "tool_use_id": call_id,
        "content": {
            "type": "code_execution_result",
            "stdout": stdout,
            "stderr": "",
            "return_code": return_code,
            "content": [],
        },
    }


def called_by(block: dict[str, Any], server_call_id: str) -> dict[str, Any]:
    """A client tool_use made by provider-run code (programmatic tool calling)."""
    return {**block, "caller": {"type": "code_execution_20250825", "tool_id": server_call_id}}


def mcp_tool_use(call_id: str, name: str, server: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "mcp_tool_use",
        "id": call_id,
        "name": name,
        "server_name": server,
        "input": arguments,
    }


def mcp_tool_result(call_id: str, value: str, *, is_error: bool = False) -> dict[str, Any]:
    return {
        "type": "mcp_tool_result",
        "tool_use_id": call_id,
        "is_error": is_error,
        "content": [{"type": "text", "text": value}],
    }


def message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    message_id: str = "msg_01KPaKTJSqAKoZri7Ujrny58",
    use: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": use if use is not None else usage(),
    }


def _headers(body: dict[str, Any]) -> dict[str, str]:
    return {"request-id": "req_" + str(body.get("id", "x")).removeprefix("msg_")}


def reply(
    body: dict[str, Any], *, status: int = 200, headers: dict[str, str] | None = None
) -> Reply:
    return Reply(status=status, body=body, headers={**_headers(body), **(headers or {})})


def _pieces(value: str, size: int = 7) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)]


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        # The input streams as JSON fragments after an empty start, for every kind of call.
        start = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": ""}]
        deltas += [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments)]
    else:
        start, deltas = block, []
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def stream_events(
    body: dict[str, Any], *, error: dict[str, Any] | None = None, blocks_before_error: int = 1
) -> list[bytes]:
    """message_start, a ping, each block, message_delta, message_stop (or an error mid-stream)."""
    use = body["usage"]
    # The iterations are known at the stream's end: only the last message_delta has them.
    start_usage = {**use, "output_tokens": 1}
    start_usage.pop("iterations", None)
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(body["content"]):
        if error is not None and index == blocks_before_error:
            events.append({"type": "error", "error": error})
            return named_sse(*events)
        events += _block_events(index, block)
    final_usage = {k: v for k, v in use.items() if k != "cache_creation"}
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    if body.get("stop_details") is not None:  # a refusal's (RawMessageDeltaEvent.Delta)
        delta["stop_details"] = body["stop_details"]
    events += [
        {
            "type": "message_delta",
            "delta": delta,
            "usage": final_usage,
        },
        {"type": "message_stop"},
    ]
    return named_sse(*events)


def streamed(body: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(events=stream_events(body, **kwargs), headers=_headers(body))


def error_body(kind: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": text}}
