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
from tests.ui.scenarios import (
    IMG,
    SCRIPT,
    SEARCH_FOUND,
    SEARCH_ID,
    Runs,
    all_runs,
    refused_run,
    retry_run,
    sdk,
    search_run,
)


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
    step = (await gateway.trace(runs.weather))["steps"][0]["id"]
    pages = ["/", f"/traces/{runs.weather}", "/violations", "/login", "/sessions"]
    pages += [f"/traces/{runs.weather}/steps/{step}", "/nowhere-trace"]
    for path in pages:
        page = await fetch(gateway, path if path != "/nowhere-trace" else "/traces/nope")
        csp = page.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "style-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        assert page.headers["Referrer-Policy"] == "same-origin"
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
    # Which traces; their newest-first order is the list's own test (runs end close together).
    assert sorted(row_ids(page)) == sorted(getattr(runs, name) for name in expected)


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
    at_step = f"/traces/{runs.weather}#step-{step['id']}"
    hits = {
        runs.weather: f"/traces/{runs.weather}",
        step["id"]: at_step,
        "chatcmpl-weather-2": at_step,
        "req_chatcmpl-weather-2": at_step,
    }
    for query, target in hits.items():
        page = await fetch(gateway, "/", q=query)
        assert (page.status, page.location) == (302, target), query
    # Prefixes, call ids and words are searched: the list shows the traces holding them.
    assert (await fetch(gateway, "/", q="ui-weat")).location == f"/traces/{runs.weather}"
    for query in (step["id"][:-6], "call_tokyo", "get_weather"):
        page = await fetch(gateway, "/", q=query)
        assert page.status == 200 and runs.weather in page.text, query
    missing = await fetch(gateway, "/", q="no-such-id")
    assert missing.status == 200 and runs.weather not in missing.text


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
    rows = text[text.index('id="rows"') :]
    assert rows.count('<rect class="k-stream"') == 2  # one model bar per step
    assert rows.count('<rect class="k-tool"') == 1  # both calls answered by step 2: one span
    assert 'class="badge stop-ok"' in text and ">tool_calls<" in text
    assert "You are a weather agent." in text and "Paris is sunny and Tokyo is rainy." in text
    assert (
        'data-status="completed"' in text and "Completed: the last step stopped completed." in text
    )
    assert "Weather in Paris and Tokyo?</span></h1>" in text  # the first user message as title
    assert "tools and agent" in text and "cost not recorded" not in text  # priced now


def _anchors_of(text: str, call_id: str) -> tuple[str, str]:
    pattern = (
        r'<li class="item k-(tool_call|tool_result)[^"]*" id="([^"]+)"[^>]*>\s*'
        r'<div class="item-head">(?:(?!</div>).)*?' + call_id
    )
    found = re.findall(pattern, text, re.S)
    kinds = dict(found)
    return kinds["tool_call"], kinds["tool_result"]


async def test_trace_page_shows_violations_and_budgets(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, f"/traces/{runs.truncated}")
    assert 'id="violations"' in page.text and page.text.count("truncated tool call") >= 2
    assert "no result recorded" in page.text and "arguments are not valid JSON" in page.text
    assert ">length<" in page.text and 'data-status="failed"' in page.text
    assert "Failed: the last step stopped length" in page.text
    budget = await fetch(gateway, f"/traces/{runs.budget}")
    assert 'class="row refusal has-v"' in budget.text and "step budget exceeded" in budget.text
    assert 'aria-label="Step budget: 1 of 1"' in budget.text
    assert "1 / 1" in budget.text and 'data-status="budget_exceeded"' in budget.text
    assert "Stopped by its step budget" in budget.text


async def test_a_retried_step_and_the_result_that_answers_the_retry(gateway: Gateway) -> None:
    trace_id = await retry_run(gateway)
    trace = await gateway.trace(trace_id)
    assert [s["stop_reason"] for s in trace["steps"]] == [
        "tool_calls",
        "interrupted",
        "tool_calls",
        "completed",
    ]
    text = (await fetch(gateway, f"/traces/{trace_id}")).text
    step3 = trace["steps"][2]["id"]
    assert f'href="#s3-out-0" data-step="{step3}">↑ call · step 3</a>' in text  # step 4's result
    assert ">cut off, retried at step 3<" in text and ">retry of step 2<" in text
    assert '<span class="badge retry">retry of 2</span>' in text
    assert '<span class="badge retry">retried at 3</span>' in text
    assert "result ↓ step 4" in text and 'data-status="completed"' in text


async def test_a_web_search_the_provider_ran_reads_as_run_and_answered(
    gateway: Gateway,
) -> None:
    trace_id = await search_run(gateway)
    text = (await fetch(gateway, f"/traces/{trace_id}")).text
    call = text[text.index('id="s1-out-0"') :]
    call = call[: call.index("</li>")]
    assert f'<code class="call-id">{SEARCH_ID}</code>' in call
    assert "ran by the provider</span>" in call and ">result ↓</a>" in call
    result = text[text.index('id="s1-out-1"') :]
    assert SEARCH_FOUND in result[: result.index("</li>")]
    assert 'data-status="completed"' in text
    assert "Completed: the last step stopped completed." in text
    for owed in ("never answered", "awaiting results", "no result recorded", "k-unanswered"):
        assert owed not in text, owed
    listing = await fetch(gateway, "/")
    row = listing.text[listing.text.index(f'data-id="{trace_id}"') :]
    assert 'data-status="completed"' in row[: row.index("</tr>")]


async def test_a_refused_request_is_a_row_that_opens(gateway: Gateway) -> None:
    trace_id = await refused_run(gateway)
    trace = await gateway.trace(trace_id)
    violation = trace["violations"][0]
    text = (await fetch(gateway, f"/traces/{trace_id}")).text
    row = text[text.index(f'id="refusal-{violation["id"]}"') :]
    row = row[: row.index("</details>")]
    assert "missing tool result" in row and "call_b" in row and violation["detail"] in row
    assert 'data-status="refused"' in text and "Refused: the last request broke" in text
    assert f'href="#refusal-{violation["id"]}">refused request</a>' in text
    listing = await fetch(gateway, "/violations")
    assert f'href="/traces/{trace_id}#refusal-{violation["id"]}"' in listing.text


async def test_violations_page(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, "/violations")
    kinds = re.findall(r'<span class="badge violation" title="([a-z_]+)"', page.text)
    assert kinds[:2] == ["step_budget_exceeded", "truncated_tool_call"]  # newest first
    trace = await gateway.trace(runs.truncated)
    assert f'href="/traces/{runs.truncated}#step-{trace["steps"][0]["id"]}"' in page.text
    budget = await gateway.trace(runs.budget)
    refusal = f"#refusal-{budget['violations'][0]['id']}"
    assert f'href="/traces/{runs.budget}{refusal}"' in page.text
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


async def test_a_long_text_is_collapsed_to_its_head_and_tail(gateway: Gateway) -> None:
    lines = "\n".join(f"word {n}" for n in range(400))
    gateway.provider.queue(completion(lines))
    async with sdk(gateway, **{"X-Loopwatch-Trace-Id": "long"}) as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "talk"}]
        )
    page = await fetch(gateway, "/traces/long")
    assert '<details class="more">' in page.text
    assert f"show all · {len(lines)} characters" in page.text and "… 388 lines …" in page.text
    summary = page.text[page.text.index('<details class="more">') :]
    summary = summary[: summary.index("</summary>")]
    assert "word 0\nword 1" in summary and "word 398\nword 399" in summary


async def test_list_rows_say_how_runs_ended_and_what_they_were(
    gateway: Gateway, runs: Runs
) -> None:
    retried = await retry_run(gateway)
    refused = await refused_run(gateway)
    page = await fetch(gateway, "/")
    statuses = dict(re.findall(r'<tr data-id="([^"]+)".*?data-status="([a-z_]+)"', page.text, re.S))
    assert statuses == {
        refused: "refused",
        retried: "completed",
        runs.payload: "completed",
        runs.budget: "budget_exceeded",
        runs.truncated: "failed",
        runs.weather: "completed",
    }
    assert ">over budget<" in page.text and ">failed<" in page.text
    assert '<span class="run-title">Weather in Paris and Tokyo?</span>' in page.text
    assert '<span class="id-tail">ui-weather</span>' in page.text  # short ids in full
    assert re.search(r'data-label="Duration" class="num">\d+ ms<', page.text)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": "failed"}, ["truncated"]),
        ({"status": "completed", "model": "MINI"}, []),
        ({"model": "4O-MI"}, ["truncated"]),  # part of a name, any case
        ({"any_violation": "1"}, ["budget", "truncated"]),
        ({"session": "nobody"}, []),
        ({"since": "2000-01-01T00:00", "until": "2000-01-02T00:00"}, []),
        ({"since": "2000-01-01T00:00"}, ["payload", "budget", "truncated", "weather"]),
    ],
)
async def test_list_filters_of_the_second_release(
    gateway: Gateway, runs: Runs, params: dict[str, str], expected: list[str]
) -> None:
    page = await fetch(gateway, "/", **params)
    # Which traces; their newest-first order is the list's own test (runs end close together).
    assert sorted(row_ids(page)) == sorted(getattr(runs, name) for name in expected)


async def test_list_sorts_by_steps_and_duration(gateway: Gateway, runs: Runs) -> None:
    by_steps = row_ids(await fetch(gateway, "/", sort="steps"))
    assert by_steps[0] == runs.weather  # the only two-step run
    page = await fetch(gateway, "/", sort="duration", limit="2")
    assert (
        len(row_ids(page)) == 2 and 'aria-sort="descending"><a href="/?sort=duration">' in page.text
    )
    older = html.unescape(re.search(r'href="([^"]+)" rel="next"', page.text)[1])  # type: ignore[index]
    assert "sort=duration" in older and "cursor=" in older
    rest = row_ids(await fetch(gateway, older))
    assert len(rest) == 2 and not set(rest) & set(row_ids(page))
    assert row_ids(await fetch(gateway, "/", sort="colour")) == row_ids(await fetch(gateway, "/"))


async def test_sessions_page_without_sessions(gateway: Gateway, runs: Runs) -> None:
    page = await fetch(gateway, "/sessions")
    assert page.status == 200 and "No sessions recorded" in page.text
    assert "X-Loopwatch-Session-Id" in page.text
    assert page.headers["Content-Security-Policy"] and 'aria-current="page">Sessions' in page.text
