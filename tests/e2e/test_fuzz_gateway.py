"""Mutated real requests of every adapter through the whole gateway, over HTTP, against the
fake provider: never a 500; what the gateway answers itself is an error in the client's
protocol, a 400 for a body it cannot read; every request the provider received is a stored
step of the trace the client was told."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from tests.factories.mutations import PATHS, mutated_requests, readable, seed_requests
from tests.fakes import anthropic, responses
from tests.fakes.chat import completion
from tests.fakes.provider import Received, Reply
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

EXAMPLES = 150
TRACE_HEADER, STEP_HEADER = "X-Loopwatch-Trace-Id", "X-Loopwatch-Step-Id"


def mutated_cases() -> list[tuple[str, bytes]]:
    """A fixed list: hypothesis draws from a fixed seed, the same cases on every run."""
    found: list[tuple[str, bytes]] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=mutated_requests(seed_requests()))
    def collect(case: tuple[str, bytes]) -> None:
        found.append(case)

    collect()
    return found


def answer(received: Received) -> Reply:
    """Each protocol's plain answer: the step ends normally, whatever was asked."""
    if received.path.endswith("/messages"):
        return anthropic.reply(anthropic.message([anthropic.text("ok")]))
    if received.path.endswith("/responses"):
        return responses.reply(responses.response([responses.message("ok")]))
    return completion("ok")


def in_protocol(protocol: str, body: Any) -> bool:
    """The error shape the client's SDK reads."""
    if protocol == "messages":
        return body.get("type") == "error" and isinstance(body["error"].get("message"), str)
    error = body.get("error")
    return isinstance(error, dict) and {"message", "type", "code"} <= error.keys()


Sent = defaultdict[str, set[str]]  # trace id → the step ids the client was told


async def _send(
    url: str, session: aiohttp.ClientSession, sent: Sent, case: tuple[str, bytes]
) -> None:
    """One request; what the gateway answered itself is checked here."""
    protocol, raw = case
    headers = {"Content-Type": "application/json"}
    async with session.post(url + PATHS[protocol], data=raw, headers=headers) as r:
        status, text = r.status, await r.read()
        trace_id, step_id = r.headers.get(TRACE_HEADER), r.headers.get(STEP_HEADER)
    shown = f"{protocol} {raw[:300]!r}"
    assert status < 500, f"{status} for {shown}: {text[:300]!r}"
    assert trace_id is not None, shown
    if step_id is not None:  # forwarded: the provider's answer
        sent[trace_id].add(step_id)
        return
    assert status >= 400 and in_protocol(protocol, orjson.loads(text)), f"{shown}: {text!r}"
    if not readable(raw):
        assert status == 400, shown


async def test_mutated_requests_never_get_a_500_nor_lose_a_step(gateway: Gateway) -> None:
    gateway.provider.responder = answer
    sent: Sent = defaultdict(set)
    async with aiohttp.ClientSession() as session:
        for case in mutated_cases():
            await _send(gateway.url, session, sent, case)
    stored = 0
    for trace_id, step_ids in sent.items():  # flushed first: the recorder has drained
        steps = {step["id"] for step in (await gateway.trace(trace_id))["steps"]}
        assert step_ids <= steps, f"trace {trace_id} lost steps {step_ids - steps}"
        stored += len(steps)
    assert stored == sum(map(len, sent.values())) == len(gateway.provider.received) > 0
