"""What a user reads of a tree of runs, an agent and the sub-agents it started, through the
read API: the list shows the root alone, each child is linked both ways to the call that
started it, and the tree's totals are the sums of its runs' (DESIGN.md, Agents that spawn
agents)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import Gateway


def calls_to(trace: dict[str, Any], tool: str) -> list[str]:
    """The ids of the trace's calls to `tool`, in order."""
    return [
        item["call_id"]
        for step in sorted(trace["steps"], key=lambda s: s["seq"])
        for item in step["output_items"]
        if item["kind"] == "tool_call" and item["tool_name"] == tool
    ]


async def tree(gw: Gateway, root_id: str) -> list[dict[str, Any]]:
    """Every run of the root's tree, the root first, as the detail API shows each."""
    listed = await gw.traces(include_children="true", limit="200")
    ids = [t["id"] for t in listed if t.get("root_trace_id", t["id"]) == root_id]
    ids.sort(key=lambda i: i != root_id)
    return [await gw.trace(i) for i in ids]


async def assert_one_root_with_children(gw: Gateway, tool: str, *, children: int) -> Any:
    """One listed run holds the calls to `tool`; every other run of its tree is its child,
    one a call, linked both ways. Returns the root and its children."""
    roots = [await gw.trace(t["id"]) for t in await gw.traces()]
    starting = [r for r in roots if calls_to(r, tool)]
    assert len(starting) == 1, [(r["id"], r["step_count"]) for r in roots]
    root = starting[0]
    assert (root["parent"], root["depth"], root["root_trace_id"]) == (None, 0, root["id"])
    runs = await tree(gw, root["id"])
    kids = runs[1:]
    assert len(kids) == children, [(r["id"], r.get("parent")) for r in runs]
    assert {k["id"] for k in kids}.isdisjoint({r["id"] for r in roots}), "a child listed as root"
    by_call = {(k.get("parent") or {}).get("call_id"): k for k in kids}
    assert sorted(map(str, by_call)) == sorted(calls_to(root, tool)), [
        k.get("parent") for k in kids
    ]
    for call_id, kid in by_call.items():
        assert_child_of(root, kid, str(call_id))
    return root, kids


def assert_child_of(parent: dict[str, Any], child: dict[str, Any], call_id: str) -> None:
    """The child names its parent and the call; the parent lists the child with that call
    and the child's own figures; the child sits one level below, in the parent's tree."""
    assert child["parent"] == {"id": parent["id"], "call_id": call_id}
    assert child["root_trace_id"] == parent["root_trace_id"]
    assert child["depth"] == parent["depth"] + 1
    listed = [c for c in parent["children"] if c["id"] == child["id"]]
    assert listed == [
        {
            "id": child["id"],
            "status": child["status"],
            "steps": child["step_count"],
            "cost": child["cost_usd"],
            "duration": child["duration_ms"],
            "call_id": call_id,
        }
    ]


def assert_tree_totals(root: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """The root's tree totals are its runs' sums; the tree lasts from the first request to
    the last answer, so at least as long as any of its runs. Every run and the list say the
    same totals."""
    totals = root["tree"]
    assert totals["traces"] == len(runs)
    assert totals["steps"] == sum(r["step_count"] for r in runs)
    assert totals["input_tokens"] == sum(r["usage"]["prompt_tokens"] or 0 for r in runs)
    assert totals["output_tokens"] == sum(r["usage"]["completion_tokens"] or 0 for r in runs)
    assert totals["cost"] == pytest.approx(sum(r["cost_usd"] for r in runs))
    assert totals["duration"] >= max(r["duration_ms"] for r in runs)
    assert all(r["tree"] == totals for r in runs)
