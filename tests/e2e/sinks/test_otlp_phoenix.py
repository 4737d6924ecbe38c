"""End to end against a real OTLP backend: an agent run through the gateway lands in Arize
Phoenix (`phoenix serve` on a loopback port) and is read back through its REST API."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.sinks.otlp.ids import trace_id_of
from tests import harness
from tests.e2e.sinks.test_otlp import ASKED, CHAT_MODEL, redacting_of, sink_of
from tests.harness import GatewayFactory
from tests.traffic import agent_loop

provider = harness.provider
make_gateway = harness.make_gateway
pytestmark = [pytest.mark.phoenix, pytest.mark.sqlite]

STARTUP_SECONDS = 180.0  # first start creates its database and runs its migrations


ROOT = Path(__file__).resolve().parents[3]


def _phoenix() -> str | None:
    """`.ci/run` installs Phoenix in its own virtualenv (its pins clash with the test SDKs)."""
    beside = Path(sys.executable).with_name("phoenix")
    for candidate in (ROOT / ".venv-phoenix" / "bin" / "phoenix", beside):
        if candidate.exists():
            return str(candidate)
    return shutil.which("phoenix")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"phoenix serve exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 1):
                pass
            import urllib.request

            with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"phoenix serve did not answer in {STARTUP_SECONDS:.0f} s")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    command = _phoenix()
    if command is None:
        pytest.skip(
            "arize-phoenix is not installed: python3 -m venv .venv-phoenix && "
            ".venv-phoenix/bin/pip install -e '.[phoenix]' (as .ci/run does)"
        )
    workdir = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = workdir / "phoenix.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [command, "serve"], cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _spans(url: str, want: int) -> list[dict[str, Any]]:
    """Phoenix writes what it receives in the background: ask until all spans are there."""
    found: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(120):
            async with session.get(f"{url}/v1/projects/default/spans?limit=100") as answer:
                assert answer.status == 200, await answer.text()
                found = (await answer.json())["data"]
            if len(found) >= want:
                return found
            await asyncio.sleep(0.5)
    return found


async def test_an_agent_run_lands_in_phoenix(phoenix: str, make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(otlp_endpoint=phoenix, otlp_timeout=5)
    await agent_loop(gw, stream=True)
    assert await asyncio.to_thread(redacting_of(gw).flush)
    assert sink_of(gw).dropped_total == 0
    spans = sorted(await _spans(phoenix, 3), key=lambda s: s["start_time"])
    # Named by the model asked for (the GenAI conventions); the answering model is an attribute.
    assert [s["name"] for s in spans] == [
        f"chat {ASKED}",
        "execute_tool get_weather",
        f"chat {ASKED}",
    ]
    (trace,) = await gw.traces()
    otel_trace = f"{trace_id_of(trace['id']):032x}"
    assert {s["context"]["trace_id"] for s in spans} == {otel_trace}
    first, tool, second = spans
    # Phoenix reads the GenAI conventions into its own (OpenInference) kinds and sessions.
    assert first["span_kind"] == "LLM" and tool["span_kind"] == "TOOL"
    assert first["attributes"]["session.id"] == trace["id"]
    assert first["attributes"]["llm.token_count.prompt"] == 50
    assert first["attributes"]["gen_ai.response.model"] == CHAT_MODEL
    assert first["parent_id"] is None and tool["parent_id"] is None
    assert first["end_time"] == tool["start_time"] and tool["end_time"] == second["start_time"]
    attributes = first["attributes"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.conversation.id"] == trace["id"]
    assert attributes["gen_ai.usage.input_tokens"] == 50
    assert attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert tool["attributes"]["gen_ai.tool.call.id"] == "call_1"
    assert second["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
