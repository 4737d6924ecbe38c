"""The sink that feeds the instruments (gateway.sinks.instruments) from finished steps and
refusals, and the /metrics exposition. Run semantics come from gateway.runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from gateway.items import PROVIDER, Item, ItemKind, Violation, provider_run
from gateway.mcp.records import Execution, McpViolation
from gateway.protocols.registry import wire_of
from gateway.routing import Provider
from gateway.sinks.collectors import OPEN_TRACES, RecorderGauges, ScrapeTime
from gateway.sinks.instruments import (
    BUDGETS,
    CLIENT_TOOL,
    PROVIDER_TOOL_TYPES,
    Instruments,
    ModelNames,
)
from gateway.sinks.series import MAX_KINDS, StepKind, StepSeries, build_series
from gateway.step import RefusalRecord, StepRecord

__all__ = ["MetricsSink", "ModelNames", "metrics_response"]

UPSTREAM_CODES = {"upstream_timeout": "timeout", "upstream_unreachable": "unreachable"}
# The classic text format: every Prometheus version parses it (names here are all ASCII).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ProviderOf = Callable[[StepRecord], Provider]


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
    """Feeds Loopwatch's instruments as a Sink on the event loop."""

    def __init__(
        self,
        *,
        max_models: int = 50,
        redact: Callable[[str], str] | None = None,
        provider_of: ProviderOf | None = None,
        idle_seconds: float = 300.0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.instruments = Instruments(self.registry)
        self._scrape = ScrapeTime(self.instruments, idle_seconds)
        self.models = ModelNames(max_models, redact)
        self._provider_of = provider_of
        self._trace_steps: OrderedDict[str, int] = OrderedDict()
        self._children: dict[tuple[object, ...], Any] = {}
        self._providers: dict[tuple[str, str | None, str], tuple[str, str]] = {}
        self._by_kind: dict[tuple[object, ...], StepSeries] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        """A labelled child, cached: `labels()` costs more than the observation itself and
        runs several times for every step (label values are bounded, so is the cache)."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def watch_recorder(self, recorder: RecorderGauges) -> None:
        self._scrape.recorder.recorder = recorder

    def relay_started(self, protocol: str) -> None:
        """Counts a provider response in `loopwatch_streams_in_flight` while it is relayed."""
        self._child(self.instruments.in_flight, protocol).inc()

    def relay_ended(self, protocol: str) -> None:
        self._child(self.instruments.in_flight, protocol).dec()

    def request_unbudgeted(self) -> None:
        self.instruments.unbudgeted.inc()

    def subagent_linked(self, via: str) -> None:
        self._child(self.instruments.subagent_runs, via).inc()

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        series = self._series(step)
        series.requests.inc()
        series.overhead.observe(max(overhead_seconds, 0.0))
        latency = step.latency_ms
        if latency is not None:
            series.duration.observe(latency / 1000)
        if series.stopped is not None:
            series.stopped.inc()
        if series.upstream_error is not None:
            series.upstream_error.inc()
        if step.violations:
            self._count_violations(step.violations)
        if step.output_items:
            self._count_tool_calls(step.output_items)
        genai = series.genai
        if genai is None:
            return
        usage = step.usage
        if usage.prompt_tokens is not None:
            genai.input_tokens.observe(usage.prompt_tokens)
        if usage.completion_tokens is not None:
            genai.output_tokens.observe(usage.completion_tokens)
        if latency is not None:
            genai.duration.observe(latency / 1000)
        if step.stream and step.ttft_ms is not None and not series.error_type:
            genai.first_chunk.observe(step.ttft_ms / 1000)
        self._count_trace_step(step)
        if step.cost_nano is not None and step.cost_nano > 0:
            # Exact: a whole number of nano-dollars over 1e9 rounds as the Decimal would.
            self._cost_child(series.model).inc(step.cost_nano / 1e9)
        if step.tool_ms is not None and step.tool_ms >= 0:
            self.instruments.tool_seconds.observe(step.tool_ms / 1000)
        self._track_open_calls(step)

    def _series(self, step: StepRecord) -> StepSeries:
        """The children this step feeds, found by its kind (built once per kind)."""
        error_class = upstream_error_class(step)
        key = (
            step.protocol,
            step.model,
            step.path,
            step.http_status,
            step.stop_reason,
            error_class,
        )
        series = self._by_kind.get(key)
        if series is None:
            kind = StepKind(
                protocol=step.protocol,
                model=self.models.label(step.model),
                status=status_class(step.http_status),
                stop=step.stop_reason,
                error_class=error_class,
                who=self._who(step),
            )
            series = build_series(self.instruments, kind, self._child)
            if len(self._by_kind) < MAX_KINDS:
                self._by_kind[key] = series
        return series

    def _cost_child(self, model_label: str) -> Any:
        return self._child(self.instruments.cost_usd, model_label)

    def _track_open_calls(self, step: StepRecord) -> None:
        self._scrape.watch.step(step)

    def count_abandoned(self, now: datetime | None = None) -> None:
        """Traces idle past the threshold with tool calls unanswered: counted once each."""
        self._scrape.count_abandoned(now)

    def mcp_execution(self, execution: Execution, declared: bool) -> None:
        """An MCP tool call, by server and tool (a tool its server does not declare is
        "other": the label stays bounded)."""
        m = self.instruments
        tool = execution.tool if declared else "other"
        outcome = execution.outcome or "rpc_error"
        self._child(m.mcp_calls, execution.server, tool, outcome).inc()
        if execution.duration_ms is not None:
            self._child(m.mcp_call_duration, execution.server).observe(execution.duration_ms / 1000)

    def mcp_violation(self, violation: McpViolation) -> None:
        """A violation found on the MCP side, counted with the model's."""
        self._child(self.instruments.violations, violation.kind).inc()

    def exchange_anomalies(self, step: StepRecord, kinds: Iterable[str]) -> None:
        """Counts the exchange's anomalies in `loopwatch_exchange_anomalies_total{kind}`."""
        for kind in kinds:
            self._child(self.instruments.exchange_anomalies, kind).inc()

    def request_refused(self, refusal: RefusalRecord) -> None:
        self._scrape.watch.refusal(refusal)
        self._count_violations(refusal.violations)
        budgets = {BUDGETS[v.kind] for v in refusal.violations if v.kind in BUDGETS}
        for budget in sorted(budgets):
            self._child(self.instruments.budget_refusals, budget).inc()
        is_budget = bool(budgets) or refusal.budget_exceeded
        known = refusal.kind in ("loop", "request", "reasoning")
        reason = "budget" if is_budget else (refusal.kind if known else "pairing")
        self._child(self.instruments.refusals, reason).inc()
        if is_budget:  # the agent cannot go on: its trace is over
            steps = self._trace_steps.pop(refusal.trace_id, 0)
            if steps:
                self.instruments.trace_steps.observe(steps)

    def _count_tool_calls(self, items: Iterable[Item]) -> None:
        """The answer's calls that run: not another choice's (`n > 1`), not cut off."""
        for item in items:
            if item.kind is not ItemKind.TOOL_CALL:
                continue
            if item.attrs.get("choice") or item.attrs.get("incomplete"):
                continue
            self._child(self.instruments.tool_calls, *tool_call_labels(item)).inc()

    def _count_violations(self, violations: Iterable[Violation]) -> None:
        for violation in violations:
            self._child(self.instruments.violations, violation.kind.value).inc()

    def _who(self, step: StepRecord) -> tuple[str, str]:
        """Provider name and server address: bounded by the configured upstreams (cached,
        as routes resolve the same for a protocol, model and path every time)."""
        if self._provider_of is None:
            return (wire_of(step.protocol).provider, "")
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
        if step.stop_reason.final:
            self.instruments.trace_steps.observe(steps)
            return
        self._trace_steps[step.trace_id] = steps  # re-inserted last: most recent
        if len(self._trace_steps) > OPEN_TRACES:
            self._trace_steps.popitem(last=False)

    def exposition(self) -> bytes:
        self._scrape.collect()
        return generate_latest(self.registry)


def tool_call_labels(item: Item) -> tuple[str, str]:
    """(executed_by, tool_type), the tool type from a bounded set (else `other`)."""
    if not provider_run(item):
        return CLIENT_TOOL
    tool_type = item.attrs.get("tool_type")
    if isinstance(tool_type, str) and tool_type in PROVIDER_TOOL_TYPES:
        return PROVIDER, tool_type
    return PROVIDER, "other"


def metrics_response(metrics: MetricsSink | None) -> web.Response:
    """GET /metrics in the Prometheus text format."""
    body = metrics.exposition() if metrics is not None else b""
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
