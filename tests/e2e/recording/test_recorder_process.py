"""The recorder process: it stores what the gateway spools, and comes back if it dies."""

from __future__ import annotations

import os
import signal

import aiohttp
import pytest

from tests.factories import chat_request
from tests.fakes.chat import completion
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite


async def _ask(base: str, text: str) -> None:
    body = chat_request(text)
    async with (
        aiohttp.ClientSession() as session,
        session.post(base + "/chat/completions", json=body) as r,
    ):
        assert r.status == 200


async def test_a_killed_recorder_process_is_replaced_and_loses_nothing(
    make_gateway: GatewayFactory,
) -> None:
    gw = await make_gateway(recorder="process")
    gw.provider.queue(*(completion(f"answer {i}") for i in range(3)))
    await _ask(gw.openai_base, "first")
    await gw.flush()
    assert len(await gw.traces()) == 1
    pid = _recorder_pid()
    os.kill(pid, signal.SIGKILL)
    await _ask(gw.openai_base, "while it is down")  # spooled; stored once it is back
    await _ask(gw.openai_base, "later")
    await gw.deps.recorder.flush(timeout=60)
    assert len(await gw.traces()) == 3
    assert _recorder_pid() != pid


def _recorder_pid() -> int:
    """The child of this test process that runs the recorder."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except OSError:
            continue
        if int(fields[1]) == me and b"gateway.recording.process" in command:
            return int(entry)
    raise AssertionError("no recorder process")
