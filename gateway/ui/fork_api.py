"""`POST /api/traces/{id}/fork`: step N's request, rebuilt and changed (`gateway.ui.fork`),
sent to this gateway's own model endpoint, so that its checks, budgets and recording apply;
a signed header makes its step the first of a new trace, the fork of step N."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from aiohttp import web

from gateway import ids, jsoncodec
from gateway.checks.budgets import COST_HEADER, DURATION_HEADER, STEPS_HEADER, TOKENS_HEADER
from gateway.errors import BadRequest, NotFound
from gateway.protocols.registry import ADAPTERS
from gateway.protocols.request_facts import provider_key
from gateway.store.read import queries
from gateway.ui.answer import dumped, json_answer
from gateway.ui.api_models.forks import ForkAnswer
from gateway.ui.deps import ReadDeps
from gateway.ui.fork import fork_asked, plan

# How long the answer waits for the fork's step to be stored before it gives a link.
STORED_WAIT_S = 10.0
_POLL_S = 0.05
_TRACE_HEADER = "X-Loopwatch-Trace-Id"
_STEP_HEADER = "X-Loopwatch-Step-Id"
# A budget the fork call sets bounds the fork's run, as on any request.
_BUDGET_HEADERS = (STEPS_HEADER, TOKENS_HEADER, COST_HEADER, DURATION_HEADER)


async def fork_trace(request: web.Request, deps: ReadDeps) -> web.Response:
    trace_id = request.match_info["trace_id"]
    asked = fork_asked(await _json_body(request))
    # With the opaque payloads held (keep_opaque_reasoning): the fork sends them back.
    trace = await asyncio.to_thread(queries.get_trace, deps.engine, trace_id, opaque=True)
    if trace is None:
        raise NotFound(f"no trace {trace_id}")
    planned = plan(trace, asked)
    fork_id = ids.new_trace_id()
    headers = {
        **planned.headers,
        "Content-Type": "application/json",
        _TRACE_HEADER: fork_id,
        ids.FORK_HEADER: ids.fork_mark(deps.secret, trace_id, asked.at_step, fork_id),
        **{name: request.headers[name] for name in _BUDGET_HEADERS if name in request.headers},
    }
    key = provider_key(request.headers)
    if key is not None:  # else the gateway's route for the model gives its own key
        wire = ADAPTERS[planned.protocol].wire
        headers[wire.key_header] = wire.key_prefix + key
    status, answer, step_id = await _send(_own_url(request) + planned.path, headers, planned.body)
    made = {"trace_id": fork_id, "fork_of": trace_id, "fork_at": asked.at_step}
    if step_id is None:  # refused before the provider (a budget, a check): its error
        refused = {**made, "status": status, "error": answer.get("error", answer)}
        return await json_answer(ForkAnswer, refused)
    stored = await _stored(deps, fork_id)
    result = {**made, "step_id": step_id, "status": status, "url": f"/traces/{fork_id}"}
    if status >= 400:
        result["error"] = answer.get("error", answer)
    answer_text = await asyncio.to_thread(dumped, ForkAnswer, {**result, "stored": stored})
    return web.Response(
        text=answer_text, content_type="application/json", status=201 if stored else 202
    )


async def _json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"null")
    except ValueError as exc:
        raise BadRequest("The request body is not valid JSON.") from exc


def _own_url(request: web.Request) -> str:
    """This gateway's address as the call reached it (the socket's, not the Host header's)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not isinstance(sockname, tuple) or len(sockname) < 2:  # e.g. a Unix socket
        raise BadRequest("The gateway cannot call its own endpoints from this connection.")
    host, port = str(sockname[0]), int(sockname[1])
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"{request.scheme}://{f'[{host}]' if ':' in host else host}:{port}"


async def _send(
    url: str, headers: dict[str, str], body: dict[str, Any]
) -> tuple[int, dict[str, Any], str | None]:
    """The status, JSON answer and step id of the request through the gateway."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, data=jsoncodec.dumps(body), headers=headers, ssl=False) as answer,
    ):
        text = await answer.text()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = {"error": {"message": text[:500]}}
        shown = parsed if isinstance(parsed, dict) else {"answer": parsed}
        return answer.status, shown, answer.headers.get(_STEP_HEADER)


async def _stored(deps: ReadDeps, trace_id: str) -> bool:
    """True once the fork's step is in the store (waits at most STORED_WAIT_S)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STORED_WAIT_S
    while True:
        found = await asyncio.to_thread(queries.get_trace_summary, deps.engine, trace_id)
        if found is not None and found["step_count"] > 0:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL_S)
