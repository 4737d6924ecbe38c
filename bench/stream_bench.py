"""Chunk latency the gateway adds to concurrent streams, and its memory across load rounds.

A provider process streams chunks that carry the monotonic clock of their sending (the
clock is the machine's, shared by processes); the client notes each chunk's arrival. The
same streams go direct and through `loopwatch serve` (recording to SQLite), several rounds
alternately; printed: per-chunk latency p50/p99 direct and via, the added p99, and the
gateway's RSS after each round (it should stay flat), and the CPU its process tree spent
per chunk relayed (a figure the machine's load moves far less). With 2 CPUs the gateway runs on
CPU 0, provider and client on CPU 1.
Usage: python bench/stream_bench.py [--streams 50] [--chunks 50] [--interval-ms 20] [--rounds 2]
With NAIVE_PROXY=<path of a bare pass-through taking --port and $UPSTREAM> the same streams
also go through it, for the floor of an aiohttp proxy on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web


def chunk(number: int) -> bytes:
    payload = {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": f"t{number} "}, "finish_reason": None}],
        "sent": time.perf_counter_ns(),
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


async def provider(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    chunks, interval = body["chunks"], body["interval"]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for number in range(chunks):
        await response.write(chunk(number))
        await asyncio.sleep(interval)
    final = {
        "id": "chatcmpl-stream",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    await response.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
    await response.write_eof()
    return response


async def one_stream(
    session: aiohttp.ClientSession, url: str, chunks: int, interval: float, out: list[float]
) -> None:
    body = {
        "model": "gpt-4o",
        "stream": True,
        "chunks": chunks,
        "interval": interval,
        "messages": [{"role": "user", "content": "stream please"}],
    }
    async with session.post(url, json=body) as r:
        assert r.status == 200, r.status
        buffer = b""
        async for data in r.content.iter_any():
            now = time.perf_counter_ns()
            buffer += data
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                text = event.decode().removeprefix("data: ")
                if '"sent"' in text:
                    out.append((now - json.loads(text)["sent"]) / 1e6)


async def round_of(url: str, streams: int, chunks: int, interval: float) -> list[float]:
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(
            *(one_stream(session, url, chunks, interval, latencies) for _ in range(streams))
        )
    return latencies


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User plus system time of a process and its children (the recorder process)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{current}/task/{current}/children") as children:
                todo += [int(child) for child in children.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if (os.cpu_count() or 1) >= 2 else []


async def wait_up(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            try:
                async with session.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


async def main(args: argparse.Namespace) -> int:
    provider_port, gateway_port = free_port(), free_port()
    loopwatch = os.environ.get("LOOPWATCH_BIN", "loopwatch")
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
        upstream = subprocess.Popen(
            [*pinned(1), sys.executable, __file__, "--provider", str(provider_port)], env=env
        )
        gateway = subprocess.Popen(
            [
                *pinned(0),
                loopwatch,
                "serve",
                "--port",
                str(gateway_port),
                "--upstream",
                f"http://127.0.0.1:{provider_port}/v1",
                "--database-url",
                f"sqlite:///{Path(tmp) / 'bench.db'}",
            ],
            env={**env, "LOOPWATCH_LOG_LEVEL": "warning"},
        )
        naive, naive_port = None, free_port()
        if os.environ.get("NAIVE_PROXY"):
            naive = subprocess.Popen(
                [*pinned(0), sys.executable, os.environ["NAIVE_PROXY"], "--port", str(naive_port)],
                env={**env, "UPSTREAM": f"http://127.0.0.1:{provider_port}"},
            )
        try:
            await wait_up(f"http://127.0.0.1:{provider_port}/v1/chat/completions")
            await wait_up(f"http://127.0.0.1:{gateway_port}/healthz")
            if naive is not None:
                await wait_up(f"http://127.0.0.1:{naive_port}/v1/chat/completions")
            if (os.cpu_count() or 1) >= 2:
                os.sched_setaffinity(0, {1})
            ports = (provider_port, gateway_port, naive_port if naive else None)
            return await compare(args, *ports, gateway.pid)
        finally:
            for process in (gateway, upstream, naive):
                if process is not None:
                    process.terminate()
                    process.wait(30)


async def compare(
    args: argparse.Namespace,
    provider_port: int,
    gateway_port: int,
    naive_port: int | None,
    pid: int,
) -> int:
    direct = f"http://127.0.0.1:{provider_port}/v1/chat/completions"
    via = f"http://127.0.0.1:{gateway_port}/v1/chat/completions"
    bare = None if naive_port is None else f"http://127.0.0.1:{naive_port}/v1/chat/completions"
    interval = args.interval_ms / 1000
    await asyncio.sleep(3)  # the gateway's recorder process finishes starting
    await round_of(direct, args.streams, 10, 0.001)  # warm-up
    await round_of(via, args.streams, 10, 0.001)
    await asyncio.sleep(1)
    added: list[float] = []
    memory: list[float] = []
    for number in range(1, args.rounds + 1):
        d = await round_of(direct, args.streams, args.chunks, interval)
        spent = cpu_seconds(pid)
        v = await round_of(via, args.streams, args.chunks, interval)
        await asyncio.sleep(1.0)  # recording of the round settles
        spent = cpu_seconds(pid) - spent
        memory.append(rss_mib(pid))
        added.append(pct(v, 99) - pct(d, 99))
        if bare is not None:
            b = await round_of(bare, args.streams, args.chunks, interval)
            print(
                f"round {number}: bare proxy p50={pct(b, 50):.3f} p99={pct(b, 99):.3f} ms, "
                f"added p99={pct(b, 99) - pct(d, 99):.3f} ms",
                flush=True,
            )
        print(
            f"round {number}: {args.streams} streams x {args.chunks} chunks: chunk latency "
            f"direct p50={pct(d, 50):.3f} p99={pct(d, 99):.3f} ms, via p50={pct(v, 50):.3f} "
            f"p99={pct(v, 99):.3f} ms, added p50={pct(v, 50) - pct(d, 50):.3f} "
            f"p99={added[-1]:.3f} ms; gateway RSS {memory[-1]:.1f} MiB, CPU "
            f"{1e6 * spent / len(v):.0f} µs a chunk",
            flush=True,
        )
    growth = memory[-1] - memory[0]
    print(
        f"streams: added chunk latency p99 median {statistics.median(added):.3f} ms; "
        f"RSS {memory[0]:.1f} → {memory[-1]:.1f} MiB ({growth:+.1f})"
    )
    short = args.max_added_p99_ms is not None and statistics.median(added) > args.max_added_p99_ms
    return 1 if short else 0


def run_provider(port: int) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    app = web.Application()
    app.router.add_post("/v1/chat/completions", provider)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-added-p99-ms", type=float, help="exit 1 above this")
    parser.add_argument("--provider", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.provider:
        run_provider(arguments.provider)
    else:
        sys.exit(asyncio.run(main(arguments)))
