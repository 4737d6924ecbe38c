"""The pytest plugin as its users run it: a small agent test file run by pytester against the
fake provider, recorded as cassettes, replayed with the provider gone, and failing with the
diff when a tool's result changed, or with the assertions' own messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.pytest_plugin.provider_thread import ProviderThread, provider_thread  # noqa: F401
from tests.fakes.chat import call, completion

pytest_plugins = ["pytester"]

SAMPLE = Path(__file__).with_name("sample_agent.py")
TEST_ID = "test_agent.py-test_weather"
TIMEOUT = 180  # seconds for one run of the agent's tests


@pytest.fixture
def agent_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("WEATHER", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_agent=SAMPLE.read_text(encoding="utf-8"))
    return pytester


def record(
    pytester: pytest.Pytester, provider: ProviderThread, cassettes: Path, test: str = "test_weather"
) -> None:
    provider.queue_weather()
    result = pytester.runpytest_subprocess(
        "-k", test, f"--loopwatch-upstream={provider.url}",
        f"--loopwatch-record={cassettes}", timeout=TIMEOUT)  # fmt: skip
    result.assert_outcomes(passed=1)


def test_record_writes_one_cassette_per_trace(
    agent_tests: pytest.Pytester, provider_thread: ProviderThread, tmp_path: Path
) -> None:
    record(agent_tests, provider_thread, tmp_path)

    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    assert written == [Path(TEST_ID) / "1.jsonl"]
    text = (tmp_path / TEST_ID / "1.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["format"] == "loopwatch-cassette/1"
    assert [line["seq"] for line in lines[1:]] == [1, 2]
    assert len(provider_thread.fake.received) == 2


def test_replay_passes_with_the_provider_gone(
    agent_tests: pytest.Pytester, provider_thread: ProviderThread, tmp_path: Path
) -> None:
    record(agent_tests, provider_thread, tmp_path)
    provider_thread.close()  # nothing answers there any more

    result = agent_tests.runpytest_subprocess(
        "-k", "test_weather", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    result.assert_outcomes(passed=1)


def test_replay_fails_with_the_diff_when_a_tool_result_changed(
    agent_tests: pytest.Pytester,
    provider_thread: ProviderThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record(agent_tests, provider_thread, tmp_path)
    monkeypatch.setenv("WEATHER", "rainy")

    result = agent_tests.runpytest_subprocess(
        "-k", "test_weather", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*replay diverged at step 2, new item 0:*Paris: sunny*Paris: rainy*",
            "*diff:*",
        ]
    )
    assert '"received"' in result.stdout.str()


def test_replay_fails_a_test_whose_agent_swallows_the_error(
    agent_tests: pytest.Pytester,
    provider_thread: ProviderThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record(agent_tests, provider_thread, tmp_path, "test_swallowing")
    monkeypatch.setenv("WEATHER", "rainy")

    result = agent_tests.runpytest_subprocess(
        "-k", "test_swallowing", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*loopwatch: the replay diverged from the cassette*",
            "*replay diverged at step 2*",
        ]
    )


def test_replay_fails_a_test_whose_agent_stops_before_the_recording(
    agent_tests: pytest.Pytester,
    provider_thread: ProviderThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record(agent_tests, provider_thread, tmp_path, "test_swallowing")
    monkeypatch.setenv("AGENT_STEPS", "1")  # the agent gives up after its first request

    result = agent_tests.runpytest_subprocess(
        "-k", "test_swallowing", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the agent stopped before the recording did: it made 1 of the 2 recorded "
            "requests; next would have been step 2 (POST /v1/chat/completions)*",
        ]
    )


def test_replay_without_cassettes_says_to_record(
    agent_tests: pytest.Pytester, tmp_path: Path
) -> None:
    result = agent_tests.runpytest_subprocess(
        "-k", "test_weather", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no cassettes in*record them first with --loopwatch-record*"])


def test_assertions_name_the_trace_and_what_went_wrong(
    agent_tests: pytest.Pytester, provider_thread: ProviderThread
) -> None:
    provider_thread.queue_weather(runs=2)
    provider_thread.fake.queue(  # a call of a tool the request did not declare
        completion(tool_calls=[call("call_1", "get_time", {"city": "Paris"})]),
        completion("Paris is sunny."),
    )

    result = agent_tests.runpytest_subprocess(
        "-k", "limit or clean", f"--loopwatch-upstream={provider_thread.url}", timeout=TIMEOUT
    )  # fmt: skip

    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: loopwatch: more than 1 steps:",
            "*trace tr-* took 2 steps",
            "*AssertionError: loopwatch: more than $0.000001:",
            "*trace tr-* cost $0.000*",
            "*AssertionError: loopwatch: violations found:",
            "*trace tr-*: 1 (undeclared_tool: 1)",
        ]
    )


def test_a_test_of_two_runs_replays_its_cassettes_in_order(
    agent_tests: pytest.Pytester, provider_thread: ProviderThread, tmp_path: Path
) -> None:
    provider_thread.queue_weather()
    provider_thread.queue_weather(city="Rome")
    recorded = agent_tests.runpytest_subprocess(
        "-k", "test_two_runs", f"--loopwatch-upstream={provider_thread.url}",
        f"--loopwatch-record={tmp_path}", timeout=TIMEOUT,
    )  # fmt: skip
    recorded.assert_outcomes(passed=1)
    folder = tmp_path / "test_agent.py-test_two_runs"
    assert sorted(p.name for p in folder.iterdir()) == ["1.jsonl", "2.jsonl"]
    assert "Rome" in (folder / "2.jsonl").read_text(encoding="utf-8")
    provider_thread.close()

    result = agent_tests.runpytest_subprocess(
        "-k", "test_two_runs", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    result.assert_outcomes(passed=1)


def test_record_and_replay_together_are_refused(
    agent_tests: pytest.Pytester, tmp_path: Path
) -> None:
    result = agent_tests.runpytest_subprocess(
        f"--loopwatch-record={tmp_path}", f"--loopwatch-replay={tmp_path}", timeout=TIMEOUT
    )

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--loopwatch-record and --loopwatch-replay exclude each other*"])
