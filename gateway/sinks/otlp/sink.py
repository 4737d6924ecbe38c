"""OTLP export sink: each finished step becomes OpenTelemetry spans, sent by the official SDK.

Records arrive redacted (sinks.redacted) and are only enqueued; one thread builds the
spans and hands them to a bounded BatchSpanProcessor, whose own thread exports them. A full queue
or a failed export drops spans, counted and logged at most once a minute, never waited on.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace import set_span_in_context as inside_of

from gateway import __version__
from gateway.background import Background
from gateway.config import Settings
from gateway.ids import tool_span_id
from gateway.items import ItemKind, provider_run
from gateway.mcp import otel as mcp_otel
from gateway.mcp.records import Execution
from gateway.protocols.registry import wire_of
from gateway.routing import Provider, provider_of
from gateway.sinks.otlp import spans
from gateway.sinks.otlp.contexts import caller, spawned_by
from gateway.sinks.otlp.exporters import build_exporter, quiet_sdk_logs
from gateway.sinks.otlp.ids import StepIds, trace_id_of
from gateway.step import RefusalRecord, StepRecord

log = logging.getLogger(__name__)

DropHook = Callable[[str, int], None]  # reason ("queue_full" | "export_failed"), spans
OPEN_TRACES = 10_000  # traces whose last step end and open tool calls are remembered
OPEN_CALLS = 256  # unanswered tool calls remembered per trace
DROP_LOG_SECONDS = 60.0
_Job = StepRecord | RefusalRecord | Execution | threading.Event | None
MCP_CALLS = 10_000  # MCP executions remembered until the step carrying their result


def _ignore(reason: str, count: int) -> None:
    return None


@dataclass(slots=True)
class TraceState:
    """What a trace's next step needs from its previous ones, in this process's memory."""

    last_end_ns: int | None = None
    # Tool calls not yet answered: call id -> (tool name, end of the step that emitted it).
    calls: OrderedDict[str, tuple[str | None, int]] = field(default_factory=OrderedDict)
    parent: Context | None = None  # the caller's span, when it sent a traceparent


class TraceMemory:
    """Bounded: the least recently used trace is forgotten first."""

    def __init__(self, limit: int = OPEN_TRACES) -> None:
        self._limit = limit
        self._traces: OrderedDict[str, TraceState] = OrderedDict()

    def get(self, trace_id: str) -> TraceState:
        state = self._traces.pop(trace_id, None) or TraceState()
        self._traces[trace_id] = state
        if len(self._traces) > self._limit:
            self._traces.popitem(last=False)
        return state


class _DropCounter:
    """Counts drops through the hook and logs a summary at most once a minute."""

    def __init__(self, hook: DropHook) -> None:
        self._hook = hook
        self._lock = threading.Lock()
        self._unlogged: dict[str, int] = {}
        self._logged_at: float | None = None
        self.total = 0

    def __call__(self, reason: str, count: int) -> None:
        if count <= 0:
            return
        self._hook(reason, count)
        with self._lock:
            self.total += count
            self._unlogged[reason] = self._unlogged.get(reason, 0) + count
            now = time.monotonic()
            if self._logged_at is not None and now - self._logged_at < DROP_LOG_SECONDS:
                return
            self._logged_at, summary = now, self._unlogged
            self._unlogged = {}
        log.warning(
            "OTLP export dropped spans: %s (loopwatch_otlp_dropped_total counts them all)",
            ", ".join(f"{n} {reason}" for reason, n in sorted(summary.items())),
        )


class _Counting(SpanExporter):
    """Counts what reaches the exporter, so the sink knows the processor's queue depth, and
    what the collector refused; shutting it down early cuts short an export's retries."""

    def __init__(self, inner: SpanExporter, dropped: _DropCounter) -> None:
        self._inner = inner
        self._dropped = dropped
        self._lock = threading.Lock()
        self._closed = False
        self.submitted = 0

    def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.submitted += len(batch)
        try:
            result = self._inner.export(batch)
        except Exception:
            log.debug("OTLP exporter raised", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._dropped("export_failed", len(batch))
        return result

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class OtlpSink:
    """A Sink exporting steps and refusals as spans; start() and close() bracket it."""

    def __init__(
        self,
        settings: Settings,
        *,
        on_drop: DropHook = _ignore,
        schedule_delay_millis: float = 2000,
    ) -> None:
        self._settings = settings
        self._capacity = settings.otlp_queue_size
        self._jobs: queue.Queue[_Job] = queue.Queue(self._capacity)
        self._dropped = _DropCounter(on_drop)
        self._exporter = _Counting(build_exporter(settings), self._dropped)
        self._ids = StepIds()
        self._traces = TraceMemory()
        self._providers: dict[tuple[str, str | None, str], Provider] = {}
        self._ended = 0  # spans handed to the processor (only the worker thread writes it)
        self._provider = TracerProvider(
            resource=Resource(
                {"service.name": settings.otlp_service_name, "service.version": __version__}
            ),
            id_generator=self._ids,
            shutdown_on_exit=False,
        )
        self._provider.add_span_processor(
            BatchSpanProcessor(
                self._exporter,
                max_queue_size=self._capacity,
                schedule_delay_millis=schedule_delay_millis,
                max_export_batch_size=min(512, self._capacity),
                export_timeout_millis=settings.otlp_timeout * 1000,
            )
        )
        self._tracer: Tracer = self._provider.get_tracer("loopwatch", __version__)
        # MCP attributes of executed model calls, by call id, for their `execute_tool` span.
        self._mcp: OrderedDict[str, spans.Attributes] = OrderedDict()
        self._owner: Background | None = None
        self._worker: threading.Thread | None = None

    @property
    def dropped_total(self) -> int:
        return self._dropped.total

    def start(self, owner: Background) -> None:
        quiet_sdk_logs(DROP_LOG_SECONDS)
        self._owner = owner
        self._worker = owner.thread("loopwatch-otlp", self._run)

    # The Sink, behind `Redacting`: called in its thread; O(1) and never raises.

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        self._enqueue(step)

    def request_refused(self, refusal: RefusalRecord) -> None:
        self._enqueue(refusal)

    def mcp_execution(self, execution: Execution, declared: bool = True) -> None:
        """Fires when an MCP tool call is answered (or refused): a joined one adds its
        attributes to its call's `execute_tool` span, another gets a span of its own."""
        if execution.call_id is None:
            self._enqueue(execution)
            return
        self._mcp[execution.call_id] = mcp_otel.attributes(execution)
        while len(self._mcp) > MCP_CALLS:
            self._mcp.popitem(last=False)

    def skipped(self, record: object) -> None:
        """A record `Redacting` had no room for: dropped before its spans were built."""
        joined = isinstance(record, Execution) and record.call_id is not None  # no span
        if isinstance(record, StepRecord | RefusalRecord | Execution) and not joined:
            self._dropped("queue_full", 1)

    def _enqueue(self, job: StepRecord | RefusalRecord | Execution) -> None:
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            self._dropped("queue_full", 1)

    # Lifecycle, from threads (asyncio.to_thread): both may block up to `timeout`.

    def flush(self, timeout: float = 10.0) -> bool:
        """Everything submitted so far is exported (or dropped) when this returns True."""
        reached = threading.Event()
        try:
            self._jobs.put(reached, timeout=timeout)
        except queue.Full:
            return False
        if not reached.wait(timeout):
            return False
        return self._provider.force_flush(int(timeout * 1000))

    def close(self, timeout: float = 5.0) -> None:
        """Export what is queued within `timeout`; what is left then is dropped, counted."""
        deadline = time.monotonic() + timeout
        if self._worker is not None and self._worker.is_alive():
            with contextlib.suppress(queue.Full):
                self._jobs.put(None, timeout=timeout)
            self._worker.join(max(0.0, deadline - time.monotonic()))
        assert self._owner is not None, "closed after start()"
        finisher = self._owner.thread("loopwatch-otlp-shutdown", self._provider.shutdown)
        finisher.join(max(0.0, deadline - time.monotonic()))
        if finisher.is_alive():  # a dead or slow collector: stop retrying, count the rest
            self._exporter.shutdown()
            finisher.join(1.0)
        self._dropped("export_failed", self._ended - self._exporter.submitted)
        self._dropped("queue_full", self._jobs.qsize())

    # The worker thread.

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                if isinstance(job, threading.Event):
                    job.set()
                elif isinstance(job, StepRecord):
                    self._export_step(job)
                elif isinstance(job, Execution):
                    self._export_execution(job)
                else:
                    self._export_refusal(job)
            except Exception:  # a bug here must not stop later exports
                log.exception("OTLP export of a record failed")

    def _export_step(self, step: StepRecord) -> None:
        state = self._traces.get(step.trace_id)
        parent = caller(step.traceparent) if step.traceparent else None
        parent = parent or spawned_by(step.lineage)
        state.parent = parent or state.parent
        main = spans.step_span(step, self._provider_of(step))
        if self._settings.otlp_capture_content:
            main.attributes.update(self._content(step))
        main = replace(main, children=self._provider_tools(step, main.end_ns))
        plans = [*self._tool_spans(step, state, main.start_ns), main]
        state.last_end_ns = max(state.last_end_ns or 0, main.end_ns)
        for item in step.output_items:
            # Only calls the agent answers in a later request: a tool the provider ran is
            # over with its answer (its span is the step's child), whatever comes after.
            if item.kind is ItemKind.TOOL_CALL and item.call_id and not provider_run(item):
                state.calls[item.call_id] = (item.tool_name, main.end_ns)
                while len(state.calls) > OPEN_CALLS:
                    state.calls.popitem(last=False)
        self._emit(plans, parent, step.trace_id)

    def _tool_spans(
        self, step: StepRecord, state: TraceState, start_ns: int
    ) -> list[spans.SpanPlan]:
        """An `execute_tool` span per tool result this request carries, from the end of the
        step that emitted the call, or the record's tool time when that step was not seen."""
        tool_ms = step.tool_ms
        plans = []
        for item in step.input_items:
            if item.kind is not ItemKind.TOOL_RESULT or not item.call_id or provider_run(item):
                continue  # a provider's result sent back is no tool time of the agent's
            name, emitted_at = state.calls.pop(item.call_id, (item.tool_name, None))
            if emitted_at is None and tool_ms is not None:
                emitted_at = start_ns - int(tool_ms * 1_000_000)
            if emitted_at is None or emitted_at > start_ns:
                continue  # its call was seen by another replica, or never
            span_id = tool_span_id(step.trace_id, item.call_id)
            plan = spans.tool_span(item.call_id, name, emitted_at, start_ns, span_id=span_id)
            plan.attributes.update(self._mcp.pop(item.call_id, {}))
            plans.append(plan)
        return plans

    def _provider_tools(self, step: StepRecord, end_ns: int) -> tuple[spans.SpanPlan, ...]:
        """The tools the provider ran in this answer, with the MCP attributes of any the
        gateway's MCP proxy saw run (the provider's connector may reach a server through it)."""
        ran = spans.provider_tool_spans(step.output_items, end_ns)
        for plan in ran:
            call_id = plan.attributes.get("gen_ai.tool.call.id")
            if isinstance(call_id, str):
                plan.attributes.update(self._mcp.pop(call_id, {}))
        return ran

    def _export_execution(self, execution: Execution) -> None:
        """`tools/call {name}`: an MCP execution joined to no model call."""
        start = spans.nanoseconds(execution.started_at)
        end = start + int((execution.duration_ms or 0.0) * 1_000_000)
        attributes: spans.Attributes = dict(mcp_otel.own_span_attributes(execution))
        name = execution.tool
        error = "tool_error" if execution.is_error else None
        plan = spans.SpanPlan(f"tools/call {name}", True, start, end, attributes, error=error)
        trace = execution.trace_id or f"mcp-{execution.id}"
        self._emit([plan], self._traces.get(trace).parent, trace)

    def _content(self, step: StepRecord) -> spans.Attributes:
        """Messages exactly as the recorder stores them: redacted, cut, no reasoning text
        (the step arrives so)."""
        return spans.content_attributes(step, step.input_items, step.output_items)

    def _export_refusal(self, refusal: RefusalRecord) -> None:
        state = self._traces.get(refusal.trace_id)
        plan = spans.refusal_span(
            refusal.trace_id,
            refusal.created_at,
            refusal.violations,
            refusal.budget_exceeded,
        )
        self._emit([plan], state.parent, refusal.trace_id)

    def _emit(self, plans: list[spans.SpanPlan], parent: Context | None, trace_id: str) -> None:
        """Start and end each planned span, unless the processor's queue has no room for
        them all: spans are never dropped by the SDK unseen, only here, counted."""
        count = sum(1 + len(plan.children) for plan in plans)
        if self._ended + count - self._exporter.submitted > self._capacity:
            self._dropped("queue_full", count)
            return
        for plan in plans:
            self._ended += self._start_and_end(plan, parent, trace_id)

    def _start_and_end(self, plan: spans.SpanPlan, parent: Context | None, trace_id: str) -> int:
        """The spans that went to the processor: this one and its children when sampled,
        none when not (a caller's traceparent with the sampled flag off is respected)."""
        if parent is None:
            self._ids.next_trace_id = trace_id_of(trace_id)
        self._ids.next_span_id = plan.span_id
        span = self._tracer.start_span(
            plan.name,
            context=parent if parent is not None else Context(),
            kind=SpanKind.CLIENT if plan.client else SpanKind.INTERNAL,
            attributes=plan.attributes,
            start_time=plan.start_ns,
        )
        self._ids.next_trace_id = self._ids.next_span_id = None
        if not span.is_recording():
            return 0
        for name, attributes in plan.events:
            span.add_event(name, attributes, timestamp=plan.end_ns)
        if plan.error is not None:
            span.set_status(Status(StatusCode.ERROR, plan.error))
        span.end(end_time=plan.end_ns)
        return 1 + sum(self._start_and_end(c, inside_of(span), trace_id) for c in plan.children)

    def _provider_of(self, step: StepRecord) -> Provider:
        wire = wire_of(step.protocol).claiming(step.path)
        key = (step.protocol, step.model, wire.protocol)
        found = self._providers.get(key)
        if found is None:
            if len(self._providers) >= 1024:  # model names are the client's: bounded
                self._providers.clear()
            found = self._providers[key] = provider_of(self._settings, wire, step.model)
        return found
