"""The scripted model on Chat Completions: reads the messages, answers as OpenAI does."""

from __future__ import annotations

from typing import Any

from tests.fakes import chat
from tests.fakes.provider import Reply
from tests.fakes.script import Ids, Move, Said, estimate_tokens


def text_of(content: Any) -> str:
    """A message's text: a string, or the text of its content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def history(body: dict[str, Any]) -> list[Said]:
    said: list[Said] = []
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "user":
            said.append(Said("user", text_of(message.get("content"))))
        elif role == "assistant":
            calls = tuple(tc["id"] for tc in message.get("tool_calls") or [])
            said.append(Said("assistant", text_of(message.get("content")), calls))
        elif role == "tool":
            content = text_of(message.get("content"))
            said.append(Said("tool", content, call_id=message.get("tool_call_id")))
    return said


def declared(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or [] if t.get("type") == "function"}


def answer(body: dict[str, Any], move: Move, ids: Ids) -> Reply:
    calls = [chat.call(ids.openai_call(), c.name, c.arguments) for c in move.calls]
    content = move.text or None
    use = chat.usage(estimate_tokens(body), estimate_tokens([content, calls]))
    fields: dict[str, Any] = {
        "tool_calls": calls,
        "response_id": ids.chat_completion(),
        "use": use,
        "model": str(body.get("model", chat.MODEL)),
    }
    if not body.get("stream"):
        return chat.completion(content, **fields)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return chat.streamed(content, usage_chunk=include_usage, **fields)


def error(status: int, message: str, code: str | None = None) -> Reply:
    body = {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }
    return Reply(status=status, body=body)
