"""How each agent CLI is pointed at the gateway and kept from calling home: the settings a user
copies from docs/agents.md, written into the run's own home, and the command line of a run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agent_clis.runner import BIN, PROMPT, Sandbox

DUMMY_KEY = "sk-loopwatch-dummy"


def claude_code(sandbox: Sandbox, gateway_url: str, prompt: str = PROMPT) -> list[str]:
    """Claude Code, `claude -p`, its default model, on Anthropic Messages."""
    sandbox.env.update(
        {
            "ANTHROPIC_BASE_URL": gateway_url,
            "ANTHROPIC_API_KEY": DUMMY_KEY,
            "CLAUDE_CONFIG_DIR": str(sandbox.home / ".claude"),
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_UPDATES": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
            "DISABLE_PLUGIN_AUTOLOAD": "1",
            "DISABLE_GROWTHBOOK": "1",
            "DISABLE_INSTALLATION_CHECKS": "1",
        }
    )
    # -p cannot ask for permission: the shell tool is allowed up front, as users do.
    return [str(BIN / "claude"), "-p", prompt, "--allowedTools", "Bash"]


CODEX_CONFIG = """\
model_provider = "loopwatch"
check_for_update_on_startup = false

[model_providers.loopwatch]
name = "Loopwatch"
base_url = "{base_url}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = {websockets}

[features]
plugins = false   # else its plugin marketplace sync calls github.com and chatgpt.com

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false
"""


def codex(sandbox: Sandbox, gateway_url: str, *, websockets: bool = False) -> list[str]:
    """Codex CLI, `codex exec`, its default model, on the Responses API: over HTTP, as a
    custom provider is by default, or over a WebSocket, as its built-in OpenAI provider is."""
    codex_home = sandbox.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = CODEX_CONFIG.format(base_url=f"{gateway_url}/v1", websockets=str(websockets).lower())
    (codex_home / "config.toml").write_text(config)
    sandbox.env.update({"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": DUMMY_KEY})
    # The default sandbox is read-only; the marker is written inside the workspace.
    return [
        str(BIN / "node"),
        str(BIN / "codex"),
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        PROMPT,
    ]


def codex_websocket(sandbox: Sandbox, gateway_url: str) -> list[str]:
    return codex(sandbox, gateway_url, websockets=True)


QWEN_SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False, "logPrompts": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}
QWEN_MODEL = "qwen3-coder-plus"


def qwen_code(sandbox: Sandbox, gateway_url: str) -> list[str]:
    """qwen-code, `qwen -p`, on Chat Completions (run by node 22 from the node project)."""
    settings = sandbox.home / ".qwen" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(QWEN_SETTINGS, indent=2))
    sandbox.env.update(
        {
            "OPENAI_BASE_URL": f"{gateway_url}/v1",
            "OPENAI_API_KEY": DUMMY_KEY,
            "OPENAI_MODEL": QWEN_MODEL,
        }
    )
    # Headless runs cannot confirm a shell command: yolo lets the declared tool run.
    return [str(BIN / "node"), str(BIN / "qwen"), "-p", PROMPT, "--approval-mode", "yolo"]


OPENCODE_MODEL = "gpt-4.1"
OPENCODE_VERSION = "1.18.33"  # as pinned in tests/agent_clis/node/package.json


def opencode_config(gateway_url: str) -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"loopwatch/{OPENCODE_MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "loopwatch": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Loopwatch",
                "options": {"baseURL": f"{gateway_url}/v1", "apiKey": DUMMY_KEY},
                "models": {OPENCODE_MODEL: {"name": OPENCODE_MODEL}},
            }
        },
    }


def _seed_plugin_install(config_dir: Path) -> None:
    """opencode installs its plugin package from the npm registry into each config directory
    at start, with no switch to skip it, unless the directory's lock file already lists it
    and node_modules exists: seeded so, the run sends nothing to the registry."""
    dependency = {"@opencode-ai/plugin": OPENCODE_VERSION}
    (config_dir / "node_modules").mkdir(exist_ok=True)
    (config_dir / "package.json").write_text(json.dumps({"dependencies": dependency}))
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": dependency}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock))


def opencode(sandbox: Sandbox, gateway_url: str) -> list[str]:
    """opencode, `opencode run`, an OpenAI-compatible provider on Chat Completions."""
    config = sandbox.home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(opencode_config(gateway_url), indent=2))
    _seed_plugin_install(config.parent)
    sandbox.env.update(
        {
            "OPENCODE_CONFIG": str(config),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        }
    )
    return [str(BIN / "opencode"), "run", PROMPT]
