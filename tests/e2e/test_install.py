"""The README's quick start in a fresh virtualenv: it installs the runtime dependencies only
(no test tools), and `loopwatch demo --once` runs on them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import environment

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TEST_ONLY = {"pytest", "pytest-aiohttp", "openai", "anthropic", "playwright", "ruff", "mypy"}


def quick_start() -> list[str]:
    """The README's first command, split at `&&`: make a venv, install, run the demo."""
    [line] = re.findall(r"^python3 -m venv \.venv && .*$", README, flags=re.MULTILINE)
    return [part.strip() for part in line.split("&&")]


def test_quick_start_installs_without_the_test_extra() -> None:
    make_venv, install, run = quick_start()
    assert make_venv == "python3 -m venv .venv"
    assert install == ".venv/bin/pip install -e ."
    assert run == ".venv/bin/loopwatch demo"
    assert "pip install -q -e '.[test,frameworks]'" in (ROOT / ".ci" / "run").read_text()


def _source_copy(tmp_path: Path) -> Path:
    """What an editable install needs, away from the working tree (pip writes into it)."""
    app = tmp_path / "loopwatch"
    app.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("gateway", "web"):
        shutil.copytree(ROOT / name, app / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, app / name)
    return app


@pytest.mark.slow
def test_demo_runs_on_the_runtime_dependencies_alone(tmp_path: Path) -> None:
    app = _source_copy(tmp_path)
    _, install, run = quick_start()
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=app, check=True)
    installed = subprocess.run(
        install.split(), cwd=app, capture_output=True, text=True, timeout=900
    )
    if installed.returncode != 0 and re.search(
        r"No matching distribution|NewConnectionError", installed.stderr
    ):
        pytest.skip(f"package index unreachable: {installed.stderr[-300:]}")
    assert installed.returncode == 0, installed.stderr[-2000:]
    listed = subprocess.run(
        [".venv/bin/python", "-m", "pip", "list", "--format", "json"],
        cwd=app, capture_output=True, text=True, check=True,
    )  # fmt: skip
    names = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert names & TEST_ONLY == set()
    assert {"aiohttp", "alembic", "sqlmodel"} <= names

    database = f"sqlite:///{tmp_path}/demo.db"
    demo = subprocess.run(
        [
            str(app / run.split()[0]),
            *run.split()[1:],
            "--once",
            "--port",
            "0",
            "--database-url",
            database,
        ],
        cwd=tmp_path,  # not the source tree: the installed command on its own
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "11 sample runs recorded" in demo.stdout
