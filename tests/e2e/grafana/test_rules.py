"""Alert rules and dashboard: promtool, names exported by /metrics, a real Prometheus firing."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests import harness
from tests.fakes.chat import completion
from tests.harness import Gateway, GatewayFactory
from tests.traffic import HELLO, ORPHAN, all_kinds_of_traffic, post, scrape

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

GRAFANA = Path(__file__).resolve().parents[3] / "grafana"
RULES = GRAFANA / "alerts" / "loopwatch-rules.yml"
RULE_TESTS = GRAFANA / "alerts" / "loopwatch-rules.test.yml"
DASHBOARD = GRAFANA / "dashboards" / "loopwatch.json"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool missing: apt-get install prometheus (Debian)"
)
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus missing: apt-get install prometheus (Debian)"
)
# Label matchers and grouping clauses name labels, not metrics: dropped before the search.
_NOT_METRICS = re.compile(
    r"\{[^}]*\}|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"
)
_METRIC = re.compile(r"\b(?:loopwatch|gen_ai)_[a-z0-9_]+")


def yaml_values(text: str, key: str) -> list[str]:
    """Values of `key:` in our YAML files, plain or folded (`>-` then indented lines).

    A small reader for these two files keeps PyYAML out of the test dependencies.
    """
    values, lines = [], text.splitlines()
    for number, line in enumerate(lines):
        found = re.match(rf"^(\s*)(?:- )?{key}:\s*(.*)$", line)
        if found is None:
            continue
        indent, value = len(found.group(1)), found.group(2)
        if value in (">-", ">", "|"):
            block = []
            for follow in lines[number + 1 :]:
                if follow.strip() and len(follow) - len(follow.lstrip()) <= indent:
                    break
                block.append(follow.strip())
            value = " ".join(block).strip()
        values.append(value.strip("'\""))
    return values


def rule_expressions() -> list[str]:
    return yaml_values(RULES.read_text(), "expr")


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def metric_names(expressions: list[str]) -> set[str]:
    return {name for e in expressions for name in _METRIC.findall(_NOT_METRICS.sub("", e))}


def alert_names() -> list[str]:
    return yaml_values(RULES.read_text(), "alert")


@pytest.mark.promtool
@needs_promtool
def test_promtool_check_rules() -> None:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.promtool
@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    text = RULE_TESTS.read_text()
    # Each case: "alertname: X" followed by "exp_alerts: []" (quiet) or a list (firing).
    cases = re.findall(r"alertname: (\w+)\n\s*exp_alerts:( \[\])?", text)
    assert len(alert_names()) >= 7
    for alert in alert_names():
        kinds = {"quiet" if empty else "firing" for name, empty in cases if name == alert}
        assert kinds == {"quiet", "firing"}, alert


def test_every_alert_tells_on_call_what_to_do() -> None:
    rules = RULES.read_text().split("- alert: ")[1:]
    assert len(rules) == len(alert_names())
    for rule in rules:
        for key in ("summary:", "description:", "runbook:", "severity:"):
            assert key in rule, f"{rule.split()[0]}: no {key}"
        assert re.search(r"severity: (warning|critical)\n", rule)


def test_dashboard_uses_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variable = dashboard["templating"]["list"][0]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in ("requests", "p99", "overhead", "first chunk", "tokens", "stop reasons"):
        assert topic in titles, topic
    for topic in ("violations", "budget", "recorder"):
        assert topic in titles, topic


async def test_rules_and_dashboard_name_only_exported_metrics(gateway: Gateway) -> None:
    await all_kinds_of_traffic(gateway)
    exported = {name for name, _ in await scrape(gateway)}
    for source, expressions in (
        ("rules", rule_expressions()),
        ("dashboard", dashboard_expressions()),
    ):
        used = metric_names(expressions)
        assert used, source
        assert used <= exported, f"{source} names unexported metrics: {used - exported}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
async def prometheus(tmp_path: Path, make_gateway: GatewayFactory) -> AsyncIterator[Any]:
    """A real Prometheus scraping an in-process gateway every second, the rules loaded."""
    assert PROMETHEUS is not None
    gw = await make_gateway(max_steps=1)
    target = gw.url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "loopwatch", "static_configs": [{"targets": [target]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    port = _free_port()
    with (tmp_path / "prometheus.log").open("w") as log:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            yield gw, f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=20)


async def _api(base: str, path: str, **params: str) -> Any:
    """The `data` of a Prometheus API answer; None while it is still starting."""
    try:
        async with aiohttp.ClientSession() as s, s.get(base + path, params=params) as r:
            return (await r.json())["data"] if r.status == 200 else None
    except aiohttp.ClientError:
        return None


async def _wait_for(check: Any, what: str, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with_result = await check()
        if with_result:
            return with_result
        await asyncio.sleep(0.5)
    pytest.fail(f"gave up after {seconds:.0f}s waiting for {what}")


@pytest.mark.promtool
@needs_prometheus
async def test_real_prometheus_fires_pairing_and_budget_alerts(prometheus: Any) -> None:
    """The pairing and budget alerts use `for: 0m`, so they fire on the first evaluation
    after a scrape has seen the counter move from its pre-initialized 0."""
    gw, base = prometheus

    async def scraped_twice() -> bool:
        data = await _api(base, "/api/v1/query", query='count_over_time(up{job="loopwatch"}[1m])')
        return bool(data and data["result"] and float(data["result"][0]["value"][1]) >= 2)

    await _wait_for(scraped_twice, "two scrapes of the gateway")
    assert await post(gw, ORPHAN) == 400
    gw.provider.queue(completion("one"))
    assert await post(gw, HELLO, **{"X-Loopwatch-Trace-Id": "e2e-budget"}) == 200
    assert await post(gw, HELLO, **{"X-Loopwatch-Trace-Id": "e2e-budget"}) == 429

    async def firing() -> list[dict[str, Any]]:
        data = await _api(base, "/api/v1/alerts")
        alerts = [a for a in (data or {}).get("alerts", []) if a["state"] == "firing"]
        names = {a["labels"]["alertname"] for a in alerts}
        wanted = {"LoopwatchPairingViolations", "LoopwatchBudgetRefusals"}
        return alerts if wanted <= names else []

    alerts = await _wait_for(firing, "the pairing and budget alerts to fire")
    labels = {a["labels"]["alertname"]: a["labels"] for a in alerts}
    assert labels["LoopwatchPairingViolations"]["kind"] == "orphan_tool_result"
    assert labels["LoopwatchBudgetRefusals"]["budget"] == "steps"
    assert "LoopwatchDown" not in labels
