"""The recorder process's CPU per record, and its batches and wake-ups, at steady rates.

This process spools agent-like step records (8-step runs declaring the same tools, each step
adding a tool result and an answer to its history) at a fixed rate into a spool, as a
gateway does; a real recorder process (`gateway.recording.process`) stores them in a fresh
SQLite file. A fixed rate gives the same batches whatever the machine's load, so the CPU
time per record compares across runs. Usage:
  python bench/recorder_cpu.py [--rates 50,200,800] [--seconds 6] [--flush-seconds 0.1]
Run from the checkout to measure (the recorder process imports `gateway` from the cwd).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from idle_cpu import cpu_seconds  # this folder: run as a script
from profile_load import ANSWER_ARGS, SYSTEM, TOOLS, USAGE

from gateway.config import Settings
from gateway.items import Item, ItemKind, StopReason, Usage
from gateway.recording import ownership
from gateway.recording import process as recorder_process
from gateway.recording.spooler import WRITER_NAME, SpoolRecorder
from gateway.step import StepRecord
from gateway.store.engine import create_schema, make_engine

STEPS_A_RUN = 8


def step(trace: str, number: int) -> StepRecord:
    """Step `number` of a run: the first brings the instructions, each later one the result
    of the previous step's call and a user turn."""
    call = f"call_{trace[-8:]}_{number:04d}"
    result = json.dumps({"series": [{"at": f"02:{m:02d}", "ms": 200 + m} for m in range(6)]})
    items = [
        Item(ItemKind.TOOL_RESULT, "tool", result, call_id=f"call_{trace[-8:]}_{number - 1:04d}"),
        Item(ItemKind.USER, "user", f"Step {number}: and what about the error rate now?"),
    ]
    if number == 0:
        items = [Item(ItemKind.INSTRUCTION, "system", SYSTEM), items[1]]
    output = Item(ItemKind.TOOL_CALL, "assistant", None, call, "forecast", ANSWER_ARGS)
    return StepRecord(
        id="s_" + secrets.token_hex(12),
        trace_id=trace,
        protocol="chat",
        method="POST",
        path="/v1/chat/completions",
        started_at=datetime.now(UTC),
        model="gpt-4o-mini",
        http_status=200,
        stop_reason=StopReason.TOOL_CALLS,
        usage=Usage(**USAGE),
        latency_ms=412.5,
        input_items=items,
        output_items=[output],
        continuation_key=secrets.token_hex(16),
        declared_tools=tuple(TOOLS),
        params={"tool_choice": "auto"},
    )


def records() -> Iterator[StepRecord]:
    runs = 32
    traces = ["t_" + secrets.token_hex(12) for _ in range(runs)]
    number = 0
    while True:
        for trace in traces:
            yield step(trace, number % STEPS_A_RUN)
        number += 1
        if number % STEPS_A_RUN == 0:
            traces = ["t_" + secrets.token_hex(12) for _ in range(runs)]


async def one_rate(spool: SpoolRecorder, pid: int, rate: int, seconds: float) -> None:
    source = records()
    await asyncio.sleep(0.5)
    before = cpu_seconds(pid)
    counters = spool.progress.snapshot()
    spool.new_batches()
    began = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - began < seconds:
        due = int((now - began) * rate)
        while sent < due:
            spool.submit(next(source))
            sent += 1
        await asyncio.sleep(0.005)
    await spool.flush(timeout=60)
    used = cpu_seconds(pid) - before
    after = spool.progress.snapshot()
    batches = after["batches"] - counters["batches"]
    wakeups = after["wakeups"] - counters["wakeups"]
    print(
        f"  {rate:5d} records/s: {1000 * used / sent:.3f} ms CPU per record, "
        f"{sent / max(batches, 1):.1f} records per batch, {wakeups} wake-ups "
        f"({sent} records)"
    )


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lw-recorder-"))
    settings = Settings(database_url=f"sqlite:///{tmp}/bench.db", spool_dir=str(tmp / "spool"))
    if args.flush_seconds is not None:
        settings = settings.model_copy(update={"recorder_flush_seconds": args.flush_seconds})
    create_schema(make_engine(settings.database_url))
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"recorder CPU per record, load {load}")
    with ownership.own(settings.spool_path()) as directory:
        spool = SpoolRecorder(directory, WRITER_NAME, queue_size=settings.recorder_queue_size)
        process = recorder_process.start(settings, directory, [WRITER_NAME])
        try:
            await asyncio.sleep(2)  # up and idle
            for rate in args.rates:
                await one_rate(spool, process.pid, rate, args.seconds)
        finally:
            spool.close()
            await recorder_process.stop_process(process)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rates", type=lambda v: [int(r) for r in v.split(",")], default=[50, 200, 800]
    )
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--flush-seconds", type=float, default=None, help="the setting's value")
    asyncio.run(main(parser.parse_args()))
