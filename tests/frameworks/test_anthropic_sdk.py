"""The anthropic SDK through the gateway: a plain loop over messages.create, and the SDK's
tool runner with message threads (its default) and without, streamed and not.

With threads the runner's first request carries `thread: {"type": "create"}` and the whole
history; each later one `thread: {"type": "continue", "previous_message_id": "msg_…"}` and
only the new user turn (the tool results), without system prompt and tools.
"""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("anthropic", minversion="2.14", reason=NEEDS_EXTRA)  # threads

from typing import Any

import anthropic
from anthropic import beta_async_tool

from tests.fakes.scripted import ScriptedModel, bodies
from tests.fakes.scripted_anthropic import THREADS_BETA
from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    assert_one_clean_trace,
    scripted_gateway,
    time_tool,
    tool_arguments,
    weather_tool,
)
from tests.harness import Gateway, GatewayFactory

pytestmark = [pytest.mark.frameworks]

MODEL = "claude-sonnet-4-6"
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "The current weather of a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "The local time of a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
]
RUN_TOOL = {"get_weather": weather_tool, "get_time": time_tool}


@beta_async_tool
async def get_weather(city: str) -> str:
    """The current weather of a city.

    Args:
        city: The city's name.
    """
    return weather_tool(city)


@beta_async_tool
async def get_time(city: str) -> str:
    """The local time of a city.

    Args:
        city: The city's name.
    """
    return time_tool(city)


def client(gw: Gateway) -> anthropic.AsyncAnthropic:
    sdk = anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-test-sdk", max_retries=0)
    return gw.closing(sdk)


async def ask(sdk: anthropic.AsyncAnthropic, *, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return await sdk.messages.create(**kwargs)
    async with sdk.messages.stream(**kwargs) as events:
        async for _ in events:
            pass
        return await events.get_final_message()


async def plain_loop(gw: Gateway, *, stream: bool) -> str:
    """The loop of the SDK's documentation: call, run every tool_use, send results, repeat."""
    sdk = client(gw)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    for _ in range(5):
        reply = await ask(
            sdk,
            stream=stream,
            model=MODEL,
            max_tokens=2048,
            system=INSTRUCTIONS,
            messages=messages,
            tools=TOOLS,
            thinking={"type": "adaptive"},
        )
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason == "end_turn":
            return "".join(b.text for b in reply.content if b.type == "text")
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": RUN_TOOL[b.name](**b.input)}
            for b in reply.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    raise AssertionError("the loop did not end")


async def tool_runner(gw: Gateway, *, stream: bool, thread: bool) -> str:
    options: dict[str, Any] = {} if thread else {"thread": False}
    runner: Any = client(gw).beta.messages.tool_runner(
        model=MODEL,
        max_tokens=2048,
        system=INSTRUCTIONS,
        messages=[{"role": "user", "content": QUESTION}],
        tools=[get_weather, get_time],
        stream=stream,
        **options,
    )
    if stream:
        async for events in runner:
            async for _ in events:
                pass
    final = await runner.until_done()
    return "".join(b.text for b in final.content if b.type == "text")


async def run(gw: Gateway, mode: str, *, stream: bool) -> str:
    if mode == "plain-loop":
        return await plain_loop(gw, stream=stream)
    return await tool_runner(gw, stream=stream, thread=mode == "tool-runner-threads")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("mode", ["plain-loop", "tool-runner-threads", "tool-runner-no-thread"])
async def test_agent_run_is_one_clean_trace(
    gateway: Gateway, mode: str, stream: bool, steps: int
) -> None:
    answer = await run(gateway, mode, stream=stream)
    assert answer == EXPECTED_ANSWER
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol="messages", stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS


async def test_tool_runner_threads_by_default(
    make_gateway: GatewayFactory, parallel: bool, steps: int
) -> None:
    """What the threads mode stands for: create, then continues that send only the new turn.
    The gateway only observes here, so the provider's threads answer whatever it would refuse."""
    gateway = await scripted_gateway(make_gateway, parallel=parallel, pairing="observe")
    assert await run(gateway, "tool-runner-threads", stream=False) == EXPECTED_ANSWER
    model = gateway.provider.responder
    assert isinstance(model, ScriptedModel)
    sent = bodies(gateway.provider.received, "/v1/messages")
    assert len(sent) == steps
    assert sent[0]["thread"] == {"type": "create"} and "system" in sent[0]
    for body in sent[1:]:
        assert set(body["thread"]) == {"type", "previous_message_id"}
        assert body["thread"]["type"] == "continue"
        assert body["thread"]["previous_message_id"].startswith("msg_")
        assert "system" not in body and "tools" not in body
        [turn] = body["messages"]
        assert {b["type"] for b in turn["content"]} == {"tool_result"}
    # Each continue names the reply just before it; the provider held every reply's thread.
    replies = list(model.threads.by_reply)
    assert [body["thread"]["previous_message_id"] for body in sent[1:]] == replies[:-1]
    headers = [r.headers.get("anthropic-beta", "") for r in gateway.provider.received]
    assert all(THREADS_BETA in h for h in headers)


async def test_tool_runner_without_thread_sends_whole_history(gateway: Gateway) -> None:
    await run(gateway, "tool-runner-no-thread", stream=False)
    sent = bodies(gateway.provider.received, "/v1/messages")
    assert all("thread" not in body for body in sent)
    assert [len(body["messages"]) for body in sent] == [1 + 2 * n for n in range(len(sent))]
