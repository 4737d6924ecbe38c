"""Violation webhooks: redacted, signed events reach a real receiving server, with retries and
drops."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from gateway.background import Background
from gateway.items import Violation, ViolationKind
from gateway.sinks.webhooks import WebhookSink, signature
from gateway.step import RefusalRecord
from tests import harness
from tests.e2e.sinks.test_otlp import redacting_of
from tests.harness import Gateway, GatewayFactory
from tests.traffic import ORPHAN, post, scrape, value

provider, make_gateway = harness.provider, harness.make_gateway

pytestmark = pytest.mark.sqlite
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


class Receiver:
    """A real HTTP server collecting events; the first `fail` deliveries get a 503."""

    def __init__(self, fail: int = 0) -> None:
        self.events: list[dict[str, Any]] = []
        self.attempts = 0
        self.fail = fail
        self.arrived = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_post("/hook", self._hook)

    async def _hook(self, request: web.Request) -> web.Response:
        self.attempts += 1
        if self.attempts <= self.fail:
            return web.Response(status=503)
        self.events.append(await request.json())
        self.arrived.set()
        return web.Response(status=204)


async def _receiver(aiohttp_server: Any, fail: int = 0) -> tuple[Receiver, str]:
    receiver = Receiver(fail)
    server = await aiohttp_server(receiver.app)
    return receiver, str(server.make_url("/hook"))


async def test_pairing_refusal_posts_a_redacted_event(
    aiohttp_server: Any, make_gateway: GatewayFactory
) -> None:
    receiver, url = await _receiver(aiohttp_server, fail=1)  # delivered on the retry
    gw: Gateway = await make_gateway(webhook_urls=(url,), public_url="https://lw.example/")
    body = {**ORPHAN, "messages": [*ORPHAN["messages"]]}
    body["messages"][1] = {**body["messages"][1], "tool_call_id": f"call_{SECRET}"}
    assert await post(gw, body, **{"X-Loopwatch-Trace-Id": "hooked"}) == 400
    await asyncio.wait_for(receiver.arrived.wait(), 10)
    [event] = receiver.events
    assert event["kind"] == "orphan_tool_result"
    assert event["trace_id"] == "hooked" and event["step_id"] is None
    assert event["enforced"] is True
    assert event["trace_url"] == "https://lw.example/traces/hooked"
    assert event["created_at"].startswith(str(datetime.now(UTC).year))
    assert "[REDACTED" in event["detail"], "the detail must be the redacted one"
    assert SECRET not in json.dumps(event)
    assert receiver.attempts == 2
    assert value(await scrape(gw), "loopwatch_webhook_dropped_total") == 0


async def test_unreachable_receiver_is_retried_then_counted(
    aiohttp_server: Any, make_gateway: GatewayFactory
) -> None:
    receiver, url = await _receiver(aiohttp_server, fail=100)
    gw: Gateway = await make_gateway(webhook_urls=(url,))
    sink = next(s for s in redacting_of(gw).exporters if isinstance(s, WebhookSink))
    sink._backoff_initial = 0.01  # the test's patience, not the production default
    assert await post(gw, ORPHAN) == 400
    for _ in range(200):
        if value(await scrape(gw), "loopwatch_webhook_dropped_total", reason="failed"):
            break
        await asyncio.sleep(0.05)
    assert receiver.attempts == 5  # bounded attempts
    assert value(await scrape(gw), "loopwatch_webhook_dropped_total", reason="failed") == 1


async def test_full_queue_drops_without_blocking(aiohttp_server: Any) -> None:
    receiver, url = await _receiver(aiohttp_server)
    drops: list[str] = []
    sink = WebhookSink((url,), queue_size=2, on_drop=drops.append)
    refusal = RefusalRecord(
        trace_id="t",
        created_at=datetime.now(UTC),
        violations=[Violation(ViolationKind.ORPHAN_TOOL_RESULT, "x")] * 5,
    )
    sink.request_refused(refusal)  # before start(): nothing drains the queue yet
    assert drops == ["queue_full"] * 3
    await sink.start(Background())
    await sink.close()
    assert len(receiver.events) == 2


async def test_logs_name_a_webhook_by_its_origin_only(
    aiohttp_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, url = await _receiver(aiohttp_server)
    hook = url.replace("/hook", "/services/T0/B0/HookSecretToken42")  # not found: given up
    dead = "http://127.0.0.1:9/services/T1/B1/HookSecretToken43"  # unreachable: retried
    sink = WebhookSink((hook, dead), attempts=2, backoff_initial=0.01)
    sink.request_refused(
        RefusalRecord("t", datetime.now(UTC), [Violation(ViolationKind.ORPHAN_TOOL_RESULT, "x")])
    )
    with caplog.at_level(logging.INFO, logger="gateway.sinks.webhooks"):
        await sink.start(Background())
        await sink.close()
    # The gateway's own lines only: the receiver's access log (another logger, shown when an
    # earlier test turned logging up) names the path it served, as any server's would.
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("gateway."))
    assert "not delivered" in ours and "unreachable" in ours
    assert "127.0.0.1" in ours and "HookSecretToken" not in ours


class VerifyingReceiver:
    """A receiver as its docs would write it: HMAC over the raw body, compared in constant
    time; a bad or missing signature gets a 401 and the event is not taken."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.events: list[dict[str, Any]] = []
        self.rejected = 0
        self.arrived = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_post("/hook", self._hook)

    async def _hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        expected = "sha256=" + hmac.new(self.secret, body, hashlib.sha256).hexdigest()
        given = request.headers.get("X-Loopwatch-Signature", "")
        self.arrived.set()
        if not hmac.compare_digest(expected, given):
            self.rejected += 1
            return web.Response(status=401)
        self.events.append(json.loads(body))
        return web.Response(status=204)


HOOK_SECRET = "whsec-0123456789abcdef0123"


async def test_events_are_signed_with_the_webhook_secret(
    aiohttp_server: Any, make_gateway: GatewayFactory
) -> None:
    receiver = VerifyingReceiver(HOOK_SECRET)
    url = str((await aiohttp_server(receiver.app)).make_url("/hook"))
    gw: Gateway = await make_gateway(webhook_urls=(url,), webhook_secret=HOOK_SECRET)
    assert await post(gw, ORPHAN, **{"X-Loopwatch-Trace-Id": "signed"}) == 400
    await asyncio.wait_for(receiver.arrived.wait(), 10)
    [event] = receiver.events
    assert receiver.rejected == 0
    assert event["kind"] == "orphan_tool_result" and event["trace_id"] == "signed"


@pytest.mark.parametrize("gateway_secret", [None, "another-secret-of-16-chars"])
async def test_a_receiver_refuses_unsigned_or_wrongly_signed_events(
    aiohttp_server: Any, make_gateway: GatewayFactory, gateway_secret: str | None
) -> None:
    receiver = VerifyingReceiver(HOOK_SECRET)
    url = str((await aiohttp_server(receiver.app)).make_url("/hook"))
    gw: Gateway = await make_gateway(webhook_urls=(url,), webhook_secret=gateway_secret)
    assert await post(gw, ORPHAN) == 400
    for _ in range(200):
        if value(await scrape(gw), "loopwatch_webhook_dropped_total", reason="failed"):
            break
        await asyncio.sleep(0.05)
    assert receiver.rejected == 1 and receiver.events == []  # a 401 is not retried
    assert value(await scrape(gw), "loopwatch_webhook_dropped_total", reason="failed") == 1


def test_signature_is_the_hmac_of_the_exact_body() -> None:
    body = b'{"kind": "orphan_tool_result"}'
    digest = hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert signature(HOOK_SECRET, body) == f"sha256={digest}"
    assert signature(HOOK_SECRET, body + b" ") != signature(HOOK_SECRET, body)


async def test_a_sub_agents_event_names_its_trees_root(
    aiohttp_server: Any, make_gateway: GatewayFactory
) -> None:
    receiver, url = await _receiver(aiohttp_server)
    gw: Gateway = await make_gateway(webhook_urls=(url,))
    headers = {"X-Loopwatch-Trace-Id": "sub-run", "X-Loopwatch-Parent-Trace-Id": "root-run"}
    assert await post(gw, ORPHAN, **headers) == 400
    await asyncio.wait_for(receiver.arrived.wait(), 10)
    [event] = receiver.events
    assert event["kind"] == "orphan_tool_result"
    assert (event["trace_id"], event["root_trace_id"]) == ("sub-run", "root-run")
