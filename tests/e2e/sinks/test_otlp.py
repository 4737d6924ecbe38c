"""OTLP export: agent runs through the gateway with the official SDKs reach a real OTLP/HTTP
receiver as GenAI spans: names, attributes, trace ids, parents, tool spans, events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
import pytest

from gateway.config import Settings
from gateway.errors import ConfigError
from gateway.sinks.otlp.exporters import build_exporter, traces_url
from gateway.sinks.otlp.ids import trace_id_of
from gateway.sinks.otlp.sink import OtlpSink
from gateway.sinks.redacted import Redacting
from tests import harness
from tests.fakes import anthropic as anth
from tests.fakes import responses as resp
from tests.fakes.chat import completion
from tests.fakes.collector import FakeCollector, ReceivedSpan
from tests.fakes.provider import Reply
from tests.harness import Gateway, GatewayFactory
from tests.traffic import HELLO, ORPHAN, agent_loop, post, scrape, value

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway
CHAT_MODEL = "gpt-4o-2024-08-06"  # what the fake provider answers with
ASKED = "gpt-4o"  # what the requests ask for (tests.traffic)
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
RESPONSES_TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
]


@pytest.fixture
async def collector(aiohttp_server: Any) -> FakeCollector:
    fake = FakeCollector()
    server = await aiohttp_server(fake.app)
    fake.url = str(server.make_url("")).rstrip("/")  # type: ignore[attr-defined]
    return fake


async def otlp_gateway(make: GatewayFactory, collector: FakeCollector, **settings: Any) -> Gateway:
    return await make(otlp_endpoint=collector.url, otlp_timeout=2, **settings)  # type: ignore[attr-defined]


def redacting_of(gw: Gateway) -> Redacting:
    return next(s for s in gw.deps.sinks if isinstance(s, Redacting))


def sink_of(gw: Gateway) -> OtlpSink:
    return next(s for s in redacting_of(gw).exporters if isinstance(s, OtlpSink))


async def exported(gw: Gateway, collector: FakeCollector) -> list[ReceivedSpan]:
    # The last step's end reaches the sinks after its stream ended: once the store has it,
    # the exporters had it too (one bus hands each record to both), then their queue drains.
    await gw.flush()
    assert await asyncio.to_thread(redacting_of(gw).flush)
    return sorted(collector.spans, key=lambda s: (s.start_ns, s.name))


async def only_trace(gw: Gateway) -> str:
    traces = await gw.traces()
    assert len(traces) == 1
    return str(traces[0]["id"])


def otel_trace_id(loopwatch_trace: str) -> str:
    return f"{trace_id_of(loopwatch_trace):032x}"


def assert_tool_span_between(tool: ReceivedSpan, before: ReceivedSpan, after: ReceivedSpan) -> None:
    """The tool ran from the end of the step that called it to the request with its result."""
    assert tool.kind == "internal" and tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.start_ns == before.end_ns and tool.end_ns == after.start_ns
    assert before.end_ns <= after.start_ns


def assert_common(span: ReceivedSpan, trace: str, server_port: int) -> None:
    assert span.kind == "client" and span.parent_id == ""
    assert span.trace_id == otel_trace_id(trace)
    assert span.attributes["gen_ai.operation.name"] == "chat"
    assert span.attributes["gen_ai.conversation.id"] == trace
    assert span.attributes["server.address"] == "127.0.0.1"
    assert span.attributes["server.port"] == server_port
    assert span.resource["service.name"] == "loopwatch"
    assert span.end_ns >= span.start_ns and not span.error


def port_of(gw: Gateway) -> int:
    return int(gw.provider.url.rsplit(":", 1)[1].split("/")[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_run_is_two_chat_spans_and_a_tool_span(
    make_gateway: GatewayFactory, collector: FakeCollector, stream: bool
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    await agent_loop(gw, stream=stream)
    first, tool, second = await exported(gw, collector)
    trace = await only_trace(gw)
    # Named by the model asked for, as the GenAI conventions name spans; the answer's dated
    # model is the response's.
    assert first.name == second.name == f"chat {ASKED}"
    for span in (first, second):
        assert_common(span, trace, port_of(gw))
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["openai.api.type"] == "chat_completions"
        assert span.attributes["gen_ai.request.model"] == ASKED
        assert span.attributes["gen_ai.response.model"] == CHAT_MODEL
        assert span.attributes.get("gen_ai.request.stream", False) is stream
        assert ("gen_ai.response.time_to_first_chunk" in span.attributes) is stream
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert first.attributes["gen_ai.usage.input_tokens"] == 50
    assert first.attributes["gen_ai.usage.output_tokens"] == 30
    assert second.attributes["gen_ai.usage.input_tokens"] == 90
    assert str(first.attributes["gen_ai.response.id"]).startswith("chatcmpl")
    assert tool.name == "execute_tool get_weather" and tool.trace_id == first.trace_id
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"
    assert_tool_span_between(tool, first, second)
    # Content capture is off: no message text anywhere.
    leaked = [s for span in (first, tool, second) for s in span.strings() if "Paris" in s]
    assert not leaked and "gen_ai.input.messages" not in first.attributes


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_run(
    make_gateway: GatewayFactory, collector: FakeCollector, stream: bool
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    make = resp.streamed if stream else resp.reply
    call = resp.function_call("call_r1", "get_weather", {"city": "Paris"})
    gw.provider.queue(
        make(resp.response([call], response_id="resp_1", use=resp.usage(20, 10, reasoning=4))),
        make(resp.response([resp.message("Sunny.")], response_id="resp_2", use=resp.usage(40, 5))),
    )
    result = {"type": "function_call_output", "call_id": "call_r1", "output": "sunny"}
    async with openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-x", max_retries=0) as sdk:
        await _respond(sdk, stream, input="Weather in Paris?", tools=RESPONSES_TOOLS)
        await _respond(sdk, stream, input=[result], previous_response_id="resp_1")
    first, tool, second = await exported(gw, collector)
    trace = await only_trace(gw)
    for span in (first, second):
        assert_common(span, trace, port_of(gw))
        assert span.name == "chat gpt-5"  # as asked; the dated model answered
        assert span.attributes["gen_ai.response.model"] == resp.MODEL
        assert span.attributes["openai.api.type"] == "responses"
    assert first.attributes["gen_ai.response.id"] == "resp_1"
    assert first.attributes["gen_ai.usage.reasoning.output_tokens"] == 4
    assert second.attributes["gen_ai.response.finish_reasons"] == ["completed"]
    assert tool.name == "execute_tool get_weather"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_r1"
    assert_tool_span_between(tool, first, second)


async def _respond(sdk: openai.AsyncOpenAI, stream: bool, **kwargs: Any) -> None:
    if not stream:
        await sdk.responses.create(model="gpt-5", **kwargs)
        return
    events = await sdk.responses.create(model="gpt-5", stream=True, **kwargs)
    async for _ in events:
        pass


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_run(
    make_gateway: GatewayFactory, collector: FakeCollector, stream: bool
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    make = anth.streamed if stream else anth.reply
    first_body = anth.message(
        [anth.text("Let me check."), anth.tool_use("toolu_1", "get_weather", {"city": "Paris"})],
        message_id="msg_01first",
        use=anth.usage(3, 99, cache_read=1111, cache_creation=418),
    )
    second_body = anth.message([anth.text("Sunny.")], message_id="msg_01second")
    gw.provider.queue(make(first_body), make(second_body))
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    async with anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-x", max_retries=0) as sdk:
        reply = await _message(sdk, stream, messages)
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
            },
        ]
        await _message(sdk, stream, messages)
    first, tool, second = await exported(gw, collector)
    trace = await only_trace(gw)
    for span in (first, second):
        assert_common(span, trace, port_of(gw))
        assert span.name == f"chat {anth.MODEL}"
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        assert "openai.api.type" not in span.attributes
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert second.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert first.attributes["gen_ai.usage.input_tokens"] == 3 + 1111 + 418  # all input
    assert first.attributes["gen_ai.usage.cache_read.input_tokens"] == 1111
    assert first.attributes["gen_ai.usage.cache_write.input_tokens"] == 418
    assert first.attributes["gen_ai.usage.output_tokens"] == 99
    assert tool.attributes["gen_ai.tool.call.id"] == "toolu_1"
    assert_tool_span_between(tool, first, second)


async def _message(
    sdk: anthropic.AsyncAnthropic, stream: bool, messages: list[Any]
) -> anthropic.types.Message:
    kwargs: dict[str, Any] = {"model": anth.MODEL, "max_tokens": 512, "tools": TOOLS}
    if not stream:
        return await sdk.messages.create(messages=messages, **kwargs)
    async with sdk.messages.stream(messages=messages, **kwargs) as events:
        return await events.get_final_message()


async def test_traceparent_makes_the_step_a_child_of_the_callers_span(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    gw.provider.queue(completion("one"), completion("two"))
    assert await post(gw, HELLO, traceparent=f"00-{caller_trace}-{caller_span}-01") == 200
    assert await post(gw, HELLO, traceparent="00-not-a-valid-header-01") == 200
    child, other = await exported(gw, collector)
    assert child.trace_id == caller_trace and child.parent_id == caller_span
    # An invalid header is ignored: that step is exported under its own Loopwatch trace.
    assert other.parent_id == "" and other.trace_id == otel_trace_id(
        str(other.attributes["gen_ai.conversation.id"])
    )


async def test_a_callers_unsampled_trace_is_not_exported(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector)
    gw.provider.queue(completion("one"))
    header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    assert await post(gw, HELLO, traceparent=header) == 200
    assert await exported(gw, collector) == []


async def test_captured_content_is_the_redacted_one(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector, otlp_capture_content=True)
    key = "sk-proj-" + "Q" * 32
    gw.provider.queue(completion("Noted, I will keep it safe."))
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": f"My key is {key}, remember it"},
        ],
    }
    assert await post(gw, body) == 200
    (span,) = await exported(gw, collector)
    assert not [s for s in span.strings() if key in s]
    inputs = span.attributes["gen_ai.input.messages"]
    assert "[REDACTED:api_key]" in inputs and '"role":"system"' in inputs
    assert '"content":"You are terse."' in inputs
    outputs = span.attributes["gen_ai.output.messages"]
    assert "Noted, I will keep it safe." in outputs and '"finish_reason":"stop"' in outputs


async def test_violations_are_events_and_errors(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector, pairing="observe")
    gw.provider.queue(completion("fine"))
    assert await post(gw, ORPHAN) == 200  # observed, not refused
    (span,) = await exported(gw, collector)
    assert span.error and "orphan_tool_result" in span.status_message
    assert span.attributes["error.type"] == "orphan_tool_result"
    (event,) = span.events
    assert event.name == "loopwatch.violation" and event.time_ns == span.end_ns
    assert event.attributes["loopwatch.violation.kind"] == "orphan_tool_result"
    assert event.attributes["gen_ai.tool.call.id"] == "call_nobody"
    assert "call_nobody" in event.attributes["loopwatch.violation.detail"]


async def test_refusals_and_failed_steps_are_error_spans(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector, max_steps=1)
    gw.provider.queue(Reply(status=500, body={"error": {"message": "boom"}}), completion("ok"))
    trace = {"X-Loopwatch-Trace-Id": "budgeted"}
    assert await post(gw, HELLO, **trace) == 500
    assert await post(gw, HELLO, **trace) == 200  # a failed attempt gives its step back
    assert await post(gw, HELLO, **trace) == 429
    failed, _, refused = await exported(gw, collector)
    assert failed.error and failed.attributes["error.type"] == "500"
    assert failed.attributes["gen_ai.response.finish_reasons"] == ["error"]
    assert failed.attributes["http.response.status_code"] == 500
    assert refused.name == "loopwatch.refusal" and refused.error
    assert refused.attributes["error.type"] == "step_budget_exceeded"
    assert refused.trace_id == failed.trace_id == otel_trace_id("budgeted")
    assert refused.events[0].attributes["loopwatch.violation.enforced"] is True


async def test_a_dead_collector_never_stops_proxying_and_drops_are_counted(
    make_gateway: GatewayFactory,
) -> None:
    gw = await make_gateway(otlp_endpoint="http://127.0.0.1:9", otlp_timeout=0.5)
    await agent_loop(gw, stream=True)
    assert len(await gw.traces()) == 1  # recorded as ever
    await asyncio.to_thread(redacting_of(gw).flush)
    s = await scrape(gw)
    assert value(s, "loopwatch_otlp_dropped_total", reason="export_failed") == 3
    assert value(s, "loopwatch_otlp_dropped_total", reason="queue_full") == 0


async def test_a_full_queue_drops_and_counts(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    collector.delay = 1.0  # slow: the one-span queue stays full while it sleeps
    gw = await otlp_gateway(make_gateway, collector, otlp_queue_size=1)
    for n in range(5):
        gw.provider.queue(completion(f"answer {n}"))
    statuses = await asyncio.gather(*(post(gw, HELLO) for _ in range(5)))
    assert statuses == [200] * 5
    await asyncio.to_thread(redacting_of(gw).flush)
    s = await scrape(gw)
    dropped = value(s, "loopwatch_otlp_dropped_total", reason="queue_full")
    assert dropped >= 1 and dropped + len(collector.spans) == 5


async def test_headers_and_service_name_reach_the_collector(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(
        make_gateway,
        collector,
        otlp_headers="x-honeycomb-team=hc%20key,x-dataset=agents",
        otlp_service_name="agents-gateway",
    )
    gw.provider.queue(completion("one"))
    assert await post(gw, HELLO) == 200
    (span,) = await exported(gw, collector)
    assert span.resource["service.name"] == "agents-gateway"
    assert collector.requests[0]["x-honeycomb-team"] == "hc key"
    assert collector.requests[0]["x-dataset"] == "agents"


async def test_captured_anthropic_content_keeps_the_conventions_shape(
    make_gateway: GatewayFactory, collector: FakeCollector
) -> None:
    gw = await otlp_gateway(make_gateway, collector, otlp_capture_content=True)
    body = anth.message(
        [anth.text("Checking."), anth.tool_use("toolu_1", "get_weather", {"city": "Oslo"})]
    )
    gw.provider.queue(anth.reply(body))
    async with anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-x", max_retries=0) as sdk:
        await sdk.messages.create(
            model=anth.MODEL,
            max_tokens=64,
            system="Mail ops@example.com when stuck.",
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
            tools=TOOLS,
        )
    (span,) = await exported(gw, collector)
    system = json.loads(span.attributes["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": "Mail [REDACTED:email] when stuck."}]
    inputs = json.loads(span.attributes["gen_ai.input.messages"])
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}]
    (output,) = json.loads(span.attributes["gen_ai.output.messages"])
    assert output["finish_reason"] == "tool_use" and output["role"] == "assistant"
    assert output["parts"][1] == {
        "type": "tool_call",
        "id": "toolu_1",
        "name": "get_weather",
        "arguments": {"city": "Oslo"},
    }


def test_trace_ids_are_derived_the_same_way_everywhere() -> None:
    assert trace_id_of("tr-0001") == trace_id_of("tr-0001") != trace_id_of("tr-0002")
    assert 0 < trace_id_of("tr-0001") < 2**128
    w3c = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_of(w3c) == int(w3c, 16)  # already an OTel trace id: kept
    assert trace_id_of("0" * 32) != 0


def test_traces_url_appends_the_signal_path_once() -> None:
    assert traces_url("http://c:4318") == "http://c:4318/v1/traces"
    assert traces_url("https://x/api/public/otel/") == "https://x/api/public/otel/v1/traces"
    assert traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


def test_grpc_exporter_is_built_from_the_extra() -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    settings = Settings(otlp_endpoint="http://collector:4317", otlp_protocol="grpc")
    exporter = build_exporter(settings)
    assert type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")
    exporter.shutdown()
    with pytest.raises(ConfigError, match="otlp_endpoint"):
        build_exporter(Settings())
