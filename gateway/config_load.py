"""Where settings come from: flags, `LOOPWATCH_*` (and standard OpenTelemetry) environment
variables and the TOML file, merged in that order of precedence and validated once."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.config import Settings
from gateway.errors import ConfigError

# Scalar settings that have an environment twin: LOOPWATCH_<NAME upper>.
ENV_SETTINGS = (
    "host",
    "port",
    "upstream_url",
    "anthropic_upstream_url",
    "database_url",
    "config",
    "connect_timeout",
    "read_timeout",
    "max_body_bytes",
    "max_steps",
    "max_tokens",
    "max_cost_usd",
    "max_duration_s",
    "pairing",
    "trace_idle_seconds",
    "loop_threshold",
    "loops",
    "admin_token",
    "store_reasoning_summary",
    "recorder_queue_size",
    "recorder_batch_size",
    "recorder_flush_seconds",
    "recorder",
    "spool_dir",
    "workers",
    "log_level",
    "log_format",
    "access_log",
    "metrics_max_models",
    "webhook_urls",
    "terminal_tools",
    "public_url",
    "allowed_hosts",
    "webhook_secret",
    "retention_days",
    "otlp_endpoint",
    "otlp_protocol",
    "otlp_headers",
    "otlp_capture_content",
    "otlp_service_name",
    "otlp_timeout",
    "otlp_queue_size",
    "mcp_servers",
    "mcp_enforce",
    "mcp_match_window_s",
)

# The standard OpenTelemetry variables, below LOOPWATCH_* in precedence; the first one set
# of each tuple wins (the traces-specific one before the general one, as the spec orders).
OTEL_ENV = {
    "otlp_endpoint": ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    "otlp_protocol": ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
    "otlp_headers": ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"),
    "otlp_service_name": ("OTEL_SERVICE_NAME",),
}


def env_name(setting: str) -> str:
    return "LOOPWATCH_" + setting.upper()


def load_settings(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Merge file, environment and flags; raise ConfigError naming the first bad setting."""
    environ = os.environ if environ is None else environ
    from_env = _standard_env(environ)
    from_env.update(
        (name, environ[env_name(name)])
        for name in ENV_SETTINGS
        if environ.get(env_name(name), "") != ""
    )
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    config_path = flags.get("config") or from_env.get("config")
    merged: dict[str, Any] = _read_toml(config_path) if config_path else {}
    merged.update(from_env)
    merged.update(flags)
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _standard_env(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for setting, names in OTEL_ENV.items():
        value = next((environ[n] for n in names if environ.get(n, "") != ""), None)
        if value is not None:
            found[setting] = value
    return found


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with Path(path).open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config: file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None
    data["config"] = path
    return data


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"])
        twin = f" ({env_name(location)})" if location in ENV_SETTINGS else ""
        message = "unknown setting" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"invalid setting {location}{twin}: {message}")
    return "; ".join(lines)
