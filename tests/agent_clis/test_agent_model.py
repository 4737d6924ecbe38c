"""The scripted coding model on the requests the agent CLIs really sent (tests/fixtures/agents,
sanitized): it finds each client's shell tool, calls it, answers from its output, and answers
side requests plainly. Needs no CLI, so it runs everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.provider import Received
from tests.fakes.scripted_agent import FINAL_PREFIX, MARKER, AgentModel

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"

# fixture: (what the model does, the shell tool it finds)
EXPECTED = {
    "claude-code-messages-1": ("call", "Bash"),
    "claude-code-messages-2": ("final", "Bash"),
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
