"""`loopwatch demo`: what a newcomer sees after the sample runs, in-process and from the CLI."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.demo.main import DEMO_IDLE_SECONDS, reset_database, serve_demo
from gateway.demo.script import THINKING_MARKER
from gateway.items import Usage
from gateway.runs.pricing import Pricer
from gateway.runs.status import Ending, status_of
from gateway.store.engine import make_engine
from gateway.store.read import queries

ROOT = Path(__file__).resolve().parents[3]


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
        listed = queries.list_traces(engine, limit=50)["traces"]  # the roots
        traces = [queries.get_trace(engine, t["id"]) for t in listed]
        children = [
            queries.get_trace(engine, c["id"]) for t in traces for c in t.get("children", [])
        ]
    finally:
        engine.dispose()
    return {
        "runs": runs,
        "out": out.getvalue(),
        "traces": traces,
        "children": children,
        "path": path,
        "secs": elapsed,
    }


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


def _run_trace(demo: dict[str, Any], title: str) -> dict[str, Any]:
    run = next(r for r in demo["runs"] if r.title.startswith(title))
    return next(t for t in demo["traces"] if t["id"] == run.trace_id)


def _calls(step: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in step["output_items"] if i["kind"] == "tool_call"]


def test_demo_shows_loop_and_undeclared_tool(demo: dict[str, Any]) -> None:
    kinds = set().union(*(_violations(t) for t in demo["traces"]))
    assert {"repeated_tool_call", "undeclared_tool"} <= kinds
    assert demo["runs"][0].title.startswith("clean") and len(demo["runs"]) == 11


def test_looping_run_is_flagged_and_finishes(demo: dict[str, Any]) -> None:
    looping = _run_trace(demo, "looping agent")
    calls = [(c["tool_name"], c["arguments"]) for s in looping["steps"] for c in _calls(s)]
    assert len(calls) == 4 and len(set(calls)) == 1
    repeated = [v for v in looping["violations"] if v["kind"] == "repeated_tool_call"]
    assert repeated and not any(v["enforced"] for v in repeated)  # observe mode: forwarded
    assert looping["steps"][-1]["stop_reason"] == "completed"
    flagged = [t for t in demo["traces"] if "repeated_tool_call" in _violations(t)]
    assert flagged == [looping]


def test_undeclared_tool_is_flagged(demo: dict[str, Any]) -> None:
    undeclared = _run_trace(demo, "model calls an undeclared")
    found = [v for v in undeclared["violations"] if v["kind"] == "undeclared_tool"]
    assert len(found) == 1 and "calculate" in str(found[0]["detail"])
    assert undeclared["steps"][-1]["stop_reason"] == "completed"
    assert [t for t in demo["traces"] if "undeclared_tool" in _violations(t)] == [undeclared]


def test_abandoned_run_leaves_its_call_unanswered(demo: dict[str, Any]) -> None:
    abandoned = _run_trace(demo, "agent dies mid-loop")
    last = abandoned["steps"][-1]
    assert last["stop_reason"] == "tool_calls"
    asked = {c["call_id"] for c in _calls(last)}
    answered = {i["call_id"] for s in abandoned["steps"] for i in s["input_items"]}
    assert asked and not asked & answered
    # Its status as the viewer derives it: running inside the demo's idle window, then abandoned.
    ended = datetime.fromisoformat(last["started_at"]) + timedelta(
        milliseconds=last["latency_ms"] or 0
    )

    # Read right after the run: still inside the demo's idle window, or just past it.
    assert abandoned["status"] in ("running", "abandoned")

    def status(seconds_later: float) -> str:
        ending = Ending(
            stored=None,
            last_stop=last["stop_reason"],
            last_step_end=ended,
            last_refusal_at=None,
            last_step_start=datetime.fromisoformat(last["started_at"]),
            open_calls=None,
            now=ended + timedelta(seconds=seconds_later),
            idle_seconds=DEMO_IDLE_SECONDS,
        )
        return status_of(ending)

    assert status(DEMO_IDLE_SECONDS) == "abandoned"
    assert status(0) == "running"


def test_every_trace_has_a_cost(demo: dict[str, Any]) -> None:
    pricer = Pricer()
    for trace in demo["traces"]:
        costs = []
        for step in trace["steps"]:
            usage = step["usage"]
            if usage["prompt_tokens"] is None:  # a broken stream reports no usage
                continue
            fields = {k: usage[k] for k in Usage.__slots__ if k in usage}
            cost = pricer.cost(Usage(**fields), step["model"])
            assert cost.usd is not None and cost.usd > 0, (step["model"], cost.source)
            assert usage["completion_tokens"] and usage["prompt_tokens"] > 200
            if "cost_usd" in step:  # the store records the price it computed
                assert step["cost_usd"] and step["cost_source"] == "genai-prices"
            costs.append(cost.usd)
        assert costs, trace["id"]


def test_demo_idle_window_yields_to_an_explicit_setting() -> None:
    from gateway.demo.main import _idle_seconds

    assert _idle_seconds(Settings()) == DEMO_IDLE_SECONDS
    assert _idle_seconds(Settings(trace_idle_seconds=60)) == 60


def test_a_second_demo_leaves_a_running_ones_database_alone(tmp_path: Path) -> None:
    """A demo beside a running one on the same database stops with one line and exit 2,
    before it deletes anything: the first one's traces and database stay."""
    first = _cli(tmp_path)
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if "Serving until Ctrl-C" in line:
                break
        database = tmp_path / "cli.db"
        size = database.stat().st_size
        second = _cli(tmp_path, "--once")
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2
        assert err.strip().splitlines() == [
            f"loopwatch: database {database} is in use by a running loopwatch: stop it, or "
            "give the demo another --database-url"
        ]
        assert database.stat().st_size >= size
        engine = make_engine(f"sqlite:///{database}")
        try:
            assert len(queries.list_traces(engine, limit=50)["traces"]) >= 5
        finally:
            engine.dispose()
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0
    # Once it stopped, a new demo may empty the database again.
    again = _cli(tmp_path, "--once")
    _, err = again.communicate(timeout=60)
    assert again.returncode == 0, err


@pytest.mark.parametrize(
    ("url", "line"),
    [
        (
            "sqlite:////nonexistent-loopwatch/dir/demo.db",
            "loopwatch: cannot open database sqlite:////nonexistent-loopwatch/dir/demo.db: "
            "unable to open database file",
        ),
        (
            "postgresql://lw:secret@127.0.0.1:1/lw",
            "loopwatch: cannot open database postgresql://lw:***@127.0.0.1:1/lw",
        ),
    ],
)
def test_a_demo_that_cannot_open_its_database_says_so_in_one_line(url: str, line: str) -> None:
    command = [sys.executable, "-m", "gateway", "demo", "--once", "--port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    result = subprocess.run(
        [*command, "--database-url", url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    (only,) = result.stderr.strip().splitlines()
    assert only.startswith(line) and "secret" not in only


def test_a_demo_on_a_taken_port_deletes_nothing(tmp_path: Path) -> None:
    import socket

    database = tmp_path / "cli.db"
    database.write_bytes(b"kept")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "gateway", "demo", "--once", "--port", str(port)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
        result = subprocess.run(
            [*command, "--database-url", f"sqlite:///{database}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"loopwatch: cannot listen on 127.0.0.1:{port}: address already in use"
    ]
    assert database.read_bytes() == b"kept"


def test_mcp_run_executes_its_tool_on_the_built_in_server(demo: dict[str, Any]) -> None:
    from gateway.store.read import mcp as reads

    [run] = [r for r in demo["runs"] if "MCP" in r.title]
    assert run.outcome == "completed" and run.steps == 2
    engine = make_engine(f"sqlite:///{demo['path']}")
    try:
        [execution] = reads.trace_executions(engine, str(run.trace_id))
    finally:
        engine.dispose()
    assert (execution["server"], execution["tool"], execution["join"]) == (
        "docs",
        "read_text_file",
        "content",
    )
    assert execution["outcome"] == "ok" and execution["delivery"] == "delivered"


def test_subagent_run_is_a_tree_of_two_runs(demo: dict[str, Any]) -> None:
    """The orchestrator's research_agent call started the sub-agent's run: listed under its
    root alone, linked both ways to the call, the tree's totals the sums of the two runs'."""
    root = _run_trace(demo, "sub-agent")
    [call] = [c for s in root["steps"] for c in _calls(s)]
    assert call["tool_name"] == "research_agent"
    [child] = demo["children"]
    assert child["parent"] == {"id": root["id"], "call_id": call["call_id"]}
    assert (child["root_trace_id"], child["depth"], root["depth"]) == (root["id"], 1, 0)
    [listed] = root["children"]
    assert (listed["id"], listed["call_id"], listed["steps"]) == (
        child["id"],
        call["call_id"],
        child["step_count"],
    )
    tools = {c["tool_name"] for s in child["steps"] for c in _calls(s)}
    assert tools == {"get_weather", "find_trails"}
    assert (root["status"], child["status"]) == ("completed", "completed")
    assert not root["violations"] and not child["violations"]
    tree = root["tree"]
    assert (tree["traces"], tree["steps"]) == (2, root["step_count"] + child["step_count"])
    assert tree["cost"] == pytest.approx(root["cost_usd"] + child["cost_usd"])
    [run] = [r for r in demo["runs"] if r.trace_id == root["id"]]
    assert child["id"] in " ".join(run.log) and child["id"] in demo["out"]


def test_a_new_demo_starts_with_an_empty_budget_ledger(tmp_path: Path) -> None:
    """The ledger file beside the store counts the removed traces' budgets: it goes with them."""
    database = tmp_path / "demo.db"
    kept = [tmp_path / "other.db-ledger"]
    removed = [Path(f"{database}{suffix}") for suffix in ("", "-ledger", "-ledger-wal")]
    for path in removed + kept:
        path.write_bytes(b"x")
    reset_database(f"sqlite:///{database}")
    assert [path.exists() for path in removed] == [False, False, False]
    assert kept[0].exists()
