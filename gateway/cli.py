"""Command line: `loopwatch serve` runs the gateway, `loopwatch demo` shows it with no API key,
`loopwatch store partition` converts a PostgreSQL store to time partitions, `loopwatch export`
writes a trace as a cassette, `loopwatch replay` answers an agent from one, `loopwatch
mcp-server` serves the recorded traces to an agent over stdio MCP."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from gateway.config import Settings
from gateway.config_load import Sources, load_with_sources
from gateway.errors import ConfigError, StartupError
from gateway.ops.logs import configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description=__doc__)
    parser.add_argument("--version", action="version", version=f"loopwatch {version()}")
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
    serve.add_argument(
        "--mcp",
        dest="mcp_servers",
        action="append",
        metavar="NAME=URL",
        help="an MCP server proxied at /mcp/NAME (repeatable; LOOPWATCH_MCP_SERVERS)",
    )
    stdio = commands.add_parser("mcp-stdio", help="run a stdio MCP server, reporting to a gateway")
    stdio.add_argument("--gateway", required=True, help="the gateway's base URL")
    stdio.add_argument("--name", required=True, help="the server's name in Loopwatch")
    stdio.add_argument("server", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    demo = commands.add_parser("demo", help="the gateway with a scripted provider and sample runs")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8787)
    demo.add_argument("--database-url", default="sqlite:///./loopwatch-demo.db")
    demo.add_argument(
        "--once", action="store_true", help="run the sample loops, print the summary and exit"
    )
    _add_store_commands(commands)
    _add_cassette_commands(commands)
    fingerprint = commands.add_parser(
        "key-fingerprint",
        help="print the fingerprint of an API key (read from stdin) for [[keys]] in the config",
    )
    fingerprint.add_argument("--database-url", help="the gateway's database (holds the secret)")
    fingerprint.add_argument("--config", help="TOML config file (LOOPWATCH_CONFIG)")
    return parser


def _add_store_commands(commands: Any) -> None:
    store = commands.add_parser("store", help="operate on the gateway's database")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    partition = store_commands.add_parser(
        "partition",
        help="convert a PostgreSQL store to time partitions (once; writers wait meanwhile)",
    )
    partition.add_argument("--database-url", help="the PostgreSQL store (LOOPWATCH_DATABASE_URL)")
    partition.add_argument("--config", help="TOML config file (LOOPWATCH_CONFIG)")


def _add_cassette_commands(commands: Any) -> None:
    export = commands.add_parser("export", help="write a trace as a cassette (JSON Lines)")
    export.add_argument("trace_id", help="the trace's id")
    export.add_argument("--out", help="the file to write (default: standard output)")
    export.add_argument("--database-url", help="the gateway's database (LOOPWATCH_DATABASE_URL)")
    export.add_argument("--config", help="TOML config file (LOOPWATCH_CONFIG)")
    replay = commands.add_parser(
        "replay", help="answer an agent's requests from a cassette, offline"
    )
    replay.add_argument("cassette", help="the cassette file (`loopwatch export`)")
    replay.add_argument("--host", help="address to bind (LOOPWATCH_HOST, default 127.0.0.1)")
    replay.add_argument("--port", type=int, help="port (LOOPWATCH_PORT, default 8787)")
    replay.add_argument(
        "--diverge",
        choices=("fail", "live"),
        default="fail",
        help="at the first request that differs from the recording: answer 409 (fail, the "
        "default) or forward it and the rest to the upstream (live)",
    )
    replay.add_argument(
        "--upstream", dest="upstream_url", help="provider base URL (LOOPWATCH_UPSTREAM_URL)"
    )
    replay.add_argument("--config", help="TOML config file (LOOPWATCH_CONFIG)")
    traces = commands.add_parser(
        "mcp-server", help="serve the recorded traces as MCP tools over stdio (read-only)"
    )
    traces.add_argument("--database-url", help="the gateway's database (LOOPWATCH_DATABASE_URL)")
    traces.add_argument("--config", help="TOML config file (LOOPWATCH_CONFIG)")


def version() -> str:
    """The installed distribution's version (pyproject.toml), not a second copy in code."""
    try:
        return metadata.version("loopwatch")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown"


def check_exposure(settings: Settings, sources: Sources) -> None:
    if not settings.is_loopback() and settings.admin_token is None:
        raise ConfigError(
            f"invalid setting {sources.name('host')}: binding to {settings.host} exposes the "
            "trace viewer and read API beyond this machine; set LOOPWATCH_ADMIN_TOKEN first"
        )


def _flag_names(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """Each setting's flag as the command spells it (`--upstream` sets upstream_url)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub = action.choices[command]
            return {a.dest: a.option_strings[-1] for a in sub._actions if a.option_strings}
    return {}


# Arguments that are not settings.
_NOT_SETTINGS = frozenset(
    {"command", "once", "store_command", "trace_id", "out", "cassette", "diverge"}
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "mcp-stdio":
        from gateway.ops import mcp_stdio as stdio

        return stdio.main(args.gateway, args.name, args.server)
    flags = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
    if flags.get("mcp_servers"):
        flags["mcp_servers"] = ",".join(flags["mcp_servers"])
    try:
        settings, sources = load_with_sources(flags, None, _flag_names(parser, args.command))
        check_exposure(settings, sources)
    except ConfigError as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    if args.command == "demo":
        from gateway.demo.main import run_demo

        return run_demo(settings, once=args.once)
    if args.command == "key-fingerprint":
        return _print_fingerprint(settings)
    if args.command == "store":
        return _partition_store(settings)
    if args.command == "export":
        return _export(settings, args.trace_id, args.out)
    if args.command == "mcp-server":
        return _serve_traces(settings)
    if args.command == "replay":
        return _replay(settings, args.cassette, live=args.diverge == "live")
    try:
        return _serve(settings)
    except ConfigError as exc:  # found at start-up (a spool directory in use, say)
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2


def _serve(settings: Settings) -> int:
    from gateway.ops import serving

    if settings.workers > 1:
        from gateway.ops import workers

        return workers.serve(settings)

    # The recorder's worker thread redacts and writes in batches; a short GIL switch
    # interval keeps it from holding the event loop for the default 5 ms at a time.
    sys.setswitchinterval(0.0005)
    return serving.run(settings, serving.new_event_loop)


def _partition_store(settings: Settings) -> int:
    from gateway.ops.serving import store_errors, store_failure
    from gateway.store.engine import make_engine
    from gateway.store.partitions.convert import NotPostgres, partition_store

    engine = make_engine(settings.database_url)
    try:
        converted = partition_store(engine)
    except NotPostgres as exc:
        print(f"loopwatch: {exc} ({settings.database_url})", file=sys.stderr)
        return 2
    except store_errors() as exc:
        print(f"loopwatch: {store_failure(settings.database_url, exc)}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    print("time partitions made" if converted else "the store is already partitioned")
    return 0


def _export(settings: Settings, trace_id: str, out: str | None) -> int:
    from gateway.ops.serving import store_errors, store_failure
    from gateway.store.engine import read_only_engine
    from gateway.ui.cassette import cassette_lines

    engine = read_only_engine(settings.database_url)
    try:
        lines = cassette_lines(engine, trace_id, version())
    except store_errors() as exc:
        print(f"loopwatch: {store_failure(settings.database_url, exc)}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    if lines is None:
        print(f"loopwatch: no trace {trace_id}", file=sys.stderr)
        return 1
    text = "".join(line + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")
    return 0


def _serve_traces(settings: Settings) -> int:
    import asyncio

    from gateway.ops.serving import store_errors, store_failure
    from gateway.store.engine import read_only_engine
    from gateway.store.read.queries import stored_step_count
    from gateway.ui.mcp_server import stdio

    engine = read_only_engine(settings.database_url)
    try:
        stored_step_count(engine)  # a store that cannot be read stops it here, said once
        asyncio.run(stdio.serve(engine, settings, version()))
    except store_errors() as exc:
        print(f"loopwatch: {store_failure(settings.database_url, exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        engine.dispose()
    return 0


def _replay(settings: Settings, cassette: str, *, live: bool) -> int:
    from gateway.ops import replaying
    from gateway.replay import tape

    try:
        trace_id, steps = tape.read(cassette)
    except ConfigError as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    return replaying.run(settings, trace_id, steps, live=live)


def _print_fingerprint(settings: Settings) -> int:
    """The key comes on stdin, never as an argument (which shells and `ps` would keep)."""
    from gateway.checks.budgets import key_fingerprint

    try:
        secret = _existing_secret(settings.database_url)
    except StartupError as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    key = sys.stdin.readline().strip()
    if not key:
        print("loopwatch: give the API key on standard input", file=sys.stderr)
        return 2
    print(key_fingerprint(secret, key))
    return 0


def _existing_secret(database_url: str) -> bytes:
    """The gateway's install secret: a fingerprint made with any other would match nothing,
    so a missing database or secret is refused, never created."""
    from sqlalchemy.engine import make_url

    from gateway.ops.serving import store_errors, store_failure
    from gateway.store.engine import read_only_engine, read_secret

    path = make_url(database_url).database if database_url.startswith("sqlite") else None
    if path is not None and (path in ("", ":memory:") or not Path(path).is_file()):
        raise StartupError(
            f"no database at {path or database_url}: point --database-url (or "
            "LOOPWATCH_DATABASE_URL) at the gateway's own, made by `loopwatch serve`"
        )
    engine = read_only_engine(database_url)
    try:
        secret = read_secret(engine)
    except store_errors() as exc:
        raise store_failure(database_url, exc) from exc
    finally:
        engine.dispose()
    if secret is None:
        raise StartupError(
            f"{make_url(database_url).render_as_string(hide_password=True)} holds no install "
            "secret: is it the gateway's database? `loopwatch serve` makes one"
        )
    return secret
