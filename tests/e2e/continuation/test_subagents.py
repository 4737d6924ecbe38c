"""Agents that spawn agents, through a real gateway with the official SDKs: a run started by
another run's tool call is a trace of its own linked to its parent (by header, or by its task
text), listed under its root, with tree totals, tree budgets and its own outcome.

The parent's sub-agent tool is shaped as Claude Code's `Agent` tool input (`description`,
`prompt`, `subagent_type`: the Claude Agent SDK's `AgentInput` in sdk-tools.d.ts), in an
Anthropic `tool_use` block as the Messages API documents it; an OpenAI Agents SDK agent-as-tool
call carries `{"input": ...}` in a Chat Completions `tool_calls` entry.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from tests import harness
from tests.fakes import chat
from tests.fakes.anthropic import message, reply, text, tool_use
from tests.fakes.provider import Received, Reply
from tests.harness import Gateway

provider = harness.provider
make_gateway, gateway = harness.make_gateway, harness.gateway

KEY = "sk-ant-api03-subagents-Qm4TnV0pLw9Zx81"
PROMPT = "Find why tests/test_parser.py::test_quotes fails and report the offending line."
OTHER_PROMPT = "List every caller of parse_header() under src/ and say which pass bytes."
AGENT_TOOL: dict[str, Any] = {
    "name": "Agent",
    "description": "Launch a new agent to handle a task on its own.",
    "input_schema": {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "prompt": {"type": "string"},
            "subagent_type": {"type": "string"},
        },
        "required": ["description", "prompt"],
    },
}
REMINDER = "<system-reminder>As you answer, use the tools available.</system-reminder>"


def sdk(gw: Gateway, key: str = KEY, **headers: str) -> anthropic.AsyncAnthropic:
    return gw.closing(
        anthropic.AsyncAnthropic(
            base_url=gw.url, api_key=key, max_retries=0, default_headers=headers
        )
    )


def agent_call(call_id: str, prompt: str = PROMPT) -> dict[str, Any]:
    arguments = {"description": "Find the bug", "prompt": prompt, "subagent_type": "general"}
    return tool_use(call_id, "Agent", arguments)


def child_turn(prompt: str) -> list[dict[str, Any]]:
    """A sub-agent's first user turn as Claude Code sends it: a reminder, then its task."""
    return [{"type": "text", "text": REMINDER}, {"type": "text", "text": prompt}]


async def ask(
    client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], **headers: str
) -> tuple[Any, str]:
    """A request; its answer and the trace it was placed in."""
    raw = await client.messages.with_raw_response.create(
        model="claude-sonnet-4-6",
        max_tokens=200,
        messages=messages,  # type: ignore[arg-type]
        tools=[AGENT_TOOL],  # type: ignore[list-item]
        extra_headers=headers or None,
    )
    return await raw.parse(), raw.headers["x-loopwatch-trace-id"]


def by_task(received: Received) -> Reply:
    """The fake model: a sub-agent answers its task, the parent ends after the results."""
    body = received.json()
    first = json.dumps(body["messages"][0])
    answer = "done"
    if PROMPT in first:
        answer = "the bug is on line 12"
    elif OTHER_PROMPT in first:
        answer = "three callers"
    return reply(message([text(answer)], message_id=f"msg_{len(answer)}_{id(received)}"))


def as_assistant(answer: Any) -> dict[str, Any]:
    blocks = [block.model_dump(exclude_none=True) for block in answer.content]
    return {"role": "assistant", "content": blocks}


def result(call_id: str, value: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": value}


async def launch(
    gw: Gateway, client: anthropic.AsyncAnthropic, *calls: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """A parent run whose answer launches sub-agents: its history so far and its trace."""
    gw.provider.queue(reply(message(list(calls), message_id="msg_parent_launch")))
    opening = [{"role": "user", "content": "Fix the failing parser test."}]
    answer, trace_id = await ask(client, opening)
    return [*opening, as_assistant(answer)], trace_id


async def metric(gw: Gateway, via: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(gw.url + "/metrics") as r:
        body = await r.text()
    line = f'loopwatch_subagent_runs_total{{via="{via}"}} '
    return float(next(x for x in body.splitlines() if x.startswith(line)).split()[-1])


async def test_a_header_links_a_run_to_its_parent_and_call(gateway: Gateway) -> None:
    client = sdk(gateway)
    _, parent = await launch(gateway, client, agent_call("toolu_01A"))
    gateway.provider.queue(reply(message([text("a child's answer")], message_id="msg_child")))
    headers = {"X-Loopwatch-Parent-Trace-Id": parent, "X-Loopwatch-Parent-Call-Id": "toolu_01A"}
    _, child = await ask(client, [{"role": "user", "content": "hello"}], **headers)
    assert child != parent
    detail = await gateway.trace(child)
    assert detail["parent"] == {"id": parent, "call_id": "toolu_01A"}
    assert (detail["root_trace_id"], detail["depth"]) == (parent, 1)
    above = await gateway.trace(parent)
    assert above["parent"] is None and (above["root_trace_id"], above["depth"]) == (parent, 0)
    assert [(c["id"], c["call_id"], c["steps"]) for c in above["children"]] == [
        (child, "toolu_01A", 1)
    ]
    assert await metric(gateway, "header") == 1


async def test_the_task_text_links_a_sub_agent_to_the_one_call_that_holds_it(
    gateway: Gateway,
) -> None:
    client = sdk(gateway)
    history, parent = await launch(gateway, client, agent_call("toolu_01B"))
    gateway.provider.responder = by_task
    answer, child = await ask(client, [{"role": "user", "content": child_turn(PROMPT)}])
    # The parent goes on with the sub-agent's answer as the call's result: its own trace.
    back = {"role": "user", "content": [result("toolu_01B", answer.content[0].text)]}
    _, again = await ask(client, [*history, back])
    assert again == parent and child != parent
    detail = await gateway.trace(child)
    assert detail["parent"] == {"id": parent, "call_id": "toolu_01B"}
    assert detail["depth"] == 1
    assert [c["id"] for c in (await gateway.trace(parent))["children"]] == [child]
    assert await metric(gateway, "content") == 1


async def test_another_clients_run_with_the_same_task_is_not_its_sub_agent(
    gateway: Gateway,
) -> None:
    _, parent = await launch(gateway, sdk(gateway), agent_call("toolu_01C"))
    gateway.provider.responder = by_task
    other = sdk(gateway, key="sk-ant-api03-someone-else-entirely-0000")
    _, run = await ask(other, [{"role": "user", "content": child_turn(PROMPT)}])
    detail = await gateway.trace(run)
    assert detail["parent"] is None and detail["root_trace_id"] == run
    assert (await gateway.trace(parent))["children"] == []


async def test_a_background_sub_agent_racing_its_parents_next_request_is_linked(
    gateway: Gateway,
) -> None:
    """Launched in the background, the call is answered at once ("agent launched") and the
    sub-agent's first request goes with the parent's next one, before anything is stored."""
    client = sdk(gateway)
    history, parent = await launch(gateway, client, agent_call("toolu_01D"))
    gateway.provider.responder = by_task
    launched = {"role": "user", "content": [result("toolu_01D", "Agent launched.")]}
    (_, again), (_, child) = await asyncio.gather(
        ask(client, [*history, launched]),
        ask(client, [{"role": "user", "content": child_turn(PROMPT)}]),
    )
    assert again == parent and child != parent
    assert (await gateway.trace(child))["parent"] == {"id": parent, "call_id": "toolu_01D"}


async def test_two_sub_agents_at_once_are_each_linked_to_their_own_call(
    gateway: Gateway,
) -> None:
    client = sdk(gateway)
    calls = (agent_call("toolu_01E"), agent_call("toolu_01F", OTHER_PROMPT))
    _, parent = await launch(gateway, client, *calls)
    gateway.provider.responder = by_task
    (_, first), (_, second) = await asyncio.gather(
        ask(client, [{"role": "user", "content": child_turn(PROMPT)}]),
        ask(client, [{"role": "user", "content": child_turn(OTHER_PROMPT)}]),
    )
    assert (await gateway.trace(first))["parent"] == {"id": parent, "call_id": "toolu_01E"}
    assert (await gateway.trace(second))["parent"] == {"id": parent, "call_id": "toolu_01F"}
    children = (await gateway.trace(parent))["children"]
    assert sorted(c["call_id"] for c in children) == ["toolu_01E", "toolu_01F"]


async def test_two_recent_calls_with_the_same_task_link_nothing(gateway: Gateway) -> None:
    client = sdk(gateway)
    _, one = await launch(gateway, client, agent_call("toolu_01G"))
    _, two = await launch(gateway, client, agent_call("toolu_01H"))
    gateway.provider.responder = by_task
    _, run = await ask(client, [{"role": "user", "content": child_turn(PROMPT)}])
    assert run not in (one, two)
    detail = await gateway.trace(run)
    assert detail["parent"] is None and detail["depth"] == 0
    assert await metric(gateway, "content") == 0


async def test_the_list_holds_roots_with_their_tree_totals(gateway: Gateway) -> None:
    client = sdk(gateway)
    history, parent = await launch(gateway, client, agent_call("toolu_01I"))
    gateway.provider.responder = by_task
    answer, child = await ask(client, [{"role": "user", "content": child_turn(PROMPT)}])
    back = {"role": "user", "content": [result("toolu_01I", answer.content[0].text)]}
    await ask(client, [*history, back])
    roots = await gateway.traces()
    assert [t["id"] for t in roots] == [parent]
    every = await gateway.traces(include_children="true")
    assert sorted(t["id"] for t in every) == sorted([parent, child])
    tree = roots[0]["tree"]
    runs = [await gateway.trace(parent), await gateway.trace(child)]
    assert tree["traces"] == 2
    assert tree["steps"] == sum(r["step_count"] for r in runs) == 3
    assert tree["input_tokens"] == sum(r["usage"]["prompt_tokens"] for r in runs)
    assert tree["output_tokens"] == sum(r["usage"]["completion_tokens"] for r in runs)
    costs = [r["cost_usd"] for r in runs]
    assert tree["cost"] == pytest.approx(sum(costs))
    assert runs[0]["tree"] == tree and runs[1]["tree"] == tree
    assert tree["duration"] >= max(r["duration_ms"] for r in runs)


async def test_a_sub_agents_failure_leaves_its_parent_as_it_was(gateway: Gateway) -> None:
    client = sdk(gateway)
    history, parent = await launch(gateway, client, agent_call("toolu_01J"))
    failing = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    gateway.provider.queue(reply(failing, status=400))
    with pytest.raises(anthropic.BadRequestError) as raised:
        await ask(client, [{"role": "user", "content": child_turn(PROMPT)}])
    child = raised.value.response.headers["x-loopwatch-trace-id"]
    back = {"role": "user", "content": [result("toolu_01J", "the agent failed")]}
    gateway.provider.queue(reply(message([text("I could not find it.")], message_id="msg_end")))
    await ask(client, [*history, back])
    assert (await gateway.trace(child))["status"] == "failed"
    above = await gateway.trace(parent)
    assert above["status"] == "completed"
    assert above["children"][0]["status"] == "failed"


async def test_a_tree_budget_refuses_the_descendant_that_exceeds_it(
    gateway: Gateway,
) -> None:
    """Three steps for the whole tree, set on the root: the root's two and its sub-agent's
    first spend them, the sub-agent's next is refused as the root's would be."""
    client = sdk(gateway)
    budget = {"X-Loopwatch-Max-Steps": "3"}
    gateway.provider.queue(reply(message([agent_call("toolu_01K")], message_id="msg_l1")))
    opening = [{"role": "user", "content": "Fix the failing parser test."}]
    answer, parent = await ask(client, opening, **budget)
    gateway.provider.responder = by_task
    launched = {"role": "user", "content": [result("toolu_01K", "Agent launched.")]}
    await ask(client, [*opening, as_assistant(answer), launched], **budget)
    first = [{"role": "user", "content": child_turn(PROMPT)}]
    answer, child = await ask(client, first)
    more = [*first, as_assistant(answer), {"role": "user", "content": "And the fix?"}]
    with pytest.raises(anthropic.RateLimitError) as raised:
        await ask(client, more)
    error = raised.value.body["error"]  # type: ignore[index]
    assert error["message"].startswith("step_budget_exceeded: ")
    assert "3 of 3 steps" in error["message"]
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert raised.value.response.headers["x-loopwatch-trace-id"] == child
    detail = await gateway.trace(child)
    assert detail["parent"]["id"] == parent and detail["step_count"] == 1
    assert [v["kind"] for v in detail["violations"]] == ["step_budget_exceeded"]


async def test_configured_tree_budgets_cover_an_agents_sdk_agent_as_tool(
    make_gateway: Any,
) -> None:
    """`tree_budgets = true`: the configured run budget holds the whole tree. The parent's
    agent-as-tool call carries `{"input": ...}`; the tool agent's first user turn is it."""
    gw: Gateway = await make_gateway(max_steps=2, tree_budgets=True)
    openai_sdk = gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-proj-tree"))
    call = chat.call("call_tool_agent", "researcher", {"input": PROMPT})
    gw.provider.queue(chat.completion(tool_calls=[call]), chat.completion("found it"))
    await openai_sdk.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Research the parser bug."}]
    )
    await openai_sdk.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": PROMPT}]
    )
    more = [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": "found it"},
        {"role": "user", "content": "And the fix?"},
    ]
    with pytest.raises(openai.RateLimitError) as raised:
        await openai_sdk.chat.completions.create(model="gpt-4o", messages=more)  # type: ignore[arg-type]
    assert raised.value.body["code"] == "step_budget_exceeded"  # type: ignore[index]
    assert len(gw.provider.received) == 2


async def test_a_tree_budget_holds_exactly_under_concurrent_sub_agents(gateway: Gateway) -> None:
    """Five steps for the tree: the root takes one, its two sub-agents race for the rest
    with eight requests at once; exactly four reach the provider."""
    gateway.provider.responder = lambda _: chat.completion("ok")
    root = {"X-Loopwatch-Trace-Id": "tree-root", "X-Loopwatch-Max-Steps": "5"}
    assert await _chat(gateway, root) == 200

    def child(name: str) -> dict[str, str]:
        return {"X-Loopwatch-Trace-Id": name, "X-Loopwatch-Parent-Trace-Id": "tree-root"}

    racing = [_chat(gateway, child(f"tree-child-{i % 2}")) for i in range(8)]
    statuses = await asyncio.gather(*racing)
    assert sorted(statuses) == [200] * 4 + [429] * 4
    assert len(gateway.provider.received) == 5
    tree = (await gateway.trace("tree-root"))["tree"]
    assert (tree["traces"], tree["steps"]) == (3, 5)


async def _chat(gw: Gateway, headers: dict[str, str]) -> int:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            gw.openai_base + "/chat/completions",
            json=body,
            headers={"Authorization": "Bearer sk-proj-tree", **headers},
        ) as r,
    ):
        await r.read()
        return r.status
