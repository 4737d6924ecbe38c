"""Routes of the pages, their security headers, the violations page and the login form.

Templates and static files live in `web/` at the repository top; a wheel carries them as
`gateway/web`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.store.read import queries
from gateway.ui import auth
from gateway.ui.deps import ReadDeps
from gateway.ui.pages import lists as list_pages
from gateway.ui.pages import mcp as mcp_pages
from gateway.ui.pages import trace as trace_pages
from gateway.ui.pages.rendering import (
    TEMPLATES,
    VIOLATION_KINDS,
    WEB_DIR,
    make_environment,
    read,
    render,
    url,
)

PAGE_SIZE = 50
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_UI_PREFIXES = ("/traces/", "/static/")
_UI_PATHS = ("/", "/violations", mcp_pages.PATH, "/sessions", "/login", "/logout")

DepsHandler = Callable[[web.Request, ReadDeps], Awaitable[web.StreamResponse]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application, with_deps: Callable[[DepsHandler], Handler]) -> None:
    """Mount the pages, the login form and /static on `app`; `with_deps` passes them their deps."""
    app[TEMPLATES] = make_environment()
    app[trace_pages.VIEWS] = trace_pages.ViewCache()
    app.router.add_get("/", with_deps(list_pages.traces_page))
    app.router.add_get("/sessions", with_deps(list_pages.sessions_page))
    app.router.add_get("/traces/{trace_id}", with_deps(trace_pages.trace_page))
    app.router.add_get("/traces/{trace_id}/live", with_deps(trace_pages.live))
    app.router.add_get("/traces/{trace_id}/steps/{step_id}", with_deps(trace_pages.step_page))
    app.router.add_get("/violations", with_deps(violations_page))
    app.router.add_get(mcp_pages.PATH, with_deps(mcp_pages.unjoined_page))
    app.router.add_get(auth.LOGIN_PATH, with_deps(login_form))
    app.router.add_post(auth.LOGIN_PATH, with_deps(login_submit))
    app.router.add_post("/logout", with_deps(logout))
    app.router.add_static("/static/", WEB_DIR / "static")
    app.on_response_prepare.append(_security_headers)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    if request.path in _UI_PATHS or request.path.startswith(_UI_PREFIXES):
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        # Nothing of a trace page's address leaves for another site; the gateway's own forms
        # carry their real Origin (under no-referrer a browser sends `Origin: null`, which the
        # DNS-rebinding check refuses).
        response.headers["Referrer-Policy"] = "same-origin"
        if not request.path.startswith("/static/"):
            response.headers["Cache-Control"] = "no-store"


async def violations_page(request: web.Request, deps: ReadDeps) -> web.Response:
    kind = request.query.get("kind") or None
    if kind not in VIOLATION_KINDS:
        kind = None
    cursor = request.query.get("cursor") or None
    try:
        page = await read(queries.list_violations, deps, limit=PAGE_SIZE, cursor=cursor, kind=kind)
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
        next_url=url("/violations", {"kind": kind, "cursor": page["next_cursor"]}),
        first_url=url("/violations", {"kind": kind}),
    )


async def login_form(request: web.Request, deps: ReadDeps) -> web.Response:
    target = auth.safe_next(request.query.get("next"))
    if deps.settings.admin_token is None:
        raise web.HTTPFound(target)
    return await render(request, deps, "login.html", next=target, error=None)


async def login_submit(request: web.Request, deps: ReadDeps) -> web.Response:
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


async def logout(request: web.Request, deps: ReadDeps) -> web.Response:
    response = web.HTTPFound(auth.LOGIN_PATH if deps.settings.admin_token else "/")
    auth.clear_session(response)
    raise response
