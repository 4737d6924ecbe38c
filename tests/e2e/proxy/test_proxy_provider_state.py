"""Loops whose history the provider holds (a Responses conversation, compaction items) are
one trace through the gateway and the official SDKs, and never refused for calls held there."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests import harness
from tests.fakes import anthropic as claude
from tests.fakes.responses import function_call, message, reply, response, streamed
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
# A compaction item as `POST /v1/responses/compact` returns it and a later request sends it
# back (openai `ResponseCompactionItemParam`: type, encrypted_content, id).
COMPACTION = {"type": "compaction", "id": "cmp_68c42d26", "encrypted_content": "gAAAAABo-cmp=="}


def client(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base, api_key="sk-test-clientkey1234567890", max_retries=0
        )
    )


async def create(sdk: openai.AsyncOpenAI, *, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return await sdk.responses.create(**kwargs)
    final = None
    async for event in await sdk.responses.create(stream=True, **kwargs):
        if event.type == "response.completed":
            final = event.response
    assert final is not None
    return final


def result(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_conversation_loop_is_one_trace(gateway: Gateway, stream: bool) -> None:
    """Each request names the conversation and sends only its new items: the result of a
    call the gateway saw pairs with it; one answering a call the conversation may hold
    without the gateway having seen it (added through the Conversations API) is no orphan."""
    make = streamed if stream else reply
    gateway.provider.queue(
        make(
            response(
                [function_call("call_a", "get_weather", {"city": "Paris"})], response_id="resp_1"
            )
        ),
        make(response([message("Sunny in Paris.")], response_id="resp_2")),
        make(response([message("Noted.")], response_id="resp_3")),
    )
    sdk = client(gateway)
    await create(
        sdk, stream=stream, model="gpt-5", conversation="conv_1", input="Paris?", tools=TOOLS
    )
    second = await create(
        sdk,
        stream=stream,
        model="gpt-5",
        conversation={"id": "conv_1"},
        input=[result("call_a", "sunny")],
    )
    assert second.output_text == "Sunny in Paris."
    third = await create(
        sdk, stream=stream, model="gpt-5", conversation="conv_1", input=[result("call_zz", "42")]
    )
    assert third.output_text == "Noted."
    assert len(gateway.provider.received) == 3

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["step_count"] == 3 and trace["violations"] == []
    assert [(i["kind"], i["call_id"]) for i in trace["steps"][1]["input_items"]] == [
        ("tool_result", "call_a")
    ]


async def test_a_conversation_step_that_drops_a_seen_call_is_still_checked(
    gateway: Gateway,
) -> None:
    """The conversation's last recorded step emitted call_a: a request going on without its
    result is missing it (the provider refuses such a conversation too)."""
    gateway.provider.queue(
        reply(
            response(
                [function_call("call_a", "get_weather", {"city": "Paris"})], response_id="resp_1"
            )
        )
    )
    sdk = client(gateway)
    await sdk.responses.create(model="gpt-5", conversation="conv_2", input="Paris?", tools=TOOLS)
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk.responses.create(model="gpt-5", conversation="conv_2", input="And Rome?")
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["code"] == "missing_tool_result"
    assert len(gateway.provider.received) == 1


async def test_a_conversation_first_seen_midway_starts_a_trace(gateway: Gateway) -> None:
    """A conversation begun without the gateway: a new trace, its results not refused."""
    gateway.provider.queue(
        reply(response([message("ok")], response_id="resp_x")),
        reply(response([message("ok again")], response_id="resp_y")),
    )
    sdk = client(gateway)
    await sdk.responses.create(
        model="gpt-5", conversation="conv_elsewhere", input=[result("call_x", "1")]
    )
    await sdk.responses.create(
        model="gpt-5", conversation="conv_elsewhere", input=[result("call_y", "2")]
    )
    assert len(gateway.provider.received) == 2
    traces = await gateway.traces()
    assert len(traces) == 1 and traces[0]["violation_count"] == 0
    assert (await gateway.trace(traces[0]["id"]))["step_count"] == 2


async def test_a_result_after_a_compaction_item_is_no_orphan(gateway: Gateway) -> None:
    """After `responses.compact` the history is the user's messages and one compaction item:
    the calls it holds are encrypted, so a result answering one of them is forwarded."""
    gateway.provider.queue(reply(response([message("Done.")], response_id="resp_c")))
    answer = await client(gateway).responses.create(
        model="gpt-5",
        input=[
            {"role": "user", "content": "Paris weather?"},
            COMPACTION,
            result("call_hidden", "sunny"),
        ],
        tools=TOOLS,
    )
    assert answer.output_text == "Done."
    traces = await gateway.traces()
    assert traces[0]["violation_count"] == 0


async def test_an_anthropic_loop_through_a_compaction_block_is_one_trace(gateway: Gateway) -> None:
    """The server compacts mid-loop: its answer opens with a `compaction` block (anthropic beta
    `BetaCompactionBlock`), and the client sends it back with the turns before it dropped.
    The compaction step and the next are one trace; nothing is refused or flagged."""
    compaction = {
        "type": "compaction",
        "content": "The user wants Paris weather; get_weather was called once.",
        "encrypted_content": "EqQBCkgIARABGAI",
    }
    first = claude.message(
        [compaction, claude.tool_use("toolu_2", "get_weather", {"city": "Paris"})],
        message_id="msg_compacted",
    )
    gateway.provider.queue(
        claude.reply(first),
        claude.reply(claude.message([claude.text("Sunny.")], message_id="msg_2")),
    )
    sdk = gateway.closing(
        anthropic.AsyncAnthropic(
            base_url=gateway.url, api_key="sk-ant-test-1234567890", max_retries=0
        )
    )
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    history: list[Any] = [{"role": "user", "content": "Paris weather, again and again?"}]
    answer = await sdk.beta.messages.create(
        model=claude.MODEL,
        max_tokens=256,
        messages=history,
        tools=tools,
        betas=["compact-2026-01-12"],
        context_management={"edits": [{"type": "compact_20260112"}]},
    )
    assert [block.type for block in answer.content] == ["compaction", "tool_use"]
    history = [
        {"role": "user", "content": "Paris weather, again and again?"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "sun"}],
        },
    ]
    final = await sdk.beta.messages.create(
        model=claude.MODEL,
        max_tokens=256,
        messages=history,
        tools=tools,
        betas=["compact-2026-01-12"],
    )
    assert final.content[0].type == "text"
    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["step_count"] == 2 and trace["violations"] == []
    kinds = [(i["kind"], i["attrs"].get("type")) for i in trace["steps"][0]["output_items"]]
    assert kinds[0] == ("other", "compaction")
