"""Responses custom tools and tool containers, as Codex sends them: `custom_tool_call` with
free-form input, `additional_tools` input items, namespaced tools; requests and responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.checks.loops import CallCounter
from gateway.checks.pairing import check_history
from gateway.checks.tools import ToolChecker
from gateway.items import Item, ItemKind, StopReason, ViolationKind
from gateway.protocols.openai_responses import ADAPTER
from gateway.stream.assembler import Assembled, Assembler
from gateway.stream.deltas import Delta, ToolCallArgs, ToolCallEnd, ToolCallStart
from gateway.stream.sse import SSEDecoder
from tests.factories import output_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "responses"
STREAM = "stream_codex_custom_and_namespaced_calls.sse"
ROUNDTRIP = "nonstream_codex_lite_custom_tool_roundtrip.json"
MARKER = "LWMARKER-7f3a9c-raw-chain-of-thought"
EXEC_INPUT = "set -e\ncd src && ls -la | head -n 20\n"


def _decode(*chunks: bytes) -> list[Delta]:
    sse, decoder = SSEDecoder(), ADAPTER.new_event_decoder()
    events = [event for chunk in chunks for event in sse.decode(chunk)] + sse.flush()
    return [delta for event in events for delta in decoder.decode(event)]


def _assemble(deltas: list[Delta]) -> Assembled:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler)


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / ROUNDTRIP).read_text(encoding="utf-8"))
    return data


def _calls(items: list[Item]) -> list[tuple[str | None, str | None, str | None, dict[str, Any]]]:
    return [
        (i.call_id, i.tool_name, i.arguments, i.attrs)
        for i in items
        if i.kind is ItemKind.TOOL_CALL
    ]


def test_streamed_custom_and_namespaced_calls_are_tool_calls() -> None:
    deltas = _decode((FIXTURES / STREAM).read_bytes())
    starts = [d for d in deltas if isinstance(d, ToolCallStart)]
    assert [(d.index, d.name, d.attrs) for d in starts] == [
        (1, "exec", {"free_form": True}),
        (2, "agents.spawn_agent", {"namespace": "agents"}),
    ]
    fragments = [d.fragment for d in deltas if isinstance(d, ToolCallArgs) and d.index == 1]
    assert "".join(fragments) == EXEC_INPUT and len(fragments) == 7
    assert next(d.arguments for d in deltas if isinstance(d, ToolCallEnd)) == EXEC_INPUT

    result = _assemble(deltas)
    assert result.complete and result.violations == []  # free-form input is not JSON: fine
    assert (result.stop_reason, result.raw_stop_reason) == (StopReason.TOOL_CALLS, "completed")
    assert [i.kind for i in result.output_items] == [
        ItemKind.REASONING,
        ItemKind.TOOL_CALL,
        ItemKind.TOOL_CALL,
    ]
    (exec_call, spawn) = _calls(result.output_items)
    assert exec_call == (
        "call_Kq8vN2xR4tLm6Pz0Yb3Wc5Hd",
        "exec",
        EXEC_INPUT,
        {"free_form": True, "item_ids": ["ctc_0a7c3e1f55b2c9d80168f3a1c4cc22dd"]},
    )
    assert spawn[1] == "agents.spawn_agent" and spawn[3]["namespace"] == "agents"
    assert json.loads(spawn[2] or "") == {
        "task_name": "review",
        "agent_type": "reviewer",
        "message": "Check the diff.",
    }
    assert MARKER not in json.dumps([item.to_json() for item in result.output_items])


def test_custom_input_split_at_every_byte_assembles_the_same() -> None:
    raw = (FIXTURES / STREAM).read_bytes()
    # From the custom call's first event to its last: every byte boundary of its input.
    start = raw.index(b'"sequence_number":4,')
    end = raw.index(b"event: response.output_item.done", start)
    whole = _assemble(_decode(raw)).output_items
    for split in range(start, end + 1):
        items = _assemble(_decode(raw[:split], raw[split:])).output_items
        assert items == whole, split


def test_a_body_with_a_custom_tool_call_stops_on_tool_calls() -> None:
    result = _assemble(ADAPTER.decode_body(_fixture()["response"]))
    assert result.stop_reason is StopReason.TOOL_CALLS and result.violations == []
    assert _calls(result.output_items) == [
        (
            "call_Xr5bQ9wE2mT7yU1iO4pA6sDf",
            "exec",
            "ls src | wc -l\n",
            {"free_form": True, "item_ids": ["ctc_0a7c3e1f55b2c9d80168f3a1d1bb55dd"]},
        )
    ]
    final = _assemble(ADAPTER.decode_body(_fixture()["followup_response"]))
    assert final.stop_reason is StopReason.COMPLETED


def test_a_lite_request_declares_its_tools_in_additional_tools() -> None:
    parsed = ADAPTER.parse_request(_fixture()["request"])
    assert parsed.tools is not None
    assert sorted(parsed.tools) == ["agents.spawn_agent", "apply_patch", "exec", "update_plan"]
    assert parsed.tools["exec"] is None and parsed.tools["apply_patch"] is None  # free-form
    assert parsed.tools["agents.spawn_agent"]["required"] == ["task_name", "message"]
    assert [(i.kind, i.role, i.attrs) for i in parsed.items] == [
        (ItemKind.INSTRUCTION, "system", {"field": "instructions"}),
        (ItemKind.OTHER, None, {"message_index": 0, "type": "additional_tools", "tools": 5}),
        (ItemKind.INSTRUCTION, "developer", {"message_index": 1}),
        (ItemKind.USER, "user", {"message_index": 2}),
    ]


def test_the_follow_up_pairs_the_custom_call_with_its_output() -> None:
    parsed = ADAPTER.parse_request(_fixture()["followup_request"])
    call, output = [i for i in parsed.items if i.kind in (ItemKind.TOOL_CALL, ItemKind.TOOL_RESULT)]
    assert (call.call_id, call.tool_name, call.arguments) == (
        "call_Xr5bQ9wE2mT7yU1iO4pA6sDf",
        "exec",
        "ls src | wc -l\n",
    )
    assert call.attrs["free_form"] is True
    assert (output.kind, output.call_id) == (ItemKind.TOOL_RESULT, call.call_id)
    assert output.text == "Exit code: 0\nWall time: 0.1 seconds\nOutput:\n\n12\n"
    assert check_history(parsed.items, history=ADAPTER.history) == []


def test_a_string_custom_output_and_a_namespaced_call_in_the_input() -> None:
    items = ADAPTER.parse_request(
        {
            "input": [
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "spawn_agent",
                    "namespace": "agents",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "started"},
                {"type": "custom_tool_call", "call_id": "call_2", "name": "exec", "input": "pwd"},
                {"type": "custom_tool_call_output", "call_id": "call_2", "output": "/work"},
            ]
        }
    ).items
    assert [(i.kind, i.call_id, i.tool_name, i.text) for i in items] == [
        (ItemKind.TOOL_CALL, "call_1", "agents.spawn_agent", None),
        (ItemKind.TOOL_RESULT, "call_1", None, "started"),
        (ItemKind.TOOL_CALL, "call_2", "exec", None),
        (ItemKind.TOOL_RESULT, "call_2", None, "/work"),
    ]
    assert check_history(items, history=ADAPTER.history) == []


def _call(name: str, arguments: str, *, free_form: bool = False, **attrs: Any) -> Item:
    extra = {"free_form": True} if free_form else {}
    return Item(
        ItemKind.TOOL_CALL,
        role="assistant",
        call_id=f"call_{name}",
        tool_name=name,
        arguments=arguments,
        attrs={**extra, **attrs},
    )


def test_schema_checks_only_for_json_schema_tools() -> None:
    declared = ADAPTER.parse_request(_fixture()["request"]).tools
    checker = ToolChecker()
    fine = [
        _call("exec", "rm -rf build && make", free_form=True),
        _call("apply_patch", "*** Begin Patch\n*** End Patch\n", free_form=True),
        _call("agents.spawn_agent", '{"task_name": "a", "message": "b"}', namespace="agents"),
    ]
    assert checker.check(declared, fine) == []
    bad_args = _call("agents.spawn_agent", '{"task_name": 3}', namespace="agents")
    (violation,) = checker.check(declared, [bad_args])
    assert violation.kind is ViolationKind.INVALID_TOOL_ARGUMENTS
    (undeclared,) = checker.check(declared, [_call("shell", "ls", free_form=True)])
    assert undeclared.kind is ViolationKind.UNDECLARED_TOOL
    assert "'exec'" in undeclared.detail


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ({"tools": [{"type": "custom", "name": "exec", "format": {"type": "text"}}]}, ["exec"]),
        ({"tools": [{"type": "web_search"}, {"type": "code_interpreter"}]}, []),  # hosted
        ({"tools": [{"type": "local_shell"}]}, ["local_shell"]),  # run by the client
        (
            {
                "input": [
                    {
                        "type": "tool_search_output",
                        "call_id": "ts_1",
                        "execution": "client",
                        "status": "completed",
                        "tools": [
                            {
                                "type": "namespace",
                                "name": "mcp__docs__",
                                "tools": [{"type": "function", "name": "search"}],
                            }
                        ],
                    }
                ]
            },
            ["mcp__docs__.search"],
        ),
    ],
)
def test_which_tools_count_as_declared(declaration: dict[str, Any], expected: list[str]) -> None:
    tools = ADAPTER.parse_request(declaration).tools
    assert tools is not None and sorted(tools) == expected


def test_a_continued_response_without_tools_is_not_judged() -> None:
    """Its `additional_tools` may have arrived in an earlier input the provider holds."""
    parsed = ADAPTER.parse_request({"previous_response_id": "resp_1", "input": "go on"})
    assert parsed.tools is None
    parsed = ADAPTER.parse_request({"input": "hello"})
    assert parsed.tools == {}


def test_free_form_input_counts_as_its_text_for_loops() -> None:
    counter = CallCounter(threshold=2)
    # JSON-looking free-form input is still text: spacing makes another call.
    assert counter.observe([_call("exec", '{"a": 1}', free_form=True)]) == []
    assert counter.observe([_call("exec", '{"a":1}', free_form=True)]) == []
    (loop,) = counter.observe([_call("exec", '{"a": 1}', free_form=True)])
    assert loop.kind is ViolationKind.REPEATED_TOOL_CALL
    assert '"{\\"a\\": 1}"' in loop.detail


def test_input_streamed_before_its_item_is_named_by_the_done_item() -> None:
    """Some compatible servers send no `output_item.added`: the done item names the call."""
    call = {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_1",
        "name": "exec",
        "input": "pwd",
    }
    events = [
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": "pw"},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": "d"},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    result = _assemble(_decode(raw))
    assert _calls(result.output_items) == [
        ("call_1", "exec", "pwd", {"free_form": True, "item_ids": ["ctc_1"]})
    ]
    assert result.stop_reason is StopReason.TOOL_CALLS


LOCAL_SHELL_CALL = {
    "type": "local_shell_call",
    "id": "lsh_1",
    "call_id": "call_sh",
    "status": "completed",
    "action": {"type": "exec", "command": ["ls", "-la"], "timeout_ms": 10000, "env": {}},
}


def test_built_in_client_tools_are_tool_calls_and_results() -> None:
    """`local_shell` (answered by `local_shell_call_output`, or by `function_call_output` as
    Codex does), `shell` and `apply_patch` run at the client: paired like any call."""
    parsed = ADAPTER.parse_request(
        {
            "tools": [{"type": "local_shell"}, {"type": "shell"}, {"type": "apply_patch"}],
            "input": [
                {"role": "user", "content": "Look around."},
                LOCAL_SHELL_CALL,
                {"type": "function_call_output", "call_id": "call_sh", "output": "a b"},
                {
                    "type": "shell_call",
                    "call_id": "call_sh2",
                    "action": {"commands": ["pwd"], "timeout_ms": 1000},
                },
                {
                    "type": "shell_call_output",
                    "call_id": "call_sh2",
                    "output": [{"stdout": "/w\n", "stderr": "", "outcome": {"type": "exit"}}],
                },
            ],
        }
    )
    assert parsed.tools == {"local_shell": None, "shell": None, "apply_patch": None}
    calls = [(i.kind, i.call_id, i.tool_name) for i in parsed.items[1:]]
    assert calls == [
        (ItemKind.TOOL_CALL, "call_sh", "local_shell"),
        (ItemKind.TOOL_RESULT, "call_sh", None),
        (ItemKind.TOOL_CALL, "call_sh2", "shell"),
        (ItemKind.TOOL_RESULT, "call_sh2", None),
    ]
    assert json.loads(parsed.items[1].arguments or "")["command"] == ["ls", "-la"]
    assert json.loads(parsed.items[4].text or "")[0]["stdout"] == "/w\n"
    assert check_history(parsed.items, history=ADAPTER.history) == []


def test_a_response_calling_a_built_in_client_tool_stops_on_tool_calls() -> None:
    body = {"id": "r", "status": "completed", "output": [LOCAL_SHELL_CALL]}
    result = _assemble(ADAPTER.decode_body(body))
    assert result.stop_reason is StopReason.TOOL_CALLS and result.violations == []
    ((call_id, name, arguments, attrs),) = _calls(result.output_items)
    assert (call_id, name, attrs["type"]) == ("call_sh", "local_shell", "local_shell_call")
    echoed = ADAPTER.parse_request({"input": [LOCAL_SHELL_CALL]}).items[0]
    assert echoed.arguments == arguments  # the echo compares equal for threading
