"""Which runs end abandoned, as this process saw them: a run waiting on a running sub-agent
is not idle."""

from __future__ import annotations

from datetime import timedelta

from gateway.runs.abandonment import AbandonWatch
from gateway.step import Lineage
from tests.factories import T0, build_step


def test_a_parent_waiting_on_its_running_sub_agent_is_not_abandoned() -> None:
    watch = AbandonWatch(idle_seconds=300, limit=100)
    watch.step(build_step("parent", at=T0))  # its Agent call open, waiting on the child
    child = Lineage("parent", 1, "parent", "call_1", "content")
    watch.step(build_step("child", at=T0 + timedelta(seconds=250), lineage=child))
    # 400 s after the parent's step, 150 s after the child's: neither is idle.
    assert watch.abandoned(T0 + timedelta(seconds=400)) == 0
    # Both idle at last, their calls open: each counted once.
    assert watch.abandoned(T0 + timedelta(seconds=900)) == 2


def test_without_a_sub_agent_the_same_wait_is_abandoned() -> None:
    watch = AbandonWatch(idle_seconds=300, limit=100)
    watch.step(build_step("parent", at=T0))
    watch.step(build_step("other", at=T0 + timedelta(seconds=250)))
    assert watch.abandoned(T0 + timedelta(seconds=400)) == 1
