"""Step: the record of one model request, built once when its exchange finishes and frozen.

No module changes a record after the proxy built it (redaction makes a redacted copy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.items import Item, StopReason, Usage, Violation


@dataclass(frozen=True, slots=True)
class StepRecord:
    id: str
    trace_id: str
    protocol: str  # chat | responses | messages | passthrough
    method: str
    path: str
    started_at: datetime
    model: str | None = None
    stream: bool = False
    http_status: int | None = None
    stop_reason: StopReason = StopReason.UNKNOWN
    raw_stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    provider_request_id: str | None = None
    response_id: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    input_items: list[Item] = field(default_factory=list)  # only those new in this trace
    output_items: list[Item] = field(default_factory=list)
    error: dict[str, Any] | None = None
    violations: list[Violation] = field(default_factory=list)
    # HMAC over the full input plus output: the key a later request's history continues.
    continuation_key: str | None = None
    budget_max_steps: int | None = None
    budget_max_tokens: int | None = None
    traceparent: str | None = None  # the caller's W3C trace context header, for export
    # What it cost: nano-dollars (None: the model has no known price) and where the price
    # came from ("genai-prices", "config", "unknown_model", "no_usage").
    cost_nano: int | None = None
    cost_source: str | None = None
    session_id: str | None = None  # raw; redacted with the rest before storage
    retry_of: str | None = None  # the step id of the failed attempt this one repeats
    # The request's tool declarations as sent and its other parameters (protocols.
    # request_facts); redacted with the rest before storage.
    declared_tools: list[Any] | None = None
    params: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    """A request refused before the provider (pairing, budget, loop, or a request the
    gateway cannot use): violations, not a step; it keeps the request's new input items so
    the refusal can be looked at."""

    trace_id: str
    created_at: datetime
    violations: list[Violation]
    budget_exceeded: bool = False
    budget_max_steps: int | None = None
    budget_max_tokens: int | None = None
    # gateway.runs.status.RefusalKind: pairing | budget | loop; "request" (a body or header
    # the gateway cannot use) counts as a pairing refusal there: the trace is `refused`.
    kind: str = "pairing"
    items: list[Item] = field(default_factory=list)
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class StepStart:
    """What is known of a step when its request goes upstream; its record adds the outcome."""

    id: str
    trace_id: str
    protocol: str
    method: str
    path: str
    started_at: datetime
    model: str | None = None
    stream: bool = False
    input_items: list[Item] = field(default_factory=list)
    violations: tuple[Violation, ...] = ()  # found in the request's history
    budget_max_steps: int | None = None
    budget_max_tokens: int | None = None
    traceparent: str | None = None
    session_id: str | None = None
    tools: dict[str, Any] | None = None  # declared function tools (ParsedRequest.tools)
    upstream_url: str | None = None  # where it went: names the provider for prices
    declared_tools: list[Any] | None = None  # as sent (protocols.request_facts)
    params: dict[str, Any] | None = None
