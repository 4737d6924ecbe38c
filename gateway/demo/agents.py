"""The sample agent loops the demo runs through the gateway, each showing one feature.

They send no trace header: automatic threading puts each run in one trace by itself.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from gateway.demo import client
from gateway.demo.loop import SYSTEM, ChatAgent, Gateway, RunSummary, chat_loop, run_tool


async def clean_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("clean run, parallel tool calls")
    agent = ChatAgent(
        gw,
        summary,
        "Compare the weather in Lisbon and Oslo this weekend: where should I go hiking?",
        ["get_weather", "find_trails"],
        "gpt-4o-mini",
    )
    for number in range(6):
        reply = await agent.step(stream=number % 2 == 1)  # mixed, as real loops often are
        if reply.status != 200:
            summary.outcome = f"HTTP {reply.status}"
            return summary
        agent.accept(reply)
        if not reply.tool_calls():
            break
    summary.outcome = "completed"
    return summary


async def pairing_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("pairing violation, refused")
    agent = ChatAgent(
        gw,
        summary,
        "Find a seafood dinner for two in Porto on Friday and check my calendar.",
        ["find_restaurants", "check_calendar"],
        "gpt-4o-mini",
    )
    first = await agent.step(stream=True)
    # The deliberate bug: the second parallel call's result is lost before the next request.
    agent.accept(first, skip=1)
    refused = await agent.step(stream=False)
    summary.log.append(f"gateway refused the request: {refused.status} {refused.error}")
    summary.outcome = f"refused with {refused.status}"
    if refused.status == 400:
        del agent.messages[2:]
        agent.accept(first)  # the fixed agent answers every call and goes on
        final = await agent.step(stream=False)
        fixed = "completed" if final.stop == "stop" else f"HTTP {final.status}"
        summary.outcome = f"{refused.status} refused; fixed, {fixed}"
    return summary


async def budget_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("step budget of 3, exceeded")
    agent = ChatAgent(
        gw,
        summary,
        "Survey the literature on agent loop budgets; keep going until done.",
        ["search_papers"],
        "gpt-4o-mini",
    )
    budget = {"X-Loopwatch-Max-Steps": "3"}
    for _ in range(10):  # the agent itself would never stop: the budget does
        reply = await agent.step(stream=False, headers=budget)
        if reply.status != 200:
            summary.log.append(f"gateway stopped the loop: {reply.status} {reply.error}")
            summary.outcome = f"stopped with {reply.status}"
            return summary
        agent.accept(reply)
    summary.outcome = "never stopped"
    return summary


async def interrupted_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("interrupted stream, retried")
    agent = ChatAgent(
        gw,
        summary,
        "Summarize the open incident for the on-call handover.",
        ["list_incidents", "get_incident"],
        "gpt-4o-mini",
    )
    retried = False
    for _ in range(6):
        reply = await agent.step(stream=True)
        if reply.interrupted and not retried:
            summary.log.append("the stream broke mid tool-call arguments; retrying the step")
            retried = True
            continue
        if reply.status != 200 or reply.interrupted:
            summary.outcome = "gave up"
            return summary
        agent.accept(reply)
        if not reply.tool_calls():
            break
    summary.outcome = "completed after a retry" if retried else "completed"
    return summary


async def reasoning_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("DeepSeek-style reasoning stream")
    agent = ChatAgent(
        gw, summary, "Is 97 prime? Think it through (prime check).", [], "deepseek-reasoner"
    )
    reply = await agent.step(stream=True)
    summary.outcome = "completed" if reply.stop == "stop" else str(reply.stop)
    return summary


async def anthropic_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("Anthropic Messages, thinking + tools")
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Do I need an umbrella in Zürich this afternoon?"}
    ]
    tools = [
        {"name": name, "description": f"Demo tool {name}.", "input_schema": {"type": "object"}}
        for name in ("get_weather", "get_hourly_forecast")
    ]
    for number in range(6):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 2048,
            "system": SYSTEM,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": tools,
            "messages": history,
            "stream": number % 2 == 0,
        }
        reply = await client.messages(gw.http, gw.base, body, {})
        summary.trace_id = summary.trace_id or reply.trace_id
        if reply.status != 200:
            summary.outcome = f"HTTP {reply.status}"
            return summary
        summary.steps += 1
        # Thinking blocks go back with their signatures, as the API requires with tools.
        history.append(reply.message)
        calls = reply.tool_calls()
        if not calls:
            break
        history.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": run_tool(name, args)}
                    for call_id, name, args in calls
                ],
            }
        )
    summary.outcome = "completed" if reply.stop == "end_turn" else str(reply.stop)
    return summary


async def looping_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("looping agent, same call 4 times")
    agent = ChatAgent(
        gw,
        summary,
        "Wait for the checkout deploy to finish, then tell me how it went.",
        ["get_deploy_status"],
        "gpt-4.1-mini",
    )
    await chat_loop(agent, summary, 8)
    calls = [m for m in agent.messages if m["role"] == "tool"]
    summary.log.append(f"get_deploy_status called {len(calls)} times with the same arguments")
    return summary


async def undeclared_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("model calls an undeclared tool")
    agent = ChatAgent(
        gw, summary, "Convert 250 EUR to Japanese yen.", ["get_exchange_rate"], "gpt-4o-mini"
    )
    await chat_loop(agent, summary, 6)
    declared = {spec["function"]["name"] for spec in agent.tools}
    for message in agent.messages:
        for call in message.get("tool_calls") or []:
            if call["function"]["name"] not in declared:
                name = call["function"]["name"]
                summary.log.append(f"the model called `{name}`, never declared; got an error")
    return summary


async def abandoned_run(gw: Gateway) -> RunSummary:
    summary = RunSummary("agent dies mid-loop, abandoned")
    agent = ChatAgent(
        gw,
        summary,
        "Refund order A-8812: it arrived damaged.",
        ["lookup_order", "issue_refund"],
        "gpt-4o-mini",
    )
    first = await agent.step(stream=False)
    agent.accept(first)
    second = await agent.step(stream=True)
    # The deliberate crash: the agent never runs the call it was asked for, nor says so.
    names = ", ".join(name for _, name, _ in second.tool_calls())
    summary.log.append(f"the agent died before running {names}; no result was ever sent")
    summary.outcome = "abandoned mid-loop" if second.stop == "tool_calls" else str(second.stop)
    return summary


async def mcp_run(gw: Gateway) -> RunSummary:
    """The tool runs on an MCP server through the gateway: the execution joins the call."""
    summary = RunSummary("tool executed over MCP, joined")
    agent = ChatAgent(
        gw,
        summary,
        "Summarize the release notes of this week's release.",
        ["docs__read_text_file"],
        "gpt-4o-mini",
    )
    first = await agent.step(stream=False)
    agent.messages.append({k: v for k, v in first.message.items() if v is not None})
    mcp = f"{gw.base}/mcp/docs"
    session = await client.mcp_session(gw.http, mcp)
    for call_id, name, args in first.tool_calls():
        tool = name.removeprefix("docs__")
        text = await client.mcp_call(gw.http, mcp, session, tool, args)
        agent.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        summary.log.append(f"`{tool}` ran on the MCP server `docs` through /mcp/docs")
    return await chat_loop(agent, summary, 2)


async def subagent_run(gw: Gateway) -> RunSummary:
    """An orchestrator hands research to a sub-agent through a tool: the sub-agent's loop is
    a run of its own, which the gateway links to that call by its task text alone."""
    summary = RunSummary("sub-agent, a tree of two runs")
    agent = ChatAgent(
        gw,
        summary,
        "Plan a weekend walk on Madeira; let a research sub-agent look into it.",
        ["research_agent"],
        "gpt-4o-mini",
    )
    first = await agent.step(stream=False)
    if first.status != 200:
        summary.outcome = f"HTTP {first.status}"
        return summary
    agent.messages.append({k: v for k, v in first.message.items() if v is not None})
    for call_id, _, args in first.tool_calls():
        report = await _research(gw, summary, str(args.get("task", "")))
        agent.messages.append({"role": "tool", "tool_call_id": call_id, "content": report})
    return await chat_loop(agent, summary, 2)


async def _research(gw: Gateway, parent: RunSummary, task: str) -> str:
    """The sub-agent: its own loop, started with the task as its user turn; its report."""
    summary = RunSummary("research sub-agent")
    agent = ChatAgent(gw, summary, task, ["get_weather", "find_trails"], "gpt-4o-mini")
    await chat_loop(agent, summary, 4)
    parent.log.append(
        f"a sub-agent did the research in its own run ({summary.steps} steps, trace "
        f"{summary.trace_id}), shown under the call that started it"
    )
    return str(agent.messages[-1].get("content") or "")


RUNS = (
    clean_run,
    pairing_run,
    budget_run,
    interrupted_run,
    anthropic_run,
    reasoning_run,
    looping_run,
    undeclared_run,
    abandoned_run,
    mcp_run,
    subagent_run,
)


async def run_all(base: str) -> list[RunSummary]:
    """Each run in turn, so the trace list reads in the order they are described."""
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        gw = Gateway(http, base)
        return [await run(gw) for run in RUNS]
