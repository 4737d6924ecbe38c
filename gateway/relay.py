"""Relays a provider response to the client chunk by chunk, feeding the tap beside it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from gateway.tap import ResponseTap
from gateway.upstream import response_headers

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RelayOutcome:
    first_chunk_at: float | None = None  # perf_counter() when the first byte arrived
    cancelled: bool = False  # the client went away
    provider_broke: str | None = None  # the provider's connection failed mid-body
    observe_seconds: float = 0.0  # time spent in the tap


async def relay(
    request: web.Request,
    upstream: aiohttp.ClientResponse,
    tap: ResponseTap | None,
    *,
    own_headers: dict[str, str],
    body_rewritten: bool,
    on_end: Callable[[], None] | None = None,
) -> tuple[web.StreamResponse, RelayOutcome]:
    """`on_end` runs once, as soon as the tap has seen the protocol's completion marker."""
    outcome = RelayOutcome()
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for name, value in response_headers(upstream.headers, body_rewritten=body_rewritten):
        response.headers.add(name, value)
    response.headers.update(own_headers)
    try:
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            if outcome.first_chunk_at is None:
                outcome.first_chunk_at = time.perf_counter()
            if tap is None or not tap.holds_back:
                await response.write(chunk)  # the client first, observing after
                if tap is not None:
                    tapped = time.perf_counter()
                    tap.feed(chunk)
                    outcome.observe_seconds += time.perf_counter() - tapped
                    on_end = _fire_on_end(tap, on_end)
                continue
            tapped = time.perf_counter()
            visible = tap.feed(chunk)
            outcome.observe_seconds += time.perf_counter() - tapped
            on_end = _fire_on_end(tap, on_end)
            if visible:
                await response.write(visible)
        rest = tap.finish() if tap is not None else b""
        if rest:
            await response.write(rest)
        await response.write_eof()
    except (asyncio.CancelledError, ConnectionResetError, aiohttp.ClientConnectionResetError):
        outcome.cancelled = True
        upstream.close()  # stop the provider's work for a client that left
    except (aiohttp.ClientPayloadError, aiohttp.ClientError, TimeoutError) as exc:
        outcome.provider_broke = repr(exc)
        log.info("provider connection broke mid-response: %r", exc)
        # End the client's connection abruptly too, so it sees an incomplete body.
        if request.transport is not None:
            request.transport.close()
    finally:
        upstream.release()
    return response, outcome


def _fire_on_end(tap: ResponseTap, on_end: Callable[[], None] | None) -> Callable[[], None] | None:
    """Call `on_end` once the stream has ended; return what is left to call later."""
    if on_end is None or not tap.ended:
        return on_end
    on_end()
    return None


def handler_cancelled() -> bool:
    """True when aiohttp cancelled the handler (client gone): re-raise after recording."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
