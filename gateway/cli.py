"""Command line: `loopwatch serve` runs the gateway, `loopwatch demo` shows it with no API key."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from aiohttp import web

from gateway.config import Settings, load_settings
from gateway.errors import ConfigError

log = logging.getLogger("loopwatch")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", help="address to bind (LOOPWATCH_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (LOOPWATCH_PORT, default 8787)")
    serve.add_argument(
        "--upstream", dest="upstream_url", help="provider base URL (LOOPWATCH_UPSTREAM_URL)"
    )
    serve.add_argument(
        "--database-url", help="sqlite:///... or postgresql://... (LOOPWATCH_DATABASE_URL)"
    )
    serve.add_argument(
        "--config", help="TOML file with routes, budgets, redaction (LOOPWATCH_CONFIG)"
    )
    serve.add_argument(
        "--workers", type=int, help="processes sharing the port (LOOPWATCH_WORKERS, default 1)"
    )
    demo = commands.add_parser("demo", help="the gateway with a scripted provider and sample runs")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8787)
    demo.add_argument("--database-url", default="sqlite:///./loopwatch-demo.db")
    demo.add_argument(
        "--once", action="store_true", help="run the sample loops, print the summary and exit"
    )
    fingerprint = commands.add_parser(
        "key-fingerprint",
        help="print the fingerprint of an API key (read from stdin) for [[keys]] in the config",
    )
    fingerprint.add_argument("--database-url", help="the gateway's database (holds the secret)")
    fingerprint.add_argument("--config", help="TOML config file (LOOPWATCH_CONFIG)")
    return parser


def check_exposure(settings: Settings) -> None:
    if not settings.is_loopback() and settings.admin_token is None:
        raise ConfigError(
            f"invalid setting host (LOOPWATCH_HOST): binding to {settings.host} exposes the "
            "trace viewer and read API beyond this machine; set LOOPWATCH_ADMIN_TOKEN first"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "once")}
    try:
        settings = load_settings(flags)
        check_exposure(settings)
    except ConfigError as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "demo":
        from gateway.demo import run_demo

        return run_demo(settings, once=args.once)
    if args.command == "key-fingerprint":
        return _print_fingerprint(settings)
    try:
        return _serve(settings)
    except ConfigError as exc:  # found at start-up (a spool directory in use, say)
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2


def _serve(settings: Settings) -> int:
    from gateway.app import create_app

    if settings.workers > 1:
        from gateway import workers

        log.info(
            "loopwatch listening on http://%s:%s with %d workers (upstream %s)",
            settings.host,
            settings.port,
            settings.workers,
            settings.upstream_url,
        )
        return workers.serve(settings)

    # The recorder's worker thread redacts and writes in batches; a short GIL switch
    # interval keeps it from holding the event loop for the default 5 ms at a time.
    sys.setswitchinterval(0.0005)
    log.info(
        "loopwatch listening on http://%s:%s (upstream %s)",
        settings.host,
        settings.port,
        settings.upstream_url,
    )
    web.run_app(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        print=None,
        access_log=None,
        handler_cancellation=True,
        loop=new_event_loop(),
    )
    return 0


def _print_fingerprint(settings: Settings) -> int:
    """The key comes on stdin, never as an argument (which shells and `ps` would keep)."""
    from gateway.budgets import key_fingerprint
    from gateway.store.engine import create_schema, install_secret, make_engine

    key = sys.stdin.readline().strip()
    if not key:
        print("loopwatch: give the API key on standard input", file=sys.stderr)
        return 2
    engine = make_engine(settings.database_url)
    create_schema(engine)
    print(key_fingerprint(install_secret(engine), key))
    engine.dispose()
    return 0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed (Linux, macOS): a cheaper event loop for every request."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
