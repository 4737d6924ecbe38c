"""The labelled children one finished step feeds, looked up once per kind of step.

prometheus_client's `labels()` costs more than the observation itself; steps of one kind
(protocol, model, route, status, stop, error) feed the same children, so they are found
with one dictionary lookup and the step only increments and observes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.items import StopReason
from gateway.sinks.instruments import MODEL_PROTOCOLS, Instruments

# Kinds of step kept; past this (model names are the client's) children are looked up
# each time, as before, so memory stays bounded whatever the traffic.
MAX_KINDS = 4096
STOP_COUNTERS = {StopReason.INTERRUPTED: "interrupted", StopReason.CANCELLED: "cancelled"}


@dataclass(frozen=True, slots=True)
class GenAiSeries:
    """The OpenTelemetry GenAI histograms of a model step's kind."""

    input_tokens: Any
    output_tokens: Any
    duration: Any
    first_chunk: Any


@dataclass(frozen=True, slots=True)
class StepSeries:
    """Every child a step of one kind feeds (None: that kind feeds no such series)."""

    model: str  # the bounded model label
    requests: Any
    overhead: Any
    duration: Any
    stopped: Any | None  # interrupted or cancelled
    upstream_error: Any | None
    genai: GenAiSeries | None  # model protocols only
    error_type: str  # the GenAI `error_type` ("" when the provider answered)


Child = Callable[..., Any]  # (metric, *labels) -> its child, cached


@dataclass(frozen=True, slots=True)
class StepKind:
    """What the labels of a step's series depend on."""

    protocol: str
    model: str  # bounded label
    status: str
    stop: StopReason
    error_class: str | None
    who: tuple[str, str]  # provider name and server address


def build_series(m: Instruments, kind: StepKind, child: Child) -> StepSeries:
    protocol, model = kind.protocol, kind.model
    stopped = STOP_COUNTERS.get(kind.stop)
    genai = None
    if protocol in MODEL_PROTOCOLS:
        labels = ("chat", model, *kind.who, model)  # every wire protocol is chat-style
        genai = GenAiSeries(
            child(m.token_usage, *labels, "input"),
            child(m.token_usage, *labels, "output"),
            child(m.operation_duration, *labels, kind.error_class or ""),
            child(m.time_to_first_chunk, *labels),
        )
    return StepSeries(
        model=model,
        requests=child(m.requests, protocol, model, kind.status, kind.stop.value),
        overhead=child(m.overhead, protocol),
        duration=child(m.request_duration, protocol, model),
        stopped=None if stopped is None else child(getattr(m, stopped), protocol),
        upstream_error=(
            None
            if kind.error_class is None
            else child(m.upstream_errors, protocol, kind.error_class)
        ),
        genai=genai,
        error_type=kind.error_class or "",
    )
