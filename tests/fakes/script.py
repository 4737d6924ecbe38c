"""What a scripted model says next, decided from a conversation read off any wire protocol.

A model asked a question calls the script's tools (one round after another, a round being
one assistant turn of parallel calls), then answers with text built from the tool results.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal, Protocol


class BadRequest(Exception):
    """The conversation is one a real provider refuses (400): the message says why."""

    def __init__(self, message: str, *, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Said:
    """One turn of a conversation, whatever the protocol: a user's words, an assistant's text
    and calls, or a tool's result for one call."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    calls: tuple[str, ...] = ()  # call ids an assistant turn emitted
    call_id: str | None = None  # the call a tool result answers


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Move:
    """The model's answer: tool calls, or final text (with the reasoning that led to it)."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    thought: str = ""


@dataclass
class Script:
    """Rounds of tool calls, then a final answer naming every tool result in call order."""

    rounds: list[list[Call]]

    def next_move(self, history: list[Said], declared: set[str]) -> Move:
        start = _last_user_turn(history)
        rounds_done = sum(1 for s in history[start:] if s.role == "assistant" and _calls(s))
        if history[-1].role == "assistant":
            raise BadRequest("the conversation must end with a user message or tool results")
        if rounds_done < len(self.rounds):
            calls = self.rounds[rounds_done]
            missing = sorted({c.name for c in calls} - declared)
            if missing:
                raise BadRequest(f"the request does not declare the tools {missing}")
            names = " and ".join(f"{c.name}({c.arguments_json})" for c in calls)
            return Move(calls=tuple(calls), thought=f"I should call {names}.")
        results = [r for s in history[start:] for r in _results(s)]
        text = final_answer(results)
        if TERMINAL_TOOL in declared:
            # Told to answer through this tool, a model calls it with the answer.
            return Move(calls=(Call(TERMINAL_TOOL, {"answer": text}),), thought="Answering.")
        return Move(text=text, thought="I have every result; answering.")


class Planner(Protocol):
    """What decides a scripted model's next move: one Script, or a Crew of them."""

    def next_move(self, history: list[Said], declared: set[str]) -> Move: ...


@dataclass
class Crew:
    """Agents that start agents, behind one model: a request is answered by the script of
    the first agent whose tool it declares (an orchestrator declares its sub-agent's tool),
    else by the default script (the sub-agent's)."""

    by_tool: dict[str, Script]
    default: Script

    def next_move(self, history: list[Said], declared: set[str]) -> Move:
        script = next((s for tool, s in self.by_tool.items() if tool in declared), self.default)
        return script.next_move(history, declared)


def final_answer(results: list[str]) -> str:
    """The answer the script gives once it has the tool results (tests compute it too)."""
    return "Here is what I found: " + "; ".join(results) + "."


def weather_and_time(*, parallel: bool) -> Script:
    """Weather in Paris and time in Tokyo: one round of two parallel calls, or two rounds."""
    weather = Call("get_weather", {"city": "Paris"})
    time = Call("get_time", {"city": "Tokyo"})
    return Script([[weather, time]] if parallel else [[weather], [time]])


QUESTION = "What is the weather in Paris and the time in Tokyo?"

# An orchestrator that hands the question to a research agent, called as its tool.
RESEARCH_TOOL = "research"
RESEARCH_TASK = "Find the weather in Paris and the local time in Tokyo."


def research_crew(*, parallel: bool) -> Crew:
    """The orchestrator calls RESEARCH_TOOL once with RESEARCH_TASK as its `input` and
    answers from its result; the research agent runs the weather-and-time script."""
    delegate = Script([[Call(RESEARCH_TOOL, {"input": RESEARCH_TASK})]])
    return Crew({RESEARCH_TOOL: delegate}, weather_and_time(parallel=parallel))


def weather_tool(city: str) -> str:
    """What the tests' get_weather tool returns."""
    return f"{city}: sunny, 18 C"


def time_tool(city: str) -> str:
    """What the tests' get_time tool returns."""
    return f"{city}: 09:30"


EXPECTED_ANSWER = final_answer([weather_tool("Paris"), time_tool("Tokyo")])
EXPECTED_RESEARCH_ANSWER = final_answer([EXPECTED_ANSWER])


# Frameworks that re-render a history as text (smolagents) echo each round of calls as an
# assistant message and the round's results, a line each, as a user message with these starts.
ECHOED_CALLS = "Calling tools:"
ECHOED_RESULTS = "Observation:"
# The tool a framework (smolagents) declares for the final answer, ending its run.
TERMINAL_TOOL = "final_answer"


def _calls(said: Said) -> bool:
    return bool(said.calls) or said.text.lstrip().startswith(ECHOED_CALLS)


def _results(said: Said) -> list[str]:
    if said.role == "tool":
        return [_plain(said.text)]
    if said.role == "user" and said.text.lstrip().startswith(ECHOED_RESULTS):
        return said.text.lstrip().removeprefix(ECHOED_RESULTS).strip().splitlines()
    return []


def _last_user_turn(history: list[Said]) -> int:
    for index in range(len(history) - 1, -1, -1):
        said = history[index]
        if said.role == "user" and not said.text.lstrip().startswith(ECHOED_RESULTS):
            return index
    raise BadRequest("the conversation has no user message")


def _plain(text: str) -> str:
    """A tool result as text: frameworks send a string tool output JSON-encoded at times."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, str) else text


def check_pairing(history: list[Said]) -> None:
    """Refuse what real providers refuse: a result for no pending call, a call left unanswered."""
    pending: set[str] = set()
    for said in history:
        if said.role == "tool":
            if said.call_id not in pending:
                raise BadRequest(
                    f"no tool call found for the tool result with call id {said.call_id}"
                )
            pending.discard(said.call_id)
            continue
        if pending:
            raise BadRequest(f"the tool calls {sorted(pending)} have no result")
        pending = set(said.calls)


class Ids:
    """Fresh ids in each provider's own format, unique within one fake provider."""

    ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

    def __init__(self, seed: int = 7) -> None:
        self._random = random.Random(seed)

    def _token(self, length: int, alphabet: str = ALPHABET) -> str:
        return "".join(self._random.choice(alphabet) for _ in range(length))

    def chat_completion(self) -> str:
        return "chatcmpl-" + self._token(29)

    def openai_call(self) -> str:
        return "call_" + self._token(24)

    def response(self) -> str:
        return "resp_" + self._token(50, "0123456789abcdef")

    def item(self, prefix: str) -> str:
        """A Responses output item id: rs_, fc_ or msg_ and 50 hex digits."""
        return f"{prefix}_" + self._token(50, "0123456789abcdef")

    def anthropic_message(self) -> str:
        return "msg_01" + self._token(22)

    def tool_use(self) -> str:
        return "toolu_01" + self._token(22)

    def signature(self) -> str:
        return "Eq" + self._token(120) + "=="


def estimate_tokens(payload: Any) -> int:
    """About four characters a token, as providers count text."""
    return max(1, len(json.dumps(payload)) // 4)
