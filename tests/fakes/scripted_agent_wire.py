"""The agent model's three wire protocols: what a request declares and last received, and the
reply to it in the protocol's own shapes (Chat Completions, Responses, Anthropic Messages)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes import anthropic, chat, responses
from tests.fakes.provider import Reply
from tests.fakes.script import Ids, estimate_tokens
from tests.fakes.scripted import models_reply
from tests.fakes.scripted_chat import text_of


@dataclass(frozen=True)
class Tool:
    name: str
    schema: dict[str, Any] | None  # JSON schema of the arguments; None for a custom tool
    custom: bool = False  # Responses free-form tool: raw text input
    namespace: str | None = None
    description: str = ""


@dataclass(frozen=True)
class ToolCall:
    tool: Tool
    arguments: dict[str, Any] | str

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Answer:
    call: ToolCall | None = None
    text: str = ""
    thought: str = ""


@dataclass(frozen=True)
class Conversation:
    tools: list[Tool]
    result: str | None  # the tool output the request ends with, if it does
    task: str = ""  # the text of the first user turn: what the run was asked to do
    latest: str = ""  # the text of the last turn when it is a user's (a background task's news)


@dataclass(frozen=True)
class Protocol:
    name: str
    read: Callable[[dict[str, Any]], Conversation]
    answer: Callable[[dict[str, Any], Answer, Ids], Reply]


def _first_user(messages: list[Any]) -> str:
    """The text of the first user message (the same shape in the three protocols)."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


# Chat Completions


def _chat_read(body: dict[str, Any]) -> Conversation:
    tools = [
        Tool(t["function"]["name"], t["function"].get("parameters") or {})
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    result = text_of(last.get("content")) if last.get("role") == "tool" else None
    latest = text_of(last.get("content")) if last.get("role") == "user" else ""
    return Conversation(tools, result, _first_user(messages), latest)


def _chat_answer(body: dict[str, Any], move: Answer, ids: Ids) -> Reply:
    calls = [chat.call(ids.openai_call(), move.call.name, move.call.text)] if move.call else []
    content = move.text or None
    fields: dict[str, Any] = {
        "tool_calls": calls,
        "response_id": ids.chat_completion(),
        "use": chat.usage(estimate_tokens(body), estimate_tokens([content, calls])),
        "model": str(body.get("model", chat.MODEL)),
    }
    if not body.get("stream"):
        extra = {"reasoning_content": move.thought} if move.thought else None
        return chat.completion(content, extra_message=extra, **fields)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return chat.streamed(
        content, reasoning=move.thought or None, usage_chunk=include_usage, **fields
    )


# Anthropic Messages


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _messages_read(body: dict[str, Any]) -> Conversation:
    tools = [
        Tool(t["name"], t.get("input_schema") or {})
        for t in body.get("tools") or []
        if "name" in t and "input_schema" in t
    ]
    messages = body.get("messages") or []
    # Claude Code 2.1 may end a request with a `system` message after the tool results (the
    # agent types it offers): the turn that counts is the last user or assistant one.
    turns = [m for m in messages if isinstance(m, dict) and m.get("role") != "system"]
    last = turns[-1] if turns else {}
    results = [b for b in _blocks(last.get("content")) if b.get("type") == "tool_result"]
    result = None
    if last.get("role") == "user" and results:
        result = "\n".join(text_of(b.get("content")) for b in results)
    latest = text_of(last.get("content")) if last.get("role") == "user" else ""
    return Conversation(tools, result, _first_user(messages), latest)


def _messages_answer(body: dict[str, Any], move: Answer, ids: Ids) -> Reply:
    content: list[dict[str, Any]] = []
    thinking = body.get("thinking") or {}
    if thinking.get("type") in ("enabled", "adaptive") and move.thought:
        # `display: omitted` asks for the signature alone, as Claude Code does by default.
        shown = "" if thinking.get("display") == "omitted" else move.thought
        content.append(anthropic.thinking(shown, ids.signature()))
    if move.call is not None:
        content.append(anthropic.text("Running the command."))
        arguments = move.call.arguments
        assert isinstance(arguments, dict)
        content.append(anthropic.tool_use(ids.tool_use(), move.call.name, arguments))
    else:
        content.append(anthropic.text(move.text))
    use = anthropic.usage(estimate_tokens(body.get("messages")), estimate_tokens(content))
    result = anthropic.message(content, message_id=ids.anthropic_message(), use=use)
    result["model"] = body.get("model", anthropic.MODEL)
    return anthropic.streamed(result) if body.get("stream") else anthropic.reply(result)


# Responses


def _responses_tools(entries: list[Any], namespace: str | None = None) -> list[Tool]:
    tools: list[Tool] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "function":
            tools.append(Tool(entry["name"], entry.get("parameters") or {}, namespace=namespace))
        elif kind == "custom":
            about = str(entry.get("description") or "")
            tools.append(Tool(entry["name"], None, True, namespace, about))
        elif kind == "local_shell":
            tools.append(Tool("local_shell", {}, namespace=namespace))
        elif isinstance(entry.get("tools"), list):  # a namespace or other container
            tools += _responses_tools(entry["tools"], entry.get("name") or namespace)
    return tools


def _responses_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    given = body.get("input")
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    return [i for i in given or [] if isinstance(i, dict)]


def _responses_read(body: dict[str, Any]) -> Conversation:
    items = _responses_items(body)
    tools = _responses_tools(body.get("tools") or [])
    for item in items:
        if isinstance(item.get("tools"), list):  # tools declared inside the input
            tools += _responses_tools(item["tools"])
    last = items[-1] if items else {}
    result = None
    if str(last.get("type", "")).endswith("_call_output"):
        output = last.get("output")
        result = output if isinstance(output, str) else text_of(output)
    messages = [i for i in items if i.get("type", "message") == "message"]
    return Conversation(tools, result, _first_user(messages))


def _responses_call(call: ToolCall, ids: Ids) -> dict[str, Any]:
    call_id = ids.openai_call()
    if call.tool.custom:
        item = {
            "id": ids.item("ctc"),
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": call_id,
            "name": call.name,
            "input": call.text,
        }
    else:
        item = responses.function_call(call_id, call.name, call.text)
    if call.tool.namespace is not None:
        item["namespace"] = call.tool.namespace
    return item


def _responses_answer(body: dict[str, Any], move: Answer, ids: Ids) -> Reply:
    output: list[dict[str, Any]] = []
    if move.thought:
        summary = [move.thought] if (body.get("reasoning") or {}).get("summary") else []
        encrypted = None
        if "reasoning.encrypted_content" in (body.get("include") or []):
            encrypted = "gAAAAB" + base64.b64encode(ids.signature().encode()).decode()
        output.append(responses.reasoning(summary, encrypted=encrypted, item_id=ids.item("rs")))
    if move.call is not None:
        output.append(_responses_call(move.call, ids))
    if move.text:
        output.append(responses.message(move.text, item_id=ids.item("msg")))
    thinking = sum(estimate_tokens(i) for i in output if i["type"] == "reasoning")
    use = responses.usage(
        estimate_tokens(body.get("input")), estimate_tokens(output) + thinking, reasoning=thinking
    )
    result = responses.response(output, response_id=ids.response(), use=use)
    result["store"] = body.get("store", True) is not False
    result["model"] = str(body.get("model", responses.MODEL))
    result["tools"] = body.get("tools") or []
    return responses.streamed(result) if body.get("stream") else responses.reply(result)


PROTOCOLS = {
    "/v1/chat/completions": Protocol("chat", _chat_read, _chat_answer),
    "/v1/responses": Protocol("responses", _responses_read, _responses_answer),
    "/v1/messages": Protocol("messages", _messages_read, _messages_answer),
}


def models(path: str, *, anthropic: bool) -> Reply:
    """The model list (or one model) with the names these clients ask for."""
    names = ["gpt-5.5", "gpt-4.1", "qwen3-coder-plus", "claude-sonnet-4-6"]
    return models_reply(path, anthropic, names)


def error(path: str, status: int, message: str) -> Reply:
    if path.startswith("/v1/messages"):
        body = anthropic.error_body("invalid_request_error", message)
        return Reply(status=status, body=body, headers={"request-id": "req_011CError"})
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None}}
    return Reply(status=status, body=body)
