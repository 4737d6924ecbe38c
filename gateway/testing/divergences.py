"""The replay server's refusals, kept: an agent may swallow the SDK's error, the test still
fails with the one-line summary and the diff the server answered."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway.replay.player import Player
from gateway.replay.server import PLAYER

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
DIVERGED = 409  # the replay server's answer to a request that differs from the recording


@dataclass
class Divergences:
    found: list[str] = field(default_factory=list)  # summary and diff, a text each
    player: Player | None = None

    def watch(self, app: web.Application) -> None:
        app.middlewares.append(self._keeping)
        self.player = app[PLAYER]

    def failures(self) -> list[str]:
        """What fails the test: each divergence, or else a recording the agent left unplayed
        (it stopped sooner than when recorded)."""
        if self.found or self.player is None or not self.player.unplayed:
            return self.found
        left = self.player.unplayed
        total = len(left) + self.player.played
        first = left[0]
        return [
            f"the agent stopped before the recording did: it made {self.player.played} of "
            f"the {total} recorded requests; next would have been step {first.seq} "
            f"(POST {first.path})"
        ]

    @web.middleware
    async def _keeping(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        if response.status == DIVERGED and isinstance(response, web.Response):
            self.found.append(_described(response.body))
        return response


def _described(body: Any) -> str:
    """The error's message then its diff, found wherever the protocol's error shape nests
    them; the whole body when neither is there."""
    try:
        error = _holding_diff(json.loads(bytes(body)))
    except (TypeError, ValueError):
        error = None
    if error is None:
        return bytes(body or b"").decode("utf-8", "replace")
    diff = json.dumps(error["diff"], indent=2, ensure_ascii=False)
    return f"{error.get('message', 'replay diverged')}\ndiff:\n{diff}"


def _holding_diff(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        if "diff" in value:
            return value
        return next((d for v in value.values() if (d := _holding_diff(v)) is not None), None)
    return None
