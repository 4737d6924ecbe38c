"""One redaction for every exporter: a step carrying secrets reaches OTLP and webhooks
redacted, redacted once, the same frozen copy handed to both."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.sinks.otlp.sink import OtlpSink
from gateway.sinks.webhooks import WebhookSink
from gateway.step import StepRecord
from tests import harness
from tests.e2e.sinks.test_otlp import exported, redacting_of
from tests.e2e.sinks.test_webhooks import SECRET, _receiver
from tests.fakes.chat import completion
from tests.fakes.collector import FakeCollector
from tests.harness import GatewayFactory
from tests.traffic import ORPHAN, post

provider = harness.provider
make_gateway = harness.make_gateway
pytestmark = pytest.mark.sqlite


@pytest.fixture
async def collector(aiohttp_server: Any) -> FakeCollector:
    fake = FakeCollector()
    server = await aiohttp_server(fake.app)
    fake.url = str(server.make_url("")).rstrip("/")  # type: ignore[attr-defined]
    return fake


class Seen:
    """An exporter beside the real ones: what the redacting stage handed over."""

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        self.steps.append(step)

    def request_refused(self, refusal: object) -> None:
        return None


async def test_a_step_reaches_otlp_and_webhooks_redacted_once(
    aiohttp_server: Any,
    make_gateway: GatewayFactory,
    collector: FakeCollector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver, url = await _receiver(aiohttp_server)
    gw = await make_gateway(
        webhook_urls=(url,),
        otlp_endpoint=collector.url,  # type: ignore[attr-defined]
        otlp_timeout=2,
        otlp_capture_content=True,
        pairing="observe",
    )
    redacting = redacting_of(gw)
    assert {type(e) for e in redacting.exporters} == {WebhookSink, OtlpSink}
    redactor = redacting._redactor
    made: list[StepRecord] = []

    def redact_step(step: StepRecord) -> StepRecord:
        made.append(type(redactor).redact_step(redactor, step))
        return made[-1]

    monkeypatch.setattr(redactor, "redact_step", redact_step)
    seen = Seen()
    redacting.exporters = redacting.exporters.joined(seen)
    gw.provider.queue(completion(f"Stored {SECRET} for you."))
    body = {**ORPHAN, "messages": [*ORPHAN["messages"]]}
    body["messages"][0] = {"role": "user", "content": f"My key is {SECRET}"}
    body["messages"][1] = {**body["messages"][1], "tool_call_id": f"call_{SECRET}"}
    assert await post(gw, body) == 200  # observed, not refused

    (span,) = await exported(gw, collector)
    await asyncio.wait_for(receiver.arrived.wait(), 10)
    assert len(made) == 1, "one redaction of the step, for every exporter"
    assert seen.steps == made and seen.steps[0] is made[0], "the same redacted copy"
    assert not [s for s in span.strings() if SECRET in s]
    assert "[REDACTED:api_key]" in span.attributes["gen_ai.input.messages"]
    assert "[REDACTED:api_key]" in span.attributes["gen_ai.output.messages"]
    [event] = span.events
    assert "[REDACTED" in event.attributes["gen_ai.tool.call.id"]
    [hooked] = receiver.events
    assert SECRET not in json.dumps(hooked) and "[REDACTED" in hooked["call_id"]
    assert hooked["step_id"] == made[0].id
