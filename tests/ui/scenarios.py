"""Agent runs for UI tests, made through the gateway against the fake provider."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import anthropic
import openai

from tests.factories import chat_request
from tests.fakes import anthropic as anth
from tests.fakes.chat import call, completion, streamed, usage
from tests.fakes.provider import Reply
from tests.harness import Gateway

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@dataclass
class Runs:
    weather: str  # clean two-step run: reasoning, two parallel tool calls, their results
    truncated: str  # one step whose tool call was cut off by a length stop
    budget: str  # a second request refused by its step budget
    payload: str  # user text and model answer that hold HTML and script


def sdk(gw: Gateway, **headers: str) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base,
            api_key="sk-test-ui-key-1234567890",
            max_retries=0,
            default_headers=headers or None,
        )
    )


async def weather_run(gw: Gateway, trace_id: str = "ui-weather") -> str:
    gw.provider.queue(
        streamed(
            tool_calls=[
                call("call_paris", "get_weather", {"city": "Paris"}),
                call("call_tokyo", "get_weather", {"city": "Tokyo"}),
            ],
            reasoning="I should look up both cities at once.",
            response_id="chatcmpl-weather-1",
            use=usage(50, 30, cached=10, reasoning=12),
        ),
        completion(
            "Paris is sunny and Tokyo is rainy.",
            response_id="chatcmpl-weather-2",
            use=usage(90, 12),
        ),
    )
    async with sdk(gw, **{"X-Loopwatch-Trace-Id": trace_id}) as client:
        await _weather_loop(client)
    return trace_id


async def _weather_loop(client: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are a weather agent."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
    ]
    stream = await client.chat.completions.create(
        model="gpt-4o", messages=messages, tools=TOOLS, stream=True
    )
    calls: dict[int, dict[str, Any]] = {}
    reasoning: list[str] = []
    async for chunk in stream:
        for choice in chunk.choices:
            piece = (choice.delta.model_extra or {}).get("reasoning_content")
            if isinstance(piece, str):
                reasoning.append(piece)
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, _blank_call(tc.id))
                if tc.function and tc.function.name:
                    entry["function"]["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    entry["function"]["arguments"] += tc.function.arguments
    # DeepSeek-style reasoning goes back with the calls it led to, as that provider requires.
    turn = {"role": "assistant", "content": None, "reasoning_content": "".join(reasoning)}
    messages.append({**turn, "tool_calls": list(calls.values())})
    for tc in calls.values():
        city = json.loads(tc["function"]["arguments"])["city"]
        weather = "sunny" if city == "Paris" else "rainy"
        messages.append({"role": "tool", "tool_call_id": tc["id"], "content": weather})
    await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)


def _blank_call(call_id: str | None) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "", "arguments": ""}}


async def truncated_run(gw: Gateway, trace_id: str = "ui-truncated") -> str:
    reply = completion(
        tool_calls=[call("call_cut", "get_weather", '{"city": "Par')],
        finish="length",
        response_id="chatcmpl-cut",
    )
    reply.body["model"] = "gpt-4o-mini"
    gw.provider.queue(reply)
    async with sdk(gw, **{"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS
        )
    return trace_id


async def budget_run(gw: Gateway, trace_id: str = "ui-budget") -> str:
    gw.provider.queue(completion("First answer.", response_id="chatcmpl-b1"))
    headers = {"X-Loopwatch-Trace-Id": trace_id, "X-Loopwatch-Max-Steps": "1"}
    messages: list[Any] = [{"role": "user", "content": "Go on."}]
    async with sdk(gw, **headers) as client:
        await client.chat.completions.create(model="gpt-4o", messages=messages)
        try:
            await client.chat.completions.create(model="gpt-4o", messages=messages)
        except openai.RateLimitError:
            return trace_id
    raise AssertionError("the step budget did not refuse the second request")


async def payload_run(gw: Gateway, trace_id: str = "ui-payload") -> str:
    """Raw HTTP this time: the text reaches the store exactly as a client sent it."""
    gw.provider.queue(completion(f"Here you go: {SCRIPT} and {IMG}", response_id="chatcmpl-p"))
    body = chat_request(f"Echo {SCRIPT} {IMG}", model=f"gpt-4o{IMG}")
    headers = {"Authorization": "Bearer sk-test", "X-Loopwatch-Trace-Id": trace_id}
    async with (
        aiohttp.ClientSession() as session,
        session.post(gw.openai_base + "/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status == 200, await response.text()
    return trace_id


async def all_runs(gw: Gateway) -> Runs:
    runs = Runs(
        await weather_run(gw), await truncated_run(gw), await budget_run(gw), await payload_run(gw)
    )
    await gw.flush()
    return runs


INCIDENT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("list_incidents", "get_incident")
]


async def retry_run(gw: Gateway, trace_id: str = "ui-retry") -> str:
    """The stream of step 2 dies mid tool-call; the agent sends the same request again (step
    3), runs the call and sends its result (step 4)."""
    get = call("call_get", "get_incident", {"id": "INC-7", "include": ["owner", "timeline"]})
    broken = streamed(tool_calls=[get], response_id="chatcmpl-r2")
    gw.provider.queue(
        completion(tool_calls=[call("call_list", "list_incidents", {})], response_id="chatcmpl-r1"),
        Reply(events=broken.events, headers=broken.headers, die_after=5),
        completion(tool_calls=[get], response_id="chatcmpl-r3"),
        completion("INC-7 is owned by payments.", response_id="chatcmpl-r4"),
    )
    messages: list[Any] = [{"role": "user", "content": "Summarize the open incident."}]
    async with sdk(gw, **{"X-Loopwatch-Trace-Id": trace_id}) as client:
        first = await client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=INCIDENT_TOOLS
        )
        messages += [_assistant(first), _result("call_list", '[{"id": "INC-7"}]')]
        try:
            stream = await client.chat.completions.create(
                model="gpt-4o", messages=messages, tools=INCIDENT_TOOLS, stream=True
            )
            async for _ in stream:
                pass
        except Exception:  # the connection broke: the SDK raises, the agent retries
            pass
        again = await client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=INCIDENT_TOOLS
        )
        messages += [_assistant(again), _result("call_get", '{"owner": "payments"}')]
        await client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=INCIDENT_TOOLS
        )
    return trace_id


def _assistant(response: Any) -> dict[str, Any]:
    return response.choices[0].message.model_dump(exclude_none=True)


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


async def refused_run(gw: Gateway, trace_id: str = "ui-refused") -> str:
    """Two parallel calls; the agent sends only one result back and is refused by pairing."""
    gw.provider.queue(
        completion(
            tool_calls=[
                call("call_a", "get_weather", {"city": "Oslo"}),
                call("call_b", "get_weather", {"city": "Rome"}),
            ],
            response_id="chatcmpl-f1",
        )
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo and Rome?"}]
    async with sdk(gw, **{"X-Loopwatch-Trace-Id": trace_id}) as client:
        first = await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        messages += [_assistant(first), _result("call_a", "snow")]
        try:
            await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        except openai.BadRequestError:
            return trace_id
    raise AssertionError("pairing did not refuse the request")


async def first_step_only(gw: Gateway, trace_id: str = "ui-running") -> str:
    """A run that asked for a tool a moment ago: still running."""
    gw.provider.queue(
        completion(tool_calls=[call("call_r", "get_weather", {"city": "Lima"})], response_id="r1")
    )
    async with sdk(gw, **{"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "Weather in Lima?"}],
            tools=TOOLS,
        )
    return trace_id


async def next_step(gw: Gateway, trace_id: str = "ui-running") -> None:
    """The running run goes on: the tool's result comes back and the model answers."""
    gw.provider.queue(completion("Lima is cloudy.", response_id="r2"))
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Lima?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_r", "get_weather", {"city": "Lima"})],
        },
        _result("call_r", "cloudy"),
    ]
    async with sdk(gw, **{"X-Loopwatch-Trace-Id": trace_id}) as client:
        await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)


SEARCH_ID = "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE"
SEARCH_FOUND = "ESA launches probe https://www.esa.int/probe"


async def search_run(gw: Gateway, trace_id: str = "ui-search") -> str:
    """One streamed Anthropic answer in which the provider ran a web search: its call, its
    result, then the text that cites it; the run ends there."""
    body = anth.message(
        [
            anth.server_tool_use(SEARCH_ID, "web_search", {"query": "ESA news"}),
            anth.web_search_result(SEARCH_ID, ("ESA launches probe", "https://www.esa.int/probe")),
            anth.text("This week the ESA launched a probe."),
        ]
    )
    gw.provider.queue(anth.streamed(body))
    client = gw.closing(
        anthropic.AsyncAnthropic(
            base_url=gw.url,
            api_key="sk-ant-test",
            max_retries=0,
            default_headers={"X-Loopwatch-Trace-Id": trace_id},
        )
    )
    async with client.messages.stream(
        model=anth.MODEL,
        max_tokens=512,
        messages=[{"role": "user", "content": "What did the ESA announce this week?"}],
        tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
    ) as events:
        await events.get_final_message()
    return trace_id
