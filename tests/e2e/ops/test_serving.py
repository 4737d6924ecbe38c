"""`loopwatch serve` as a real process: start-up failures are one line and exit 2, and
"listening" is said only once the port is bound and the store is open."""

from __future__ import annotations

import signal
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.processes import run_serve, serving


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "listening" not in stderr and "Traceback" not in stderr
    return lines[0]


def test_port_in_use(taken_port: int, tmp_path: Path) -> None:
    database = tmp_path / "lw.db"
    result = run_serve("--port", str(taken_port), "--database-url", f"sqlite:///{database}")
    assert result.returncode == 2
    assert _one_line(result.stderr) == (
        f"loopwatch: cannot listen on 127.0.0.1:{taken_port}: address already in use"
    )
    assert result.stdout == ""
    assert not database.exists(), "the port is bound before the store is touched"


def test_unresolvable_host(tmp_path: Path) -> None:
    token = "an-admin-token-of-some-length"
    result = run_serve(
        "--host", "no-such-host.invalid", "--port", "0", LOOPWATCH_ADMIN_TOKEN=token,
        LOOPWATCH_DATABASE_URL=f"sqlite:///{tmp_path}/lw.db",
    )  # fmt: skip
    assert result.returncode == 2
    assert _one_line(result.stderr).startswith("loopwatch: cannot listen on no-such-host.invalid:0")


@pytest.mark.parametrize(
    ("place", "cause"),
    [
        ("missing-directory/lw.db", "unable to open database file"),
        ("not-a-database.db", "file is not a database"),
    ],
)
def test_sqlite_database_that_cannot_be_opened(tmp_path: Path, place: str, cause: str) -> None:
    (tmp_path / "not-a-database.db").write_text("these are not the pages of a database\n" * 200)
    url = f"sqlite:///{tmp_path}/{place}"
    result = run_serve("--port", "0", "--database-url", url)
    assert result.returncode == 2
    assert _one_line(result.stderr) == f"loopwatch: cannot open database {url}: {cause}"


def test_unreachable_postgresql() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://loopwatch:s3cret-password@127.0.0.1:{port}/lw"
    result = run_serve("--port", "0", "--database-url", url)
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert line.startswith(
        f"loopwatch: cannot open database postgresql://loopwatch:***@127.0.0.1:{port}/lw: "
    )
    assert "Connection refused" in line and "s3cret" not in line


async def test_listening_only_once_bound_and_the_store_is_open(tmp_path: Path) -> None:
    database = tmp_path / "lw.db"
    async with serving("--database-url", f"sqlite:///{database}") as served:
        # Said only now: the schema is in place and the port answers.
        with sqlite3.connect(database) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall()
        async with aiohttp.ClientSession() as session, session.get(served.url + "/healthz") as r:
            assert r.status == 200
        [said] = [line for line in served.lines() if "listening on" in line]
        assert said.endswith(f"listening on {served.url} (upstream https://api.openai.com/v1)")
        served.process.send_signal(signal.SIGTERM)
        assert await served.process.wait() == 0
    assert "Traceback" not in "\n".join(served.lines())
