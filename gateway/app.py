"""Wiring: builds the dependencies once and mounts the proxy, read API and health routes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web
from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.checks.loops import TraceCounters
from gateway.config import Settings
from gateway.continuation.keycache import CachedContinuationKeys
from gateway.continuation.keyfilter import KeyFilter
from gateway.continuation.lineage import Lineages
from gateway.continuation.recent_steps import RecentSteps
from gateway.errors import GatewayError, NotFound, Unauthorized
from gateway.protocols.registry import FALLBACK, PATHS, adapter_for_path, wire_of
from gateway.proxy import handler as proxy
from gateway.proxy import host_check
from gateway.proxy.background.shared import SharedSteps
from gateway.proxy.deps import Deps
from gateway.proxy.finisher import StepBus
from gateway.proxy.known_keys import start_loading
from gateway.proxy.mcp import ingest as mcp_ingest
from gateway.proxy.mcp import oauth as mcp_oauth
from gateway.proxy.mcp import relay as mcp_proxy
from gateway.proxy.mcp.runtime import McpRuntime, McpSink
from gateway.proxy.response_ends import ResponseEnds
from gateway.proxy.upstream import Upstream
from gateway.proxy.websocket import opening as sockets
from gateway.recording.setup import recording as recording_for
from gateway.recording.spooler import SpoolRecorder
from gateway.redaction.redactor import Redactor
from gateway.routing import provider_of
from gateway.runs.pricing import Pricer
from gateway.sinks.base import Sinks
from gateway.sinks.metrics import MetricsSink, metrics_response
from gateway.sinks.redacted import Redacting
from gateway.sinks.webhooks import WebhookSink
from gateway.store.engine import create_schema, install_secret, make_engine
from gateway.store.ledger.core import Ledger, ThreadLedger
from gateway.store.ledger.fallback import FallbackLedger
from gateway.store.ledger.file import separate_sqlite_ledger
from gateway.store.ledger.memory import MemoryLedger
from gateway.store.partitions.keeper import PartitionKeeper
from gateway.store.retention.sweep import Retention
from gateway.ui import api, auth, fork_api, mcp_api
from gateway.ui.health import Readiness
from gateway.ui.pages import routes as views

if TYPE_CHECKING:  # imported where configured: a default `serve` loads neither
    from gateway.sinks.otlp.sink import OtlpSink

log = logging.getLogger(__name__)

DEPS = web.AppKey("deps", Deps)
READINESS = web.AppKey("readiness", Readiness)
MCP = web.AppKey("mcp", McpRuntime)
METRICS = web.AppKey("metrics", MetricsSink)
BACKGROUND = web.AppKey("background", Background)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def create_app(
    settings: Settings,
    *,
    engine: Engine | None = None,
    clock: Callable[[], datetime] | None = None,
    worker: int | None = None,
    spool: Path | None = None,
) -> web.Application:
    """The gateway. `worker`: a process of `serve --workers N`, whose parent owns `spool`."""
    host_checked = host_check.middleware(host_check.HostCheck(settings))
    app = web.Application(
        client_max_size=settings.max_body_bytes + 1,
        middlewares=[m for m in (host_checked, _guarded) if m is not None],
        handler_args={"handler_cancellation": True},
    )
    app.cleanup_ctx.append(
        partial(
            _lifecycle, settings=settings, engine=engine, clock=clock, worker=worker, spool=spool
        )
    )
    for path, protocol in PATHS.items():
        app.router.add_post(path, _bind(proxy.handle_model, protocol))
    sockets.mount(app, DEPS)  # WebSocket modes (GET /v1/responses upgraded)
    app.router.add_route("*", "/v1/{tail:.*}", _bind(proxy.handle_passthrough, FALLBACK))
    for method in ("POST", "GET", "DELETE"):
        app.router.add_route(method, "/mcp/{name}", _mcp)
    app.router.add_post("/mcp/{name}/stdio", _mcp_stdio)
    app.router.add_get(mcp_oauth.WELL_KNOWN + "/mcp/{name}", _mcp_metadata)
    app.router.add_get("/api/mcp/servers", _with_deps(mcp_api.list_servers))
    app.router.add_get("/api/mcp/executions", _with_deps(mcp_api.list_executions))
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    api.add_routes(app, _with_deps)
    app.router.add_post("/api/traces/{trace_id}/fork", _with_deps(fork_api.fork_trace))
    views.add_routes(app, _with_deps)
    return app


async def _lifecycle(
    app: web.Application,
    *,
    settings: Settings,
    engine: Engine | None,
    clock: Callable[[], datetime] | None,
    worker: int | None,
    spool: Path | None,
) -> AsyncIterator[None]:
    # Stopped in reverse: forwarding first, then the recorder stores the spool, the store last.
    owner = app[BACKGROUND] = Background()
    injected = engine is not None
    engine = engine or make_engine(settings.database_url)
    _open_store(engine, settings, clock)
    ledger = await _owned_ledger(settings, engine, injected, owner)
    secret = install_secret(engine)
    redactor = Redactor(settings.redaction)
    metrics = app[METRICS] = _metrics_sink(settings, redactor)
    recording = await owner.enter(
        "recording", recording_for(settings, engine, worker, spool, owner.child("recording"))
    )
    known_keys = _loading_known_keys(settings, engine, recording, owner)
    metrics.watch_recorder(recording)
    exporters = await _exporters(settings, redactor, metrics, owner)
    mcp = app[MCP] = await _started_mcp(
        settings, engine, redactor, recording, exporters, clock, owner
    )
    sinks = _step_sinks(settings, exporters, mcp)
    recent, lineages = RecentSteps(), Lineages(settings.subagent_match_window_s)
    app[DEPS] = Deps(
        settings=settings,
        upstream=await _started_upstream(settings, owner),  # started last, stopped first
        work=owner.child("requests"),  # before the upstream closes
        recorder=recording,
        engine=engine,
        ledger=ledger,
        keys=CachedContinuationKeys(secret),
        secret=secret,
        recent=recent,
        clock=clock or (lambda: datetime.now(UTC)),
        bus=StepBus(ledger, recording, recent, known_keys, ResponseEnds(), sinks, lineages),
        pricer=Pricer(settings.prices),
        loops=TraceCounters(settings.loop_threshold),
    )
    app[READINESS] = Readiness(engine, recording, settings.recorder_queue_size)
    _start_upkeep(app[DEPS], redactor, metrics, owner)
    try:
        yield
    finally:
        await owner.stop()


def _step_sinks(settings: Settings, exporters: Sinks, mcp: McpRuntime) -> Sinks:
    """What every event is handed to, decided once: with no MCP server configured a model
    step costs the MCP side nothing (a stdio bridge's calls are joined through the store)."""
    return exporters.joined(McpSink(mcp)) if settings.mcp_servers else exporters


def _loading_known_keys(
    settings: Settings, engine: Engine, recording: SpoolRecorder, owner: Background
) -> KeyFilter:
    """The filter of keys stored or spooled before this run, filled off the loop; a sole
    SQLite writer may trust it once loaded (nothing else writes keys)."""
    sole_writer = settings.workers == 1 and engine.dialect.name == "sqlite"
    known_keys = KeyFilter(authoritative_when_loaded=sole_writer)
    start_loading(owner, engine, settings.spool_path(), recording.directory, known_keys)
    return known_keys


async def _exporters(
    settings: Settings, redactor: Redactor, metrics: MetricsSink, owner: Background
) -> Sinks:
    """Metrics, then the exporters that carry text (webhooks, OTLP) behind the one
    redaction of what they are handed; stopped in reverse, the redaction hands over what
    it holds before they close."""
    webhooks = await _start_webhooks(settings, metrics, owner)
    otlp = _start_otlp(settings, metrics, owner)
    redacting = _start_redacting(settings, redactor, owner, webhooks, otlp)
    return Sinks(s for s in (metrics, redacting) if s is not None)


async def _started_mcp(
    settings: Settings,
    engine: Engine,
    redactor: Redactor,
    recording: SpoolRecorder,
    exporters: Sinks,
    clock: Callable[[], datetime] | None,
    owner: Background,
) -> McpRuntime:
    own = owner.child("mcp")
    mcp = McpRuntime(settings, engine, redactor, recording, own, sinks=exporters, clock=clock)
    await mcp.start()
    owner.adopt("mcp", mcp.close)
    return mcp


async def _started_upstream(settings: Settings, owner: Background) -> Upstream:
    upstream = Upstream(settings)
    await upstream.start()
    owner.adopt("upstream", upstream.close)
    return upstream


def _metrics_sink(settings: Settings, redactor: Redactor) -> MetricsSink:
    return MetricsSink(
        max_models=settings.metrics_max_models,
        redact=redactor.redact_text,
        provider_of=lambda s: provider_of(settings, wire_of(s.protocol), s.model, s.path),
        idle_seconds=settings.trace_idle_seconds,
    )


def _open_store(engine: Engine, settings: Settings, clock: Callable[[], datetime] | None) -> None:
    """The newest schema and, on PostgreSQL, this period's time partitions and the next
    ones, made before the recorder writes."""
    create_schema(engine)
    PartitionKeeper(engine, settings.retention_days, clock=clock or _now).keep()


def _now() -> datetime:
    return datetime.now(UTC)


async def _owned_ledger(
    settings: Settings, engine: Engine, injected: bool, owner: Background
) -> Ledger:
    """The ledger, closed after the engine is disposed (as the owner stops in reverse)."""
    ledger = await _open_ledger(settings, engine, injected, owner.child("budget-ledger"))
    owner.adopt("budget-ledger", ledger.close)
    owner.adopt("store", partial(_dispose, engine))
    return ledger


async def _dispose(engine: Engine) -> None:
    engine.dispose()


def _start_upkeep(deps: Deps, redactor: Redactor, metrics: MetricsSink, owner: Background) -> None:
    """Retention, then the partition keeper, then the open background responses (shared by
    the store, redacted as stored steps are; recorded as far as they got at the stop):
    stopped first, before the store."""
    shared = SharedSteps(deps.engine, deps.clock, redactor, deps.settings.store_reasoning_summary)
    owner.adopt("open responses", deps.open_responses.sharing(shared, owner))
    if deps.settings.retention_days is not None:
        days, purged = deps.settings.retention_days, metrics.instruments.retention_purged.inc
        retention = Retention(deps.engine, days, clock=deps.clock, on_purged=purged)
        retention.start(owner)
    keeper = PartitionKeeper(deps.engine, deps.settings.retention_days, clock=deps.clock)
    keeper.start(owner)


async def _open_ledger(
    settings: Settings, engine: Engine, injected: bool, owner: Background
) -> Ledger:
    """PostgreSQL gets a native async ledger. A SQLite file gets a ledger file of its own
    beside it (never behind the recorder's writes), its counts in memory when one gateway
    process writes it; a given engine a threaded one. Either way budgets keep holding from
    local counts while the store does not answer."""
    if injected or engine.dialect.name != "postgresql":
        own = None if injected else separate_sqlite_ledger(settings.database_url, engine)
        if own is not None and settings.workers == 1:  # the sole writer: counts in memory
            return FallbackLedger(MemoryLedger(own, owner), owner)
        return FallbackLedger(ThreadLedger(own or engine), owner)
    from gateway.store.ledger.pg import PostgresLedger  # psycopg: PostgreSQL stores only

    postgres = PostgresLedger(settings.database_url, owner)
    await postgres.open()
    return FallbackLedger(postgres, owner)


async def _start_webhooks(
    settings: Settings, metrics: MetricsSink, owner: Background
) -> WebhookSink | None:
    if not settings.webhook_urls:
        return None
    webhooks = WebhookSink(
        settings.webhook_urls,
        public_url=settings.public_url,
        secret=settings.webhook_secret,
        on_drop=lambda reason: metrics.instruments.webhook_dropped.labels(reason).inc(),
    )
    await webhooks.start(owner)
    owner.adopt("webhooks", webhooks.close)
    return webhooks


def _start_otlp(settings: Settings, metrics: MetricsSink, owner: Background) -> OtlpSink | None:
    if settings.otlp_endpoint is None:
        return None
    from gateway.sinks.otlp.sink import OtlpSink  # OpenTelemetry: loaded when exporting

    otlp = OtlpSink(
        settings,
        on_drop=lambda reason, count: metrics.instruments.otlp_dropped.labels(reason).inc(count),
    )
    otlp.start(owner)
    owner.adopt("otlp", partial(asyncio.to_thread, otlp.close))
    return otlp


def _start_redacting(
    settings: Settings,
    redactor: Redactor,
    owner: Background,
    *exporters: WebhookSink | OtlpSink | None,
) -> Redacting | None:
    """The exporters that carry text, behind the one redaction of what they are handed."""
    found = [e for e in exporters if e is not None]
    if not found:
        return None
    redacting = Redacting(redactor, Sinks(found), keep_summaries=settings.store_reasoning_summary)
    redacting.start(owner)
    owner.adopt("redacting", partial(asyncio.to_thread, redacting.close))
    return redacting


def _bind(handler, what) -> Handler:  # type: ignore[no-untyped-def]
    """`handler(request, deps, what)`: `what` a protocol's name, or the adapter of errors."""

    async def bound(request: web.Request) -> web.StreamResponse:
        return await handler(request, request.app[DEPS], what)  # type: ignore[no-any-return]

    return bound


def _with_deps(handler) -> Handler:  # type: ignore[no-untyped-def]
    async def bound(request: web.Request) -> web.StreamResponse:
        return await handler(request, request.app[DEPS])  # type: ignore[no-any-return]

    return bound


async def _mcp(request: web.Request) -> web.StreamResponse:
    return await mcp_proxy.handle(request, request.app[DEPS].upstream, request.app[MCP])


async def _mcp_metadata(request: web.Request) -> web.StreamResponse:
    mcp = request.app[MCP]
    return await mcp_oauth.serve(request, request.app[DEPS].upstream, mcp.servers, mcp.metadata)


async def _mcp_stdio(request: web.Request) -> web.StreamResponse:
    return await mcp_ingest.handle(request, request.app[MCP])


async def _healthz(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    return web.json_response({"status": "ok", "recorder_queue_depth": deps.recorder.queue_depth})


async def _readyz(request: web.Request) -> web.Response:
    return await request.app[READINESS].response()


async def _metrics(request: web.Request) -> web.Response:
    return metrics_response(request.app[METRICS])


@web.middleware
async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The admin token where the read side needs it, and errors as JSON: one middleware,
    the one layer every proxied request passes through."""
    try:
        token = request.app[DEPS].settings.admin_token
        if token is not None and _needs_admin(request.path):
            _admit_admin(request, token)
        return await handler(request)
    except GatewayError as exc:
        return proxy.error_response(adapter_for_path(request.path), exc)
    except web.HTTPException as exc:
        if exc.status == 404 and not request.path.startswith("/v1/"):
            return proxy.error_response(FALLBACK, NotFound(f"no route {request.path}"))
        raise


def _needs_admin(path: str) -> bool:
    public = path.startswith(("/v1/", "/mcp/", "/static/", "/.well-known/"))
    public = public or path == auth.LOGIN_PATH
    return not (public or path in ("/metrics", "/healthz", "/readyz"))


def _admit_admin(request: web.Request, token: str) -> None:
    if auth.authorized(request, token):  # bearer header or the login cookie
        return
    if auth.wants_html(request):
        raise auth.login_redirect(request)
    raise Unauthorized("This Loopwatch requires its admin token (Authorization: Bearer ...).")
