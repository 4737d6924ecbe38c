"""Real traffic through the gateway for metric tests, and a parsed scrape of its /metrics."""

from __future__ import annotations

import contextlib
from typing import Any

import aiohttp
import openai
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import chat_request, tool_message
from tests.fakes.chat import call, completion, streamed, usage
from tests.fakes.provider import Reply
from tests.harness import Gateway

HELLO = chat_request("hi")
# A tool result answering no call: the gateway refuses it (enforce mode) with a violation.
ORPHAN = chat_request("hi", tool_message("call_nobody"))

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape_text(gw: Gateway) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as s, s.get(gw.url + "/metrics") as r:
        return r.status, r.headers["Content-Type"], await r.text()


async def scrape(gw: Gateway) -> Samples:
    await gw.flush()
    _, _, text = await scrape_text(gw)
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over series of `name` whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


async def post(gw: Gateway, body: dict[str, Any], **headers: str) -> int:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            gw.openai_base + "/chat/completions",
            json=body,
            headers={"Authorization": "Bearer sk-test", **headers},
        ) as r,
    ):
        await r.read()
        return r.status


async def agent_loop(gw: Gateway, *, stream: bool) -> None:
    """Two steps with the openai SDK: a tool call, then the final answer (a finished trace)."""
    make = streamed if stream else completion
    gw.provider.queue(
        make(tool_calls=[call("call_1", "get_weather", {"city": "Paris"})], use=usage(50, 30)),
        make("Sunny.", use=usage(90, 12)),
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    async with openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test", max_retries=0) as sdk:
        first = await _ask(sdk, messages, stream)
        messages += [
            first,
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]
        await _ask(sdk, messages, stream)


# The tool the agent declares: its calls are judged against it (undeclared tools are flagged).
WEATHER_TOOL: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


async def _ask(sdk: openai.AsyncOpenAI, messages: list[Any], stream: bool) -> dict[str, Any]:
    if not stream:
        result = await sdk.chat.completions.create(
            model="gpt-4o", messages=messages, tools=WEATHER_TOOL
        )
        return result.choices[0].message.model_dump(exclude_none=True)
    content, calls = "", []
    chunks = await sdk.chat.completions.create(
        model="gpt-4o", messages=messages, stream=True, tools=WEATHER_TOOL
    )
    async for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                if tc.id:
                    calls.append({"id": tc.id, "type": "function", "function": tc.function})
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["function"].name, "arguments": '{"city": "Paris"}'},
            }
            for c in calls
        ]
    return message


async def all_kinds_of_traffic(gw: Gateway) -> None:
    """Everything a dashboard or an alert looks at: answers, streams, errors, refusals."""
    await agent_loop(gw, stream=False)
    await agent_loop(gw, stream=True)
    assert await post(gw, ORPHAN) == 400
    gw.provider.queue(Reply(status=500, body={"error": {"message": "boom"}}))
    assert await post(gw, HELLO) == 500
    gw.provider.queue(Reply(events=streamed("cut short").events, die_after=2))
    with contextlib.suppress(aiohttp.ClientPayloadError):  # passed on as broken
        await post(gw, {**HELLO, "stream": True})
