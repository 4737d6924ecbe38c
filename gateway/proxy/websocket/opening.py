"""`GET` with `Upgrade: websocket` on a protocol's path: the provider's socket is opened first
(the route's upstream with the client's headers and key, as for HTTP), then the client's is
accepted with what the provider answered (its headers, its subprotocol). A provider that
refuses the upgrade gets the client a 426, so it sends over HTTP instead.

The socket goes to the route for no model in particular: its requests' models are not known
when it opens. At the gateway's stop a socket closes (1001, going away) once no response is
open on it, so an idle one does not hold the stop back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial

import aiohttp
from aiohttp import web

from gateway import ids
from gateway.errors import BadRequest, GatewayError
from gateway.protocols.base import provider_request_id
from gateway.protocols.frames import SocketAdapter
from gateway.protocols.registry import FALLBACK, SOCKETS
from gateway.proxy import handler
from gateway.proxy.admitting import TRACE_HEADER, unread_refusal
from gateway.proxy.deps import Deps
from gateway.proxy.upstream import forward_headers, response_headers
from gateway.proxy.websocket import pumps
from gateway.proxy.websocket.session import Opened, Session
from gateway.routing import Target, resolve

log = logging.getLogger(__name__)

# The socket's own handshake, made anew by each side; subprotocols are offered upstream and
# the provider's choice is the client's.
_HANDSHAKE = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"})
_PROTOCOL = "sec-websocket-protocol"
# A provider's event (a whole response at its end) may be large; past this it is refused.
MAX_EVENT_BYTES = 64 * 1024 * 1024


class OpenSockets:
    """The sockets a gateway holds open, to leave them when it stops."""

    def __init__(self) -> None:
        self._open: dict[Session, aiohttp.ClientWebSocketResponse] = {}

    def add(self, session: Session, upstream: aiohttp.ClientWebSocketResponse) -> None:
        self._open[session] = upstream

    def remove(self, session: Session) -> None:
        self._open.pop(session, None)

    async def leave(self, app: web.Application) -> None:
        """The gateway stops (aiohttp's `on_shutdown`): each socket closes once idle; an
        idle one now, by closing its provider's side."""
        for session, upstream in list(self._open.items()):
            session.go_away()
            if session.leaving:
                await upstream.close(code=aiohttp.WSCloseCode.GOING_AWAY)


OPEN = web.AppKey("open_sockets", OpenSockets)


def mount(app: web.Application, deps: web.AppKey[Deps]) -> None:
    """Each protocol's WebSocket mode on its path (where a plain GET is passed through)."""
    app[OPEN] = OpenSockets()
    app.on_shutdown.append(app[OPEN].leave)
    for path, socket in SOCKETS.items():
        app.router.add_get(path, partial(_route, deps, socket))


async def _route(
    deps: web.AppKey[Deps], socket: SocketAdapter, request: web.Request
) -> web.StreamResponse:
    return await handle(request, request.app[deps], socket, request.app[OPEN])


async def handle(
    request: web.Request, deps: Deps, socket: SocketAdapter, sockets: OpenSockets
) -> web.StreamResponse:
    """The upgrade, or, for a plain GET of the same path, the passthrough it always was."""
    if not web.WebSocketResponse().can_prepare(request).ok:
        return await handler.handle_passthrough(request, deps, FALLBACK)
    adapter = socket.adapter
    header = request.headers.get(TRACE_HEADER)
    try:
        if header is not None and not ids.TRACE_ID_RE.match(header):
            raise BadRequest("invalid X-Loopwatch-Trace-Id", param=TRACE_HEADER)
        path, query = request.rel_url.raw_path, request.rel_url.raw_query_string
        target = resolve(deps.settings, adapter.wire, None, path, query)
    except GatewayError as exc:
        trace_id = unread_refusal(deps, header, exc)
        return handler.error_response(adapter, exc, {TRACE_HEADER: trace_id})
    try:
        headers = _upstream_headers(request, target.credential)
        upstream = await deps.upstream.open_socket(
            target.url, headers, _offered(request), MAX_EVENT_BYTES
        )
    except GatewayError as exc:
        log.info("no socket to the provider: %s", exc.message)
        return handler.error_response(adapter, exc)
    try:
        return await _accepted(request, deps, socket, sockets, upstream, target)
    finally:
        await upstream.close()


async def _accepted(
    request: web.Request,
    deps: Deps,
    socket: SocketAdapter,
    sockets: OpenSockets,
    upstream: aiohttp.ClientWebSocketResponse,
    target: Target,
) -> web.StreamResponse:
    answered = _answered_headers(upstream)
    chosen = upstream.protocol
    client = web.WebSocketResponse(
        protocols=(chosen,) if chosen else (), max_msg_size=deps.settings.max_body_bytes
    )
    for name, value in response_headers(answered, body_rewritten=True):
        if name.lower() not in _HANDSHAKE | {_PROTOCOL}:
            client.headers.add(name, value)
    await client.prepare(request)
    opened = Opened(request.headers, target, provider_request_id(answered))
    session = Session(deps, socket, opened, upstream=upstream.send_str, client=client.send_str)
    sockets.add(session, upstream)
    try:
        return await pumps.run(request, deps, session, client, upstream)
    finally:
        sockets.remove(session)


def _upstream_headers(request: web.Request, credential: tuple[str, str] | None) -> dict[str, str]:
    headers = forward_headers(request.headers, credential=credential)
    return {k: v for k, v in headers.items() if k.lower() not in _HANDSHAKE | {_PROTOCOL}}


def _offered(request: web.Request) -> tuple[str, ...]:
    offered = request.headers.get(_PROTOCOL, "")
    return tuple(p.strip() for p in offered.split(",") if p.strip())


def _answered_headers(upstream: aiohttp.ClientWebSocketResponse) -> Mapping[str, str]:
    """The provider's upgrade response's headers (its request id, what it tells the client
    of the session): aiohttp keeps that response on the socket, unnamed."""
    response = getattr(upstream, "_response", None)
    return response.headers if isinstance(response, aiohttp.ClientResponse) else {}
