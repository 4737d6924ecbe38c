"""Latency OTLP export adds to proxied requests, with the collector up, down and slow.

Starts a provider process, a collector process (answers at once, or sleeps before answering)
and, per case, a gateway process; sends the same streamed requests through each gateway and
prints p50/p99 latency and requests/s next to the gateway without export, plus the spans the
gateway dropped. Usage: python bench/otlp_bench.py [--requests 300] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web
from proxy_bench import free_port, measure, pct, run_provider

SLOW_SECONDS = 5.0  # what a slow collector sleeps before answering each export
DROPPED = re.compile(r'^loopwatch_otlp_dropped_total\{reason="(\w+)"\} ([0-9.e+]+)$', re.M)


def run_collector(port: int, delay: float) -> None:
    async def traces(request: web.Request) -> web.Response:
        await request.read()
        if delay:
            await asyncio.sleep(delay)
        return web.Response(content_type="application/x-protobuf")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def wait_healthy(url: str, seconds: float = 120.0) -> None:
    """A gateway process imports the SDK and opens its database first: allow for a busy box."""
    deadline = asyncio.get_running_loop().time() + seconds
    async with aiohttp.ClientSession() as session:
        while asyncio.get_running_loop().time() < deadline:
            try:
                async with session.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def dropped(gateway: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(gateway + "/metrics") as r:
        text = await r.text()
    found = {reason: float(n) for reason, n in DROPPED.findall(text)}
    return ", ".join(f"{reason} {n:.0f}" for reason, n in sorted(found.items())) or "-"


async def run_case(
    name: str, endpoint: str | None, provider_port: int, tmp: Path, args: argparse.Namespace
) -> tuple[str, list[list[float]], list[float], str]:
    port = free_port()
    env = {
        **os.environ,
        "LOOPWATCH_UPSTREAM_URL": f"http://127.0.0.1:{provider_port}/v1",
        "LOOPWATCH_DATABASE_URL": f"sqlite:///{tmp / (name + '.db')}",
        "LOOPWATCH_PORT": str(port),
        "LOOPWATCH_LOG_LEVEL": "error",
    }
    if endpoint is not None:
        env["LOOPWATCH_OTLP_ENDPOINT"] = endpoint
        env["LOOPWATCH_OTLP_CAPTURE_CONTENT"] = "true" if args.content else "false"
    process = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env)
    gateway = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(gateway + "/healthz")
        url = gateway + "/v1/chat/completions"
        latencies, rates = [], []
        for concurrency in (1, args.concurrency):
            await measure(url, 50, concurrency, True)  # warm up
            lat, rps = await measure(url, args.requests, concurrency, True)
            latencies.append(lat)
            rates.append(rps)
        return name, latencies, rates, await dropped(gateway)
    finally:
        process.terminate()
        process.wait(30)


async def main(args: argparse.Namespace) -> None:
    provider_port, up_port, slow_port, dead_port = (free_port() for _ in range(4))
    helpers = [
        subprocess.Popen([sys.executable, __file__, "--provider", str(provider_port)]),
        subprocess.Popen([sys.executable, __file__, "--collector", str(up_port)]),
        subprocess.Popen(
            [sys.executable, __file__, "--collector", str(slow_port), "--delay", str(SLOW_SECONDS)]
        ),
    ]
    cases = {
        "no export": None,
        "collector up": f"http://127.0.0.1:{up_port}",
        "collector down": f"http://127.0.0.1:{dead_port}",  # nothing listens: refused
        f"slow ({SLOW_SECONDS:.0f}s)": f"http://127.0.0.1:{slow_port}",
    }
    try:
        await wait_healthy(f"http://127.0.0.1:{provider_port}/v1/chat/completions")
        await wait_healthy(f"http://127.0.0.1:{up_port}/v1/traces")
        with tempfile.TemporaryDirectory() as tmp:
            results = [
                await run_case(name, endpoint, provider_port, Path(tmp), args)
                for name, endpoint in cases.items()
            ]
    finally:
        for helper in helpers:
            helper.terminate()
            helper.wait(10)
    report(results, args.concurrency)


def report(results: list[tuple[str, list[list[float]], list[float], str]], many: int) -> None:
    base = results[0]
    print(f"streamed chat requests; content capture {'on' if ARGS.content else 'off'}")
    print(
        f"{'case':<16}{'c':>4}{'p50':>9}{'+p50':>9}{'p99':>9}{'+p99':>9}{'rps':>7}"
        f"{'ratio':>7}  dropped"
    )
    for name, latencies, rates, drops in results:
        for index, concurrency in enumerate((1, many)):
            p50, p99 = pct(latencies[index], 50), pct(latencies[index], 99)
            b50, b99 = pct(base[1][index], 50), pct(base[1][index], 99)
            print(
                f"{name:<16}{concurrency:>4}{p50:>7.2f}ms{p50 - b50:>+7.2f}ms{p99:>7.2f}ms"
                f"{p99 - b99:>+7.2f}ms{rates[index]:>7.0f}{rates[index] / base[2][index]:>7.2f}"
                f"  {drops if index else ''}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--content", action="store_true", help="export message content too")
    parser.add_argument("--provider", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--collector", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--delay", type=float, default=0.0, help=argparse.SUPPRESS)
    ARGS = parser.parse_args()
    if ARGS.provider:
        run_provider(ARGS.provider)
    elif ARGS.collector:
        run_collector(ARGS.collector, ARGS.delay)
    else:
        asyncio.run(main(ARGS))
