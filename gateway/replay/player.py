"""The replay's course, sans-IO: which recorded step answers the next request, and when the
agent's requests stop matching the recording (then the replay fails or goes live)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.items import Item
from gateway.protocols.base import ProtocolAdapter
from gateway.replay.compare import Divergence, first_difference
from gateway.replay.tape import Step


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer with this recorded step."""

    step: Step


@dataclass(frozen=True, slots=True)
class Diverged:
    """The request differs from the recording; `live`: forward it (and every later one)."""

    divergence: Divergence
    live: bool


@dataclass(frozen=True, slots=True)
class GoLive:
    """The replay diverged earlier in live mode: forward the request."""


class Player:
    def __init__(self, steps: list[Step], *, live: bool) -> None:
        self._steps = steps
        self._next = 0
        self._live = live
        self.diverged_at: int | None = None  # the step number where a live replay left
        self.left_at: int | None = None  # where the requests first differed, either mode

    def play(
        self, adapter: ProtocolAdapter, path: str, items: list[Item]
    ) -> Answer | Diverged | GoLive:
        if self.diverged_at is not None:
            return GoLive()
        divergence = self._check(adapter, path, items)
        if divergence is None:
            self._next += 1
            return Answer(self._steps[self._next - 1])
        if self.left_at is None:
            self.left_at = divergence.seq
        if self._live:
            self.diverged_at = divergence.seq
        return Diverged(divergence, self._live)

    @property
    def played(self) -> int:
        """How many recorded steps have answered a request."""
        return self._next

    @property
    def unplayed(self) -> list[Step]:
        """The recorded steps no request has been answered with yet."""
        return self._steps[self._next :]

    def _check(self, adapter: ProtocolAdapter, path: str, items: list[Item]) -> Divergence | None:
        seq = self._steps[self._next].seq if self._next < len(self._steps) else None
        if seq is None:  # the recording ended before the agent did
            last = self._steps[-1].seq if self._steps else 0
            added = first_difference(last + 1, [], items)
            return added or Divergence(last + 1, 0, None, _request(path))
        step = self._steps[self._next]
        if step.path != path:
            return Divergence(seq, 0, _request(step.path), _request(path))
        recorded = adapter.parse_request(step.request["body"]).items
        return first_difference(seq, recorded, items)


def _request(path: str) -> dict[str, Any]:
    return {"kind": "request", "text": path}
