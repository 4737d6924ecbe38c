"""The HTTP hot path: the only module that knows the order of an HTTP request's steps.

body read → the checks before the provider (gateway.proxy.admitting: parse, place in a
trace, pairing, loops, budget) → upstream → relay driving the exchange → the step's end
decided (gateway.exchange.closing) → the bus performs it: budget, memory, spool, sinks
(redaction and storage happen off this path). A WebSocket's requests: gateway.proxy.websocket.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from aiohttp import web

from gateway import ids, jsoncodec
from gateway.errors import BadRequest, GatewayError, RequestTooLarge
from gateway.exchange.calls import CallRules
from gateway.exchange.closing import StepFacts
from gateway.exchange.machine import Exchange
from gateway.protocols import request_body
from gateway.protocols.base import ParsedRequest, ProtocolAdapter, provider_request_id
from gateway.protocols.registry import PASSTHROUGH, follow_up
from gateway.proxy.admitting import (
    STEP_HEADER,
    TRACE_HEADER,
    Admitted,
    Refused,
    Request,
    begin,
    check,
    off_loop_if_large,
    step_end,
    unread_refusal,
)
from gateway.proxy.background.open_responses import Creating, Ending, FollowUp
from gateway.proxy.background.shared import EndElsewhere
from gateway.proxy.deps import Deps
from gateway.proxy.relay import CLIENT_CLOSED, Handler, Timing, client_left, execute_now, relay
from gateway.proxy.upstream import forward_headers
from gateway.routing import Target, resolve
from gateway.step import StepRecord, StepStart
from gateway.stream import codings

log = logging.getLogger(__name__)

_READ_CHUNK = 256 * 1024
Sending = tuple[str, dict[str, str], bytes | AsyncIterable[bytes] | None]  # url, headers, body


class StepHandler(Handler, Protocol):
    """The relay's handler of a step's exchange, and what the proxy tells it before."""

    @property
    def protocol(self) -> str: ...

    def upstream_answered(self, provider_request_id: str | None) -> None: ...


def error_response(
    adapter: ProtocolAdapter, error: GatewayError, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(
        adapter.error_body(error), status=error.status, headers={**error.headers, **(headers or {})}
    )


async def handle_model(request: web.Request, deps: Deps, protocol: str) -> web.StreamResponse:
    """A model endpoint, through its protocol's adapter as this app keyed it."""
    started = time.perf_counter()
    adapter = deps.adapters[protocol]
    admitted = await _check(request, deps, adapter)
    if isinstance(admitted, web.Response):
        return admitted
    return await _forward(request, deps, adapter, admitted, started)


async def _check(
    request: web.Request, deps: Deps, adapter: ProtocolAdapter
) -> Admitted | web.Response:
    """Read the body, then everything decided before the provider (`admitting.check`)."""
    try:
        raw, body = await _read_json(request, deps.settings.max_body_bytes, adapter)
    except GatewayError as exc:
        trace_id = unread_refusal(deps, request.headers.get(TRACE_HEADER), exc)
        return error_response(adapter, exc, {TRACE_HEADER: trace_id})
    route = partial(_route, deps, adapter, _raw_target(request))
    checked = await check(deps, adapter, Request(request.headers, route, raw, len(raw)), body)
    if isinstance(checked, Refused):
        return error_response(adapter, checked.error, checked.headers)
    return checked


def _route(
    deps: Deps, adapter: ProtocolAdapter, target: tuple[str, str], parsed: ParsedRequest
) -> Target:
    return resolve(deps.settings, adapter.wire, parsed.model, *target)


async def _forward(
    request: web.Request,
    deps: Deps,
    adapter: ProtocolAdapter,
    admitted: Admitted,
    started: float,
) -> web.StreamResponse:
    """Send upstream, relay the answer through its exchange; the step is recorded as it ends."""
    admission, own = admitted.admission, admitted.own_headers
    prepared = adapter.prepare_body(admitted.body, admitted.parsed, max_tokens=admission.clamp)
    payload = admitted.raw if prepared.body is admitted.body else jsoncodec.dumps(prepared.body)
    if prepared.clamped_max_tokens is not None:  # what was sent, after the protocol's floors
        own["X-Loopwatch-Max-Tokens-Clamped"] = str(prepared.clamped_max_tokens)
    began = begin(
        deps,
        adapter,
        admitted,
        method=request.method,
        path=request.path,
        traceparent=request.headers.get("traceparent"),
        started=started,
        hide_usage_event=prepared.hide_usage_event,
    )
    own[STEP_HEADER] = began.start.id
    headers = forward_headers(request.headers, credential=admitted.target.credential)
    for name in [n for n in headers if n.lower() == "content-encoding"]:
        del headers[name]  # the payload is the decoded body (see `_read_json`)
    if prepared.hide_usage_event:
        # Events must be readable to hide one; a provider that compresses anyway gets its
        # bytes passed through unchanged, the usage event included (see `gateway.exchange.tap`).
        headers["Accept-Encoding"] = "identity"
    sending = (admitted.target.url, headers, payload)
    finisher: StepHandler = began.finisher
    if admitted.parsed.background:  # the step may end with a later exchange
        finisher = Creating(began.finisher, began.calls, deps.open_responses)
    return await _exchange(request, deps, adapter, began.exchange, finisher, sending, own)


async def _exchange(
    request: web.Request,
    deps: Deps,
    adapter: ProtocolAdapter,
    exchange: Exchange,
    finisher: StepHandler,
    sending: Sending,
    own: dict[str, str],
) -> web.StreamResponse:
    """Send upstream and relay the answer; the step ends however the exchange does, a
    client gone before the provider's answer included (aiohttp cancels its handler)."""
    try:
        upstream = await deps.upstream.send(request.method, *sending)
    except GatewayError as exc:
        return _unreachable(adapter, exchange, finisher, exc, own)
    except asyncio.CancelledError:
        execute_now(exchange.client_gone(), finisher, Timing())
        return client_left(request, web.Response(status=CLIENT_CLOSED, headers=own))
    finisher.upstream_answered(provider_request_id(upstream.headers))
    protocol, sinks = finisher.protocol, deps.sinks
    sinks.relay_started(protocol)
    try:
        response, gone = await relay(request, upstream, exchange, finisher, own_headers=own)
    finally:
        sinks.relay_ended(protocol)
    return client_left(request, response) if gone else response


def _unreachable(
    adapter: ProtocolAdapter,
    exchange: Exchange,
    finisher: StepHandler,
    exc: GatewayError,
    own: dict[str, str],
) -> web.Response:
    error = {"message": exc.message, "type": exc.type, "code": exc.code}
    execute_now(exchange.unreachable(exc.status, error), finisher, Timing())
    return error_response(adapter, exc, own)


async def handle_passthrough(
    request: web.Request, deps: Deps, adapter: ProtocolAdapter
) -> web.StreamResponse:
    """Any other /v1/* path: forwarded unchanged, streamed both ways, recorded as a plain step
    (a request about an open background response ends its step instead)."""
    about = follow_up(request.method, request.path)
    if about is not None and (following := await _open_step(deps, about[1])) is not None:
        return await _follow_up(request, deps, adapter, about, following)
    started = time.perf_counter()
    header = request.headers.get(TRACE_HEADER)
    if header is not None and not ids.TRACE_ID_RE.match(header):
        error = BadRequest("invalid X-Loopwatch-Trace-Id", param=TRACE_HEADER)
        trace_id = unread_refusal(deps, header, error)
        return error_response(adapter, error, {TRACE_HEADER: trace_id})
    start = StepStart(
        id=ids.new_step_id(),
        trace_id=header or ids.new_trace_id(),
        protocol="passthrough",
        method=request.method,
        path=request.path,
        started_at=deps.clock(),
        traceparent=request.headers.get("traceparent"),
    )
    own = {TRACE_HEADER: start.trace_id, STEP_HEADER: start.id}
    try:
        target = resolve(deps.settings, PASSTHROUGH, None, *_raw_target(request))
    except GatewayError as exc:  # e.g. a path that would leave the API base
        unread_refusal(deps, start.trace_id, exc)
        return error_response(adapter, exc, {TRACE_HEADER: start.trace_id})
    headers = forward_headers(request.headers, credential=target.credential)
    body = request.content.iter_any() if request.body_exists else None
    if request.content_length is not None:  # streamed on unchanged: keep its length, not chunked
        headers["Content-Length"] = str(request.content_length)
    finisher = step_end(deps, StepFacts(start, started, time.perf_counter(), model_call=False))
    sending = (target.url, headers, body)
    return await _exchange(request, deps, adapter, Exchange(None), finisher, sending, own)


@dataclass(frozen=True, slots=True)
class _Following:
    """An open step a follow-up exchange is about, and how that exchange ends it."""

    start: StepStart | StepRecord
    calls: CallRules | None
    ending: Ending


async def _open_step(deps: Deps, response_id: str) -> _Following | None:
    """The open step of a response: held here, else opened by a gateway on the store."""
    open_responses = deps.open_responses
    held = open_responses.get(response_id)
    if held is not None:
        return _Following(held.end.start, held.calls, open_responses.end)
    stored = await open_responses.find(response_id)
    if stored is None:
        return None
    elsewhere = EndElsewhere(deps.bus, deps.pricer, deps.keys, deps.clock)
    loops = deps.loops.for_trace(stored.record.trace_id)
    calls = CallRules(stored.tools, deps.tool_checker, loops)
    return _Following(stored.record, calls, open_responses.end_stored(elsewhere))


async def _follow_up(
    request: web.Request,
    deps: Deps,
    adapter: ProtocolAdapter,
    about: tuple[ProtocolAdapter, str],
    step: _Following,
) -> web.StreamResponse:
    """A poll, resumed stream or cancel of an open background response: forwarded unchanged,
    read by the response's adapter; it ends the step when it sees the response's end."""
    start = step.start
    own = {TRACE_HEADER: start.trace_id, STEP_HEADER: start.id}
    try:
        target = resolve(deps.settings, PASSTHROUGH, None, *_raw_target(request))
    except GatewayError as exc:
        return error_response(adapter, exc, own)
    headers = forward_headers(request.headers, credential=target.credential)
    body = await request.read() if request.body_exists else None
    exchange = Exchange(about[0], calls=step.calls)
    handler = FollowUp(about[1], start.protocol, step.ending)
    sending = (target.url, headers, body)
    return await _exchange(request, deps, adapter, exchange, handler, sending, own)


def _raw_target(request: web.Request) -> tuple[str, str]:
    """The path and query as the client encoded them: decoding would change their meaning
    (an encoded "?" or "&" would start a query or a parameter)."""
    return request.rel_url.raw_path, request.rel_url.raw_query_string


async def _read_json(
    request: web.Request, limit: int, adapter: ProtocolAdapter
) -> tuple[bytes, Any]:
    """The body, decoded if the client compressed it, and its JSON (the history's elements
    as their text, see `protocols.request_body`). The decoded bytes are what is forwarded
    (without Content-Encoding): the body may be rewritten anyway (a clamp, usage asked
    for), and every provider reads identity."""
    encoding = codings.check_request_coding(request.headers.get("Content-Encoding"))
    if request.content_length is not None and request.content_length > limit:
        raise RequestTooLarge(f"Request body is larger than {limit} bytes.")
    chunks, size = [], 0
    while chunk := await request.content.read(_READ_CHUNK):
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"Request body is larger than {limit} bytes.")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if encoding not in codings.IDENTITY:
        raw = await off_loop_if_large(size, _inflater(encoding, limit), raw)
        size = len(raw)
    read = partial(request_body.decode, history=adapter.history_field)
    return raw, await off_loop_if_large(size, read, raw)  # BadRequest when it is not JSON


def _inflater(encoding: str, limit: int) -> Callable[[bytes], bytes]:
    return lambda raw: codings.inflate_request(raw, encoding, limit)
