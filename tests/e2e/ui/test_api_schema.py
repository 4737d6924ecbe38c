"""Every documented read API route on a live gateway over the demo's runs: each answer,
errors included, is what /api/openapi.json says it is."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.e2e.ui.read_api_schema import ADMIN_TOKEN, AUTH, validate
from tests.processes import Served, serving

pytestmark = pytest.mark.sqlite


async def _get(
    served: Served, path: str, headers: dict[str, str] = AUTH, **params: str
) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=30)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(served.url + path, headers=headers, params=params) as r,
    ):
        return r.status, await r.text()


async def test_every_answer_matches_the_document(demo_store: str) -> None:
    async with serving(LOOPWATCH_DATABASE_URL=demo_store, LOOPWATCH_ADMIN_TOKEN=ADMIN_TOKEN) as gw:
        status, text = await _get(gw, "/api/openapi.json")
        assert status == 200
        document = json.loads(text)
        listed = json.loads((await _get(gw, "/api/traces", include_children="true"))[1])
        trace_ids = [trace["id"] for trace in listed["traces"]]
        assert len(trace_ids) >= 10  # the demo's runs and sub-agents
        checked: dict[str, int] = {}
        reads = {path for path, methods in document["paths"].items() if "get" in methods}
        for path in sorted(reads):
            for concrete in [path.replace("{trace_id}", t) for t in trace_ids] or [path]:
                status, text = await _get(gw, concrete)
                assert status == 200, (concrete, text)
                for body in _bodies(path, text):
                    validate(document, path, 200, body)
                checked[path] = checked.get(path, 0) + 1
        assert set(checked) == reads
        # The one route that is no read: its answers are held by tests/e2e/ui/test_fork.py.
        assert set(document["paths"]) - reads == {"/api/traces/{trace_id}/fork"}


def _bodies(path: str, text: str) -> list[Any]:
    if path.endswith("/cassette"):  # JSON Lines: each line is checked
        return [json.loads(line) for line in text.splitlines()]
    return [json.loads(text)]


async def test_errors_come_in_the_documented_shape(demo_store: str) -> None:
    async with serving(LOOPWATCH_DATABASE_URL=demo_store, LOOPWATCH_ADMIN_TOKEN=ADMIN_TOKEN) as gw:
        document = json.loads((await _get(gw, "/api/openapi.json"))[1])
        assert document["security"]  # the token is needed, and the document says so
        cases = [
            ("/api/traces", {"limit": "0"}, AUTH, 400),
            ("/api/traces", {"since": "yesterday"}, AUTH, 400),
            ("/api/traces", {"limit": "²"}, AUTH, 400),  # a digit to str, not to int
            ("/api/traces", {"since": "9999-12-31T23:59:59-23:59"}, AUTH, 400),  # past 9999
            ("/api/traces", {"until": "0001-01-01T00:00:00+14:00"}, AUTH, 400),  # before 1
            ("/api/traces", {"cursor": "not-a-cursor"}, AUTH, 400),
            ("/api/traces/{trace_id}", {"steps_limit": "9999"}, AUTH, 400),
            ("/api/mcp/executions", {"join": "maybe"}, AUTH, 400),
            ("/api/mcp/executions", {"limit": "²"}, AUTH, 400),
            ("/api/traces/{trace_id}", {}, AUTH, 404),
            ("/api/traces/{trace_id}/cassette", {}, AUTH, 404),
            ("/api/traces", {}, {}, 401),
            ("/api/openapi.json", {}, {"Authorization": "Bearer wrong-token-0123456"}, 401),
        ]
        for path, params, headers, expected in cases:
            status, text = await _get(gw, path.replace("{trace_id}", "tr-none"), headers, **params)
            assert status == expected, (path, params, text)
            validate(document, path, expected, json.loads(text))
