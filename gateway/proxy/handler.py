"""The hot path: the only module that knows the order of a proxied request's steps.

parse → place in a trace → pairing check → budget check → upstream → relay driving the
exchange → the step's end decided (gateway.exchange.closing) → the bus performs it: budget,
memory, spool, sinks (redaction and storage happen off this path).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from aiohttp import web

from gateway import ids, jsoncodec
from gateway.checks import budgets, loops, pairing
from gateway.checks.admission import Refuse
from gateway.config import KeyBudget
from gateway.continuation import sessions
from gateway.errors import BadRequest, GatewayError, RequestTooLarge
from gateway.exchange.calls import CallRules
from gateway.exchange.closing import Budget, StepFacts, Threading
from gateway.exchange.machine import Exchange
from gateway.items import Violation, ViolationKind
from gateway.protocols import request_body, request_facts
from gateway.protocols.base import ParsedRequest, ProtocolAdapter, provider_request_id
from gateway.protocols.registry import PASSTHROUGH
from gateway.proxy.admission import Admission, admit
from gateway.proxy.deps import Deps
from gateway.proxy.finisher import StepEnd
from gateway.proxy.placement import Placement, place
from gateway.proxy.relay import CLIENT_CLOSED, Timing, client_left, execute_now, relay
from gateway.proxy.upstream import forward_headers
from gateway.routing import Target, resolve
from gateway.runs.status import TERMINAL, mark_terminal
from gateway.step import RefusalRecord, StepStart
from gateway.stream import codings

log = logging.getLogger(__name__)

# Bodies from this size on are parsed in a thread rather than on the event loop.
LARGE_BODY = 1024 * 1024
_READ_CHUNK = 256 * 1024
A = TypeVar("A")
R = TypeVar("R")
Sending = tuple[str, dict[str, str], bytes | AsyncIterable[bytes] | None]  # url, headers, body

TRACE_HEADER = "X-Loopwatch-Trace-Id"
STEP_HEADER = "X-Loopwatch-Step-Id"


def error_response(
    adapter: ProtocolAdapter, error: GatewayError, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(
        adapter.error_body(error), status=error.status, headers={**error.headers, **(headers or {})}
    )


@dataclass(slots=True)
class Admitted:
    """A request that passed every check before the provider, and what the checks learned."""

    raw: bytes
    body: Any
    parsed: ParsedRequest
    target: Target
    placement: Placement
    violations: list[Violation]
    admission: Admission
    own_headers: dict[str, str]
    session_id: str | None = None


async def handle_model(
    request: web.Request, deps: Deps, adapter: ProtocolAdapter
) -> web.StreamResponse:
    started = time.perf_counter()
    admitted = await _check(request, deps, adapter)
    if isinstance(admitted, web.Response):
        return admitted
    return await _forward(request, deps, adapter, admitted, started)


async def _check(
    request: web.Request, deps: Deps, adapter: ProtocolAdapter
) -> Admitted | web.Response:
    """Parse, place in a trace, pairing, budget: everything decided before the provider."""
    try:
        raw, body = await _read_json(request, deps.settings.max_body_bytes, adapter)
        parsed = await _off_loop_if_large(len(raw), adapter.parse_request, body)
        target = resolve(deps.settings, adapter.wire, parsed.model, *_raw_target(request))
        placement = await place(deps, request.headers.get(TRACE_HEADER), parsed)
    except GatewayError as exc:
        trace_id = _unread_refusal(deps, request.headers.get(TRACE_HEADER), exc)
        return error_response(adapter, exc, {TRACE_HEADER: trace_id})
    own = {TRACE_HEADER: placement.trace_id}
    session = sessions.session_id(request.headers, body, adapter.session_fields)
    refused = partial(_refused, deps, placement, session)
    key = budgets.key_settings(deps.settings, deps.secret, request.headers)
    violations = _history_violations(adapter, parsed, placement, deps.settings.terminal_tools)
    refusal = _pairing_refusal(deps, adapter, violations, key)
    if refusal is not None:
        refused(violations, "pairing")
        return error_response(adapter, refusal, own)
    loop = loops.loop_refusal(deps.loops.loop_of(placement.trace_id), deps.settings.loops)
    if loop is not None:
        refused([loop[1]], "loop")
        return error_response(adapter, loop[0], own)
    try:
        admission = await admit(
            deps,
            request.headers,
            key,
            placement.trace_id,
            parsed.max_output_tokens,
            model=parsed.model,
            upstream_url=target.url,
        )
    except GatewayError as exc:  # a header of the gateway's own it cannot use
        refused([request_violation(exc)], "request")
        return error_response(adapter, exc, own)
    if isinstance(admission, Refuse):
        refused([admission.violation], "budget", admission.limits)
        return error_response(adapter, admission.error, own)
    own.update(admission.headers)
    return Admitted(raw, body, parsed, target, placement, violations, admission, own, session)


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
    start = _model_start(request, deps, adapter, admitted)
    own[STEP_HEADER] = start.id
    headers = forward_headers(request.headers, credential=admitted.target.credential)
    for name in [n for n in headers if n.lower() == "content-encoding"]:
        del headers[name]  # the payload is the decoded body (see `_read_json`)
    if prepared.hide_usage_event:
        # Events must be readable to hide one; a provider that compresses anyway gets its
        # bytes passed through unchanged, the usage event included (see `gateway.exchange.tap`).
        headers["Accept-Encoding"] = "identity"
    calls = CallRules(start.tools, deps.tool_checker, deps.loops.for_trace(start.trace_id))
    exchange = Exchange(adapter, hide_usage_event=prepared.hide_usage_event, calls=calls)
    placement = admitted.placement
    threading = Threading(placement.input_state, placement.attempt, placement.retry_of)
    facts = StepFacts(
        start, started, time.perf_counter(), True, threading, None, deps.settings.terminal_tools
    )
    finisher = _step_end(deps, facts, admission.budget)
    sending = (admitted.target.url, headers, payload)
    return await _exchange(request, deps, adapter, exchange, finisher, sending, own)


async def _exchange(
    request: web.Request,
    deps: Deps,
    adapter: ProtocolAdapter,
    exchange: Exchange,
    finisher: StepEnd,
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
    finisher: StepEnd,
    exc: GatewayError,
    own: dict[str, str],
) -> web.Response:
    error = {"message": exc.message, "type": exc.type, "code": exc.code}
    execute_now(exchange.unreachable(exc.status, error), finisher, Timing())
    return error_response(adapter, exc, own)


def _model_start(
    request: web.Request, deps: Deps, adapter: ProtocolAdapter, admitted: Admitted
) -> StepStart:
    return StepStart(
        id=ids.new_step_id(),
        trace_id=admitted.placement.trace_id,
        protocol=adapter.name,
        method=request.method,
        path=request.path,
        started_at=deps.clock(),
        model=admitted.parsed.model,
        stream=admitted.parsed.stream,
        input_items=tuple(admitted.placement.new_items),
        violations=tuple(admitted.violations),
        budget_max_steps=admitted.admission.limits.max_steps,
        budget_max_tokens=admitted.admission.limits.max_tokens,
        traceparent=request.headers.get("traceparent"),
        session_id=admitted.session_id,
        tools=admitted.parsed.tools,
        upstream_url=admitted.target.url,
        declared_tools=request_facts.declared_tools(adapter, admitted.body),
        params=request_facts.request_params(adapter, admitted.body),
        conversation_id=admitted.parsed.conversation_id,
    )


async def handle_passthrough(
    request: web.Request, deps: Deps, adapter: ProtocolAdapter
) -> web.StreamResponse:
    """Any other /v1/* path: forwarded unchanged, streamed both ways, recorded as a plain step."""
    started = time.perf_counter()
    header = request.headers.get(TRACE_HEADER)
    if header is not None and not ids.TRACE_ID_RE.match(header):
        error = BadRequest("invalid X-Loopwatch-Trace-Id", param=TRACE_HEADER)
        trace_id = _unread_refusal(deps, header, error)
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
        _unread_refusal(deps, start.trace_id, exc)
        return error_response(adapter, exc, {TRACE_HEADER: start.trace_id})
    headers = forward_headers(request.headers, credential=target.credential)
    body = request.content.iter_any() if request.body_exists else None
    if request.content_length is not None:  # streamed on unchanged: keep its length, not chunked
        headers["Content-Length"] = str(request.content_length)
    finisher = _step_end(deps, StepFacts(start, started, time.perf_counter(), model_call=False))
    sending = (target.url, headers, body)
    return await _exchange(request, deps, adapter, Exchange(None), finisher, sending, own)


def _step_end(deps: Deps, facts: StepFacts, budget: Budget | None = None) -> StepEnd:
    return StepEnd(deps.bus, facts, pricer=deps.pricer, keys=deps.keys, budget=budget)


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
        raw = await _off_loop_if_large(size, _inflater(encoding, limit), raw)
        size = len(raw)
    read = partial(request_body.decode, history=adapter.history_field)
    return raw, await _off_loop_if_large(size, read, raw)  # BadRequest when it is not JSON


def _inflater(encoding: str, limit: int) -> Callable[[bytes], bytes]:
    return lambda raw: codings.inflate_request(raw, encoding, limit)


async def _off_loop_if_large(size: int, function: Callable[[A], R], argument: A) -> R:
    """Small bodies are handled inline; a large one in a thread, so others keep moving."""
    if size < LARGE_BODY:
        return function(argument)
    return await asyncio.to_thread(function, argument)


def _history_violations(
    adapter: ProtocolAdapter, parsed: ParsedRequest, placement: Placement, terminal: tuple[str, ...]
) -> list[Violation]:
    previous = placement.previous
    found = pairing.check_request(
        placement.items,
        history=adapter.history,
        new_items=placement.new_items,
        previous_output=None if previous is None else list(previous.output_items),
        # A conversation's items are prepended by the provider, like a previous response's.
        continues_response=parsed.previous_response_id is not None
        or parsed.conversation_id is not None,
        unseen_calls=placement.unresolved_references or parsed.held_state,
    )
    if not any(v.kind is ViolationKind.MISSING_TOOL_RESULT for v in found):
        return found
    # A terminal output tool's call hands over the run's answer: it needs no result.
    outputs = [] if previous is None else list(previous.output_items)
    ended = {
        i.call_id
        for i in mark_terminal([*placement.items, *outputs], terminal)
        if i.attrs.get(TERMINAL)
    }
    return [
        v
        for v in found
        if v.kind is not ViolationKind.MISSING_TOOL_RESULT or v.call_id not in ended
    ]


def _pairing_refusal(
    deps: Deps, adapter: ProtocolAdapter, violations: list[Violation], key: KeyBudget | None
) -> GatewayError | None:
    mode = (key.pairing if key is not None else None) or deps.settings.pairing
    if mode != "enforce":
        return None
    first = pairing.first_enforceable(violations)
    if first is None:
        return None
    violations[violations.index(first)] = Violation(
        first.kind, first.detail, first.call_id, enforced=True
    )
    return pairing.to_error(first, history=adapter.history)


def request_violation(error: GatewayError) -> Violation:
    """A request the gateway refused for what it is, not for a rule over a trace."""
    detail = f"The gateway refused the request ({error.status} {error.code}): {error.message}"
    return Violation(ViolationKind.INVALID_REQUEST, detail, enforced=True)


def _unread_refusal(deps: Deps, header: str | None, error: GatewayError) -> str:
    """Record a request refused before it could be placed in a trace (a body that is not
    JSON or not an object, too large, an unknown coding, a bad trace header): in the trace
    its header names when that is a valid id, else in a trace of its own, so a user sees it.
    """
    valid = header is not None and ids.TRACE_ID_RE.match(header) is not None
    trace_id = header if valid and header is not None else ids.new_trace_id()
    record = RefusalRecord(trace_id, deps.clock(), (request_violation(error),), kind="request")
    _record_refusal(deps, record)
    return trace_id


def _record_refusal(deps: Deps, refusal: RefusalRecord) -> None:
    deps.bus.refused(refusal)


def _refused(
    deps: Deps,
    placement: Placement,
    session: str | None,
    violations: list[Violation],
    kind: str,
    limits: budgets.Limits | None = None,
) -> None:
    """Record a refused request: its violations and the new items it carried."""
    record = RefusalRecord(
        placement.trace_id,
        deps.clock(),
        tuple(violations),
        budget_exceeded=kind == "budget",
        budget_max_steps=None if limits is None else limits.max_steps,
        budget_max_tokens=None if limits is None else limits.max_tokens,
        kind=kind,
        items=tuple(placement.new_items),
        session_id=session,
    )
    _record_refusal(deps, record)
