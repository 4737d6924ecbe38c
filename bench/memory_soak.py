"""Resident memory of the gateway (and its recorder process) under sustained load.

One `loopwatch serve` (SQLite, recording on) behind the fleet benchmark's mock provider;
clients send the fixed 2.9 KB agent request (a new trace every time: what fills the
in-memory indexes fastest) and run 8-step agent loops, for `--seconds` or until `--steps`.
Every `--every` seconds: steps so far, gateway RSS, recorder RSS. At the end: start → peak
of each against the target (150 MB for the gateway).

Reuses fleet.py's agents, mock provider and payloads from the directory given.
Usage: LOOPWATCH_BIN=.venv/bin/loopwatch python bench/memory_soak.py FLEET_DIR
       [--seconds 300] [--steps 100000] [--fixed-clients 32] [--agents 32] [--every 10]
       [--serve "--config x.toml"] [--max-mb 150]   (exit 1 above --max-mb)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idle_cpu import rss_mb
from tree_cpu import peers_up, start_peers, tree


async def fixed_client(session: Any, url: str, body: bytes, deadline: float, counts: Any) -> None:
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}
    while time.monotonic() < deadline and counts["steps"] < counts["limit"]:
        async with session.post(url, data=body, headers=headers) as r:
            await r.read()
            if r.status != 200:
                counts["errors"] += 1
                return
        counts["steps"] += 1


async def sample(gateway: int, counts: Any, every: float, rows: list[tuple[float, ...]]) -> None:
    began = time.monotonic()
    while True:
        others = [p for p in tree(gateway) if p != gateway]
        recorder = sum(rss_mb(p) for p in others)
        rows.append((time.monotonic() - began, counts["steps"], rss_mb(gateway), recorder))
        t, steps, g, r = rows[-1]
        print(f"{t:6.0f} s {steps:8d} steps  gateway {g:6.1f} MB  recorder {r:6.1f} MB", flush=True)
        await asyncio.sleep(every)


async def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, args.fleet_dir)
    import aiohttp
    import fleet  # type: ignore[import-not-found]

    tmp = tempfile.mkdtemp(prefix="loopwatch-soak-")
    mock, gateway, mock_port, port = start_peers(fleet, args.fleet_dir, args.serve, tmp)
    with open(os.path.join(args.fleet_dir, "payloads", "chat_tools.json"), "rb") as f:
        body = f.read()
    rows: list[tuple[float, ...]] = []
    try:
        await peers_up(fleet, mock_port, port)
        await asyncio.sleep(3)  # the recorder process is up
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        counts: dict[str, Any] = {"steps": 0, "errors": 0, "runs": 0, "limit": args.steps}
        sampler = asyncio.create_task(sample(gateway.pid, counts, args.every, rows))
        deadline = time.monotonic() + args.seconds
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            agents = [
                fleet.agent(session, url, 8, False, deadline, [], counts, i)
                for i in range(args.agents)
            ]
            fixed = [
                fixed_client(session, url, body, deadline, counts)
                for _ in range(args.fixed_clients)
            ]
            tasks = [asyncio.ensure_future(c) for c in (*agents, *fixed)]
            while counts["steps"] < args.steps and not all(t.done() for t in tasks):
                await asyncio.sleep(0.5)
            for task in tasks:  # enough steps: the agents stop mid-run
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(2)  # the recorder catches up
        sampler.cancel()
        others = [p for p in tree(gateway.pid) if p != gateway.pid]
        rows.append((rows[-1][0] + 2, counts["steps"], rss_mb(gateway.pid), 0.0))
        rows[-1] = (*rows[-1][:3], sum(rss_mb(p) for p in others))
    finally:
        fleet.stop(gateway)
        fleet.stop(mock)
    peak_gateway = max(r[2] for r in rows)
    peak_recorder = max(r[3] for r in rows)
    print(
        f"{counts['steps']} steps in {rows[-1][0]:.0f} s, {counts['errors']} errors; "
        f"gateway RSS {rows[0][2]:.1f} → peak {peak_gateway:.1f} MB (target ≤ {args.max_mb:.0f}), "
        f"recorder {rows[0][3]:.1f} → peak {peak_recorder:.1f} MB"
    )
    return 1 if peak_gateway > args.max_mb else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("fleet_dir")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--fixed-clients", type=int, default=32)
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--serve", default="", help='extra serve flags, e.g. "--config x.toml"')
    parser.add_argument("--max-mb", type=float, default=150.0)
    sys.exit(asyncio.run(main(parser.parse_args())))
