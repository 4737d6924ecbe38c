"""What the proxy does with an exchange's decided outcome, through the real gateway: the step
recorded as decided, and the anomalies counted in /metrics and logged once.
"""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from tests import harness
from tests.fakes.chat import stream_chunks
from tests.fakes.provider import Reply
from tests.harness import Gateway
from tests.traffic import HELLO, scrape, value

provider, make_gateway, gateway = harness.provider, harness.make_gateway, harness.gateway

pytestmark = pytest.mark.sqlite
ANOMALIES = "loopwatch_exchange_anomalies_total"
STREAMED = {**HELLO, "stream": True, "stream_options": {"include_usage": True}}
LATE = b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "late"}}]}\n\n'


async def stream(gw: Gateway, events: list[bytes]) -> tuple[str, str, bytes]:
    """One streamed chat request: its trace and step ids and the bytes the client got."""
    gw.provider.queue(Reply(events=events))
    async with (
        aiohttp.ClientSession() as s,
        s.post(gw.openai_base + "/chat/completions", json=STREAMED) as r,
    ):
        body = await r.read()
        return r.headers["X-Loopwatch-Trace-Id"], r.headers["X-Loopwatch-Step-Id"], body


def anomaly_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "illegal transitions" in r.getMessage()]


async def test_a_clean_stream_counts_no_anomaly(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    await stream(gateway, stream_chunks("All in order."))
    samples = await scrape(gateway)
    assert value(samples, ANOMALIES, kind="delta") == 0
    assert value(samples, ANOMALIES, kind="event") == 0
    assert anomaly_logs(caplog) == []


async def test_deltas_after_the_end_are_counted_and_logged_once(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.proxy.finisher")
    events = [*stream_chunks("Done, then more."), LATE, LATE]
    trace_id, step_id, body = await stream(gateway, events)
    assert body == b"".join(events)  # noted, never altered: the client gets every byte
    samples = await scrape(gateway)
    assert value(samples, ANOMALIES, kind="delta") == 2
    assert value(samples, ANOMALIES, kind="event") == 0
    (line,) = anomaly_logs(caplog)
    assert step_id in line and trace_id in line and "TextDelta in state ended" in line
    # The step is recorded as the exchange decided it: the answer before the marker stands.
    trace = await gateway.trace(trace_id)
    (step,) = trace["steps"]
    assert step["stop_reason"] == "completed" and trace["violations"] == []
    assert "late" not in json.dumps(step["output_items"])
