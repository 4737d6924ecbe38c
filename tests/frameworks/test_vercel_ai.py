"""The Vercel AI SDK (node) through the gateway: @ai-sdk/openai on its default Responses API
and on Chat Completions, and @ai-sdk/anthropic, with generateText and streamText.

On the Responses API the SDK sends `store: true` and echoes earlier reasoning (and text that
follows reasoning) as `{"type": "item_reference", "id": "rs_…"}`: the provider resolves them
from what it stored. A small node script (node/run.mjs) does each run and prints the answer.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.scripted import bodies
from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    assert_one_clean_trace,
    time_tool,
    tool_arguments,
    weather_tool,
)
from tests.harness import Gateway

NODE_PROJECT = Path(__file__).parent / "node"


def _node_problem() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_PROJECT / "node_modules" / "ai").is_dir():
        return "no node_modules: run `npm ci` in tests/frameworks/node"
    return None


pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.skipif(_node_problem() is not None, reason=str(_node_problem())),
]

MODES: dict[str, tuple[str, str]] = {  # mode: (model, protocol)
    "openai": ("gpt-5", "responses"),
    "openai-chat": ("gpt-4.1", "chat"),
    "anthropic": ("claude-sonnet-4-6", "messages"),
}


async def run(gw: Gateway, mode: str, *, stream: bool) -> dict[str, Any]:
    model, _ = MODES[mode]
    config = {
        "provider": mode,
        "stream": stream,
        "baseURL": gw.openai_base,
        "model": model,
        "question": QUESTION,
        "instructions": INSTRUCTIONS,
        "results": {"get_weather": weather_tool("{city}"), "get_time": time_tool("{city}")},
    }
    node = await asyncio.create_subprocess_exec(
        "node",
        str(NODE_PROJECT / "run.mjs"),
        json.dumps(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(node.communicate(), timeout=120)
    assert node.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("mode", list(MODES))
async def test_agent_run_is_one_clean_trace(
    gateway: Gateway, mode: str, stream: bool, steps: int
) -> None:
    result = await run(gateway, mode, stream=stream)
    assert (result["text"], result["steps"]) == (EXPECTED_ANSWER, steps)
    trace = await assert_one_clean_trace(
        gateway, steps=steps, protocol=MODES[mode][1], stream=stream
    )
    assert tool_arguments(trace) == EXPECTED_CALLS


async def test_responses_echo_reasoning_by_item_reference(gateway: Gateway) -> None:
    """What the openai mode stands for, as the SDK sends it."""
    await run(gateway, "openai", stream=False)
    later = bodies(gateway.provider.received, "/v1/responses")[1:]
    assert later and all(body.get("store", True) for body in later)
    for body in later:
        references = [i for i in body["input"] if i.get("type") == "item_reference"]
        assert references and all(i["id"].startswith("rs_") for i in references)
