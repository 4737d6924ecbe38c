"""The plugin as a user gets it: the project pip-installed into a fresh virtualenv with
pytest and the openai SDK, its `loopwatch` fixture found through the `pytest11` entry point,
an agent's test recorded against the fake provider and then replayed with no provider."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.pytest_plugin.provider_thread import ProviderThread, provider_thread  # noqa: F401
from tests.e2e.test_install import _source_copy
from tests.processes import environment

SAMPLE = Path(__file__).with_name("sample_agent.py")


def _install(tmp_path: Path) -> Path:
    source = _source_copy(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(source), "pytest", "openai"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if installed.returncode != 0 and re.search(
        r"No matching distribution|NewConnectionError", installed.stderr
    ):
        pytest.skip(f"package index unreachable: {installed.stderr[-300:]}")
    assert installed.returncode == 0, installed.stderr[-2000:]
    return venv / "bin" / "python"


def _pytest(python: Path, where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-k", "test_weather", *args],
        cwd=where, env=environment(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_record_then_replay_in_a_fresh_virtualenv(
    tmp_path: Path, provider_thread: ProviderThread
) -> None:
    python = _install(tmp_path)
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "test_agent.py").write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    cassettes = tmp_path / "cassettes"
    provider_thread.queue_weather()

    recorded = _pytest(
        python, agent, f"--loopwatch-upstream={provider_thread.url}",
        f"--loopwatch-record={cassettes}",
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-2000:]
    assert "loopwatch-0.1.0" in recorded.stdout  # the plugin, found by its entry point
    assert [p.name for p in cassettes.rglob("*.jsonl")] == ["1.jsonl"]

    provider_thread.close()
    replayed = _pytest(python, agent, f"--loopwatch-replay={cassettes}")
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-2000:]
    assert "1 passed" in replayed.stdout
