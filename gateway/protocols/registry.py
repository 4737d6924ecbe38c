"""The wire protocols the gateway speaks: adding one is one line here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.items import Item
from gateway.opaque import Digests
from gateway.protocols import (
    openai_responses,
    openai_responses_compact,
    openai_responses_encode,
    openai_responses_follow_up,
    openai_responses_socket,
)
from gateway.protocols.anthropic import encode as anthropic_encode
from gateway.protocols.anthropic import messages as anthropic_messages
from gateway.protocols.base import CassetteEncoder, ProtocolAdapter, openai_wire
from gateway.protocols.frames import SocketAdapter
from gateway.protocols.openai_chat import completions as openai_chat
from gateway.protocols.openai_chat import encode as openai_chat_encode
from gateway.routing import Wire

ADAPTERS: dict[str, ProtocolAdapter] = {
    adapter.name: adapter
    for adapter in (openai_chat.ADAPTER, openai_responses.ADAPTER, anthropic_messages.ADAPTER)
}
# The adapter answering errors on any other path, in the format most clients read.
FALLBACK: ProtocolAdapter = openai_chat.ADAPTER

# How each protocol's recorded steps are written back to the wire (cassettes).
ENCODERS: dict[str, CassetteEncoder] = {
    "chat": openai_chat_encode.ENCODER,
    "messages": anthropic_encode.ENCODER,
    "responses": openai_responses_encode.ENCODER,
}

# Other endpoints of a protocol whose requests are its steps (the adapter's name is the
# protocol's), by the key they are served under.
ENDPOINTS: dict[str, ProtocolAdapter] = {"responses.compact": openai_responses_compact.ADAPTER}
_SERVED = {**ADAPTERS, **ENDPOINTS}

# The key of the adapter serving each path.
PATHS = {adapter.path: key for key, adapter in _SERVED.items()}
# The protocols a client may also speak over a WebSocket, by the path it upgrades.
SOCKETS: dict[str, SocketAdapter] = {
    socket.path: socket for socket in (openai_responses_socket.SOCKET,)
}

# Every other /v1/ path is forwarded as is: OpenAI-style, unless an adapter claims it.
PASSTHROUGH: Wire = openai_wire(
    "passthrough",
    tuple((path, a.wire) for a in ADAPTERS.values() for path in a.passthrough_paths),
)


def keyed(secret: bytes, *, keep_opaque: bool = False) -> dict[str, ProtocolAdapter]:
    """The adapters as an app serves them: payloads a provider wants back are recorded as
    digests under the app's install secret (`gateway.opaque`), and kept with `keep_opaque`."""
    digests = Digests(secret, keep=keep_opaque)
    return {key: adapter.keyed(digests) for key, adapter in _SERVED.items()}


def adapter_for_path(path: str) -> ProtocolAdapter:
    """The adapter whose error format a request to `path` is answered in."""
    for adapter in ADAPTERS.values():
        if path.startswith(adapter.path):
            return adapter
    return FALLBACK


def wire_of(protocol: str) -> Wire:
    """The wire a step of `protocol` was routed by (before a passthrough path's claim)."""
    adapter = ADAPTERS.get(protocol)
    return PASSTHROUGH if adapter is None else adapter.wire


# Requests about a response after its creation (a background response's polls and cancel):
# the adapter that reads their answers, and how to find the response they are about.
_FOLLOW_UPS = ((openai_responses.ADAPTER, openai_responses_follow_up.response_id),)


def follow_up(method: str, path: str) -> tuple[ProtocolAdapter, str] | None:
    """The adapter and the response id of a request about an earlier response, if it is one."""
    for adapter, response_id in _FOLLOW_UPS:
        found = response_id(method, path)
        if found is not None:
            return adapter, found
    return None


def usual_spelling(adapter: ProtocolAdapter) -> Callable[[list[Item]], list[Any]] | None:
    """How a cassette spells the adapter's history elements when no wire shape says
    otherwise (None: its steps are not rebuilt): what a shape is recorded against."""
    encoder = ENCODERS.get(adapter.name)
    return encoder.canonical if encoder is not None else None
