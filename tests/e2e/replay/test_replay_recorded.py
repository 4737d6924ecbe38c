"""A replay is recorded like any run: the 3-step tool loop recorded through a gateway,
exported, replayed by the whole replay (its gateway in front of the cassette's player) with
no provider, lands in the store as a trace naming the original, and where the agent left the
recording (a refused step in fail mode, the provider's answer in live mode) it says so; the
original lists its replays, the pages link both ways, every id escaped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from markupsafe import escape

from gateway.config import Settings
from gateway.ops import replaying
from gateway.replay import tape
from tests.e2e.replay.test_replay import (
    FINAL,
    NO_PROVIDER,
    PROTOCOLS,
    rainy_rome,
    recorded,
    sunny,
)
from tests.e2e.ui.test_ui_pages import fetch
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401
from tests.processes import environment

HOSTILE = 'x"><script>alert(1)</script>'


def replay_settings(gw: Gateway, tmp: Path, upstream: str) -> Settings:
    """The replay's own process settings: the original's store, a spool of its own."""
    spool = tmp / "replay-spool"
    return Settings(
        host="127.0.0.1",
        port=0,
        database_url=gw.deps.settings.database_url,
        spool_dir=str(spool),
        recorder_flush_seconds=0.01,
        upstream_url=upstream,
        anthropic_upstream_url=upstream.removesuffix("/v1"),
    )


async def replayed(
    gw: Gateway, cassette: str, tmp: Path, agent: Any, *, live: bool = False, upstream: str = ""
) -> Any:
    """The agent run against the whole replay; what it returned or raised. The replay's
    records are all stored when it has stopped."""
    trace_id, steps = tape.read(cassette)
    settings = replay_settings(gw, tmp, upstream or NO_PROVIDER)
    async with replaying.serving(settings, trace_id, steps, live=live) as url:
        try:
            return await agent(f"{url}/v1")
        except openai.APIStatusError as exc:  # the 409 the SDK raises
            return exc


async def replays_of(gw: Gateway, original: str) -> list[dict[str, Any]]:
    listed = [t for t in await gw.traces() if t["replay_of"] == original]
    return [await gw.trace(t["id"]) for t in listed]


def final_text(trace: dict[str, Any]) -> str:
    last = trace["steps"][-1]["output_items"]
    return "".join(item["text"] or "" for item in last if item["kind"] == "assistant_text")


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_a_replay_is_recorded_as_a_trace_of_the_original(
    make_gateway: GatewayFactory, tmp_path: Path, protocol: str
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, protocol, True, tmp_path)
    [original] = await gw.traces()
    sent = len(gw.provider.received)
    agent, _ = PROTOCOLS[protocol]
    answer = await replayed(gw, cassette, tmp_path, lambda base: agent(base, True, sunny))
    assert answer == FINAL
    assert len(gw.provider.received) == sent  # nothing reached a provider
    [replay] = await replays_of(gw, original["id"])
    assert replay["id"] != original["id"]
    assert replay["step_count"] == original["step_count"] == 3
    assert replay["diverged_at"] is None and replay["fork_of"] is None
    assert final_text(replay) == FINAL
    tokens = ("prompt_tokens", "completion_tokens", "total_tokens")
    recorded_steps = (await gw.trace(original["id"]))["steps"]
    assert [[s["usage"][n] for n in tokens] for s in replay["steps"]] == [
        [s["usage"][n] for n in tokens] for s in recorded_steps
    ]
    listed = (await gw.trace(original["id"]))["replays"]
    assert [(r["id"], r["steps"], r["diverged_at"]) for r in listed] == [(replay["id"], 3, None)]


async def test_a_refused_divergence_is_recorded_at_its_step_and_shown(
    make_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, "chat", False, tmp_path)
    [original] = await gw.traces()
    agent, _ = PROTOCOLS["chat"]
    refused = await replayed(gw, cassette, tmp_path, lambda base: agent(base, False, rainy_rome))
    assert isinstance(refused, openai.APIStatusError) and refused.status_code == 409
    [replay] = await replays_of(gw, original["id"])
    assert replay["replay_of"] == original["id"] and replay["diverged_at"] == 3
    assert replay["step_count"] == 3
    third = replay["steps"][2]
    assert third["http_status"] == 409
    assert "replay diverged at step 3" in json.dumps(third["error"])
    # The pages: the replay links to its original and marks step 3; the original lists it.
    page = await fetch(gw, f"/traces/{replay['id']}")
    link = f'<a href="/traces/{original["id"]}" class="replay-original">{original["id"]}</a>'
    assert link in page.text and "left the recording at step 3" in page.text
    [marked] = [r for r in page.text.split("<details class=") if "badge diverged" in r]
    assert 'data-seq="3"' in marked
    original_page = await fetch(gw, f"/traces/{original['id']}")
    assert f'<a href="/traces/{replay["id"]}" class="replay-run">' in original_page.text
    assert "diverged at step 3" in original_page.text


async def test_a_live_divergence_records_the_providers_answer(
    make_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gw = await make_gateway()
    cassette = await recorded(gw, "messages", True, tmp_path)
    [original] = await gw.traces()
    agent, queue = PROTOCOLS["messages"]
    queue(gw.provider, True, 1)  # the final answer, to the changed step
    gw.provider.received.clear()
    upstream: str = gw.provider.url  # type: ignore[attr-defined]
    answer = await replayed(
        gw,
        cassette,
        tmp_path,
        lambda base: agent(base, True, rainy_rome),
        live=True,
        upstream=upstream,
    )
    assert answer == FINAL
    [live] = gw.provider.received
    assert "Rome: rainy" in live.body.decode()
    [replay] = await replays_of(gw, original["id"])
    assert (replay["step_count"], replay["diverged_at"]) == (3, 3)
    assert replay["steps"][2]["http_status"] == 200
    assert final_text(replay) == FINAL


async def test_a_replay_of_a_hostile_id_is_shown_escaped(
    make_gateway: GatewayFactory, tmp_path: Path
) -> None:
    gw = await make_gateway()
    cassette = Path(await recorded(gw, "chat", False, tmp_path))
    header, *rows = cassette.read_text().splitlines()
    named = json.loads(header) | {"trace_id": HOSTILE}
    cassette.write_text("\n".join([json.dumps(named), *rows]) + "\n")
    agent, _ = PROTOCOLS["chat"]
    assert await replayed(gw, str(cassette), tmp_path, lambda b: agent(b, False, sunny)) == FINAL
    [replay] = await replays_of(gw, HOSTILE)
    page = await fetch(gw, f"/traces/{replay['id']}")
    assert str(escape(HOSTILE)) in page.text and HOSTILE not in page.text


def test_a_replay_whose_store_cannot_be_opened_says_so_in_one_line(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text(json.dumps({"format": tape.FORMAT, "trace_id": "t-1"}) + "\n")
    unreachable = "postgresql://loopwatch@127.0.0.1:1/nowhere"
    env = environment(LOOPWATCH_DATABASE_URL=unreachable, LOOPWATCH_PORT="0")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "replay", str(cassette)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    [line] = [x for x in done.stderr.splitlines() if x.startswith("loopwatch:")]
    assert "cannot open database postgresql://loopwatch@127.0.0.1:1/nowhere" in line
