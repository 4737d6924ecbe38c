"""`loopwatch mcp-stdio --gateway URL --name NAME -- COMMAND [ARGS...]`: runs a stdio MCP
server as a child and relays its stdin and stdout lines unchanged; a thread of its own
reports each line to the gateway, so relaying never waits for the gateway."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from typing import IO

from gateway.mcp.messages import BRIDGE_HEADER

REPORT_TIMEOUT = 5.0
MAX_QUEUED = 10_000
_END = ("", b"")


def main(gateway: str, name: str, argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print("loopwatch mcp-stdio: give the server's command after --", file=sys.stderr)
        return 2
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as exc:
        print(f"loopwatch mcp-stdio: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 127
    assert child.stdin is not None and child.stdout is not None
    reporter = Reporter(gateway.rstrip("/") + f"/mcp/{name}/stdio")
    reporter.start()
    to_child = threading.Thread(
        target=_pump, args=(sys.stdin.buffer, child.stdin, reporter, "client"), daemon=True
    )
    to_child.start()
    _pump(child.stdout, sys.stdout.buffer, reporter, "server")
    code = child.wait()
    reporter.stop()
    return code


def _pump(source: IO[bytes], target: IO[bytes], reporter: Reporter, sender: str) -> None:
    """Copy lines as they come; reported before they are passed on, so a request is
    always reported before its answer."""
    try:
        for line in iter(source.readline, b""):
            reporter.report(sender, line)
            target.write(line)
            target.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    finally:
        if sender == "client":  # the client hung up: so does the server's stdin
            with contextlib.suppress(OSError):
                target.close()


class Reporter:
    """Posts reported lines to the gateway in batches; drops them when it cannot."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._queue: queue.Queue[tuple[str, bytes]] = queue.Queue(MAX_QUEUED)
        self._thread = threading.Thread(target=self._run, name="mcp-report", daemon=True)
        self._headers = {"Content-Type": "application/x-ndjson", BRIDGE_HEADER: uuid.uuid4().hex}
        trace = os.environ.get("LOOPWATCH_TRACE_ID")
        if trace:
            self._headers["X-Loopwatch-Trace-Id"] = trace
        self._warned = False

    def start(self) -> None:
        self._thread.start()

    def report(self, sender: str, line: bytes) -> None:
        if not line.strip():
            return
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait((sender, line))

    def stop(self, timeout: float = REPORT_TIMEOUT) -> None:
        self._queue.put(_END)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            done = _END in batch
            lines = [
                json.dumps({"from": s, "line": line.decode("utf-8", "replace").rstrip("\r\n")})
                for s, line in batch
                if (s, line) != _END
            ]
            if lines:
                self._post(("\n".join(lines) + "\n").encode())
            if done:
                return

    def _post(self, body: bytes) -> None:
        request = urllib.request.Request(self._url, data=body, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=REPORT_TIMEOUT) as answer:
                answer.read()
        except (urllib.error.URLError, OSError) as exc:
            if not self._warned:
                self._warned = True
                print(
                    f"loopwatch mcp-stdio: reporting to the gateway failed: {exc}", file=sys.stderr
                )
