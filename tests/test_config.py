"""Settings: precedence, validation at start-up with messages naming the setting, the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config_load import load_settings
from gateway.errors import ConfigError


def test_precedence_flag_over_environment_over_file(tmp_path: Path) -> None:
    config = tmp_path / "lw.toml"
    config.write_text('port = 1111\nmax_steps = 7\n[redaction]\njson_keys = ["pin"]\n')
    env = {"LOOPWATCH_CONFIG": str(config), "LOOPWATCH_PORT": "2222"}
    settings = load_settings({"port": 3333}, env)
    assert settings.port == 3333 and settings.max_steps == 7
    assert settings.redaction.json_keys == ("pin",)
    assert load_settings({}, env).port == 2222


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"LOOPWATCH_PORT": "eighty"}, "port (LOOPWATCH_PORT)"),
        ({"LOOPWATCH_PAIRING": "strict"}, "pairing (LOOPWATCH_PAIRING)"),
        ({"LOOPWATCH_UPSTREAM_URL": "ftp://x"}, "upstream_url"),
        ({"LOOPWATCH_DATABASE_URL": "mysql://x"}, "database_url"),
        ({"LOOPWATCH_MAX_STEPS": "0"}, "max_steps"),
    ],
)
def test_bad_values_name_the_setting(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_settings({}, env)


def test_an_error_names_the_flag_that_set_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--upstream", "ftp://x", "--port", "99999"]) == 2
    err = capsys.readouterr().err
    assert "invalid setting port (flag --port): Input should be less than" in err
    assert "invalid setting upstream_url (flag --upstream): must be an http://" in err
    assert "LOOPWATCH_" not in err and "Value error" not in err


def test_an_error_names_the_file_that_set_the_value(tmp_path: Path) -> None:
    config = tmp_path / "lw.toml"
    config.write_text('port = 99999\ndatabase_url = "mysql://x"\n')
    with pytest.raises(ConfigError) as raised:
        load_settings({"config": str(config)}, {"LOOPWATCH_MAX_STEPS": "3"})
    message = str(raised.value)
    assert f"invalid setting port (in {config}): Input should be" in message
    assert f"database_url (in {config}): must start with sqlite://" in message
    assert "LOOPWATCH_" not in message and "Value error" not in message


def test_an_error_names_the_environment_variable_read() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings({}, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "LOOPWATCH_PORT": "x"})
    message = str(raised.value)
    assert "otlp_protocol (OTEL_EXPORTER_OTLP_PROTOCOL): Input should be" in message
    assert "port (LOOPWATCH_PORT): Input should be a valid integer" in message


def test_unknown_key_in_file_stops_start_up(tmp_path: Path) -> None:
    config = tmp_path / "lw.toml"
    config.write_text("max_stpes = 3\n")
    with pytest.raises(ConfigError, match=re.escape(f"max_stpes (in {config}): unknown setting")):
        load_settings({"config": str(config)}, {})


def test_serve_refuses_public_address_without_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "invalid setting host (flag --host): binding to 0.0.0.0" in err
    assert "LOOPWATCH_ADMIN_TOKEN" in err


def test_cli_reports_bad_setting_and_exits_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", "99999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "invalid setting port" in result.stderr


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[prices."gpt-4o*"]\ninput = "cheap"\noutput = 1\n', "prices.gpt-4o*.input"),
        ('[prices."gpt-4o*"]\ninput = -1\noutput = 1\n', "prices.gpt-4o*.input"),
        ('[prices."my-*"]\ninput = 1\n', "prices.my-*.output (in FILE): Field required"),
        ('[prices."my-*"]\ninput = 1\noutput = 2\ncahced = 1\n', "my-*.cahced (in FILE): unk"),
        ('[prices."my-*"]\ninput = 1\noutput = 2000000\n', "prices.my-*.output"),
        ('[prices." "]\ninput = 1\noutput = 2\n', "prices (in FILE): model glob"),
        (
            '[prices."c*"]\ninput = 1\noutput = 2\nserver_tool_requests = { web_search = -1 }\n',
            "prices.c*.server_tool_requests.web_search",
        ),
        (  # a price per thousand requests typed as one per request
            '[prices."c*"]\ninput = 1\noutput = 2\nserver_tool_requests = { web_search = 10000 }\n',
            "prices.c*.server_tool_requests.web_search",
        ),
        (
            '[prices."c*"]\ninput = 1\noutput = 2\nserver_tool_requests = { "Web Search" = 1 }\n',
            "prices.c*.server_tool_requests.Web Search.[key]",
        ),
        ('[prices."c*"]\ninput = 1\noutput = 2\ncache_write_1h = "x"\n', "c*.cache_write_1h"),
    ],
)
def test_a_price_override_that_does_not_parse_names_its_key(
    tmp_path: Path, toml: str, named: str
) -> None:
    config = tmp_path / "lw.toml"
    config.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(named.replace("FILE", str(config)))):
        load_settings({}, {"LOOPWATCH_CONFIG": str(config)})


def test_price_overrides_load_exactly(tmp_path: Path) -> None:
    config = tmp_path / "lw.toml"
    config.write_text('[prices."gpt-4o*"]\ninput = 0.15\noutput = 0.6\ncached = 0.075\n')
    price = load_settings({"config": str(config)}, {}).prices["gpt-4o*"]
    assert (price.input, price.output, price.cached) == (
        Decimal("0.15"),
        Decimal("0.6"),
        Decimal("0.075"),
    )
    assert price.cache_write is None
    config.write_text(
        '[prices."claude-*"]\ninput = 3\noutput = 15\ncache_write_1h = 6\n'
        "server_tool_requests = { web_search = 0.01, web_fetch = 0 }\n"
    )
    price = load_settings({"config": str(config)}, {}).prices["claude-*"]
    assert price.cache_write_1h == Decimal(6)
    assert price.server_tool_requests == {"web_search": Decimal("0.01"), "web_fetch": Decimal(0)}


def test_every_scalar_setting_is_read_from_its_environment_name() -> None:
    settings = load_settings({}, {"LOOPWATCH_SEARCH_TIMEOUT_S": "0.5"})
    assert settings.search_timeout_s == 0.5
    with pytest.raises(ConfigError, match=r"search_timeout_s \(LOOPWATCH_SEARCH_TIMEOUT_S\)"):
        load_settings({}, {"LOOPWATCH_SEARCH_TIMEOUT_S": "soon"})
    # A table is read from the file only: no environment variable stands for it.
    assert load_settings({}, {"LOOPWATCH_ROUTES": "x"}).routes == ()


def test_standard_opentelemetry_variables_below_loopwatch_ones() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/v1/traces",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20a2V5,x-team=one",
        "OTEL_SERVICE_NAME": "agents",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    settings = load_settings({}, env)
    assert settings.otlp_endpoint == "http://traces:4318/v1/traces"  # the signal's own first
    assert settings.otlp_headers == (("authorization", "Basic a2V5"), ("x-team", "one"))
    assert settings.otlp_service_name == "agents" and settings.otlp_protocol == "grpc"
    env["LOOPWATCH_OTLP_ENDPOINT"] = "http://mine:4318"
    assert load_settings({}, env).otlp_endpoint == "http://mine:4318"
    assert load_settings({}, {}).otlp_endpoint is None  # no export unless asked


def test_otlp_headers_from_a_file_table(tmp_path: Path) -> None:
    config = tmp_path / "lw.toml"
    config.write_text('otlp_endpoint = "http://c:4318"\n[otlp_headers]\nX-Api-Key = "k"\n')
    assert load_settings({"config": str(config)}, {}).otlp_headers == (("x-api-key", "k"),)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "otlp_protocol"),
        ({"LOOPWATCH_OTLP_ENDPOINT": "collector:4317"}, "otlp_endpoint"),
        ({"LOOPWATCH_OTLP_HEADERS": "secret-without-a-key"}, "otlp_headers"),
    ],
)
def test_bad_otlp_settings_name_the_setting(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as raised:
        load_settings({}, env)
    assert "secret-without-a-key" not in str(raised.value)  # header values are never echoed
