"""Step and token budgets, enforced before the provider: SDK behaviour, clamping, concurrency.

Runs on SQLite and PostgreSQL (the `database` fixture), including two gateway processes
sharing one PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
from typing import Any

import aiohttp
import openai
import pytest

from tests.factories import chat_request, tool_message
from tests.fakes.chat import completion, streamed, usage
from tests.harness import Gateway, make_gateway, provider  # noqa: F401

HELLO = chat_request("hi")


async def post(gw_url: str, trace: str, **headers: str) -> tuple[int, Any, dict[str, str]]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            gw_url + "/v1/chat/completions",
            json=HELLO,
            headers={"X-Loopwatch-Trace-Id": trace, "Authorization": "Bearer sk-test", **headers},
        ) as r,
    ):
        return r.status, await r.json(), {k.lower(): v for k, v in r.headers.items()}


async def test_step_budget_refuses_without_sdk_retries(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_steps=2)
    gw.provider.queue(completion("one"), completion("two"), completion("three"))
    sdk = openai.AsyncOpenAI(
        base_url=gw.openai_base,
        api_key="sk-test",
        max_retries=3,
        default_headers={"X-Loopwatch-Trace-Id": "budgeted-run"},
    )
    async with sdk:
        for _ in range(2):
            await sdk.chat.completions.create(**HELLO)
        with pytest.raises(openai.RateLimitError) as raised:
            await sdk.chat.completions.create(**HELLO)
    error = raised.value.body
    assert error["code"] == "step_budget_exceeded"
    assert "2 of 2 steps" in error["message"]
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(gw.provider.received) == 2  # the refused request never reached the provider
    trace = await gw.trace("budgeted-run")
    assert trace["status"] == "budget_exceeded"
    assert trace["step_count"] == 2
    assert trace["budget"] == {"max_steps": 2, "max_tokens": None}
    # Exactly one refusal: the SDK did not retry although it was allowed to.
    kinds = [v["kind"] for v in trace["violations"]]
    assert kinds == ["step_budget_exceeded"]
    assert trace["violations"][0]["enforced"] is True


async def test_token_budget_clamps_then_refuses(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_tokens=100)
    gw.provider.queue(completion("a", use=usage(50, 30)), completion("b", use=usage(15, 5)))
    status, _, headers = await post(gw.url, "tok-run")
    assert status == 200
    assert gw.provider.received[0].json()["max_completion_tokens"] == 100
    assert headers["x-loopwatch-max-tokens-clamped"] == "100"
    status, _, headers = await post(gw.url, "tok-run")
    assert status == 200
    assert gw.provider.received[1].json()["max_completion_tokens"] == 20  # 100 - 80 spent
    status, body, headers = await post(gw.url, "tok-run")
    assert status == 429 and body["error"]["code"] == "token_budget_exceeded"
    assert headers["x-loopwatch-tokens-remaining"] == "0"
    assert len(gw.provider.received) == 2


async def test_next_step_sent_right_after_done_sees_the_settled_spend(make_gateway) -> None:  # type: ignore[no-untyped-def]
    """An agent sends its next request on `[DONE]`, while the provider still holds the
    connection open: the finished step must already count as spent, not in flight."""
    gw: Gateway = await make_gateway(max_tokens=100)
    gw.provider.queue(streamed("first", use=usage(50, 30), linger=2), completion("second"))
    headers = {"X-Loopwatch-Trace-Id": "eager", "Authorization": "Bearer sk-test"}
    body = {**HELLO, "stream": True}
    async with aiohttp.ClientSession() as s:
        first = await s.post(gw.openai_base + "/chat/completions", json=body, headers=headers)
        await asyncio.wait_for(first.content.readuntil(b"data: [DONE]\n\n"), 5)
        async with s.post(gw.openai_base + "/chat/completions", json=HELLO, headers=headers) as r:
            assert r.status == 200, await r.text()
        first.close()
    assert gw.provider.received[1].json()["max_completion_tokens"] == 20  # 100 - 80 spent


async def test_headers_only_tighten(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_steps=2)
    gw.provider.queue(*(completion(str(i)) for i in range(4)))
    assert (await post(gw.url, "loose", **{"X-Loopwatch-Max-Steps": "10"}))[0] == 200
    assert (await post(gw.url, "loose", **{"X-Loopwatch-Max-Steps": "10"}))[0] == 200
    assert (await post(gw.url, "loose", **{"X-Loopwatch-Max-Steps": "10"}))[0] == 429
    assert (await post(gw.url, "tight", **{"X-Loopwatch-Max-Steps": "1"}))[0] == 200
    status, body, headers = await post(gw.url, "tight", **{"X-Loopwatch-Max-Steps": "1"})
    assert status == 429 and headers["x-loopwatch-steps-remaining"] == "0"
    status, body, _ = await post(gw.url, "bad", **{"X-Loopwatch-Max-Steps": "many"})
    assert status == 400 and "X-Loopwatch-Max-Steps" in body["error"]["message"]


async def test_concurrent_steps_of_one_trace_never_exceed_the_budget(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(max_steps=5)
    gw.provider.queue(*(completion(str(i)) for i in range(20)))
    results = await asyncio.gather(*(post(gw.url, "race") for _ in range(20)))
    statuses = sorted(status for status, _, _ in results)
    assert statuses.count(200) == 5 and statuses.count(429) == 15
    assert len(gw.provider.received) == 5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _start_replica(database_url: str, upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {
        **os.environ,
        "LOOPWATCH_MAX_STEPS": "5",
        "LOOPWATCH_DATABASE_URL": database_url,
        "LOOPWATCH_UPSTREAM_URL": upstream,
        "LOOPWATCH_PORT": str(port),
        "LOOPWATCH_SPOOL_DIR": tempfile.mkdtemp(prefix="loopwatch-spool-"),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(url + "/healthz") as r:
                    if r.status == 200:
                        return process, url
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    process.kill()
    _, stderr = process.communicate(timeout=10)
    raise AssertionError(f"replica did not start: {stderr!r}")


@pytest.mark.postgres
async def test_two_replicas_sharing_postgresql_hold_the_budget(provider, postgres_database) -> None:  # type: ignore[no-untyped-def]
    provider.queue(*(completion(str(i)) for i in range(20)))
    replicas = [await _start_replica(postgres_database.url, provider.url) for _ in range(2)]
    try:
        urls = [url for _, url in replicas]
        results = await asyncio.gather(*(post(urls[i % 2], "shared-run") for i in range(20)))
    finally:
        for process, _ in replicas:
            process.terminate()
            process.communicate(timeout=10)  # waits, and closes the stderr pipe
    assert sorted(s for s, _, _ in results).count(200) == 5
    assert len(provider.received) == 5
    assert all(json.loads(r.body)["messages"] for r in provider.received)


def _fingerprint(database_url: str, key: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "key-fingerprint", "--database-url", database_url],
        input=key + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


async def test_per_key_budget_and_pairing_mode(make_gateway, database_url: str) -> None:  # type: ignore[no-untyped-def]
    team_key = "sk-team-a-0123456789abcdef"
    await make_gateway()  # the gateway's first start makes the database and its secret
    fingerprint = _fingerprint(database_url, team_key)
    assert len(fingerprint) == 32 and team_key not in fingerprint
    gw: Gateway = await make_gateway(
        keys=[{"key_fingerprint": fingerprint, "max_steps": 1, "pairing": "observe"}]
    )
    gw.provider.queue(*(completion(str(i)) for i in range(4)))
    team = {"Authorization": f"Bearer {team_key}"}
    assert (await post(gw.url, "team-run", **team))[0] == 200
    status, body, _ = await post(gw.url, "team-run", **team)
    assert status == 429 and body["error"]["code"] == "step_budget_exceeded"
    for _ in range(2):  # another key keeps the (unlimited) defaults
        assert (await post(gw.url, "other-run"))[0] == 200
    orphan = chat_request(tool_message("x", "?"))
    async with aiohttp.ClientSession() as s:
        async with s.post(gw.openai_base + "/chat/completions", json=orphan, headers=team) as r:
            assert r.status == 200  # observe for this key: forwarded
        async with s.post(
            gw.openai_base + "/chat/completions",
            json=orphan,
            headers={"Authorization": "Bearer sk-other"},
        ) as r:
            assert r.status == 400  # enforce for everyone else
