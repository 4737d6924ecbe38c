"""A fake OpenTelemetry collector: a real aiohttp app taking OTLP/HTTP protobuf on /v1/traces.

Requests are decoded with opentelemetry-proto's ExportTraceServiceRequest into plain spans a
test can assert on; `delay` makes it a slow collector, `status` a refusing one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

KINDS = {Span.SPAN_KIND_CLIENT: "client", Span.SPAN_KIND_INTERNAL: "internal"}


@dataclass
class Event:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str  # hex, as W3C writes it
    span_id: str
    parent_id: str  # "" for a root span
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[Event]
    error: bool
    status_message: str
    resource: dict[str, Any] = field(default_factory=dict)

    def strings(self) -> list[str]:
        """Every string value in the span's attributes and events (for leak checks)."""
        values = [*self.attributes.values()]
        values += [v for event in self.events for v in event.attributes.values()]
        flat: list[str] = []
        for value in values:
            flat += [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
            if isinstance(value, str):
                flat.append(value)
        return flat


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def attributes(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


class FakeCollector:
    def __init__(self, *, delay: float = 0.0, status: int = 200) -> None:
        self.delay = delay
        self.status = status
        self.requests: list[dict[str, str]] = []  # headers of each export request
        self.spans: list[ReceivedSpan] = []
        self.app = web.Application()
        self.app.router.add_post("/v1/traces", self._traces)

    async def _traces(self, request: web.Request) -> web.Response:
        self.requests.append(dict(request.headers))
        body = await request.read()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status != 200:
            return web.Response(status=self.status)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        for resource_spans in message.resource_spans:
            resource = attributes(list(resource_spans.resource.attributes))
            for scope_spans in resource_spans.scope_spans:
                self.spans += [_span(s, resource) for s in scope_spans.spans]
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    def named(self, prefix: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]


def _span(span: Span, resource: dict[str, Any]) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        kind=KINDS.get(span.kind, str(span.kind)),
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=attributes(list(span.attributes)),
        events=[
            Event(e.name, e.time_unix_nano, attributes(list(e.attributes))) for e in span.events
        ],
        error=span.status.code == span.status.STATUS_CODE_ERROR,
        status_message=span.status.message,
        resource=resource,
    )
