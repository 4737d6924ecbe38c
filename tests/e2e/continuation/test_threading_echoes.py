"""How frameworks echo a run, through the gateway with the official SDKs: Anthropic message
threads, Responses `item_reference`s, and rewritten echoes that keep their tool call ids."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests import harness
from tests.conftest import Database
from tests.fakes import anthropic as claude
from tests.fakes import chat, responses
from tests.fakes.provider import Reply
from tests.fakes.responses import function_call, message, reasoning, response
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

CLAUDE_TOOLS: list[Any] = [
    {"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}
]
CHAT_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
]
RESPONSES_TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
]


def make_reply(body: Any, *, stream: bool, protocol: str) -> Reply:
    module = claude if protocol == "messages" else responses
    return module.streamed(body) if stream else module.reply(body)


async def only_trace(gw: Gateway) -> dict[str, Any]:
    traces = await gw.traces()
    assert len(traces) == 1, [t["id"] for t in traces]
    return await gw.trace(traces[0]["id"])


def kinds(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(item["kind"], item["call_id"]) for item in items]


# --- Anthropic message threads ------------------------------------------------------------


def claude_client(gw: Gateway) -> anthropic.AsyncAnthropic:
    return gw.closing(
        anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-test", max_retries=0)
    )


async def claude_ask(gw: Gateway, *, stream: bool, **kwargs: Any) -> Any:
    messages = claude_client(gw).beta.messages
    if not stream:
        return await messages.create(model="claude-sonnet-4-6", max_tokens=512, **kwargs)
    async with messages.stream(model="claude-sonnet-4-6", max_tokens=512, **kwargs) as events:
        return await events.get_final_message()


def thread_script(stream: bool) -> list[Reply]:
    first = claude.message(
        [
            claude.tool_use("toolu_a1", "get_weather", {"city": "Paris"}),
            claude.tool_use("toolu_a2", "get_weather", {"city": "Oslo"}),
        ],
        message_id="msg_thread_1",
    )
    second = claude.message([claude.text("Sunny and snowy.")], message_id="msg_thread_2")
    return [make_reply(body, stream=stream, protocol="messages") for body in (first, second)]


def results(*call_ids: str) -> list[dict[str, Any]]:
    content = [{"type": "tool_result", "tool_use_id": c, "content": "ok"} for c in call_ids]
    return [{"role": "user", "content": content}]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_anthropic_thread_is_one_trace_checked_against_what_it_holds(
    gateway: Gateway, stream: bool
) -> None:
    gateway.provider.queue(*thread_script(stream))
    first = await claude_ask(
        gateway,
        stream=stream,
        system="You are a weather agent.",
        tools=CLAUDE_TOOLS,
        messages=[{"role": "user", "content": "Paris and Oslo?"}],
        thread={"type": "create"},
    )
    # A continued thread sends only the new turn: no system, no tools, no history.
    second = await claude_ask(
        gateway,
        stream=stream,
        messages=results("toolu_a1", "toolu_a2"),
        thread={"type": "continue", "previous_message_id": first.id},
    )
    assert second.content[0].text == "Sunny and snowy."
    sent = gateway.provider.received[1].json()
    assert sent["thread"] == {"type": "continue", "previous_message_id": "msg_thread_1"}

    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)
    steps = trace["steps"]
    assert [s["stop_reason"] for s in steps] == ["tool_calls", "completed"]
    assert kinds(steps[1]["input_items"]) == [
        ("tool_result", "toolu_a1"),
        ("tool_result", "toolu_a2"),
    ]


async def test_anthropic_thread_result_for_a_call_never_made_is_refused(
    gateway: Gateway,
) -> None:
    gateway.provider.queue(*thread_script(False))
    first = await claude_ask(
        gateway,
        stream=False,
        tools=CLAUDE_TOOLS,
        messages=[{"role": "user", "content": "Paris and Oslo?"}],
        thread={"type": "create"},
    )
    # toolu_a2 is left unanswered and toolu_zz answers nothing the thread holds.
    with pytest.raises(anthropic.BadRequestError) as raised:
        await claude_ask(
            gateway,
            stream=False,
            messages=results("toolu_a1", "toolu_zz"),
            thread={"type": "continue", "previous_message_id": first.id},
        )
    assert "orphan_tool_result" in str(raised.value)
    assert "toolu_zz" in str(raised.value)
    assert len(gateway.provider.received) == 1


async def test_anthropic_thread_unknown_to_the_gateway_is_forwarded(gateway: Gateway) -> None:
    """A thread begun elsewhere (another gateway, before a restart) is never falsely refused."""
    gateway.provider.queue(
        make_reply(claude.message([claude.text("ok")]), stream=False, protocol="messages")
    )
    answer = await claude_ask(
        gateway,
        stream=False,
        messages=results("toolu_elsewhere"),
        thread={"type": "continue", "previous_message_id": "msg_seen_elsewhere"},
    )
    assert answer.content[0].text == "ok"
    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"]) == (1, 0)


@pytest.mark.postgres
async def test_anthropic_thread_continues_across_replicas(
    make_gateway: Any, postgres_database: Database
) -> None:
    """The store is the source of truth: a replica that never saw the first step finds it
    (replicas share PostgreSQL; a SQLite file has one gateway writing it)."""
    url = postgres_database.url
    one, two = await make_gateway(database_url=url), await make_gateway(database_url=url)
    one.provider.queue(*thread_script(False))
    first = await claude_ask(
        one,
        stream=False,
        tools=CLAUDE_TOOLS,
        messages=[{"role": "user", "content": "Paris and Oslo?"}],
        thread={"type": "create"},
    )
    await one.flush()
    await claude_ask(
        two,
        stream=False,
        messages=results("toolu_a1", "toolu_a2"),
        thread={"type": "continue", "previous_message_id": first.id},
    )
    trace = await only_trace(two)
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)


# --- Responses item_reference -------------------------------------------------------------


def openai_client(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test", max_retries=0))


async def responses_create(gw: Gateway, *, stream: bool, **kwargs: Any) -> Any:
    sdk = openai_client(gw)
    if not stream:
        return await sdk.responses.create(model="gpt-5", **kwargs)
    async with sdk.responses.stream(model="gpt-5", **kwargs) as events:
        return await events.get_final_response()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_item_references_resolve_to_the_recorded_items(
    gateway: Gateway, stream: bool
) -> None:
    """What the Vercel AI SDK sends with `store: true`: reasoning and text by reference."""
    first = response(
        [
            reasoning(["Plan."], item_id="rs_step1"),
            message("Checking.", item_id="msg_step1"),
            function_call("call_r1", "get_weather", {"city": "Rome"}),
        ],
        response_id="resp_1",
    )
    second = response([message("Warm in Rome.", item_id="msg_step2")], response_id="resp_2")
    third = response([message("You are welcome.", item_id="msg_step3")], response_id="resp_3")
    gateway.provider.queue(
        *(make_reply(b, stream=stream, protocol="responses") for b in (first, second, third))
    )
    question = {"role": "user", "content": [{"type": "input_text", "text": "Rome?"}]}
    call = {
        "type": "function_call",
        "call_id": "call_r1",
        "name": "get_weather",
        "arguments": '{"city":"Rome"}',
    }
    output = {"type": "function_call_output", "call_id": "call_r1", "output": "warm"}
    await responses_create(gateway, stream=stream, input=[question], tools=RESPONSES_TOOLS)
    history = [
        question,
        {"type": "item_reference", "id": "rs_step1"},
        {"type": "item_reference", "id": "msg_step1"},
        call,
        output,
    ]
    await responses_create(gateway, stream=stream, input=history, tools=RESPONSES_TOOLS)
    thanks = {"role": "user", "content": [{"type": "input_text", "text": "Thanks!"}]}
    history += [{"type": "item_reference", "id": "msg_step2"}, thanks]
    await responses_create(gateway, stream=stream, input=history, tools=RESPONSES_TOOLS)

    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"]) == (3, 0)
    steps = trace["steps"]
    assert kinds(steps[1]["input_items"]) == [("tool_result", "call_r1")]
    assert [(i["kind"], i["text"]) for i in steps[2]["input_items"]] == [("user", "Thanks!")]


async def test_a_referenced_call_counts_as_that_call(gateway: Gateway) -> None:
    first = response([function_call("call_f1", "get_weather", {})], response_id="resp_f1")
    second = response([message("Done.")], response_id="resp_f2")
    gateway.provider.queue(
        *(make_reply(b, stream=False, protocol="responses") for b in (first, second))
    )
    await responses_create(gateway, stream=False, input="Go", tools=RESPONSES_TOOLS)
    history = [
        {"role": "user", "content": "Go"},
        {"type": "item_reference", "id": "fc_f1"},
        {"type": "function_call_output", "call_id": "call_f1", "output": "ok"},
    ]
    await responses_create(gateway, stream=False, input=history, tools=RESPONSES_TOOLS)
    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)


async def test_an_unknown_reference_is_no_reason_to_refuse(gateway: Gateway) -> None:
    """It may stand for a call the gateway never saw: a result answering it is no orphan."""
    gateway.provider.queue(
        make_reply(response([message("ok")]), stream=False, protocol="responses")
    )
    history = [
        {"role": "user", "content": "Go"},
        {"type": "item_reference", "id": "fc_from_elsewhere"},
        {"type": "function_call_output", "call_id": "call_elsewhere", "output": "ok"},
    ]
    answer = await responses_create(gateway, stream=False, input=history)
    assert answer.output_text == "ok"
    trace = await only_trace(gateway)
    assert trace["violation_count"] == 0


# --- Continuation by echoed call ids ------------------------------------------------------


def chat_client(gw: Gateway) -> openai.AsyncOpenAI:
    return openai_client(gw)


def chat_call_script(call_id: str) -> list[Reply]:
    first = chat.completion(tool_calls=[chat.call(call_id, "get_weather", '{"city": "Lima"}')])
    return [first, chat.completion("Cloudy in Lima.")]


def rewritten_history(call_id: str) -> list[Any]:
    """pydantic-ai's echo of a model it does not know as a reasoning model: the reasoning
    comes back as assistant text, which no recorded output holds."""
    return [
        {"role": "user", "content": "Lima?"},
        {
            "role": "assistant",
            "content": "<think>\nI should look it up.\n</think>",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "cloudy"},
    ]


async def test_a_rewritten_echo_continues_by_its_call_ids(gateway: Gateway) -> None:
    gateway.provider.queue(*chat_call_script("call_lima_7Qx"))
    sdk = chat_client(gateway)
    first_messages: Any = [{"role": "user", "content": "Lima?"}]
    await sdk.chat.completions.create(model="gpt-4o", messages=first_messages, tools=CHAT_TOOLS)
    await sdk.chat.completions.create(
        model="gpt-4o", messages=rewritten_history("call_lima_7Qx"), tools=CHAT_TOOLS
    )
    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)
    assert kinds(trace["steps"][1]["input_items"]) == [("tool_result", "call_lima_7Qx")]


@pytest.mark.postgres
async def test_call_id_continuation_across_replicas(
    make_gateway: Any, postgres_database: Database
) -> None:
    url = postgres_database.url
    one, two = await make_gateway(database_url=url), await make_gateway(database_url=url)
    one.provider.queue(*chat_call_script("call_lima_9Rz"))
    first_messages: Any = [{"role": "user", "content": "Lima?"}]
    await chat_client(one).chat.completions.create(
        model="gpt-4o", messages=first_messages, tools=CHAT_TOOLS
    )
    await one.flush()
    await chat_client(two).chat.completions.create(
        model="gpt-4o", messages=rewritten_history("call_lima_9Rz"), tools=CHAT_TOOLS
    )
    trace = await only_trace(two)
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)


async def test_a_call_id_two_runs_emitted_names_neither(gateway: Gateway) -> None:
    """Servers that number ids from 0 in every response: such an id names neither run, but
    the history still begins with the whole input of one run's step only (its opening)."""
    script = chat_call_script("call_0")
    gateway.provider.queue(script[0], *chat_call_script("call_0")[:1], script[1])
    sdk = chat_client(gateway)
    for question in ("Lima?", "Quito?"):
        messages: Any = [{"role": "user", "content": question}]
        await sdk.chat.completions.create(model="gpt-4o", messages=messages, tools=CHAT_TOOLS)
    await sdk.chat.completions.create(
        model="gpt-4o", messages=rewritten_history("call_0"), tools=CHAT_TOOLS
    )
    traces = await gateway.traces()
    assert sorted(t["step_count"] for t in traces) == [1, 2]
    continued = next(t for t in traces if t["step_count"] == 2)
    assert (await gateway.trace(continued["id"]))["steps"][0]["input_items"][0]["text"] == "Lima?"
