"""OTLP export of sub-agents: a child run's spans are children of its parent's call's
`execute_tool` span, whose id is derived; a child naming that span in its `traceparent` is
linked to the call. Chat Completions payloads as tests.fakes.chat shapes them (OpenAI's
documented `tool_calls`); an OpenAI Agents SDK agent-as-tool call carries `{"input": ...}`."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.ids import tool_span_id
from tests import harness
from tests.e2e.sinks.test_otlp import collector, exported, otel_trace_id, otlp_gateway
from tests.fakes.chat import call, completion
from tests.fakes.collector import FakeCollector
from tests.harness import GatewayFactory
from tests.traffic import agent_loop, post, scrape, value

provider, make_gateway = harness.provider, harness.make_gateway
collector = collector  # the fixture, by name

pytestmark = pytest.mark.sqlite
TASK = "Summarise the open issues about the parser and rank them by impact."


def chat_body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages)}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_a_sub_agents_spans_hang_under_its_parents_tool_span(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    tool_call = call("call_sub", "researcher", {"input": TASK})
    gw.provider.queue(
        completion(tool_calls=[tool_call], response_id="chatcmpl-p1"),
        completion("ranked", response_id="chatcmpl-c1"),
        completion("done", response_id="chatcmpl-p2"),
    )
    opening = user("Look into the parser issues.")
    assert await post(gw, chat_body(opening), **{"X-Loopwatch-Trace-Id": "otel-parent"}) == 200
    assert await post(gw, chat_body(user(TASK))) == 200  # the tool agent's run
    said = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    answer = {"role": "tool", "tool_call_id": "call_sub", "content": "ranked"}
    assert await post(gw, chat_body(opening, said, answer)) == 200
    spans = await exported(gw, collector)
    derived = f"{tool_span_id('otel-parent', 'call_sub'):016x}"
    ids = {None, "otel-parent"}
    child = next(s for s in spans if s.attributes.get("gen_ai.conversation.id") not in ids)
    assert child.trace_id == otel_trace_id("otel-parent")
    assert child.parent_id == derived
    # The parent's call's span, exported when its result came back, has that id.
    tools = [s for s in spans if s.name == "execute_tool researcher"]
    assert [(s.span_id, s.trace_id) for s in tools] in ([], [(derived, child.trace_id)])


async def test_a_traceparent_naming_a_tool_span_links_the_run_to_that_call(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    tool_call = call("call_tp", "delegate", {"task": "short"})  # no task text to match
    gw.provider.queue(completion(tool_calls=[tool_call]), completion("child's answer"))
    assert await post(gw, chat_body(user("go")), **{"X-Loopwatch-Trace-Id": "tp-parent"}) == 200
    span = f"{tool_span_id('tp-parent', 'call_tp'):016x}"
    traceparent = f"00-{otel_trace_id('tp-parent')}-{span}-01"
    assert await post(gw, chat_body(user("a task of its own")), traceparent=traceparent) == 200
    children = (await gw.trace("tp-parent"))["children"]
    assert [c["call_id"] for c in children] == ["call_tp"]
    samples = await scrape(gw)
    assert value(samples, "loopwatch_subagent_runs_total", via="traceparent") == 1


async def test_a_tool_span_of_a_call_has_its_derived_id(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    await agent_loop(gw, stream=False)
    spans = await exported(gw, collector)
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    trace_id = str(spans[0].attributes["gen_ai.conversation.id"])
    assert tool.span_id == f"{tool_span_id(trace_id, 'call_1'):016x}"
