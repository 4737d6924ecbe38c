"""No secret a client or provider puts in an id, a name or a model reaches storage or metrics."""

from __future__ import annotations

import json

import aiohttp
import pytest

from tests.fakes.chat import call, completion
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401
from tests.test_proxy_unhappy import database_bytes, post

pytestmark = pytest.mark.sqlite


def key(n: int) -> str:
    return f"sk-proj-Zq8vLeakedKeyMaterial{n:02d}"


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
