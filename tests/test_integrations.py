"""`lexmem install|uninstall claude|codex` and what `lexmem doctor` reports about them.

Every test runs with HOME in a temporary folder (conftest), against settings files that
already hold the user's own hooks, servers and keys.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lexmem.agents import integrations
from lexmem.agents.integrations import CLAUDE_HOOK_EVENTS, CODEX_HOOK_EVENTS, plan
from lexmem.capture.inbox import Inbox
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.doctor import run_checks
from lexmem.locks import FileLock

USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'done'"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}
        ],
    },
    "statusLine": {"type": "command", "command": "echo hi"},
}
CLAUDE_JSON = {
    "numStartups": 42,
    "projects": {"/work/x": {"allowedTools": []}},
    "mcpServers": {"github": {"type": "stdio", "command": "npx", "args": ["-y", "gh-mcp"]}},
    "theme": "dark",
}
CODEX_CONFIG = """# my Codex settings
model = "o3"  # the good one
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "0"]

# profiles below
[profiles.fast]
model = "o4-mini"
"""


# Claude Code's SessionStart prints the digest from the shell; SessionEnd (before 2.1.332,
# and with no version known) records in the background: both run lexmem-hook inside.
SHELL_FORMS = {
    "SessionStart": integrations.SESSION_START_MARK,
    "SessionEnd": integrations.BACKGROUND_MARK,
}


def hook_path(handler: dict[str, Any]) -> str:
    """The ``lexmem-hook`` a command handler runs."""
    found = re.search(r"(\S*lexmem-hook) claude", handler["command"])
    assert found, handler
    return found.group(1)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def write(path: Path, text: str, mode: int = 0o644) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path.read_bytes()


@pytest.fixture(autouse=True)
def _no_claude_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code's version unknown (as where it is not installed): today's command hooks,
    whatever ``claude`` this machine has on PATH (tests/test_mcp_hooks.py has the rest)."""
    monkeypatch.setattr(integrations, "claude_version", lambda: None)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def claude_user(home: Path) -> tuple[Path, Path, bytes, bytes]:
    settings, servers = home / ".claude" / "settings.json", home / ".claude.json"
    a = write(settings, json.dumps(USER_SETTINGS, indent=2) + "\n", 0o640)
    b = write(
        servers, json.dumps(CLAUDE_JSON, indent=2), 0o600
    )  # no final newline, as Claude Code writes it
    return settings, servers, a, b


def lexmem_handlers(data: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        h for g in data["hooks"].get(event, []) for h in g["hooks"] if "lexmem-hook" in h["command"]
    ]


def test_install_claude_user_adds_every_hook_and_the_server_and_keeps_the_rest(
    claude_user: tuple[Path, Path, bytes, bytes],
) -> None:
    settings, servers, before_settings, before_servers = claude_user
    result = run("install", "claude")
    assert result.exit_code == 0, result.output
    data = json.loads(settings.read_text())
    # The user's keys, in their order, and their own hooks first on the same events.
    assert list(data) == ["model", "permissions", "hooks", "statusLine"]
    assert data["hooks"]["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]  # type: ignore[index]
    assert data["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
    for event in CLAUDE_HOOK_EVENTS:
        (handler,) = lexmem_handlers(data, event)
        assert handler["command"].startswith(SHELL_FORMS.get(event, hook_path(handler)))
        assert Path(hook_path(handler)).is_absolute()  # .venv/bin is not on PATH
        assert handler["timeout"] == 10
        assert handler.get("async", False) is (event in ("PostToolUse", "PostToolUseFailure"))
    tool_group = [
        g for g in data["hooks"]["PostToolUse"] if lexmem_handlers({"hooks": {"e": [g]}}, "e")
    ]
    assert tool_group[0]["matcher"] == "*"
    mcp = json.loads(servers.read_text())
    assert list(mcp) == ["numStartups", "projects", "mcpServers", "theme"]
    assert mcp["mcpServers"]["github"] == CLAUDE_JSON["mcpServers"]["github"]  # type: ignore[index]
    assert mcp["mcpServers"]["lexmem"]["args"] == ["mcp"]
    assert Path(mcp["mcpServers"]["lexmem"]["command"]).name == "lexmem"
    # Backups beside each file hold what was there; modes and the final newline are kept.
    assert (settings.parent / "settings.json.lexmem-backup").read_bytes() == before_settings
    assert (servers.parent / ".claude.json.lexmem-backup").read_bytes() == before_servers
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640
    assert stat.S_IMODE(servers.stat().st_mode) == 0o600
    assert settings.read_text().endswith("}\n") and not servers.read_text().endswith("\n")


def test_install_twice_changes_nothing_and_uninstall_restores_byte_for_byte(
    claude_user: tuple[Path, Path, bytes, bytes],
) -> None:
    settings, servers, before_settings, before_servers = claude_user
    assert run("install", "claude").exit_code == 0
    installed = settings.read_bytes(), servers.read_bytes()
    again = run("install", "claude")
    assert again.exit_code == 0 and "nothing to change" in again.output
    assert (settings.read_bytes(), servers.read_bytes()) == installed
    out = run("uninstall", "claude")
    assert out.exit_code == 0, out.output
    assert settings.read_bytes() == before_settings
    assert servers.read_bytes() == before_servers
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640
    assert "nothing to change" in run("uninstall", "claude").output


def test_dry_run_prints_a_diff_and_writes_nothing(
    claude_user: tuple[Path, Path, bytes, bytes], home: Path
) -> None:
    settings, servers, before_settings, before_servers = claude_user
    result = run("install", "claude", "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"+++ {settings}" in result.output and '+            "command": ' in result.output
    assert f"+++ {servers}" in result.output and "nothing was written" in result.output
    assert settings.read_bytes() == before_settings and servers.read_bytes() == before_servers
    assert sorted(p.name for p in home.rglob("*lexmem-backup")) == []
    assert run("install", "claude").exit_code == 0
    undo = run("uninstall", "claude", "--dry-run")
    assert '-            "command": ' in undo.output
    assert json.loads(settings.read_text())["hooks"]["SessionStart"]  # still installed


def test_files_install_created_are_removed_again(home: Path) -> None:
    assert run("install", "claude").exit_code == 0
    settings, servers = home / ".claude" / "settings.json", home / ".claude.json"
    assert settings.exists() and servers.exists()
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # the user's own file: theirs alone
    assert run("uninstall", "claude").exit_code == 0
    assert not settings.exists() and not servers.exists()


def test_an_empty_object_stays_an_empty_object(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    write(settings, "{}\n")
    assert run("install", "claude").exit_code == 0
    assert run("uninstall", "claude").exit_code == 0
    assert settings.read_text() == "{}\n"


def test_broken_json_is_one_line_exit_2_and_changes_nothing(home: Path) -> None:
    settings = write(home / ".claude" / "settings.json", '{"hooks": {"Stop": [}\n')
    result = run("install", "claude")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "is not valid JSON" in lines[0] and "nothing was changed" in lines[0]
    assert (home / ".claude" / "settings.json").read_bytes() == settings
    assert not (home / ".claude.json").exists()  # nothing half-done in the other file


def test_a_hooks_key_of_the_wrong_shape_is_refused(home: Path) -> None:
    write(home / ".claude" / "settings.json", '{"hooks": []}\n')
    result = run("install", "claude")
    assert result.exit_code == 2 and "not an object" in result.output


def test_an_older_lexmem_entry_is_updated_in_place_not_duplicated(home: Path) -> None:
    pasted = {
        "hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": "lexmem-hook claude"}]}]
        }
    }
    settings = home / ".claude" / "settings.json"
    write(settings, json.dumps(pasted, indent=2) + "\n")
    assert run("install", "claude").exit_code == 0
    data = json.loads(settings.read_text())
    assert len(data["hooks"]["SessionStart"]) == 1
    (handler,) = lexmem_handlers(data, "SessionStart")
    assert Path(hook_path(handler)).is_absolute() and handler["timeout"] == 10


def test_someone_elses_lexmem_server_is_left_alone(home: Path) -> None:
    mine = {"mcpServers": {"lexmem": {"command": "/opt/other/thing", "args": []}}}
    before = write(home / ".claude.json", json.dumps(mine, indent=2) + "\n")
    result = run("install", "claude")
    assert result.exit_code == 0 and "runs something else" in result.output
    assert (home / ".claude.json").read_bytes() == before


def test_project_scope_writes_the_projects_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    before = write(
        repo / ".mcp.json",
        json.dumps({"mcpServers": {"db": {"command": "db-mcp"}}}, indent=2) + "\n",
    )
    monkeypatch.chdir(repo / "src")
    assert run("install", "claude", "--project").exit_code == 0
    data = json.loads((repo / ".claude" / "settings.json").read_text())
    assert set(CLAUDE_HOOK_EVENTS) <= set(data["hooks"])
    assert stat.S_IMODE((repo / ".claude" / "settings.json").stat().st_mode) == 0o644
    assert set(json.loads((repo / ".mcp.json").read_text())["mcpServers"]) == {"db", "lexmem"}
    assert not (home / ".claude" / "settings.json").exists()
    assert run("uninstall", "claude", "--project").exit_code == 0
    assert (repo / ".mcp.json").read_bytes() == before
    assert not (repo / ".claude" / "settings.json").exists()


def test_a_symlinked_settings_file_is_written_through(tmp_path: Path, home: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    before = write(real, json.dumps({"model": "opus"}, indent=2) + "\n")
    link = home / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert run("install", "claude").exit_code == 0
    assert link.is_symlink() and "hooks" in json.loads(real.read_text())
    assert run("uninstall", "claude").exit_code == 0
    assert real.read_bytes() == before


@pytest.mark.parametrize(
    "payload",
    [
        {"hook_event_name": "SessionStart", "source": "startup", "session_id": "s-1",
         "transcript_path": "/nonexistent/t.jsonl", "model": "claude-sonnet"},
        {"hook_event_name": "UserPromptSubmit", "prompt": "We decided to use Postgres for the queue.",
         "session_id": "s-1", "transcript_path": "/nonexistent/t.jsonl", "permission_mode": "default"},
    ],
    ids=["SessionStart", "UserPromptSubmit"],
)  # fmt: skip
def test_the_installed_command_captures_a_real_claude_payload(
    payload: dict[str, Any], tmp_path: Path, home: Path, data_home: Path, service_up: FileLock
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    payload = {**payload, "cwd": str(project)}
    assert run("install", "claude").exit_code == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    (handler,) = lexmem_handlers(settings, payload["hook_event_name"])
    # What Claude Code does: the command string through a shell, the payload on stdin.
    # (service_up: a SessionStart that finds no service would start a `lexmem serve` that
    # outlives the test and drains the inbox this test reads.)
    done = subprocess.run(
        handler["command"], shell=True, input=json.dumps(payload).encode(), cwd=project,
        capture_output=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(p.read_text()) for p in Inbox(Paths(data_home).inbox).pending()]
    kinds = {"SessionStart": "session_start", "UserPromptSubmit": "prompt"}
    assert [(e["event_type"], e["session_id"], e["agent"]) for e in events] == [
        (kinds[payload["hook_event_name"]], "s-1", "claude")
    ]
    assert events[0]["project"] == str(project.resolve())


# -- Codex -------------------------------------------------------------------------------------


def test_codex_install_adds_hooks_json_and_a_toml_table_keeping_the_rest(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    before = write(config, CODEX_CONFIG, 0o600)
    result = run("install", "codex")
    assert result.exit_code == 0, result.output
    assert "/hooks" in result.output  # Codex asks to trust new hooks
    text = config.read_text()
    assert text.startswith(CODEX_CONFIG)  # everything the user wrote, comments included
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-server", "args": ["--port", "0"]}
    assert parsed["mcp_servers"]["lexmem"]["args"] == ["mcp"]
    assert parsed["profiles"] == {"fast": {"model": "o4-mini"}}
    assert "notify" not in parsed  # hooks are on: no notify
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())
    assert list(hooks["hooks"]) == list(CODEX_HOOK_EVENTS)
    assert all("matcher" not in g for groups in hooks["hooks"].values() for g in groups)
    (end,) = lexmem_handlers(hooks, "SessionEnd")
    assert end["timeout"] == 3 and end["command"].endswith("lexmem-hook codex")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert (home / ".codex" / "config.toml.lexmem-backup").read_bytes() == before
    assert "nothing to change" in run("install", "codex").output
    assert config.read_text() == text
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_bytes() == before
    assert not (home / ".codex" / "hooks.json").exists()


def test_codex_with_hooks_off_gets_notify_at_the_top_and_loses_it_again(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    before = write(config, '# mine\nmodel = "o3"\n\n[features]\nhooks = false\n')
    assert run("install", "codex").exit_code == 0
    parsed = tomllib.loads(config.read_text())
    assert Path(parsed["notify"][0]).name == "lexmem-hook" and parsed["notify"][1] == "codex"
    assert parsed["features"] == {"hooks": False} and parsed["model"] == "o3"
    assert not (home / ".codex" / "hooks.json").exists()
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_bytes() == before


def test_codex_notify_for_another_program_is_not_clobbered(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    write(config, 'notify = ["my-notifier", "--loud"]\n\n[features]\ncodex_hooks = false\n')
    result = run("install", "codex")
    assert result.exit_code == 0
    notes = [line for line in result.output.splitlines() if "my-notifier" in line]
    assert len(notes) == 1 and "left as it is" in notes[0]
    assert tomllib.loads(config.read_text())["notify"] == ["my-notifier", "--loud"]


def test_codex_inline_mcp_servers_cannot_take_a_table_and_nothing_changes(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    before = write(config, 'mcp_servers = { docs = { command = "d" } }\n')
    result = run("install", "codex")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert config.read_bytes() == before
    assert not (home / ".codex" / "hooks.json").exists()


def test_broken_toml_is_one_line_exit_2(home: Path) -> None:
    before = write(home / ".codex" / "config.toml", "model = \n")
    result = run("install", "codex", "--dry-run")
    assert result.exit_code == 2 and "is not valid TOML" in result.output
    assert (home / ".codex" / "config.toml").read_bytes() == before


def test_codex_has_no_project_scope() -> None:
    result = run("install", "codex", "--project")
    assert result.exit_code == 2 and "user only" in result.output


def test_plan_writes_nothing(home: Path, data_home: Path) -> None:
    result = plan("claude", "install", paths=Paths(data_home))
    assert len(result.changes) == 2 and not any(home.rglob("*"))


# -- doctor ------------------------------------------------------------------------------------


def test_doctor_reports_installs_service_and_a_working_hook_and_leaves_no_trace(
    home: Path, data_home: Path
) -> None:
    assert run("install", "claude").exit_code == 0
    assert run("install", "codex").exit_code == 0
    trust(home / ".codex" / "config.toml", home / ".codex" / "hooks.json")
    checks = {c.name: c for c in run_checks(str(data_home))}
    assert checks["claude user"].state == "ok" and "hooks yes" in checks["claude user"].detail
    assert "MCP yes (~/.claude.json)" in checks["claude user"].detail
    assert "not installed" in checks["claude project"].detail
    assert (
        checks["codex"].state == "ok"
        and "hooks yes (~/.codex/hooks.json)" in checks["codex"].detail
    )
    assert checks["service"].detail.startswith("not running")
    assert checks["hook"].state == "ok", checks["hook"].detail
    # The test event was processed (the inbox is empty) and left nothing a user sees.
    assert Inbox(Paths(data_home).inbox).pending() == []
    out = run("sessions", "--json")
    assert json.loads(out.output) == []
    assert json.loads(run("audit", "--json").output) == []
    assert json.loads(run("list", "--json").output) == []


def test_doctor_json_has_one_entry_per_check() -> None:
    result = run("doctor", "--json")
    names = [c["name"] for c in json.loads(result.output)]
    assert {"claude user", "claude project", "codex", "service", "hook"} <= set(names)
    assert all(c["state"] in ("ok", "warn", "fail") for c in json.loads(result.output))


# -- what the agents measured: env_vars, trust, leaving no trace -------------------------------


def trust(config: Path, hooks_file: Path) -> None:
    """What Codex writes when the user trusts the hooks: one table per handler of hooks.json,
    keyed by the file, the event, the group and the handler, each after a blank line."""
    hooks = json.loads(hooks_file.read_text())["hooks"]
    labels = {
        e: "".join("_" + c.lower() if c.isupper() else c for c in e).lstrip("_") for e in hooks
    }
    text = config.read_text() if config.exists() else ""
    for event, groups in hooks.items():
        for gi, g in enumerate(groups):
            for hi, h in enumerate(g["hooks"]):
                if "lexmem-hook" not in h["command"]:
                    continue  # the user's own hooks were trusted (or not) before
                key = f"{hooks_file}:{labels[event]}:{gi}:{hi}"
                text += f'\n[hooks.state.{json.dumps(key)}]\ntrusted_hash = "sha256:{gi}{hi}ab"\n'
    config.write_text(text)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder under root."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_codex_passes_lexmems_variables_to_its_mcp_server_and_an_old_install_is_upgraded(
    home: Path,
) -> None:
    import re

    from lexmem.agents.integrations import ENV_VARS

    source = Path(__file__).parent.parent / "lexmem"
    read = {
        v for f in source.rglob("*.py") for v in re.findall(r"\bLEXMEM_[A-Z_]+\b", f.read_text())
    }
    assert read and read <= set(ENV_VARS)  # every variable lexmem reads reaches its server
    config = home / ".codex" / "config.toml"
    before = write(config, CODEX_CONFIG, 0o600)
    assert run("install", "codex").exit_code == 0
    entry = tomllib.loads(config.read_text())["mcp_servers"]["lexmem"]
    assert entry["env_vars"] == list(ENV_VARS)
    # An install from before env_vars: doctor says so, and a reinstall brings it up to date.
    old = config.read_text().replace(
        "env_vars = " + json.dumps(list(ENV_VARS)).replace('","', '", "') + "\n", ""
    )
    assert "env_vars" not in old
    config.write_text(old)
    trust(config, home / ".codex" / "hooks.json")
    (check,) = [c for c in run_checks() if c.name == "codex"]
    assert check.state == "warn" and "LEXMEM_HOME" in check.detail
    again = run("install", "codex")
    assert again.exit_code == 0 and "inline [hooks]" not in again.output
    assert tomllib.loads(config.read_text())["mcp_servers"]["lexmem"]["env_vars"] == list(ENV_VARS)
    (check,) = [c for c in run_checks() if c.name == "codex"]
    assert check.state == "ok", check.detail
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_bytes() == before


def test_codex_hooks_not_yet_trusted_are_reported_with_how_to_trust_them(home: Path) -> None:
    config, hooks_file = home / ".codex" / "config.toml", home / ".codex" / "hooks.json"
    write(config, CODEX_CONFIG, 0o600)
    result = run("install", "codex")
    notes = [line for line in result.output.splitlines() if "Hooks need review" in line]
    assert len(notes) == 1 and "8 of 8 not yet" in notes[0] and "/hooks" in notes[0]
    (check,) = [c for c in run_checks() if c.name == "codex"]
    assert check.state == "warn" and "not trusted 8 of 8" in check.detail
    assert "Hooks need review" in check.detail and "\n" not in check.detail
    trust(config, hooks_file)
    (check,) = [c for c in run_checks() if c.name == "codex"]
    assert check.state == "ok", check.detail
    # Codex's [hooks.state] tables are not inline hooks: a reinstall says nothing about them.
    trusted = config.read_bytes()
    again = run("install", "codex")
    assert again.exit_code == 0 and "nothing to change" in again.output
    assert "inline" not in again.output and "Hooks need review" not in again.output
    assert config.read_bytes() == trusted
    # A hook turned off in Codex's /hooks is reported as such.
    config.write_text(config.read_text().replace('trusted_hash = "sha256:00ab"\n',
                                                 'trusted_hash = "sha256:00ab"\nenabled = false\n', 1))  # fmt: skip
    (check,) = [c for c in run_checks() if c.name == "codex"]
    assert check.state == "warn" and "turned off" in check.detail


def test_a_reinstall_that_changes_lexmems_hook_drops_codexs_trust_in_the_old_one(
    home: Path,
) -> None:
    config, hooks_file = home / ".codex" / "config.toml", home / ".codex" / "hooks.json"
    assert run("install", "codex").exit_code == 0
    data = json.loads(hooks_file.read_text())
    data["hooks"]["Stop"][0]["hooks"][0]["command"] = "/old/venv/bin/lexmem-hook codex"
    hooks_file.write_text(json.dumps(data, indent=2) + "\n")
    trust(config, hooks_file)
    result = run("install", "codex")
    assert result.exit_code == 0 and "1 of 8 not yet" in result.output
    state = tomllib.loads(config.read_text())["hooks"]["state"]
    assert len(state) == 7 and not any(":stop:" in k for k in state)


@pytest.mark.parametrize(
    ("agent", "scope"), [("claude", "user"), ("claude", "project"), ("codex", "user")]
)
@pytest.mark.parametrize("existing", [True, False], ids=["with-files", "fresh"])
def test_install_then_uninstall_leaves_every_file_and_folder_as_it_was(
    agent: str,
    scope: str,
    existing: bool,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    root = repo if scope == "project" else home
    if existing:
        if agent == "codex":
            write(home / ".codex" / "config.toml", CODEX_CONFIG, 0o600)
            write(
                home / ".codex" / "hooks.json",
                json.dumps({"hooks": USER_SETTINGS["hooks"]}, indent=2) + "\n",
            )
        elif scope == "user":
            write(
                home / ".claude" / "settings.json",
                json.dumps(USER_SETTINGS, indent=2) + "\n",
                0o640,
            )
            write(home / ".claude.json", json.dumps(CLAUDE_JSON, indent=2), 0o600)
        else:
            write(repo / ".claude" / "settings.json", json.dumps(USER_SETTINGS, indent=2) + "\n")
            write(
                repo / ".mcp.json",
                json.dumps({"mcpServers": {"db": {"command": "db"}}}, indent=2) + "\n",
            )
    before = tree(root)
    flag = ["--project"] if scope == "project" else []
    assert run("install", agent, *flag).exit_code == 0
    assert tree(root) != before
    if agent == "codex":
        trust(home / ".codex" / "config.toml", home / ".codex" / "hooks.json")
    out = run("uninstall", agent, *flag)
    assert out.exit_code == 0, out.output
    assert tree(root) == before  # no backup, no trust entry, no folder lexmem made
    assert "nothing to change" in run("uninstall", agent, *flag).output


def test_claude_loads_lexmems_tools_at_session_start_unless_the_user_said_otherwise(
    home: Path,
) -> None:
    assert run("install", "claude").exit_code == 0
    entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["lexmem"]
    assert entry["alwaysLoad"] is True
    data = json.loads((home / ".claude.json").read_text())
    data["mcpServers"]["lexmem"]["alwaysLoad"] = False
    (home / ".claude.json").write_text(json.dumps(data, indent=2))
    assert "nothing to change" in run("install", "claude").output
