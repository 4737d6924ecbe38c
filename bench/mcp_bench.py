"""Added latency of the MCP proxy: `tools/call` p50 through the gateway against calling the
MCP server directly, in one run (calls interleaved, so both see the same machine load).

The server is the official SDK's MCPServer over Streamable HTTP, in its own process; the
gateway is `loopwatch serve` (SQLite, recording on) in another; the client sends raw
JSON-RPC over one keep-alive connection each way.
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


async def compare(server_port: int, gateway_port: int, calls: int) -> None:
    async with aiohttp.ClientSession() as a, aiohttp.ClientSession() as b:
        direct = Session(a, f"http://127.0.0.1:{server_port}/mcp")
        via = Session(b, f"http://127.0.0.1:{gateway_port}/mcp/bench")
        await direct.open()
        await via.open()
        for _ in range(20):  # warm up both paths
            await direct.call()
            await via.call()
        times: dict[str, list[float]] = {"direct": [], "gateway": []}
        for _ in range(calls):
            times["direct"].append(await direct.call())
            times["gateway"].append(await via.call())
    p50 = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"tools/call p50 direct:  {p50['direct']:.3f} ms ({calls} calls)")
    print(f"tools/call p50 gateway: {p50['gateway']:.3f} ms")
    print(f"added p50:              {p50['gateway'] - p50['direct']:.3f} ms")


async def main(calls: int) -> None:
    server_port, gateway_port = free_port(), free_port()
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
        ]
        try:
            await wait_listening(server_port)
            await wait_listening(gateway_port)
            await compare(server_port, gateway_port, calls)
        finally:
            for process in processes:
                process.terminate()
                process.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.server:
        run_server(args.server)
    else:
        asyncio.run(main(args.calls))
