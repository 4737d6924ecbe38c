"""Everything decided before the provider, for a request however it came (an HTTP body, a
WebSocket frame): parse → place in a trace → history rules (pairing, reasoning sent back) →
loops → budgets, then the step's start (its record's start, its exchange, its end). A refusal
is recorded here; the caller answers it in its transport.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from gateway import ids
from gateway.checks import budgets, loops
from gateway.checks.admission import Refuse
from gateway.config import KeyBudget
from gateway.continuation import sessions
from gateway.errors import GatewayError
from gateway.exchange.calls import CallRules
from gateway.exchange.closing import Budget, StepFacts, Threading
from gateway.exchange.machine import Exchange
from gateway.items import Item, Violation, ViolationKind
from gateway.protocols import request_facts
from gateway.protocols.base import ParsedRequest, ProtocolAdapter
from gateway.protocols.frames import FrameDecoder
from gateway.protocols.registry import usual_spelling
from gateway.protocols.wire_shapes.record import shaped
from gateway.proxy import parents
from gateway.proxy.admission import Admission, admit
from gateway.proxy.deps import Deps
from gateway.proxy.finisher import StepEnd
from gateway.proxy.history_checks import history_refusal, history_violations
from gateway.proxy.placement import Placement, place
from gateway.routing import Target
from gateway.step import FORK_AT, FORK_OF, PROTOCOL_HEADERS, Lineage, RefusalRecord, StepStart

# Bodies from this size on are parsed in a thread rather than on the event loop.
LARGE_BODY = 1024 * 1024
A = TypeVar("A")
R = TypeVar("R")

TRACE_HEADER = "X-Loopwatch-Trace-Id"
STEP_HEADER = "X-Loopwatch-Step-Id"


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
    lineage: Lineage | None = None  # the run's place in its tree (None: a root)
    client: str | None = None  # the client's keyed key fingerprint
    protocol_headers: dict[str, str] | None = None  # `ProtocolAdapter.recorded_headers`
    fork: tuple[str, int] | None = None  # the trace and step this request forks (fork API)


@dataclass(frozen=True, slots=True)
class Refused:
    """A request refused before the provider (recorded already): the error to answer it
    with and the gateway's own headers."""

    error: GatewayError
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Request:
    """What the checks read of a request beside its body."""

    headers: Mapping[str, str]
    route: Callable[[ParsedRequest], Target]  # where it goes (may raise, e.g. a bad path)
    raw: bytes = b""  # the body as sent, forwarded when nothing is rewritten
    size: int = 0  # how large the body is, to parse it off the loop when large


async def check(
    deps: Deps, adapter: ProtocolAdapter, request: Request, body: Any
) -> Admitted | Refused:
    """Parse, place in a trace, history rules, loops, budget: everything decided before the
    provider."""
    headers = request.headers
    try:
        parsed = await off_loop_if_large(request.size, adapter.parse_request, body)
        target = request.route(parsed)
        placement = await place(deps, headers.get(TRACE_HEADER), parsed)
    except GatewayError as exc:
        return Refused(exc, {TRACE_HEADER: unread_refusal(deps, headers.get(TRACE_HEADER), exc)})
    own = {TRACE_HEADER: placement.trace_id}
    session = sessions.session_id(headers, body, adapter.session_fields)
    client = parents.client_of(deps, headers)
    # Read before any check: a refused fork's trace is a fork too.
    fork = ids.read_fork_mark(deps.secret, headers.get(ids.FORK_HEADER), placement.trace_id)
    try:  # first: every refusal of the run is recorded in its tree
        lineage = await parents.lineage_of(deps, headers, placement, client)
    except GatewayError as exc:  # a parent header that names no run
        _refused(deps, placement, session, [request_violation(exc)], "request", fork=fork)
        return Refused(exc, own)
    refused = partial(_refused, deps, placement, session, lineage=lineage, fork=fork)
    key = budgets.key_settings(deps.settings, deps.secret, headers)
    violations = history_violations(adapter, parsed, placement, deps.settings.terminal_tools)
    broken = _rules_refusal(deps, adapter, (violations, placement.trace_id), key, refused)
    if broken is not None:
        return Refused(broken, own)
    try:
        admission = await admit(
            deps,
            headers,
            key,
            placement.trace_id,
            parsed.max_output_tokens,
            model=parsed.model,
            upstream_url=target.url,
            lineage=lineage,
        )
    except GatewayError as exc:  # a header of the gateway's own it cannot use
        refused([request_violation(exc)], "request")
        return Refused(exc, own)
    if isinstance(admission, Refuse):
        refused([admission.violation], "budget", admission.limits)
        return Refused(admission.error, own)
    own.update(admission.headers)
    found = (placement, violations, admission, own, session, lineage, client)
    sent = {name: headers[name] for name in adapter.recorded_headers if name in headers}
    return Admitted(request.raw, body, parsed, target, *found, protocol_headers=sent, fork=fork)


def _rules_refusal(
    deps: Deps,
    adapter: ProtocolAdapter,
    found: tuple[list[Violation], str],
    key: KeyBudget | None,
    refused: Callable[..., None],
) -> GatewayError | None:
    """The history rules (pairing, reasoning sent back), then loops: the first one that
    refuses the request, its refusal recorded."""
    violations, trace_id = found
    refusal = history_refusal(deps.settings, adapter, violations, key)
    if refusal is not None:
        refused(violations, refusal.kind)
        return refusal.error
    loop = loops.loop_refusal(deps.loops.loop_of(trace_id), deps.settings.loops)
    if loop is not None:
        refused([loop[1]], "loop")
        return loop[0]
    return None


@dataclass(frozen=True, slots=True)
class Began:
    """An admitted request's step, started: its record's start, its exchange, its end."""

    start: StepStart
    exchange: Exchange
    finisher: StepEnd
    calls: CallRules  # the checks of its calls, which a later exchange may go on with


def begin(
    deps: Deps,
    adapter: ProtocolAdapter,
    admitted: Admitted,
    *,
    method: str,
    path: str,
    traceparent: str | None,
    started: float,
    hide_usage_event: bool = False,
    frames: FrameDecoder | None = None,
) -> Began:
    """The step of an admitted request about to be sent (`started`: perf_counter() when it
    arrived); `frames` reads its answer's events when they come as WebSocket frames."""
    start = _model_start(deps, adapter, admitted, (method, path, traceparent))
    calls = CallRules(start.tools, deps.tool_checker, deps.loops.for_trace(start.trace_id))
    exchange = Exchange(adapter, hide_usage_event=hide_usage_event, calls=calls, frames=frames)
    placement = admitted.placement
    threading = Threading(placement.input_state, placement.attempt, placement.retry_of)
    facts = StepFacts(
        start, started, time.perf_counter(), True, threading, None, deps.settings.terminal_tools
    )
    admission = admitted.admission
    end = step_end(deps, facts, admission.budget, admission.tree)
    return Began(start, exchange, end, calls)


def _model_start(
    deps: Deps, adapter: ProtocolAdapter, admitted: Admitted, how: tuple[str, str, str | None]
) -> StepStart:
    method, path, traceparent = how
    return StepStart(
        id=ids.new_step_id(),
        trace_id=admitted.placement.trace_id,
        protocol=adapter.name,
        method=method,
        path=path,
        started_at=deps.clock(),
        model=admitted.parsed.model,
        stream=admitted.parsed.stream,
        input_items=_shaped(adapter, admitted),
        violations=tuple(admitted.violations),
        budget_max_steps=admitted.admission.limits.max_steps,
        budget_max_tokens=admitted.admission.limits.max_tokens,
        traceparent=traceparent,
        session_id=admitted.session_id,
        tools=admitted.parsed.tools,
        upstream_url=admitted.target.url,
        declared_tools=request_facts.declared_tools(adapter, admitted.body),
        params=request_facts.request_params(adapter, admitted.body),
        conversation_id=admitted.parsed.conversation_id,
        attrs=_asked(admitted),
        lineage=admitted.lineage,
        client=admitted.client,
    )


def _asked(admitted: Admitted) -> dict[str, Any] | None:
    """What the request asked beside a model's answer, and its protocol headers."""
    attrs = admitted.parsed.attrs
    added: dict[str, Any] = {}
    if admitted.protocol_headers:
        added[PROTOCOL_HEADERS] = admitted.protocol_headers
    if admitted.fork is not None:  # made by the fork API (`ids.fork_mark`)
        added[FORK_OF], added[FORK_AT] = admitted.fork
    return {**attrs, **added} if added else (attrs or None)


def step_end(
    deps: Deps, facts: StepFacts, budget: Budget | None = None, tree: Budget | None = None
) -> StepEnd:
    return StepEnd(deps.bus, facts, pricer=deps.pricer, keys=deps.keys, budget=budget, tree=tree)


async def off_loop_if_large(size: int, function: Callable[[A], R], argument: A) -> R:
    """Small bodies are handled inline; a large one in a thread, so others keep moving."""
    if size < LARGE_BODY:
        return function(argument)
    return await asyncio.to_thread(function, argument)


def request_violation(error: GatewayError) -> Violation:
    """A request the gateway refused for what it is, not for a rule over a trace."""
    detail = f"The gateway refused the request ({error.status} {error.code}): {error.message}"
    return Violation(ViolationKind.INVALID_REQUEST, detail, enforced=True)


def unread_refusal(deps: Deps, header: str | None, error: GatewayError) -> str:
    """Record a request refused before it could be placed in a trace (a body that is not
    JSON or not an object, too large, an unknown coding, a bad trace header): in the trace
    its header names when that is a valid id, else in a trace of its own, so a user sees it.
    """
    valid = header is not None and ids.TRACE_ID_RE.match(header) is not None
    trace_id = header if valid and header is not None else ids.new_trace_id()
    record = RefusalRecord(trace_id, deps.clock(), (request_violation(error),), kind="request")
    deps.bus.refused(record)
    return trace_id


def _refused(
    deps: Deps,
    placement: Placement,
    session: str | None,
    violations: list[Violation],
    kind: str,
    limits: budgets.Limits | None = None,
    lineage: Lineage | None = None,
    fork: tuple[str, int] | None = None,
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
        lineage=lineage,
        fork=fork,
    )
    deps.bus.refused(record)


def _shaped(adapter: ProtocolAdapter, admitted: Admitted) -> tuple[Item, ...]:
    """The step's new items with the wire shapes a cassette spells them back from (none
    where they are spelled the protocol's usual way)."""
    placed = admitted.placement.new_items
    return shaped(adapter, admitted.body, placed, usual_spelling(adapter), admitted.parsed.items)
