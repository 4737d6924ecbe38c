"""Where a test's cassettes live, and a replay asked of a test that has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.testing import cassettes


@pytest.mark.parametrize(
    ("nodeid", "name"),
    [
        ("test_agent.py::test_weather", "test_agent.py-test_weather"),
        ("tests/agents/test_a.py::TestLoop::test_b", "tests-agents-test_a.py-TestLoop-test_b"),
        ("test_a.py::test_b[gpt-4o mini]", "test_a.py-test_b[gpt-4o-mini]"),
    ],
)
def test_a_test_id_is_one_folder_name(nodeid: str, name: str) -> None:
    assert cassettes.folder("rec", nodeid) == Path("rec") / name


def test_no_cassettes_says_to_record_first(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="record them first with --loopwatch-record"):
        cassettes.load(tmp_path / "test_agent.py-test_weather")


def test_cassettes_play_in_their_number_order(tmp_path: Path) -> None:
    header = '{"format": "loopwatch-cassette/1", "trace_id": "tr-%s"}\n'
    step = '{"seq": 1, "protocol": "p", "path": "/v1/%s", "request": {}, "response": {}}\n'
    for number in (1, 2, 10):
        text = header % number + step % number
        (tmp_path / f"{number}.jsonl").write_text(text, encoding="utf-8")

    assert [s.path for s in cassettes.load(tmp_path)] == ["/v1/1", "/v1/2", "/v1/10"]
