"""Budgets and records under write load on one SQLite gateway: 64 agents run traces under a
step budget (`X-Loopwatch-Max-Steps`), each sending two requests past it. Every request
over its budget must be refused (429), every one within it answered, and every answered
step stored once the gateway has stopped (SIGTERM).

Usage: python bench/budget_load.py [--steps 50000] [--agents 64] [--budget 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))
from idle_cpu import command_of, rss_mb, tree
from proxy_bench import free_port, wait_healthy

PAST_BUDGET = 2  # requests each trace sends after its budget is spent


@dataclass
class Tally:
    answered: list[str] = field(default_factory=list)  # step ids of 200s
    refused: int = 0
    over_budget_answered: int = 0  # must stay 0
    within_budget_refused: int = 0  # must stay 0
    errors: int = 0
    max_backlog: int = 0
    max_rss: dict[int, float] = field(default_factory=dict)  # MB, by process of the gateway


async def run_trace(
    session: aiohttp.ClientSession, url: str, trace: str, budget: int, tally: Tally
) -> None:
    headers = {"X-Loopwatch-Trace-Id": trace, "X-Loopwatch-Max-Steps": str(budget)}
    for step in range(budget + PAST_BUDGET):
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"{trace} {step}"}]}
        try:
            async with session.post(url, json=body, headers=headers) as r:
                await r.read()
                status, step_id = r.status, r.headers.get("X-Loopwatch-Step-Id")
        except aiohttp.ClientError:
            tally.errors += 1
            continue
        if status == 200 and step_id:
            tally.answered.append(step_id)
            tally.over_budget_answered += step >= budget
        elif status == 429:
            tally.refused += 1
            tally.within_budget_refused += step < budget
        else:
            tally.errors += 1


async def agent(
    session: aiohttp.ClientSession, url: str, index: int, runs: int, budget: int, tally: Tally
) -> None:
    for run in range(runs):
        await run_trace(session, url, f"load-{index}-{run}", budget, tally)


async def watch_backlog(
    session: aiohttp.ClientSession, base: str, tally: Tally, gateway: int
) -> None:
    while True:
        for pid in tree(gateway):
            tally.max_rss[pid] = max(tally.max_rss.get(pid, 0.0), rss_mb(pid))
        try:
            async with session.get(base + "/healthz") as r:
                depth = int((await r.json())["recorder_queue_depth"])
            tally.max_backlog = max(tally.max_backlog, depth)
        except (aiohttp.ClientError, KeyError, ValueError):
            pass
        await asyncio.sleep(0.25)


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else float("nan")


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="loopwatch-load-"))
    db, provider_port, port = tmp / "lw.db", free_port(), free_port()
    bench = Path(__file__).parent / "proxy_bench.py"
    provider = subprocess.Popen([sys.executable, str(bench), "--provider", str(provider_port)])
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    env.update(
        LOOPWATCH_UPSTREAM_URL=f"http://127.0.0.1:{provider_port}/v1",
        LOOPWATCH_DATABASE_URL=f"sqlite:///{db}",
        LOOPWATCH_PORT=str(port),
    )
    log = (tmp / "gateway.log").open("wb")
    gateway = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env, stderr=log)
    tally = Tally()
    base = f"http://127.0.0.1:{port}"
    per_run = args.budget + PAST_BUDGET
    runs = max(1, args.steps // (per_run * args.agents))
    try:
        await wait_healthy(f"http://127.0.0.1:{provider_port}/v1/chat/completions")
        await wait_healthy(base + "/healthz")
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            watcher = asyncio.create_task(watch_backlog(session, base, tally, gateway.pid))
            names = {pid: command_of(pid) for pid in tree(gateway.pid)}
            began = time.monotonic()
            url = base + "/v1/chat/completions"
            await asyncio.gather(
                *(agent(session, url, i, runs, args.budget, tally) for i in range(args.agents))
            )
            elapsed = time.monotonic() - began
            watcher.cancel()
            async with session.get(base + "/metrics") as r:
                metrics = await r.text()
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(120)
        provider.terminate()
        provider.wait(10)
        log.close()
    report(tally, runs, per_run, args, elapsed, metrics, db, tmp / "gateway.log")
    for pid, mb in tally.max_rss.items():
        print(f"  max RSS {mb:.1f} MB: {names.get(pid, pid)}")


def report(
    tally: Tally,
    runs: int,
    per_run: int,
    args: argparse.Namespace,
    elapsed: float,
    metrics: str,
    db: Path,
    log: Path,
) -> None:
    sent = runs * per_run * args.agents
    with sqlite3.connect(db) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM steps")}
    lost = len(set(tally.answered) - stored)
    text = log.read_text(errors="replace")
    print(f"{args.agents} agents, {runs * args.agents} traces, budget {args.budget} steps each")
    print(f"requests sent {sent} in {elapsed:.1f} s ({sent / elapsed:.0f}/s)")
    print(f"answered {len(tally.answered)} (expected {runs * args.agents * args.budget})")
    print(f"refused {tally.refused} (expected {runs * args.agents * PAST_BUDGET})")
    print(
        f"over-budget answered {tally.over_budget_answered}, within-budget refused "
        f"{tally.within_budget_refused}, errors {tally.errors}"
    )
    print(f"answered steps not stored after the stop: {lost}")
    print(f"max recorder backlog sampled {tally.max_backlog}")
    print(
        f"unbudgeted (metric) {metric(metrics, 'loopwatch_budget_unbudgeted_total')}, "
        f"'unbudgeted' in the log {text.count('unbudgeted')}, "
        f"'recorder full' in the log {text.count('recorder full')}, "
        f"dropped (metric) {metric(metrics, 'loopwatch_recorder_dropped_total')}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50_000, help="requests in all")
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--budget", type=int, default=10, help="steps per trace")
    asyncio.run(main(parser.parse_args()))
