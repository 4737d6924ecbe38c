"""Pages rendered over real HTTP from traces made through the gateway, on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from tests.fakes.chat import completion
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401
from tests.ui.scenarios import IMG, SCRIPT, Runs, all_runs, sdk


@dataclass
class Page:
    status: int
    headers: Any
    text: str
    location: str | None = None


async def fetch(gw: Gateway, path: str, **params: str) -> Page:
    await gw.flush()
    async with (
        aiohttp.ClientSession() as session,
        session.get(gw.url + path, params=params, allow_redirects=False) as r,
    ):
        return Page(r.status, r.headers, await r.text(), r.headers.get("Location"))


def row_ids(page: Page) -> list[str]:
    return re.findall(r'<tr data-id="([^"]+)"', page.text)


@pytest.fixture
async def runs(gateway: Gateway) -> Runs:
    return await all_runs(gateway)


async def test_empty_list_tells_a_new_user_what_to_do(gateway: Gateway) -> None:
    page = await fetch(gateway, "/")
    assert page.status == 200
    assert f"export OPENAI_BASE_URL={gateway.url}/v1" in page.text
    assert "loopwatch demo" in page.text
    violations = await fetch(gateway, "/violations")
    assert "No violations recorded" in violations.text


async def test_every_page_sends_security_headers(gateway: Gateway, runs: Runs) -> None:
    for path in ("/", f"/traces/{runs.weather}", "/violations", "/login", "/nowhere-trace"):
        page = await fetch(gateway, path if path != "/nowhere-trace" else "/traces/nope")
        csp = page.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "style-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        assert page.headers["Referrer-Policy"] == "no-referrer"
        assert "<script>" not in page.text and "style=" not in page.text  # no inline code
    static = await fetch(gateway, "/static/app.css")
    assert static.status == 200 and static.headers["X-Content-Type-Options"] == "nosniff"


async def test_list_shows_traces_newest_first(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, "/")
    listed = [trace["id"] for trace in await gateway.traces()]  # the read API's order
    assert row_ids(page) == listed
    assert sorted(listed) == sorted([runs.payload, runs.budget, runs.truncated, runs.weather])
    weather_row = page.text[page.text.index(f'data-id="{runs.weather}"') :]
    weather_row = weather_row[: weather_row.index("</tr>")]
    assert "gpt-4o" in weather_row and ">2<" in weather_row  # model, steps
    assert "completed" in weather_row and "none" in weather_row  # last stop, no violations
    assert "truncated tool call" in page.text and "step budget exceeded" in page.text
    assert 'data-poll="/api/traces?limit=1"' in page.text


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"violation": "truncated_tool_call"}, ["truncated"]),
        ({"violation": "step_budget_exceeded"}, ["budget"]),
        ({"status": "budget_exceeded"}, ["budget"]),
        ({"model": "gpt-4o-mini"}, ["truncated"]),
        ({"range": "15m", "violation": "truncated_tool_call"}, ["truncated"]),
    ],
)
async def test_list_filters(
    gateway: Gateway,
    runs: Runs,
    params: dict[str, str],
    expected: list[str],
) -> None:
    page = await fetch(gateway, "/", **params)
    assert row_ids(page) == [getattr(runs, name) for name in expected]


async def test_list_filter_without_match_and_pagination(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, "/", violation="duplicate_call_id")
    assert "No traces match these filters." in page.text and "OPENAI_BASE_URL" not in page.text
    first = await fetch(gateway, "/", limit="3")
    assert len(row_ids(first)) == 3
    older = html.unescape(re.search(r'href="([^"]+)" rel="next"', first.text)[1])  # type: ignore[index]
    second = await fetch(gateway, older)
    assert row_ids(second) == [runs.weather]
    assert "data-poll" not in second.text  # only the newest page updates itself
    assert (await fetch(gateway, "/", cursor="garbage")).status == 400


async def test_search_redirects_to_the_trace(gateway: Gateway, runs: Runs) -> None:
    trace = await gateway.trace(runs.weather)
    step = trace["steps"][1]
    hits = {
        runs.weather: f"/traces/{runs.weather}",
        step["id"]: f"/traces/{runs.weather}#step-{step['id']}",
        "chatcmpl-weather-2": f"/traces/{runs.weather}#step-{step['id']}",
        "req_chatcmpl-weather-2": f"/traces/{runs.weather}#step-{step['id']}",
    }
    for query, target in hits.items():
        page = await fetch(gateway, "/", q=query)
        assert (page.status, page.location) == (302, target), query
    missing = await fetch(gateway, "/", q="no-such-id")
    assert missing.status == 200 and "Nothing recorded has the id" in missing.text


async def test_trace_page_reads_the_loop(gateway: Gateway, runs: Runs) -> None:
    trace = await gateway.trace(runs.weather)
    page = await fetch(gateway, f"/traces/{runs.weather}")
    text = page.text
    assert page.status == 200
    for step in trace["steps"]:
        assert f'id="step-{step["id"]}"' in text
        assert f'data-copy="{step["provider_request_id"]}"' in text
        assert f'data-copy="{step["response_id"]}"' in text
    # Each tool call links to its result and back.
    for call_id in ("call_paris", "call_tokyo"):
        call_anchor, result_anchor = _anchors_of(text, call_id)
        assert f'href="#{result_anchor}"' in text and f'href="#{call_anchor}"' in text
    assert "&#34;city&#34;: &#34;Paris&#34;" in text  # pretty-printed, escaped arguments
    assert "reasoning · 12 tokens" in text
    assert "I should look up" not in text  # reasoning text is never shown (nor stored)
    assert text.count('<rect class="k-stream"') == 2  # one waterfall bar per step
    assert 'class="badge stop-ok"' in text and ">tool_calls<" in text
    assert "You are a weather agent." in text and "Paris is sunny and Tokyo is rainy." in text


def _anchors_of(text: str, call_id: str) -> tuple[str, str]:
    pattern = (
        r'<li class="item k-(tool_call|tool_result)[^"]*" id="([^"]+)">\s*'
        r'<div class="item-head">(?:(?!</div>).)*?' + call_id
    )
    found = re.findall(pattern, text, re.S)
    kinds = dict(found)
    return kinds["tool_call"], kinds["tool_result"]


async def test_trace_page_shows_violations_and_budgets(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, f"/traces/{runs.truncated}")
    assert 'id="violations"' in page.text and page.text.count("truncated tool call") >= 2
    assert "no result recorded" in page.text and "arguments are not valid JSON" in page.text
    assert ">length<" in page.text
    budget = await fetch(gateway, f"/traces/{runs.budget}")
    assert "refused request, no step" in budget.text
    assert 'aria-label="Step budget: 1 of 1"' in budget.text
    assert "1 / 1" in budget.text


async def test_violations_page(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, "/violations")
    kinds = re.findall(r'<span class="badge violation" title="([a-z_]+)"', page.text)
    assert kinds[:2] == ["step_budget_exceeded", "truncated_tool_call"]  # newest first
    trace = await gateway.trace(runs.truncated)
    assert f'href="/traces/{runs.truncated}#step-{trace["steps"][0]["id"]}"' in page.text
    assert f'href="/traces/{runs.budget}#violations"' in page.text
    only = await fetch(gateway, "/violations", kind="truncated_tool_call")
    assert "step_budget_exceeded" not in re.sub(r"<select.*?</select>", "", only.text, flags=re.S)


async def test_unknown_trace_is_a_404_page(gateway: Gateway) -> None:
    page = await fetch(gateway, "/traces/does-not-exist")
    assert page.status == 404 and "No trace has this id" in page.text
    assert page.headers["Content-Type"].startswith("text/html")


async def test_html_in_model_and_user_text_shows_as_text(gateway: Gateway, runs: Runs) -> None:
    for path in (f"/traces/{runs.payload}", "/", "/?model=x"):
        text = (await fetch(gateway, path)).text
        assert SCRIPT not in text and "<img src=x" not in text
    text = (await fetch(gateway, f"/traces/{runs.payload}")).text
    assert html.escape(SCRIPT) in text and html.escape(IMG) in text
    assert text.count(html.escape(SCRIPT)) >= 2  # the user message and the model answer


async def test_a_long_text_is_collapsed(gateway: Gateway) -> None:
    gateway.provider.queue(completion("word " * 400))
    async with sdk(gateway, **{"X-Loopwatch-Trace-Id": "long"}) as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "talk"}]
        )
    page = await fetch(gateway, "/traces/long")
    assert '<details class="more">' in page.text and "show more · 2000 characters" in page.text
