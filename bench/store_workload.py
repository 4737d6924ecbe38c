"""Realistic agent steps for `store_scale.py`: multi-step tool loops of several models in
sessions, many runs interleaved in each batch as a busy gateway records them.

Text comes from a vocabulary with a few very common words and a long tail; one marked word
(`RARE_WORD`) sits in about one trace in a thousand, another (`COMMON_WORD`) in nearly all.
Time advances evenly from `start` over `days`, so the oldest tenth is a retention target
and any past day holds its share of traces.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.step import StepRecord

RARE_WORD = "quokkaridge"
COMMON_WORD = "file"
LONG_TRACE_STEPS = 300
MODELS = (  # a quarter of the runs on a Claude model
    "gpt-4o-2024-08-06",
    "gpt-4o-mini",
    "o3-mini",
    "claude-sonnet-4-20250514",
    "gpt-4.1",
    "gemini-2.5-flash",
    "claude-3-5-haiku-latest",
    "gpt-4.1-mini",
)
TOOLS = ("read_file", "grep", "run_tests", "write_file", "list_dir", "web_search")
_COMMON = [
    "the",
    "to",
    "of",
    "and",
    "a",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "this",
    "be",
    "are",
    "at",
    "by",
    "not",
    "or",
    "from",
    "have",
    "an",
    "file",
    "test",
    "function",
    "value",
    "error",
    "result",
    "call",
    "return",
    "request",
    "line",
    "module",
    "path",
]
_TAIL = [f"{stem}{n}" for stem in ("handler", "cache", "order", "node", "span") for n in range(400)]
_SYSTEM = (
    "You are a coding agent working in a repository. Read each file before you change it, "
    "run the tests after every change and keep your answers short. "
) * 8
_DECLARED = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the working tree",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in TOOLS
]


def words(rng: random.Random, count: int) -> str:
    """Zipf-like text: most words common, one in five from a long tail."""
    picked = [
        rng.choice(_TAIL) if rng.random() < 0.2 else _COMMON[int(rng.paretovariate(1.2)) % 30]
        for _ in range(count)
    ]
    return " ".join(picked)


def _hex(rng: random.Random, bits: int) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


@dataclass
class Run:
    """One agent run being recorded: its id, model, session, clock and pending tool calls."""

    trace_id: str
    model: str
    session_id: str
    steps_left: int
    rare: bool
    seq: int = 0
    pending: list[Item] = field(default_factory=list)


class Workload:
    """Yields batches of step records; `start` + `days` spans the whole fill."""

    def __init__(self, total_steps: int, *, start: datetime, days: float, seed: int = 11) -> None:
        self.rng = random.Random(seed)
        self.total = total_steps
        self.start = start
        self.tick = timedelta(days=days) / max(total_steps, 1)
        self.made = 0
        self.traces = 0
        self.active: list[Run] = []
        self.long_trace_id: str | None = None
        self.sample_trace_ids: list[str] = []  # every thousandth run, for the read API

    def now(self) -> datetime:
        return self.start + self.tick * self.made

    def batches(self, size: int, concurrent: int = 64) -> Iterator[list[StepRecord]]:
        while self.made < self.total:
            batch = []
            for _ in range(min(size, self.total - self.made)):
                while len(self.active) < concurrent:
                    self.active.append(self._new_run())
                run = self.active[self.rng.randrange(len(self.active))]
                batch.append(self._step(run))
                if run.steps_left == 0:
                    self.active.remove(run)
            yield batch

    def _new_run(self) -> Run:
        rng = self.rng
        self.traces += 1
        at_ms = int(self.now().timestamp() * 1000)
        trace_id = f"tr-{at_ms:012x}{_hex(rng, 64)}"
        steps = max(1, int(rng.lognormvariate(2.1, 0.6)))  # about 10 a run on average
        if self.long_trace_id is None and self.made >= self.total // 2:
            self.long_trace_id, steps = trace_id, LONG_TRACE_STEPS
        if self.traces % 1000 == 7:
            self.sample_trace_ids.append(trace_id)
        session = f"sess-{self.traces // 5:08d}-{_hex(rng, 24)}" if rng.random() < 0.9 else ""
        return Run(
            trace_id,
            rng.choice(MODELS),
            session,
            steps,
            rare=rng.random() < 0.001,
        )

    def _inputs(self, run: Run) -> list[Item]:
        rng = self.rng
        if run.seq == 1:
            ask = f"Fix the failing {COMMON_WORD} test: {words(rng, 30)}"
            if run.rare:
                ask += f" ({RARE_WORD})"
            return [
                Item(ItemKind.INSTRUCTION, role="system", text=_SYSTEM),
                Item(ItemKind.USER, role="user", text=ask),
            ]
        results = [
            Item(
                ItemKind.TOOL_RESULT,
                role="tool",
                call_id=call.call_id,
                text=words(rng, rng.randint(40, 400)),
            )
            for call in run.pending
        ]
        return results or [Item(ItemKind.USER, role="user", text=words(rng, 12))]

    def _outputs(self, run: Run) -> tuple[list[Item], StopReason]:
        rng = self.rng
        text = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=words(rng, rng.randint(8, 60)))
        if run.steps_left == 0:
            return [text], StopReason.COMPLETED
        calls = [
            Item(
                ItemKind.TOOL_CALL,
                role="assistant",
                call_id=f"call_{_hex(rng, 96)}",
                tool_name=(name := rng.choice(TOOLS)),
                arguments=json.dumps({"path": f"src/{rng.choice(_TAIL)}.py", "why": name}),
            )
            for _ in range(rng.choice((1, 1, 1, 2, 3)))
        ]
        return [text, *calls], StopReason.TOOL_CALLS

    def _step(self, run: Run) -> StepRecord:
        rng = self.rng
        run.seq += 1
        run.steps_left -= 1
        inputs = self._inputs(run)
        outputs, stop = self._outputs(run)
        run.pending = [item for item in outputs if item.kind is ItemKind.TOOL_CALL]
        prompt = 1500 + 400 * run.seq
        violations = []
        if rng.random() < 0.02 and run.pending:
            violations = [
                Violation(ViolationKind.INVALID_TOOL_ARGUMENTS, "arguments miss 'path'", None)
            ]
        self.made += 1
        return StepRecord(
            id=f"st-{int(self.now().timestamp() * 1000):012x}{_hex(rng, 64)}",
            trace_id=run.trace_id,
            protocol="chat",
            method="POST",
            path="/v1/chat/completions",
            started_at=self.now(),
            model=run.model,
            stream=True,
            http_status=200,
            stop_reason=stop,
            raw_stop_reason=stop.value,
            usage=Usage(prompt, 150, prompt + 150, cached_tokens=prompt // 2),
            provider_request_id=f"req_{_hex(rng, 96)}",
            response_id=f"chatcmpl-{_hex(rng, 96)}",
            latency_ms=rng.uniform(400, 4000),
            ttft_ms=rng.uniform(200, 900),
            input_items=inputs,
            output_items=outputs,
            violations=violations,
            continuation_key=_hex(rng, 256),
            cost_nano=rng.randint(10_000, 9_000_000),
            cost_source="genai-prices",
            session_id=run.session_id or None,
            declared_tools=_DECLARED,
            params={"temperature": 0.2, "max_tokens": 4096},
        )
