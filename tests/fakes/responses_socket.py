"""The fake provider's Responses WebSocket (`GET /v1/responses` upgraded), as OpenAI's
WebSocket mode serves it: each `response.create` frame is answered with the events of the
reply the provider would stream for the same request over HTTP, one JSON text frame each,
echoing its `stream_id`. Like the real server it holds each response's input and output on
the connection, so a request may send only its new items with `previous_response_id`; a
warm-up (`generate: false`) answers an empty response whose id later requests continue.

Shapes: the installed `openai` package's `types/responses/responses_client_event.py` and
`responses_server_event.py` (`ResponseWsError`), and OpenAI's WebSocket mode guide.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from tests.fakes.provider import Received, Reply
from tests.fakes.responses import response, usage

if TYPE_CHECKING:
    from tests.fakes.provider import FakeProvider

Held = dict[str, tuple[list[Any], list[Any]]]  # response id → the input and output it holds
_ENVELOPE = ("type", "stream_id", "generate")
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def events_of(reply: Reply) -> list[dict[str, Any]]:
    """The JSON events of a streamed reply (its SSE `data:` lines), or of an error reply."""
    if reply.events is None:
        error = (reply.body or {}).get("error") if isinstance(reply.body, dict) else None
        return [{"type": "error", "status": reply.status, "error": error}]
    found = []
    for chunk in reply.events:
        for block in chunk.decode().split("\n\n"):
            data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
            if data and data != ["[DONE]"]:
                found.append(json.loads("\n".join(data)))
    return found


def _input_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value)


def _previous_not_found(previous: str) -> dict[str, Any]:
    error = {
        "type": "invalid_request_error",
        "code": "previous_response_not_found",
        "message": f"Previous response with id '{previous}' not found.",
        "param": "previous_response_id",
    }
    return {"type": "error", "status": 400, "error": error}


class FakeSocket:
    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider
        self.refuse: int | None = None  # answer upgrades with this status instead
        self.upgrades: list[dict[str, str]] = []  # each upgrade request's headers
        self.frames: list[str] = []  # every text frame received, as received
        self.sent: list[str] = []  # every text frame sent, as sent
        self.requests: list[Received] = []  # each generating request, as its whole request
        self.closed = asyncio.Event()  # a connection ended
        self._warmups = itertools.count(1)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        self.upgrades.append(dict(request.headers))
        if self.refuse is not None:
            body = {"error": {"message": "WebSockets are not served here", "type": None}}
            return web.json_response(body, status=self.refuse)
        ws = web.WebSocketResponse()
        ws.headers["x-request-id"] = "req_fake_socket"
        await ws.prepare(request)
        held: Held = {}
        lanes: dict[Any, asyncio.Lock] = {}
        answering: set[asyncio.Task[None]] = set()
        try:
            async for message in ws:
                if message.type is not WSMsgType.TEXT:
                    continue
                self.frames.append(message.data)
                event = json.loads(message.data)
                lane = event.get("stream_id") if isinstance(event, dict) else None
                # Lanes run side by side, each one's requests in order.
                task = asyncio.create_task(
                    self._in_lane(lanes.setdefault(lane, asyncio.Lock()), ws, event, held)
                )
                answering.add(task)
                task.add_done_callback(answering.discard)
        finally:
            for task in answering:
                task.cancel()
            self.closed.set()
        return ws

    async def _in_lane(
        self, lock: asyncio.Lock, ws: web.WebSocketResponse, event: Any, held: Held
    ) -> None:
        # The gateway may go away mid-answer.
        async with lock:
            with contextlib.suppress(ConnectionResetError):
                await self._answer(ws, event, held)

    async def _answer(self, ws: web.WebSocketResponse, event: Any, held: Held) -> None:
        if not isinstance(event, dict) or event.get("type") != "response.create":
            return  # `response.processed` and other notices ask for nothing
        lane = event.get("stream_id")
        body = {key: value for key, value in event.items() if key not in _ENVELOPE}
        previous = body.pop("previous_response_id", None)
        if previous is not None and previous not in held:
            await self._send(ws, _previous_not_found(previous), lane)
            return
        before = held.get(previous or "", ([], []))
        whole = [*before[0], *before[1], *_input_list(body.get("input"))]
        if event.get("generate") is False:
            await self._warm_up(ws, whole, held, lane)
            return
        received = Received(
            "POST",
            "/v1/responses",
            "",
            {},
            json.dumps({**body, "input": whole, "stream": True}).encode(),
        )
        self.requests.append(received)
        reply = self.provider.next_reply(received)
        if reply is None:
            reply = Reply(status=599, body={"error": {"message": "no reply queued"}})
        await self._stream(ws, reply, whole, held, lane)

    async def _warm_up(
        self, ws: web.WebSocketResponse, whole: list[Any], held: Held, lane: Any
    ) -> None:
        body = response([], response_id=f"resp_warm{next(self._warmups)}", use=usage(0, 0))
        held[body["id"]] = (whole, [])
        await self._send(
            ws, {"type": "response.created", "response": {**body, "status": "in_progress"}}, lane
        )
        await self._send(ws, {"type": "response.completed", "response": body}, lane)

    async def _stream(
        self, ws: web.WebSocketResponse, reply: Reply, whole: list[Any], held: Held, lane: Any
    ) -> None:
        if reply.hold is not None:
            await reply.hold.wait()
        for number, event in enumerate(events_of(reply)):
            if reply.die_after is not None and number == reply.die_after:
                await ws.close(code=1011, message=b"provider went away")
                return
            await self._send(ws, event, lane)
            if event.get("type") in _TERMINAL:
                done = event["response"]
                held[done["id"]] = (whole, list(done.get("output") or []))
            if number == 0 and reply.gate is not None:
                await reply.gate.wait()
            if reply.pause:
                await asyncio.sleep(reply.pause)
        self.provider.sent_all.set()

    async def _send(self, ws: web.WebSocketResponse, event: dict[str, Any], lane: Any) -> None:
        if lane is not None:
            event = {**event, "stream_id": lane}
        text = json.dumps(event)
        self.sent.append(text)
        await ws.send_str(text)
