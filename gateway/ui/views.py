"""Server-rendered pages: traces list, one trace, violations, and the admin login form.

Templates and static files live in `web/` at the repository top; a wheel carries them as
`gateway/web`.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from gateway.deps import Deps
from gateway.items import ViolationKind
from gateway.store import listing, queries
from gateway.trace_status import TraceStatus
from gateway.ui import auth, fmt
from gateway.ui.present import preview, step_anchor, trace_view


def _web_dir() -> Path:
    """web/ beside the package in a source checkout, or gateway/web in an installed wheel."""
    checkout = Path(__file__).resolve().parents[2] / "web"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parents[1] / "web"


WEB_DIR = _web_dir()
TEMPLATES = web.AppKey("loopwatch_templates", jinja2.Environment)
PAGE_SIZE = 50
STATUSES = tuple(status.value for status in TraceStatus)
RANGES = {
    "15m": (timedelta(minutes=15), "last 15 minutes"),
    "1h": (timedelta(hours=1), "last hour"),
    "24h": (timedelta(days=1), "last 24 hours"),
    "7d": (timedelta(days=7), "last 7 days"),
}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_UI_PREFIXES = ("/traces/", "/static/")
_UI_PATHS = ("/", "/violations", "/login", "/logout")

DepsHandler = Callable[[web.Request, Deps], Awaitable[web.StreamResponse]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application, with_deps: Callable[[DepsHandler], Handler]) -> None:
    """Mount the pages, the login form and /static on `app`; `with_deps` passes Deps in."""
    app[TEMPLATES] = make_environment()
    app.router.add_get("/", with_deps(traces_page))
    app.router.add_get("/traces/{trace_id}", with_deps(trace_page))
    app.router.add_get("/violations", with_deps(violations_page))
    app.router.add_get(auth.LOGIN_PATH, with_deps(login_form))
    app.router.add_post(auth.LOGIN_PATH, with_deps(login_submit))
    app.router.add_post("/logout", with_deps(logout))
    app.router.add_static("/static/", WEB_DIR / "static")
    app.on_response_prepare.append(_security_headers)


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(WEB_DIR / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        short_time=fmt.short_time, duration=fmt.duration, tokens=fmt.tokens, preview=preview
    )
    env.globals.update(
        static=_static_urls(),
        violation_kinds=[kind.value for kind in ViolationKind],
        statuses=STATUSES,
        ranges={key: label for key, (_, label) in RANGES.items()},
        step_anchor=step_anchor,
        quote=lambda value: quote(str(value), safe=""),
    )
    return env


def _static_urls() -> dict[str, str]:
    """Static file URLs with a content hash, so browsers never run an old script."""
    urls = {}
    for path in sorted((WEB_DIR / "static").iterdir()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
        urls[path.name] = f"/static/{path.name}?v={digest}"
    return urls


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    if request.path in _UI_PATHS or request.path.startswith(_UI_PREFIXES):
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        if not request.path.startswith("/static/"):
            response.headers["Cache-Control"] = "no-store"


async def render(
    request: web.Request, deps: Deps, name: str, *, status: int = 200, **context: Any
) -> web.Response:
    """Rendered in a thread: a long trace's page must not hold up the streams being proxied."""
    template = request.app[TEMPLATES].get_template(name)
    html = await asyncio.to_thread(
        template.render,
        path=request.path,
        auth_enabled=deps.settings.admin_token is not None,
        **context,
    )
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


async def _read(function: Callable[..., Any], deps: Deps, *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(function, deps.engine, *args, **kwargs)


def _url(path: str, params: dict[str, str | None]) -> str:
    query = urlencode({key: value for key, value in params.items() if value})
    return f"{path}?{query}" if query else path


def _locate(engine: Any, text: str) -> str | None:
    """Where a search for a trace id, step id, response id or request id should go."""
    if queries.get_trace_summary(engine, text) is not None:
        return f"/traces/{quote(text, safe='')}"
    hit = queries.find_step(engine, text)
    if hit is None:
        return None
    return f"/traces/{quote(hit['trace_id'], safe='')}#{step_anchor(hit['step_id'])}"


def _page_size(request: web.Request) -> int:
    raw = request.query.get("limit", "")
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= queries.MAX_LIMIT else PAGE_SIZE


def _trace_filters(request: web.Request) -> dict[str, str | None]:
    query = request.query
    kind = query.get("violation") or None
    when = query.get("range") or None
    return {
        "status": query.get("status") if query.get("status") in STATUSES else None,
        "model": (query.get("model") or "").strip() or None,
        "violation": kind if kind in ViolationKind.__members__.values() else None,
        "range": when if when in RANGES else None,
    }


def _list_page(
    engine: Any,
    filters: dict[str, str | None],
    cursor: str | None,
    since: datetime | None,
    limit: int,
) -> dict[str, Any]:
    """One page of traces; a time range trims it, since the list runs newest first."""
    page = queries.list_traces(
        engine,
        limit=limit,
        cursor=cursor,
        status=filters["status"],
        model=filters["model"],
        violation=filters["violation"],
    )
    if since is not None:
        kept = [t for t in page["traces"] if (fmt.parse_time(t["updated_at"]) or since) >= since]
        if len(kept) < len(page["traces"]):
            page = {"traces": kept, "next_cursor": None}
    extras = listing.trace_extras(engine, [t["id"] for t in page["traces"]])
    for trace in page["traces"]:
        trace.update(extras[trace["id"]])
    return page


async def traces_page(request: web.Request, deps: Deps) -> web.Response:
    search = request.query.get("q", "").strip()
    if search:
        target = await _read(_locate, deps, search)
        if target is not None:
            raise web.HTTPFound(target)
    filters = _trace_filters(request)
    cursor = request.query.get("cursor") or None
    since = deps.clock() - RANGES[filters["range"]][0] if filters["range"] else None
    try:
        page = await _read(_list_page, deps, filters, cursor, since, _page_size(request))
    except ValueError:
        return await render(
            request, deps, "error.html", status=400, message="That page link is invalid."
        )
    api_filters = {key: value for key, value in filters.items() if key != "range"}
    return await render(
        request,
        deps,
        "traces.html",
        traces=page["traces"],
        filters=filters,
        search=search,
        filtered=any(filters.values()),
        cursor=cursor,
        next_url=_url(
            "/", {**filters, "limit": request.query.get("limit"), "cursor": page["next_cursor"]}
        ),
        has_next=page["next_cursor"] is not None,
        first_url=_url("/", filters),
        poll_url=_url("/api/traces", {**api_filters, "limit": "1"}),
        base_url=f"http://{request.host}",
    )


async def trace_page(request: web.Request, deps: Deps) -> web.Response:
    trace_id = request.match_info["trace_id"]
    trace = await _read(queries.get_trace, deps, trace_id)
    if trace is None:
        message = "No trace has this id. It may not have been recorded yet."
        return await render(request, deps, "error.html", status=404, message=message)
    view = await asyncio.to_thread(trace_view, trace)
    return await render(request, deps, "trace.html", view=view)


async def violations_page(request: web.Request, deps: Deps) -> web.Response:
    kind = request.query.get("kind") or None
    if kind not in ViolationKind.__members__.values():
        kind = None
    cursor = request.query.get("cursor") or None
    try:
        page = await _read(queries.list_violations, deps, limit=PAGE_SIZE, cursor=cursor, kind=kind)
    except ValueError:
        return await render(
            request, deps, "error.html", status=400, message="That page link is invalid."
        )
    return await render(
        request,
        deps,
        "violations.html",
        violations=page["violations"],
        kind=kind,
        cursor=cursor,
        has_next=page["next_cursor"] is not None,
        next_url=_url("/violations", {"kind": kind, "cursor": page["next_cursor"]}),
        first_url=_url("/violations", {"kind": kind}),
    )


async def login_form(request: web.Request, deps: Deps) -> web.Response:
    target = auth.safe_next(request.query.get("next"))
    if deps.settings.admin_token is None:
        raise web.HTTPFound(target)
    return await render(request, deps, "login.html", next=target, error=None)


async def login_submit(request: web.Request, deps: Deps) -> web.Response:
    token = deps.settings.admin_token
    form = await request.post()
    target = auth.safe_next(str(form.get("next") or "/"))
    if token is None:
        raise web.HTTPFound(target)
    offered = str(form.get("token") or "").strip()
    if not offered or not auth.token_matches(token, offered):
        await asyncio.sleep(0.2)  # slows guessing; the token has at least 16 characters
        error = "That token is not the admin token of this Loopwatch."
        return await render(request, deps, "login.html", status=401, next=target, error=error)
    response = web.HTTPFound(target)
    auth.set_session(response, request, token)
    raise response


async def logout(request: web.Request, deps: Deps) -> web.Response:
    response = web.HTTPFound(auth.LOGIN_PATH if deps.settings.admin_token else "/")
    auth.clear_session(response)
    raise response
