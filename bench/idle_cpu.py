"""Idle CPU of an idle gateway's whole process tree (its recorder process included), and the
resident memory of each process: starts `loopwatch serve` on a temporary store, waits until
it is ready, then samples /proc over a quiet window (no traffic at all).

Usage: python bench/idle_cpu.py [--seconds 60] [--serve "--workers 2"]
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from tree_cpu import tree  # this folder: run as `python bench/idle_cpu.py`

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system time of a process (all its threads), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode().strip()
    except FileNotFoundError:
        return "?"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the gateway did not get ready")


def main(args: argparse.Namespace) -> None:
    tmp = tempfile.mkdtemp(prefix="loopwatch-idle-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    port = free_port()
    command = [sys.executable, "-m", "gateway", "serve", "--port", str(port)]
    command += ["--database-url", f"sqlite:///{tmp}/lw.db"]
    command += ["--upstream", "http://127.0.0.1:9/v1", *shlex.split(args.serve)]
    with open(os.path.join(tmp, "gateway.log"), "wb") as log:
        gateway = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    try:
        wait_ready(port)
        time.sleep(args.settle)  # the recorder process has started and caught up
        pids = tree(gateway.pid)
        start_rss = {pid: rss_mb(pid) for pid in pids}
        before = {pid: cpu_seconds(pid) for pid in pids}
        began = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - began
        pids += [p for p in tree(gateway.pid) if p not in pids]
        spent = sum(cpu_seconds(pid) - before.get(pid, 0.0) for pid in pids)
        print(f"idle {elapsed:.0f} s: {spent:.3f} CPU-s = {100 * spent / elapsed:.3f} % of a core")
        for pid in pids:
            print(
                f"  pid {pid}: RSS {start_rss.get(pid, 0):.1f} MB at start, {rss_mb(pid):.1f} MB"
                f" now, CPU {cpu_seconds(pid) - before.get(pid, 0.0):.3f} s: {command_of(pid)}"
            )
        print(f"  total RSS {sum(rss_mb(pid) for pid in pids):.1f} MB")
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(60)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--serve", default="", help="more arguments for `loopwatch serve`")
    main(parser.parse_args())
