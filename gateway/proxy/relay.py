"""The relay: a short loop that feeds the exchange the provider's response and executes the
commands it returns. It owns the upstream response and releases it (STYLE rule 19).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp import web

from gateway.exchange.machine import (
    AbortClient,
    CloseUpstream,
    Command,
    EndResponse,
    Exchange,
    Finished,
    Forward,
    Outcome,
    Settle,
)
from gateway.proxy.upstream import response_headers

log = logging.getLogger(__name__)

_CLIENT_GONE = (asyncio.CancelledError, ConnectionResetError, aiohttp.ClientConnectionResetError)
# The status a request whose client left before the response's head is logged with (nginx's).
CLIENT_CLOSED = 499


@dataclass(slots=True)
class Timing:
    first_chunk_at: float | None = None  # perf_counter() when the first byte arrived
    observe_seconds: float = 0.0  # time spent in the exchange


class Handler(Protocol):
    """What the proxy does with the exchange's decisions; both are quick and never raise."""

    def settle(self, spent: Settle) -> None:
        """Fires once, as soon as the step's usage is final."""

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        """Fires once, before the client's response is complete."""


async def relay(
    request: web.Request,
    upstream: aiohttp.ClientResponse,
    exchange: Exchange,
    handler: Handler,
    *,
    own_headers: dict[str, str],
) -> tuple[web.StreamResponse, bool]:
    """Relay the response; return it and whether the client went away."""
    timing = Timing()
    exchange.head(
        upstream.status,
        content_type=upstream.content_type,
        content_encoding=upstream.headers.get("Content-Encoding"),
        content_length=upstream.content_length,
    )
    # The exchange has decided, from the head, whether it rewrites the body (it never does
    # for an encoded one): the headers follow that decision, so they match the bytes.
    # An event stream's head goes out at once: the client sees the stream start.
    events = upstream.content_type == "text/event-stream"
    kind = web.StreamResponse if events else _BodyResponse
    response = kind(status=upstream.status, reason=upstream.reason)
    for name, value in response_headers(upstream.headers, body_rewritten=exchange.holds_back):
        response.headers.add(name, value)
    response.headers.update(own_headers)
    run = _Executor(request, response, upstream, handler, timing)
    try:
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            tapped = time.perf_counter()
            if timing.first_chunk_at is None:
                timing.first_chunk_at = tapped
            commands = exchange.receive(chunk)
            timing.observe_seconds += time.perf_counter() - tapped
            await run.execute(commands, exchange)
        await run.execute(exchange.body_ended())
    except _CLIENT_GONE:
        run.gone = True
        run.execute_now(exchange.client_gone())
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("provider connection broke mid-response: %r", exc)
        timed_out = isinstance(exc, TimeoutError)
        run.execute_now(exchange.timed_out() if timed_out else exchange.provider_broke())
    finally:
        upstream.release()
    return response, run.gone


class _BodyResponse(web.StreamResponse):
    """A body (JSON, mostly whole in one chunk): its head leaves with the first bytes of it,
    one write(2) for both instead of two (as `web.Response` does)."""

    _send_headers_immediately = False


def execute_now(commands: list[Command], handler: Handler, timing: Timing) -> None:
    """Commands with no I/O to the client (an exchange that never got a response)."""
    for command in commands:
        if isinstance(command, Settle):
            handler.settle(command)
        elif isinstance(command, Finished):
            handler.finished(command.outcome, timing)


class _Executor:
    def __init__(
        self,
        request: web.Request,
        response: web.StreamResponse,
        upstream: aiohttp.ClientResponse,
        handler: Handler,
        timing: Timing,
    ) -> None:
        self._request = request
        self._response = response
        self._upstream = upstream
        self._handler = handler
        self._timing = timing
        self.gone = False

    async def execute(self, commands: list[Command], exchange: Exchange | None = None) -> None:
        for command in commands:
            if isinstance(command, Forward):
                if command.data:  # the client first, observing after
                    await self._response.write(command.data)
                if command.observe and exchange is not None:
                    observing = time.perf_counter()
                    more = exchange.forwarded(command.data)
                    self._timing.observe_seconds += time.perf_counter() - observing
                    await self.execute(more)
            elif isinstance(command, EndResponse):
                await self._response.write_eof()
            else:
                self._now(command)

    def execute_now(self, commands: list[Command]) -> None:
        """After a failure: the client can be written to no more."""
        for command in commands:
            self._now(command)

    def _now(self, command: Command) -> None:
        if isinstance(command, Settle):
            self._handler.settle(command)
        elif isinstance(command, Finished):
            self._handler.finished(command.outcome, self._timing)
        elif isinstance(command, CloseUpstream):
            self._upstream.close()
        elif isinstance(command, AbortClient) and self._request.transport is not None:
            self._request.transport.close()


def client_left(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """What a handler whose client went away returns once its step is recorded.

    aiohttp cancels such a handler (`handler_cancellation`, as the gateway is served) and
    writes an access line only for a handler that returns: the cancellation is taken back
    and the response returned, so the request has its line (writing it fails quietly). A
    handler cancelled while its client is still there (the server stopping) stays cancelled.
    """
    task = asyncio.current_task()
    if task is None or task.cancelling() == 0:
        return response
    transport = request.transport
    if transport is not None and not transport.is_closing():
        raise asyncio.CancelledError
    task.uncancel()
    return response


def handler_cancelled() -> bool:
    """True when aiohttp cancelled the handler (client gone): re-raise after recording."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
