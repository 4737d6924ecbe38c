"""The replay server: the gateway's model endpoints answered from a cassette by the player;
in live mode a diverged request and every later one go to the configured upstream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from gateway.config import Settings
from gateway.errors import BadRequest, GatewayError, ReplayDiverged, UpstreamError
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.registry import ADAPTERS, ENCODERS, adapter_for_path
from gateway.replay.answers import body_or_events
from gateway.replay.player import Answer, Diverged, Player
from gateway.replay.tape import Step
from gateway.routing import resolve

PLAYER = web.AppKey("player", Player)
SETTINGS = web.AppKey("settings", Settings)
CLIENT = web.AppKey("client", aiohttp.ClientSession)

# Headers of one hop, never copied to the next.
_HOP = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade"}
)


def create_app(steps: list[Step], settings: Settings, *, live: bool) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes + 1)
    app[PLAYER] = Player(steps, live=live)
    app[SETTINGS] = settings
    app.cleanup_ctx.append(_client)
    for adapter in ADAPTERS.values():
        app.router.add_post(adapter.path, _handle)
    return app


async def _client(app: web.Application) -> AsyncIterator[None]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        app[CLIENT] = session
        yield


async def _handle(request: web.Request) -> web.StreamResponse:
    adapter = adapter_for_path(request.path)
    raw = await request.read()
    try:
        parsed = adapter.parse_request(_json(raw))
        played = request.app[PLAYER].play(adapter, request.path, parsed.items)
        if isinstance(played, Answer):
            return await _answer(request, adapter, played.step, parsed.stream)
        if isinstance(played, Diverged) and not played.live:
            found = played.divergence
            raise ReplayDiverged(found.summary(), diff=found.detail())
        return await _forward(request, adapter, parsed.model, raw)
    except GatewayError as exc:
        return web.json_response(adapter.error_body(exc), status=exc.status, headers=exc.headers)


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BadRequest("The request body is not valid JSON.") from exc


async def _answer(
    request: web.Request, adapter: ProtocolAdapter, step: Step, stream: bool
) -> web.StreamResponse:
    response = step.response
    status = response.get("status") or 200
    if status >= 400 or step.protocol not in ENCODERS:
        return web.json_response(response.get("body"), status=status)
    body, events = body_or_events(response, adapter, ENCODERS[step.protocol], stream)
    if events is None:
        return web.json_response(body, status=status)
    out = web.StreamResponse(status=status, headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    for event in events:
        named = f"event: {event['event']}\n" if event.get("event") else ""
        await out.write(f"{named}data: {event['data']}\n\n".encode())
    await out.write_eof()
    return out


async def _forward(
    request: web.Request, adapter: ProtocolAdapter, model: str | None, raw: bytes
) -> web.StreamResponse:
    target = resolve(request.app[SETTINGS], adapter.wire, model, request.path, request.query_string)
    # The body was read decoded: it goes on without its content coding.
    drop = _HOP | {"content-encoding"}
    headers = {k: v for k, v in request.headers.items() if k.lower() not in drop}
    if target.credential is not None:
        name, value = target.credential
        headers = {k: v for k, v in headers.items() if k.lower() != name.lower()} | {name: value}
    session = request.app[CLIENT]
    out: web.StreamResponse | None = None
    try:
        async with session.post(target.url, data=raw, headers=headers) as upstream:
            kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            out = web.StreamResponse(status=upstream.status, headers=kept)
            await out.prepare(request)
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
    except aiohttp.ClientError as exc:
        if out is None:
            raise UpstreamError(f"cannot reach the upstream for a live replay: {exc}") from exc
        return out  # the answer had begun: the client sees it cut short
    await out.write_eof()
    return out
