"""A recorded answer in the mode the request asks: as recorded when the modes agree, else
decoded by the protocol's adapter and written back by its cassette encoder (a streamed
recording answered as a body, or a body as events)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from gateway.items import StopReason
from gateway.protocols.base import CassetteEncoder, ProtocolAdapter, Recorded
from gateway.stream.assembler import Assembler
from gateway.stream.deltas import Delta
from gateway.stream.sse import SSEEvent


def body_or_events(
    response: dict[str, Any], adapter: ProtocolAdapter, encoder: CassetteEncoder, stream: bool
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """(body, None) for a JSON answer, (None, events) for a stream."""
    events, body = response.get("events"), response.get("body")
    if stream and events is not None:
        return None, events
    if not stream and body is not None:
        return body, None
    step = _recorded(adapter, body, events, stream)
    if stream:
        return None, encoder.response_events(step)
    return encoder.response_body(step), None


def _recorded(
    adapter: ProtocolAdapter,
    body: dict[str, Any] | None,
    events: list[dict[str, Any]] | None,
    stream: bool,
) -> Recorded:
    deltas: list[Delta] = []
    if events is not None:
        decoder = adapter.new_event_decoder()
        for event in events:
            deltas += decoder.decode(SSEEvent(event.get("event"), event["data"]))
    else:
        deltas = adapter.decode_body(body)
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    items, first = assembler.output()
    done = assembler.assemble(items, first, StopReason.COMPLETED)
    return Recorded(
        params={},
        tools=None,
        items=(),
        new_items=(),
        output=tuple(items),
        model=done.model,
        stream=stream,
        response_id=done.response_id,
        raw_stop_reason=done.raw_stop_reason,
        usage=asdict(done.usage),
        created=0,  # the wire's own time fields are not read back here
    )
