"""A socket's two directions once both sides are open: frames go each way unchanged, each to
its side first and read after; whichever side closes first ends the socket's open responses
as its exchange decides and closes the other side. The provider's side runs in the handler's
task, the client's in a task of the requests' owner (`Deps.work`).
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import WSMsgType, web

from gateway.proxy.deps import Deps
from gateway.proxy.relay import client_left
from gateway.proxy.websocket.session import Session

log = logging.getLogger(__name__)

_SENT_ERRORS = (ConnectionResetError, aiohttp.ClientConnectionResetError)
PUMP_GRACE_SECONDS = 5.0
# Close codes a close frame may not carry (RFC 6455 section 7.4.1).
_RESERVED = frozenset({1004, 1005, 1006, 1015})


async def run(
    request: web.Request,
    deps: Deps,
    session: Session,
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
) -> web.StreamResponse:
    """Relay until either side closes; the socket's access line once both are closed."""
    pump = deps.work.task("websocket-client", _from_client(session, client, upstream), awaited=True)
    try:
        await _from_upstream(session, client, upstream)
    except asyncio.CancelledError:  # the client's connection was lost (or the server stops)
        session.end(provider_broke=False)
        await _stopped(pump, client)
        return client_left(request, client)
    await _stopped(pump, client)
    return client


async def _stopped(pump: asyncio.Task[None], client: web.WebSocketResponse) -> None:
    """The client's side ends once its socket is closed: a request it was checking then
    ends as its client left (its budget given back); one that hangs is cancelled."""
    if not client.closed:
        await client.close()
    await asyncio.wait((pump,), timeout=PUMP_GRACE_SECONDS)
    if not pump.done():
        pump.cancel()
        await asyncio.wait((pump,))


async def _from_client(
    session: Session, client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse
) -> None:
    """The client's frames to the provider; its close ends every open response as a client
    that left, and closes the provider's socket."""
    try:
        while True:
            message = await client.receive()
            if message.type is WSMsgType.TEXT:
                await session.from_client(message.data)
            elif message.type is WSMsgType.BINARY:
                await upstream.send_bytes(message.data)
            else:
                break
    except _SENT_ERRORS:
        return  # the provider's socket is gone: its side ends the session
    except Exception:
        log.exception("a client frame could not be handled; the socket is closed")
        await client.close(code=aiohttp.WSCloseCode.INTERNAL_ERROR)
    session.end(provider_broke=False)
    await upstream.close(code=_code(client.close_code))


async def _from_upstream(
    session: Session, client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse
) -> None:
    """The provider's frames to the client, each read after it is sent; the provider's close
    ends every open response as cut, and closes the client's socket with its code. A socket
    the gateway leaves (it is stopping) closes once no response is open on it."""
    while not session.leaving:
        message = await upstream.receive()
        try:
            if message.type is WSMsgType.TEXT:
                await client.send_str(message.data)
                session.from_upstream(message.data)
                continue
            if message.type is WSMsgType.BINARY:
                await client.send_bytes(message.data)
                continue
        except _SENT_ERRORS:
            session.end(provider_broke=False)
            return
        break
    if session.leaving:
        code: object = aiohttp.WSCloseCode.GOING_AWAY
    else:
        code = message.data if message.type is WSMsgType.CLOSE else upstream.close_code
    session.end(provider_broke=True)
    await client.close(code=_code(code))


def _code(code: object) -> int:
    """The close code to pass on: the other side's, if a close frame may carry it."""
    if isinstance(code, int) and 1000 <= code < 5000 and code not in _RESERVED:
        return code
    return aiohttp.WSCloseCode.OK
