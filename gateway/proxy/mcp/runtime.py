"""The MCP side as the app holds it: configured servers, the observer, and where each observed
event's records go (the spool, as steps do; then the sinks' `mcp_execution` and
`mcp_violation` events, see gateway.sinks.base). Runs on the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.checks.tools import ToolChecker
from gateway.config import Settings
from gateway.mcp.messages import id_key, is_response, read_requests
from gateway.mcp.observer import McpObserver
from gateway.mcp.records import McpViolation, Outbox
from gateway.mcp.requests import Context, Refusal, Tracked
from gateway.proxy.mcp.oauth import ResourceMetadata
from gateway.proxy.mcp.store_join import StoreJoins
from gateway.recording.spooler import SpoolRecorder
from gateway.redaction.redactor import Redactor
from gateway.sinks.base import Sinks
from gateway.sinks.otlp.trace_ids import trace_id_of
from gateway.step import RefusalRecord, StepRecord
from gateway.store.read import mcp as reads

log = logging.getLogger(__name__)

MAX_RESUMABLE_SESSIONS = 10_000  # sessions with requests parked, oldest given up first


SPOOL_WAIT_S = 1.0  # the longest an MCP answer waits for its record to be spooled


class McpRuntime:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        redactor: Redactor,
        recorder: SpoolRecorder,
        background: Background,
        *,
        sinks: Sinks | None = None,
        clock: Callable[[], datetime] | None = None,
        checker: ToolChecker | None = None,
    ) -> None:
        self.servers = {server.name: server for server in settings.mcp_servers}
        self.metadata = ResourceMetadata(settings.public_url)  # OAuth-protected servers
        self.observer = McpObserver(
            checker=checker,
            window=settings.mcp_match_window_s,
            enforce=settings.mcp_enforce,
            clock=clock,
            otel_id=trace_id_of,
        )
        self._recorder = recorder  # MCP records are spooled like steps: crash-safe
        self._engine = engine
        self.background = background  # its joins' task and its relay's sends
        # Joins and deliveries the process's memory cannot make: looked up in the store.
        self.store_joins = StoreJoins(
            self.observer, self.emit, engine, redactor, settings.mcp_match_window_s, background
        )
        self._sinks = sinks or Sinks()
        # Requests reported by stdio bridges, waiting for their answers, by bridge.
        self.stdio: OrderedDict[str, dict[str, Tracked]] = OrderedDict()
        # Requests whose stream ended before their answer, which the client may resume on a
        # GET stream of its session (Last-Event-ID), by session.
        self._resumable: OrderedDict[str, dict[str, Tracked]] = OrderedDict()
        self._resume_window = settings.mcp_match_window_s
        self._observing = 0  # POSTs being proxied
        self._settled = asyncio.Event()
        self._settled.set()

    async def start(self) -> None:
        try:
            known = await asyncio.to_thread(reads.tool_lists, self._engine)
        except Exception:
            log.exception("loading the MCP servers' tool lists failed")
            return
        for server, tools in known.items():
            self.observer.tools.setdefault(server, tools)

    async def close(self) -> None:
        while self._resumable:  # recorded as unanswered, not lost; their deadlines find none
            self.unanswered(self._resumable.popitem()[1], "the gateway stopped first")
        await self.store_joins.close()

    @contextlib.contextmanager
    def observing(self) -> Iterator[None]:
        """Around a POST being proxied: `flush` waits for it to be recorded."""
        self._observing += 1
        self._settled.clear()
        try:
            yield
        finally:
            self._observing -= 1
            if self._observing == 0:
                self._settled.set()

    async def spooled(self) -> None:
        """Wait until the records submitted so far are in the spool (a batch written now, not
        after the batching delay), at most SPOOL_WAIT_S: an answer the client is about to
        hold must survive the gateway being killed."""
        with contextlib.suppress(TimeoutError):
            await self._recorder.flush(timeout=SPOOL_WAIT_S)

    async def flush(self, timeout: float = 10.0) -> bool:
        """Everything observed so far is stored: the POSTs being proxied are finished, their
        records written, and the joins and deliveries the store can tell looked up."""
        try:
            async with asyncio.timeout(timeout):
                await self._settled.wait()
                await self._recorder.flush()
                await self.store_joins.look_up_now()
                await self._recorder.flush()
        except TimeoutError:
            return False
        return True

    # -- events ----------------------------------------------------------------------------

    def begin(
        self,
        context: Context,
        body: bytes | None,
        *,
        can_refuse: bool = True,
        sent: tuple[datetime, float] | None = None,
    ) -> tuple[dict[str, Tracked], list[Refusal]]:
        """The requests of a POST (or a stdio line), by id; refusals when the gateway answers
        in the server's stead. `sent`: when the POST went upstream, if it already did."""
        tracked: dict[str, Tracked] = {}
        refusals: list[Refusal] = []
        if not body:
            return tracked, refusals
        out = Outbox()
        for request in read_requests(body):
            if not request.expects_answer:
                continue
            try:
                seen = self.observer.request(
                    context, request, out, can_refuse=can_refuse, sent=sent
                )
            except Exception:  # observing never breaks forwarding: the request goes on
                log.exception("observing an MCP request failed")
                continue
            if isinstance(seen, Refusal):
                refusals.append(seen)
            else:
                tracked[id_key(request.rpc_id)] = seen
        self.emit(out)
        return tracked, refusals

    def now(self) -> float:
        """The monotonic clock the observer times calls with."""
        return self.observer.monotonic()

    def messages(
        self,
        tracked: dict[str, Tracked],
        messages: list[dict[str, Any]],
        session: str | None,
        at: float | None = None,
    ) -> None:
        """Messages of an answer, read at `at` (now when not given)."""
        out = Outbox()
        for message in messages:
            if not is_response(message):
                continue
            waiting = tracked.pop(id_key(message.get("id")), None)
            if waiting is None:
                continue
            if waiting.request.method == "initialize" and session:
                waiting.context = replace(waiting.context, session_id=session)
            self._safely(self.observer.answered, waiting, message, out, at)
        self.emit(out)

    def unanswered(self, tracked: dict[str, Tracked], reason: str) -> None:
        out = Outbox()
        for waiting in tracked.values():
            self._safely(self.observer.failed, waiting, reason, out)
        tracked.clear()
        self.emit(out)

    def park(self, session: str, tracked: dict[str, Tracked], reason: str) -> None:
        """Requests whose resumable stream ended without their answer: answered on a resumed
        stream of the session (`resumed`), else unanswered for `reason` after the window."""
        waiting = self._resumable.setdefault(session, {})
        self._resumable.move_to_end(session)
        waiting.update(tracked)
        keys = list(tracked)
        tracked.clear()
        while len(self._resumable) > MAX_RESUMABLE_SESSIONS:
            self.unanswered(self._resumable.popitem(last=False)[1], reason)
        asyncio.get_running_loop().call_later(
            self._resume_window, self._expire, session, keys, reason
        )

    def resumed(self, session: str | None) -> dict[str, Tracked]:
        """The session's requests waiting for a resumed stream (answers are taken from it)."""
        return self._resumable.get(session or "") or {}

    def _expire(self, session: str, keys: list[str], reason: str) -> None:
        waiting = self._resumable.get(session)
        if waiting is None:
            return
        left = {key: waiting.pop(key) for key in keys if key in waiting}
        if not waiting:
            del self._resumable[session]
        self.unanswered(left, reason)

    def step(self, step: StepRecord) -> None:
        out = Outbox()
        self._safely(self.observer.step, step, out)
        self.emit(out)

    @staticmethod
    def _safely(event: Callable[..., None], *args: Any) -> None:
        """Observing never breaks forwarding: a failure is logged, the bytes still flow."""
        try:
            event(*args)
        except Exception:
            log.exception("observing an MCP message failed")

    def emit(self, out: Outbox) -> None:
        """Spool what an event produced (before its client's answer is complete), count it,
        and look up in the store the joins and deliveries memory could not make."""
        for record in out.records:
            self._recorder.submit(record)
        if self.observer.fresh:
            self.store_joins.wake()
        for record in out.records:
            if isinstance(record, McpViolation) and self._found(record, out):
                self._violation(record)
        for execution in out.finished:
            declared = execution.tool in (self.observer.tools.get(execution.server) or {})
            self._sinks.mcp_execution(execution, declared)

    @staticmethod
    def _found(violation: McpViolation, out: Outbox) -> bool:
        """Found just now: not withdrawn, nor found before and stored again with its run."""
        return not violation.withdrawn and violation.id not in out.moved

    def _violation(self, violation: McpViolation) -> None:
        self._sinks.mcp_violation(violation)


class McpSink:
    """Feeds finished model steps to the MCP observer (joins and deliveries)."""

    def __init__(self, runtime: McpRuntime) -> None:
        self._runtime = runtime

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        """Fires once per step, as every sink's does; quick (in-memory matching only)."""
        self._runtime.step(step)

    def request_refused(self, refusal: RefusalRecord) -> None:
        """A budget refusal of a run: with `mcp_enforce` its tool calls are refused too."""
        if refusal.budget_exceeded and refusal.violations:
            self._runtime.observer.budget_refused(
                refusal.trace_id, refusal.violations[0].kind.value
            )
