"""Stored size of a step with and without the wire shapes a cassette spells requests back
from: per protocol, the bytes of the steps' rows (step fields, parameters, tools, input and
output items as JSON) on the agent fixtures (each request alone, and the later request of a
run as the step that goes on from the earlier one) and on the demo's runs, and the ratio.
The fixtures are sanitized: long prose stands as `<text: N chars>`. They are measured as
they are and at the size they were sent (`sent-size/`: each such text N characters again),
since a shape's bytes are mostly fixed while the texts it leaves out are not.

Usage: python bench/cassette_size.py
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.config import RedactionSettings, Settings  # noqa: E402
from gateway.demo.main import serve_demo  # noqa: E402
from gateway.items import ASSISTANT_KINDS  # noqa: E402
from gateway.protocols import request_facts  # noqa: E402
from gateway.protocols.registry import ADAPTERS  # noqa: E402
from gateway.protocols.wire_shapes.keys import ECHO, RESPELT, WIRE  # noqa: E402
from gateway.protocols.wire_shapes.record import HISTORY_FIELDS, shaped  # noqa: E402
from gateway.redaction.redactor import Redactor  # noqa: E402
from gateway.store.engine import make_engine  # noqa: E402
from gateway.store.read import queries  # noqa: E402

SHAPES = (WIRE, ECHO, RESPELT)
_ITEM_FIELDS = ("input_items", "output_items")
FIXTURES = ROOT / "tests" / "fixtures" / "agents"
PROTOCOL_OF_PATH = {
    "/v1/messages": "messages",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
}
REDACTOR = Redactor(RedactionSettings())


def without_shapes(item: dict[str, Any]) -> dict[str, Any]:
    attrs = {k: v for k, v in (item.get("attrs") or {}).items() if k not in SHAPES}
    return {**item, "attrs": attrs}


def sizes(rows: dict[str, Any], items: list[dict[str, Any]]) -> tuple[int, int]:
    """Bytes of a step's rows with its items' shapes, and without them."""
    with_shapes = len(json.dumps(rows)) + sum(len(json.dumps(i)) for i in items)
    bare = len(json.dumps(rows)) + sum(len(json.dumps(without_shapes(i))) for i in items)
    return with_shapes, bare


def parse(adapter: Any, element: Any) -> list[Any]:
    field = HISTORY_FIELDS[adapter.name]
    return list(adapter.parse_request({field: [element]}).items)


_SANITIZED = re.compile(r"<text: (\d+) chars>")
_PROSE = "The agent reads the files it was given and plans its next command. "


def at_sent_size(value: Any) -> Any:
    """The fixture with each sanitized text as long as the one sent."""
    if isinstance(value, str):
        return _SANITIZED.sub(
            lambda m: (_PROSE * (int(m[1]) // len(_PROSE) + 1))[: int(m[1])], value
        )
    if isinstance(value, list):
        return [at_sent_size(v) for v in value]
    if isinstance(value, dict):
        return {k: at_sent_size(v) for k, v in value.items()}
    return value


def fixture_steps(sent_size: bool) -> list[tuple[str, tuple[int, int]]]:
    out = []
    bodies = {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}
    if sent_size:
        bodies = {name: at_sent_size(fixture) for name, fixture in bodies.items()}
    group = "sent-size/" if sent_size else "fixtures/"
    for name, fixture in bodies.items():
        protocol = PROTOCOL_OF_PATH[fixture["path"]]
        adapter = ADAPTERS[protocol]
        body = fixture["body"]
        items = adapter.parse_request(body).items
        earlier = bodies.get(f"{name[:-1]}{int(name[-1]) - 1}")
        field = HISTORY_FIELDS[protocol]
        if earlier is not None and len(earlier["body"][field]) < len(body[field]):
            # The step going on from the earlier one: its new elements follow the echo of
            # the earlier one's answer (stored with that step, as its output).
            after = body[field][len(earlier["body"][field]) :]
            while after and all(i.kind in ASSISTANT_KINDS for i in parse(adapter, after[0])):
                after = after[1:]
            items = [i for element in after for i in parse(adapter, element)]
        new = [REDACTOR.redact_item(i).to_json() for i in shaped(adapter, body, items)]
        rows = {
            "params": dict(request_facts.request_params(adapter, body) or {}),
            "tools": list(request_facts.declared_tools(adapter, body) or ()),
        }
        out.append((f"{group}{protocol}", sizes(rows, new)))
    return out


def demo_steps() -> list[tuple[str, tuple[int, int]]]:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/demo.db"
        settings = Settings(host="127.0.0.1", port=0, database_url=url)
        asyncio.run(serve_demo(settings, once=True, out=io.StringIO()))
        engine = make_engine(url)
        out = []
        try:
            for listed in queries.list_traces(engine, limit=100)["traces"]:
                trace = queries.get_trace(engine, listed["id"]) or {}
                ids = [listed["id"], *(c["id"] for c in trace.get("children", []))]
                for trace_id in ids:
                    for step in (queries.get_trace(engine, trace_id) or {})["steps"]:
                        items = [*step["input_items"], *step["output_items"]]
                        rows = {k: v for k, v in step.items() if k not in _ITEM_FIELDS}
                        out.append((f"demo/{step['protocol']}", sizes(rows, items)))
        finally:
            engine.dispose()
    return out


def main() -> None:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for group, (shaped_bytes, bare) in fixture_steps(False) + fixture_steps(True) + demo_steps():
        total = totals[group]
        total[0] += 1
        total[1] += bare
        total[2] += shaped_bytes
        total[3] = max(total[3], round(1000 * shaped_bytes / bare)) if bare else total[3]
    print(f"{'steps of':<22}{'n':>4}{'without':>12}{'with':>12}{'ratio':>8}{'worst step':>12}")
    for group, (count, bare, with_shapes, worst) in sorted(totals.items()):
        ratio = with_shapes / bare
        print(f"{group:<22}{count:>4}{bare:>12}{with_shapes:>12}{ratio:>8.3f}{worst / 1000:>12.3f}")


if __name__ == "__main__":
    main()
