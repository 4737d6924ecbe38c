"""Added latency and throughput of the gateway against calling the provider directly.

Starts a provider process and a gateway process (recording to a temporary SQLite file), then
sends the same requests both ways and prints p50/p99 latency, requests/s and their ratios.
Usage: python bench/proxy_bench.py [--requests 400] [--concurrent-requests 2000] [--budget]
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

COMPLETION = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "pong " * 20},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32},
}
CHUNKS = [
    json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}],
        }
    )
    for i in range(40)
]
FINISH = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
)
USAGE = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52},
    }
)


async def provider(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if not body.get("stream"):
        return web.json_response(COMPLETION, headers={"x-request-id": "req_bench"})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for payload in (*CHUNKS, FINISH, USAGE):
        await response.write(f"data: {payload}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def request_body(index: int, stream: bool) -> dict[str, object]:
    # Distinct conversations, so every request is a new trace as in a busy fleet.
    return {
        "model": "gpt-4o",
        "stream": stream,
        "messages": [{"role": "user", "content": f"ping {index}"}],
    }


async def measure(
    url: str, total: int, concurrency: int, stream: bool
) -> tuple[list[float], float]:
    latencies: list[float] = []
    counter = iter(range(total))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for index in counter:
                started = time.perf_counter()
                async with session.post(url, json=request_body(index, stream)) as r:
                    await r.read()
                    assert r.status == 200, r.status
                latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    return latencies, total / elapsed


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_provider(port: int) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", provider)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def wait_healthy(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            try:
                async with session.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


async def main(requests: int, concurrent_requests: int, budget: bool, database: str | None) -> None:
    """Provider and gateway each run in their own process, as they would in production."""
    provider_port, gateway_port = free_port(), free_port()
    processes = []
    with tempfile.TemporaryDirectory() as tmp:
        processes.append(
            subprocess.Popen([sys.executable, __file__, "--provider", str(provider_port)])
        )
        env = {
            **os.environ,
            "LOOPWATCH_UPSTREAM_URL": f"http://127.0.0.1:{provider_port}/v1",
            "LOOPWATCH_DATABASE_URL": database or f"sqlite:///{Path(tmp) / 'bench.db'}",
            "LOOPWATCH_PORT": str(gateway_port),
            "LOOPWATCH_LOG_LEVEL": "warning",
        }
        if budget:  # every request then reserves and settles in the budget ledger
            env.update(LOOPWATCH_MAX_STEPS="1000000", LOOPWATCH_MAX_TOKENS="1000000000")
        processes.append(subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env))
        try:
            await wait_healthy(f"http://127.0.0.1:{provider_port}/v1/chat/completions")
            await wait_healthy(f"http://127.0.0.1:{gateway_port}/healthz")
            await compare(provider_port, gateway_port, requests, concurrent_requests)
            health = f"http://127.0.0.1:{gateway_port}/healthz"
            async with aiohttp.ClientSession() as session, session.get(health) as r:
                print("gateway health after the run:", await r.json())
        finally:
            for process in processes:
                process.terminate()
                process.wait(10)


async def compare(provider_port: int, gateway_port: int, requests: int, many: int) -> None:
    direct = f"http://127.0.0.1:{provider_port}/v1/chat/completions"
    via = f"http://127.0.0.1:{gateway_port}/v1/chat/completions"
    print(
        f"{'case':<14}{'direct p50':>11}{'via p50':>9}{'added p50':>10}{'direct p99':>11}"
        f"{'via p99':>9}{'added p99':>10}{'direct rps':>11}{'via rps':>9}{'rps ratio':>10}"
    )
    for stream in (False, True):
        for concurrency, total in ((1, requests), (64, many)):
            await measure(direct, 50, concurrency, stream)  # warm up both paths
            await measure(via, 50, concurrency, stream)
            d_lat, d_rps = await measure(direct, total, concurrency, stream)
            v_lat, v_rps = await measure(via, total, concurrency, stream)
            name = f"{'stream' if stream else 'json'} c={concurrency}"
            print(
                f"{name:<14}{pct(d_lat, 50):>9.2f}ms{pct(v_lat, 50):>7.2f}ms"
                f"{pct(v_lat, 50) - pct(d_lat, 50):>8.2f}ms{pct(d_lat, 99):>9.2f}ms"
                f"{pct(v_lat, 99):>7.2f}ms{pct(v_lat, 99) - pct(d_lat, 99):>8.2f}ms"
                f"{d_rps:>11.0f}{v_rps:>9.0f}{v_rps / d_rps:>10.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrent-requests", type=int, default=2000)
    parser.add_argument("--budget", action="store_true", help="give every trace a budget")
    parser.add_argument("--database-url", help="record here instead of a temporary SQLite file")
    parser.add_argument("--provider", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.provider:
        run_provider(args.provider)
    else:
        asyncio.run(main(args.requests, args.concurrent_requests, args.budget, args.database_url))
