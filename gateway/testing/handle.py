"""What a test holds as `loopwatch`: the gateway's base URLs, its stored traces, and
assertions whose messages name the trace and what went wrong."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gateway.app import DEPS
from gateway.store.read import queries
from gateway.testing.loop_thread import LoopThread
from gateway.testing.served import Served

SETTLE_SECONDS = 10.0
MAX_TRACES = 1000


class Loopwatch:
    def __init__(self, thread: LoopThread, gateway: Served) -> None:
        self._thread = thread
        self._gateway = gateway

    @property
    def url(self) -> str:
        """The gateway's root (its UI and read API)."""
        return self._gateway.url

    @property
    def base_url(self) -> str:
        """The OpenAI base URL: `openai.OpenAI(base_url=loopwatch.base_url)`."""
        return f"{self._gateway.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The Anthropic base URL: `anthropic.Anthropic(base_url=loopwatch.anthropic_base_url)`."""
        return self._gateway.url

    def settle(self) -> None:
        """Wait until every request answered so far has its step stored."""
        deps = self._gateway.app[DEPS]
        self._thread.run(self._gateway.idle(SETTLE_SECONDS))
        self._thread.run(deps.open_responses.settled())
        self._thread.run(deps.recorder.flush(timeout=SETTLE_SECONDS))

    def traces(self) -> list[dict[str, Any]]:
        """Every trace of the test (sub-agents' included), oldest first, with its steps."""
        self.settle()
        engine = self._gateway.app[DEPS].engine
        listed = queries.list_traces(engine, limit=MAX_TRACES, include_children=True)["traces"]
        found = (queries.get_trace(engine, t["id"]) for t in reversed(listed))
        return [trace for trace in found if trace is not None]

    def last_trace(self) -> dict[str, Any]:
        """The trace of the latest request, once its step is stored."""
        traces = self.traces()
        if not traces:
            raise AssertionError(f"loopwatch: no request reached the gateway at {self.base_url}")
        return max(traces, key=lambda t: t["updated_at"])

    def assert_no_violations(self) -> None:
        found = []
        for trace in self.traces():
            if trace["violations"]:
                kinds = Counter(v["kind"] for v in trace["violations"])
                listed = ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()))
                found.append(f"trace {trace['id']}: {len(trace['violations'])} ({listed})")
        if found:
            raise AssertionError("loopwatch: violations found:\n  " + "\n  ".join(found))

    def assert_steps(self, max: int) -> None:
        over = [
            f"trace {t['id']} took {t['step_count']} steps"
            for t in self.traces()
            if t["step_count"] > max
        ]
        if over:
            head = f"loopwatch: more than {max} steps:\n  "
            raise AssertionError(head + "\n  ".join(over))

    def assert_cost(self, max_usd: float) -> None:
        over = [
            f"trace {t['id']} cost ${t['cost_usd']:.6f}"
            + ("" if t["cost_complete"] else " (some steps have no known price)")
            for t in self.traces()
            if (t["cost_usd"] or 0.0) > max_usd
        ]
        if over:
            head = f"loopwatch: more than ${max_usd:.6f}:\n  "
            raise AssertionError(head + "\n  ".join(over))
