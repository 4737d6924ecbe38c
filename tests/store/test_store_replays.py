"""A replay's trace in the store: `replay_of` from its first stored step, `diverged_at` the
earliest step any of its steps names, whatever the batches' order (a later batch only ever
moves it earlier); the original's detail lists its replays; the spool keeps the mark."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.recording import codec
from gateway.step import Replay, StepRecord
from gateway.store.read.queries import get_trace
from gateway.store.write.writer import StoreWriter

MakeStep = Callable[..., StepRecord]


def _replay_columns(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        query = sa.text("SELECT id, replay_of, diverged_at FROM traces ORDER BY id")
        return [tuple(row) for row in conn.execute(query)]


def test_the_earliest_divergence_wins_across_batches(engine: Engine, make_step: MakeStep) -> None:
    writer = StoreWriter(engine)
    step = make_step
    writer.write_batch([step("t-r", step_id="s1", replay=Replay("t-orig"))])
    assert _replay_columns(engine) == [("t-r", "t-orig", None)]
    # Step 3 diverged; a step of the recording stored late says so too, and so does step 4.
    writer.write_batch([step("t-r", step_id="s3", replay=Replay("t-orig", 3))])
    writer.write_batch([step("t-r", step_id="s4", replay=Replay("t-orig", 4))])
    assert _replay_columns(engine) == [("t-r", "t-orig", 3)]
    writer.write_batch([step("t-r", step_id="s2", replay=Replay("t-orig", 2))])
    assert _replay_columns(engine) == [("t-r", "t-orig", 2)]


def test_a_first_batch_takes_its_earliest_divergence(engine: Engine, make_step: MakeStep) -> None:
    marks = [Replay("t-orig"), Replay("t-orig", 5), Replay("t-orig", 4)]
    steps = [make_step("t-r", step_id=f"s{n}", replay=m) for n, m in enumerate(marks)]
    StoreWriter(engine).write_batch([*steps, make_step("t-plain", step_id="p1")])
    assert _replay_columns(engine) == [("t-plain", None, None), ("t-r", "t-orig", 4)]


def test_the_original_lists_its_replays(engine: Engine, make_step: MakeStep) -> None:
    writer = StoreWriter(engine)
    writer.write_batch([make_step("t-orig", step_id="o1")])
    writer.write_batch([make_step("t-a", step_id="a1", replay=Replay("t-orig"))])
    writer.write_batch([make_step("t-b", step_id="b1", replay=Replay("t-orig", 1))])
    original = get_trace(engine, "t-orig")
    assert original is not None and original["replay_of"] is None
    listed = [(r["id"], r["steps"], r["diverged_at"]) for r in original["replays"]]
    assert sorted(listed) == [("t-a", 1, None), ("t-b", 1, 1)]
    replay = get_trace(engine, "t-b")
    assert replay is not None
    assert (replay["replay_of"], replay["diverged_at"], replay["replays"]) == ("t-orig", 1, [])


def test_the_spool_keeps_a_steps_replay(make_step: MakeStep) -> None:
    marked = make_step("t-r", replay=Replay("t-orig", 3))
    decoded = codec.decode(codec.encode(marked))
    assert isinstance(decoded, StepRecord) and decoded.replay == Replay("t-orig", 3)
    plain = codec.decode(codec.encode(make_step("t-p")))
    assert isinstance(plain, StepRecord) and plain.replay is None
