"""What the scripted provider answers: a scenario picked by a cue word in the first user message,
a round given by how many tool results the history holds, so a replayed request gets the same
answer whatever its protocol."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

# Written into every reasoning text the provider produces; the demo test checks that it never
# reaches the database, which is Loopwatch's promise about chains of thought.
THINKING_MARKER = "LW-DEMO-THOUGHT-4b1d"


@dataclass(frozen=True, slots=True)
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Answer:
    text: str = ""
    calls: tuple[Call, ...] = ()
    thinking: str | None = None
    flaky: bool = False  # the first sight of this request drops the stream mid-arguments
    tags: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Conversation:
    """What the script reads from a request, whatever its protocol."""

    first_user: str
    results: tuple[str, ...]  # tool result texts, in history order
    id_prefix: str  # "call_" (OpenAI) or "toolu_01" (Anthropic)


def _ids(conversation: Conversation, cue: str, names: list[str]) -> list[str]:
    round_ = len(conversation.results)
    seeds = (f"{cue}:{round_}:{index}:{name}" for index, name in enumerate(names))
    return [conversation.id_prefix + hashlib.sha256(s.encode()).hexdigest()[:22] for s in seeds]


def _calls(
    conversation: Conversation, cue: str, *specs: tuple[str, dict[str, Any]]
) -> tuple[Call, ...]:
    ids = _ids(conversation, cue, [name for name, _ in specs])
    return tuple(Call(i, name, args) for i, (name, args) in zip(ids, specs, strict=True))


def _thought(text: str) -> str:
    return f"{text} ({THINKING_MARKER})"


def _hiking(c: Conversation) -> Answer:
    if not c.results:
        return Answer(
            "I'll check the weekend weather in both cities at once.",
            _calls(
                c,
                "hiking",
                ("get_weather", {"city": "Lisbon", "days": 2}),
                ("get_weather", {"city": "Oslo", "days": 2}),
            ),
        )
    if len(c.results) == 2:
        return Answer(
            "Lisbon looks drier. Let me find trails near it.",
            _calls(c, "hiking", ("find_trails", {"near": "Lisbon", "max_km": 15})),
        )
    return Answer(
        "Go to Lisbon: sunny and 22 °C on Saturday, while Oslo expects rain. "
        "The Sintra loop (11 km, 4 h) is the pick; start early to beat the heat."
    )


def _dinner(c: Conversation) -> Answer:
    if not c.results:
        return Answer(
            "",
            _calls(
                c,
                "dinner",
                ("find_restaurants", {"city": "Porto", "party": 2, "cuisine": "seafood"}),
                ("check_calendar", {"date": "Friday", "after": "19:00"}),
            ),
        )
    return Answer("Booked Casa Guedes for two on Friday at 20:00; your evening is free.")


def _literature(c: Conversation) -> Answer:
    page = len(c.results) + 1
    return Answer(
        f"Page {page - 1} had a few relevant papers; fetching the next page." if page > 1 else "",
        _calls(c, "literature", ("search_papers", {"query": "agent loop budgets", "page": page})),
    )


def _incident(c: Conversation) -> Answer:
    if not c.results:
        return Answer("", _calls(c, "incident", ("list_incidents", {"status": "open"})))
    if len(c.results) == 1:
        call = ("get_incident", {"id": "INC-2041", "include": ["timeline", "owner", "impact"]})
        return Answer("", _calls(c, "incident", call), flaky=True)
    return Answer(
        "One open incident: INC-2041, elevated checkout latency since 09:12, owned by the "
        "payments team; impact is limited to EU customers."
    )


def _umbrella(c: Conversation) -> Answer:
    if not c.results:
        return Answer(
            "Let me look up the weather in Zürich.",
            _calls(c, "umbrella", ("get_weather", {"city": "Zürich", "unit": "celsius"})),
            _thought("The user asks about Zürich. I need today's weather first."),
        )
    if len(c.results) == 1:
        return Answer(
            "",
            _calls(c, "umbrella", ("get_hourly_forecast", {"city": "Zürich", "hours": 12})),
            _thought("Cloudy now; rain chances by hour decide the umbrella."),
        )
    return Answer(
        "Yes, take an umbrella: showers are likely from 15:00, with 70 % chance by 17:00.",
        thinking=_thought("Rain after 15:00 at 70 %, so an umbrella is sensible."),
    )


def _prime(c: Conversation) -> Answer:
    return Answer(
        "Yes. 97 is prime: it has no divisor between 2 and 9.",
        thinking=_thought("Check 2, 3, 5, 7: none divides 97, and 10 squared exceeds it."),
    )


def _deploy(c: Conversation) -> Answer:
    """The looping agent: the same status check, same arguments, round after round."""
    check = ("get_deploy_status", {"service": "checkout", "environment": "production"})
    if len(c.results) < 4:
        text = "Still rolling out; checking again." if c.results else "Checking the deploy."
        return Answer(text, _calls(c, "deploy", check))
    return Answer(
        "The checkout deploy is still rolling out after four checks (75 % of pods updated); "
        "I'll stop polling here. Ask me again in a few minutes."
    )


def _currency(c: Conversation) -> Answer:
    """The model reaches for a tool nobody declared: `calculate`."""
    if not c.results:
        rate = ("get_exchange_rate", {"base": "EUR", "quote": "JPY"})
        return Answer("", _calls(c, "yen", rate))
    if len(c.results) == 1:
        return Answer(
            "The rate is 162.35; let me do the multiplication.",
            _calls(c, "yen", ("calculate", {"expression": "250 * 162.35"})),
        )
    return Answer("250 EUR is about 40,588 JPY at today's rate of 162.35 yen per euro.")


def _refund(c: Conversation) -> Answer:
    """Its second round asks for a refund the agent never carries out: it dies first."""
    if not c.results:
        return Answer("", _calls(c, "refund", ("lookup_order", {"order_id": "A-8812"})))
    refund = {"order_id": "A-8812", "amount_eur": 49.9, "reason": "arrived damaged"}
    return Answer(
        "The order qualifies for a full refund; issuing it now.",
        _calls(c, "refund", ("issue_refund", refund)),
    )


def _release(c: Conversation) -> Answer:
    """Its tool runs on the demo's MCP server, through the gateway's /mcp/docs."""
    if not c.results:
        read = ("docs__read_text_file", {"path": "/srv/docs/RELEASE.md"})
        return Answer("I'll read the release notes.", _calls(c, "release", read))
    return Answer(
        "Release 2.4: checkout retries payment timeouts once, refunds over 500 EUR need a "
        "second approver, and the mobile app drops Android 9."
    )


# The task an orchestrator hands its research sub-agent: the sub-agent's first user turn, by
# which the gateway links its run to the call (no header needed).
LEVADA_TASK = "Research the Funchal levadas: the weekend weather and one good trail."


def _madeira(c: Conversation) -> Answer:
    """The orchestrator: its one tool starts a sub-agent, whose report it answers from."""
    if not c.results:
        call = ("research_agent", {"task": LEVADA_TASK})
        return Answer("I'll hand the research to a sub-agent.", _calls(c, "madeira", call))
    return Answer(
        "Go on Saturday: sunny and 22 °C in Funchal. Walk from Pico do Arieiro to Pico Ruivo "
        "(11 km, about 4 h), as the research sub-agent found."
    )


def _levadas(c: Conversation) -> Answer:
    """The research sub-agent: two tools in parallel, then its report."""
    if not c.results:
        return Answer(
            "",
            _calls(
                c,
                "levada",
                ("get_weather", {"city": "Funchal", "days": 2}),
                ("find_trails", {"near": "Funchal", "max_km": 12}),
            ),
        )
    return Answer(
        "Funchal: sunny, 22 °C on Saturday. Best trail: Pico do Arieiro to Pico Ruivo, 11 km, 4 h."
    )


SCENARIOS = {
    "hiking": _hiking,
    "dinner": _dinner,
    "literature": _literature,
    "incident": _incident,
    "umbrella": _umbrella,
    "prime": _prime,
    "deploy": _deploy,
    "yen": _currency,
    "refund": _refund,
    "release": _release,
    "madeira": _madeira,
    "levada": _levadas,
}


def decide(conversation: Conversation) -> Answer:
    text = conversation.first_user.lower()
    for cue, scenario in SCENARIOS.items():
        if cue in text:
            return scenario(conversation)
    return Answer(
        "Hello from the Loopwatch demo provider. I only know the demo's scripted runs, "
        "but this request was recorded like any other."
    )


def usage_numbers(body: bytes, answer: Answer, rounds: int) -> dict[str, int]:
    """Token counts shaped like real ones: about 4 characters a token, a growing cached prefix."""
    prompt = 120 + len(body) // 4
    cached = (prompt - 100) // 64 * 64 if rounds else 0
    reasoning = len(answer.thinking or "") // 4
    calls = sum(6 + len(c.arguments_json) // 3 for c in answer.calls)
    completion = 4 + len(answer.text) // 4 + calls + reasoning
    return {
        "prompt": prompt,
        "cached": max(cached, 0),
        "completion": completion,
        "reasoning": reasoning,
    }
