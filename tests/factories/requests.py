"""Request bodies as clients send them, per wire protocol; a plain string is a user turn."""

from __future__ import annotations

from typing import Any

Message = str | dict[str, Any]


def user_message(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_message(call_id: str, content: str = "sunny") -> dict[str, Any]:
    """A Chat Completions tool result answering `call_id`."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    return [user_message(m) if isinstance(m, str) else m for m in messages]


def chat_request(*messages: Message, model: str = "gpt-4o", **fields: Any) -> dict[str, Any]:
    """A Chat Completions body; with no message at all, one user turn saying "hi"."""
    return {"model": model, "messages": _messages(messages or ("hi",)), **fields}


def messages_request(
    *messages: Message, model: str = "claude-sonnet-4-6", max_tokens: int = 100, **fields: Any
) -> dict[str, Any]:
    """An Anthropic Messages body; with no message at all, one user turn saying "hi"."""
    body = {"model": model, "max_tokens": max_tokens, "messages": _messages(messages or ("hi",))}
    return {**body, **fields}
