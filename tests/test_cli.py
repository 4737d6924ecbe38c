"""The command line: `--version`, `key-fingerprint` only with the gateway's own secret,
`replay` only with a cassette, `mcp-server` only on a store it can read."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from gateway.checks.budgets import key_fingerprint
from gateway.cli import main
from gateway.store.engine import create_schema, install_secret
from tests.conftest import Database, OpenEngine
from tests.processes import environment


def test_version_flag_prints_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"loopwatch {metadata.version('loopwatch')}\n"


def test_installed_command_prints_its_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loopwatch " + metadata.version("loopwatch")
    assert result.stderr == ""


def _fingerprint(
    database_url: str, key: str = "sk-team-0123456789"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "key-fingerprint", "--database-url", database_url],
        input=key + "\n",
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_key_fingerprint_refuses_a_database_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    result = _fingerprint(f"sqlite:///{path}")
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"loopwatch: no database at {path}: ")
    assert list(tmp_path.iterdir()) == [], "neither a database nor a secret is created"


def test_key_fingerprint_refuses_a_database_without_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()  # an empty file is an empty SQLite database
    result = _fingerprint(f"sqlite:///{path}")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "holds no install secret" in line
    assert path.stat().st_size == 0


def test_key_fingerprint_uses_the_gateway_secret(
    database: Database, open_engine: OpenEngine
) -> None:
    empty = _fingerprint(database.url)
    assert empty.returncode == 2 and len(empty.stderr.splitlines()) == 1
    engine = open_engine(database.url)
    create_schema(engine)
    secret = install_secret(engine)
    engine.dispose()
    result = _fingerprint(database.url, "sk-team-0123456789")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == key_fingerprint(secret, "sk-team-0123456789")


def test_key_fingerprint_names_an_unreachable_database() -> None:
    result = _fingerprint("postgresql://lw:pw-never-shown@127.0.0.1:1/lw")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("loopwatch: cannot open database postgresql://lw:***@127.0.0.1:1/lw")
    assert "pw-never-shown" not in line


@pytest.mark.parametrize(
    "database_url",
    ["sqlite:////nonexistent-loopwatch/dir/x.db", "postgresql://lw:secret@127.0.0.1:1/lw"],
)
def test_demo_and_serve_fail_to_start_alike(database_url: str) -> None:
    """The same store that cannot be opened: one line naming it (never its password), exit 2,
    from `serve` and from `demo` alike."""
    lines = []
    for command in (["serve", "--port", "0"], ["demo", "--once", "--port", "0"]):
        result = subprocess.run(
            [sys.executable, "-m", "gateway", *command, "--database-url", database_url],
            env=environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        lines.append(line)
    assert lines[0] == lines[1]
    assert lines[0].startswith("loopwatch: cannot open database ") and "secret" not in lines[0]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"format": "something-else/1"}\n', "is not a cassette"),
        ("not json\n", "cannot read the cassette"),
    ],
)
def test_replay_refuses_a_file_that_is_no_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, reason: str
) -> None:
    cassette = tmp_path / "run.jsonl"
    cassette.write_text(text, encoding="utf-8")
    assert main(["replay", str(cassette)]) == 2
    assert reason in capsys.readouterr().err


def test_replay_refuses_a_missing_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(tmp_path / "none.jsonl"), "--diverge", "live"]) == 2
    assert "cannot read the cassette" in capsys.readouterr().err


def test_mcp_server_refuses_a_store_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'store.db'}"
    assert main(["mcp-server", "--database-url", url]) == 1
    captured = capsys.readouterr()
    assert captured.out == "", "standard output carries MCP messages alone"
    assert captured.err.startswith("loopwatch: cannot open database")
