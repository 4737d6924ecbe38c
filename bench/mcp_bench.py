"""Added latency of the MCP proxy: `tools/call` p50 through the gateway against calling the
MCP server directly, in one run (calls interleaved, so both see the same machine load).

The server is the official SDK's MCPServer over Streamable HTTP, in its own process; the
gateway is `loopwatch serve` (SQLite, recording on) in another; the client sends raw
JSON-RPC over one keep-alive connection each way.
A bare aiohttp pass-through (no observing, no recording) runs beside it as the floor any
extra HTTP hop costs on the same machine in the same run.
Usage: python bench/mcp_bench.py [--calls 400]
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
import time
from pathlib import Path

import aiohttp

PROTOCOL = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def run_server(port: int) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    server.run("streamable-http", host="127.0.0.1", port=port)


def run_naive(port: int, upstream: str) -> None:
    """The floor: forward each request and stream the answer back, nothing else."""
    from aiohttp import web

    async def forward(request: web.Request) -> web.StreamResponse:
        session: aiohttp.ClientSession = request.app["session"]
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
        }
        async with session.request(
            request.method, upstream, headers=headers, data=await request.read()
        ) as answer:
            response = web.StreamResponse(status=answer.status)
            for name, value in answer.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    response.headers.add(name, value)
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        app["session"] = aiohttp.ClientSession(auto_decompress=False)
        yield
        await app["session"].close()

    app = web.Application()
    app.cleanup_ctx.append(session_ctx)
    app.router.add_route("*", "/mcp", forward)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_listening(port: int) -> None:
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class Session:
    """One MCP session (initialize, then tools/call) over one HTTP client."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.headers = http, url, {"Accept": ACCEPT}
        self.next_id = 0

    async def post(self, message: dict[str, object]) -> tuple[aiohttp.ClientResponse, bytes]:
        async with self.http.post(self.url, json=message, headers=self.headers) as r:
            return r, await r.read()

    async def open(self) -> None:
        r, _ = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            }
        )
        self.headers["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
        self.headers["MCP-Protocol-Version"] = PROTOCOL
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self) -> float:
        self.next_id += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": f"ping {self.next_id}"}},
        }
        started = time.perf_counter()
        r, body = await self.post(message)
        elapsed = time.perf_counter() - started
        assert r.status == 200 and b"ping" in body, body
        return elapsed


async def compare(server_port: int, gateway_port: int, naive_port: int, calls: int) -> None:
    urls = {
        "direct": f"http://127.0.0.1:{server_port}/mcp",
        "gateway": f"http://127.0.0.1:{gateway_port}/mcp/bench",
        "bare hop": f"http://127.0.0.1:{naive_port}/mcp",
    }
    https = [aiohttp.ClientSession() for _ in urls]
    try:
        sessions = {
            name: Session(http, url) for http, (name, url) in zip(https, urls.items(), strict=True)
        }
        for session in sessions.values():
            await session.open()
        for _ in range(20):  # warm up every path
            for session in sessions.values():
                await session.call()
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(calls):  # interleaved: each path sees the same load
            for name, session in sessions.items():
                times[name].append(await session.call())
    finally:
        for http in https:
            await http.close()
    p50 = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"tools/call p50 direct:   {p50['direct']:.3f} ms ({calls} calls each)")
    print(f"tools/call p50 gateway:  {p50['gateway']:.3f} ms")
    print(f"tools/call p50 bare hop: {p50['bare hop']:.3f} ms (aiohttp pass-through, the floor)")
    print(f"added p50 by the gateway: {p50['gateway'] - p50['direct']:.3f} ms")
    print(f"added p50 by a bare hop:  {p50['bare hop'] - p50['direct']:.3f} ms")


async def main(calls: int) -> None:
    server_port, gateway_port, naive_port = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")},
            "LOOPWATCH_PORT": str(gateway_port),
            "LOOPWATCH_DATABASE_URL": f"sqlite:///{Path(tmp) / 'bench.db'}",
            "LOOPWATCH_MCP_SERVERS": f"bench=http://127.0.0.1:{server_port}/mcp",
            "LOOPWATCH_ACCESS_LOG": "false",
        }
        processes = [
            subprocess.Popen([sys.executable, __file__, "--server", str(server_port)]),
            subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env),
            subprocess.Popen(
                [sys.executable, __file__, "--naive", str(naive_port), str(server_port)]
            ),
        ]
        try:
            for port in (server_port, gateway_port, naive_port):
                await wait_listening(port)
            await compare(server_port, gateway_port, naive_port, calls)
        finally:
            for process in processes:
                process.terminate()
                process.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--server", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--naive", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.server:
        run_server(args.server)
    elif args.naive:
        run_naive(args.naive[0], f"http://127.0.0.1:{args.naive[1]}/mcp")
    else:
        asyncio.run(main(args.calls))
