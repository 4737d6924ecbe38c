"""No secret a client or provider puts in an id, a name or a model reaches storage or metrics."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.conftest import Database
from tests.e2e.proxy.test_proxy_unhappy import database_bytes, post
from tests.fakes import anthropic as anthropic_fake
from tests.fakes import responses as responses_fake
from tests.fakes.chat import call, completion
from tests.fakes.provider import Reply
from tests.harness import Gateway, GatewayFactory, gateway, make_gateway, provider  # noqa: F401


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


def plain_secret(n: int) -> str:
    """A credential no text rule knows: only its key's name can tell it is one."""
    return f"Qx7plain{n:02d}credentialMaterialZz"


def _future_shapes() -> dict[str, Any]:
    """Fields no adapter knows, holding credentials under names and in headers objects."""
    return {
        "connectors": [
            {"auth": {"client_secret": plain_secret(1), "refresh_token": plain_secret(2)}}
        ],
        "x_api_key": plain_secret(3),
        "transport": {"headers": {"X-Tenant-Signature": plain_secret(4), "Accept": "*/*"}},
        "vault": {"dbPassword": plain_secret(5), "Session-Cookie": plain_secret(6)},
        "prompt_cache_key": "agent-cache-7",
        "usage_limits": {"input_tokens": 900, "budget_tokens": 100, "api_key_count": 2},
    }


ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 256,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [{"role": "user", "content": "list the repos"}],
    "mcp_servers": [
        {
            "type": "url",
            "url": "https://mcp.example.test/sse",
            "name": "github",
            "authorization_token": plain_secret(10),
        }
    ],
    **_future_shapes(),
}
RESPONSES_BODY: dict[str, Any] = {
    "model": "gpt-5",
    "input": "list the repos",
    "max_output_tokens": 300,
    "tools": [
        {
            "type": "mcp",
            "server_label": "github",
            "server_url": "https://mcp.example.test/mcp",
            "authorization": plain_secret(11),
            "headers": {"X-Custom-Auth": plain_secret(12)},
            "require_approval": "never",
        }
    ],
    **_future_shapes(),
}
CHAT_BODY: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "list the repos"}],
    "max_completion_tokens": 128,
    "extra_headers": {"OpenAI-Organization": plain_secret(13)},
    **_future_shapes(),
}
SHAPES = {
    "messages": ("/v1/messages", ANTHROPIC_BODY),
    "responses": ("/v1/responses", RESPONSES_BODY),
    "chat": ("/v1/chat/completions", CHAT_BODY),
}


def answer(protocol: str) -> Reply:
    if protocol == "messages":
        return anthropic_fake.reply(anthropic_fake.message([anthropic_fake.text("ok")]))
    if protocol == "responses":
        return responses_fake.reply(responses_fake.response([responses_fake.message("ok")]))
    return completion("ok")


@pytest.mark.parametrize("protocol", list(SHAPES))
async def test_credentials_in_parameters_are_redacted_by_their_names(
    make_gateway: GatewayFactory, database: Database, protocol: str
) -> None:
    """Credentials under any key named like one, at any depth of any field (MCP servers and
    fields no adapter knows alike), and every value of a headers object, never reach the
    store or the API; counts, limits and cache keys stay readable."""
    gateway = await make_gateway(database_url=database.url)
    path, body = SHAPES[protocol]
    gateway.provider.queue(answer(protocol))
    async with (
        aiohttp.ClientSession() as s,
        s.post(gateway.url + path, json=body, headers={"x-api-key": "sk-ant-test"}) as r,
    ):
        assert r.status == 200, await r.text()
        trace_id = r.headers["X-Loopwatch-Trace-Id"]
    assert plain_secret(1) in gateway.provider.received[-1].body.decode()  # forwarded as sent
    trace = await gateway.trace(trace_id)
    shown, stored = json.dumps(trace), stored_bytes(database)
    secrets = [plain_secret(n) for n in (1, 2, 3, 4, 5, 6, 10, 11, 12, 13)]
    assert [s for s in secrets if s in shown or s.encode() in stored] == []
    (step,) = trace["steps"]
    params = step["params"]
    assert params["x_api_key"] == "[REDACTED:api_key]"
    assert params["connectors"] == [
        {
            "auth": {
                "client_secret": "[REDACTED:client_secret]",
                "refresh_token": "[REDACTED:refresh_token]",
            }
        }
    ]
    assert params["transport"]["headers"] == {
        "X-Tenant-Signature": "[REDACTED:header]",
        "Accept": "[REDACTED:header]",
    }
    vault = {"dbPassword": "[REDACTED:password]", "Session-Cookie": "[REDACTED:cookie]"}
    assert params["vault"] == vault
    assert params["prompt_cache_key"] == "agent-cache-7"
    assert params["usage_limits"] == {"input_tokens": 900, "budget_tokens": 100, "api_key_count": 2}
    limits = {"max_tokens": 256, "max_output_tokens": 300, "max_completion_tokens": 128}
    assert [params[k] == v for k, v in limits.items() if k in params] == [True]
    if protocol == "messages":
        assert params["thinking"] == {"type": "enabled", "budget_tokens": 1024}
        (server,) = params["mcp_servers"]
        assert server["authorization_token"] == "[REDACTED:token]"
        assert server["url"] == "https://mcp.example.test/sse" and server["name"] == "github"
    if protocol == "responses":
        (tool,) = step["tools"]
        assert tool["authorization"] == "[REDACTED:authorization]"
        assert tool["headers"] == {"X-Custom-Auth": "[REDACTED:header]"}
        assert tool["server_label"] == "github" and tool["require_approval"] == "never"
