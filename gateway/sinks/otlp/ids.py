"""OTel trace ids derived from Loopwatch trace ids, so every replica exports a trace's spans
under one trace id without asking the others."""

from __future__ import annotations

import random

from opentelemetry.sdk.trace.id_generator import IdGenerator

from gateway.sinks.otlp.trace_ids import trace_id_of

__all__ = ["StepIds", "trace_id_of"]


class StepIds(IdGenerator):
    """Random span ids, or the one the exporting thread sets just before starting a span of a
    derived id (a tool call's); the trace id it sets just before starting a root span, random
    when it set none (one thread starts spans, so a plain field suffices)."""

    def __init__(self) -> None:
        self.next_trace_id: int | None = None
        self.next_span_id: int | None = None  # likewise, for a span of a derived id

    def generate_span_id(self) -> int:
        return self.next_span_id or random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.next_trace_id or random.getrandbits(128) or 1
