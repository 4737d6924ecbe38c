"""An Anthropic turn the provider pauses (`pause_turn`): the step stops `paused` and its run
goes on, waiting for the turn sent back."""

from __future__ import annotations

import anthropic
import pytest

from tests import harness
from tests.fakes.anthropic import message, streamed, text, usage
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway


async def test_a_paused_turn_leaves_the_run_running(gateway: Gateway) -> None:
    # stop_reason "pause_turn": anthropic.types.StopReason (RawMessageDeltaEvent.delta).
    body = message([text("Searching the web")], stop_reason="pause_turn", use=usage(20, 4))
    gateway.provider.queue(streamed(body))
    sdk = gateway.closing(
        anthropic.AsyncAnthropic(base_url=gateway.url, api_key="sk-ant-test", max_retries=0)
    )
    async with sdk.messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=64,
        messages=[{"role": "user", "content": "What happened today?"}],
    ) as events:
        final = await events.get_final_message()
    assert final.stop_reason == "pause_turn"  # forwarded untouched
    trace = (await gateway.traces())[0]
    step = (await gateway.trace(trace["id"]))["steps"][0]
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("paused", "pause_turn")
    assert trace["status"] == "running"
