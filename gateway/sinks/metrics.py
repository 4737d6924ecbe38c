"""Every Prometheus instrument, declared in one place on a per-app registry, and the sink
that feeds them from finished steps and refusals. Labels are low-cardinality: never ids.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from gateway.items import StopReason, Violation, ViolationKind
from gateway.routing import Provider
from gateway.runs.abandonment import AbandonWatch
from gateway.step import RefusalRecord, StepRecord

OTHER_MODEL = "other"
UNKNOWN_MODEL = "unknown"
# Bucket boundaries the OpenTelemetry GenAI conventions advise for these instruments.
GENAI_SECONDS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
GENAI_TOKENS = tuple(float(4**i) for i in range(14))  # 1, 4, 16, ... 67108864
REQUEST_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0)
OVERHEAD_SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
BATCH_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
TRACE_STEPS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233)
# The agent's time between steps: a quick function call up to a human in the loop.
TOOL_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
BUDGETS = {
    ViolationKind.STEP_BUDGET_EXCEEDED: "steps",
    ViolationKind.TOKEN_BUDGET_EXCEEDED: "tokens",
    ViolationKind.COST_BUDGET_EXCEEDED: "cost",
    ViolationKind.TIME_BUDGET_EXCEEDED: "time",
}
# A trace is finished when the model gives its final answer (or refuses to answer).
FINAL_STOPS = frozenset({StopReason.COMPLETED, StopReason.REFUSAL})
UPSTREAM_CODES = {"upstream_timeout": "timeout", "upstream_unreachable": "unreachable"}
MODEL_PROTOCOLS = ("chat", "responses", "messages")
# The classic text format: every Prometheus version parses it (names here are all ASCII).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The GenAI labels beyond operation and model: who answered, and with which model.
GENAI_LABELS = ("gen_ai_provider_name", "server_address", "gen_ai_response_model")
ProviderOf = Callable[[StepRecord], Provider]
OPEN_TRACES = 10_000  # traces whose step count is kept in memory, least recent evicted
NANO_USD = Decimal(1_000_000_000)  # the records count dollars in nano-dollars


class RecorderGauges(Protocol):
    """What the metrics read from the recorder at scrape time."""

    @property
    def queue_depth(self) -> int: ...

    @property
    def dropped_total(self) -> int: ...

    @property
    def write_errors_total(self) -> int: ...

    @property
    def wakeups_total(self) -> int: ...

    def new_batches(self) -> list[float]:
        """Durations of the store batches written since the last call."""
        ...


class _RecorderCollector(Collector):
    """Reads the recorder's own counters at scrape time (zeros until one is attached)."""

    def __init__(self) -> None:
        self.recorder: RecorderGauges | None = None

    def collect(self) -> Iterable[Metric]:
        rec = self.recorder
        yield GaugeMetricFamily(
            "loopwatch_recorder_queue_depth",
            "Records waiting to be written to the store.",
            value=rec.queue_depth if rec else 0,
        )
        yield CounterMetricFamily(
            "loopwatch_recorder_dropped",
            "Records lost: queue full, unwritable, or still queued at shutdown.",
            value=rec.dropped_total if rec else 0,
        )
        yield CounterMetricFamily(
            "loopwatch_recorder_write_errors",
            "Failed store writes (each retried or isolated).",
            value=rec.write_errors_total if rec else 0,
        )
        yield CounterMetricFamily(
            "loopwatch_recorder_wakeups",
            "Times the recorder woke to read the spool (it sleeps until a record comes).",
            value=rec.wakeups_total if rec else 0,
        )


class ModelNames:
    """Bounds the model label: the first `limit` distinct names keep theirs, later ones share
    "other"."""

    def __init__(self, limit: int, redact: Callable[[str], str] | None = None) -> None:
        self._limit = limit
        # /metrics needs no token: a name that holds a secret is shown redacted.
        self._redact = redact
        self._known: dict[str, str] = {}

    def label(self, model: str | None) -> str:
        if not model:
            return UNKNOWN_MODEL
        known = self._known.get(model)
        if known is not None:
            return known
        if len(self._known) < self._limit:
            label = self._known[model] = self._redact(model) if self._redact else model
            return label
        return OTHER_MODEL


def status_class(status: int | None) -> str:
    return "none" if status is None else f"{status // 100}xx"


def upstream_error_class(step: StepRecord) -> str | None:
    """ "timeout"/"unreachable" when the provider never answered, else its 4xx/5xx class."""
    code = (step.error or {}).get("code")
    if isinstance(code, str) and code in UPSTREAM_CODES:
        return UPSTREAM_CODES[code]
    if step.http_status is not None and step.http_status >= 400:
        return status_class(step.http_status)
    return None


class MetricsSink:
    """All of Loopwatch's instruments on one registry, fed as a Sink on the event loop."""

    def __init__(
        self,
        *,
        max_models: int = 50,
        redact: Callable[[str], str] | None = None,
        provider_of: ProviderOf | None = None,
        idle_seconds: float = 300.0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # Traces that may end abandoned, judged at each scrape by the status every surface uses.
        self._watch = AbandonWatch(idle_seconds, OPEN_TRACES)
        self.models = ModelNames(max_models, redact)
        self._provider_of = provider_of
        self._recorder = _RecorderCollector()
        self.registry.register(self._recorder)
        self._trace_steps: OrderedDict[str, int] = OrderedDict()
        self._trace_ends: OrderedDict[str, datetime] = OrderedDict()  # for tool time
        self._children: dict[tuple[object, ...], Any] = {}
        self._providers: dict[tuple[str, str | None, str], tuple[str, str]] = {}
        self._declare_loopwatch()
        self._declare_streams_and_background()
        self._declare_genai()
        self._declare_run()
        self._declare_mcp()
        self._declare_exchange()
        self._preinitialize()

    def _declare_loopwatch(self) -> None:
        r = self.registry
        self.requests = Counter(
            "loopwatch_requests",
            "Proxied requests (steps) by outcome.",
            ["protocol", "model", "status", "stop_reason"],
            registry=r,
        )
        self.request_duration = Histogram(
            "loopwatch_request_duration_seconds",
            "Whole request, first byte in to last byte out.",
            ["protocol", "model"],
            buckets=REQUEST_SECONDS,
            registry=r,
        )
        self.overhead = Histogram(
            "loopwatch_overhead_seconds",
            "Time spent in Loopwatch itself, provider excluded.",
            ["protocol"],
            buckets=OVERHEAD_SECONDS,
            registry=r,
        )
        self.violations = Counter(
            "loopwatch_violations",
            "Violations found on steps and refused requests.",
            ["kind"],
            registry=r,
        )
        self.budget_refusals = Counter(
            "loopwatch_budget_refusals",
            "Requests refused because a trace budget is spent.",
            ["budget"],
            registry=r,
        )
        self.unbudgeted = Counter(
            "loopwatch_budget_unbudgeted",
            "Requests forwarded without their budget: the ledger did not answer in time.",
            registry=r,
        )
        self.refusals = Counter(
            "loopwatch_refused_requests",
            "Requests refused before the provider, by reason.",
            ["reason"],
            registry=r,
        )

    def _declare_streams_and_background(self) -> None:
        r = self.registry
        self.interrupted = Counter(
            "loopwatch_stream_interrupted",
            "Responses that ended without their completion.",
            ["protocol"],
            registry=r,
        )
        self.cancelled = Counter(
            "loopwatch_stream_cancelled",
            "Responses abandoned by the client mid-way.",
            ["protocol"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "loopwatch_upstream_errors",
            "Provider failures: 4xx, 5xx, unreachable, timeout.",
            ["protocol", "class"],
            registry=r,
        )
        self.in_flight = Gauge(
            "loopwatch_streams_in_flight",
            "Provider responses being relayed right now.",
            ["protocol"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "loopwatch_recorder_batch_seconds",
            "Time to redact and write one recorder batch.",
            buckets=BATCH_SECONDS,
            registry=r,
        )
        self.trace_steps = Histogram(
            "loopwatch_trace_steps",
            "Steps per finished trace (final answer or budget refusal).",
            buckets=TRACE_STEPS,
            registry=r,
        )
        self.webhook_dropped = Counter(
            "loopwatch_webhook_dropped",
            "Violation events not delivered to a webhook.",
            ["reason"],
            registry=r,
        )
        self.retention_purged = Counter(
            "loopwatch_retention_purged_traces",
            "Traces deleted by retention (retention_days), with all their rows.",
            registry=r,
        )
        self.abandoned = Counter(
            "loopwatch_traces_abandoned",
            "Agent runs whose last step asked for tool calls that never got a result "
            "(idle past trace_idle_seconds), as this process saw them.",
            registry=r,
        )
        self.otlp_dropped = Counter(
            "loopwatch_otlp_dropped",
            "Spans (or steps not yet made spans) not delivered to the OTLP collector.",
            ["reason"],
            registry=r,
        )

    def _declare_run(self) -> None:
        r = self.registry
        self.cost_usd = Counter(
            "loopwatch_cost_usd",
            "Cost of proxied steps in US dollars, where the model's price is known.",
            ["model"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "loopwatch_tool_seconds",
            "Agent time between a step's response and its trace's next request (tools).",
            buckets=TOOL_SECONDS,
            registry=r,
        )

    def _declare_mcp(self) -> None:
        self.mcp_calls = Counter(
            "loopwatch_mcp_calls",
            "MCP tools/call requests by server, tool and outcome (ok, tool_error, rpc_error, "
            "refused); a tool the server never listed counts as `other`.",
            ["server", "tool", "outcome"],
            registry=self.registry,
        )
        self.mcp_call_duration = Histogram(
            "loopwatch_mcp_call_duration_seconds",
            "Time from an MCP tools/call request to its final response, by server.",
            ["server"],
            registry=self.registry,
        )

    def mcp_call(self, server: str, tool: str, outcome: str, seconds: float | None) -> None:
        self._child(self.mcp_calls, server, tool, outcome).inc()
        if seconds is not None:
            self._child(self.mcp_call_duration, server).observe(seconds)

    def mcp_violation(self, kind: str) -> None:
        """A violation found on the MCP side, counted with the model's."""
        self._child(self.violations, kind).inc()

    def _declare_genai(self) -> None:
        r = self.registry
        self.token_usage = Histogram(
            "gen_ai_client_token_usage",
            "Input and output tokens used (OpenTelemetry GenAI).",
            ["gen_ai_operation_name", "gen_ai_request_model", *GENAI_LABELS, "gen_ai_token_type"],
            buckets=GENAI_TOKENS,
            registry=r,
        )
        self.operation_duration = Histogram(
            "gen_ai_client_operation_duration_seconds",
            "GenAI operation duration.",
            ["gen_ai_operation_name", "gen_ai_request_model", *GENAI_LABELS, "error_type"],
            buckets=GENAI_SECONDS,
            registry=r,
        )
        self.time_to_first_chunk = Histogram(
            "gen_ai_client_operation_time_to_first_chunk_seconds",
            "Time to the first response chunk of a streamed GenAI operation.",
            ["gen_ai_operation_name", "gen_ai_request_model", *GENAI_LABELS],
            buckets=GENAI_SECONDS,
            registry=r,
        )

    def _declare_exchange(self) -> None:
        self.exchange_anomalies = Counter(
            "loopwatch_exchange_anomalies",
            "Illegal transitions the exchange noted and ignored, by kind: `event` (an I/O "
            "event its phase does not allow), `delta` (a stream delta out of order).",
            ["kind"],
            registry=self.registry,
        )
        for kind in ("event", "delta"):  # the exchange's AnomalyKind (sinks never import it)
            self.exchange_anomalies.labels(kind)

    def _preinitialize(self) -> None:
        """Series alerts and panels rely on exist at 0 before the first event."""
        for kind in ViolationKind:
            self.violations.labels(kind.value)
        for budget in BUDGETS.values():
            self.budget_refusals.labels(budget)
        for reason in ("pairing", "budget", "loop"):
            self.refusals.labels(reason)
        for reason in ("queue_full", "failed"):
            self.webhook_dropped.labels(reason)
        for reason in ("queue_full", "export_failed"):
            self.otlp_dropped.labels(reason)
        for protocol in (*MODEL_PROTOCOLS, "passthrough"):
            self.interrupted.labels(protocol)
            self.cancelled.labels(protocol)
            self.in_flight.labels(protocol)

    def _child(self, metric: Any, *labels: str) -> Any:
        """A labelled child, cached: `labels()` costs more than the observation itself and
        runs several times for every step (label values are bounded, so is the cache)."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def watch_recorder(self, recorder: RecorderGauges) -> None:
        self._recorder.recorder = recorder

    def stream_started(self, protocol: str) -> None:
        self._child(self.in_flight, protocol).inc()

    def stream_ended(self, protocol: str) -> None:
        self._child(self.in_flight, protocol).dec()

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        model = self.models.label(step.model)
        protocol = step.protocol
        stop = step.stop_reason.value
        self._child(self.requests, protocol, model, status_class(step.http_status), stop).inc()
        self._child(self.overhead, protocol).observe(max(overhead_seconds, 0.0))
        if step.latency_ms is not None:
            self._child(self.request_duration, protocol, model).observe(step.latency_ms / 1000)
        if step.stop_reason is StopReason.INTERRUPTED:
            self._child(self.interrupted, protocol).inc()
        elif step.stop_reason is StopReason.CANCELLED:
            self._child(self.cancelled, protocol).inc()
        error_class = upstream_error_class(step)
        if error_class is not None:
            self._child(self.upstream_errors, protocol, error_class).inc()
        self._count_violations(step.violations)
        if protocol in MODEL_PROTOCOLS:
            self._observe_genai(step, model, error_class or "")
            self._count_trace_step(step)
            cost = None if step.cost_nano is None else Decimal(step.cost_nano) / NANO_USD
            self.step_costed(step.model, cost, self._tool_ms(step))
            self._track_open_calls(step)

    def _track_open_calls(self, step: StepRecord) -> None:
        self._watch.step(step)

    def count_abandoned(self, now: datetime | None = None) -> None:
        """Traces idle past the threshold with tool calls unanswered: counted once each."""
        count = self._watch.abandoned(now or datetime.now(UTC))
        if count:
            self.abandoned.inc(count)

    def _tool_ms(self, step: StepRecord) -> float | None:
        """Time between the trace's previous response end and this request (this process's
        memory, bounded); None for a trace's first step here."""
        ends = self._trace_ends
        previous = ends.pop(step.trace_id, None)
        ends[step.trace_id] = step.started_at + timedelta(milliseconds=step.latency_ms or 0)
        if len(ends) > OPEN_TRACES:
            ends.popitem(last=False)
        if previous is None:
            return None
        return max(0.0, (step.started_at - previous).total_seconds() * 1000)

    def step_costed(
        self, model: str | None, cost_usd: Decimal | None, tool_ms: float | None
    ) -> None:
        """A finished step's cost (None: unknown price, not counted) and the tool time
        before it (None: its trace's first step)."""
        if cost_usd is not None and cost_usd > 0:
            self.cost_usd.labels(self.models.label(model)).inc(float(cost_usd))
        if tool_ms is not None and tool_ms >= 0:
            self.tool_seconds.observe(tool_ms / 1000)

    def request_refused(self, refusal: RefusalRecord) -> None:
        self._watch.refusal(refusal)
        self._count_violations(refusal.violations)
        budgets = {BUDGETS[v.kind] for v in refusal.violations if v.kind in BUDGETS}
        for budget in sorted(budgets):
            self._child(self.budget_refusals, budget).inc()
        is_budget = bool(budgets) or refusal.budget_exceeded
        known = refusal.kind in ("loop", "request")
        reason = "budget" if is_budget else (refusal.kind if known else "pairing")
        self._child(self.refusals, reason).inc()
        if is_budget:  # the agent cannot go on: its trace is over
            steps = self._trace_steps.pop(refusal.trace_id, 0)
            if steps:
                self.trace_steps.observe(steps)

    def _count_violations(self, violations: list[Violation]) -> None:
        for violation in violations:
            self._child(self.violations, violation.kind.value).inc()

    def _observe_genai(self, step: StepRecord, model: str, error_type: str) -> None:
        operation = "chat"  # all three wire protocols are chat-style generation
        # One model name is recorded per step: the response's when the provider gave it.
        labels = (operation, model, *self._who(step), model)
        if step.usage.prompt_tokens is not None:
            self._child(self.token_usage, *labels, "input").observe(step.usage.prompt_tokens)
        if step.usage.completion_tokens is not None:
            self._child(self.token_usage, *labels, "output").observe(step.usage.completion_tokens)
        if step.latency_ms is not None:
            self._child(self.operation_duration, *labels, error_type).observe(
                step.latency_ms / 1000
            )
        if step.stream and step.ttft_ms is not None and not error_type:
            self._child(self.time_to_first_chunk, *labels).observe(step.ttft_ms / 1000)

    def _who(self, step: StepRecord) -> tuple[str, str]:
        """Provider name and server address: bounded by the configured upstreams (cached,
        as routes resolve the same for a protocol, model and path every time)."""
        if self._provider_of is None:
            return ("openai" if step.protocol != "messages" else "anthropic", "")
        key = (step.protocol, step.model, step.path)
        found = self._providers.get(key)
        if found is None:
            provider = self._provider_of(step)
            found = (provider.name, provider.address)
            if len(self._providers) < 4096:
                self._providers[key] = found
        return found

    def _count_trace_step(self, step: StepRecord) -> None:
        """Steps since the trace's last final answer, counted in this process's memory."""
        steps = self._trace_steps.pop(step.trace_id, 0) + 1
        if step.stop_reason in FINAL_STOPS:
            self.trace_steps.observe(steps)
            return
        self._trace_steps[step.trace_id] = steps  # re-inserted last: most recent
        if len(self._trace_steps) > OPEN_TRACES:
            self._trace_steps.popitem(last=False)

    def exposition(self) -> bytes:
        self.count_abandoned()
        recorder = self._recorder.recorder
        if recorder is not None:  # batches are written by the recorder, maybe in its process
            for seconds in recorder.new_batches():
                self.batch_seconds.observe(seconds)
        return generate_latest(self.registry)


def find_metrics(sinks: Iterable[object]) -> MetricsSink | None:
    return next((s for s in sinks if isinstance(s, MetricsSink)), None)


@contextlib.contextmanager
def relaying(sinks: Iterable[object], protocol: str) -> Iterator[None]:
    """Counts a provider response in `loopwatch_streams_in_flight` while it is relayed."""
    metrics = find_metrics(sinks)
    if metrics is not None:
        metrics.stream_started(protocol)
    try:
        yield
    finally:
        if metrics is not None:
            metrics.stream_ended(protocol)


def count_anomalies(sinks: Iterable[object], kinds: Iterable[str]) -> None:
    """Counts the exchange's anomalies in `loopwatch_exchange_anomalies_total{kind}`."""
    metrics = find_metrics(sinks)
    if metrics is not None:
        for kind in kinds:
            metrics._child(metrics.exchange_anomalies, kind).inc()


def metrics_response(sinks: Iterable[object]) -> web.Response:
    """GET /metrics in the Prometheus text format."""
    metrics = find_metrics(sinks)
    body = metrics.exposition() if metrics is not None else b""
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
