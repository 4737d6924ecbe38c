"""MCP servers from the file, the environment and `serve --mcp`; bad names stop start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config_load import load_settings
from gateway.errors import ConfigError


def test_servers_from_the_file_with_headers(tmp_path: Path) -> None:
    config = tmp_path / "lw.toml"
    config.write_text(
        "mcp_enforce = true\n"
        '[[mcp_servers]]\nname = "fs"\nurl = "http://127.0.0.1:9000/mcp"\n'
        'headers = { Authorization = "Bearer s3cret-token-value" }\n'
        '[[mcp_servers]]\nname = "git-tools_2"\nurl = "https://tools.example/mcp/"\n'
    )
    settings = load_settings({"config": str(config)}, {})
    fs, git = settings.mcp_servers
    assert (fs.name, fs.url, fs.headers) == (
        "fs",
        "http://127.0.0.1:9000/mcp",
        {"Authorization": "Bearer s3cret-token-value"},
    )
    assert (git.name, git.url) == ("git-tools_2", "https://tools.example/mcp")
    assert settings.mcp_enforce is True
    assert "s3cret" not in repr(settings)


def test_servers_from_the_environment_and_the_flag_win_in_that_order() -> None:
    env = {
        "LOOPWATCH_MCP_SERVERS": "a=http://127.0.0.1:1/mcp, b=http://127.0.0.1:2/mcp",
        "LOOPWATCH_MCP_ENFORCE": "true",
        "LOOPWATCH_MCP_MATCH_WINDOW_S": "30",
    }
    settings = load_settings({}, env)
    assert [(s.name, s.url) for s in settings.mcp_servers] == [
        ("a", "http://127.0.0.1:1/mcp"),
        ("b", "http://127.0.0.1:2/mcp"),
    ]
    assert settings.mcp_enforce and settings.mcp_match_window_s == 30
    flagged = load_settings({"mcp_servers": "c=http://127.0.0.1:3/x"}, env)
    assert [s.name for s in flagged.mcp_servers] == ["c"]
    assert load_settings({}, {}).mcp_match_window_s == 300


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Bad=http://127.0.0.1:1/mcp", "mcp_servers"),
        ("a=ftp://x", "http"),
        ("just-a-name", "name=url"),
        ("a=http://127.0.0.1:1/m,a=http://127.0.0.1:2/m", "unique"),
        ("x" * 65 + "=http://127.0.0.1:1/m", "mcp_servers"),
    ],
)
def test_bad_servers_stop_start_up_naming_the_setting(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings({}, {"LOOPWATCH_MCP_SERVERS": value})
    assert "mcp_servers" in str(caught.value)


def test_serve_flag_is_repeatable(capsys: pytest.CaptureFixture[str]) -> None:
    # A bad second server proves both flags reached the settings (start-up stops on it).
    code = main(["serve", "--mcp", "a=http://127.0.0.1:1/m", "--mcp", "B=http://127.0.0.1:2/m"])
    assert code == 2
    assert "mcp_servers" in capsys.readouterr().err
