"""The demo agents' loop: the tools they run, the summary a run leaves, and an OpenAI-style
loop (send the history, run the tools asked for, append, repeat) over the gateway."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from gateway.demo import client
from gateway.demo.client import Reply

SYSTEM = (
    "You are a careful assistant inside an agent loop. Use the tools when they help, call "
    "independent tools in parallel, and answer briefly once you have what you need. "
    "Never invent tool results."
)

_SUNNY = ("Lisbon", "Funchal")
_TRAILS = {
    "Lisbon": [
        {"name": "Sintra loop", "km": 11, "hours": 4},
        {"name": "Arrabida ridge", "km": 14, "hours": 5},
    ],
    "Funchal": [{"name": "Pico do Arieiro to Pico Ruivo", "km": 11, "hours": 4}],
}

_TOOL_RESULTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "get_weather": lambda a: {
        "city": a["city"],
        "sky": "sunny" if a["city"] in _SUNNY else "rain",
        "high_c": 22 if a["city"] in _SUNNY else 11,
    },
    "find_trails": lambda a: _TRAILS.get(str(a.get("near")), _TRAILS["Lisbon"]),
    "find_restaurants": lambda a: [{"name": "Casa Guedes", "free": ["20:00", "21:30"]}],
    "check_calendar": lambda a: {"busy": [], "date": a["date"]},
    "search_papers": lambda a: {
        "page": a["page"],
        "titles": [f"Paper {a['page']}.{i}" for i in range(1, 4)],
    },
    "list_incidents": lambda a: [{"id": "INC-2041", "title": "checkout latency"}],
    "get_incident": lambda a: {"id": a["id"], "owner": "payments", "since": "09:12"},
    "get_hourly_forecast": lambda a: {"15:00": "showers 55%", "17:00": "showers 70%"},
    "get_deploy_status": lambda a: {"service": a["service"], "state": "rolling_out", "pods": "6/8"},
    "get_exchange_rate": lambda a: {"base": a["base"], "quote": a["quote"], "rate": 162.35},
    "lookup_order": lambda a: {"id": a["order_id"], "total_eur": 49.9, "status": "delivered"},
}


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    tool = _TOOL_RESULTS.get(name)
    result = tool(arguments) if tool else {"error": f"unknown tool {name}"}
    return json.dumps(result, ensure_ascii=False)


def _tool_specs(*names: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"Demo tool {name}.",
                "parameters": {"type": "object"},
            },
        }
        for name in names
    ]


@dataclass(slots=True)
class RunSummary:
    title: str
    trace_id: str | None = None
    steps: int = 0
    outcome: str = ""
    log: list[str] = field(default_factory=list)  # what the agent noticed on the way


@dataclass(slots=True)
class Gateway:
    http: aiohttp.ClientSession
    base: str  # http://host:port, no trailing slash


class ChatAgent:
    """An OpenAI-style loop: send the history, run the tools asked for, append, repeat."""

    def __init__(
        self, gw: Gateway, summary: RunSummary, user: str, tools: list[str], model: str
    ) -> None:
        self.gw, self.summary, self.model = gw, summary, model
        self.tools = _tool_specs(*tools)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": user},
        ]

    async def step(self, *, stream: bool, headers: dict[str, str] | None = None) -> Reply:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages, "stream": stream}
        if self.tools:
            body["tools"] = self.tools
        reply = await client.chat(self.gw.http, self.gw.base, body, headers or {})
        self.summary.trace_id = self.summary.trace_id or reply.trace_id
        if reply.status == 200:
            self.summary.steps += 1
        return reply

    def accept(self, reply: Reply, *, skip: int | None = None) -> None:
        """Append the assistant turn and the results of its tool calls (but the `skip`th)."""
        self.messages.append({k: v for k, v in reply.message.items() if v is not None})
        for index, (call_id, name, args) in enumerate(reply.tool_calls()):
            if index != skip:
                content = run_tool(name, args)
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


async def chat_loop(agent: ChatAgent, summary: RunSummary, rounds: int) -> RunSummary:
    """Step, run the tools asked for, repeat until the model answers without a tool call."""
    for number in range(rounds):
        reply = await agent.step(stream=number % 2 == 0)
        if reply.status != 200 or reply.interrupted:
            summary.outcome = "interrupted" if reply.interrupted else f"HTTP {reply.status}"
            return summary
        agent.accept(reply)
        if not reply.tool_calls():
            summary.outcome = "completed"
            return summary
    summary.outcome = "never finished"
    return summary
