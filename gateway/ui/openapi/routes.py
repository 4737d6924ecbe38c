"""The read API's route table, one entry a route: the app mounts these and the OpenAPI
document describes these, so neither can list a route the other lacks."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from aiohttp import web
from pydantic import RootModel

from gateway.ui import api, fork_api, mcp_api
from gateway.ui.api_models.cassette import CassetteLine
from gateway.ui.api_models.forks import ForkAnswer, ForkRequest
from gateway.ui.api_models.mcp import ExecutionList, ServerList
from gateway.ui.api_models.queries import (
    ExecutionQuery,
    Page,
    TraceListQuery,
    TraceQuery,
    ViolationQuery,
)
from gateway.ui.api_models.sessions import SessionList
from gateway.ui.api_models.traces import TraceDetail, TraceList
from gateway.ui.api_models.violations import ViolationList
from gateway.ui.deps import ReadDeps
from gateway.ui.openapi.document import openapi
from gateway.ui.openapi.route import ApiRoute, ReadHandler

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class OpenApiDocument(RootModel[dict[str, Any]]):
    """An OpenAPI 3.1 document: this one."""


async def openapi_json(request: web.Request, deps: ReadDeps) -> web.Response:
    return web.Response(text=_document(deps.settings.admin_token is not None), content_type=JSON)


JSON = "application/json"

ROUTES: tuple[ApiRoute, ...] = (
    ApiRoute(
        "GET",
        "/api/traces",
        api.list_traces,
        "Traces, newest activity first: roots with their tree's totals.",
        TraceList,
        TraceListQuery,
        errors=(400, 503),
    ),
    ApiRoute(
        "GET",
        "/api/traces/{trace_id}",
        api.get_trace,
        "One trace with its tree, a page of its steps, violations and MCP executions.",
        TraceDetail,
        TraceQuery,
        errors=(400, 404),
    ),
    ApiRoute(
        "GET",
        "/api/traces/{trace_id}/cassette",
        api.get_cassette,
        "The trace as a cassette: JSON Lines, a header then one line a step.",
        CassetteLine,
        errors=(404,),
        media_type=api.JSONL,
    ),
    ApiRoute(
        "POST",
        "/api/traces/{trace_id}/fork",
        fork_api.fork_trace,
        "Step N's request sent again through the gateway with another model or parameters: "
        "a new trace, the fork of that step.",
        ForkAnswer,
        body=ForkRequest,
        errors=(400, 404, 409),
        success=(200, 201, 202),
    ),
    ApiRoute(
        "GET",
        "/api/violations",
        api.list_violations,
        "Violations of both sides (model and MCP), newest first.",
        ViolationList,
        ViolationQuery,
        errors=(400,),
    ),
    ApiRoute(
        "GET",
        "/api/sessions",
        api.list_sessions,
        "Sessions with their trace count and cost, newest activity first.",
        SessionList,
        Page,
        errors=(400,),
    ),
    ApiRoute(
        "GET",
        "/api/mcp/servers",
        mcp_api.list_servers,
        "MCP servers with their tools as last listed and their call counts.",
        ServerList,
    ),
    ApiRoute(
        "GET",
        "/api/mcp/executions",
        mcp_api.list_executions,
        "MCP tool executions that joined no run, newest first.",
        ExecutionList,
        ExecutionQuery,
        errors=(400,),
    ),
    ApiRoute(
        "GET",
        "/api/openapi.json",
        openapi_json,
        "This document.",
        OpenApiDocument,
    ),
)


def mount(app: web.Application, bind: Callable[[ReadHandler], Handler]) -> None:
    """Each route of the table on `app`, its handler given the read side's dependencies
    by `bind`."""
    for route in ROUTES:
        if route.method == "GET":
            app.router.add_get(route.path, bind(route.handler))  # HEAD too, as for every GET
        else:
            app.router.add_route(route.method, route.path, bind(route.handler))


def openapi_document(*, secured: bool) -> dict[str, Any]:
    """The document of this gateway's read API; `secured`: it has an admin token."""
    return openapi(ROUTES, version=api.version(), secured=secured)


@cache
def _document(secured: bool) -> str:
    return json.dumps(openapi_document(secured=secured))
