"""A scripted coding model behind the fake provider, for the real agent CLIs (tests/agent_clis).

It finds the shell tool a client declares, calls it once with a command that writes a marker
file, then answers with what the command printed. A request that declares no shell tool (a
title, a summary, a quota probe) gets a short plain answer. A task that asks for a sub-agent
(DELEGATE in its first user turn) is handed to the client's sub-agent tool instead, with
SUBAGENT_TASK as the sub-agent's prompt; the sub-agent's own run then calls the shell as
above, and the parent answers from the sub-agent's report. Every request is answered in its
own protocol, streamed or not, with reasoning the gateway must never store. A task that asks
why a run failed (EXPLAIN) is answered by calling the client's `explain_run` MCP tool (the
gateway's trace server) for the run named in it, then repeating what the tool returned.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import scripted_agent_wire as wire
from tests.fakes.provider import Received, Reply
from tests.fakes.script import BadRequest, Ids

MARKER = "loopwatch-ok"
MARKER_FILE = "marker.txt"
COMMAND = f"echo {MARKER} > {MARKER_FILE} && cat {MARKER_FILE}"
# The model's private reasoning: sent as thinking/reasoning, never to be found in the store.
THOUGHT = "Private plan 7f3a: run the marker command, then report what it printed."
SIDE_ANSWER = "Marker check"
FINAL_PREFIX = "The marker command printed: "
# A task with these words is delegated; the sub-agent's task must not have them.
DELEGATE = "with a sub-agent"
DELEGATING_PROMPT = (
    "Have the marker file written with the shell with a sub-agent, then tell me what the "
    "command printed."
)
BACKGROUND_PROMPT = (
    "Have the marker file written with the shell with a sub-agent in the background, then "
    "tell me what the command printed."
)
IN_BACKGROUND = "in the background"
SUBAGENT_TASK = "Write the marker file with the shell and report what the command printed."
WAITING = "A sub-agent is writing the marker file; I will report what it printed."
# A task with these words asks the trace MCP server; its answer repeats the tool's text.
EXPLAIN = "why did my run"
EXPLAINED_PREFIX = "Loopwatch says: "
TRACE_ID = re.compile(r"\btr-[0-9a-f]+\b")
# Sub-agent tools as the clients name them: Claude Code's `Agent` (2.1), `Task` before it.
SUBAGENT_NAMES = ("Agent", "Task")

# Shell tools as the clients name them, most specific first.
SHELL_NAMES = (
    "Bash",
    "run_shell_command",
    "bash",
    "shell_command",
    "shell",
    "exec_command",
    "local_shell",
    "exec",
)


def final_answer(output: str) -> str:
    """The final text once the tool ran: the output line with the marker (not the command
    echoed back), or that there was none."""
    lines = [
        re.sub(r"<[^>]*>", "", line).strip()  # a background task's news comes in tags
        for line in output.splitlines()
        if MARKER in line and "echo" not in line
    ]
    # A sub-agent's report already says it: relayed as the same answer.
    return FINAL_PREFIX + lines[-1].removeprefix(FINAL_PREFIX) if lines else NOTHING


NOTHING = "The marker command printed nothing."


@dataclass
class Seen:
    """What one request was to the model: the protocol, the shell tool it found, what it did."""

    protocol: str
    shell: str | None
    move: str  # "delegate", "wait", "call", "explain", "final", "side" or "other"
    text: str = ""  # the answer's text


@dataclass
class AgentModel:
    ids: Ids = field(default_factory=Ids)
    seen: list[Seen] = field(default_factory=list)

    def final_text(self) -> str:
        """The last final answer the model gave, or nothing."""
        finals = [seen.text for seen in self.seen if seen.move == "final"]
        return finals[-1] if finals else ""

    def __call__(self, received: Received) -> Reply:
        route = (received.method, received.path.removesuffix("/"))
        try:
            return self._answer(route, received)
        except BadRequest as exc:
            return wire.error(route[1], exc.status, str(exc))

    def _answer(self, route: tuple[str, str], received: Received) -> Reply:
        method, path = route
        if method == "GET" and path.startswith("/v1/models"):
            return wire.models(path, anthropic="anthropic-version" in _lower(received.headers))
        if method != "POST":
            raise BadRequest(f"no route {method} {path}", status=404)
        if path == "/v1/messages/count_tokens":
            self.seen.append(Seen("count_tokens", None, "other"))
            return Reply(body={"input_tokens": max(1, len(received.body) // 4)})
        protocol = wire.PROTOCOLS.get(path)
        if protocol is None:
            raise BadRequest(f"no route {method} {path}", status=404)
        body = received.json()
        conversation = protocol.read(body)
        shell = _find_shell(conversation.tools)
        kind, move = _decide(conversation, shell)
        self.seen.append(Seen(protocol.name, shell.name if shell else None, kind, move.text))
        return protocol.answer(body, move, self.ids)


def _decide(
    conversation: wire.Conversation, shell: wire.ToolCall | None
) -> tuple[str, wire.Answer]:
    """The model's move: its kind and its answer."""
    result, news = conversation.result, conversation.latest
    if EXPLAIN in conversation.task.lower():
        explain = _find_explain(conversation.tools, conversation.task)
        if result is not None:
            return "final", wire.Answer(text=EXPLAINED_PREFIX + result, thought=THOUGHT)
        if explain is not None:
            return "explain", wire.Answer(call=explain, thought=THOUGHT)
    if DELEGATE in conversation.task:
        if MARKER in news:  # a background sub-agent's report, come as a user turn
            return "final", wire.Answer(text=final_answer(news), thought=THOUGHT)
        if result is not None and MARKER not in result:  # launched: its report comes later
            return "wait", wire.Answer(text=WAITING, thought=THOUGHT)
        delegate = _find_subagent(conversation.tools, conversation.task)
        if result is None and delegate is not None:
            return "delegate", wire.Answer(call=delegate, thought=THOUGHT)
    if result is not None:
        return "final", wire.Answer(text=final_answer(result), thought=THOUGHT)
    if shell is not None:
        return "call", wire.Answer(call=shell, thought=THOUGHT)
    return "side", wire.Answer(text=SIDE_ANSWER)


def _lower(headers: dict[str, str]) -> set[str]:
    return {name.lower() for name in headers}


def _find_shell(tools: list[wire.Tool]) -> wire.ToolCall | None:
    by_name = {tool.name: tool for tool in tools}
    for name in SHELL_NAMES:
        tool = by_name.get(name)
        if tool is not None:
            return wire.ToolCall(tool, _arguments(tool))
    return None


def _find_explain(tools: list[wire.Tool], task: str) -> wire.ToolCall | None:
    """`explain_run` as the client names an MCP tool (`mcp__loopwatch__explain_run`), called
    for the run the task names."""
    tool = next((t for t in tools if t.name.endswith("explain_run")), None)
    named = TRACE_ID.search(task)
    return None if tool is None else wire.ToolCall(tool, {"trace_id": named[0]} if named else {})


def _find_subagent(tools: list[wire.Tool], task: str) -> wire.ToolCall | None:
    """The call starting a sub-agent on SUBAGENT_TASK, when the task asks for one and the
    request declares a sub-agent tool; in the foreground where the tool offers the choice,
    so the parent's next request carries the sub-agent's report, unless the task asks for the
    background (then the report comes as a later user turn)."""
    by_name = {tool.name: tool for tool in tools}
    tool = next((by_name[n] for n in SUBAGENT_NAMES if n in by_name), None)
    if tool is None:
        return None
    properties = (tool.schema or {}).get("properties") or {}
    offered = {
        "description": "Write the marker file",
        "prompt": SUBAGENT_TASK,
        "subagent_type": "general-purpose",
        "run_in_background": IN_BACKGROUND in task,
    }
    arguments = {k: v for k, v in offered.items() if k in properties or k == "prompt"}
    return wire.ToolCall(tool, arguments)


def _arguments(tool: wire.Tool) -> dict[str, Any] | str:
    """The call's arguments, shaped by the tool's own schema (a custom tool takes raw text)."""
    if tool.custom:
        return _script(tool.description)
    properties = (tool.schema or {}).get("properties") or {}
    arguments: dict[str, Any] = {}
    for key in ("command", "cmd"):
        if key in properties:
            array = (properties[key] or {}).get("type") == "array"
            arguments[key] = ["bash", "-lc", COMMAND] if array else COMMAND
            break
    else:
        arguments["command"] = COMMAND
    if "description" in properties:
        arguments["description"] = "Write the marker file"
    return arguments


def _script(description: str) -> str:
    """A free-form tool's input: JavaScript calling the nested shell tool when the tool says
    it runs JavaScript with nested tools (Codex's `exec`), else the command itself."""
    if "JavaScript" not in description or "exec_command(" not in description:
        return COMMAND
    return (
        f"const result = await tools.exec_command({{ cmd: {json.dumps(COMMAND)} }});\n"
        'text(typeof result === "string" ? result : result.output ?? JSON.stringify(result));\n'
    )
