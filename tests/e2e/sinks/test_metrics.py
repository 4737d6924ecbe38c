"""/metrics after real traffic through the gateway: the series and values a user checks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anthropic
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.items import StopReason, Violation, ViolationKind
from gateway.sinks import metrics as metrics_module
from gateway.sinks.metrics import MetricsSink, ModelNames, upstream_error_class
from tests import harness
from tests.factories import T0, bare_step, build_step, refusal
from tests.fakes import anthropic as anth
from tests.fakes.chat import completion
from tests.harness import Gateway
from tests.traffic import (
    HELLO,
    ORPHAN,
    agent_loop,
    all_kinds_of_traffic,
    post,
    scrape,
    scrape_text,
    value,
)

# The harness fixtures, used by name.
provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway
MODEL = "gpt-4o-2024-08-06"  # what the fake provider answers with


async def test_metrics_endpoint_needs_no_admin_token(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(admin_token="a-very-long-admin-token")
    status, content_type, text = await scrape_text(gw)
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    for kind in ViolationKind:  # pre-initialized: alerts see the series before any event
        assert f'loopwatch_violations_total{{kind="{kind.value}"}} 0.0' in text
    assert "loopwatch_recorder_queue_depth 0.0" in text
    assert 'loopwatch_tool_calls_total{executed_by="client",tool_type="function"} 0.0' in text


@pytest.mark.parametrize("stream", [False, True])
async def test_agent_loop_is_counted(gateway: Gateway, stream: bool) -> None:
    await agent_loop(gateway, stream=stream)
    s = await scrape(gateway)
    ok = {"protocol": "chat", "model": MODEL, "status": "2xx"}
    assert value(s, "loopwatch_requests_total", **ok, stop_reason="tool_calls") == 1
    assert value(s, "loopwatch_requests_total", **ok, stop_reason="completed") == 1
    assert value(s, "loopwatch_request_duration_seconds_count", protocol="chat") == 2
    assert value(s, "loopwatch_overhead_seconds_count", protocol="chat") == 2
    # Overhead is Loopwatch's own time: far below the request's, in the fine buckets.
    assert value(s, "loopwatch_overhead_seconds_sum") < value(
        s, "loopwatch_request_duration_seconds_sum"
    )
    genai = {"gen_ai_operation_name": "chat", "gen_ai_request_model": MODEL}
    tokens = "gen_ai_client_token_usage_sum"
    assert value(s, tokens, **genai, gen_ai_token_type="input") == 50 + 90
    assert value(s, tokens, **genai, gen_ai_token_type="output") == 30 + 12
    assert value(s, "gen_ai_client_operation_duration_seconds_count", **genai) == 2
    ttft = value(s, "gen_ai_client_operation_time_to_first_chunk_seconds_count", **genai)
    assert ttft == (2 if stream else 0)  # streamed operations only, as the conventions say
    # Who answered: the provider as the conventions name it, the upstream's host, the model.
    who = {"gen_ai_provider_name": "openai", "server_address": "127.0.0.1"}
    assert value(s, tokens, **who, gen_ai_response_model=MODEL, gen_ai_token_type="input") == 140
    # One finished trace of two steps.
    assert value(s, "loopwatch_trace_steps_count") == 1
    assert value(s, "loopwatch_trace_steps_sum") == 2
    assert value(s, "loopwatch_streams_in_flight", protocol="chat") == 0
    assert value(s, "loopwatch_recorder_batch_seconds_count") >= 1
    assert value(s, "loopwatch_recorder_dropped_total") == 0
    client = {"executed_by": "client", "tool_type": "function"}
    assert value(s, "loopwatch_tool_calls_total", **client) == 1
    assert value(s, "loopwatch_tool_calls_total", executed_by="provider") == 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_tool_calls_are_counted_by_who_ran_them_and_their_type(
    gateway: Gateway, stream: bool
) -> None:
    """Searches and code the provider ran, a server tool of a type no adapter declares
    (`other`: the label stays bounded), and the agent's own call."""
    search, fetch, code = "srvtoolu_01A", "srvtoolu_01B", "srvtoolu_01C"
    answer = anth.message(
        [
            anth.server_tool_use(search, "web_search", {"query": "ESA news"}),
            anth.web_search_result(search, ("ESA launches probe", "https://www.esa.int/probe")),
            anth.server_tool_use(fetch, "web_search", {"query": "ESA budget"}),
            anth.web_search_error(fetch),
            anth.server_tool_use(code, "code_execution", {"code": "print(1)"}),
            anth.code_execution_result(code, "1\n"),
            anth.server_tool_use("srvtoolu_01D", "hologram_render_2031", {"frames": 3}),
            anth.tool_use("toolu_01E", "get_weather", {"city": "Paris"}),
        ]
    )
    gateway.provider.queue(anth.streamed(answer) if stream else anth.reply(answer))
    client = anthropic.AsyncAnthropic(base_url=gateway.url, api_key="sk-ant-x", max_retries=0)
    async with client:
        params: dict[str, Any] = {"model": anth.MODEL, "max_tokens": 64}
        messages: Any = [{"role": "user", "content": "ESA news and the weather in Paris?"}]
        if stream:
            async with client.messages.stream(messages=messages, **params) as events:
                await events.get_final_message()
        else:
            await client.messages.create(messages=messages, **params)
    s = await scrape(gateway)
    counted = {
        (dict(labels)["executed_by"], dict(labels)["tool_type"]): n
        for (name, labels), n in s.items()
        if name == "loopwatch_tool_calls_total" and n
    }
    assert counted == {
        ("provider", "web_search"): 2,
        ("provider", "code_execution"): 1,
        ("provider", "other"): 1,
        ("client", "function"): 1,
    }


async def test_pairing_refusal_counts_a_violation(gateway: Gateway) -> None:
    assert await post(gateway, ORPHAN) == 400
    s = await scrape(gateway)
    assert value(s, "loopwatch_violations_total", kind="orphan_tool_result") == 1
    assert value(s, "loopwatch_refused_requests_total", reason="pairing") == 1
    assert value(s, "loopwatch_requests_total") == 0  # never reached the provider


async def test_budget_refusal_is_counted_by_budget(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_steps=1)
    gw.provider.queue(completion("one"), completion("two"))
    trace = {"X-Loopwatch-Trace-Id": "budgeted"}
    assert await post(gw, HELLO, **trace) == 200
    assert await post(gw, HELLO, **trace) == 429
    s = await scrape(gw)
    assert value(s, "loopwatch_budget_refusals_total", budget="steps") == 1
    assert value(s, "loopwatch_budget_refusals_total", budget="tokens") == 0
    assert value(s, "loopwatch_violations_total", kind="step_budget_exceeded") == 1
    assert value(s, "loopwatch_refused_requests_total", reason="budget") == 1


async def test_errors_and_broken_streams(gateway: Gateway) -> None:
    await all_kinds_of_traffic(gateway)
    s = await scrape(gateway)
    assert value(s, "loopwatch_upstream_errors_total", protocol="chat", **{"class": "5xx"}) == 1
    assert value(s, "loopwatch_requests_total", status="5xx", stop_reason="error") == 1
    assert value(s, "loopwatch_stream_interrupted_total", protocol="chat") == 1
    assert value(s, "loopwatch_violations_total", kind="stream_interrupted") == 1


async def test_unreachable_provider_is_an_upstream_error(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(upstream_url="http://127.0.0.1:9/v1")
    assert await post(gw, HELLO) == 502
    s = await scrape(gw)
    assert value(s, "loopwatch_upstream_errors_total", **{"class": "unreachable"}) == 1


async def test_no_ids_in_labels(gateway: Gateway) -> None:
    await all_kinds_of_traffic(gateway)
    s = await scrape(gateway)
    names = {name for _, labels in s for name, _ in labels}
    allowed = {"protocol", "model", "status", "stop_reason", "kind", "budget", "reason"}
    allowed |= {"class", "le", "error_type", "gen_ai_operation_name", "gen_ai_request_model"}
    allowed |= {"gen_ai_provider_name", "server_address", "gen_ai_response_model"}
    allowed |= {"executed_by", "tool_type", "via"}
    assert names <= allowed | {"gen_ai_token_type"}
    values = {v for _, labels in s for _, v in labels}
    assert not [v for v in values if v.startswith(("call_", "chatcmpl", "req_", "tr_", "st_"))]


def test_model_label_is_bounded() -> None:
    names = ModelNames(2)
    assert [names.label(m) for m in ("a", "b", "c", "a", None)] == [
        "a",
        "b",
        "other",
        "a",
        "unknown",
    ]


def test_upstream_error_classes() -> None:
    timeout = bare_step(http_status=504, error={"code": "upstream_timeout"})
    assert upstream_error_class(timeout) == "timeout"
    assert upstream_error_class(bare_step(http_status=429, error={"code": "rate"})) == "4xx"
    assert upstream_error_class(bare_step(http_status=200)) is None


def test_max_models_setting_reaches_the_label() -> None:
    sink = MetricsSink(max_models=1)
    for model in ("m1", "m2", "m3"):
        sink.step_finished(bare_step(model=model, stop_reason=StopReason.COMPLETED), 0.001)
    spent = Violation(ViolationKind.TOKEN_BUDGET_EXCEEDED, "spent", enforced=True)
    sink.request_refused(refusal("t9", violations=[spent]))
    text = sink.exposition().decode()
    assert 'model="m1"' in text and 'model="other"' in text and "m2" not in text
    assert 'loopwatch_budget_refusals_total{budget="tokens"} 1.0' in text


def test_registries_are_per_app() -> None:
    first, second = MetricsSink(), MetricsSink()
    first.step_finished(bare_step(stop_reason=StopReason.COMPLETED), 0.001)
    assert "loopwatch_requests_total{" not in second.exposition().decode()


def test_a_run_left_with_open_tool_calls_counts_as_abandoned_once_idle() -> None:
    sink = MetricsSink(idle_seconds=60)
    sink.step_finished(build_step("stuck", at=T0, stop_reason=StopReason.TOOL_CALLS), 0.0)
    sink.step_finished(build_step("done", at=T0, stop_reason=StopReason.TOOL_CALLS), 0.0)
    sink.step_finished(
        # Its final answer: no tool call left open (the status every surface shows).
        build_step(
            "done", at=T0 + timedelta(seconds=5), stop_reason=StopReason.COMPLETED, output_items=[]
        ),
        0.0,
    )

    def abandoned() -> float | None:
        return sink.registry.get_sample_value("loopwatch_traces_abandoned_total")

    sink.count_abandoned(now=T0 + timedelta(seconds=30))
    assert abandoned() == 0  # not idle long enough yet
    sink.count_abandoned(now=T0 + timedelta(seconds=90))
    sink.count_abandoned(now=T0 + timedelta(seconds=900))
    assert abandoned() == 1  # "stuck" once; "done" answered its calls


def test_a_run_refused_after_its_tool_calls_is_not_counted_abandoned() -> None:
    """The metric reads the status every surface shows: a refusal after the last step makes
    the run `refused`, never `abandoned`."""
    sink = MetricsSink(idle_seconds=60)
    sink.step_finished(build_step("refused-run", at=T0, stop_reason=StopReason.TOOL_CALLS), 0.0)
    sink.step_finished(build_step("left-run", at=T0, stop_reason=StopReason.TOOL_CALLS), 0.0)
    sink.request_refused(
        refusal(
            "refused-run",
            T0 + timedelta(seconds=5),
            violations=[Violation(ViolationKind.MISSING_TOOL_RESULT, "dropped", enforced=True)],
        )
    )
    sink.count_abandoned(now=T0 + timedelta(seconds=900))
    assert sink.registry.get_sample_value("loopwatch_traces_abandoned_total") == 1


def test_steps_count_alike_once_the_kinds_remembered_are_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the kinds of step it keeps, the sink finds the series each time: same counts."""
    monkeypatch.setattr(metrics_module, "MAX_KINDS", 1)
    sink = MetricsSink()
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4o-mini", "gpt-4o"):
        sink.step_finished(build_step(model=model, cost_nano=2_000_000_000), 0.001)
    requests = {
        sample.labels["model"]: sample.value
        for family in text_string_to_metric_families(sink.exposition().decode())
        for sample in family.samples
        if sample.name == "loopwatch_requests_total"
    }
    assert requests == {"gpt-4o": 2.0, "gpt-4o-mini": 2.0}
    assert 'loopwatch_cost_usd_total{model="gpt-4o"} 4.0' in sink.exposition().decode()
