"""Responses loops with tools the provider runs (web search, remote MCP, a hosted shell) through a
real gateway and the official openai SDK: one trace per run, every output item recorded in its
place, the provider's calls typed and answered, approvals and client calls owed; streamed
and not."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests import harness
from tests.fakes.provider import Reply
from tests.fakes.responses import message, reasoning, reply, response, streamed
from tests.fakes.responses_hosted import (
    mcp_approval_request,
    mcp_approval_response,
    mcp_call,
    mcp_list_tools,
    shell_call,
    shell_call_output,
    web_search_call,
)
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

MODEL = "gpt-5"
QUESTION = {"role": "user", "content": "What did the ESA announce this week?"}
SEARCH_ID = "ws_68c42d26866c819da8d5f5a0e6c1"
ENCRYPTED = "gAAAAABoxC0_aDtrISw_zls0dyams-ENC-nhm23et1xecYaqlI8y44ih0g9FA5T3R9=="
TRACKER: dict[str, Any] = {
    "type": "mcp",
    "server_label": "tracker",
    "server_url": "https://mcp.example.com/mcp",
    "require_approval": "never",
}


def answer(output: list[dict[str, Any]], stream: bool, response_id: str) -> Reply:
    body = response(output, response_id=response_id)
    return streamed(body) if stream else reply(body)


def sdk(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test", max_retries=0))


async def ask(client: openai.AsyncOpenAI, stream: bool, **params: Any) -> list[dict[str, Any]]:
    """One model request; the output items as an agent that keeps no state resends them."""
    if stream:
        final = None
        async for event in await client.responses.create(model=MODEL, stream=True, **params):
            if event.type == "response.completed":
                final = event.response
        assert final is not None
    else:
        final = await client.responses.create(model=MODEL, **params)
    return [item.model_dump(mode="json", exclude_none=True) for item in final.output]


def kinds(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(i["kind"], i["attrs"].get("executed_by")) for i in items]


async def only_trace(gw: Gateway) -> dict[str, Any]:
    traces = await gw.traces()
    assert len(traces) == 1, [t["id"] for t in traces]
    return await gw.trace(traces[0]["id"])


SEARCH_ANSWER = [
    reasoning(["Search the news."], encrypted=ENCRYPTED),
    web_search_call(
        SEARCH_ID, "ESA news this week", "https://www.esa.int/probe", "https://www.esa.int/budget"
    ),
    message("This week the ESA launched a probe."),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_web_search_loop_without_store_is_one_trace(gateway: Gateway, stream: bool) -> None:
    gateway.provider.queue(
        answer(SEARCH_ANSWER, stream, "resp_1"), answer([message("On Tuesday.")], stream, "resp_2")
    )
    client = sdk(gateway)
    params: dict[str, Any] = {
        "tools": [{"type": "web_search"}],
        "store": False,
        "include": ["reasoning.encrypted_content", "web_search_call.action.sources"],
    }
    output = await ask(client, stream, input=[QUESTION], **params)
    follow_up = [QUESTION, *output, {"role": "user", "content": "When?"}]
    await ask(client, stream, input=follow_up, **params)

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    assert kinds(first["output_items"]) == [
        ("reasoning", None),
        ("tool_call", "provider"),
        ("tool_result", "provider"),
        ("assistant_text", None),
    ]
    call, result, said = first["output_items"][1:]
    assert (call["call_id"], call["tool_name"], call["attrs"]["tool_type"]) == (
        SEARCH_ID,
        "web_search",
        "web_search",
    )
    assert (result["call_id"], result["is_error"]) == (SEARCH_ID, False)
    assert result["text"] == (
        "ESA news this week\nhttps://www.esa.int/probe\nhttps://www.esa.int/budget"
    )
    assert said["text"] == "This week the ESA launched a probe."
    # Responses usage counts no tool requests: the searches the answer holds are billed.
    assert first["attrs"]["server_tool_requests"] == {"web_search": 1}
    assert "server_tool_requests" not in second["attrs"]
    # The whole output resent continued the trace: only the new user turn is new.
    assert [(i["kind"], i["text"]) for i in second["input_items"]] == [("user", "When?")]
    assert [s["stop_reason"] for s in trace["steps"]] == ["completed", "completed"]
    assert trace["violations"] == [] and trace["status"] == "completed"


async def test_a_web_search_echoed_by_reference_is_one_trace(gateway: Gateway) -> None:
    """What the Vercel AI SDK sends with `store: true`: the items the provider ran, its
    reasoning and the text after it by `item_reference`."""
    gateway.provider.queue(
        answer(SEARCH_ANSWER, False, "resp_1"), answer([message("On Tuesday.")], False, "resp_2")
    )
    client = sdk(gateway)
    tools = [{"type": "web_search"}]
    output = await ask(client, False, input=[QUESTION], tools=tools)
    references = [{"type": "item_reference", "id": item["id"]} for item in output]
    follow_up = [QUESTION, *references, {"role": "user", "content": "When?"}]
    await ask(client, False, input=follow_up, tools=tools)

    trace = await only_trace(gateway)
    assert [(i["kind"], i["text"]) for i in trace["steps"][1]["input_items"]] == [("user", "When?")]
    assert trace["violations"] == [] and trace["status"] == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_remote_mcp_loop_is_one_trace(gateway: Gateway, stream: bool) -> None:
    listed = mcp_list_tools("mcpl_682d4379df088191", "tracker", "list_tickets", "close_ticket")
    called = mcp_call(
        "mcp_682d437d90a88191", "list_tickets", "tracker", {"state": "open"}, output="#12 #14 #15"
    )
    gateway.provider.queue(
        answer([listed, called, message("There are 3 open tickets.")], stream, "resp_1"),
        answer([message("#12 is the oldest.")], stream, "resp_2"),
    )
    client = sdk(gateway)
    question = {"role": "user", "content": "How many open tickets?"}
    output = await ask(client, stream, input=[question], tools=[TRACKER], store=False)
    history = [question, *output, {"role": "user", "content": "Oldest?"}]
    await ask(client, stream, input=history, tools=[TRACKER], store=False)

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    assert kinds(first["output_items"]) == [
        ("tool_call", "provider"),
        ("tool_result", "provider"),
        ("tool_call", "provider"),
        ("tool_result", "provider"),
        ("assistant_text", None),
    ]
    tools, call, result = first["output_items"][1:4]
    assert (tools["text"], tools["attrs"]["tools"]) == ("list_tickets\nclose_ticket", 2)
    assert (call["tool_name"], call["attrs"]["tool_type"], call["attrs"]["server"]) == (
        "list_tickets",
        "mcp",
        "tracker",
    )
    assert (result["call_id"], result["text"]) == ("mcp_682d437d90a88191", "#12 #14 #15")
    assert [(i["kind"], i["text"]) for i in second["input_items"]] == [("user", "Oldest?")]
    assert trace["violations"] == [] and trace["status"] == "completed"


APPROVAL_ID = "mcpr_682d498e3bd48191"
ASKED = [
    mcp_list_tools("mcpl_682d4379df088191", "tracker", "close_ticket"),
    mcp_approval_request(APPROVAL_ID, "close_ticket", "tracker", {"ticket": 12}),
]
CLOSE = {"role": "user", "content": "Close ticket 12."}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("carried", ["previous_response_id", "resent"])
async def test_an_approval_request_is_answered_by_an_approval_response(
    gateway: Gateway, stream: bool, carried: str
) -> None:
    ran = mcp_call(
        "mcp_682d49c1a1b48191",
        "close_ticket",
        "tracker",
        {"ticket": 12},
        output="closed",
        approval_request_id=APPROVAL_ID,
    )
    gateway.provider.queue(
        answer(ASKED, stream, "resp_1"), answer([ran, message("Closed #12.")], stream, "resp_2")
    )
    client = sdk(gateway)
    tools = [{**TRACKER, "require_approval": "always"}]
    output = await ask(client, stream, input=[CLOSE], tools=tools)
    waiting = await only_trace(gateway)
    assert (waiting["status"], waiting["steps"][0]["stop_reason"]) == ("running", "tool_calls")

    approval = mcp_approval_response(APPROVAL_ID, True)
    if carried == "previous_response_id":
        await ask(client, stream, input=[approval], tools=tools, previous_response_id="resp_1")
    else:
        await ask(client, stream, input=[CLOSE, *output, approval], tools=tools, store=False)

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    request = first["output_items"][-1]
    assert (request["kind"], request["call_id"], request["tool_name"]) == (
        "tool_call",
        APPROVAL_ID,
        "close_ticket",
    )
    assert request["attrs"]["tool_type"] == "mcp_approval"
    assert "executed_by" not in request["attrs"]  # the client answers it
    assert [(i["kind"], i["call_id"], i["text"]) for i in second["input_items"]] == [
        ("tool_result", APPROVAL_ID, "approved")
    ]
    assert kinds(second["output_items"])[:2] == [
        ("tool_call", "provider"),
        ("tool_result", "provider"),
    ]
    assert trace["violations"] == [] and trace["status"] == "completed"


async def test_an_approval_request_left_unanswered_is_a_missing_result(gateway: Gateway) -> None:
    gateway.provider.queue(answer(ASKED, False, "resp_1"))
    client = sdk(gateway)
    tools = [{**TRACKER, "require_approval": "always"}]
    await ask(client, False, input=[CLOSE], tools=tools)
    later = {"role": "user", "content": "Never mind."}
    with pytest.raises(openai.BadRequestError) as raised:
        await ask(client, False, input=[later], tools=tools, previous_response_id="resp_1")
    assert raised.value.body["code"] == "missing_tool_result"
    assert APPROVAL_ID in raised.value.body["message"]
    assert len(gateway.provider.received) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_hosted_shell_owes_nothing(gateway: Gateway, stream: bool) -> None:
    ran = [
        shell_call("call_sh_hosted1", "ls -lah /mnt/data", container="cntr_682d4a"),
        shell_call_output("call_sh_hosted1", "report.csv\n"),
        message("There is one file, report.csv."),
    ]
    gateway.provider.queue(
        answer(ran, stream, "resp_1"), answer([message("It is 2 KB.")], stream, "resp_2")
    )
    client = sdk(gateway)
    tools = [{"type": "shell", "environment": {"type": "container_auto"}}]
    question = {"role": "user", "content": "What is in /mnt/data?"}
    output = await ask(client, stream, input=[question], tools=tools, store=False)
    history = [question, *output, {"role": "user", "content": "How big?"}]
    await ask(client, stream, input=history, tools=tools, store=False)

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    assert kinds(first["output_items"]) == [
        ("tool_call", "provider"),
        ("tool_result", "provider"),
        ("assistant_text", None),
    ]
    assert first["output_items"][1]["text"] == "report.csv\n"
    assert [s["stop_reason"] for s in trace["steps"]] == ["completed", "completed"]
    assert [i["text"] for i in second["input_items"]] == ["How big?"]
    assert trace["violations"] == [] and trace["status"] == "completed"


LOCAL_SHELL = [{"type": "shell", "environment": {"type": "local"}}]
LOOK = {"role": "user", "content": "What is here?"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_client_shell_call_owes_its_output(gateway: Gateway, stream: bool) -> None:
    gateway.provider.queue(
        answer([shell_call("call_sh_local1", "ls")], stream, "resp_1"),
        answer([message("One file: notes.txt.")], stream, "resp_2"),
    )
    client = sdk(gateway)
    output = await ask(client, stream, input=[LOOK], tools=LOCAL_SHELL, store=False)
    ran = shell_call_output("call_sh_local1", "notes.txt\n")
    await ask(client, stream, input=[LOOK, *output, ran], tools=LOCAL_SHELL, store=False)

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    (call,) = first["output_items"]
    assert (call["kind"], call["call_id"], call["tool_name"]) == (
        "tool_call",
        "call_sh_local1",
        "shell",
    )
    assert "executed_by" not in call["attrs"]
    assert [(i["kind"], i["call_id"]) for i in second["input_items"]] == [
        ("tool_result", "call_sh_local1")
    ]
    assert [s["stop_reason"] for s in trace["steps"]] == ["tool_calls", "completed"]
    assert trace["violations"] == [] and trace["status"] == "completed"


async def test_a_client_shell_call_left_unanswered_is_a_missing_result(gateway: Gateway) -> None:
    gateway.provider.queue(answer([shell_call("call_sh_local2", "ls")], False, "resp_1"))
    client = sdk(gateway)
    output = await ask(client, False, input=[LOOK], tools=LOCAL_SHELL, store=False)
    dropped = [LOOK, *output, {"role": "user", "content": "Skip that."}]
    with pytest.raises(openai.BadRequestError) as raised:
        await ask(client, False, input=dropped, tools=LOCAL_SHELL, store=False)
    assert raised.value.body["code"] == "missing_tool_result"
    assert "call_sh_local2" in raised.value.body["message"]
    trace = await only_trace(gateway)
    assert [v["kind"] for v in trace["violations"]] == ["missing_tool_result"]


HOLOGRAM = {"id": "hg_682d4b", "type": "hologram", "frames": 3}  # a type no SDK knows yet


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("last", [False, True], ids=["between", "last"])
async def test_an_unknown_output_item_is_recorded_and_matched_when_echoed(
    gateway: Gateway, stream: bool, last: bool
) -> None:
    output = (
        [message("Here it is."), HOLOGRAM]
        if last
        else [message("Before."), HOLOGRAM, message("After.", item_id="msg_after")]
    )
    gateway.provider.queue(
        answer(output, stream, "resp_1"), answer([message("Done.")], stream, "resp_2")
    )
    client = sdk(gateway)
    show = {"role": "user", "content": "Show me."}
    echoed = await ask(client, stream, input=[show], store=False)
    assert {"id": "hg_682d4b", "type": "hologram", "frames": 3} in echoed  # the SDK keeps it
    await ask(client, stream, input=[show, *echoed, {"role": "user", "content": "Again."}])

    trace = await only_trace(gateway)
    first, second = trace["steps"]
    recorded = [(i["kind"], i["attrs"].get("type")) for i in first["output_items"]]
    expected = [("assistant_text", None), ("other", "hologram")]
    assert recorded == (expected if last else [*expected, ("assistant_text", None)])
    assert [i["text"] for i in second["input_items"]] == ["Again."]
    assert trace["violations"] == [] and trace["status"] == "completed"
