"""`loopwatch demo`: what a newcomer sees after the sample runs, in-process and from the CLI."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.demo import serve_demo
from gateway.demo.script import THINKING_MARKER
from gateway.store import queries
from gateway.store.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One demo run shared by the assertions: its summaries, printout and stored traces."""
    import asyncio

    path = tmp_path_factory.mktemp("demo") / "demo.db"
    # Leftovers of an earlier demo (here: not even a database) must not stop a new one.
    path.write_bytes(b"not a database")
    Path(f"{path}-wal").write_bytes(b"stale")
    settings = Settings(host="127.0.0.1", port=0, database_url=f"sqlite:///{path}")
    out = io.StringIO()
    started = time.perf_counter()
    runs = asyncio.run(serve_demo(settings, once=True, out=out))
    elapsed = time.perf_counter() - started
    engine = make_engine(settings.database_url)
    try:
        listed = queries.list_traces(engine, limit=50)["traces"]
        traces = [queries.get_trace(engine, t["id"]) for t in listed]
    finally:
        engine.dispose()
    return {"runs": runs, "out": out.getvalue(), "traces": traces, "path": path, "secs": elapsed}


def _violations(trace: dict[str, Any]) -> set[str]:
    return {v["kind"] for v in trace["violations"]}


def test_every_run_lands_in_its_own_trace(demo: dict[str, Any]) -> None:
    traces = demo["traces"]
    assert len(traces) >= 5
    assert len(traces) == len(demo["runs"])
    assert {run.trace_id for run in demo["runs"]} == {t["id"] for t in traces}
    assert demo["secs"] < 20


def test_clean_run_is_one_trace_with_parallel_tool_calls(demo: dict[str, Any]) -> None:
    clean = next(t for t in demo["traces"] if t["id"] == demo["runs"][0].trace_id)
    steps = clean["steps"]
    assert len(steps) >= 3 and clean["status"] == "completed" and not clean["violations"]
    calls_per_step = [sum(i["kind"] == "tool_call" for i in s["output_items"]) for s in steps]
    assert max(calls_per_step) >= 2
    assert {s["stream"] for s in steps} == {True, False}
    assert steps[-1]["stop_reason"] == "completed"
    assert any(s["usage"]["cached_tokens"] for s in steps)
    assert all(s["provider_request_id"] for s in steps)


def test_budget_run_is_stopped(demo: dict[str, Any]) -> None:
    stopped = [t for t in demo["traces"] if t["status"] == "budget_exceeded"]
    assert len(stopped) == 1
    assert len(stopped[0]["steps"]) == 3
    assert "step_budget_exceeded" in _violations(stopped[0])


def test_pairing_violation_is_recorded(demo: dict[str, Any]) -> None:
    kinds = {"missing_tool_result", "orphan_tool_result"}
    paired = [t for t in demo["traces"] if _violations(t) & kinds]
    assert len(paired) == 1
    assert any(v["enforced"] for v in paired[0]["violations"])
    assert "400" in demo["out"] and "missing_tool_result" in demo["out"]


def test_interrupted_stream_is_recorded(demo: dict[str, Any]) -> None:
    broken = [
        t
        for t in demo["traces"]
        if any(s["stop_reason"] == "interrupted" for s in t["steps"])
        and "stream_interrupted" in _violations(t)
    ]
    assert len(broken) == 1
    # The agent retried the step and finished in the same trace.
    assert broken[0]["steps"][-1]["stop_reason"] == "completed"


def test_anthropic_run_keeps_no_thinking_text(demo: dict[str, Any]) -> None:
    messages = [t for t in demo["traces"] if t["steps"][0]["protocol"] == "messages"]
    assert len(messages) == 1
    steps = messages[0]["steps"]
    assert len(steps) >= 3 and all(s["protocol"] == "messages" for s in steps)
    outputs = [i for s in steps for i in s["output_items"]]
    assert {"reasoning", "tool_call"} <= {i["kind"] for i in outputs}
    assert all(not i["text"] for i in outputs if i["kind"] == "reasoning")
    for path in demo["path"].parent.rglob("*"):  # the spool of unredacted records too
        if path.is_file():
            assert THINKING_MARKER.encode() not in path.read_bytes(), path


def test_summary_names_the_ui_and_every_run(demo: dict[str, Any]) -> None:
    out = demo["out"]
    assert "Open the trace viewer: http://127.0.0.1:" in out
    for run in demo["runs"]:
        assert run.trace_id is not None and f"/traces/{run.trace_id}" in out


def _cli(tmp_path: Path, *flags: str) -> subprocess.Popen[str]:
    database = f"sqlite:///{tmp_path}/cli.db"
    command = [sys.executable, "-m", "gateway", "demo", "--port", "0", "--database-url", database]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    return subprocess.Popen(
        [*command, *flags],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_cli_once_exits_zero(tmp_path: Path) -> None:
    process = _cli(tmp_path, "--once")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Open the trace viewer" in out and "Serving until Ctrl-C" not in out


def test_cli_serves_until_interrupted(tmp_path: Path) -> None:
    process = _cli(tmp_path)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "Serving until Ctrl-C" in line:
                break
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
