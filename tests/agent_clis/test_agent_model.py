"""The scripted coding model on the requests the agent CLIs really sent (tests/fixtures/agents,
sanitized): it finds each client's shell tool, calls it, answers from its output, and answers
side requests plainly; asked for a sub-agent, it starts one with the client's sub-agent tool
and answers from its report. Needs no CLI, so it runs everywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.provider import Received, Reply
from tests.fakes.scripted_agent import FINAL_PREFIX, MARKER, SUBAGENT_TASK, AgentModel

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"

# fixture: (what the model does, the shell tool it finds)
EXPECTED = {
    "claude-code-messages-1": ("call", "Bash"),
    "claude-code-messages-2": ("final", "Bash"),
    # Claude Code asked for a sub-agent: the parent's requests, then the sub-agent's own.
    "claude-code-delegate-messages-1": ("delegate", "Bash"),
    "claude-code-delegate-messages-2": ("final", "Bash"),  # the Agent tool's hand-back
    "claude-code-subagent-messages-1": ("call", "Bash"),
    "claude-code-subagent-messages-2": ("final", "Bash"),  # ends with a `system` message
    # ... in the background: launched, then its report comes as a user turn.
    "claude-code-background-messages-1": ("wait", "Bash"),
    "claude-code-background-messages-2": ("final", "Bash"),
    "codex-responses-1": ("call", "exec"),
    "codex-responses-2": ("final", "exec"),
    "qwen-code-chat-1": ("call", "run_shell_command"),
    "qwen-code-chat-2": ("final", "run_shell_command"),
    "opencode-chat-1": ("side", None),
    "opencode-chat-2": ("call", "bash"),
    "opencode-chat-3": ("final", "bash"),
}


def _received(name: str) -> Received:
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    body = json.dumps(fixture["body"]).encode()
    return Received(fixture["method"], fixture["path"], "", fixture["headers"], body)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_answers_each_real_request(name: str) -> None:
    model = AgentModel()
    reply = model(_received(name))
    assert reply.status == 200, reply.body
    (seen,) = model.seen
    assert (seen.move, seen.shell) == EXPECTED[name]
    if seen.move == "final" and not name.startswith("qwen"):
        assert seen.text == f"{FINAL_PREFIX}{MARKER}"


def _events(reply: Reply) -> list[dict[str, Any]]:
    text = b"".join(reply.events or []).decode()
    lines = text.splitlines()
    return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]


def test_claude_code_sub_agent_is_started_with_its_agent_tool() -> None:
    """Claude Code 2.1 declares `Agent` (description, prompt, subagent_type,
    run_in_background …): the sub-agent is asked for in the foreground with SUBAGENT_TASK as
    its prompt, which the sub-agent's own first request then carries as its user turn."""
    reply = AgentModel()(_received("claude-code-delegate-messages-1"))
    starts = [e["content_block"] for e in _events(reply) if e["type"] == "content_block_start"]
    uses = [b for b in starts if b["type"] == "tool_use"]
    assert [u["name"] for u in uses] == ["Agent"]
    deltas = [e["delta"] for e in _events(reply) if e["type"] == "content_block_delta"]
    arguments = json.loads("".join(d.get("partial_json", "") for d in deltas))
    assert arguments == {
        "description": "Write the marker file",
        "prompt": SUBAGENT_TASK,
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    child = json.loads((FIXTURES / "claude-code-subagent-messages-1.json").read_text())
    first = child["body"]["messages"][0]["content"]
    assert SUBAGENT_TASK in [block["text"] for block in first]


def test_older_claude_code_task_tool_is_used_alike() -> None:
    """Claude Code before 2.1 names its sub-agent tool `Task`, its input description, prompt
    and subagent_type, with no background switch: the same request with the tool so named
    and shaped starts the sub-agent through it."""
    received = _received("claude-code-delegate-messages-1")
    body = json.loads(received.body)
    (tool,) = [t for t in body["tools"] if t["name"] == "Agent"]
    tool["name"] = "Task"
    properties = tool["input_schema"]["properties"]
    tool["input_schema"]["properties"] = {
        k: properties[k] for k in ("description", "prompt", "subagent_type")
    }
    older = Received(
        received.method, received.path, "", received.headers, json.dumps(body).encode()
    )
    events = _events(AgentModel()(older))
    uses = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [u["name"] for u in uses if u["type"] == "tool_use"] == ["Task"]
    deltas = "".join(e["delta"].get("partial_json", "") for e in events if "delta" in e)
    assert json.loads(deltas) == {
        "description": "Write the marker file",
        "prompt": SUBAGENT_TASK,
        "subagent_type": "general-purpose",
    }


def test_codex_exec_is_called_in_its_namespace_as_a_custom_tool() -> None:
    """Codex declares its tools in an `additional_tools` input item, `exec` a free-form
    tool in the `functions` namespace: the call must be a custom_tool_call there."""
    reply = AgentModel()(_received("codex-responses-1"))
    events = b"".join(reply.events or []).decode()
    done = [
        json.loads(line.removeprefix("data: "))
        for line in events.splitlines()
        if line.startswith("data: ") and "output_item.done" in line
    ]
    calls = [e["item"] for e in done if e["item"]["type"] == "custom_tool_call"]
    assert [(c["name"], c["namespace"]) for c in calls] == [("exec", "functions")]
    assert MARKER in calls[0]["input"]
