"""Every Prometheus instrument Loopwatch exposes, declared once on a per-app registry, and
the bound on the model label. Labels are low-cardinality: never ids.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.items import ViolationKind
from gateway.protocols.registry import ADAPTERS

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
MODEL_PROTOCOLS = tuple(ADAPTERS)
# The `tool_type` label of a call the provider ran: one its adapter declares, else `other`.
PROVIDER_TOOL_TYPES: frozenset[str] = frozenset().union(
    *(adapter.provider_tool_types for adapter in ADAPTERS.values())
)
CLIENT_TOOL = ("client", "function")  # the labels of a call the agent runs
# The GenAI labels beyond operation and model: who answered, and with which model.
GENAI_LABELS = ("gen_ai_provider_name", "server_address", "gen_ai_response_model")


# The exchange's AnomalyKind values (sinks never import the exchange; a test holds them equal).
ANOMALY_KINDS = ("event", "delta")


class ModelNames:
    """Bounds the model label: the first `limit` distinct names keep theirs, later ones share
    "other"."""

    def __init__(self, limit: int, redact: Callable[[str], str] | None = None) -> None:
        self._limit = limit
        # /metrics needs no token: a name that holds a secret is shown redacted. A label, not
        # a record: each distinct name (at most `limit`) is redacted once, on the event loop,
        # by the gateway's one redactor; records reach the other exporters via sinks.redacted.
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


class Instruments:
    """The instruments on one registry; series that alerts and panels rely on exist at 0."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._declare_loopwatch()
        self._declare_streams()
        self._declare_background()
        self._declare_genai()
        self._declare_run()
        self._declare_mcp()
        self._declare_exchange()
        self._declare_subagents()
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

    def _declare_streams(self) -> None:
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

    def _declare_background(self) -> None:
        r = self.registry
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
        self.tool_calls = Counter(
            "loopwatch_tool_calls",
            "Tool calls in models' answers, by who runs them (`client`: the agent, or "
            "`provider`: inside its answer) and tool type (`function` for the agent's; the "
            "provider's `web_search`, `code_execution`, `mcp`, ... or `other`).",
            ["executed_by", "tool_type"],
            registry=r,
        )

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

    def _declare_subagents(self) -> None:
        self.subagent_runs = Counter(
            "loopwatch_subagent_runs",
            "Runs linked to the run whose tool call started them (sub-agents), by how the "
            "link was known: `header`, `traceparent` or `content`.",
            ["via"],
            registry=self.registry,
        )

    def _declare_exchange(self) -> None:
        self.exchange_anomalies = Counter(
            "loopwatch_exchange_anomalies",
            "Illegal transitions the exchange noted and ignored, by kind: `event` (an I/O "
            "event its phase does not allow), `delta` (a stream delta out of order).",
            ["kind"],
            registry=self.registry,
        )
        for kind in ANOMALY_KINDS:
            self.exchange_anomalies.labels(kind)

    def _preinitialize(self) -> None:
        """Series alerts and panels rely on exist at 0 before the first event."""
        for kind in ViolationKind:
            self.violations.labels(kind.value)
        for budget in BUDGETS.values():
            self.budget_refusals.labels(budget)
        for reason in ("pairing", "budget", "loop", "reasoning"):
            self.refusals.labels(reason)
        for via in ("header", "traceparent", "content"):
            self.subagent_runs.labels(via)
        self.tool_calls.labels(*CLIENT_TOOL)
        for reason in ("queue_full", "failed"):
            self.webhook_dropped.labels(reason)
        for reason in ("queue_full", "export_failed"):
            self.otlp_dropped.labels(reason)
        for protocol in (*MODEL_PROTOCOLS, "passthrough"):
            self.interrupted.labels(protocol)
            self.cancelled.labels(protocol)
            self.in_flight.labels(protocol)
