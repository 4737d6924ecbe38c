"""The demo's runs as cassettes: every step's rebuilt request is a body the demo's provider
received, up to the contract's allowances (`tests.wire_equal`), streamed steps and whole."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.config import Settings
from gateway.demo import main as demo_main
from gateway.demo.provider import ScriptedProvider
from gateway.store.engine import make_engine
from gateway.store.read import queries
from gateway.ui.cassette import cassette_lines
from tests.wire_equal import as_recorded


class _Keeping(ScriptedProvider):
    """The demo's provider, keeping every body it is sent."""

    bodies: list[Any] = []

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(json.loads(await request.read()))
        return await super()._chat(request)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(json.loads(await request.read()))
        return await super()._messages(request)


def _trace_ids(engine: Any) -> list[str]:
    listed = queries.list_traces(engine, limit=50)["traces"]
    ids = [t["id"] for t in listed]
    for trace_id in list(ids):
        trace = queries.get_trace(engine, trace_id) or {}
        ids += [c["id"] for c in trace.get("children", [])]
    return ids


def _canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True)


def test_every_demo_step_comes_back_as_its_provider_received_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Keeping.bodies = []
    monkeypatch.setattr(demo_main, "ScriptedProvider", _Keeping)
    settings = Settings(host="127.0.0.1", port=0, database_url=f"sqlite:///{tmp_path}/d.db")
    asyncio.run(asyncio.wait_for(serve_demo_once(settings), timeout=60))
    engine = make_engine(settings.database_url)
    try:
        steps = [
            json.loads(line)
            for trace_id in _trace_ids(engine)
            for line in (cassette_lines(engine, trace_id, "test") or [])[1:]
        ]
    finally:
        engine.dispose()
    rebuilt = [s["request"]["body"] for s in steps if s["request"] is not None]
    assert {s["response"].get("headers", {}).get("content-type") for s in steps} >= {
        "text/event-stream",
        "application/json",
    }
    sent = [as_recorded(b, "messages") for b in _Keeping.bodies]
    assert sorted(map(_canonical, rebuilt)) == sorted(map(_canonical, sent))


async def serve_demo_once(settings: Settings) -> None:
    await demo_main.serve_demo(settings, once=True, out=io.StringIO())
