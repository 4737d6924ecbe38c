"""Threading as real agents and SDKs drive it, through the gateway with the official openai
SDK, on SQLite and PostgreSQL: the SDK's own retries (a 429, a 500, a provider that does not
answer in time) stay in their run and spend no budget; identical runs sent in parallel land
in traces of their own; a history re-rendered as text (smolagents' `ToolCallingAgent`)
continues its run; a run that ends by calling its terminal output tool is `completed`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from tests.fakes.chat import call, completion, streamed, usage
from tests.fakes.provider import Received, Reply
from tests.harness import Gateway, make_gateway, provider  # noqa: F401

TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
]
TASK: Any = [{"role": "user", "content": "Weather in Lima?"}]


def sdk(gw: Gateway, *, retries: int = 0, **headers: str) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base, api_key="sk-test", max_retries=retries, default_headers=headers
        )
    )


def failure(status: int) -> Reply:
    # retry-after-ms keeps the SDK's back-off short.
    body = {"error": {"message": "try again", "type": "server_error", "code": None}}
    return Reply(status=status, body=body, headers={"retry-after-ms": "50"})


async def weather_run(client: openai.AsyncOpenAI) -> str:
    """The plain agent loop: ask, run the tool the model calls, send its result back."""
    messages: Any = list(TASK)
    while True:
        answer = await client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=TOOLS
        )
        message = answer.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for tool_call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "sunny"})


async def only_trace(gw: Gateway) -> dict[str, Any]:
    traces = await gw.traces()
    assert len(traces) == 1, [(t["id"], t["step_count"]) for t in traces]
    return await gw.trace(traces[0]["id"])


# --- retries ------------------------------------------------------------------------------


async def test_a_retried_first_request_is_a_retry_in_its_run(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.queue(
        failure(429),
        completion(tool_calls=[call("call_r1", "get_weather", {"city": "Lima"})]),
        completion("Sunny in Lima."),
    )
    client = sdk(gw, retries=2, **{"X-Loopwatch-Max-Steps": "2"})
    assert await weather_run(client) == "Sunny in Lima."
    assert len(gw.provider.received) == 3  # the SDK retried the 429 once
    trace = await only_trace(gw)
    failed, retry, last = trace["steps"]
    assert (failed["http_status"], retry["retry_of"], last["retry_of"]) == (429, failed["id"], None)
    # The back-off after the failed first request is no tool time; the real tool time is.
    assert (failed["tool_ms"], retry["tool_ms"]) == (None, None)
    assert last["tool_ms"] is not None
    assert trace["status"] == "completed" and trace["violation_count"] == 0


async def test_a_failed_attempt_spends_no_step_of_the_budget(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.queue(
        completion(tool_calls=[call("call_b1", "get_weather", {"city": "Lima"})]),
        failure(500),
        completion("Sunny in Lima."),
    )
    client = sdk(gw, retries=2, **{"X-Loopwatch-Max-Steps": "2"})
    assert await weather_run(client) == "Sunny in Lima."
    trace = await only_trace(gw)
    _, failed, retry = trace["steps"]
    assert (failed["http_status"], retry["retry_of"]) == (500, failed["id"])
    assert failed["tool_ms"] is not None and retry["tool_ms"] is None
    assert trace["status"] == "completed" and trace["violation_count"] == 0
    # A third model call is refused: the 500 gave its step back, the two answers took both.
    with_third: Any = [*TASK, {"role": "user", "content": "and Quito?"}]
    gw.provider.queue(completion("unused"))
    try:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=with_third,
            extra_headers={"X-Loopwatch-Trace-Id": trace["id"]},
        )
    except openai.RateLimitError as exc:
        assert exc.body["code"] == "step_budget_exceeded"  # type: ignore[index]
    else:
        raise AssertionError("a third step was admitted under a budget of two")


async def test_a_provider_that_does_not_answer_in_time_is_retried_in_the_run(
    make_gateway: Any,
) -> None:
    gw: Gateway = await make_gateway(read_timeout=0.3)
    slow = completion("too late")
    slow.delay = 2.0  # no response head within the read timeout: the gateway answers 504
    gw.provider.queue(slow, completion("Sunny in Lima."))
    answer = await sdk(gw, retries=1).chat.completions.create(model="gpt-4o", messages=TASK)
    assert answer.choices[0].message.content == "Sunny in Lima."
    trace = await only_trace(gw)
    failed, retry = trace["steps"]
    assert (failed["http_status"], failed["stop_reason"]) == (504, "error")
    assert retry["retry_of"] == failed["id"]
    assert trace["status"] == "completed"


async def test_a_failed_attempt_gives_back_the_tokens_it_held(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.queue(
        failure(429), completion("Sunny.", use=usage(prompt=30, completion=10)), completion("Hi.")
    )
    client = sdk(gw, retries=1, **{"X-Loopwatch-Max-Tokens": "1000"})
    answer = await client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=TASK, max_tokens=500
    )
    # The 429 held 500 tokens and used none: only the answer's 40 are spent.
    assert answer.headers["x-loopwatch-tokens-remaining"] == "500"  # 500 held for the answer
    trace = await only_trace(gw)
    second = await client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=TASK, extra_headers={"X-Loopwatch-Trace-Id": trace["id"]}
    )
    assert second.headers["x-loopwatch-tokens-remaining"] == "0"  # all 960 left are held
    sent = json.loads(gw.provider.received[-1].body)
    assert sent.get("max_completion_tokens", sent.get("max_tokens")) == 960


async def test_a_request_sent_again_after_a_cut_stream_is_its_retry(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    cut = streamed("Sunny in Lima, all day long.")
    cut.die_after = 2
    gw.provider.queue(cut, streamed("Sunny in Lima, all day long."))
    client = sdk(gw)
    try:
        async for _ in await client.chat.completions.create(
            model="gpt-4o", messages=TASK, stream=True
        ):
            pass
    except openai.APIError:
        pass  # the agent sees the stream break and sends the request again
    else:
        raise AssertionError("the stream was not cut")
    async for _ in await client.chat.completions.create(model="gpt-4o", messages=TASK, stream=True):
        pass
    trace = await only_trace(gw)
    cut_step, retry = trace["steps"]
    assert (cut_step["stop_reason"], retry["retry_of"]) == ("interrupted", cut_step["id"])
    assert trace["status"] == "completed"


async def test_the_same_request_after_an_answer_is_no_retry(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.queue(completion("one"), completion("two"))
    client = sdk(gw)
    for _ in range(2):
        await client.chat.completions.create(model="gpt-4o", messages=TASK)
    traces = await gw.traces()
    assert sorted(t["step_count"] for t in traces) == [1, 1]


# --- identical runs in parallel -----------------------------------------------------------


def weather_model(ids: list[str]) -> Any:
    """A model that calls the tool once, then answers; `ids` are the call ids it emits in
    turn (the same id each time: a provider that answers identical runs alike)."""

    def respond(received: Received) -> Reply:
        last = received.json()["messages"][-1]
        if last["role"] == "tool":
            return completion("Sunny in Lima.")
        return completion(tool_calls=[call(ids.pop(0), "get_weather", {"city": "Lima"})])

    return respond


async def run_in_parallel(gw: Gateway, runs: int) -> None:
    client = sdk(gw)
    answers = await asyncio.gather(*(weather_run(client) for _ in range(runs)))
    assert answers == ["Sunny in Lima."] * runs


# Real providers emit unique call ids; a provider that answers identical runs alike does not.
UNIQUE_OR_REPEATED = pytest.mark.parametrize(
    "unique", [True, False], ids=["unique-ids", "repeated-ids"]
)


def call_ids(unique: bool, count: int) -> list[str]:
    return [f"call_u{n}" for n in range(count)] if unique else ["call_0"] * count


@UNIQUE_OR_REPEATED
async def test_identical_runs_in_parallel_land_in_traces_of_their_own(
    make_gateway: Any, unique: bool
) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.responder = weather_model(call_ids(unique, 3))
    await run_in_parallel(gw, 3)
    traces = await gw.traces()
    assert [t["step_count"] for t in traces] == [2, 2, 2]
    for listed in traces:
        trace = await gw.trace(listed["id"])
        assert (trace["status"], trace["violation_count"]) == ("completed", 0)
        (call_item,) = trace["steps"][0]["output_items"]
        (result,) = trace["steps"][1]["input_items"]
        assert result["call_id"] == call_item["call_id"]


# --- histories re-rendered as text --------------------------------------------------------

SYSTEM = {"role": "system", "content": "You are an expert assistant who can solve any task."}


def smol_task(task: str) -> list[Any]:
    return [SYSTEM, {"role": "user", "content": [{"type": "text", "text": f"New task:\n{task}"}]}]


def smol_echo(call_id: str, result: str) -> list[Any]:
    """How smolagents' ToolCallingAgent writes a step into its next request: the call as
    assistant text, the tool's output as a user message."""
    calls = [{"id": call_id, "type": "function", "function": {"name": "get_weather"}}]
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Calling tools:\n{calls}"}]},
        {"role": "user", "content": [{"type": "text", "text": f"Observation:\n{result}"}]},
    ]


SMOL_TOOLS: Any = [
    *TOOLS,
    {"type": "function", "function": {"name": "final_answer", "parameters": {"type": "object"}}},
]


async def smol_run(client: openai.AsyncOpenAI, task: str) -> None:
    messages = smol_task(task)
    while True:
        answer = await client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=SMOL_TOOLS, tool_choice="required"
        )
        (tool_call,) = answer.choices[0].message.tool_calls or []
        if tool_call.function.name == "final_answer":
            return  # smolagents never sends the final answer's result
        messages = [*messages, *smol_echo(tool_call.id, "sunny")]


def smol_model(ids: list[str]) -> Any:
    def respond(received: Received) -> Reply:
        observed = "Observation:" in json.dumps(received.json()["messages"][-1])
        name, arguments = ("final_answer", {"answer": "sunny"}) if observed else ("get_weather", {})
        return completion(tool_calls=[call(ids.pop(0), name, arguments)])

    return respond


async def test_a_history_re_rendered_as_text_continues_its_run(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.responder = smol_model(["call_s1", "call_s2"])
    await smol_run(sdk(gw), "Weather in Lima?")
    trace = await only_trace(gw)
    assert trace["step_count"] == 2 and trace["violation_count"] == 0
    echoed = trace["steps"][1]["input_items"]
    assert [(i["kind"], i["role"]) for i in echoed] == [
        ("assistant_text", "assistant"),
        ("user", "user"),
    ]
    # Its last step only called the terminal output tool: the run is over, not abandoned.
    assert trace["status"] == "completed"


@UNIQUE_OR_REPEATED
async def test_identical_re_rendered_runs_in_parallel_stay_apart(
    make_gateway: Any, unique: bool
) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.responder = smol_model(call_ids(unique, 4))
    client = sdk(gw)
    await asyncio.gather(*(smol_run(client, "Weather in Lima?") for _ in range(2)))
    traces = await gw.traces()
    assert [t["step_count"] for t in traces] == [2, 2]
    assert {t["status"] for t in traces} == {"completed"}


async def test_a_re_rendered_history_two_runs_began_alike_starts_its_own(
    make_gateway: Any,
) -> None:
    """Two recorded runs whose first steps had the same input and the same call id: a third
    history that begins with that input once both are continued names neither."""
    gw: Gateway = await make_gateway()
    gw.provider.responder = smol_model(["call_0"] * 6)
    client = sdk(gw)
    for _ in range(2):
        await smol_run(client, "Weather in Lima?")
    await client.chat.completions.create(
        model="gpt-4o",
        messages=[*smol_task("Weather in Lima?"), *smol_echo("call_0", "rainy")],
        tools=SMOL_TOOLS,
    )
    traces = await gw.traces()
    assert sorted(t["step_count"] for t in traces) == [1, 2, 2]


# --- terminal output tools ----------------------------------------------------------------


async def test_configured_terminal_tools_end_a_run(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway(terminal_tools=("submit",))
    gw.provider.queue(
        completion(tool_calls=[call("call_t1", "submit", {"answer": "42"})]),
        completion(tool_calls=[call("call_t2", "get_weather", {"city": "Lima"})]),
    )
    client = sdk(gw)
    for tag in ("ended", "open"):
        await client.chat.completions.create(
            model="gpt-4o",
            messages=TASK,
            tools=TOOLS,
            extra_headers={"X-Loopwatch-Trace-Id": tag},
        )
    ended, still_open = await gw.trace("ended"), await gw.trace("open")
    assert ended["status"] == "completed"
    assert ended["steps"][0]["output_items"][0]["attrs"]["terminal"] is True
    assert still_open["status"] == "running"  # a call awaits its result


async def test_a_terminal_call_needs_no_result(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()  # pairing enforced
    gw.provider.queue(
        completion(tool_calls=[call("call_f1", "final_answer", {"answer": "sunny"})]),
        completion("Rainy tomorrow."),
    )
    client = sdk(gw)
    first = await client.chat.completions.create(model="gpt-4o", messages=TASK, tools=SMOL_TOOLS)
    follow_up: Any = [
        *TASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "user", "content": "And tomorrow?"},
    ]
    second = await client.chat.completions.create(
        model="gpt-4o", messages=follow_up, tools=SMOL_TOOLS
    )
    assert second.choices[0].message.content == "Rainy tomorrow."
    trace = await only_trace(gw)
    assert (trace["step_count"], trace["violation_count"]) == (2, 0)


async def test_a_re_rendered_answer_joins_the_run_that_gave_it(make_gateway: Any) -> None:
    """Two chats opened alike and answered differently: a history that re-renders one answer
    (here with a trailing newline, so it is no exact echo) continues that chat."""
    gw: Gateway = await make_gateway()
    gw.provider.queue(completion("Hello!"), completion("Hey there"), completion("Fine."))
    client = sdk(gw)
    hi: Any = [{"role": "user", "content": "hi"}]
    for _ in range(2):
        await client.chat.completions.create(model="gpt-4o", messages=hi)
    again: Any = [
        *hi,
        {"role": "assistant", "content": "Hey there\n"},
        {"role": "user", "content": "how are you?"},
    ]
    await client.chat.completions.create(model="gpt-4o", messages=again)
    traces = {t["step_count"]: t for t in await gw.traces()}
    assert sorted(traces) == [1, 2]
    continued = await gw.trace(traces[2]["id"])
    assert continued["steps"][0]["output_items"][0]["text"] == "Hey there"
