"""The page environment: templates, static URLs, rendering in a thread, store reads."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from gateway.items import ViolationKind
from gateway.mcp.checks import KINDS as MCP_KINDS
from gateway.ui.deps import ReadDeps
from gateway.ui.views import fmt
from gateway.ui.views.present import refusal_anchor, step_anchor, trace_href


def _web_dir() -> Path:
    """web/ beside the package in a source checkout, or gateway/web in an installed wheel."""
    checkout = Path(__file__).resolve().parents[3] / "web"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parents[2] / "web"


WEB_DIR = _web_dir()
# Every kind the pages filter on: the model's side, then the MCP side's own.
VIOLATION_KINDS = tuple(dict.fromkeys([*(kind.value for kind in ViolationKind), *MCP_KINDS]))
TEMPLATES = web.AppKey("loopwatch_templates", jinja2.Environment)


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(WEB_DIR / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        short_time=fmt.short_time,
        duration=fmt.duration,
        tokens=fmt.tokens,
        money=fmt.money,
        ms=lambda value: f"{float(value):.1f}",
    )
    env.globals.update(
        static=_static_urls(),
        violation_kinds=list(VIOLATION_KINDS),
        step_anchor=step_anchor,
        refusal_anchor=refusal_anchor,
        trace_href=trace_href,
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


async def render_text(request: web.Request, deps: ReadDeps, name: str, **context: Any) -> str:
    """Rendered in a thread: a long trace's page must not hold up the streams being proxied."""
    template = request.app[TEMPLATES].get_template(name)
    return await asyncio.to_thread(
        template.render,
        path=request.path,
        auth_enabled=deps.settings.admin_token is not None,
        **context,
    )


def html_response(html: str, status: int = 200) -> web.Response:
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


async def render(
    request: web.Request, deps: ReadDeps, name: str, *, status: int = 200, **context: Any
) -> web.Response:
    return html_response(await render_text(request, deps, name, **context), status)


async def read(function: Callable[..., Any], deps: ReadDeps, *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(function, deps.engine, *args, **kwargs)


def url(path: str, params: dict[str, str | None]) -> str:
    query = urlencode({key: value for key, value in params.items() if value})
    return f"{path}?{query}" if query else path


async def error_page(
    request: web.Request, deps: ReadDeps, status: int, message: str
) -> web.Response:
    return await render(request, deps, "error.html", status=status, message=message)
