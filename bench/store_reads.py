"""The read side of `store_scale.py`: a real `loopwatch serve` on the filled store, timed
through its documented HTTP parameters. A query that fails prints its error; the rest go on.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from idle_cpu import cpu_seconds, free_port  # this folder: run as `python bench/...`
from store_workload import COMMON_WORD, LONG_TRACE_STEPS, RARE_WORD
from tree_cpu import tree

from gateway.store.engine import make_engine
from gateway.store.models import TRACES

# What each timed read must stay under at p95 (ms).
TARGETS = {"list": 100.0, "search": 300.0, "detail": 50.0, "sessions": 50.0}


def get(base: str, path: str, params: dict[str, str] | None = None) -> Any:
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.loads(response.read())


def samples(database_url: str) -> dict[str, Any]:
    """Traces, a session and a day to query, chosen from what the store holds."""
    engine = make_engine(database_url)
    t = TRACES.c
    with engine.connect() as conn:
        count = conn.scalar(sa.select(sa.func.count()).select_from(TRACES)) or 0
        oldest, newest = conn.execute(
            sa.select(sa.func.min(t.started_at), sa.func.max(t.updated_at))
        ).one()
        typical = list(conn.scalars(sa.select(t.id).where(t.step_count.between(8, 12))))
        long_trace = conn.scalar(sa.select(t.id).where(t.step_count >= LONG_TRACE_STEPS).limit(1))
        session = conn.scalar(
            sa.select(t.session_id)
            .where(t.session_id.is_not(None))
            .order_by(t.id)
            .offset(count // 3)
            .limit(1)
        )
    engine.dispose()
    day = _as_datetime(oldest) + (_as_datetime(newest) - _as_datetime(oldest)) / 2
    day = day.replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "traces": count,
        "middle": sorted(typical)[len(typical) // 2] if typical else None,
        "long": long_trace,
        "session": session,
        "since": day.isoformat().replace("+00:00", "Z"),
        "until": (day + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
    }


def _as_datetime(value: Any) -> datetime:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def start_server(
    database_url: str, log_path: Path
) -> tuple[subprocess.Popen[bytes], str, dict[str, float]]:
    """Start `loopwatch serve`; time it to /healthz, to /readyz, and until its CPU settles."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    port = free_port()
    command = [sys.executable, "-m", "gateway", "serve", "--port", str(port)]
    command += ["--database-url", database_url, "--upstream", "http://127.0.0.1:9/v1"]
    began = time.monotonic()
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    figures = {
        "healthz_s": _wait(base + "/healthz", began),
        "readyz_s": _wait(base + "/readyz", began),
    }
    figures["settled_s"] = _settled(server.pid, began)
    return server, base, figures


def _wait(url: str, began: float, seconds: float = 300) -> float:
    while time.monotonic() - began < seconds:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return time.monotonic() - began
        except (OSError, urllib.error.URLError):
            time.sleep(0.02)
    return float("nan")


def _settled(pid: int, began: float, quiet: float = 0.05, window: float = 1.0) -> float:
    """When the process tree last used more than `quiet` of a core over `window` seconds:
    start-up work done after readiness (the continuation key filter) counts here."""
    last = sum(cpu_seconds(p) for p in tree(pid))
    busy_until = time.monotonic()
    while time.monotonic() - busy_until < 3 * window and time.monotonic() - began < 600:
        time.sleep(window)
        now = sum(cpu_seconds(p) for p in tree(pid))
        if now - last > quiet * window:
            busy_until = time.monotonic()
        last = now
    return busy_until - began


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()


def timed(
    base: str, path: str, params: dict[str, str] | None, tries: int
) -> tuple[float, float] | str:
    """(median, p95) ms over `tries`, after one untimed warm-up, or the error's text."""
    try:
        get(base, path, params)
        spent = []
        for _ in range(tries):
            began = time.perf_counter()
            get(base, path, params)
            spent.append((time.perf_counter() - began) * 1000)
    except Exception as exc:  # a changed or failing query: say so and go on
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    spent.sort()
    return statistics.median(spent), spent[min(len(spent) - 1, round(0.95 * (len(spent) - 1)))]


def deep_cursor(base: str, depth: int) -> str | None:
    """The cursor `depth` traces down the newest-first list, walked page by page."""
    cursor: str | None = None
    walked = 0
    try:
        while walked < depth:
            params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            page = get(base, "/api/traces", params)
            walked += len(page.get("traces", []))
            cursor = page.get("next_cursor")
            if not cursor:
                return None
    except Exception as exc:
        print(f"  deep page: walking the cursor failed: {exc}")
        return None
    return cursor


def read_cases(
    found: dict[str, Any], cursor: str | None
) -> list[tuple[str, str, str, dict[str, str]]]:
    """(name, target group, path, params) of every timed read."""
    middle = found["middle"] or ""
    cases = [
        ("list", "list", "/api/traces", {}),
        ("status=completed", "list", "/api/traces", {"status": "completed"}),
        ("has_violations=true", "list", "/api/traces", {"has_violations": "true"}),
        ("session=", "list", "/api/traces", {"session": found["session"] or ""}),
        ("model=claude", "list", "/api/traces", {"model": "claude"}),
        (f"q={RARE_WORD} (rare)", "search", "/api/traces", {"q": RARE_WORD}),
        (f"q={COMMON_WORD} (common)", "search", "/api/traces", {"q": COMMON_WORD}),
        ("q=trace-id prefix", "search", "/api/traces", {"q": middle[:12]}),
        (
            "since/until a past day",
            "list",
            "/api/traces",
            {"since": found["since"], "until": found["until"]},
        ),
        ("deep page by cursor", "list", "/api/traces", {"cursor": cursor} if cursor else {}),
        ("trace detail, ~10 steps", "detail", f"/api/traces/{middle}", {}),
        (f"trace detail, {LONG_TRACE_STEPS} steps", "detail", f"/api/traces/{found['long']}", {}),
        ("/api/sessions", "sessions", "/api/sessions", {}),
    ]
    if cursor is None:
        cases = [c for c in cases if c[0] != "deep page by cursor"]
    return cases


def time_reads(base: str, found: dict[str, Any], tries: int) -> None:
    depth = min(50_000, found["traces"] // 2)
    cursor = deep_cursor(base, depth)
    print(f"read API, {tries} tries each (median / p95 ms; target p95):")
    for name, group, path, params in read_cases(found, cursor):
        result = timed(base, path, params, tries)
        target = TARGETS[group]
        if isinstance(result, str):
            print(f"  {name:<28} FAILED {result}")
            continue
        median, p95 = result
        verdict = "ok" if p95 <= target else "OVER"
        print(f"  {name:<28} {median:8.1f} / {p95:8.1f}   ≤ {target:.0f}  {verdict}")
