"""CPU per step of the gateway's whole process tree (its recorder process included), under
the fleet benchmark's load: fleet.py counts the gateway's own process only.

Reuses fleet.py's agents, mock provider and payloads from the directory given.
Usage: LOOPWATCH_BIN=.venv/bin/loopwatch python bench/tree_cpu.py FLEET_DIR [fleet|fixed]
       [--seconds 6] [--serve "--config recorder.toml"]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
import time
from typing import Any


def tree(pid: int) -> list[int]:
    found = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            for child in children.read().split():
                found += tree(int(child))
    except FileNotFoundError:
        pass
    return found


def start_peers(fleet: Any, fleet_dir: str, serve: str, tmp: str) -> tuple[Any, Any, int, int]:
    """fleet.py's mock provider (CPU 1) and `loopwatch serve` recording to SQLite in `tmp`
    (CPU 0): (mock, gateway, mock port, gateway port). Wait with `peers_up`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    python = os.environ.get("BENCH_PY", sys.executable)
    mock_port, port = fleet.free_port(), fleet.free_port()
    mock_argv = [python, os.path.join(fleet_dir, "mock_upstream.py"), "--port", str(mock_port)]
    mock = fleet.start(mock_argv, env, 1, os.path.join(tmp, "mock.log"))
    command = [os.environ.get("LOOPWATCH_BIN", "loopwatch"), "serve", "--port", str(port)]
    command += ["--upstream", f"http://127.0.0.1:{mock_port}/v1"]
    command += ["--database-url", f"sqlite:///{tmp}/lw.db", *shlex.split(serve)]
    gateway = fleet.start(command, env, 0, os.path.join(tmp, "gateway.log"))
    return mock, gateway, mock_port, port


async def peers_up(fleet: Any, mock_port: int, port: int) -> None:
    """Both answer; this process (the clients) then runs on CPU 1, beside the mock."""
    await fleet.wait_http(f"http://127.0.0.1:{mock_port}/v1/models")
    await fleet.wait_http(f"http://127.0.0.1:{port}/healthz")
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})


async def main(args: argparse.Namespace) -> None:
    sys.path.insert(0, args.fleet_dir)
    import aiohttp
    import fleet  # type: ignore[import-not-found]

    def cpu(pid: int) -> float:
        try:
            return float(fleet.cpu_of(pid))
        except FileNotFoundError:
            return 0.0

    tmp = tempfile.mkdtemp()
    mock, gateway, mock_port, port = start_peers(fleet, args.fleet_dir, args.serve, tmp)
    try:
        await peers_up(fleet, mock_port, port)
        await asyncio.sleep(2)  # the recorder process is up
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        agents = 32
        if args.mode == "fixed":
            with open(os.path.join(args.fleet_dir, "payloads", "chat_tools.json"), "rb") as f:
                fleet.FIXED = f.read()
            agents = 64
        pids = tree(gateway.pid)
        latencies: list[float] = []
        counts: dict[str, Any] = {"steps": 0, "errors": 0, "runs": 0}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            before = {pid: cpu(pid) for pid in pids}
            began = time.monotonic()
            await asyncio.gather(
                *(
                    fleet.agent(session, url, 8, False, began + args.seconds, latencies, counts, i)
                    for i in range(agents)
                )
            )
            wall = time.monotonic() - began
            last = sum(cpu(p) for p in pids)
            for _ in range(24):  # until idle: recording deferred past the window is counted
                await asyncio.sleep(0.25)
                now = sum(cpu(p) for p in pids)
                if now - last < 0.01:
                    break
                last = now
            after = {pid: cpu(pid) for pid in pids}
        steps = max(counts["steps"], 1)
        print(f"{args.mode}: {steps / wall:.0f} steps/s, {counts['errors']} errors")
        for pid in pids:
            print(f"  pid {pid}: {1000 * (after[pid] - before[pid]) / steps:.3f} ms CPU per step")
        total = sum(after[p] - before[p] for p in pids)
        print(f"  whole tree: {1000 * total / steps:.3f} ms CPU per step")
    finally:
        fleet.stop(gateway)
        fleet.stop(mock)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("fleet_dir")
    parser.add_argument("mode", nargs="?", default="fleet", choices=["fleet", "fixed"])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--serve", default="", help='extra serve flags, e.g. "--config x.toml"')
    asyncio.run(main(parser.parse_args()))
