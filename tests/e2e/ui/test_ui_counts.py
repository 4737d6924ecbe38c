"""Through the gateway and back out of the viewer, on SQLite and PostgreSQL: the step budget
reads what the ledger counted, and a run whose first request was refused keeps its preview."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai

from tests.fakes.chat import call, completion
from tests.fakes.provider import Reply
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401
from tests.ui.scenarios import TOOLS, sdk

RATE_LIMITED = {"error": {"message": "slow down", "type": "rate_limit_error", "code": None}}


async def page(gw: Gateway, path: str) -> str:
    await gw.flush()
    async with aiohttp.ClientSession() as session, session.get(gw.url + path) as response:
        assert response.status == 200
        return await response.text()


async def test_retried_429s_take_nothing_from_the_step_budget(gateway: Gateway) -> None:
    """Each of three requests is rate-limited once and retried: six steps recorded, three
    counted by the budget of 3, and the run ends within it."""
    lookup = call("call_1", "get_weather", {"city": "Oslo"})
    second = call("call_2", "get_weather", {"city": "Rome"})
    answers = [
        completion(tool_calls=[lookup], response_id="r1"),
        completion(tool_calls=[second], response_id="r2"),
        completion("Oslo is cold, Rome is warm.", response_id="r3"),
    ]
    for answer in answers:
        gateway.provider.queue(Reply(status=429, body=RATE_LIMITED), answer)
    headers = {"X-Loopwatch-Trace-Id": "ui-rate-limited", "X-Loopwatch-Max-Steps": "3"}
    messages: list[Any] = [{"role": "user", "content": "Oslo and Rome?"}]
    async with sdk(gateway, **headers) as client:
        for result in ("cold", "warm", None):
            try:
                await client.chat.completions.create(model="gpt-4o", messages=messages)
            except openai.RateLimitError:  # the agent retries the same request
                reply = await client.chat.completions.create(model="gpt-4o", messages=messages)
            if result is not None:
                message = reply.choices[0].message.model_dump(exclude_none=True)
                call_id = message["tool_calls"][0]["id"]
                messages += [message, {"role": "tool", "tool_call_id": call_id, "content": result}]
    text = await page(gateway, "/traces/ui-rate-limited")
    assert (await gateway.trace("ui-rate-limited"))["step_count"] == 6
    assert '<span class="budget-value">3 / 3</span>' in text
    assert "3 failed attempts not counted" in text
    assert 'aria-label="Step budget: 3 of 3"' in text and 'class="meter over"' not in text
    assert 'data-status="completed"' in text


async def test_a_refused_first_request_keeps_its_preview(gateway: Gateway) -> None:
    """The first request carries a budget header the gateway cannot use: refused before the
    provider, its user turn stored with the refusal, and shown as the run's text."""
    headers = {"X-Loopwatch-Trace-Id": "ui-refused-first", "X-Loopwatch-Max-Steps": "many"}
    messages = [{"role": "user", "content": "Plan the database migration"}]
    async with sdk(gateway, **headers) as client:
        try:
            await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        except openai.BadRequestError:
            pass
        else:
            raise AssertionError("the budget header was not refused")
    listed = await page(gateway, "/")
    row = listed[listed.index('data-id="ui-refused-first"') :]
    assert "Plan the database migration" in row[: row.index("</tr>")]
    trace = await page(gateway, "/traces/ui-refused-first")
    title = trace[trace.index('<h1 class="trace-title">') :]
    assert '<span class="title-text">Plan the database migration</span>' in title[:200]
