"""Cassettes of the requests real agent CLIs sent (Claude Code on Messages, Codex on
Responses, qwen-code and opencode on Chat Completions): each step's rebuilt body is
JSON-equal to what the provider received, up to the contract's allowances (`wire_equal`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.provider import Reply
from tests.fakes.scripted_agent import AgentModel
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.wire_equal import as_recorded, differences

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agents"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
# Consecutive requests of one run: the later one's history goes on from the earlier's.
RUNS = [
    (name, f"{name[:-1]}{int(name[-1]) + 1}")
    for name in NAMES
    if f"{name[:-1]}{int(name[-1]) + 1}" in NAMES and name != "opencode-chat-1"
]
_DROPPED_HEADERS = {"authorization", "x-api-key", "content-length", "host", "accept-encoding"}


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _history_field(body: dict[str, Any]) -> str:
    return "input" if "input" in body else "messages"


async def _send(gw: Gateway, fixture: dict[str, Any], body: dict[str, Any], trace: str) -> None:
    headers = {k: v for k, v in fixture["headers"].items() if k.lower() not in _DROPPED_HEADERS}
    headers["X-Loopwatch-Trace-Id"] = trace
    timeout = aiohttp.ClientTimeout(total=30)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(gw.url + fixture["path"], json=body, headers=headers) as response,
    ):
        await response.read()
        assert response.status == 200, await response.text()


async def _cassette_bodies(gw: Gateway, trace: str) -> list[Any]:
    await gw.flush()
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.get(f"{gw.url}/api/traces/{trace}/cassette") as response,
    ):
        assert response.status == 200
        lines = [json.loads(line) for line in (await response.text()).splitlines()]
    return [line["request"]["body"] for line in lines[1:]]


def _assert_equal(rebuilt: list[Any], sent: list[Any]) -> None:
    assert len(rebuilt) == len(sent)
    for step, (body, received) in enumerate(zip(rebuilt, sent, strict=True), 1):
        expected = as_recorded(received, _history_field(received))
        assert differences(body, expected) == [], f"step {step}"


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("name", NAMES)
async def test_each_agent_request_comes_back_as_sent(
    make_gateway: GatewayFactory, name: str, stream: bool
) -> None:
    gw = await make_gateway()
    gw.provider.responder = AgentModel()
    fixture = _fixture(name)
    await _send(gw, fixture, {**fixture["body"], "stream": stream}, f"agent-{name}")
    sent = [r.json() for r in gw.provider.received]
    _assert_equal(await _cassette_bodies(gw, f"agent-{name}"), sent)


@pytest.mark.parametrize(("first", "second"), RUNS, ids=[f"{a}+{b[-1]}" for a, b in RUNS])
async def test_an_agent_run_comes_back_step_by_step(
    make_gateway: GatewayFactory, first: str, second: str
) -> None:
    """The provider answers the first request with the turn the second echoes."""
    gw = await make_gateway()
    one, two = _fixture(first), _fixture(second)
    field = _history_field(one["body"])
    gw.provider.queue(_answer(field, two["body"][field][len(one["body"][field]) :]))
    gw.provider.responder = AgentModel()  # answers the second request
    trace = f"run-{first}"
    await _send(gw, one, {**one["body"], "stream": False}, trace)
    await _send(gw, two, {**two["body"], "stream": False}, trace)
    sent = [r.json() for r in gw.provider.received]
    _assert_equal(await _cassette_bodies(gw, trace), sent)


def _answer(field: str, after: list[Any]) -> Reply:
    """A whole answer made of the turn a later request echoes back."""
    if field == "input":  # Responses: the echoed output items
        output = [e for e in after if not str(e.get("type", "")).endswith("_output")]
        return Reply(body=_response(output))
    echoed = after[0]
    if (
        field == "messages"
        and "tool_calls" not in echoed
        and isinstance(echoed.get("content"), list)
    ):
        stop = (
            "tool_use"
            if any(b.get("type") == "tool_use" for b in echoed["content"])
            else "end_turn"
        )
        return Reply(
            body={
                "id": "msg_run",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": echoed["content"],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )
    finish = "tool_calls" if echoed.get("tool_calls") else "stop"
    return Reply(
        body={
            "id": "chatcmpl-run",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": echoed, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


def _response(output: list[Any]) -> dict[str, Any]:
    return {
        "id": "resp_run",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "m",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }
