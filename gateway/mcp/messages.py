"""Reading JSON-RPC messages of MCP: requests from a POST body, responses from a JSON body or
an SSE stream fed in chunks split anywhere. Sans-IO; never raises on what it cannot read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway import jsoncodec
from gateway.stream.sse import SSEDecoder

# A response body observed beyond this is no longer parsed (the bytes still all pass).
MAX_OBSERVED_BYTES = 8 * 1024 * 1024
# Names the `loopwatch mcp-stdio` process whose lines a report carries (one stdio session).
BRIDGE_HEADER = "X-Loopwatch-Bridge"


@dataclass(frozen=True, slots=True)
class McpRequest:
    """One JSON-RPC request or notification of a POST (a batch gives several)."""

    method: str
    rpc_id: Any = None  # None: a notification
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def tool(self) -> str | None:
        name = self.params.get("name")
        return name if isinstance(name, str) else None

    @property
    def arguments(self) -> Any:
        return self.params.get("arguments", {})

    @property
    def expects_answer(self) -> bool:
        return self.rpc_id is not None


def parse_error(body: bytes) -> str | None:
    """Why a body is no JSON text at all (not UTF-8, a lone surrogate, not JSON), or None.
    The gateway answers such a POST itself: no server could read it either, and what the
    gateway cannot read it cannot judge."""
    try:
        jsoncodec.loads_unicode(body)
    except ValueError as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply"
    return None


def read_requests(body: bytes) -> list[McpRequest]:
    """The requests of a POST body; [] when it holds none we can read (it passes anyway)."""
    try:
        parsed = jsoncodec.loads_unicode(body)
    except (ValueError, RecursionError):
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    out = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            continue
        params = message.get("params")
        out.append(
            McpRequest(
                message["method"], message.get("id"), params if isinstance(params, dict) else {}
            )
        )
    return out


def id_key(rpc_id: Any) -> str:
    """A request id as a dictionary key: 1 and "1" are different ids."""
    return jsoncodec.dumps_text(rpc_id)


class ResponseReader:
    """Feed a response's body; get the JSON-RPC messages it carries as they complete."""

    def __init__(self, content_type: str | None) -> None:
        kind = (content_type or "").split(";")[0].strip().lower()
        # Data-less events too: a server's priming event is one, and its id matters.
        self._sse = SSEDecoder(dispatch_empty=True) if kind == "text/event-stream" else None
        self._json = kind == "application/json"
        self._body = bytearray()
        self._seen = 0
        self.resumable = False  # an event had an id: the client may resume the stream

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._seen += len(chunk)
        if self._seen > MAX_OBSERVED_BYTES:
            self._sse, self._json = None, False
            self._body.clear()
            return []
        if self._sse is not None:
            events = self._sse.decode(chunk)
            self.resumable = self.resumable or any(event.id for event in events)
            return [m for event in events for m in _messages(event.data)]
        if self._json:
            self._body += chunk
        return []

    def end(self) -> list[dict[str, Any]]:
        if self._sse is not None:
            return [m for event in self._sse.flush() for m in _messages(event.data)]
        if self._json and self._body:
            return _messages(bytes(self._body))
        return []


def _messages(data: str | bytes) -> list[dict[str, Any]]:
    if not data:
        return []
    try:
        parsed = jsoncodec.loads(data)
    except (ValueError, RecursionError):
        return []
    found = parsed if isinstance(parsed, list) else [parsed]
    return [m for m in found if isinstance(m, dict)]


def is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)
