"""Runs recorded through a live gateway for the trace MCP server's tests: one that fails (a
tool error, then the provider's 500), one that completes, one with an orphan tool result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai
import pytest

from tests.fakes.chat import call, completion, usage
from tests.fakes.provider import Reply
from tests.harness import Gateway
from tests.traffic import ORPHAN, agent_loop, post

FAILURE = "upstream overloaded: capacity exhausted"
TOOL_ERROR = "ERROR: config.yaml: no such file"


@dataclass(frozen=True)
class Seeded:
    failed: str  # the failed run's trace id
    completed: str
    orphan: str


async def failed_run(gateway: Gateway) -> str:
    """Step 1 asks for read_file (call_cfg1); step 2 sends its error back and the provider
    answers 500: the run fails at step 2."""
    gateway.provider.queue(
        completion(
            tool_calls=[call("call_cfg1", "read_file", {"path": "config.yaml"})],
            use=usage(40, 10),
        ),
        Reply(status=500, body={"error": {"message": FAILURE, "type": "server_error"}}),
    )
    messages: list[Any] = [{"role": "user", "content": "Deploy the service from config.yaml"}]
    async with openai.AsyncOpenAI(
        base_url=gateway.openai_base, api_key="sk-test", max_retries=0
    ) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)
        trace_id = raw.headers["X-Loopwatch-Trace-Id"]
        first = raw.parse().choices[0].message.model_dump(exclude_none=True)
        messages += [first, {"role": "tool", "tool_call_id": "call_cfg1", "content": TOOL_ERROR}]
        with pytest.raises(openai.InternalServerError):
            await sdk.chat.completions.create(model="gpt-4o", messages=messages)
    return trace_id


async def seed(gateway: Gateway) -> Seeded:
    failed = await failed_run(gateway)
    await agent_loop(gateway, stream=False)
    await post(gateway, ORPHAN)
    await gateway.flush()
    traces = {t["first_user_text"]: t["id"] for t in await gateway.traces()}
    return Seeded(failed, traces["Weather in Paris?"], traces["hi"])
