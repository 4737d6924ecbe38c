"""A wire protocol's WebSocket mode: the interface of its socket adapter and what frames are
read into. Each text frame is one JSON message: a client's request, or one of the events the
protocol streams over HTTP. Only the adapter reads a frame's fields; the proxy reads these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.errors import GatewayError
from gateway.protocols.base import ProtocolAdapter
from gateway.stream.deltas import Delta


@dataclass(frozen=True, slots=True)
class ClientFrame:
    """A client's frame that asks for a response (every other frame passes unread)."""

    data: dict[str, Any]  # the frame as sent
    body: dict[str, Any]  # its request, as the body of the same request over HTTP
    lane: str | None  # the lane of the socket its events come back on (None: the default)
    warmup: bool  # it prepares the provider's state and generates nothing
    continues: str | None  # the response it continues on the provider's side


@dataclass(frozen=True, slots=True)
class ServerFrame:
    """One event of a response, as the server sent it."""

    data: dict[str, Any]
    lane: str | None
    final: bool  # the last event of its response
    status: int | None = None  # an error event's HTTP status: the request was refused


class FrameDecoder(Protocol):
    """Per-response decoder state: one event, already parsed, to deltas."""

    def decode_data(self, data: dict[str, Any]) -> list[Delta]: ...


class SocketAdapter(Protocol):
    adapter: ProtocolAdapter  # the protocol it speaks: requests, errors, routing
    path: str  # the endpoint a client upgrades

    def client_frame(self, text: str) -> ClientFrame | None:
        """The request a text frame asks for; None for any other frame (or one that is not
        JSON), which passes unread: the provider judges it."""
        ...

    def server_frame(self, text: str) -> ServerFrame | None:
        """The event a text frame carries; None for one that is not a JSON object."""
        ...

    def new_frame_decoder(self) -> FrameDecoder: ...

    def encode(self, frame: ClientFrame, body: dict[str, Any]) -> str:
        """The frame to send for `frame` with its request rewritten to `body`."""
        ...

    def after_warmup(self, warmup: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """The whole request `body` stands for when it continues the response a warm-up
        `warmup` prepared: the warm-up's input, then its own."""
        ...

    def error_frame(self, error: GatewayError, lane: str | None, headers: Mapping[str, str]) -> str:
        """Our error as the protocol's error event (on the lane of the request refused)."""
        ...
