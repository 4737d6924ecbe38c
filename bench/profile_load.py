"""The load of `profile.py`: a fake Chat Completions provider (run this file with a port) and
the two clients: agents running tool loops, and clients repeating one 2.9 KB agent request.

The provider answers a request that declares tools with a call of its first tool (arguments
that satisfy the tool's schema, so the gateway's checks run in full), otherwise with text.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from typing import Any

import aiohttp
from aiohttp import web

FORECAST = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "Name of the city, e.g. Lyon"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "hourly": {"type": "boolean"},
    },
    "required": ["city"],
    "additionalProperties": False,
}
SERIES = {
    "type": "object",
    "properties": {
        "service": {"type": "string"},
        "metric": {"type": "string", "description": "e.g. error_rate or p95_ms"},
        "since": {"type": "string", "description": "How far back: 30m, 6h, 2d"},
    },
    "required": ["service", "metric"],
    "additionalProperties": False,
}
SHELL = {
    "type": "object",
    "properties": {
        "host": {"type": "string"},
        "command": {"type": "string", "description": "A command that changes nothing"},
        "timeout_s": {"type": "integer", "minimum": 1, "maximum": 120},
    },
    "required": ["host", "command"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": name, "description": text, "parameters": schema}}
    for name, text, schema in (
        ("forecast", "Weather forecast of a city for the coming days.", FORECAST),
        ("metric_series", "A time series of one service metric.", SERIES),
        ("inspect_host", "Run a read-only diagnostic command on a host.", SHELL),
    )
]
SYSTEM = (
    "You are the on-call assistant of a payments team. You look into alerts, read metrics and "
    "run read-only diagnostics. Say in one line why you call each tool, never change a running "
    "system without a human's yes, and end with a short list of findings, each with the evidence "
    "it rests on. When a tool answers with an error, correct the arguments once, then report "
    "the error as it came. Keep answers short; the engineer reads them on a phone at night."
)
ANSWER_ARGS = '{"city":"Lyon","unit":"celsius","days":3,"hourly":false}'
USAGE = {"prompt_tokens": 812, "completion_tokens": 24, "total_tokens": 836}


def fixed_request() -> bytes:
    """One agent request of about 2.9 KB: instructions, a tool call and its result, more turns."""
    values = (210, 870, 940, 400, 260, 230)
    series = [{"at": f"02:{m:02d}", "ms": v} for m, v in zip(range(0, 60, 10), values, strict=True)]
    deploys = [{"at": "02:05", "version": "r-771", "by": "release-train"}]
    result = {"series": series, "unit": "ms", "deploys": deploys, "region": "eu-west"}
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Card payments p95 alert at 02:07. Cause? Still on?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_fixed_0001",
                    "type": "function",
                    "function": {
                        "name": "metric_series",
                        "arguments": '{"service": "cards", "metric": "p95_ms", "since": "1h"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_fixed_0001", "content": json.dumps(result)},
        {
            "role": "assistant",
            "content": (
                "p95 rose right after the 02:05 release r-771, peaked at 940 ms at 02:20 and is "
                "back near its usual level; a rollback does not look needed."
            ),
        },
        {"role": "user", "content": "Good. Now the Lyon forecast for Thursday's on-site, please."},
    ]
    body = {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS, "tool_choice": "auto"}
    return json.dumps(body).encode()


async def fixed_client(
    session: aiohttp.ClientSession, url: str, body: bytes, deadline: float, counts: dict[str, int]
) -> None:
    headers = {"Authorization": "Bearer sk-profile", "Content-Type": "application/json"}
    while time.monotonic() < deadline:
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            counts["errors" if response.status != 200 else "steps"] += 1


async def agent_loop(
    session: aiohttp.ClientSession, url: str, n: int, deadline: float, counts: dict[str, int]
) -> None:
    """Runs of 8 steps: each request is the last one plus the answer (as an SDK echoes it)
    plus one tool result per call."""
    while time.monotonic() < deadline:
        counts["runs"] += 1
        text = f"Run {n}-{counts['runs']}: is the cards service healthy? Mail ops@example.org."
        messages: list[Any] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": text},
        ]
        for _ in range(8):
            body = {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS}
            async with session.post(url, json=body, headers={"Authorization": "Bearer sk-p"}) as r:
                answer = await r.json() if r.status == 200 else None
            if answer is None:
                counts["errors"] += 1
                return
            counts["steps"] += 1
            message = answer["choices"][0]["message"]
            messages.append(message)
            for call in message.get("tool_calls") or []:
                content = json.dumps({"ok": True, "temp_c": 11, "status": "green"})
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
            if time.monotonic() >= deadline:
                return


CALL_IDS = itertools.count()


async def completions(request: web.Request) -> web.Response:
    body = await request.json()
    if body.get("tools"):
        call = {
            "id": f"call_{next(CALL_IDS):012d}",
            "type": "function",
            "function": {"name": body["tools"][0]["function"]["name"], "arguments": ANSWER_ARGS},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": "All green."}, "stop"
    answer = {
        "id": f"chatcmpl-{next(CALL_IDS)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }
    return web.json_response(answer, headers={"x-request-id": f"req_{next(CALL_IDS)}"})


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "gpt-4o-mini"}]})


def serve(port: int) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
