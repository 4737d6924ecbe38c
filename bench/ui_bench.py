"""How fast the trace viewer opens a long run: HTML size, DOMContentLoaded, DOM nodes.

Seeds a 300-step coding-agent run (20 parallel calls, a 356 KB tool result, a retried
stream) into a fresh SQLite file, starts `loopwatch serve` on it, and opens the pages in
Debian's chromium with Playwright. Prints medians of several loads.
Usage: python bench/ui_bench.py [--steps 300] [--loads 7] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.store.engine import create_schema, make_engine  # noqa: E402
from gateway.store.write.writer import StoreWriter  # noqa: E402
from tests.factories import long_run  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def seed(database_url: str, steps: int) -> tuple[str, str]:
    engine = make_engine(database_url)
    create_schema(engine)
    records = long_run("bench-run", steps - 1)  # plus the cut-off step the agent retried
    writer = StoreWriter(engine)
    for start in range(0, len(records), 50):
        writer.write_batch(records[start : start + 50])
    engine.dispose()
    return "bench-run", records[len(records) // 2].id


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_up(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(200):
            try:
                async with session.get(url + "/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError("the gateway did not start")


async def html_size(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return len(await response.read())


async def measure(browser: Any, url: str, loads: int) -> dict[str, float]:
    figures: dict[str, list[float]] = {"ttfb_ms": [], "dcl_ms": [], "load_ms": [], "nodes": []}
    for _ in range(loads):
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        await page.goto(url, wait_until="load")
        timing = await page.evaluate(
            "(() => { const n = performance.getEntriesByType('navigation')[0];"
            " return [n.responseStart, n.domContentLoadedEventEnd, n.loadEventEnd,"
            " document.getElementsByTagName('*').length]; })()"
        )
        for key, value in zip(figures, timing, strict=True):
            figures[key].append(float(value))
        await context.close()
    return {key: statistics.median(values) for key, values in figures.items()}


async def open_step(browser: Any, url: str, step_id: str) -> float:
    """Milliseconds from clicking a collapsed step to its body being on the page."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto(url, wait_until="load")
    elapsed = await page.evaluate(
        """id => new Promise(done => {
            const row = document.getElementById(id), started = performance.now();
            new MutationObserver(() => {
                if (row.querySelector('.step-body')) { done(performance.now() - started); }
            }).observe(row, {childList: true, subtree: true});
            row.querySelector('summary').click();
        })""",
        f"step-{step_id}",
    )
    await context.close()
    return float(elapsed)


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        database_url = f"sqlite:///{tmp}/ui-bench.db"
        trace_id, middle = seed(database_url, args.steps)
        port = free_port()
        env = {**os.environ, "LOOPWATCH_LOG_LEVEL": "warning"}
        command = [sys.executable, "-m", "gateway", "serve", "--port", str(port)]
        server = subprocess.Popen([*command, "--database-url", database_url], env=env, cwd=ROOT)
        try:
            base = f"http://127.0.0.1:{port}"
            await wait_up(base)
            await report(args, base, trace_id, middle)
        finally:
            server.terminate()
            server.wait(timeout=10)


def line(name: str, size: int, figures: dict[str, float], note: str) -> str:
    return (
        f"{name:22s} HTML {size / 1024:4.0f} KB, first byte {figures['ttfb_ms']:4.0f} ms, "
        f"DOMContentLoaded {figures['dcl_ms']:4.0f} ms, load {figures['load_ms']:4.0f} ms, "
        f"{figures['nodes']:.0f} DOM nodes ({note})"
    )


async def report(args: argparse.Namespace, base: str, trace_id: str, middle: str) -> None:
    from playwright.async_api import async_playwright

    trace_url = f"{base}/traces/{trace_id}"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=args.chromium, args=ARGS)
        await measure(browser, base + "/healthz", 1)  # the browser's own start-up
        cold = await measure(browser, trace_url, 1)
        size = await html_size(trace_url)
        print(line(f"trace, {args.steps} steps", size, cold, "first view after start"))
        warm = await measure(browser, trace_url, args.loads)
        print(line(f"trace, {args.steps} steps", size, warm, f"median of {args.loads} more"))
        listing = await measure(browser, base + "/", args.loads)
        print(line("traces list", await html_size(base + "/"), listing, "median"))
        body = await html_size(f"{base}/traces/{trace_id}/steps/{middle}?part=body")
        opened = statistics.median([await open_step(browser, trace_url, middle) for _ in range(5)])
        print(
            f"one step's body on demand: {body / 1024:.1f} KB, shown {opened:.0f} ms after a click"
        )
        await browser.close()
    load = os.getloadavg()[0]
    print(f"load average during the run: {load:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--loads", type=int, default=7)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
