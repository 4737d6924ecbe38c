"""What a user checks after an agent CLI ran through the gateway: its answer, the file its
tool wrote, and in the store one completed trace for the main loop with every call paired,
no violation, no chain of thought, and nothing sent anywhere but the gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agent_clis.runner import CallHome, Finished, Sandbox
from tests.fakes.scripted_agent import MARKER, MARKER_FILE, THOUGHT, AgentModel, final_answer
from tests.harness import Gateway


def _outline(trace: dict[str, Any]) -> str:
    lines = [f"trace {trace['id']} {trace.get('status')}: {trace['step_count']} steps"]
    for step in sorted(trace.get("steps", []), key=lambda s: s["seq"]):
        ins = [i["kind"] for i in step["input_items"]]
        outs = [i["kind"] for i in step["output_items"]]
        lines.append(f"  step {step['seq']} {step['stop_reason']}: in {ins} out {outs}")
    lines += [f"  violation {v['kind']}: {v['detail']}" for v in trace.get("violations", [])]
    return "\n".join(lines)


async def all_traces(gw: Gateway) -> list[dict[str, Any]]:
    return [await gw.trace(t["id"]) for t in await gw.traces()]


def describe(traces: list[dict[str, Any]]) -> str:
    return "\n".join(_outline(t) for t in traces)


def _items(trace: dict[str, Any], side: str, kind: str) -> list[dict[str, Any]]:
    return [i for s in trace["steps"] for i in s[side] if i["kind"] == kind]


def assert_ran(
    finished: Finished, sandbox: Sandbox, call_home: CallHome, model: AgentModel, *, output: bool
) -> None:
    """The client exited 0 printing the model's final answer (built from the tool's output,
    which has the marker when the client passes the command's output on), the tool really
    wrote the marker, and no request went anywhere but the gateway."""
    assert finished.returncode == 0, finished.explain()
    answer = model.final_text()
    assert answer and answer in finished.stdout, finished.explain()
    if output:
        assert answer == final_answer(MARKER), finished.explain()
    marker = Path(sandbox.cwd, MARKER_FILE)
    assert marker.is_file(), finished.explain()
    assert marker.read_text().strip() == MARKER
    assert call_home.requests == [], f"calls home: {call_home.requests}"


def assert_model_saw_one_loop(model: AgentModel) -> None:
    """The main loop reached the model as one shell call and one final answer."""
    moves = [seen.move for seen in model.seen]
    assert moves.count("call") == 1 and moves.count("final") == 1, model.seen


async def main_loop(gw: Gateway) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The one trace holding the tool call, and the others (side requests)."""
    traces = await all_traces(gw)
    with_calls = [t for t in traces if _items(t, "output_items", "tool_call")]
    assert len(with_calls) == 1, describe(traces)
    main = with_calls[0]
    return main, [t for t in traces if t["id"] != main["id"]]


async def assert_one_clean_trace(gw: Gateway, model: AgentModel) -> dict[str, Any]:
    """The main loop is one completed trace of two steps: its call answered by id in the
    next, which is the final answer; each side request (no shell tool declared: a title) is a
    one-step trace of its own; no violation anywhere."""
    main, others = await main_loop(gw)
    everything = describe([main, *others])
    sides = [seen for seen in model.seen if seen.move == "side"]
    assert main["step_count"] == 2, everything
    assert len(others) == len(sides), everything
    assert all(t["step_count"] == 1 for t in others), everything
    steps = sorted(main["steps"], key=lambda s: s["seq"])
    calls = {i["call_id"]: s["seq"] for s in steps for i in s["output_items"] if _call(i)}
    results = {
        i["call_id"]: s["seq"]
        for s in steps
        for i in s["input_items"]
        if i["kind"] == "tool_result"
    }
    assert len(calls) == 1, everything
    assert calls.keys() <= results.keys(), everything
    assert all(results[c] > calls[c] for c in calls), everything
    assert steps[-1]["stop_reason"] == "completed", everything
    assert [s["stop_reason"] for s in steps].count("tool_calls") == 1, everything
    assert main["status"] == "completed", everything
    assert sum(t["violation_count"] for t in [main, *others]) == 0, everything
    return main


def _call(item: dict[str, Any]) -> bool:
    return bool(item["kind"] == "tool_call")


def assert_no_thought_stored(database_url: str) -> None:
    """The model's reasoning text is nowhere in the database files."""
    path = Path(database_url.removeprefix("sqlite:///"))
    files = [p for p in path.parent.glob(path.name + "*") if p.is_file()]
    assert files, f"no database at {path}"
    for file in files:
        assert THOUGHT.encode() not in file.read_bytes(), f"reasoning stored in {file.name}"
