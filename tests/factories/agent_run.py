"""A long coding-agent run, written straight to a store: for the viewer's size test and
bench/ui_bench.py. Timings follow real loops: the agent's tool time dwarfs model time."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.config import RedactionSettings
from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.redaction.redactor import Redactor
from gateway.step import StepRecord

AGENT_PROMPT = (
    "You are a coding agent working in a Python repository. Read files before you change "
    "them, run the tests after every change, and keep answers short. "
) * 12
TOOLS = ("read_file", "grep", "run_tests", "write_file", "list_dir")


def _tool_output(name: str, rng: random.Random, seq: int) -> str:
    if name == "read_file":
        first = rng.randint(1, 300)
        head = [f"{first:4d}  def handler_{seq}(request):  # {rng.random():.4f}"]
        body = [
            f"{first + i:4d}      value = compute(request, {i})"
            for i in range(1, rng.randint(20, 90))
        ]
        return "\n".join(head + body)
    if name == "grep":
        hits = [
            {"path": f"src/mod_{i}.py", "line": rng.randint(1, 400), "text": "ok()"}
            for i in range(8)
        ]
        return json.dumps(hits)
    if name == "run_tests":
        passed = [f"tests/test_{i}.py::test_case PASSED" for i in range(rng.randint(5, 40))]
        return "\n".join([*passed, "======== 1 failed, 40 passed in 3.2s ========"])
    if name == "list_dir":
        return json.dumps({"entries": [f"file_{i}.py" for i in range(rng.randint(3, 30))]})
    return json.dumps({"written": True, "bytes": rng.randint(100, 9000)})


@dataclass
class _Run:
    trace_id: str
    rng: random.Random
    at: datetime
    inputs: list[Item]
    records: list[StepRecord] = field(default_factory=list)

    def step(self, seq: int, outputs: list[Item], stop: StopReason, **fields: Any) -> StepRecord:
        latency = fields.pop("latency_ms", self.rng.uniform(800, 4000))
        prompt = 2000 + 150 * seq
        record = StepRecord(
            id=fields.pop("id", f"{self.trace_id}-s{seq}"),
            trace_id=self.trace_id,
            protocol="chat",
            method="POST",
            path="/v1/chat/completions",
            started_at=self.at,
            model="gpt-4o-2024-08-06",
            stream=True,
            http_status=200,
            stop_reason=stop,
            raw_stop_reason=stop.value,
            usage=Usage(prompt, 120, prompt + 120, cached_tokens=prompt - 400),
            provider_request_id=f"req_{self.trace_id}_{seq}",
            response_id=f"chatcmpl-{self.trace_id}-{seq}",
            latency_ms=latency,
            ttft_ms=self.rng.uniform(300, 900),
            input_items=list(self.inputs),
            output_items=outputs,
            **fields,
        )
        self.records.append(record)
        self.at += timedelta(milliseconds=latency)
        return record

    def calls(self, seq: int, count: int) -> list[Item]:
        return [
            Item(
                ItemKind.TOOL_CALL,
                role="assistant",
                call_id=f"call_{seq:03d}_{n}",
                tool_name=(name := self.rng.choice(TOOLS)),
                arguments=json.dumps(
                    {"path": f"src/mod_{self.rng.randint(1, 60)}.py", "why": name}
                ),
            )
            for n in range(count)
        ]

    def answer(self, seq: int, calls: list[Item]) -> None:
        """The agent runs the tools; their results are the next request's new items."""
        self.at += timedelta(milliseconds=self.rng.uniform(500, 12_000))
        self.inputs = [
            Item(
                ItemKind.TOOL_RESULT,
                role="tool",
                call_id=c.call_id,
                text=_tool_output(c.tool_name or "", self.rng, seq),
            )
            for c in calls
        ]


def long_run(
    trace_id: str = "long-run",
    steps: int = 300,
    *,
    seed: int = 7,
    big_result_chars: int = 356_000,
    parallel_at: int = 5,
    retry_at: int = 9,
) -> list[StepRecord]:
    """One run's steps, redacted as the recorder redacts them: 20 parallel calls at step
    `parallel_at`, a huge test log after them, a stream cut off before step `retry_at`."""
    intro = [
        Item(ItemKind.INSTRUCTION, role="system", text=AGENT_PROMPT),
        Item(
            ItemKind.USER, role="user", text="Fix the failing checkout test and explain the cause."
        ),
    ]
    run = _Run(trace_id, random.Random(seed), datetime(2025, 3, 1, 9, 0, tzinfo=UTC), intro)
    for seq in range(1, steps):
        calls = run.calls(seq, 20 if seq == parallel_at else run.rng.choice((1, 1, 1, 2, 3)))
        if seq == retry_at:  # the stream dies mid-arguments; the agent resends the request
            cut = calls[0].with_changes(arguments='{"path": "src/mo', attrs={"incomplete": True})
            died = Violation(
                ViolationKind.STREAM_INTERRUPTED, "The stream ended mid-arguments.", cut.call_id
            )
            run.step(seq, [cut], StopReason.INTERRUPTED, id=f"{trace_id}-cut", violations=[died])
            run.at += timedelta(milliseconds=400)
        bad = [
            Violation(
                ViolationKind.INVALID_TOOL_ARGUMENTS, "Arguments miss 'path'.", calls[0].call_id
            )
        ]
        text = Item(
            ItemKind.ASSISTANT_TEXT, role="assistant", text=f"Step {seq}: checking the next file."
        )
        run.step(
            seq, [text, *calls], StopReason.TOOL_CALLS, violations=bad if seq % 97 == 0 else []
        )
        run.answer(seq, calls)
        if seq == parallel_at:  # one huge test log whose error sits at its end
            log = "\n".join(
                f"collecting tests/test_{i}.py ... ok" for i in range(big_result_chars // 36)
            )
            run.inputs[0] = run.inputs[0].with_changes(
                text=log + "\nE   KeyError: 'checkout'\nFAILED"
            )
    done = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="Fixed: the cache key was stale.")
    run.step(steps, [done], StopReason.COMPLETED)
    redactor = Redactor(RedactionSettings())
    return [redactor.redact_step(record) for record in run.records]
