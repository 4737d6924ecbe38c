"""Replay: a 3-step tool loop recorded through the gateway with the official SDKs, exported
as a cassette, then run again against `loopwatch replay`'s server with no provider; a
changed tool result is refused with the diff, or answered live."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
import sqlalchemy as sa

from gateway import cli
from gateway.config import Settings
from gateway.replay import tape
from gateway.replay.server import create_app
from gateway.store.engine import make_engine
from gateway.store.models import TRACES
from tests.fakes import anthropic as fake_anthropic
from tests.fakes import responses as fake_responses
from tests.fakes.chat import call, completion, streamed, usage
from tests.fakes.provider import FakeProvider
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.processes import serving

# A function tool as the Chat Completions API reference declares one (`tools[].function`).
CHAT_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
# A client tool as the Messages API reference declares one (`tools[].input_schema`).
MESSAGES_TOOLS: Any = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
# A function tool as the Responses API reference declares one (`tools[]`, flat).
RESPONSES_TOOLS: Any = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    }
]
FINAL = "Paris is sunny, Rome rainy."
# Nothing listens there: a replay that reached its upstream would fail.
NO_PROVIDER = "http://127.0.0.1:9/v1"

Lookup = Callable[[str], str]
Agent = Callable[[str, bool, Lookup], Awaitable[str]]


def sunny(city: str) -> str:
    return f"{city}: sunny"


def rainy_rome(city: str) -> str:
    return f"{city}: rainy" if city == "Rome" else sunny(city)


def queue_chat(fake: FakeProvider, stream: bool, steps: int = 3) -> None:
    make = streamed if stream else completion
    replies = [
        make(tool_calls=[call("call_1", "get_weather", {"city": "Paris"})], use=usage(50, 30)),
        make(tool_calls=[call("call_2", "get_weather", {"city": "Rome"})], use=usage(90, 12)),
        make(FINAL, use=usage(120, 9)),
    ]
    fake.queue(*replies[-steps:])


async def chat_agent(base: str, stream: bool, lookup: Lookup) -> str:
    """The loop an agent runs with the openai SDK: answer each tool call until the text."""
    messages: list[Any] = [
        {"role": "system", "content": "You answer about the weather."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
    ]
    async with openai.AsyncOpenAI(base_url=base, api_key="sk-t", max_retries=0) as sdk:
        for _ in range(5):
            kwargs: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "tools": CHAT_TOOLS}
            if stream:
                async with sdk.chat.completions.stream(**kwargs) as events:
                    answer = await events.get_final_completion()
            else:
                answer = await sdk.chat.completions.create(**kwargs)
            message = answer.choices[0].message
            if not message.tool_calls:
                return str(message.content)
            calls = [c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for c in message.tool_calls:
                city = json.loads(c.function.arguments)["city"]
                messages.append({"role": "tool", "tool_call_id": c.id, "content": lookup(city)})
    raise AssertionError("the loop never ended")


def queue_messages(fake: FakeProvider, stream: bool, steps: int = 3) -> None:
    make = fake_anthropic.streamed if stream else fake_anthropic.reply
    f = fake_anthropic
    replies = [
        make(
            f.message(
                [f.text("Looking."), f.tool_use("toolu_1", "get_weather", {"city": "Paris"})],
                message_id="msg_1",
                use=f.usage(50, 30),
            )
        ),
        make(
            f.message(
                [f.tool_use("toolu_2", "get_weather", {"city": "Rome"})],
                message_id="msg_2",
                use=f.usage(90, 12),
            )
        ),
        make(f.message([f.text(FINAL)], message_id="msg_3", use=f.usage(120, 9))),
    ]
    fake.queue(*replies[-steps:])


async def messages_agent(base: str, stream: bool, lookup: Lookup) -> str:
    """The same loop with the anthropic SDK (its base URL has no /v1)."""
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris and Rome?"}]
    root = base.removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key="sk-ant-t", max_retries=0) as sdk:
        for _ in range(5):
            kwargs: dict[str, Any] = {
                "model": "claude-sonnet-4-6",
                "max_tokens": 1024,
                "system": "You answer about the weather.",
                "messages": messages,
                "tools": MESSAGES_TOOLS,
            }
            if stream:
                async with sdk.messages.stream(**kwargs) as events:
                    answer = await events.get_final_message()
            else:
                answer = await sdk.messages.create(**kwargs)
            uses = [b for b in answer.content if b.type == "tool_use"]
            if not uses:
                return "".join(b.text for b in answer.content if b.type == "text")
            content = [b.model_dump(exclude_none=True) for b in answer.content]
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": lookup(b.input["city"])}  # type: ignore[index]
                for b in uses
            ]
            messages += [
                {"role": "assistant", "content": content},
                {"role": "user", "content": results},
            ]
    raise AssertionError("the loop never ended")


def queue_responses(fake: FakeProvider, stream: bool, steps: int = 3) -> None:
    f = fake_responses
    make = f.streamed if stream else f.reply
    replies = [
        make(
            f.response(
                [f.function_call("call_1", "get_weather", {"city": "Paris"})],
                response_id="resp_1",
                use=f.usage(50, 30),
            )
        ),
        make(
            f.response(
                [f.function_call("call_2", "get_weather", {"city": "Rome"})],
                response_id="resp_2",
                use=f.usage(90, 12),
            )
        ),
        make(f.response([f.message(FINAL, "msg_3")], response_id="resp_3", use=f.usage(120, 9))),
    ]
    fake.queue(*replies[-steps:])


async def responses_agent(base: str, stream: bool, lookup: Lookup) -> str:
    """The same loop with the openai SDK's Responses API, the whole input each time."""
    history: list[Any] = [{"role": "user", "content": "Weather in Paris and Rome?"}]
    async with openai.AsyncOpenAI(base_url=base, api_key="sk-t", max_retries=0) as sdk:
        for _ in range(5):
            kwargs: dict[str, Any] = {
                "model": "gpt-5",
                "instructions": "You answer about the weather.",
                "input": history,
                "tools": RESPONSES_TOOLS,
            }
            if stream:
                async with sdk.responses.stream(**kwargs) as events:
                    answer = await events.get_final_response()
            else:
                answer = await sdk.responses.create(**kwargs)
            calls = [i for i in answer.output if i.type == "function_call"]
            if not calls:
                return answer.output_text
            for c in calls:
                result = lookup(json.loads(c.arguments)["city"])
                history += [
                    c.model_dump(include={"id", "type", "call_id", "name", "arguments"}),
                    {"type": "function_call_output", "call_id": c.call_id, "output": result},
                ]
    raise AssertionError("the loop never ended")


PROTOCOLS: dict[str, tuple[Agent, Callable[[FakeProvider, bool, int], None]]] = {
    "chat": (chat_agent, queue_chat),
    "messages": (messages_agent, queue_messages),
    "responses": (responses_agent, queue_responses),
}


async def recorded(gw: Gateway, protocol: str, stream: bool, tmp: Any) -> str:
    """The loop run through the gateway and the fake provider, exported as a cassette file."""
    agent, queue = PROTOCOLS[protocol]
    queue(gw.provider, stream, 3)
    assert await agent(gw.openai_base, stream, sunny) == FINAL
    [trace] = await gw.traces()
    out = tmp / "run.jsonl"
    url = gw.deps.settings.database_url
    assert cli.main(["export", trace["id"], "--out", str(out), "--database-url", url]) == 0
    return str(out)


async def replay_server(aiohttp_server: Any, cassette: str, upstream: str, live: bool) -> str:
    _, steps = tape.read(cassette)
    settings = Settings(upstream_url=upstream, anthropic_upstream_url=upstream.removesuffix("/v1"))
    server = await aiohttp_server(create_app(steps, settings, live=live))
    return str(server.make_url("/v1"))


MODES = [(False, False), (True, True), (True, False), (False, True)]


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
@pytest.mark.parametrize(("recorded_stream", "stream"), MODES)
async def test_a_replayed_loop_gets_the_recorded_answers_with_no_provider(
    make_gateway: GatewayFactory,
    aiohttp_server: Any,
    tmp_path: Any,
    protocol: str,
    recorded_stream: bool,
    stream: bool,
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, protocol, recorded_stream, tmp_path)
    sent = len(gw.provider.received)
    base = await replay_server(aiohttp_server, cassette, NO_PROVIDER, live=False)
    agent, _ = PROTOCOLS[protocol]
    assert await agent(base, stream, sunny) == FINAL
    assert len(gw.provider.received) == sent  # nothing reached a provider


async def refusal(base: str, protocol: str) -> tuple[int, dict[str, str], Any]:
    """The agent's changed step 2 sent as is, to read the raw 409 the SDKs raise on."""
    agent, _ = PROTOCOLS[protocol]
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as raised:
        await agent(base, False, rainy_rome)
    response = raised.value.response
    return response.status_code, dict(response.headers), response.json()


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_a_changed_tool_result_is_refused_with_the_diff(
    make_gateway: GatewayFactory, aiohttp_server: Any, tmp_path: Any, protocol: str
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, protocol, True, tmp_path)
    base = await replay_server(aiohttp_server, cassette, NO_PROVIDER, live=False)
    # The first answer asks for Paris, whose result is unchanged: Rome's is step 3's.
    status, headers, body = await refusal(base, protocol)
    assert status == 409 and headers["x-should-retry"] == "false"
    error = body["error"]
    assert "replay diverged at step 3, new item 0" in error["message"]
    assert '"Rome: sunny" → tool_result "Rome: rainy"' in error["message"]
    diff = error["diff"]
    assert (diff["step"], diff["item"]) == (3, 0)
    assert diff["recorded"]["text"] == "Rome: sunny"
    assert diff["received"]["text"] == "Rome: rainy"
    assert diff["recorded"]["kind"] == diff["received"]["kind"] == "tool_result"


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_a_live_replay_answers_the_changed_step_from_the_provider(
    make_gateway: GatewayFactory, aiohttp_server: Any, tmp_path: Any, protocol: str
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, protocol, True, tmp_path)
    sent = len(gw.provider.received)
    upstream: str = gw.provider.url  # type: ignore[attr-defined]
    base = await replay_server(aiohttp_server, cassette, upstream, live=True)
    _, queue = PROTOCOLS[protocol]
    queue(gw.provider, True, 1)  # the final answer, to the changed step
    gw.provider.received.clear()
    agent, _ = PROTOCOLS[protocol]
    assert await agent(base, True, rainy_rome) == FINAL
    assert sent == 3
    [live] = gw.provider.received
    assert "Rome: rainy" in live.body.decode()


async def test_a_live_replay_with_no_provider_answers_502_in_the_protocols_shape(
    make_gateway: GatewayFactory, aiohttp_server: Any, tmp_path: Any
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, "messages", False, tmp_path)
    base = await replay_server(aiohttp_server, cassette, NO_PROVIDER, live=True)
    with pytest.raises(anthropic.APIStatusError) as raised:
        await messages_agent(base, False, rainy_rome)
    assert raised.value.status_code == 502
    error = raised.value.response.json()
    assert error["type"] == "error" and "live replay" in error["error"]["message"]


async def test_a_request_past_the_recording_is_refused(
    make_gateway: GatewayFactory, aiohttp_server: Any, tmp_path: Any
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, "chat", False, tmp_path)
    base = await replay_server(aiohttp_server, cassette, NO_PROVIDER, live=False)
    assert await chat_agent(base, False, sunny) == FINAL
    payload = {"model": "gpt-4o", "messages": [{"role": "user", "content": "And Oslo?"}]}
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{base}/chat/completions", json=payload) as r,
    ):
        assert r.status == 409
        error = (await r.json())["error"]
    assert error["code"] == "replay_diverged"
    assert error["diff"]["step"] == 4 and error["diff"]["recorded"] is None
    assert error["diff"]["received"] == {"kind": "user", "role": "user", "text": "And Oslo?"}


async def test_loopwatch_replay_serves_a_cassette_as_a_process(
    make_gateway: GatewayFactory, tmp_path: Any
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, "chat", True, tmp_path)
    [original] = await gw.traces()
    sent = len(gw.provider.received)
    store = f"sqlite:///{tmp_path / 'replays.db'}"  # the replay records where its settings say
    settings = {"LOOPWATCH_UPSTREAM_URL": NO_PROVIDER, "LOOPWATCH_DATABASE_URL": store}
    async with serving(cassette, command="replay", **settings) as served:
        assert await chat_agent(f"{served.url}/v1", True, sunny) == FINAL
        # The cassette played to its end: a second run is past the recording.
        status, _, body = await refusal(f"{served.url}/v1", "chat")
    assert status == 409 and body["error"]["diff"]["step"] == 4
    assert len(gw.provider.received) == sent
    assert served.process.returncode == 0
    [started] = [line for line in served.lines() if "replay listening on" in line]
    assert "3 steps" in started
    engine = make_engine(store)
    with engine.connect() as conn:
        t = TRACES.c
        stored = conn.execute(sa.select(t.replay_of, t.step_count, t.diverged_at)).all()
    engine.dispose()
    assert {row.replay_of for row in stored} == {original["id"]}
    assert (original["id"], 3, None) in [tuple(row) for row in stored]
    assert sorted(row.diverged_at or 0 for row in stored) == [0, 4]  # the refused run's
