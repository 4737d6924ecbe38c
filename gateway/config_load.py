"""Where settings come from: flags, `LOOPWATCH_*` (and standard OpenTelemetry) environment
variables and the TOML file, merged in that order of precedence and validated once."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.config import FILE_ONLY, Settings
from gateway.errors import ConfigError

# Every setting not declared FILE_ONLY has an environment twin: LOOPWATCH_<NAME upper>.
ENV_SETTINGS = tuple(
    name for name, info in Settings.model_fields.items() if FILE_ONLY not in info.metadata
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


@dataclass(frozen=True, slots=True)
class Sources:
    """Where each top-level setting was read, so an error names what the user wrote."""

    flags: Mapping[str, str] = field(default_factory=dict)  # setting → the flag given
    env: Mapping[str, str] = field(default_factory=dict)  # setting → the variable read
    file: str | None = None
    file_keys: frozenset[str] = frozenset()

    def of(self, location: str) -> str | None:
        """`flag --port`, `LOOPWATCH_PORT` or `in FILE` (the setting is the file's key);
        None for a default."""
        top = location.split(".")[0]
        if top in self.flags:
            return f"flag {self.flags[top]}"
        if top in self.env:
            return self.env[top]
        if self.file is not None and top in self.file_keys:
            return f"in {self.file}"
        return None

    def name(self, location: str) -> str:
        """The setting and, when known, where it was set: `port (flag --port)`."""
        source = self.of(location)
        return f"{location} ({source})" if source else location


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    flag_names: Mapping[str, str] | None = None,
) -> Settings:
    """Merge file, environment and flags; raise ConfigError naming the first bad setting."""
    return load_with_sources(overrides, environ, flag_names)[0]


def load_with_sources(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    flag_names: Mapping[str, str] | None = None,
) -> tuple[Settings, Sources]:
    """The settings and where each was read; `flag_names` spells the flags (by setting) whose
    name is not `--` and the setting's with dashes."""
    environ = os.environ if environ is None else environ
    from_env, env_names = _standard_env(environ)
    for name in ENV_SETTINGS:
        if environ.get(env_name(name), "") != "":
            from_env[name] = environ[env_name(name)]
            env_names[name] = env_name(name)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    config_path = flags.get("config") or from_env.get("config")
    merged: dict[str, Any] = _read_toml(config_path) if config_path else {}
    spelled = flag_names or {}
    sources = Sources(
        flags={k: spelled.get(k) or "--" + k.replace("_", "-") for k in flags},
        env={k: v for k, v in env_names.items() if k not in flags},
        file=config_path,
        file_keys=frozenset(merged),
    )
    merged.update(from_env)
    merged.update(flags)
    try:
        return Settings.model_validate(merged), sources
    except ValidationError as exc:
        raise ConfigError(_describe(exc, sources)) from None


def _standard_env(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The OpenTelemetry variables set, and which one each setting was read from."""
    found: dict[str, Any] = {}
    read: dict[str, str] = {}
    for setting, names in OTEL_ENV.items():
        name = next((n for n in names if environ.get(n, "") != ""), None)
        if name is not None:
            found[setting], read[setting] = environ[name], name
    return found, read


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


def _describe(exc: ValidationError, sources: Sources) -> str:
    lines = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"])
        message = "unknown setting" if error["type"] == "extra_forbidden" else error["msg"]
        # pydantic words a validator's own message as "Value error, must be ..."
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        lines.append(f"invalid setting {sources.name(location)}: {message}")
    return "; ".join(lines)
