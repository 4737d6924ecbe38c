"""Anthropic loops with tools the provider runs (web search, code execution, the MCP connector)
through a real gateway and the official SDK: one trace per run, every block recorded in its
place, the provider's calls typed and answered, no false violation; streamed and not."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests import harness
from tests.fakes.anthropic import (
    called_by,
    code_execution_result,
    mcp_tool_result,
    mcp_tool_use,
    message,
    reply,
    server_tool_use,
    streamed,
    text,
    tool_use,
    web_search_result,
)
from tests.fakes.provider import Reply
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

MODEL = "claude-sonnet-4-6"
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
QUESTION = {"role": "user", "content": "What did the ESA announce this week?"}


def answer(body: dict[str, Any], stream: bool) -> Reply:
    return streamed(body) if stream else reply(body)


def sdk(gw: Gateway) -> anthropic.AsyncAnthropic:
    return gw.closing(
        anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-test", max_retries=0)
    )


async def ask(
    client: anthropic.AsyncAnthropic, stream: bool, messages: list[Any], **params: Any
) -> list[dict[str, Any]]:
    """The assistant content as an SDK agent appends it to its history."""
    beta = "betas" in params
    api: Any = client.beta.messages if beta else client.messages
    if stream:
        async with api.stream(model=MODEL, max_tokens=512, messages=messages, **params) as events:
            final = await events.get_final_message()
    else:
        final = await api.create(model=MODEL, max_tokens=512, messages=messages, **params)
    return [block.model_dump(mode="json", exclude_none=True) for block in final.content]


def kinds(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(i["kind"], i["attrs"].get("executed_by")) for i in items]


async def only_trace(gw: Gateway) -> dict[str, Any]:
    traces = await gw.traces()
    assert len(traces) == 1, [t["id"] for t in traces]
    return await gw.trace(traces[0]["id"])


SEARCH_ANSWER = [
    server_tool_use("srvtoolu_01WYG3ziw53XMcoyKL4XcZmE", "web_search", {"query": "ESA news"}),
    web_search_result(
        "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        ("ESA launches probe", "https://www.esa.int/probe"),
        ("Budget approved", "https://www.esa.int/budget"),
    ),
    text("This week the ESA "),
    {
        "type": "text",
        "text": "launched a probe.",
        "citations": [
            {
                "type": "web_search_result_location",
                "url": "https://www.esa.int/probe",
                "title": "ESA launches probe",
                "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
                "cited_text": "The probe launched on Tuesday.",
            }
        ],
    },
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_web_search_loop_is_one_trace_with_the_search_typed(
    gateway: Gateway, stream: bool
) -> None:
    gateway.provider.queue(answer(message(SEARCH_ANSWER), stream))
    gateway.provider.queue(answer(message([text("Yes, on Tuesday.")]), stream))
    client = sdk(gateway)
    history: list[Any] = [QUESTION]
    content = await ask(client, stream, history, tools=[WEB_SEARCH])
    history += [{"role": "assistant", "content": content}, {"role": "user", "content": "When?"}]
    await ask(client, stream, history, tools=[WEB_SEARCH])

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    assert kinds(first["output_items"]) == [
        ("tool_call", "provider"),
        ("tool_result", "provider"),
        ("assistant_text", None),
    ]
    call, result, said = first["output_items"]
    assert (call["call_id"], call["tool_name"]) == (
        "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        "web_search",
    )
    assert call["attrs"]["tool_type"] == "web_search"
    assert call["arguments"] == '{"query":"ESA news"}'
    assert result["call_id"] == call["call_id"] and result["is_error"] is False
    assert result["text"] == (
        "ESA launches probe https://www.esa.int/probe\nBudget approved https://www.esa.int/budget"
    )
    assert said["text"] == "This week the ESA launched a probe."
    # The echo continued the trace: only the new user turn is new in the second step.
    assert [(i["kind"], i["text"]) for i in second["input_items"]] == [("user", "When?")]
    assert trace["violations"] == []
    assert trace["status"] == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_mcp_connector_loop_is_one_trace(gateway: Gateway, stream: bool) -> None:
    call_id = "mcptoolu_014Q35RayjACSWkSj4X2yov1"
    body = message(
        [
            text("Let me check the tickets."),
            mcp_tool_use(call_id, "list_tickets", "tracker", {"state": "open"}),
            mcp_tool_result(call_id, "3 open tickets"),
            text("There are 3 open tickets."),
        ]
    )
    gateway.provider.queue(answer(body, stream))
    gateway.provider.queue(answer(message([text("#12 is oldest.")]), stream))
    client = sdk(gateway)
    servers = [
        {
            "type": "url",
            "url": "https://mcp.example.com/sse",
            "name": "tracker",
            "authorization_token": "mcp-secret-Qw8823",
        }
    ]
    params: dict[str, Any] = {"mcp_servers": servers, "betas": ["mcp-client-2025-04-04"]}
    history: list[Any] = [{"role": "user", "content": "How many open tickets?"}]
    content = await ask(client, stream, history, **params)
    history += [{"role": "assistant", "content": content}, {"role": "user", "content": "Oldest?"}]
    await ask(client, stream, history, **params)

    trace = await only_trace(gateway)
    first = trace["steps"][0]
    assert kinds(first["output_items"]) == [
        ("assistant_text", None),
        ("tool_call", "provider"),
        ("tool_result", "provider"),
        ("assistant_text", None),
    ]
    call, result = first["output_items"][1:3]
    assert (call["tool_name"], call["attrs"]["tool_type"], call["attrs"]["server"]) == (
        "list_tickets",
        "mcp",
        "tracker",
    )
    assert (result["call_id"], result["text"]) == (call_id, "3 open tickets")
    assert trace["violations"] == [] and trace["status"] == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_paused_search_turn_sent_back_continues_its_trace(
    gateway: Gateway, stream: bool
) -> None:
    # The server-tool loop hit its limit (`pause_turn`): the client sends the turn back as it
    # is, and the provider goes on from there.
    paused = SEARCH_ANSWER[:2]
    gateway.provider.queue(answer(message(paused, stop_reason="pause_turn"), stream))
    gateway.provider.queue(answer(message([text("The ESA launched a probe.")]), stream))
    client = sdk(gateway)
    history: list[Any] = [QUESTION]
    content = await ask(client, stream, history, tools=[WEB_SEARCH])
    history.append({"role": "assistant", "content": content})
    await ask(client, stream, history, tools=[WEB_SEARCH])

    trace = await only_trace(gateway)
    assert [s["stop_reason"] for s in trace["steps"]] == ["paused", "completed"]
    assert trace["steps"][1]["input_items"] == []
    assert trace["violations"] == [] and trace["status"] == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_programmatic_tool_calls_name_their_caller_and_pair(
    gateway: Gateway, stream: bool
) -> None:
    # Code the provider runs calls a client tool; the client answers it, the code then ends.
    server_id, client_id = "srvtoolu_01A2B3C4D5E6F7G8H9J0K1L2", "toolu_01PQ7mWnXy6AaVbT3c2dE4fG"
    tools: list[Any] = [
        {"type": "code_execution_20250825", "name": "code_execution"},
        {
            "name": "get_expenses",
            "input_schema": {"type": "object", "properties": {"team": {"type": "string"}}},
            "allowed_callers": ["code_execution_20250825"],
        },
    ]
    code = "print(sum(get_expenses(team='ml')))"
    first_answer = [
        text("I will total them in code."),
        server_tool_use(server_id, "code_execution", {"code": code}),
        called_by(tool_use(client_id, "get_expenses", {"team": "ml"}), server_id),
    ]
    gateway.provider.queue(answer(message(first_answer, stop_reason="tool_use"), stream))
    gateway.provider.queue(
        answer(message([code_execution_result(server_id, "1234\n"), text("$1234.")]), stream)
    )
    client = sdk(gateway)
    history: list[Any] = [{"role": "user", "content": "Total ML expenses?"}]
    content = await ask(client, stream, history, tools=tools)
    history += [
        {"role": "assistant", "content": content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": client_id, "content": "[1000, 234]"}
            ],
        },
    ]
    await ask(client, stream, history, tools=tools)

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    assert kinds(first["output_items"]) == [
        ("assistant_text", None),
        ("tool_call", "provider"),
        ("tool_call", None),
    ]
    assert first["output_items"][2]["attrs"]["caller"] == server_id
    assert [(i["kind"], i["call_id"]) for i in second["input_items"]] == [
        ("tool_result", client_id)
    ]
    ran = second["output_items"][0]
    assert (ran["kind"], ran["call_id"], ran["text"]) == ("tool_result", server_id, "1234\n")
    assert ran["attrs"]["return_code"] == 0
    assert trace["violations"] == [] and trace["status"] == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_block_of_an_unknown_type_is_recorded_and_matched_when_echoed(
    gateway: Gateway, stream: bool
) -> None:
    future = {"type": "hologram", "frames": 3}
    body = message([text("Before. "), future, text("After.")])
    gateway.provider.queue(answer(body, stream))
    gateway.provider.queue(answer(message([text("Done.")]), stream))
    client = sdk(gateway)
    history: list[Any] = [{"role": "user", "content": "Show me."}]
    await ask(client, stream, history)
    # The client echoes the block as it came (the SDK may not know it).
    history += [
        {"role": "assistant", "content": body["content"]},
        {"role": "user", "content": "Again."},
    ]
    await ask(client, stream, history)

    trace = await only_trace(gateway)
    outputs = trace["steps"][0]["output_items"]
    assert [(i["kind"], i["text"], i["attrs"].get("type")) for i in outputs] == [
        ("assistant_text", "Before. ", None),
        ("other", None, "hologram"),
        ("assistant_text", "After.", None),
    ]
    assert [i["text"] for i in trace["steps"][1]["input_items"]] == ["Again."]
    assert trace["violations"] == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_provider_searching_the_same_query_again_and_again_is_a_loop(
    make_gateway: harness.GatewayFactory, stream: bool
) -> None:
    """The provider's server-tool loop pauses after each search and the client sends the turn
    back, as documented; the model searches the same query every time. Under `enforce`, the
    request after the third search is refused."""
    gw = await make_gateway(loops="enforce", loop_threshold=3)
    turns = [f"srvtoolu_0{n}Search" for n in range(1, 4)]
    for call_id in turns:
        searched = [
            server_tool_use(call_id, "web_search", {"query": "ESA news"}),
            web_search_result(call_id, ("ESA launches probe", "https://www.esa.int/probe")),
        ]
        gw.provider.queue(answer(message(searched, stop_reason="pause_turn"), stream))
    client = sdk(gw)
    history: list[Any] = [QUESTION]
    paused: list[Any] = []
    for _ in turns:
        paused += await ask(client, stream, [*history, *_turn(paused)], tools=[WEB_SEARCH])
    with pytest.raises(anthropic.RateLimitError) as refused:
        await ask(client, stream, [*history, *_turn(paused)], tools=[WEB_SEARCH])
    assert "repeated_tool_call: " in refused.value.message

    trace = await only_trace(gw)
    assert len(trace["steps"]) == 3
    loops = [v for v in trace["violations"] if v["kind"] == "repeated_tool_call"]
    assert [(v["call_id"], v["enforced"]) for v in loops] == [
        (turns[-1], False),  # found on the third search
        (turns[-1], True),  # and the next request refused
    ]
    assert "'web_search'" in loops[0]["detail"] and '{"query":"ESA news"}' in loops[0]["detail"]
    assert trace["status"] == "refused"


def _turn(content: list[Any]) -> list[Any]:
    """The paused assistant turn as the client sends it back, all of it so far."""
    return [{"role": "assistant", "content": content}] if content else []
