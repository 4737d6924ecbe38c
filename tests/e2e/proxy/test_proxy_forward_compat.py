"""Forward compatible through a real gateway: what the provider accepts passes and is recorded.

Claude Code's system turns inside `messages`, Codex's `additional_tools` and custom tool calls,
and shapes no adapter knows (roles, item types, content blocks) in all three protocols.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from tests import harness
from tests.fakes import anthropic as fake_anthropic
from tests.fakes import responses as fake_responses
from tests.fakes.chat import completion
from tests.harness import Gateway
from tests.wire_equal import unshaped

provider = harness.provider
make_gateway, gateway = harness.make_gateway, harness.gateway

pytestmark = pytest.mark.sqlite

PER_TURN_BETA = "per-turn-control-2026-07-01"
BASH = {
    "name": "Bash",
    "description": "Runs a shell command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}
ADDITIONAL_TOOLS = {
    "type": "additional_tools",
    "role": "developer",
    "tools": [
        {
            "type": "custom",
            "name": "exec",
            "description": "Runs a script.",
            "format": {"type": "text"},
        },
        {
            "type": "namespace",
            "name": "agents",
            "description": "Sub-agents.",
            "tools": [
                {
                    "type": "function",
                    "name": "spawn_agent",
                    "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
                }
            ],
        },
    ],
}
CODEX_START: list[Any] = [
    ADDITIONAL_TOOLS,
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Be safe."}],
    },
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Count src."}]},
]


async def only_trace(gw: Gateway) -> dict[str, Any]:
    await gw.flush()
    (listed,) = await gw.traces()
    return await gw.trace(listed["id"])


# --- Claude Code: system turns inside messages -------------------------------------------------


async def test_claude_code_system_turns_pass_and_are_instructions(gateway: Gateway) -> None:
    gateway.provider.queue(
        fake_anthropic.reply(
            fake_anthropic.message(
                [fake_anthropic.tool_use("toolu_01Ls", "Bash", {"command": "ls"})],
                message_id="msg_01Step1",
            )
        ),
        fake_anthropic.reply(
            fake_anthropic.message([fake_anthropic.text("Two files.")], message_id="msg_01Step2")
        ),
    )
    sdk = gateway.closing(
        anthropic.AsyncAnthropic(base_url=gateway.url, api_key="sk-ant-test", max_retries=0)
    )
    system = [
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
    ]
    history: list[Any] = [
        {"role": "user", "content": "List the files."},
        {"role": "system", "content": "Per-turn: stay in the project."},
    ]
    first = await sdk.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        system=system,  # type: ignore[arg-type]
        messages=history,
        tools=[BASH],  # type: ignore[list-item]
        extra_headers={"anthropic-beta": PER_TURN_BETA},
    )
    assert first.stop_reason == "tool_use"
    history += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01Ls", "content": "a\nb"}],
        },
        {"role": "system", "content": [{"type": "text", "text": "Per-turn: answer briefly."}]},
    ]
    second = await sdk.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        system=system,  # type: ignore[arg-type]
        messages=history,
        tools=[BASH],  # type: ignore[list-item]
        extra_headers={"anthropic-beta": PER_TURN_BETA},
    )
    assert second.content[0].type == "text"

    sent = [received.json() for received in gateway.provider.received]
    assert [m["role"] for m in sent[1]["messages"]] == [
        "user",
        "system",
        "assistant",
        "user",
        "system",
    ]
    assert all(r.headers["anthropic-beta"] == PER_TURN_BETA for r in gateway.provider.received)
    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"], trace["status"]) == (2, 0, "completed")
    first_step, second_step = trace["steps"]
    assert [(i["kind"], i["text"]) for i in first_step["input_items"]] == [
        ("instruction", "You are Claude Code."),
        ("user", "List the files."),
        ("instruction", "Per-turn: stay in the project."),
    ]
    assert [(i["kind"], i["call_id"]) for i in second_step["input_items"]] == [
        ("tool_result", "toolu_01Ls"),
        ("instruction", None),
    ]
    assert [s["stop_reason"] for s in trace["steps"]] == ["tool_calls", "completed"]


# --- Codex: additional_tools, custom tool calls ------------------------------------------------


def codex_script(call: dict[str, Any]) -> list[dict[str, Any]]:
    first = fake_responses.response(
        [fake_responses.reasoning([], encrypted="gAAAAABpZ3kQ-opaque"), call],
        response_id="resp_codex_1",
    )
    second = fake_responses.response(
        [fake_responses.message("There are 12 entries.")], response_id="resp_codex_2"
    )
    return [first, second]


async def create(sdk: openai.AsyncOpenAI, *, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return await sdk.responses.create(**kwargs)
    final = None
    async for event in await sdk.responses.create(stream=True, **kwargs):
        if event.type == "response.completed":
            final = event.response
    assert final is not None
    return final


async def run_codex(gw: Gateway, call: dict[str, Any], *, stream: bool) -> list[Any]:
    """Codex's lite loop: no top-level tools, the whole history sent again (`store: false`)."""
    make = fake_responses.streamed if stream else fake_responses.reply
    gw.provider.queue(*(make(body) for body in codex_script(call)))
    sdk = gw.closing(
        openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-codex", max_retries=0)
    )
    items: list[Any] = list(CODEX_START)
    answers = []
    for _ in range(3):
        answer = await create(
            sdk, stream=stream, model="gpt-5.4-codex", instructions="You are Codex.", input=items,
            store=False, include=["reasoning.encrypted_content"],
        )  # fmt: skip
        answers.append(answer)
        echoed = [item.model_dump(exclude_none=True) for item in answer.output]
        calls = [item for item in echoed if item["type"] == "custom_tool_call"]
        if not calls:
            break
        items += echoed
        items += [
            {"type": "custom_tool_call_output", "call_id": c["call_id"], "output": "12\n"}
            for c in calls
        ]
    return answers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_codex_custom_tool_loop_is_one_paired_trace(gateway: Gateway, stream: bool) -> None:
    call = fake_responses.custom_tool_call("call_exec_1", "exec", "ls src | wc -l\n")
    answers = await run_codex(gateway, call, stream=stream)
    assert answers[-1].output_text == "There are 12 entries."
    assert "tools" not in gateway.provider.received[0].json()  # forwarded as sent

    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"], trace["status"]) == (2, 0, "completed")
    first, second = trace["steps"]
    assert [(s["stop_reason"], s["raw_stop_reason"]) for s in trace["steps"]] == [
        ("tool_calls", "completed"),
        ("completed", "completed"),
    ]
    tool_call = first["output_items"][1]
    assert (tool_call["kind"], tool_call["call_id"], tool_call["tool_name"]) == (
        "tool_call",
        "call_exec_1",
        "exec",
    )
    assert tool_call["arguments"] == "ls src | wc -l\n" and tool_call["attrs"]["free_form"] is True
    assert [(i["kind"], i["call_id"], i["text"]) for i in second["input_items"]] == [
        ("tool_result", "call_exec_1", "12\n")
    ]
    assert unshaped(first["input_items"][1]["attrs"]) == {
        "message_index": 0,
        "type": "additional_tools",
        "tools": 2,
    }


async def test_an_undeclared_custom_tool_is_still_flagged(gateway: Gateway) -> None:
    call = fake_responses.custom_tool_call("call_sh_1", "shell", "rm -rf /tmp/x\n")
    await run_codex(gateway, call, stream=True)
    trace = await only_trace(gateway)
    kinds = [(v["kind"], v["call_id"]) for v in trace["violations"]]
    assert kinds == [("undeclared_tool", "call_sh_1")]
    assert "'agents.spawn_agent', 'exec'" in trace["violations"][0]["detail"]


# --- shapes no adapter knows, in every protocol ------------------------------------------------


async def post_raw(gw: Gateway, path: str, body: bytes) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            gw.url + path,
            data=body,
            headers={"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
        ) as response,
    ):
        await response.read()
        return response.status


UNKNOWN_SHAPES = [
    pytest.param(
        "/v1/chat/completions",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "hologram"}]},
                {"role": "critic", "content": "too short", "mood": "stern"},
            ],
            "future_field": {"nested": [1, 2]},
        },
        [{"type": "hologram"}, {"type": "message", "role": "critic"}],
        id="chat",
    ),
    pytest.param(
        "/v1/responses",
        {
            "model": "gpt-5",
            "input": [
                {"role": "user", "content": [{"type": "input_hologram", "data": "x"}]},
                {"type": "future_item", "payload": {"a": 1}},
                {"type": "message", "role": "critic", "content": "hm"},
                "a bare string",
            ],
            "future_field": True,
        },
        [
            {"message_index": 0, "type": "input_hologram"},
            {"message_index": 1, "type": "future_item"},
            {"message_index": 2, "type": "message", "role": "critic"},
            {"message_index": 3, "shape": "string"},
        ],
        id="responses",
    ),
    pytest.param(
        "/v1/messages",
        {
            "model": "claude-sonnet-4-6",
            "max_tokens": 64,
            "messages": [
                {"role": "user", "content": [{"type": "hologram", "data": "x"}, "bare"]},
                {"role": "narrator", "content": "Meanwhile..."},
            ],
            "future_field": 1,
        },
        [
            {"message_index": 0, "type": "hologram"},
            {"message_index": 0, "shape": "string"},
            {"message_index": 1, "role": "narrator"},
        ],
        id="messages",
    ),
]


@pytest.mark.parametrize(("path", "body", "others"), UNKNOWN_SHAPES)
async def test_unknown_shapes_are_forwarded_byte_identical_and_recorded_as_other(
    gateway: Gateway, path: str, body: dict[str, Any], others: list[dict[str, Any]]
) -> None:
    if path.endswith("completions"):
        gateway.provider.queue(completion("ok"))
    elif path.endswith("responses"):
        gateway.provider.queue(fake_responses.reply(fake_responses.response([])))
    else:
        gateway.provider.queue(fake_anthropic.reply(fake_anthropic.message([])))
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert await post_raw(gateway, path, raw) == 200
    assert gateway.provider.received[0].body == raw
    step = (await only_trace(gateway))["steps"][0]
    assert [unshaped(i["attrs"]) for i in step["input_items"] if i["kind"] == "other"] == others
    assert step["http_status"] == 200


async def test_a_custom_call_threads_by_its_call_id_when_the_history_is_rewritten(
    gateway: Gateway,
) -> None:
    call = fake_responses.custom_tool_call("call_exec_9", "exec", "pwd\n")
    gateway.provider.queue(*(fake_responses.reply(body) for body in codex_script(call)))
    sdk = gateway.closing(
        openai.AsyncOpenAI(base_url=gateway.openai_base, api_key="sk-test-codex", max_retries=0)
    )
    await sdk.responses.create(model="gpt-5.4-codex", input=CODEX_START, store=False)
    # The next request re-renders its context (another developer text, no reasoning echo):
    # only the custom call and its output tie it to the first step.
    rewritten: list[Any] = [
        ADDITIONAL_TOOLS,
        {"type": "message", "role": "developer", "content": "Context compacted."},
        {"type": "custom_tool_call", "call_id": "call_exec_9", "name": "exec", "input": "pwd\n"},
        {"type": "custom_tool_call_output", "call_id": "call_exec_9", "output": "/work\n"},
    ]
    await sdk.responses.create(model="gpt-5.4-codex", input=rewritten, store=False)
    trace = await only_trace(gateway)
    assert (trace["step_count"], trace["violation_count"], trace["status"]) == (2, 0, "completed")
