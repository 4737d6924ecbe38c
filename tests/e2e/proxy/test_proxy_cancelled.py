"""A client that gives up before its answer (an SDK timeout, a dropped connection): a step
stopped `cancelled` in its run's trace, holding the tool results it carried, with an access
line and its count in /metrics; the run is not later judged to owe those results."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp.test_utils import TestServer

from gateway.app import create_app
from gateway.config import Settings
from gateway.ops.logs import ACCESS_LOGGER, access_logger_class
from tests.factories import chat_request
from tests.fakes import anthropic as claude
from tests.fakes import chat
from tests.fakes.provider import FakeProvider, Received, Reply
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

GIVE_UP_SECONDS = 0.5  # the SDK's timeout for the request the provider never answers
CHAT_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
]
CLAUDE_TOOLS: list[Any] = [
    {"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}
]
WEATHER = {"city": "Paris"}
CHAT = "/v1/chat/completions"


@pytest.fixture
async def logged(
    provider: FakeProvider, database_url: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Gateway]:
    """A gateway whose access lines go to the gateway's own access logger, as served."""
    settings = Settings(
        upstream_url=provider.url,  # type: ignore[attr-defined]
        database_url=database_url,
        recorder_flush_seconds=0.01,
        recorder="thread",
        spool_dir=str(tmp_path / "spool"),
    )
    caplog.set_level(logging.INFO, ACCESS_LOGGER)
    server = TestServer(create_app(settings))
    await server.start_server(
        auto_decompress=False,
        access_log=logging.getLogger(ACCESS_LOGGER),
        access_log_class=access_logger_class(lambda path: path),
    )
    yield Gateway(str(server.make_url("")).rstrip("/"), server.app, provider)
    await server.close()


def kinds(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(item["kind"], item["call_id"]) for item in items]


async def until(condition: Callable[[], bool]) -> None:
    """Wait, bounded, for what the gateway does once its client has gone."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the gateway never did it")


async def only_trace(gw: Gateway) -> dict[str, Any]:
    await asyncio.wait_for(gw.provider.disconnected.wait(), 10)  # the gateway let go
    traces = await gw.traces()
    assert len(traces) == 1, [t["id"] for t in traces]
    return await gw.trace(traces[0]["id"])


async def page_text(gw: Gateway, path: str) -> str:
    async with aiohttp.ClientSession() as s, s.get(gw.url + path) as r:
        assert r.status == 200
        return await r.text()


async def metric_lines(gw: Gateway, name: str) -> list[str]:
    async with aiohttp.ClientSession() as s, s.get(gw.url + "/metrics") as r:
        text = await r.text()
    return [line for line in text.splitlines() if line.startswith(name + "{")]


# --- an SDK that times out before the provider answers ---------------------------------------


async def chat_ask(sdk: openai.AsyncOpenAI, messages: list[Any], stream: bool) -> None:
    create = sdk.chat.completions.create
    if not stream:
        await create(model="gpt-4o", messages=messages, tools=CHAT_TOOLS)
        return
    async for _ in await create(model="gpt-4o", messages=messages, tools=CHAT_TOOLS, stream=True):
        pass


async def chat_run_gives_up(gw: Gateway, stream: bool, hold: asyncio.Event) -> None:
    """A tool call answered, then the request carrying its result times out."""
    calls = [chat.call("call_w1", "get_weather", WEATHER)]
    first = chat.streamed(tool_calls=calls) if stream else chat.completion(tool_calls=calls)
    gw.provider.queue(first, Reply(hold=hold))
    sdk = gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-t", max_retries=0))
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    await chat_ask(sdk, messages, stream)
    messages += [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_w1", "content": "sunny"},
    ]
    with pytest.raises(openai.APITimeoutError):
        await chat_ask(sdk.with_options(timeout=GIVE_UP_SECONDS), messages, stream)


async def claude_ask(sdk: anthropic.AsyncAnthropic, messages: list[Any], stream: bool) -> None:
    asked: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 512}
    asked.update(tools=CLAUDE_TOOLS, messages=messages)
    if not stream:
        await sdk.messages.create(**asked)
        return
    async with sdk.messages.stream(**asked) as events:
        await events.get_final_message()


async def claude_run_gives_up(gw: Gateway, stream: bool, hold: asyncio.Event) -> None:
    use = claude.tool_use("toolu_w1", "get_weather", WEATHER)
    body = claude.message([use], message_id="msg_weather_1")
    gw.provider.queue(claude.streamed(body) if stream else claude.reply(body), Reply(hold=hold))
    sdk = gw.closing(anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-t", max_retries=0))
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    await claude_ask(sdk, messages, stream)
    result = {"type": "tool_result", "tool_use_id": "toolu_w1", "content": "sunny"}
    messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    with pytest.raises(anthropic.APITimeoutError):
        await claude_ask(sdk.with_options(timeout=GIVE_UP_SECONDS), messages, stream)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("protocol", ["chat", "messages"])
async def test_a_request_the_sdk_gave_up_on_is_a_cancelled_step_of_its_run(
    make_gateway: GatewayFactory, protocol: str, stream: bool
) -> None:
    # Idle at once: a run still owing a tool result would read `abandoned` right away.
    gw = await make_gateway(trace_idle_seconds=0.001)
    hold = asyncio.Event()
    try:
        run = chat_run_gives_up if protocol == "chat" else claude_run_gives_up
        await run(gw, stream, hold)
        trace = await only_trace(gw)
    finally:
        hold.set()
    call_id = "call_w1" if protocol == "chat" else "toolu_w1"
    first, cancelled = trace["steps"]
    assert [first["stop_reason"], cancelled["stop_reason"]] == ["tool_calls", "cancelled"]
    assert kinds(cancelled["input_items"]) == [("tool_result", call_id)]
    assert cancelled["http_status"] is None
    # The run sent the result it owed: it failed on a request it gave up, it is not abandoned.
    assert trace["status"] == "failed"
    page = await page_text(gw, f"/traces/{trace['id']}")
    assert "Failed: the last step stopped cancelled." in page
    assert "Abandoned" not in page
    step_page = await page_text(gw, f"/traces/{trace['id']}/steps/{cancelled['id']}")
    assert "cancelled" in step_page


# --- a client whose connection drops: the access line and the metrics -----------------------


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The proxied requests' access lines (the test's reads of the API have theirs too)."""
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    return [line for line in lines if line.startswith("POST /v1/")]


async def post_then_drop(
    gw: Gateway, body: dict[str, Any], arrived: asyncio.Event | None, path: str = CHAT
) -> None:
    """POST, then close the connection: once `arrived` is set (no head seen), or with none
    once the first event of the response is read."""
    async with aiohttp.ClientSession() as s:
        posting = asyncio.ensure_future(s.post(gw.url + path, json=body))
        if arrived is not None:
            await asyncio.wait_for(arrived.wait(), 10)
            posting.cancel()  # the connection closes while the provider thinks
            return
        response = await asyncio.wait_for(posting, 10)
        await response.content.readuntil(b"\n\n")
        response.close()


@pytest.mark.parametrize(
    ("path", "protocol", "items"),
    [(CHAT, "chat", [("user", None)]), ("/v1/files", "passthrough", [])],
    ids=["model", "passthrough"],
)
async def test_a_client_gone_before_the_head_is_logged_and_counted(
    logged: Gateway,
    caplog: pytest.LogCaptureFixture,
    path: str,
    protocol: str,
    items: list[tuple[str, str | None]],
) -> None:
    arrived, hold = asyncio.Event(), asyncio.Event()

    def held(received: Received) -> Reply:
        arrived.set()
        return Reply(hold=hold)

    logged.provider.queue(held)
    try:
        await post_then_drop(logged, chat_request("hi"), arrived, path)
        trace = await only_trace(logged)
    finally:
        hold.set()
    step = trace["steps"][0]
    assert (step["protocol"], step["stop_reason"], step["http_status"]) == (
        protocol,
        "cancelled",
        None,
    )
    assert kinds(step["input_items"]) == items
    await until(lambda: bool(access_lines(caplog)))
    (line,) = access_lines(caplog)
    assert line.startswith(f"POST {path} 499 ")
    assert line.endswith(f"trace={trace['id']} step={step['id']}")
    (counted,) = await metric_lines(logged, "loopwatch_requests_total")
    assert f'protocol="{protocol}"' in counted
    assert 'status="none",stop_reason="cancelled"' in counted and counted.endswith(" 1.0")


async def test_a_client_gone_mid_stream_is_logged_and_counted(
    logged: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    gate = asyncio.Event()
    logged.provider.queue(Reply(events=chat.stream_chunks("partial, then more"), gate=gate))
    try:
        await post_then_drop(logged, chat_request("hi", stream=True), None)
        trace = await only_trace(logged)
    finally:
        gate.set()
    step = trace["steps"][0]
    assert (step["stop_reason"], step["http_status"]) == ("cancelled", 200)
    await until(lambda: bool(access_lines(caplog)))
    (line,) = access_lines(caplog)
    assert line.startswith(f"POST {CHAT} 200 ")
    assert line.endswith(f"trace={trace['id']} step={step['id']}")
    (counted,) = await metric_lines(logged, "loopwatch_requests_total")
    assert 'status="2xx",stop_reason="cancelled"' in counted and counted.endswith(" 1.0")
    cancelled = await metric_lines(logged, "loopwatch_stream_cancelled_total")
    assert 'loopwatch_stream_cancelled_total{protocol="chat"} 1.0' in cancelled


# --- budgets: the step was forwarded, its usage is unknown -----------------------------------


async def test_a_request_given_up_counts_its_step_and_gives_its_tokens_back(
    make_gateway: GatewayFactory,
) -> None:
    gw = await make_gateway()
    hold = asyncio.Event()
    budget = {"X-Loopwatch-Max-Steps": "5", "X-Loopwatch-Max-Tokens": "5000"}
    sdk = gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base, api_key="sk-t", max_retries=0, default_headers=budget
        )
    )
    asked: dict[str, Any] = {"model": "gpt-4o", "max_tokens": 1000}
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    gw.provider.queue(chat.completion("Sunny."), Reply(hold=hold), chat.completion("Mild."))
    try:
        await sdk.chat.completions.create(messages=messages, **asked)
        messages += [
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "And tomorrow?"},
        ]
        with pytest.raises(openai.APITimeoutError):
            await sdk.with_options(timeout=GIVE_UP_SECONDS).chat.completions.create(
                messages=messages, **asked
            )
        await asyncio.wait_for(gw.provider.disconnected.wait(), 10)
    finally:
        hold.set()
    again = await sdk.chat.completions.with_raw_response.create(messages=messages, **asked)
    # The run's third step: the one given up counts; 30 tokens spent by the first, none by
    # the second (its held 1000 given back), 1000 held for this one.
    assert again.headers["X-Loopwatch-Steps-Remaining"] == "2"
    assert again.headers["X-Loopwatch-Tokens-Remaining"] == str(5000 - 30 - 1000)
    trace = await gw.trace(again.headers["X-Loopwatch-Trace-Id"])
    steps = trace["steps"]
    assert [s["stop_reason"] for s in steps] == ["completed", "cancelled", "completed"]
    assert steps[2]["retry_of"] == steps[1]["id"]  # sent again: a retry of the one given up
