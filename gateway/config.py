"""Settings: declared once, validated at start-up; the only reader of os.environ.

Precedence: command-line flag > LOOPWATCH_* environment variable > TOML file > default.
"""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_JSON_KEYS = (
    "password",
    "passwd",
    "secret",
    "token",
    "access_token",
    "refresh_token",
    "api_key",
    "apikey",
    "authorization",
    "client_secret",
    "private_key",
    "cookie",
)


class _FileOnly:
    """Marks a setting (a table) read from the TOML file only: it has no environment
    variable, where every other setting has LOOPWATCH_<NAME> (gateway.config_load)."""

    def __repr__(self) -> str:
        return "FILE_ONLY"


FILE_ONLY: Final = _FileOnly()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RedactionPattern(_Frozen):
    name: str = Field(pattern=r"^[a-z0-9_]{1,40}$")
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class RedactionSettings(_Frozen):
    enabled: bool = True
    patterns: tuple[RedactionPattern, ...] = ()
    json_keys: tuple[str, ...] = DEFAULT_JSON_KEYS
    max_text_chars: int = Field(default=16_384, ge=64)


class Route(_Frozen):
    """Where requests of one protocol (optionally only some models) are sent."""

    protocol: Literal["chat", "responses", "messages", "passthrough"]
    upstream: str
    model: str | None = None  # fnmatch pattern, e.g. "claude-*"
    api_key: str | None = None  # held by the gateway; replaces the client's key

    @field_validator("upstream")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_url(value)


# Prices are USD per million tokens; a bound catches a price typed per token by mistake.
MAX_PRICE = Decimal(1_000_000)
# A cost budget is kept in whole nano-dollars in a signed 64-bit column.
MAX_BUDGET_USD = Decimal(1_000_000_000)


# A server tool's price is USD per request; a bound catches one typed per thousand.
MAX_REQUEST_PRICE = Decimal(1_000)
ToolRequestPrice = Annotated[Decimal, Field(ge=0, le=MAX_REQUEST_PRICE)]


class PriceOverride(_Frozen):
    """`[prices."<model glob>"]`: USD per million tokens, preferred to genai-prices.

    `cached` (cache reads) and `cache_write` default to `input` when not given,
    `cache_write_1h` (writes kept for an hour) to `cache_write`. `server_tool_requests`
    prices each request of a tool the provider runs, in USD ({web_search = 0.01}); a tool
    not named there is priced as genai-prices prices it, if it does.
    """

    input: Decimal = Field(ge=0, le=MAX_PRICE)
    output: Decimal = Field(ge=0, le=MAX_PRICE)
    cached: Decimal | None = Field(default=None, ge=0, le=MAX_PRICE)
    cache_write: Decimal | None = Field(default=None, ge=0, le=MAX_PRICE)
    cache_write_1h: Decimal | None = Field(default=None, ge=0, le=MAX_PRICE)
    server_tool_requests: dict[
        Annotated[str, Field(pattern=r"^[a-z0-9_]{1,64}$")], ToolRequestPrice
    ] = Field(default_factory=dict)


class KeyBudget(_Frozen):
    """Budget defaults for requests made with one API key, matched by fingerprint."""

    key_fingerprint: str = Field(pattern=r"^[0-9a-f]{16,64}$")
    max_steps: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: Decimal | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    max_duration_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    pairing: Literal["enforce", "observe"] | None = None


class McpServer(_Frozen):
    """`[[mcp_servers]]`: an MCP server proxied at `/mcp/{name}`."""

    name: str = Field(pattern=r"^[a-z0-9_-]{1,64}$")
    url: str  # the server's Streamable HTTP endpoint
    headers: dict[str, str] = Field(default_factory=dict, repr=False)  # added upstream

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_url(value)


class Settings(_Frozen):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    upstream_url: str = "https://api.openai.com/v1"
    anthropic_upstream_url: str = "https://api.anthropic.com"
    database_url: str = "sqlite:///./loopwatch.db"
    config: str | None = None
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=600.0, gt=0)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_steps: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: Decimal | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    # Wall clock from the trace's first request.
    max_duration_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    pairing: Literal["enforce", "observe"] = "enforce"
    trace_idle_seconds: float = Field(default=300.0, gt=0)  # quiet this long: a trace is over
    search_timeout_s: float = Field(default=2.0, gt=0, allow_inf_nan=False)  # a `q=` read, at most
    loop_threshold: int = Field(default=3, ge=2)  # same tool, same arguments, this often
    loops: Literal["observe", "enforce"] = "observe"
    # A tool-loop request that drops the reasoning its provider requires back: recorded, or
    # refused before the provider (`reasoning_not_returned`).
    reasoning_check: Literal["observe", "enforce"] = "observe"
    admin_token: str | None = None
    store_reasoning_summary: bool = True
    # Opaque payloads a provider wants back (thinking signatures, encrypted reasoning) kept
    # as blobs on their reasoning items, for cassettes and forks; never shown nor exported.
    keep_opaque_reasoning: bool = False
    recorder_queue_size: int = Field(default=10_000, ge=1)
    recorder_batch_size: int = Field(default=200, ge=1)
    # While records keep coming, the longest they gather before a batch is written: at 0.2 s
    # a busy recorder commits about 5 times a second (a batch's commit, trace merge and
    # checkpoint shared by all its steps) and a step is in the store within a quarter second.
    recorder_flush_seconds: float = Field(default=0.2, gt=0)
    recorder: Literal["process", "thread"] = "process"
    spool_dir: str | None = None  # default: beside a SQLite file, else ./loopwatch-spool
    workers: int = Field(default=1, ge=1, le=64)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    access_log: bool = True
    redaction: Annotated[RedactionSettings, FILE_ONLY] = RedactionSettings()
    routes: Annotated[tuple[Route, ...], FILE_ONLY] = ()
    keys: Annotated[tuple[KeyBudget, ...], FILE_ONLY] = ()
    metrics_max_models: int = Field(default=50, ge=1)
    webhook_urls: tuple[str, ...] = ()
    public_url: str | None = None  # base of links in webhook events, e.g. https://lw.example
    # Host names the gateway answers to besides loopback ones (DNS rebinding protection).
    allowed_hosts: tuple[str, ...] = ()
    # By fnmatch model glob.
    prices: Annotated[dict[str, PriceOverride], FILE_ONLY] = Field(default_factory=dict)
    # Output tools that end a run, besides final_answer and final_result.
    terminal_tools: tuple[str, ...] = ()

    @field_validator("prices")
    @classmethod
    def _price_globs(cls, value: dict[str, PriceOverride]) -> dict[str, PriceOverride]:
        for glob in value:
            if not glob.strip() or len(glob) > 256:
                raise ValueError(f"model glob {glob!r} must be 1 to 256 characters")
        return value

    webhook_secret: str | None = None  # HMAC key of X-Loopwatch-Signature
    retention_days: int | None = Field(default=None, ge=1)  # unset: keep traces forever
    # OpenTelemetry export: off unless an endpoint is set.
    otlp_endpoint: str | None = None
    otlp_protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    otlp_headers: tuple[tuple[str, str], ...] = Field(default=(), repr=False)  # often a key
    otlp_capture_content: bool = False
    otlp_service_name: str = Field(default="loopwatch", min_length=1)
    otlp_timeout: float = Field(default=10.0, gt=0)
    otlp_queue_size: int = Field(default=2048, ge=1)
    # MCP servers proxied at /mcp/{name}, and how their tool calls are judged and joined.
    mcp_servers: tuple[McpServer, ...] = ()
    mcp_enforce: bool = False
    mcp_match_window_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    # Sub-agents: how long a tool call may start a run found by its task text, and whether
    # the configured run budgets cover a root's whole tree of runs.
    subagent_match_window_s: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    tree_budgets: bool = False

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _mcp_servers(cls, value: Any) -> Any:
        if isinstance(value, str):  # LOOPWATCH_MCP_SERVERS / --mcp: `name=url,name2=url2`
            value = parse_mcp_servers(value)
        if isinstance(value, list | tuple):
            names = [
                s.get("name") if isinstance(s, dict) else getattr(s, "name", None) for s in value
            ]
            repeated = sorted({n for n in names if n is not None and names.count(n) > 1})
            if repeated:
                raise ValueError(
                    f"MCP server names must be unique: {', '.join(map(str, repeated))}"
                )
        return value

    @field_validator("webhook_urls", mode="before")
    @classmethod
    def _webhooks(cls, value: Any) -> Any:
        if isinstance(value, str):  # LOOPWATCH_WEBHOOK_URLS: comma-separated
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list | tuple):
            return tuple(_check_url(url) if isinstance(url, str) else url for url in value)
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _allowed_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):  # LOOPWATCH_ALLOWED_HOSTS: comma-separated
            value = [part for part in value.split(",") if part.strip()]
        if isinstance(value, list | tuple):
            return tuple(_host_name(h) if isinstance(h, str) else h for h in value)
        return value

    @field_validator("terminal_tools", mode="before")
    @classmethod
    def _terminal_tools(cls, value: Any) -> Any:
        if isinstance(value, str):  # LOOPWATCH_TERMINAL_TOOLS: comma-separated
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp_endpoint(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value)

    @field_validator("otlp_headers", mode="before")
    @classmethod
    def _otlp_headers(cls, value: Any) -> Any:
        if isinstance(value, str):  # the environment's `key=value,key2=value2`
            return parse_otlp_headers(value)
        if isinstance(value, dict):  # a TOML table
            return tuple((str(k).lower(), v) for k, v in value.items())
        return value

    @field_validator("public_url")
    @classmethod
    def _public(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value)

    @field_validator("upstream_url", "anthropic_upstream_url")
    @classmethod
    def _upstream(cls, value: str) -> str:
        return _check_url(value)

    @field_validator("database_url")
    @classmethod
    def _database(cls, value: str) -> str:
        if not re.match(r"^(sqlite|postgresql)(\+\w+)?://", value):
            raise ValueError("must start with sqlite:// or postgresql://")
        return value

    @field_validator("admin_token", "webhook_secret")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        if value is not None and len(value) < 16:
            raise ValueError("must be at least 16 characters")
        return value

    def spool_path(self) -> Path:
        """The spool root: each gateway spools into a directory of its own in it, and
        stores what gateways that are gone left there (any port, any number of workers)."""
        if self.spool_dir is not None:
            return Path(self.spool_dir)
        match = re.match(r"^sqlite(\+\w+)?:///(?P<file>.+)$", self.database_url)
        if match and match["file"] != ":memory:":
            return Path(match["file"] + "-spool")
        return Path("loopwatch-spool")

    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_otlp_headers(text: str) -> tuple[tuple[str, str], ...]:
    """`key=value,key2=value2` with percent-encoded values, as OTEL_EXPORTER_OTLP_HEADERS."""
    headers: dict[str, str] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            # The value is never echoed: it is usually an API key.
            raise ValueError("must be comma-separated key=value pairs")
        headers[name.strip().lower()] = unquote(value.strip())
    return tuple(headers.items())


def parse_mcp_servers(text: str) -> list[dict[str, str]]:
    """`name=url,name2=url2` as LOOPWATCH_MCP_SERVERS and `serve --mcp` give them."""
    servers = []
    for pair in text.split(","):
        if not pair.strip():
            continue
        name, sep, url = pair.partition("=")
        if not sep:
            raise ValueError(f"{pair.strip()!r} is not name=url")
        servers.append({"name": name.strip(), "url": url.strip()})
    return servers


def _host_name(value: str) -> str:
    """A host name as a Host header names it, without a port: `[::1]` for IPv6."""
    name = value.strip().lower()
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"  # a bare IPv6 address
    if not re.match(r"^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)$", name) or name.strip(".") != name:
        raise ValueError(f"{value!r} is not a host name (give names without scheme or port)")
    return name


def _check_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")
