"""Cassettes: a 3-step tool loop through the gateway with the official SDKs, exported by the
read API and by `loopwatch export`; each step's request is the body the provider received."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from gateway import cli
from tests.fakes import anthropic as fake_anthropic
from tests.fakes import responses as fake_responses
from tests.fakes.chat import call, completion, streamed, usage
from tests.fakes.provider import Reply
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

TOKEN = "cassette-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

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


@pytest.fixture
async def guarded(make_gateway: GatewayFactory) -> Gateway:
    return await make_gateway(admin_token=TOKEN)


async def cassette(gw: Gateway, trace_id: str, **headers: str) -> tuple[int, str]:
    await gw.flush()
    path = f"{gw.url}/api/traces/{trace_id}/cassette"
    async with aiohttp.ClientSession() as s, s.get(path, headers=headers) as r:
        return r.status, await r.text()


def exported(gw: Gateway, trace_id: str, tmp: Any) -> str:
    out = tmp / "trace.jsonl"
    url = gw.deps.settings.database_url
    assert cli.main(["export", trace_id, "--out", str(out), "--database-url", url]) == 0
    return str(out.read_text(encoding="utf-8"))


THOUGHT = "I should look the weather up city by city."


async def chat_loop(gw: Gateway, *, stream: bool) -> None:
    """Three steps: two tool calls, each answered, then the final text."""
    make = streamed if stream else completion
    # The first answer reasons in readable text (DeepSeek's `reasoning_content`).
    thought: dict[str, Any] = (
        {"reasoning": THOUGHT} if stream else {"extra_message": {"reasoning_content": THOUGHT}}
    )
    gw.provider.queue(
        make(
            tool_calls=[call("call_1", "get_weather", {"city": "Paris"})],
            use=usage(50, 30),
            **thought,
        ),
        make(tool_calls=[call("call_2", "get_weather", {"city": "Rome"})], use=usage(90, 12)),
        make("Paris is sunny, Rome rainy.", use=usage(120, 9)),
    )
    messages: list[Any] = [
        {"role": "system", "content": "You answer about the weather."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
    ]
    sdk = gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-t", max_retries=0))
    for n, city in ((1, "Paris"), (2, "Rome"), (3, None)):
        kwargs: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "tools": CHAT_TOOLS}
        if stream:
            chunks = await sdk.chat.completions.create(stream=True, temperature=0.2, **kwargs)
            async for _ in chunks:
                pass
        else:
            await sdk.chat.completions.create(temperature=0.2, **kwargs)
        if city is not None:
            arguments = json.dumps({"city": city})
            messages += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call(f"call_{n}", "get_weather", arguments)],
                },
                {"role": "tool", "tool_call_id": f"call_{n}", "content": f"{city}: sunny"},
            ]


def as_redaction_sees(body: dict[str, Any]) -> dict[str, Any]:
    """The body with what redaction changes undone: it rewrites a tool call's JSON arguments
    in compact form (gateway.redaction.redactor), so they are compared as JSON values. No
    text of this loop matches a redaction rule: all else must be equal as sent."""
    messages = []
    for message in body["messages"]:
        calls = [
            {
                **c,
                "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])},
            }
            for c in message.get("tool_calls", ())
        ]
        messages.append({**message, "tool_calls": calls} if calls else message)
    return {**body, "messages": messages}


def lines_of(text: str) -> list[dict[str, Any]]:
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def assembled(events: list[dict[str, Any]]) -> Any:
    """What the openai SDK makes of the exported chunks."""
    state = ChatCompletionStreamState()
    assert events[-1] == {"data": "[DONE]"}
    for event in events[:-1]:
        state.handle_chunk(ChatCompletionChunk.model_validate(json.loads(event["data"])))
    return state.get_final_completion()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_chat_loop_exports_the_bodies_the_provider_received(
    guarded: Gateway, stream: bool, tmp_path: Any
) -> None:
    await chat_loop(guarded, stream=stream)
    [trace] = (await guarded.get("/api/traces", headers=AUTH))["traces"]
    status, text = await cassette(guarded, trace["id"], **AUTH)
    assert status == 200, text
    header, *steps = lines_of(text)
    assert header["format"] == "loopwatch-cassette/1" and header["trace_id"] == trace["id"]
    assert set(header) == {"format", "trace_id", "created_at", "loopwatch_version"}
    received = [r.json() for r in guarded.provider.received]
    assert [s["seq"] for s in steps] == [1, 2, 3]
    for step, body in zip(steps, received, strict=True):
        assert (step["protocol"], step["method"], step["path"]) == (
            "chat",
            "POST",
            "/v1/chat/completions",
        )
        assert as_redaction_sees(step["request"]["body"]) == as_redaction_sees(body)
        assert step["request"]["headers"] == {}  # the SDK sends no OpenAI-Beta here
    last = steps[-1]["response"]
    assert last["status"] == 200
    if stream:
        final = assembled(last["events"])
        first = assembled(steps[0]["response"]["events"])
        call_1 = first.choices[0].message.tool_calls[0]
        assert (call_1.id, call_1.function.name) == ("call_1", "get_weather")
        assert json.loads(call_1.function.arguments) == {"city": "Paris"}
    else:
        final = openai.types.chat.ChatCompletion.model_validate(last["body"])
    assert final.choices[0].message.content == "Paris is sunny, Rome rainy."
    assert final.choices[0].finish_reason == "stop"
    assert final.usage is not None and final.usage.prompt_tokens == 120
    assert final.model == "gpt-4o-2024-08-06"
    assert THOUGHT not in text  # readable reasoning is never exported
    assert exported(guarded, trace["id"], tmp_path) == text


# A client tool as the Messages API reference declares one (`tools[].input_schema`).
MESSAGES_TOOLS: Any = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


BETA = "token-efficient-tools-2025-02-19"


async def messages_loop(gw: Gateway, *, stream: bool) -> None:
    """Three steps with the anthropic SDK: two tool uses, each answered, then the text."""
    fake = fake_anthropic
    make = fake.streamed if stream else fake.reply
    gw.provider.queue(
        make(
            fake.message(
                [fake.text("Looking."), fake.tool_use("toolu_1", "get_weather", {"city": "Paris"})],
                message_id="msg_1",
                use=fake.usage(50, 30, cache_read=8),
            )
        ),
        make(
            fake.message(
                [fake.tool_use("toolu_2", "get_weather", {"city": "Rome"})],
                message_id="msg_2",
                use=fake.usage(90, 12),
            )
        ),
        make(
            fake.message(
                [fake.text("Paris is sunny, Rome rainy.")],
                message_id="msg_3",
                use=fake.usage(120, 9),
            )
        ),
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris and Rome?"}]
    sdk = gw.closing(anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-t", max_retries=0))
    for n, city in ((1, "Paris"), (2, "Rome"), (3, None)):
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 1024,
            "system": "You answer about the weather.",
            "messages": messages,
            "tools": MESSAGES_TOOLS,
            "extra_headers": {"anthropic-beta": BETA},
        }
        if stream:
            async with sdk.messages.stream(**kwargs) as events:
                answer = await events.get_final_message()
        else:
            answer = await sdk.messages.create(**kwargs)
        if city is not None:
            content = [b.model_dump(exclude_none=True) for b in answer.content]
            result = {
                "type": "tool_result",
                "tool_use_id": f"toolu_{n}",
                "content": f"{city}: sunny",
            }
            messages += [
                {"role": "assistant", "content": content},
                {"role": "user", "content": [result]},
            ]


async def sdk_answer(gw: Gateway, response: dict[str, Any]) -> Any:
    """What the anthropic SDK makes of the exported answer, served by the fake provider."""
    if "events" in response:
        events = [
            f"event: {e['event']}\ndata: {e['data']}\n\n".encode() for e in response["events"]
        ]
        gw.provider.queue(Reply(events=events))
    else:
        gw.provider.queue(Reply(body=response["body"]))
    base = gw.provider.url.removesuffix("/v1")  # type: ignore[attr-defined]
    sdk = gw.closing(anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=0))
    kwargs: Any = {"model": "m", "max_tokens": 1, "messages": []}
    if "events" not in response:
        return await sdk.messages.create(**kwargs)
    async with sdk.messages.stream(**kwargs) as stream:
        return await stream.get_final_message()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_messages_loop_exports_the_bodies_the_provider_received(
    guarded: Gateway, stream: bool, tmp_path: Any
) -> None:
    await messages_loop(guarded, stream=stream)
    [trace] = (await guarded.get("/api/traces", headers=AUTH))["traces"]
    status, text = await cassette(guarded, trace["id"], **AUTH)
    assert status == 200, text
    _, *steps = lines_of(text)
    received = list(guarded.provider.received)
    for step, sent in zip(steps, received, strict=True):
        assert (step["protocol"], step["method"], step["path"]) == (
            "messages",
            "POST",
            "/v1/messages",
        )
        # No text of this loop matches a redaction rule: the bodies are equal as sent.
        assert step["request"]["body"] == sent.json()
        version = sent.headers["anthropic-version"]
        assert step["request"]["headers"] == {"anthropic-version": version, "anthropic-beta": BETA}
    first = await sdk_answer(guarded, steps[0]["response"])
    assert [b.type for b in first.content] == ["text", "tool_use"]
    assert (first.content[1].id, first.content[1].input) == ("toolu_1", {"city": "Paris"})
    assert (first.id, first.stop_reason, first.model) == ("msg_1", "tool_use", "claude-sonnet-4-6")
    assert (first.usage.input_tokens, first.usage.cache_read_input_tokens) == (50, 8)
    assert first.usage.output_tokens == 30
    last = await sdk_answer(guarded, steps[-1]["response"])
    assert last.content[0].text == "Paris is sunny, Rome rainy."
    assert last.stop_reason == "end_turn"
    assert exported(guarded, trace["id"], tmp_path) == text


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


async def responses_loop(gw: Gateway, *, stream: bool, chained: bool = False) -> None:
    """Three steps with the openai SDK's Responses API: the whole input each time, or
    (`chained`) only the new items after `previous_response_id`."""
    fake = fake_responses
    make = fake.streamed if stream else fake.reply
    gw.provider.queue(
        make(
            fake.response(
                [fake.function_call("call_1", "get_weather", {"city": "Paris"})],
                response_id="resp_1",
                use=fake.usage(50, 30),
            )
        ),
        make(
            fake.response(
                [fake.function_call("call_2", "get_weather", {"city": "Rome"})],
                response_id="resp_2",
                use=fake.usage(90, 12),
            )
        ),
        make(
            fake.response(
                [fake.message("Paris is sunny, Rome rainy.", "msg_3")],
                response_id="resp_3",
                use=fake.usage(120, 9),
            )
        ),
    )
    history: list[Any] = [{"role": "user", "content": "Weather in Paris and Rome?"}]
    sdk = gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-t", max_retries=0))
    for n, city in ((1, "Paris"), (2, "Rome"), (3, None)):
        kwargs: dict[str, Any] = {
            "model": "gpt-5",
            "instructions": "You answer about the weather.",
            "input": history if n > 1 else history[0]["content"],
            "tools": RESPONSES_TOOLS,
        }
        if chained and n > 1:
            kwargs |= {"previous_response_id": f"resp_{n - 1}", "input": history[-1:]}
        if stream:
            events = await sdk.responses.create(stream=True, **kwargs)
            async for _ in events:
                pass
        else:
            await sdk.responses.create(**kwargs)
        if city is not None:
            arguments = json.dumps({"city": city})
            call_id = f"call_{n}"
            history += [
                {
                    "id": f"fc_{n}",
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "get_weather",
                    "arguments": arguments,
                },
                {"type": "function_call_output", "call_id": call_id, "output": f"{city}: sunny"},
            ]


async def sdk_response(gw: Gateway, response: dict[str, Any]) -> Any:
    """What the openai SDK makes of the exported answer, served by the fake provider."""
    if "events" in response:
        events = [
            f"event: {e['event']}\ndata: {e['data']}\n\n".encode() for e in response["events"]
        ]
        gw.provider.queue(Reply(events=events))
    else:
        gw.provider.queue(Reply(body=response["body"]))
    base = gw.provider.url  # type: ignore[attr-defined]
    sdk = gw.closing(openai.AsyncOpenAI(base_url=base, api_key="k", max_retries=0))
    if "events" not in response:
        return await sdk.responses.create(model="m", input="x")
    async with sdk.responses.stream(model="m", input="x") as stream:
        return await stream.get_final_response()


def responses_as_redaction_sees(body: dict[str, Any]) -> dict[str, Any]:
    """Tool calls' JSON arguments compared as values: redaction rewrites them compactly."""
    if not isinstance(body["input"], list):
        return body
    items = [
        {**i, "arguments": json.loads(i["arguments"])} if "arguments" in i else i
        for i in body["input"]
    ]
    return {**body, "input": items}


@pytest.mark.parametrize(("stream", "chained"), [(False, False), (True, False), (False, True)])
async def test_a_responses_loop_exports_the_bodies_the_provider_received(
    guarded: Gateway, stream: bool, chained: bool, tmp_path: Any
) -> None:
    await responses_loop(guarded, stream=stream, chained=chained)
    [trace] = (await guarded.get("/api/traces", headers=AUTH))["traces"]
    status, text = await cassette(guarded, trace["id"], **AUTH)
    assert status == 200, text
    _, *steps = lines_of(text)
    received = [r.json() for r in guarded.provider.received]
    for step, body in zip(steps, received, strict=True):
        assert (step["protocol"], step["method"], step["path"]) == (
            "responses",
            "POST",
            "/v1/responses",
        )
        rebuilt = step["request"]["body"]
        assert responses_as_redaction_sees(rebuilt) == responses_as_redaction_sees(body)
    first = await sdk_response(guarded, steps[0]["response"])
    (call_1,) = first.output
    assert (call_1.type, call_1.id, call_1.call_id, call_1.name) == (
        "function_call",
        "fc_1",
        "call_1",
        "get_weather",
    )
    assert json.loads(call_1.arguments) == {"city": "Paris"}
    assert (first.id, first.status, first.usage.input_tokens) == ("resp_1", "completed", 50)
    last = await sdk_response(guarded, steps[-1]["response"])
    assert last.output_text == "Paris is sunny, Rome rainy."
    assert last.output[0].id == "msg_3"
    assert exported(guarded, trace["id"], tmp_path) == text


async def test_the_cassette_is_guarded_as_the_read_api(guarded: Gateway) -> None:
    status, _ = await cassette(guarded, "nope")
    assert status == 401
    status, text = await cassette(guarded, "nope", **AUTH)
    assert status == 404, text


async def test_export_of_an_unknown_trace_fails_in_one_line(guarded: Gateway) -> None:
    await guarded.flush()
    url = guarded.deps.settings.database_url
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli.main(["export", "nope", "--database-url", url]) == 1
    assert err.getvalue() == "loopwatch: no trace nope\n"
