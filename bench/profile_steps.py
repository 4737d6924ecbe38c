"""Where a step's CPU goes: samples the gateway process and its recorder process with py-spy
while `loopwatch serve` (SQLite, recording on) proxies to a fake provider, and prints the top
frames of each process by self and inclusive share, plus CPU per step of each process.

Two loads, one after the other on the same gateway:
- `agents`: 32 agents running 8-step tool loops (each request the next step of its run);
- `fixed`: 64 clients sending one 2.9 KB agent request unchanged (a history no step continues).
The gateway (and so its recorder) is pinned to CPU 0, the provider and the clients to CPU 1.
py-spy samples wall-clock stacks: while the recorder runs on the gateway's core, the gateway
waits wherever it was preempted, and that frame's share grows; `--split` moves the recorder
to the clients' core so each process's profile is its own work.

Needs py-spy (`pip install py-spy`) and the right to ptrace the gateway (root, or
kernel.yama.ptrace_scope = 0). Usage:
  python bench/profile_steps.py [--load agents|fixed|both] [--seconds 8] [--top 25] [--no-spy]
      [--split] [--serve "--config x.toml"] [--raw-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
from idle_cpu import command_of, cpu_seconds, free_port  # this folder: run as a script
from profile_load import agent_loop, fixed_client, fixed_request
from tree_cpu import tree

RATE = 250  # samples per second and process


def pinned(cpu: int) -> list[str]:
    return (
        ["taskset", "-c", str(cpu)]
        if (os.cpu_count() or 1) >= 2 and shutil.which("taskset")
        else []
    )


async def wait_up(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url) as response:
                    if response.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"no answer from {url}")


def spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling one process (its threads that are not idle), raw collapsed stacks."""
    binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(binary):
        return None
    command = [binary, "record", "--format", "raw", "--rate", str(RATE), "--nonblocking"]
    command += ["--duration", str(int(seconds)), "--pid", str(pid), "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def frame_name(frame: str) -> str:
    """`function (path/to/module.py:123)` → `function (module.py)`: one row per function."""
    name, _, where = frame.partition(" (")
    parts = Path(where.rsplit(":", 1)[0]).parts
    if not parts:
        return name
    short = "/".join(parts[-2:]) if "gateway" in parts or "aiohttp" in parts else parts[-1]
    return f"{name} ({short})"


def top_frames(raw: Path, top: int) -> tuple[int, list[tuple[str, float, float]]]:
    """(samples, [(frame, self %, inclusive %)]) from py-spy's raw output, by self share and
    then by inclusive share; inclusive counts a frame once per sample (recursion too)."""
    own: Counter[str] = Counter()
    within: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [frame_name(f) for f in stack.split(";") if not f.startswith("process ")]
        frames = [f for f in frames if not f.startswith("thread ")]
        if not frames:
            continue
        samples = int(count)
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            within[frame] += samples
    names = {name for name, _ in own.most_common(top)} | {n for n, _ in within.most_common(top)}
    rows = [(n, 100 * own[n] / max(total, 1), 100 * within[n] / max(total, 1)) for n in names]
    return total, rows


def report(title: str, raw: Path, seconds: float, top: int) -> None:
    if not raw.exists() or raw.stat().st_size == 0:
        print(f"  {title}: no samples")
        return
    total, rows = top_frames(raw, top)
    busy = 100 * total / (RATE * seconds)
    print(f"\n  {title}: {total} samples, busy ~{busy:.0f}% of the window")
    print(f"  {'self %':>7} {'incl %':>7}  frame (by self)")
    for name, own, within in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"  {own:7.1f} {within:7.1f}  {name}")
    print(f"  {'self %':>7} {'incl %':>7}  frame (by inclusive)")
    for name, own, within in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {own:7.1f} {within:7.1f}  {name}")


async def drive(url: str, load: str, seconds: float) -> tuple[int, int, float]:
    """(steps, errors, wall seconds) of one load window."""
    counts = {"steps": 0, "errors": 0, "runs": 0}
    body = fixed_request()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        began = time.monotonic()
        deadline = began + seconds
        if load == "fixed":
            clients = [fixed_client(session, url, body, deadline, counts) for _ in range(64)]
        else:
            clients = [agent_loop(session, url, n, deadline, counts) for n in range(32)]
        await asyncio.gather(*clients)
        return counts["steps"], counts["errors"], time.monotonic() - began


async def until_idle(pids: list[int]) -> None:
    """Recording deferred past the window is work of the window too."""
    last = sum(cpu_seconds(p) for p in pids)
    for _ in range(40):
        await asyncio.sleep(0.25)
        now = sum(cpu_seconds(p) for p in pids)
        if now - last < 0.01:
            return
        last = now


async def one_load(args: argparse.Namespace, url: str, gateway: int, tmp: Path, load: str) -> None:
    await drive(url, load, 1.5)  # warm-up: imports, caches, connections
    await until_idle(tree(gateway))
    pids = tree(gateway)
    if args.split and pinned(1):
        for pid in pids[1:]:  # its samples and the gateway's no longer wait for each other
            os.sched_setaffinity(pid, {1})
    before = {p: cpu_seconds(p) for p in pids}
    spies = {} if args.no_spy else {p: spy(p, args.seconds, tmp / f"{load}-{p}.txt") for p in pids}
    steps, errors, wall = await drive(url, load, args.seconds)
    await until_idle(pids)
    for process in spies.values():
        if process is not None:
            _, error = process.communicate()
            if process.returncode:
                print(f"  py-spy: {error.decode().strip()[-300:]}")
    print(f"\n== {load}: {steps / wall:.0f} steps/s, {errors} errors, uptime load {load_avg()}")
    for pid in pids:
        used = 1000 * (cpu_seconds(pid) - before[pid]) / max(steps, 1)
        print(f"  {used:.3f} ms CPU per step  pid {pid} {role(pid, gateway)}")
    for pid in spies:
        report(f"{role(pid, gateway)} (pid {pid})", tmp / f"{load}-{pid}.txt", wall, args.top)
    if args.no_spy and args.repeat > 1:
        args.repeat -= 1
        await one_load(args, url, gateway, tmp, load)


def role(pid: int, gateway: int) -> str:
    if pid == gateway:
        return "gateway"
    return "recorder" if "record" in command_of(pid) else command_of(pid)[:60]


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def main(args: argparse.Namespace) -> None:
    tmp = Path(args.raw_dir or tempfile.mkdtemp(prefix="lw-profile-"))
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    provider_port, port = free_port(), free_port()
    here = Path(__file__).parent
    provider = subprocess.Popen(
        [*pinned(1), sys.executable, str(here / "profile_load.py"), str(provider_port)], env=env
    )
    binary = os.environ.get("LOOPWATCH_BIN") or str(Path(sys.executable).parent / "loopwatch")
    command = [*pinned(0), binary, "serve", "--port", str(port)]
    command += ["--upstream", f"http://127.0.0.1:{provider_port}/v1"]
    command += ["--database-url", f"sqlite:///{tmp}/profile.db", *shlex.split(args.serve)]
    with open(tmp / "gateway.log", "wb") as log:
        gateway = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        await wait_up(f"http://127.0.0.1:{provider_port}/v1/models")
        await wait_up(f"http://127.0.0.1:{port}/healthz")
        if pinned(1):
            os.sched_setaffinity(0, {1})
        await asyncio.sleep(2)  # the recorder process is up
        gateway_pid = gateway.pid  # taskset execs the gateway in its own process
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        for load in ("agents", "fixed") if args.load == "both" else (args.load,):
            await one_load(args, url, gateway_pid, tmp, load)
        print(f"\nraw stacks in {tmp}")
    finally:
        for process in (gateway, provider):
            process.terminate()
            process.wait(15)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--load", default="both", choices=["agents", "fixed", "both"])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-spy", action="store_true", help="CPU per step only, no sampling")
    parser.add_argument("--repeat", type=int, default=1, help="with --no-spy: windows per load")
    parser.add_argument("--serve", default="", help='extra serve flags, e.g. "--config x.toml"')
    parser.add_argument(
        "--split",
        action="store_true",
        help="recorder on the clients' CPU: samples of one process are not the other's run time",
    )
    parser.add_argument("--raw-dir", default=None, help="keep py-spy's raw stacks there")
    asyncio.run(main(parser.parse_args()))
