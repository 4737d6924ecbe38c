"""The wire protocols the gateway speaks: adding one is one line here."""

from __future__ import annotations

from gateway.protocols import anthropic_messages, openai_chat, openai_responses
from gateway.protocols.base import ProtocolAdapter

ADAPTERS: dict[str, ProtocolAdapter] = {
    "chat": openai_chat.ADAPTER,
    "responses": openai_responses.ADAPTER,
    "messages": anthropic_messages.ADAPTER,
}

# The path each protocol is served on.
PATHS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}
