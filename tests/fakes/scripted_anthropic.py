"""The scripted model on Anthropic Messages, with message threads as the API keeps them.

`thread: {"type": "create"}` asks the server to hold the conversation under the reply's id;
`{"type": "continue", "previous_message_id": ...}` sends only the new turn, and the server
answers from the history, system prompt and tools it holds. Each reply continues once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.fakes import anthropic
from tests.fakes.provider import Received, Reply
from tests.fakes.script import BadRequest, Ids, Move, Said, estimate_tokens

THREADS_BETA = "message-threads-2026-08-12"
CREATE_ONLY = ("system", "tools")  # a continue takes them from the thread


@dataclass
class Thread:
    messages: list[dict[str, Any]]  # the whole history up to and with the reply
    fields: dict[str, Any]  # system and tools the thread was created with
    continued: bool = False


@dataclass
class Threads:
    by_reply: dict[str, Thread] = field(default_factory=dict)


@dataclass
class Conversation:
    """What the model answers from: the whole history and the fields in force."""

    messages: list[dict[str, Any]]
    fields: dict[str, Any]
    parent: Thread | None  # the thread a continue extends
    threaded: bool


def _thread_error(status: int, message: str, code: str) -> BadRequest:
    return BadRequest(message, status=status, code=code)


def resolve(received: Received, body: dict[str, Any], threads: Threads) -> Conversation:
    fields = {k: body[k] for k in CREATE_ONLY if k in body}
    thread = body.get("thread")
    if thread is None:
        return Conversation(list(body.get("messages") or []), fields, None, threaded=False)
    if THREADS_BETA not in received.headers.get("anthropic-beta", ""):
        raise BadRequest(f"`thread` needs the anthropic-beta header {THREADS_BETA}")
    if thread.get("type") == "create":
        return Conversation(list(body.get("messages") or []), fields, None, threaded=True)
    if thread.get("type") != "continue":
        raise BadRequest(f"thread.type: unknown value {thread.get('type')!r}")
    parent = threads.by_reply.get(thread.get("previous_message_id", ""))
    if parent is None:
        raise _thread_error(404, "thread not found", "thread_not_found")
    if parent.continued:
        raise _thread_error(409, "that reply was already continued", "thread_already_continued")
    repeated = [k for k in CREATE_ONLY if k in body]
    if repeated:
        raise BadRequest(f"{repeated} cannot be set on a thread continue: the thread holds them")
    messages = [*parent.messages, *(body.get("messages") or [])]
    return Conversation(messages, dict(parent.fields), parent, threaded=True)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(content: Any) -> str:
    return "".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


def history(messages: list[dict[str, Any]]) -> list[Said]:
    said: list[Said] = []
    for message in messages:
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            calls = tuple(b["id"] for b in blocks if b.get("type") == "tool_use")
            said.append(Said("assistant", _text(blocks), calls))
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                result = _text(block.get("content"))
                said.append(Said("tool", result, call_id=block.get("tool_use_id")))
        words = _text(blocks)
        if words:
            said.append(Said("user", words))
    return said


def declared(fields: dict[str, Any]) -> set[str]:
    return {t["name"] for t in fields.get("tools") or [] if "name" in t}


def _content(body: dict[str, Any], move: Move, ids: Ids) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
        content.append(anthropic.thinking(move.thought, ids.signature()))
    if move.calls:
        content.append(anthropic.text("I'll look that up."))
        content += [anthropic.tool_use(ids.tool_use(), c.name, c.arguments) for c in move.calls]
    else:
        content.append(anthropic.text(move.text))
    return content


def answer(
    body: dict[str, Any], move: Move, ids: Ids, threads: Threads, conversation: Conversation
) -> Reply:
    content = _content(body, move, ids)
    use = anthropic.usage(estimate_tokens(conversation.messages), estimate_tokens(content))
    result = anthropic.message(content, message_id=ids.anthropic_message(), use=use)
    result["model"] = body.get("model", anthropic.MODEL)
    if conversation.threaded:
        if conversation.parent is not None:
            conversation.parent.continued = True
        reply = {"role": "assistant", "content": content}
        threads.by_reply[result["id"]] = Thread(
            [*conversation.messages, reply], conversation.fields
        )
    return anthropic.streamed(result) if body.get("stream") else anthropic.reply(result)


def error(status: int, message: str, code: str | None = None) -> Reply:
    kinds = {404: "not_found_error", 409: "conflict_error"}
    body = anthropic.error_body(kinds.get(status, "invalid_request_error"), message)
    if code is not None:
        body["error"]["details"] = {"error_code": code}
    return Reply(status=status, body=body, headers={"request-id": "req_011CError"})
