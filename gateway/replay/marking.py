"""What a replay's gateway records each step with: the recorded trace it replays and, once
the player found the agent's requests leaving the recording, the step where they did."""

from __future__ import annotations

from dataclasses import replace

from gateway.replay.player import Player
from gateway.step import Replay, StepRecord


class ReplayMarks:
    """`StepBus.marks` of a replay. A step recorded after the divergence names it too: its
    trace keeps the earliest, so a step of the recording ending late changes nothing."""

    def __init__(self, replay_of: str, player: Player) -> None:
        self._replay_of = replay_of
        self._player = player

    def __call__(self, record: StepRecord) -> StepRecord:
        return replace(record, replay=Replay(self._replay_of, self._player.left_at))
