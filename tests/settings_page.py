"""docs/settings.md, generated from `gateway.config.Settings`: the environment column and the
defaults come from the declaration, each setting's meaning from MEANINGS below (their one
home), so a setting cannot be added without its row. `tests/test_docs.py` checks that the
committed page is this module's output. Regenerate with:

    python -m tests.settings_page > docs/settings.md
"""

from __future__ import annotations

from decimal import Decimal

from gateway.config import FILE_ONLY, Settings
from gateway.config_load import OTEL_ENV, env_name

INTRO = """\
# Settings

Every setting, where it is read from and what it does. The topics' pages say more about
each: [budgets](budgets.md), [traces](traces.md), [MCP](mcp.md),
[operations](operations.md), [scaling](scaling.md), [OpenTelemetry](opentelemetry.md),
[security](security.md). This page is generated from the settings' declaration
(`python -m tests.settings_page > docs/settings.md`).

Each setting has a command-line flag (for `serve`: `--host`, `--port`, `--upstream`,
`--database-url`, `--config`), an environment variable, and a key in the optional TOML file.
Precedence: flag > environment > file > default; among variables, `LOOPWATCH_*` > the standard
`OTEL_*` ones (a signal's own, `..._TRACES_...`, before the general one). A bad value stops
start-up with a message naming the setting and where it was set, for example
`loopwatch: invalid setting port (flag --port): Input should be less than or equal to 65535`,
`invalid setting database_url (in lw.toml): must start with sqlite:// or postgresql://` or
`invalid setting pairing (LOOPWATCH_PAIRING): …`.
"""

# The table's rows in this order; each setting's meaning, as the table says it.
MEANINGS = {
    "host": "address to bind; a non-loopback address requires `admin_token`",
    "port": "port",
    "upstream_url": "provider for Chat Completions, Responses and other `/v1/*`",
    "anthropic_upstream_url": "provider for `/v1/messages`",
    "database_url": "trace store; `postgresql://…` for several replicas",
    "config": "TOML file with the settings below, routes, key budgets, redaction rules",
    "connect_timeout": "seconds to connect to the provider",
    "read_timeout": "seconds the provider may stay silent mid-response",
    "max_body_bytes": "largest model request body (413 beyond)",
    "max_steps": "default step budget per trace",
    "max_tokens": "default token budget per trace",
    "max_cost_usd": "default cost budget per trace, in US dollars",
    "max_duration_s": (
        "default time budget per trace: seconds of wall clock from its first request"
    ),
    "pairing": "`enforce` refuses broken tool histories, `observe` records them",
    "terminal_tools": (
        "comma-separated (a list in TOML) names of output tools that end a run, besides "
        "`final_answer` and `final_result`: a last step calling only these is `completed`"
    ),
    "trace_idle_seconds": (
        "a trace quiet this long is no longer `running`: `completed`, or `abandoned` when "
        "tool calls were left unanswered or a `paused` turn was not sent back"
    ),
    "search_timeout_s": (
        "longest a search (`q=`) may run; past it the database stops it and the API answers "
        "503 `search_timeout`"
    ),
    "loop_threshold": (
        "calls of one tool with the same arguments in a trace that make a "
        "`repeated_tool_call` (at least 2)"
    ),
    "loops": (
        "`enforce` refuses a trace's requests once it repeated a call (429 "
        "`repeated_tool_call`), `observe` records it"
    ),
    "reasoning_check": (
        "`enforce` refuses a tool-loop request that drops the reasoning its provider requires"
        " back (400 `reasoning_not_returned`), `observe` records it"
    ),
    "admin_token": "required for the UI and `/api/*` when set (at least 16 characters)",
    "store_reasoning_summary": "keep providers' reasoning summaries (redacted)",
    "keep_opaque_reasoning": (
        "keep the opaque reasoning payloads providers want back (thinking signatures,"
        " redacted thinking, encrypted reasoning) so cassettes and forks send them;"
        " never shown nor exported"
    ),
    "recorder_queue_size": "records waiting for the database before drops",
    "recorder_batch_size": "records per database transaction",
    "recorder_flush_seconds": (
        "while records keep coming, the longest they gather before a batch is written (a "
        "record is in the store within about this plus one write)"
    ),
    "recorder": (
        "where the spool is drained into the store: a recorder `process`, or a `thread` of "
        "the gateway"
    ),
    "spool_dir": (
        "the spool root: records answered and not yet stored; each gateway owns a directory "
        "in it and stores those of gateways that are gone; keep it beside the database, "
        "across restarts"
    ),
    "workers": (
        "gateway processes sharing the port (`serve --workers N`); see "
        "[Several workers](scaling.md#several-workers-one-sqlite-file-several-replicas)"
    ),
    "log_level": "`debug`, `info`, `warning`, `error`",
    "log_format": "`text`, or `json`: one JSON object a line",
    "access_log": "`serve` logs one line per request (never bodies, headers or query strings)",
    "metrics_max_models": "distinct model label values before `other`",
    "webhook_urls": "comma-separated URLs that receive a JSON event per violation",
    "public_url": (
        "base URL of trace links in webhook events, and of the MCP servers' "
        "protected-resource metadata the gateway serves"
    ),
    "allowed_hosts": (
        "comma-separated (a list in TOML) host names, without scheme or port, the gateway "
        "answers to besides `localhost`, `127.0.0.1` and `[::1]`; setting it also turns the "
        "`Host` / `Origin` check on when bound beyond loopback (see "
        "[DNS rebinding](security.md#dns-rebinding))"
    ),
    "prices": (
        '`[prices."<model glob>"]`: `input`, `output`, `cached`, `cache_write`, '
        "`cache_write_1h` USD per million tokens, and `server_tool_requests` (`{ web_search ="
        " 0.01 }`: USD per request of a tool the provider runs), preferred to the bundled "
        "genai-prices data"
    ),
    "retention_days": "delete traces idle for longer, with all their rows",
    "webhook_secret": "signs each webhook body (`X-Loopwatch-Signature`, at least 16 characters)",
    "otlp_endpoint": (
        "OTLP collector; http/protobuf appends `/v1/traces` unless the URL ends with it"
    ),
    "otlp_protocol": "or `grpc` (needs `pip install 'loopwatch[otlp-grpc]'`)",
    "otlp_headers": (
        "`key=value,key2=value2` (values percent-encoded; a table in the file); never logged"
    ),
    "otlp_capture_content": (
        "also export messages (`gen_ai.input.messages`, ...), redacted as stored"
    ),
    "otlp_service_name": "the spans' `service.name`",
    "otlp_timeout": "seconds one export may take, retries included",
    "otlp_queue_size": "steps, and spans, waiting for export before drops",
    "mcp_servers": (
        "MCP servers proxied at `/mcp/{name}`: `[[mcp_servers]]` tables with `name`, `url`, "
        "optional `headers`; the environment and flag take `name=url,name2=url2`"
    ),
    "mcp_enforce": (
        "refuse MCP tool calls that break a rule (a JSON-RPC error naming it; the server is "
        "not called) and apply the run's budgets to them"
    ),
    "mcp_match_window_s": (
        "seconds a model's tool call waits to be matched by content to an MCP `tools/call`"
    ),
    "subagent_match_window_s": (
        "seconds a tool call may start a sub-agent run found by its task text (see "
        "[Sub-agents](traces.md#sub-agents))"
    ),
    "tree_budgets": (
        "the configured run budgets also cover each root's whole tree of runs (see "
        "[Sub-agents](traces.md#sub-agents))"
    ),
    "redaction": "`enabled`, `patterns`, `json_keys`, `max_text_chars`",
    "routes": "per protocol (and model pattern) upstreams, with optional provider keys",
    "keys": "per-API-key budgets and pairing mode, by key fingerprint",
}

# A default said in words where the declared value would not tell it.
DEFAULT_SHOWN = {
    "max_steps": "unlimited",
    "max_tokens": "unlimited",
    "max_cost_usd": "unlimited",
    "max_duration_s": "unlimited",
    "terminal_tools": "none",
    "spool_dir": "`<sqlite file>-spool`, else `./loopwatch-spool` (`/data/spool` in the image)",
    "redaction": "see below",
    "retention_days": "keep forever",
    "otlp_endpoint": "— (no export)",
}

# Other ways to give a setting, after its environment variables.
ALSO_FROM = {"mcp_servers": ("serve --mcp NAME=URL",)}

OUTRO = r"""

Example `loopwatch.toml`:

```toml
max_steps = 50
pairing = "enforce"

[redaction]
max_text_chars = 8192
json_keys = ["password", "secret", "token", "api_key", "ssn"]

[[redaction.patterns]]
name = "employee_id"
regex = "EMP-\\d{6}"

[[routes]]                       # Claude models to Anthropic, with the gateway's own key
protocol = "messages"
model = "claude-*"
upstream = "https://api.anthropic.com"
api_key = "sk-ant-..."

[[routes]]                       # Chat Completions for local models to a vLLM server
protocol = "chat"
model = "qwen*"
upstream = "http://127.0.0.1:8000/v1"

[prices."qwen*"]                 # a self-hosted model: what its hardware costs
input = 0.10                     # USD per million prompt tokens
output = 0.40                    # USD per million completion tokens (reasoning included)
cached = 0.02                    # cache reads; `cache_write` for cache writes;
                                 # both default to input

[prices."claude-*"]              # Anthropic models at a negotiated rate
input = 2.4
output = 12
cache_write_1h = 4.8             # cache writes kept an hour; defaults to `cache_write`
server_tool_requests = { web_search = 0.008 }  # USD per request of a tool the provider runs

[[keys]]                         # budgets for one team's key, named by its fingerprint
key_fingerprint = "0123456789abcdef0123456789abcdef"
max_steps = 20
max_tokens = 200000
```

**Prices.** A step's cost comes from a `[prices."<glob>"]` entry whose glob matches its model
(case-insensitively; an exact name beats a pattern, then the pattern with the most literal
characters, then the one written first), else from the price data bundled with
the `genai-prices` package (pinned; never fetched at run time):
the provider is the one at the upstream's address when genai-prices knows that address (it
then prices only models that provider sells, resellers falling back to the original's
prices), otherwise the one whose models match the name. Cache reads, cache writes and
reasoning tokens are priced as that provider prices them, tiered prices by the prompt's
size. A model nobody prices has no cost (`cost_source` `unknown_model`), never a cost of 0;
give a self-hosted model a price of 0 to say it is free. A price that does not parse stops
start-up naming its key. A request of a tool the provider runs is priced by the entry's
`server_tool_requests` (tool names as the step's `attrs.server_tool_requests` spells them:
`web_search`, `web_fetch`, ...), else by genai-prices when it prices that tool for the model
(web search), else not at all.

A client can never choose the upstream host: it comes from `upstream_url`,
`anthropic_upstream_url` or a route. An upstream base ending in `/v1` takes the path after
`/v1` (like `OPENAI_BASE_URL`); any other base takes the whole path (like
`ANTHROPIC_BASE_URL`).
"""


def environment(name: str) -> str:
    if FILE_ONLY in Settings.model_fields[name].metadata:
        return "file only"
    names = (env_name(name), *OTEL_ENV.get(name, ()), *ALSO_FROM.get(name, ()))
    return ", ".join(f"`{n}`" for n in names)


def default(name: str) -> str:
    if name in DEFAULT_SHOWN:
        return DEFAULT_SHOWN[name]
    value = Settings.model_fields[name].get_default(call_default_factory=True)
    if value is None or value in ((), {}):
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float | Decimal) and value == int(value):
        value = int(value)
    return f"`{value}`"


def table() -> str:
    missing = sorted(set(Settings.model_fields) - set(MEANINGS))
    stale = sorted(set(MEANINGS) - set(Settings.model_fields))
    if missing or stale:
        raise ValueError(f"MEANINGS lacks {missing}, names no setting {stale}")
    rows = ["| setting | environment | default | meaning |", "|---|---|---|---|"]
    for name, meaning in MEANINGS.items():
        rows.append(f"| `{name}` | {environment(name)} | {default(name)} | {meaning} |")
    return "\n".join(rows) + "\n"


def page() -> str:
    return INTRO + "\n" + table() + OUTRO


if __name__ == "__main__":
    print(page(), end="")
