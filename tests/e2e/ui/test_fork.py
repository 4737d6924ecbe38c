"""Forks: a 3-step tool loop recorded through the gateway with the official SDKs, its step 2
sent again with another model by `POST /api/traces/{id}/fork`, through the gateway's own
proxy path; the fork is a new trace naming the step it came from."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from tests.e2e.proxy.test_proxy_unhappy import database_bytes
from tests.e2e.ui.test_cassette import (
    as_redaction_sees,
    chat_loop,
    messages_loop,
    responses_as_redaction_sees,
    responses_loop,
)
from tests.fakes import anthropic as fake_anthropic
from tests.fakes import responses as fake_responses
from tests.fakes.chat import completion, usage
from tests.fakes.provider import Reply
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

TOKEN = "fork-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROVIDER_KEY = "sk-fork-key-9f8e7d6c5b4a"
FORKED = "A forked answer."


@pytest.fixture
async def guarded(make_gateway: GatewayFactory) -> Gateway:
    return await make_gateway(admin_token=TOKEN)


async def fork(
    gw: Gateway, trace_id: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    await gw.flush()
    path = f"{gw.url}/api/traces/{trace_id}/fork"
    sent = {**AUTH, **(headers if headers is not None else {"x-api-key": PROVIDER_KEY})}
    async with aiohttp.ClientSession() as s, s.post(path, json=body, headers=sent) as r:
        return r.status, await r.json()


async def trace(gw: Gateway, trace_id: str) -> dict[str, Any]:
    return dict(await gw.get(f"/api/traces/{trace_id}", headers=AUTH))


async def only_trace(gw: Gateway) -> str:
    [trace] = (await gw.get("/api/traces", headers=AUTH))["traces"]
    return str(trace["id"])


def chat_answer() -> Reply:
    return completion(FORKED, use=usage(100, 5))


def responses_answer() -> Reply:
    fake = fake_responses
    body = fake.response([fake.message(FORKED, "msg_f")], response_id="resp_f")
    return fake.reply(body)


def messages_answer() -> Reply:
    fake = fake_anthropic
    return fake.reply(fake.message([fake.text(FORKED)], message_id="msg_f"))


def unstreamed(body: dict[str, Any]) -> dict[str, Any]:
    """The body without what asks for a stream, which a fork turns off."""
    return {k: v for k, v in body.items() if k not in ("stream", "stream_options")}


def chat_same(body: dict[str, Any]) -> dict[str, Any]:
    return as_redaction_sees(unstreamed(body))


def responses_same(body: dict[str, Any]) -> dict[str, Any]:
    return responses_as_redaction_sees(unstreamed(body))


def messages_same(body: dict[str, Any]) -> dict[str, Any]:
    return unstreamed(body)


Loop = Callable[..., Awaitable[None]]
CASES: Any = {
    "chat": (chat_loop, chat_answer, chat_same, ("Authorization", f"Bearer {PROVIDER_KEY}")),
    "responses": (
        responses_loop,
        responses_answer,
        responses_same,
        ("Authorization", f"Bearer {PROVIDER_KEY}"),
    ),
    "messages": (messages_loop, messages_answer, messages_same, ("x-api-key", PROVIDER_KEY)),
}


@pytest.mark.parametrize("protocol", sorted(CASES))
async def test_step_2_is_sent_again_with_another_model_as_a_new_trace(
    guarded: Gateway, protocol: str
) -> None:
    loop, answer, same, auth = CASES[protocol]
    await loop(guarded, stream=True)
    original = await only_trace(guarded)
    step_2 = guarded.provider.received[1].json()
    guarded.provider.queue(answer())
    status, made = await fork(guarded, original, {"at_step": 2, "model": "other-model"})
    assert status == 201, made
    assert (made["fork_of"], made["fork_at"], made["stored"]) == (original, 2, True)
    assert made["trace_id"] != original and made["status"] == 200
    sent = guarded.provider.received[-1]
    body = sent.json()
    assert body["model"] == "other-model" and body["stream"] is False
    assert "stream_options" not in body
    assert same({**body, "model": step_2["model"]}) == same(step_2)
    assert sent.headers[auth[0]] == auth[1]  # the caller's key, as the protocol sends it
    forked = await trace(guarded, made["trace_id"])
    assert (forked["fork_of"], forked["fork_at"], forked["step_count"]) == (original, 2, 1)
    [step] = forked["steps"]
    # The fake provider answers as the model it always names: the step records both.
    assert step["attrs"]["requested_model"] == "other-model"
    assert any(i.get("text") == FORKED for i in step["output_items"])
    again = await trace(guarded, original)
    assert (again["step_count"], again["fork_of"], again["fork_at"]) == (3, None, None)


@pytest.mark.sqlite  # reads the database file
async def test_the_provider_key_is_forwarded_and_never_stored(
    guarded: Gateway, database_url: str
) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    guarded.provider.queue(chat_answer())
    header = {"X-Loopwatch-Provider-Authorization": f"Bearer {PROVIDER_KEY}"}
    status, made = await fork(guarded, original, {"at_step": 3, "model": "gpt-4o-mini"}, header)
    assert status == 201, made
    assert guarded.provider.received[-1].headers["Authorization"] == f"Bearer {PROVIDER_KEY}"
    await guarded.flush()
    assert PROVIDER_KEY.encode() not in database_bytes(database_url)


async def test_params_are_merged_over_the_body_and_null_removes_one(guarded: Gateway) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    guarded.provider.queue(chat_answer())
    params = {"temperature": 0.9, "tools": None, "seed": 7}
    status, made = await fork(guarded, original, {"at_step": 1, "params": params})
    assert status == 201, made
    body = guarded.provider.received[-1].json()
    assert (body["temperature"], body["seed"], body["model"]) == (0.9, 7, "gpt-4o")
    assert "tools" not in body


async def test_unknown_trace_bad_step_and_bad_body_are_clear_json_errors(
    guarded: Gateway,
) -> None:
    status, answer = await fork(guarded, "tr-none", {"at_step": 1})
    assert status == 404 and "tr-none" in answer["error"]["message"]
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    status, answer = await fork(guarded, original, {"at_step": 4})
    assert status == 400 and "1 to 3" in answer["error"]["message"]
    status, answer = await fork(guarded, original, {"at_step": "2"})
    assert status == 400 and answer["error"]["param"] == "at_step"
    status, answer = await fork(guarded, original, {"at_step": 2, "params": [1]})
    assert status == 400 and answer["error"]["param"] == "params"
    assert len(guarded.provider.received) == 3  # none of them reached the provider


async def test_the_fork_api_needs_the_admin_token(guarded: Gateway) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    path = f"{guarded.url}/api/traces/{original}/fork"
    async with aiohttp.ClientSession() as s, s.post(path, json={"at_step": 1}) as r:
        assert r.status == 401
    assert len(guarded.provider.received) == 3


async def test_a_fork_is_held_to_the_gateway_budgets(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(admin_token=TOKEN, max_cost_usd="0.00002")
    gw.provider.queue(completion("hello", model="house-model"))  # unpriced: no cost counted
    hello = {"model": "house-model", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        aiohttp.ClientSession() as s,
        s.post(gw.openai_base + "/chat/completions", json=hello) as r,
    ):
        assert r.status == 200, await r.text()
    original = await only_trace(gw)
    gw.provider.queue(completion("forked", model="gpt-4o"))
    status, made = await fork(gw, original, {"at_step": 1, "model": "gpt-4o"})
    assert status == 201, made
    # $0.00002 buys 2 output tokens of gpt-4o ($10 per million): the limit sent is clamped.
    assert gw.provider.received[-1].json()["max_completion_tokens"] == 2


async def test_a_fork_the_checks_refuse_is_answered_as_the_gateway_refuses(
    guarded: Gateway,
) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    orphan = [{"role": "tool", "tool_call_id": "call_nobody", "content": "x"}]
    status, answer = await fork(guarded, original, {"at_step": 1, "params": {"messages": orphan}})
    assert status == 200, answer  # the fork is made: its request refused before the provider
    assert answer["status"] == 400 and answer["error"]["code"] == "orphan_tool_result"
    assert answer["fork_of"] == original and answer["trace_id"] != original
    assert len(guarded.provider.received) == 3
    await guarded.flush()
    refused = await trace(guarded, answer["trace_id"])
    assert refused["status"] == "refused"
    assert (refused["fork_of"], refused["fork_at"]) == (original, 1)


async def test_a_cost_budget_on_the_fork_call_bounds_the_fork(guarded: Gateway) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    guarded.provider.queue(chat_answer())
    budget = {"x-api-key": PROVIDER_KEY, "X-Loopwatch-Max-Cost-Usd": "0.00002"}
    status, made = await fork(guarded, original, {"at_step": 2, "model": "gpt-4o"}, budget)
    assert status == 201, made
    # $0.00002 buys 2 output tokens of gpt-4o ($10 per million): the limit sent is clamped.
    assert guarded.provider.received[-1].json()["max_completion_tokens"] == 2
    assert "X-Loopwatch-Max-Cost-Usd" not in guarded.provider.received[-1].headers


async def test_a_step_budget_on_the_fork_call_is_the_fork_trace_budget(
    guarded: Gateway,
) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    guarded.provider.queue(chat_answer())
    budget = {"x-api-key": PROVIDER_KEY, "X-Loopwatch-Max-Steps": "4"}
    status, made = await fork(guarded, original, {"at_step": 3}, budget)
    assert status == 201, made
    assert made["status"] == 200
    forked = await trace(guarded, made["trace_id"])
    assert forked["budget"]["max_steps"] == 4
    assert (forked["fork_of"], forked["fork_at"]) == (original, 3)
    assert (await trace(guarded, original))["budget"]["max_steps"] is None


async def thinking_loop(gw: Gateway) -> str:
    """Two Messages steps with extended thinking: a signed thinking block and a tool use,
    then the request answering it, which must carry the block back."""
    fake = fake_anthropic
    first = [fake.thinking("Paris first."), fake.tool_use("toolu_1", "get_weather", {})]
    gw.provider.queue(
        fake.reply(fake.message(first, message_id="msg_1")),
        fake.reply(fake.message([fake.text("Sunny.")], message_id="msg_2")),
    )
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    headers = {"x-api-key": "sk-ant-t", "anthropic-version": "2023-06-01"}
    async with aiohttp.ClientSession() as s:
        async with s.post(gw.url + "/v1/messages", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            answer = await r.json()
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
        body["messages"] += [
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [result]},
        ]
        async with s.post(gw.url + "/v1/messages", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
    return await only_trace(gw)


async def test_reasoning_the_provider_needs_back_and_not_kept_is_a_409(guarded: Gateway) -> None:
    original = await thinking_loop(guarded)
    status, answer = await fork(guarded, original, {"at_step": 2, "model": "claude-opus-4-1"})
    assert status == 409, answer
    message = answer["error"]["message"]
    assert "step 2" in message and "thinking" in message and "not kept" in message
    assert len(guarded.provider.received) == 2
    # Turning thinking off, the history's thinking is left out and the fork goes.
    guarded.provider.queue(messages_answer())
    params = {"thinking": None}
    status, made = await fork(guarded, original, {"at_step": 2, "params": params})
    assert status == 201, made
    sent = guarded.provider.received[-1].json()
    assert "thinking" not in sent
    lists = [m["content"] for m in sent["messages"] if isinstance(m["content"], list)]
    blocks = [block["type"] for content in lists for block in content]
    assert "thinking" not in blocks and "tool_use" in blocks and "tool_result" in blocks
    assert json.dumps(sent).count("Paris first.") == 0


async def page(gw: Gateway, path: str) -> str:
    await gw.flush()
    headers = {**AUTH, "Accept": "text/html"}
    async with aiohttp.ClientSession() as s, s.get(gw.url + path, headers=headers) as r:
        assert r.status == 200, path
        return await r.text()


async def test_the_fork_page_shows_the_original_step_beside_the_fork(guarded: Gateway) -> None:
    await chat_loop(guarded, stream=False)
    original = await only_trace(guarded)
    assert "Fork step 2" in await page(guarded, f"/traces/{original}")  # every step offers it
    guarded.provider.queue(completion(FORKED, use=usage(100, 5), model="<b>odd</b>"))
    status, made = await fork(guarded, original, {"at_step": 2, "model": "<b>odd</b>"})
    assert status == 201, made
    html = await page(guarded, made["url"])
    assert "Fork of" in html and f"step 2 of {original}" in html
    compare = html[html.index('class="fork-compare"') :]
    compare = compare[: compare.index("</section>")]
    # The original step's tool call and its arguments, the fork's text, both stop reasons.
    assert "get_weather" in compare and "Rome" in compare and FORKED in compare
    assert "tool_calls" in compare and "completed" in compare
    assert "Original" in compare and "Fork" in compare and "gpt-4o" in compare
    assert "<b>odd</b>" not in html and "&lt;b&gt;odd&lt;/b&gt;" in compare  # escaped
    # The original lists its fork: in the read API and on its page, linked.
    [listed] = (await trace(guarded, original))["forks"]
    assert (listed["id"], listed["fork_at"]) == (made["trace_id"], 2)
    assert listed["models"] == ["<b>odd</b>"]  # the model the fork asked
    original_page = await page(guarded, f"/traces/{original}")
    assert f'href="/traces/{made["trace_id"]}" class="fork-run"' in original_page
    assert "step 2 with" in original_page and "&lt;b&gt;odd&lt;/b&gt;" in original_page
    assert "<b>odd</b>" not in original_page


async def test_encrypted_responses_reasoning_not_kept_is_a_409(guarded: Gateway) -> None:
    fake = fake_responses
    first = [
        fake.reasoning(["Weather first."], encrypted="gAAAAopaque-payload"),
        fake.function_call("call_1", "get_weather", {"city": "Paris"}),
    ]
    guarded.provider.queue(
        fake.reply(fake.response(first, response_id="resp_1")),
        fake.reply(fake.response([fake.message("Sunny.", "msg_2")], response_id="resp_2")),
    )
    body: dict[str, Any] = {
        "model": "gpt-5",
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "medium"},
        "input": [{"role": "user", "content": "Weather in Paris?"}],
    }
    headers = {"Authorization": "Bearer sk-t"}
    async with aiohttp.ClientSession() as s:
        async with s.post(guarded.openai_base + "/responses", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            answer = await r.json()
        result = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
        body["input"] += [*answer["output"], result]
        async with s.post(guarded.openai_base + "/responses", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
    original = await only_trace(guarded)
    status, answer = await fork(guarded, original, {"at_step": 2, "model": "gpt-5-mini"})
    assert status == 409, answer
    assert "step 2" in answer["error"]["message"] and "encrypted" in answer["error"]["message"]
    guarded.provider.queue(responses_answer())
    status, made = await fork(guarded, original, {"at_step": 2, "params": {"reasoning": None}})
    assert status == 201, made
    sent = guarded.provider.received[-1].json()
    assert "reasoning" not in sent
    assert [i.get("type") for i in sent["input"] if i.get("type") == "reasoning"] == []
    assert "gAAAAopaque-payload" not in json.dumps(sent)


async def test_a_client_cannot_name_its_trace_a_fork(guarded: Gateway) -> None:
    guarded.provider.queue(completion("hello"))
    hello = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    forged = {"X-Loopwatch-Fork": "tr-someone 1 00000000000000000000000000000000"}
    async with (
        aiohttp.ClientSession() as s,
        s.post(guarded.openai_base + "/chat/completions", json=hello, headers=forged) as r,
    ):
        assert r.status == 200, await r.text()
        trace_id = r.headers["X-Loopwatch-Trace-Id"]
    made = await trace(guarded, trace_id)
    assert (made["fork_of"], made["fork_at"]) == (None, None)
    assert "fork_of" not in made["steps"][0]["attrs"]
