"""A fake model provider: a real aiohttp server replaying scripted replies over real HTTP/SSE.

Tests queue replies; each request takes the next one, or, with none queued, the reply of the
`responder` (a scripted model) if one is set. Every request is kept (headers and body) so a
test can assert what reached the provider — and what did not.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON body of a non-streamed reply
    events: list[bytes] | None = None  # raw SSE bytes, sent one element per write
    headers: dict[str, str] = field(default_factory=dict)
    pause: float = 0.0  # seconds between events
    gate: asyncio.Event | None = None  # wait for it after the first event
    die_after: int | None = None  # drop the connection after this many events
    content_type: str = "text/event-stream"
    # Compress the reply (a JSON body, or each event with a sync flush), whatever the request's
    # Accept-Encoding said: as OpenAI does for clients that accept it, and some providers always.
    gzip: bool = False
    raw: bytes | None = None  # a non-streamed body sent exactly as given (with `headers`)
    delay: float = 0.0  # seconds before the response starts
    hold: asyncio.Event | None = None  # no response at all until it is set (a slow model)
    linger: float = 0.0  # seconds between the last event and the end of the body


@dataclass
class Received:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    raw_target: str = ""  # path and query exactly as they arrived, still percent-encoded

    def json(self) -> Any:
        return json.loads(self.body)


class FakeProvider:
    def __init__(self) -> None:
        self.replies: deque[Reply | Callable[[Received], Reply]] = deque()
        self.received: list[Received] = []
        self.responder: Callable[[Received], Reply] | None = None
        self.sent_all = asyncio.Event()  # the last event of a streamed reply was written
        self.disconnected = asyncio.Event()  # a client went away mid-stream or while held
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        # Imported here: the socket side builds on this module's replies.
        from tests.fakes.responses_socket import FakeSocket

        self.socket = FakeSocket(self)  # the Responses WebSocket (GET /v1/responses upgraded)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)

    def queue(self, *replies: Reply | Callable[[Received], Reply]) -> None:
        self.replies.extend(replies)

    def next_reply(self, received: Received) -> Reply | None:
        """The next queued reply, else the responder's; None when there is neither."""
        if self.replies:
            reply = self.replies.popleft()
        elif self.responder is not None:
            reply = self.responder
        else:
            return None
        return reply(received) if callable(reply) else reply

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self.socket.serve(request)
        received = Received(
            request.method,
            request.path,
            request.query_string,
            dict(request.headers),
            await request.read(),
            request.raw_path,
        )
        self.received.append(received)
        reply = self.next_reply(received)
        if reply is None:
            return web.json_response({"error": {"message": "no reply queued"}}, status=599)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hold is not None:
            try:
                await reply.hold.wait()
            except asyncio.CancelledError:  # the gateway dropped the request
                self.disconnected.set()
                raise
        if reply.raw is not None:
            headers = {**_default_request_id(reply, "req_fake"), **reply.headers}
            return web.Response(body=reply.raw, status=reply.status, headers=headers)
        if reply.events is None:
            headers = {**_default_request_id(reply, "req_fake"), **reply.headers}
            if reply.gzip:
                headers["Content-Encoding"] = "gzip"
                body = gzip.compress(json.dumps(reply.body).encode())
                return web.Response(
                    body=body, status=reply.status, headers=headers, content_type="application/json"
                )
            return web.json_response(reply.body, status=reply.status, headers=headers)
        return await self._stream(request, reply)

    async def _stream(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        response = web.StreamResponse(status=reply.status)
        response.content_type = reply.content_type
        response.headers.update({**_default_request_id(reply, "req_fake_stream"), **reply.headers})
        packer = zlib.compressobj(wbits=31) if reply.gzip else None  # 31: gzip framing
        if packer is not None:
            response.headers["Content-Encoding"] = "gzip"
        await response.prepare(request)
        try:
            for number, event in enumerate(reply.events or []):
                if reply.die_after is not None and number == reply.die_after:
                    assert request.transport is not None
                    request.transport.close()
                    return response
                if packer is not None:
                    event = packer.compress(event) + packer.flush(zlib.Z_SYNC_FLUSH)
                await response.write(event)
                if number == 0 and reply.gate is not None:
                    await reply.gate.wait()
                if reply.pause:
                    await asyncio.sleep(reply.pause)
            if packer is not None:
                await response.write(packer.flush())
            self.sent_all.set()
            if reply.linger:
                await asyncio.sleep(reply.linger)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        return response


def _default_request_id(reply: Reply, value: str) -> dict[str, str]:
    """OpenAI's x-request-id, unless the reply has Anthropic's own request-id header."""
    named = {name.lower() for name in reply.headers}
    return {} if "request-id" in named else {"x-request-id": value}


def sse(*payloads: Any, done: bool = True) -> list[bytes]:
    """SSE `data:` events for JSON payloads, then `[DONE]` (Chat Completions framing)."""
    events = [f"data: {json.dumps(p)}\n\n".encode() for p in payloads]
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


def named_sse(*payloads: dict[str, Any]) -> list[bytes]:
    """SSE events named by each payload's `type` (Responses and Anthropic framing)."""
    return [f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads]
