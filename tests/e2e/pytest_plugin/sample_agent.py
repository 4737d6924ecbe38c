"""The agent tests a plugin user writes, copied as `test_agent.py` into the runs of
test_plugin.py: a tool loop with the official openai SDK through the `loopwatch` fixture.
The tool's answer comes from WEATHER, so a replay can see it change; AGENT_STEPS caps its
loop, so a replay can see it stop sooner than when recorded."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import openai

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def get_weather(city: str) -> str:
    return f"{city}: " + os.environ.get("WEATHER", "sunny")


def run_agent(client: openai.OpenAI, question: str) -> str | None:
    messages: list[Any] = [{"role": "user", "content": question}]
    for _ in range(int(os.environ.get("AGENT_STEPS", "5"))):
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return None


def client_for(loopwatch: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=loopwatch.base_url, api_key="sk-test", max_retries=0, timeout=20)


def test_weather(loopwatch: Any) -> None:
    with client_for(loopwatch) as client:
        answer = run_agent(client, "Weather in Paris?")
    assert answer == "Paris is sunny."
    assert loopwatch.last_trace()["step_count"] == 2
    assert loopwatch.last_trace()["status"] == "completed"
    loopwatch.assert_no_violations()
    loopwatch.assert_steps(max=3)
    loopwatch.assert_cost(max_usd=0.01)


def test_swallowing(loopwatch: Any) -> None:
    """An agent that hides its provider's errors."""
    with client_for(loopwatch) as client, contextlib.suppress(openai.APIStatusError):
        run_agent(client, "Weather in Paris?")


def test_step_limit(loopwatch: Any) -> None:
    with client_for(loopwatch) as client:
        run_agent(client, "Weather in Paris?")
    loopwatch.assert_steps(max=1)


def test_cost_limit(loopwatch: Any) -> None:
    with client_for(loopwatch) as client:
        run_agent(client, "Weather in Paris?")
    loopwatch.assert_cost(max_usd=0.000001)


def test_clean_run(loopwatch: Any) -> None:
    with client_for(loopwatch) as client:
        run_agent(client, "Weather in Paris?")
    loopwatch.assert_no_violations()


def test_two_runs(loopwatch: Any) -> None:
    """Two agent runs in one test: two traces, two cassettes, replayed in order."""
    with client_for(loopwatch) as client:
        assert run_agent(client, "Weather in Paris?") == "Paris is sunny."
        assert run_agent(client, "Weather in Rome?") == "Rome is sunny."
    assert len(loopwatch.traces()) == 2
