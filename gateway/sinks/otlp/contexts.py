"""The span a step's spans hang under: the caller's, from its W3C `traceparent`, or for a
sub-agent's run its parent's call's `execute_tool` span, whose id is derived."""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace import set_span_in_context as inside_of
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.ids import tool_span_id
from gateway.sinks.otlp.trace_ids import trace_id_of
from gateway.step import Lineage

_PROPAGATOR = TraceContextTextMapPropagator()


def spawned_by(lineage: Lineage | None) -> Context | None:
    """A sub-agent's spans are children of its parent's call's `execute_tool` span (its id
    derived, so known whichever replica exports it)."""
    if lineage is None or lineage.parent_trace_id is None or lineage.parent_call_id is None:
        return None
    parent = lineage.parent_trace_id
    span = SpanContext(
        trace_id_of(parent),
        tool_span_id(parent, lineage.parent_call_id),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return inside_of(NonRecordingSpan(span))


def caller(traceparent: str) -> Context | None:
    """The caller's span from a W3C traceparent header, or None when it is not valid."""
    context = _PROPAGATOR.extract({"traceparent": traceparent})
    for value in context.values():
        if isinstance(value, NonRecordingSpan) and value.get_span_context().is_valid:
            return context
    return None
