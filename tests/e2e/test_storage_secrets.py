"""No secret a client or provider puts in an id, a name or a model reaches storage or metrics."""

from __future__ import annotations

import json

import aiohttp
import pytest

from tests.conftest import Database
from tests.fakes.chat import call, completion
from tests.harness import Gateway, GatewayFactory, gateway, make_gateway, provider  # noqa: F401
from tests.proxy.test_proxy_unhappy import database_bytes, post


def key(n: int) -> str:
    return f"sk-proj-Zq8vLeakedKeyMaterial{n:02d}"


@pytest.mark.sqlite  # reads the database file
async def test_ids_names_and_models_are_redacted(gateway: Gateway, database_url: str) -> None:
    reply = completion(
        response_id=f"chatcmpl-{key(1)}",
        tool_calls=[call(f"call_{key(2)}", f"fn_{key(3)}", {})],
        finish=f"tool_calls-{key(4)}",
    )
    reply.body["model"] = f"gpt-4o-{key(5)}"
    gateway.provider.queue(reply)
    body = {
        "model": f"gpt-4o-{key(6)}",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(f"c-{key(7)}", f"t-{key(8)}", {})],
            },
            {"role": "tool", "tool_call_id": f"c-{key(7)}", "content": "done"},
        ],
    }
    status, headers, raw = await post(gateway, body)
    assert status == 200 and key(2).encode() in raw  # the client still gets every byte
    orphan = {**body, "messages": [{"role": "tool", "tool_call_id": f"o-{key(9)}", "content": "x"}]}
    status, _, _ = await post(gateway, orphan)
    assert status == 400  # refused; its violation names the call id
    await gateway.flush()
    stored = database_bytes(database_url)
    async with aiohttp.ClientSession() as s, s.get(gateway.url + "/metrics") as r:
        metrics = await r.text()
    leaked = [n for n in range(1, 10) if key(n).encode() in stored or key(n) in metrics]
    assert leaked == []
    trace = await gateway.trace(headers["X-Loopwatch-Trace-Id"])
    step = json.dumps(trace["steps"])
    assert "[REDACTED:api_key]" in step and "fn_" in step and "call_" in step


def stored_bytes(database: Database) -> bytes:
    """What the store holds: SQLite's files, or every row of PostgreSQL's tables as text."""
    if database.path is not None:
        return database_bytes(database.url)
    with database.raw_connect() as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        ]
        rows = [conn.execute(f"SELECT t::text FROM {name} t").fetchall() for name in tables]
    return "\n".join(str(row[0]) for found in rows for row in found).encode()


async def test_declared_tools_and_parameters_are_recorded_redacted(
    make_gateway: GatewayFactory, database: Database
) -> None:
    """A secret in a tool's description or schema, or in a parameter (`user`, `metadata`),
    never reaches the store; the rest of the tools and parameters do, on the step."""
    gateway = await make_gateway(database_url=database.url)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "deploy",
                "description": f"Deploys with key {key(11)}.",
                "parameters": {
                    "type": "object",
                    "properties": {"env": {"type": "string", "default": key(12)}},
                },
            },
        }
    ]
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "ship it"}],
        "tools": tools,
        "tool_choice": "auto",
        "temperature": 0.3,
        "max_tokens": 64,
        "parallel_tool_calls": False,
        "user": key(13),
        "metadata": {"note": f"token {key(14)}"},
    }
    for _ in range(2):
        gateway.provider.queue(completion("ok"))
    status, headers, _ = await post(gateway, body)
    assert status == 200
    await gateway.flush()
    stored = stored_bytes(database)
    assert b"Deploys with key" in stored and b"parallel_tool_calls" in stored
    assert [n for n in range(11, 15) if key(n).encode() in stored] == []
    trace = await gateway.trace(headers["X-Loopwatch-Trace-Id"])
    (step,) = trace["steps"]
    params = step["params"]
    assert params["temperature"] == 0.3 and params["max_tokens"] == 64
    assert params["tool_choice"] == "auto" and params["parallel_tool_calls"] is False
    assert params["model"] == "gpt-4o" and "messages" not in params and "tools" not in params
    assert params["user"] == "[REDACTED:api_key]"
    assert params["metadata"] == {"note": "token [REDACTED:api_key]"}
    (tool,) = step["tools"]
    assert tool["function"]["name"] == "deploy"
    assert tool["function"]["description"] == "Deploys with key [REDACTED:api_key]."
