"""The scripted model behind the framework runs keeps server-side state and refuses what the
real APIs refuse, so a framework (or the gateway) that sends a broken history fails there.
The gateway only observes in these tests: what is tested is the provider's answer."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.scripted_anthropic import THREADS_BETA
from tests.frameworks.checks import QUESTION, scripted_gateway
from tests.harness import Gateway, GatewayFactory

pytestmark = [pytest.mark.frameworks]


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> Gateway:
    return await scripted_gateway(make_gateway, parallel=True, pairing="observe")


def openai_client(gw: Gateway) -> openai.AsyncOpenAI:
    sdk = openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-scripted", max_retries=0)
    return gw.closing(sdk)


def anthropic_client(gw: Gateway) -> anthropic.AsyncAnthropic:
    return gw.closing(
        anthropic.AsyncAnthropic(base_url=gw.url, api_key="sk-ant-test", max_retries=0)
    )


async def test_lists_models_through_the_gateway(gateway: Gateway) -> None:
    models = [m.id async for m in openai_client(gateway).models.list()]
    assert "gpt-5" in models
    assert (await openai_client(gateway).models.retrieve("gpt-4.1")).id == "gpt-4.1"


async def test_unknown_item_reference_is_not_found(gateway: Gateway) -> None:
    with pytest.raises(openai.NotFoundError, match="Item with id 'rs_gone' not found"):
        await openai_client(gateway).responses.create(
            model="gpt-5",
            input=[
                {"role": "user", "content": QUESTION},
                {"type": "item_reference", "id": "rs_gone"},
            ],
        )


async def test_previous_response_id_continues_the_stored_conversation(gateway: Gateway) -> None:
    sdk = openai_client(gateway)
    tools: Any = [
        {"type": "function", "name": n, "parameters": {"type": "object"}}
        for n in ("get_weather", "get_time")
    ]
    first = await sdk.responses.create(model="gpt-5", input=QUESTION, tools=tools)
    calls = [i for i in first.output if i.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    outputs: Any = [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"{c.name} done"}
        for c in calls
    ]
    second = await sdk.responses.create(
        model="gpt-5", previous_response_id=first.id, input=outputs, tools=tools
    )
    assert second.output_text == "Here is what I found: get_weather done; get_time done."
    with pytest.raises(openai.BadRequestError, match="Previous response with id"):
        await sdk.responses.create(model="gpt-5", previous_response_id="resp_gone", input="Hi")


async def test_unanswered_tool_call_is_refused(gateway: Gateway) -> None:
    messages: Any = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "user", "content": "Well?"},
    ]
    with pytest.raises(openai.BadRequestError, match=r"tool calls \['call_1'\] have no result"):
        await openai_client(gateway).chat.completions.create(model="gpt-4.1", messages=messages)


async def test_thread_continues_once_from_a_known_reply(gateway: Gateway) -> None:
    sdk = anthropic_client(gateway)
    tools: Any = [
        {"name": n, "input_schema": {"type": "object"}} for n in ("get_weather", "get_time")
    ]

    async def send(thread: dict[str, Any], **fields: Any) -> Any:
        return await sdk.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=1024,
            extra_body={"thread": thread},
            extra_headers={"anthropic-beta": THREADS_BETA},
            **fields,
        )

    first = await send(
        {"type": "create"}, messages=[{"role": "user", "content": QUESTION}], tools=tools
    )
    results: Any = [
        {"type": "tool_result", "tool_use_id": b.id, "content": f"{b.name} done"}
        for b in first.content
        if b.type == "tool_use"
    ]
    turn = [{"role": "user", "content": results}]
    again = {"type": "continue", "previous_message_id": first.id}
    second = await send(again, messages=turn)
    assert second.content[0].text == "Here is what I found: get_weather done; get_time done."
    with pytest.raises(anthropic.APIStatusError, match="thread_already_continued") as twice:
        await send(again, messages=turn)
    assert twice.value.status_code == 409
    with pytest.raises(anthropic.NotFoundError, match="thread_not_found"):
        await send({"type": "continue", "previous_message_id": "msg_01gone"}, messages=turn)
    with pytest.raises(anthropic.BadRequestError, match="cannot be set on a thread continue"):
        await send(
            {"type": "continue", "previous_message_id": second.id}, messages=turn, tools=tools
        )
