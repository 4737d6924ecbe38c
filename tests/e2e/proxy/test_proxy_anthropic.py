"""Anthropic Messages through the gateway with the official anthropic SDK: agent loops, recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests import harness
from tests.factories import messages_request
from tests.fakes.anthropic import (
    error_body,
    message,
    reply,
    stream_events,
    streamed,
    text,
    thinking,
    tool_use,
    usage,
)
from tests.fakes.provider import Reply
from tests.harness import Gateway

# The gateway fixtures, by assignment: parameters of the same name then shadow nothing imported.
provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

CLIENT_KEY = "sk-ant-api03-clientkey-Zx81Qm4TnV0pLw9"
THINKING_MARKER = "THINKMARK-5e2a91c0"
SIGNATURE_MARKER = "SIGMARK-77d0b3"
BETA = "interleaved-thinking-2025-05-14"
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def client(gw: Gateway, *, max_retries: int = 0, **headers: str) -> anthropic.AsyncAnthropic:
    """This SDK sends its key as a bearer token; older ones and Claude Code send `x-api-key`."""
    return gw.closing(
        anthropic.AsyncAnthropic(
            base_url=gw.url,
            api_key=CLIENT_KEY,
            max_retries=max_retries,
            default_headers={"x-api-key": CLIENT_KEY, **headers},
        )
    )


def stored_bytes(tmp_path: Path) -> bytes:
    """Everything SQLite wrote: the database file and its write-ahead log."""
    return b"".join(p.read_bytes() for p in tmp_path.glob("loopwatch.db*"))


def weather_script() -> list[dict[str, Any]]:
    first = message(
        [
            thinking(f"The user wants two cities. {THINKING_MARKER}", f"EroCC{SIGNATURE_MARKER}"),
            text("Let me check both cities."),
            tool_use("toolu_paris", "get_weather", {"city": "Paris"}),
            tool_use("toolu_tokyo", "get_weather", {"city": "Tokyo"}),
        ],
        message_id="msg_01first",
        use=usage(3, 99, cache_read=1111, cache_creation=418),
    )
    second = message(
        [text("Paris is sunny and Tokyo is rainy.")],
        message_id="msg_01second",
        use=usage(40, 12, cache_read=1529),
    )
    return [first, second]


async def ask(sdk: anthropic.AsyncAnthropic, *, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return await sdk.messages.create(**kwargs)
    async with sdk.messages.stream(**kwargs) as events:
        async for _ in events:
            pass
        return await events.get_final_message()


async def run_agent(gw: Gateway, *, stream: bool) -> list[Any]:
    """Ask, run the tools the model asks for (in parallel), send the results, repeat."""
    make = streamed if stream else reply
    gw.provider.queue(*(make(body) for body in weather_script()))
    sdk = client(gw)
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]
    answers = []
    for _ in range(5):
        result = await ask(
            sdk,
            stream=stream,
            model="claude-sonnet-4-6",
            max_tokens=2048,
            system="You are a weather agent.",
            messages=messages,
            tools=TOOLS,
            thinking={"type": "enabled", "budget_tokens": 1024},
            extra_headers={"anthropic-beta": BETA},
        )
        answers.append(result)
        content = [block.model_dump(exclude_none=True) for block in result.content]
        messages.append({"role": "assistant", "content": content})
        calls = [block for block in result.content if block.type == "tool_use"]
        if not calls:
            break
        results = [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": "sunny" if call.input["city"] == "Paris" else "rainy",
            }
            for call in calls
        ]
        messages.append({"role": "user", "content": results})
    return answers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agent_loop_with_thinking_and_parallel_tools(
    gateway: Gateway, stream: bool, tmp_path: Path
) -> None:
    answers = await run_agent(gateway, stream=stream)
    assert answers[-1].content[0].text == "Paris is sunny and Tokyo is rainy."
    # The client got the thinking and its signature as sent.
    assert THINKING_MARKER in answers[0].content[0].thinking
    assert answers[0].content[0].signature == f"EroCC{SIGNATURE_MARKER}"

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)
    first, second = trace["steps"]
    assert (first["protocol"], first["stream"]) == ("messages", stream)
    assert [(i["kind"], i["text"]) for i in first["input_items"]] == [
        ("instruction", "You are a weather agent."),
        ("user", "Weather in Paris and Tokyo?"),
    ]
    outputs = [(i["kind"], i["text"], i["call_id"]) for i in first["output_items"]]
    assert outputs == [
        ("reasoning", None, None),
        ("assistant_text", "Let me check both cities.", None),
        ("tool_call", None, "toolu_paris"),
        ("tool_call", None, "toolu_tokyo"),
    ]
    assert json.loads(first["output_items"][3]["arguments"]) == {"city": "Tokyo"}
    assert first["output_items"][0]["attrs"]["chars"] > 0
    assert (first["stop_reason"], first["raw_stop_reason"]) == ("tool_calls", "tool_use")
    # prompt = input + cache read + cache creation; cached = cache read.
    use = first["usage"]
    assert (use["prompt_tokens"], use["cached_tokens"]) == (3 + 1111 + 418, 1111)
    assert (use["completion_tokens"], use["total_tokens"]) == (99, 1532 + 99)
    assert first["provider_request_id"] == "req_01first"
    assert first["response_id"] == "msg_01first"
    # Only what is new at step 2: the tool results, not the echoed turn.
    assert [(i["kind"], i["call_id"], i["text"]) for i in second["input_items"]] == [
        ("tool_result", "toolu_paris", "sunny"),
        ("tool_result", "toolu_tokyo", "rainy"),
    ]
    assert (second["stop_reason"], second["raw_stop_reason"]) == ("completed", "end_turn")
    assert second["usage"]["prompt_tokens"] == 40 + 1529

    # Headers reached the provider; the key, the thinking and its signature were never stored.
    sdk_version = client(gateway).default_headers["anthropic-version"]
    for received in gateway.provider.received:
        assert received.path == "/v1/messages"
        assert received.headers["x-api-key"] == CLIENT_KEY
        assert (
            received.headers.get("Authorization", f"Bearer {CLIENT_KEY}") == f"Bearer {CLIENT_KEY}"
        )
        assert received.headers["anthropic-version"] == sdk_version
        assert received.headers["anthropic-beta"] == BETA
    echoed = gateway.provider.received[1].json()["messages"][1]["content"][0]
    assert THINKING_MARKER in echoed["thinking"]
    stored = stored_bytes(tmp_path)
    assert b"Paris is sunny" in stored  # the scan sees what was stored
    for secret in (THINKING_MARKER, SIGNATURE_MARKER, CLIENT_KEY):
        assert secret.encode() not in stored


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_max_tokens_is_length(gateway: Gateway, stream: bool) -> None:
    body = message([text("Once upon a")], stop_reason="max_tokens", use=usage(12, 5))
    gateway.provider.queue(streamed(body) if stream else reply(body))
    result = await ask(
        client(gateway),
        stream=stream,
        model="claude-sonnet-4-6",
        max_tokens=5,
        messages=[{"role": "user", "content": "A story?"}],
    )
    assert result.stop_reason == "max_tokens"
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("length", "max_tokens")
    assert (step["usage"]["prompt_tokens"], step["usage"]["completion_tokens"]) == (12, 5)


async def test_tool_result_for_an_older_turn_is_refused(gateway: Gateway) -> None:
    history: list[Any] = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [tool_use("toolu_old", "get_weather", {"city": "Paris"})]},
        {"role": "user", "content": "Never mind, say hi."},
        {"role": "assistant", "content": [text("Hi!")]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_old", "content": "sunny"}],
        },
    ]
    with pytest.raises(anthropic.BadRequestError) as raised:
        await client(gateway, max_retries=3).messages.create(
            model="claude-sonnet-4-6", max_tokens=100, messages=history
        )
    assert raised.value.status_code == 400
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("orphan_tool_result:")
    assert "toolu_old" in body["error"]["message"]
    assert "immediately preceding assistant turn" in body["error"]["message"]
    assert gateway.provider.received == []
    trace = await gateway.trace((await gateway.traces())[0]["id"])
    assert trace["step_count"] == 0
    enforced = [(v["kind"], v["call_id"]) for v in trace["violations"] if v["enforced"]]
    assert enforced == [("orphan_tool_result", "toolu_old")]


async def test_budget_refusal_is_anthropic_shaped_and_not_retried(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_steps=1)
    gw.provider.queue(reply(message([text("one")])), reply(message([text("two")])))
    sdk = client(gw, max_retries=3, **{"X-Loopwatch-Trace-Id": "claude-budget"})
    hello = messages_request("hi")
    await sdk.messages.create(**hello)
    with pytest.raises(anthropic.RateLimitError) as raised:
        await sdk.messages.create(**hello)
    assert raised.value.response.headers["x-should-retry"] == "false"
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["message"].startswith("step_budget_exceeded:")
    assert len(gw.provider.received) == 1
    trace = await gw.trace("claude-budget")
    # Exactly one refusal: the SDK did not retry although it was allowed to.
    assert [v["kind"] for v in trace["violations"]] == ["step_budget_exceeded"]


async def test_token_budget_clamps_max_tokens(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_tokens=100)
    gw.provider.queue(reply(message([text("a")], use=usage(50, 30))))
    sdk = client(gw, **{"X-Loopwatch-Trace-Id": "claude-tokens"})
    raw = await sdk.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=4096, messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-loopwatch-max-tokens-clamped"] == "100"
    assert gw.provider.received[0].json()["max_tokens"] == 100


async def test_error_event_mid_stream_is_an_error_stop(gateway: Gateway, tmp_path: Path) -> None:
    body = message([thinking(f"Hmm {THINKING_MARKER}"), text("Partial answer")])
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    gateway.provider.queue(Reply(events=stream_events(body, error=overloaded)))
    with pytest.raises(anthropic.APIStatusError):
        await ask(
            client(gateway),
            stream=True,
            model="claude-sonnet-4-6",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
        )
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert (step["stop_reason"], step["http_status"]) == ("error", 200)
    assert step["error"]["type"] == "overloaded_error"
    assert [i["kind"] for i in step["output_items"]] == ["reasoning"]
    assert THINKING_MARKER.encode() not in stored_bytes(tmp_path)


async def test_error_status_is_passed_through(gateway: Gateway) -> None:
    gateway.provider.queue(
        reply(error_body("overloaded_error", "Overloaded"), status=529),
    )
    with pytest.raises(anthropic.APIStatusError) as raised:
        await client(gateway).messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert raised.value.status_code == 529
    step = (await gateway.trace((await gateway.traces())[0]["id"]))["steps"][0]
    assert (step["stop_reason"], step["http_status"]) == ("error", 529)


# Routing: the gateway, never the client, decides where a request goes.


def _root(gw_provider: Any) -> str:
    return str(gw_provider.url).removesuffix("/v1")


async def test_routes_by_model_with_the_route_key(make_gateway, provider) -> None:  # type: ignore[no-untyped-def]
    root = _root(provider)
    route_key = "sk-ant-api03-routekey-Hh27Lk0dQp55"
    gw: Gateway = await make_gateway(
        anthropic_upstream_url=root + "/elsewhere",
        routes=[
            {
                "protocol": "messages",
                "model": "claude-*",
                "upstream": root + "/claude-upstream",
                "api_key": route_key,
            }
        ],
    )
    gw.provider.queue(reply(message([text("a")])), reply(message([text("b")])))
    sdk = client(gw)
    hello: list[Any] = [{"role": "user", "content": "hi"}]
    await sdk.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=hello)
    await sdk.messages.create(model="other-model", max_tokens=10, messages=hello)
    routed, fallback = gw.provider.received
    assert routed.path == "/claude-upstream/v1/messages"
    assert routed.headers["x-api-key"] == route_key  # the route's key, not the client's
    assert CLIENT_KEY not in json.dumps(routed.headers)
    assert fallback.path == "/elsewhere/v1/messages"
    assert CLIENT_KEY in json.dumps(fallback.headers)  # no route key: the client's own


async def _raw_request(url: str, target: str, headers: dict[str, str], body: bytes) -> bytes:
    """An HTTP/1.1 request with any request-target and Host, as a hostile client might send."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    answer = await reader.read(65536)
    writer.close()
    await writer.wait_closed()
    return answer


@pytest.mark.parametrize(
    ("target", "host"),
    [
        ("http://evil.example/v1/messages", "evil.example"),
        ("/v1/messages", "evil.example:443"),
        ("/v1/messages?upstream=http://evil.example", "evil.example"),
    ],
    ids=["absolute-form", "host-header", "query"],
)
async def test_client_cannot_choose_the_upstream_host(
    make_gateway: Any, target: str, host: str
) -> None:
    # A name the gateway answers to (else refused before anything): still never the upstream.
    gateway: Gateway = await make_gateway(allowed_hosts=("evil.example",))
    gateway.provider.queue(reply(message([text("ok")])))
    body = json.dumps(messages_request("hi", model="claude-x", max_tokens=5)).encode()
    headers = {
        "Host": host,
        "Content-Type": "application/json",
        "x-api-key": CLIENT_KEY,
        "X-Forwarded-Host": "evil.example",
        "Connection": "close",
    }
    answer = await _raw_request(gateway.url, target, headers, body)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    (received,) = gateway.provider.received  # it reached the configured provider, and only it
    assert received.path == "/v1/messages"
    assert received.headers["Host"] != host
    assert received.headers["Host"].startswith("127.0.0.1:")


async def test_passthrough_paths_stay_on_the_configured_host(make_gateway: Any) -> None:
    gateway: Gateway = await make_gateway(allowed_hosts=("evil.example",))
    gateway.provider.queue(Reply(body={"data": []}), Reply(body={"data": []}))
    for target in ("/v1/@evil.example/models", "/v1//evil.example/models"):
        answer = await _raw_request(
            gateway.url, target, {"Host": "evil.example", "Connection": "close"}, b""
        )
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    for received in gateway.provider.received:
        assert received.headers["Host"].startswith("127.0.0.1:")


async def test_count_tokens_goes_to_the_anthropic_upstream(make_gateway, provider) -> None:  # type: ignore[no-untyped-def]
    """Not to the OpenAI upstream, which would receive the Anthropic key."""
    root = _root(provider)
    gw: Gateway = await make_gateway(
        upstream_url=root + "/openai/v1", anthropic_upstream_url=root + "/anthropic"
    )
    gw.provider.queue(reply({"input_tokens": 14}), reply({"input_tokens": 14}))
    sdk = client(gw)
    hello: list[Any] = [{"role": "user", "content": "hi"}]
    counted = await sdk.messages.count_tokens(model="claude-sonnet-4-6", messages=hello)
    assert counted.input_tokens == 14
    (received,) = gw.provider.received
    assert received.path == "/anthropic/v1/messages/count_tokens"
    assert received.headers["x-api-key"] == CLIENT_KEY


async def test_count_tokens_uses_the_messages_route_key(make_gateway, provider) -> None:  # type: ignore[no-untyped-def]
    root = _root(provider)
    route_key = "sk-ant-api03-routekey-Qa81Zz0dWp44"
    route = {"protocol": "messages", "upstream": root + "/routed", "api_key": route_key}
    gw: Gateway = await make_gateway(routes=[route])
    gw.provider.queue(reply({"input_tokens": 3}))
    hello: list[Any] = [{"role": "user", "content": "hi"}]
    await client(gw).messages.count_tokens(model="claude-sonnet-4-6", messages=hello)
    (received,) = gw.provider.received
    assert received.path == "/routed/v1/messages/count_tokens"
    assert received.headers["x-api-key"] == route_key
    assert CLIENT_KEY not in json.dumps(received.headers)
