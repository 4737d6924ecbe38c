"""pytest's entry (`pytest11`, name `loopwatch`): the options, the `loopwatch` fixture (a
gateway on a free port with a temporary SQLite store, on a thread of its own), cassettes
written after each test or replayed to it, and a divergence (or a recording the agent left
unplayed) turned into the test's failure.

In replay mode the gateway still runs: its upstream is a replay server built from the test's
cassettes, so traces and assertions read the same as when the test ran against a provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gateway.testing.divergences import Divergences
    from gateway.testing.handle import Loopwatch

DIVERGED: pytest.StashKey[Divergences] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopwatch", "Loopwatch gateway for agent tests")
    group.addoption(
        "--loopwatch-upstream",
        metavar="URL",
        help="the provider's OpenAI base URL (default: LOOPWATCH_UPSTREAM_URL or the config)",
    )
    group.addoption(
        "--loopwatch-record",
        metavar="DIR",
        help="save each test's traces as cassettes DIR/<test id>/<n>.jsonl",
    )
    group.addoption(
        "--loopwatch-replay",
        metavar="DIR",
        help="answer each test from its cassettes in DIR, offline; fail at a divergence",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.option.loopwatch_record and config.option.loopwatch_replay:
        # A replay recorded would replace the very cassettes it plays.
        raise pytest.UsageError("--loopwatch-record and --loopwatch-replay exclude each other")


@pytest.fixture
def loopwatch(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Loopwatch]:
    # Imported here: a pytest run that never asks for the fixture loads no gateway.
    from gateway.testing.running import run_for_test

    options = request.config.option
    with run_for_test(
        request.node.nodeid,
        tmp_path_factory.mktemp("loopwatch"),
        upstream=options.loopwatch_upstream,
        record=options.loopwatch_record,
        replay=options.loopwatch_replay,
    ) as (handle, diverged):
        request.node.stash[DIVERGED] = diverged
        yield handle


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A replay that diverged fails the test, even when the agent swallowed the 409."""
    report = yield
    replayed = item.stash.get(DIVERGED, None)
    failures = replayed.failures() if replayed is not None and call.when == "call" else []
    if not failures:
        return report
    text = "loopwatch: the replay diverged from the cassette\n" + "\n\n".join(failures)
    if report.passed:
        report.outcome = "failed"
        report.longrepr = text
    else:
        report.sections.append(("loopwatch replay", text))
    return report
