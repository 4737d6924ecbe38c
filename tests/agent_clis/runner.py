"""Runs one agent CLI as a user would, sealed off from the machine: its own HOME and config
dirs, no inherited environment (so no real key), a proxy that catches any call home, and a
hard time limit after which its whole process group is killed."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

NODE_PROJECT = Path(__file__).parent / "node"
BIN = NODE_PROJECT / "node_modules" / ".bin"
TIME_LIMIT = 120.0  # seconds a CLI run may take before it is killed
PROMPT = "Write the marker file with the shell, then tell me what the command printed."


def install_problem(binary: str) -> str | None:
    """Why the CLI cannot run here, or None."""
    if shutil.which("npm") is None:
        return "npm is not installed"
    if not (BIN / binary).exists():
        return "no node_modules: run `npm ci` in tests/agent_clis/node"
    return None


@dataclass
class Sandbox:
    """A run's temporary home and working directory, and the environment it starts from."""

    root: Path
    proxy_url: str
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for path in (self.home, self.cwd, self.home / ".config", self.home / ".cache"):
            path.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "TMPDIR": str(self.root),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "CI": "1",
            "NO_COLOR": "1",
            # Anything not addressed to the gateway goes to a proxy that records and refuses it.
            "HTTP_PROXY": self.proxy_url,
            "HTTPS_PROXY": self.proxy_url,
            "http_proxy": self.proxy_url,
            "https_proxy": self.proxy_url,
            # node (qwen-code) honours the proxy variables only when asked to.
            "NODE_USE_ENV_PROXY": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def cwd(self) -> Path:
        return self.root / "work"


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        out, err = self.stdout[-3000:], self.stderr[-3000:]
        return f"exit {self.returncode}\nstdout:\n{out}\nstderr:\n{err}"


async def run(argv: list[str], sandbox: Sandbox, *, time_limit: float = TIME_LIMIT) -> Finished:
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=sandbox.cwd,
        env=sandbox.env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group: killed whole on expiry
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=time_limit)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = await process.communicate()
        detail = Finished(-9, out.decode(errors="replace"), err.decode(errors="replace"))
        raise AssertionError(f"{argv[0]} ran past {time_limit} s\n{detail.explain()}") from None
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode is not None
    return Finished(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


class CallHome:
    """A proxy that answers nothing: it records the first line of each request (a CONNECT
    names the host) and closes, so a client's call home is seen and goes nowhere."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=5)
            self.requests.append(line.decode(errors="replace").strip())
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
