"""Who holds a SQLite store: one gateway counting in its memory alone, processes counting in
the ledger file together, never both; PostgreSQL and in-memory stores are never locked."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import StartupError
from gateway.store.holder import held_alone, holding


def test_a_gateway_counting_in_memory_holds_its_file_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/lw.db"
    with holding(url, alone=True):
        for alone in (True, False):
            with (
                pytest.raises(StartupError, match="run several gateways on PostgreSQL"),
                holding(url, alone=alone),
            ):
                pass
        with pytest.raises(StartupError, match="in use by a running loopwatch"), held_alone(url):
            pass
        with holding(f"sqlite:///{tmp_path}/other.db", alone=True):
            pass  # another file is another store
    with holding(url, alone=True):
        pass  # released with the block


def test_processes_counting_in_the_ledger_file_share_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/lw.db"
    with (
        holding(url, alone=False),
        holding(url, alone=False),
        pytest.raises(StartupError) as refused,
        holding(url, alone=True),
    ):
        pass
    assert str(refused.value) == (
        f"database {tmp_path}/lw.db is in use by another loopwatch gateway: one gateway per "
        "SQLite file (`serve --workers N` for more processes); run several gateways on "
        "PostgreSQL"
    )
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("url", ["postgresql://lw@127.0.0.1/lw", "sqlite:///:memory:"])
def test_stores_without_a_file_are_not_locked(url: str) -> None:
    with holding(url, alone=True), holding(url, alone=True):
        pass
