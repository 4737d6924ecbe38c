"""llama-index's FunctionAgent with its OpenAI LLM (Chat Completions) through the gateway,
streamed (its default) and not: each run one clean trace.

llama-index-llms-openai pins openai<3, older than the SDK the rest of the suite drives, so it
lives in a virtualenv of its own (.venv-llamaindex, the `llamaindex` extra) and a small script
(llamaindex/run.py) does each run there and prints the answer and the calls that ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    assert_one_clean_trace,
    settled_status,
    time_tool,
    tool_arguments,
    weather_tool,
)
from tests.harness import Gateway

ROOT = Path(__file__).parents[2]
SCRIPT = Path(__file__).parent / "llamaindex" / "run.py"


def _python() -> Path | None:
    """The python of the virtualenv with llama-index, beside the suite's own or in the root."""
    for venv in (ROOT / ".venv-llamaindex", Path(sys.prefix).with_name(".venv-llamaindex")):
        if (venv / "bin" / "python").exists():
            return venv / "bin" / "python"
    return None


PYTHON = _python()
pytestmark = [
    pytest.mark.frameworks,
    pytest.mark.skipif(
        PYTHON is None,
        reason="llama-index is not installed: python3 -m venv .venv-llamaindex && "
        ".venv-llamaindex/bin/pip install -e '.[llamaindex]' (as .ci/run does)",
    ),
]


async def run(gw: Gateway, *, stream: bool) -> dict[str, Any]:
    config = {
        "baseURL": gw.openai_base,
        "model": "gpt-4.1",
        "stream": stream,
        "question": QUESTION,
        "instructions": INSTRUCTIONS,
        "results": {"get_weather": weather_tool("{city}"), "get_time": time_tool("{city}")},
    }
    # No key of this machine's environment reaches the run; llama-index sends no telemetry and
    # reads its tokenizer and NLTK data from files it ships.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    process = await asyncio.create_subprocess_exec(
        str(PYTHON),
        str(SCRIPT),
        json.dumps(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode()[-4000:]
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_function_agent_run_is_one_clean_trace(
    gateway: Gateway, stream: bool, steps: int
) -> None:
    result = await run(gateway, stream=stream)
    assert result["answer"] == EXPECTED_ANSWER
    assert sorted(map(tuple, result["calls"])) == sorted(EXPECTED_CALLS)
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol="chat", stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS
    assert await settled_status(gateway, trace["id"]) == "completed"
