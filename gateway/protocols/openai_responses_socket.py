"""OpenAI Responses over a WebSocket (`GET /v1/responses` upgraded): the client's
`response.create` frames carry the fields of a `POST /v1/responses` body, the server's
frames the stream's events, one a frame, each echoing its request's `stream_id` lane.

Shapes: the installed `openai` package's `types/responses/responses_client_event.py`
(`ResponseCreate`, with `generate`, `stream_id`, `prompt_cache_options.prewarm`) and
`responses_server_event.py` (`ResponseWsError`: `status` and the `error` object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway import jsoncodec
from gateway.errors import GatewayError
from gateway.protocols.base import ProtocolAdapter, openai_error_body
from gateway.protocols.frames import ClientFrame, ServerFrame, SocketAdapter
from gateway.protocols.json_values import as_dict, as_int, as_str
from gateway.protocols.openai_responses import ADAPTER
from gateway.protocols.openai_responses_events import ResponsesEventDecoder

CREATE = "response.create"
# The frame's own fields, not its request's: what it is and the lane it runs on.
_ENVELOPE = ("type", "stream_id")
# The events that end a response: its terminal event, or an error in its place.
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_CONTINUES = "previous_response_id"


def _object(text: str, *, request: bool) -> dict[str, Any] | None:
    """A frame's JSON object; a request's read as strictly as an HTTP body (no lone
    surrogate: no record could hold it), an event as the stream's events are."""
    try:
        data = jsoncodec.loads_unicode(text.encode()) if request else jsoncodec.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _lane(data: dict[str, Any]) -> str | None:
    return as_str(data.get("stream_id"))


def _warmup(data: dict[str, Any]) -> bool:
    """`generate: false`, or a prompt-cache prewarm (which overrides `generate`)."""
    prewarm = as_dict(data.get("prompt_cache_options")).get("prewarm") is True
    return data.get("generate") is False or prewarm


def _input_list(value: Any) -> list[Any]:
    """An `input` as a list of items: a string is one user message."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else [value]


class OpenAIResponsesSocket:
    adapter: ProtocolAdapter = ADAPTER
    path: str = ADAPTER.path

    def client_frame(self, text: str) -> ClientFrame | None:
        data = _object(text, request=True)
        if data is None or data.get("type") != CREATE:
            return None
        body = {key: value for key, value in data.items() if key not in _ENVELOPE}
        continues = as_str(data.get(_CONTINUES))
        return ClientFrame(data, body, _lane(data), _warmup(data), continues)

    def server_frame(self, text: str) -> ServerFrame | None:
        data = _object(text, request=False)
        if data is None:
            return None
        kind = as_str(data.get("type"))
        status = None
        if kind == "error":  # some servers name it `status_code`
            status = as_int(data.get("status")) or as_int(data.get("status_code"))
        return ServerFrame(data, _lane(data), kind in _FINAL, status)

    def new_frame_decoder(self) -> ResponsesEventDecoder:
        return ResponsesEventDecoder()

    def encode(self, frame: ClientFrame, body: dict[str, Any]) -> str:
        envelope = {key: frame.data[key] for key in _ENVELOPE if key in frame.data}
        return jsoncodec.dumps_text({**envelope, **body})

    def after_warmup(self, warmup: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        # The provider holds the warm-up's input (and what it continued) under its id.
        merged = {
            **body,
            "input": _input_list(warmup.get("input")) + _input_list(body.get("input")),
        }
        merged.pop(_CONTINUES, None)
        if warmup.get(_CONTINUES) is not None:
            merged[_CONTINUES] = warmup[_CONTINUES]
        return merged

    def error_frame(self, error: GatewayError, lane: str | None, headers: Mapping[str, str]) -> str:
        detail = {**openai_error_body(error)["error"], "headers": dict(headers)}
        event: dict[str, Any] = {"type": "error", "status": error.status, "error": detail}
        if lane is not None:
            event["stream_id"] = lane
        return jsoncodec.dumps_text(event)


# Typed here: compiling the package with mypyc needs it before registry.py infers it.
SOCKET: OpenAIResponsesSocket = OpenAIResponsesSocket()

if TYPE_CHECKING:
    # mypy proves here that the adapter satisfies the interface; nothing to do at run time.
    _conforms: SocketAdapter = SOCKET
