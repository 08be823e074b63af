"""Claude Code's hooks without a process: install's shape per Claude Code version, the
``record_hook_event`` tool through the MCP SDK's client against a real ``lexmem mcp``,
and a session's events put back in the agent's order before they are windowed.

The real Claude Code sessions are in tests/test_agents_hooks_real.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from test_mcp import CALL_TIMEOUT, serve, server_env

from lexmem.agents import integrations
from lexmem.agents.integrations import CLAUDE_HOOK_EVENTS, HOOK_TOOL, HOOK_TOOL_NAME, installed
from lexmem.agents.mcp_server import HOOK_FIELDS
from lexmem.agents.mcp_server import HOOK_TOOL as SERVER_HOOK_TOOL
from lexmem.capture.extract import Extractor
from lexmem.capture.inbox import Inbox, make_event
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.service.pipeline import agent_order
from lexmem.service.writer import CaptureService

USER_SETTINGS = {
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send 'done'"}]}]},
}
PINNED, NEWEST, BEFORE = (2, 1, 197), (2, 1, 332), (2, 1, 117)


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Path:
    path = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    return path


def use_version(monkeypatch: pytest.MonkeyPatch, version: tuple[int, ...] | None) -> None:
    monkeypatch.setattr(integrations, "claude_version", lambda: version)


def ours(data: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        h
        for g in data["hooks"].get(event, [])
        for h in g["hooks"]
        if "lexmem-hook" in h.get("command", "") or h.get("server") == "lexmem"
    ]


# -- install's shape ---------------------------------------------------------------------


@pytest.mark.parametrize("version", [PINNED, NEWEST])
def test_claude_code_with_mcp_tool_hooks_gets_them_for_every_event_but_the_sessions_ends(
    version: tuple[int, ...], settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_version(monkeypatch, version)
    before = settings.read_bytes()
    assert run("install", "claude").exit_code == 0
    data = json.loads(settings.read_text())
    for event in CLAUDE_HOOK_EVENTS:
        (handler,) = ours(data, event)
        if event == "SessionStart":  # no MCP client yet; the digest must reach the model
            assert handler["type"] == "command" and "async" not in handler
        elif event == "SessionEnd":  # the servers are gone by then: in the background
            assert handler["type"] == "command"
            assert handler.get("async", False) is (version >= NEWEST)
            if version < NEWEST:  # Claude Code's async gives it no payload
                assert handler["command"].startswith(integrations.BACKGROUND_MARK)
        else:
            assert handler == {
                "type": "mcp_tool", "server": "lexmem", "tool": HOOK_TOOL,
                "input": handler["input"], "timeout": 10,
            }  # fmt: skip
            fields = handler["input"]
            assert fields["hook_event_name"] == "${hook_event_name}"
            assert all(value == "${" + key + "}" for key, value in fields.items())
            assert set(fields) <= HOOK_FIELDS
    assert ours(data, "PreToolUse") and data["hooks"]["PreToolUse"][0]["matcher"] == "*"
    assert set(ours(data, "PostToolUse")[0]["input"]) >= {"tool_input", "tool_response"}
    assert ours(data, "UserPromptSubmit")[0]["input"]["prompt"] == "${prompt}"
    # The tool is kept from the model; the user's permissions stay as they were.
    assert data["permissions"] == {"allow": ["Bash(git status)"], "deny": [HOOK_TOOL_NAME]}
    assert data["hooks"]["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    assert "hooks yes" in next(f.detail for f in installed() if f.name == "claude user")
    assert run("uninstall", "claude").exit_code == 0
    assert settings.read_bytes() == before


@pytest.mark.parametrize("version", [None, BEFORE])
def test_an_older_or_unknown_claude_code_gets_todays_command_hooks(
    version: tuple[int, ...] | None, settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_version(monkeypatch, version)
    assert run("install", "claude").exit_code == 0
    data = json.loads(settings.read_text())
    for event in CLAUDE_HOOK_EVENTS:
        (handler,) = ours(data, event)
        assert handler["type"] == "command"
        if event == "SessionStart":  # the digest from the shell (tests/test_session_start.py)
            assert handler["command"].startswith(integrations.SESSION_START_MARK)
        elif event == "SessionEnd":  # no async that passes the payload: in the background
            assert handler["command"].startswith(integrations.BACKGROUND_MARK)
        elif event in ("PostToolUse", "PostToolUseFailure"):  # nobody waits: to the service
            assert handler["command"].endswith("lexmem-hook claude --background")
        else:
            assert handler["command"].endswith("lexmem-hook claude")
        assert handler.get("async", False) is (event in ("PostToolUse", "PostToolUseFailure"))
    # The server offers the tool whatever calls it: the model is kept from it all the same.
    assert data["permissions"] == {"allow": ["Bash(git status)"], "deny": [HOOK_TOOL_NAME]}


def test_an_upgrade_of_claude_code_moves_the_hooks_in_place_and_back(
    settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reinstall after Claude Code changed: lexmem's handlers change where they stand
    (no duplicates); the deny rule stays one."""
    before = settings.read_bytes()
    use_version(monkeypatch, None)
    assert run("install", "claude").exit_code == 0
    use_version(monkeypatch, PINNED)
    assert run("install", "claude").exit_code == 0
    data = json.loads(settings.read_text())
    assert all(len(ours(data, e)) == 1 for e in CLAUDE_HOOK_EVENTS)
    assert ours(data, "Stop")[0]["type"] == "mcp_tool"
    assert data["hooks"]["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    assert HOOK_TOOL_NAME in data["permissions"]["deny"]
    use_version(monkeypatch, BEFORE)
    assert run("install", "claude").exit_code == 0
    data = json.loads(settings.read_text())
    assert ours(data, "Stop")[0]["type"] == "command"
    assert data["permissions"]["deny"] == [HOOK_TOOL_NAME]
    assert run("uninstall", "claude").exit_code == 0
    assert settings.read_bytes() == before


def test_the_users_own_empty_deny_list_survives_uninstall(
    settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.write_text(json.dumps({"permissions": {"allow": [], "deny": []}}, indent=2) + "\n")
    before = settings.read_bytes()
    use_version(monkeypatch, NEWEST)
    assert run("install", "claude").exit_code == 0
    assert json.loads(settings.read_text())["permissions"]["deny"] == [HOOK_TOOL_NAME]
    assert run("uninstall", "claude").exit_code == 0
    assert settings.read_bytes() == before


def test_the_version_is_what_claude_version_says(
    tmp_path: Path, settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No version given: ``claude --version`` of the ``claude`` on PATH decides."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "claude"
    fake.write_text("#!/bin/sh\necho '2.1.197 (Claude Code)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert integrations.claude_version() == PINNED
    assert run("install", "claude").exit_code == 0
    assert ours(json.loads(settings.read_text()), "Stop")[0]["type"] == "mcp_tool"
    fake.write_text("#!/bin/sh\nexit 1\n")
    assert integrations.claude_version() is None
    assert integrations.parse_version("claude 10.0.3") == (10, 0, 3)
    assert integrations.parse_version("") is None


def test_the_tool_names_agree() -> None:
    assert SERVER_HOOK_TOOL == HOOK_TOOL
    assert HOOK_TOOL_NAME.endswith(f"__lexmem__{HOOK_TOOL}")


# -- the tool, through the SDK's client ---------------------------------------------------

SECRET = "sk-ant-api03-" + "Zq7" * 30
PAYLOADS: list[dict[str, Any]] = [
    {"hook_event_name": "UserPromptSubmit", "prompt": f"Use pnpm, never npm. My key is {SECRET}"},
    {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
     "tool_input": {"command": "pnpm test", "description": "run the tests"}},
    {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
     "tool_input": {"command": "pnpm test"},
     "tool_response": {"stdout": "12 passed", "stderr": "", "interrupted": False}},
    {"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": "toolu_2",
     "tool_input": {"command": "make"}, "error": "make: *** No targets", "is_interrupt": False},
    {"hook_event_name": "Stop", "stop_hook_active": False,
     "last_assistant_message": "The tests pass with pnpm."},
    {"hook_event_name": "PreToolUse", "tool_name": "mcp__lexmem__search_memory",
     "tool_input": {"query": "pnpm"}, "tool_use_id": "toolu_3"},
]  # fmt: skip


def as_claude_code_fills_it(payload: Mapping[str, Any], fields: Sequence[str]) -> dict[str, str]:
    """The tool's arguments as Claude Code makes them from ``"${field}"``: an object as its
    JSON text, a missing field as ""."""
    out = {}
    for key in fields:
        value = payload.get(key)
        if value is None:
            out[key] = ""
        elif isinstance(value, (dict, list)):
            out[key] = json.dumps(value, separators=(",", ":"))
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def hook_events(home: Path, payloads: list[dict[str, Any]], cwd: Path) -> list[dict[str, Any]]:
    """What the real ``lexmem-hook claude`` writes for the same payloads."""
    env = {**os.environ, "LEXMEM_HOME": str(home)}
    for payload in payloads:
        done = subprocess.run(
            [sys.executable, "-c", "from lexmem.capture.hook import main; main()", "claude"],
            input=json.dumps(payload).encode(), env=env, cwd=cwd, capture_output=True,
            timeout=60, check=True,
        )  # fmt: skip
        assert done.returncode == 0
    return inbox_events(home)


def inbox_events(home: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in Inbox(Paths(home).inbox).pending()]


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("event_id", "timestamp")}


def every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_hook_tool_records_what_the_hook_command_would(tmp_path: Path) -> None:
    """Each payload, handed over as Claude Code's mcp_tool hook hands it (strings), makes
    the events ``lexmem-hook claude`` makes of it: same kinds, content, metadata and
    speaker; the secret reaches no file; lexmem's own tool calls are not recorded."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    payloads = [
        {"session_id": "s-1", "cwd": str(repo), "transcript_path": str(tmp_path / "t.jsonl"),
         "permission_mode": "default",
         **p} for p in PAYLOADS
    ]  # fmt: skip
    expected = hook_events(tmp_path / "by-command", payloads, repo)
    assert len(expected) == 5  # lexmem's own search is not work
    home = tmp_path / "lexmem"
    async with serve(server_env(home, tmp_path / "userhome"), repo) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        tool = listed[HOOK_TOOL]
        assert tool.description is not None and "lexmem's own" in tool.description
        assert tool.input_schema["required"] == ["hook_event_name"]
        for payload in payloads:
            handler = integrations._hook_handler("claude", payload["hook_event_name"], PINNED)
            arguments = as_claude_code_fills_it(payload, list(handler["input"]))
            with anyio.fail_after(CALL_TIMEOUT):
                result = await session.call_tool(HOOK_TOOL, arguments)
            assert not result.is_error, result.content
            assert result.content[0].text == "{}"  # type: ignore[union-attr]
    got = inbox_events(home)
    for mine, theirs in zip(got, expected, strict=True):
        assert comparable(mine) == comparable(theirs)
    assert got[0]["metadata"]["redactions"] >= 1
    assert SECRET.encode() not in every_byte(home)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_hook_tool_honours_opt_out_and_pause(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    home = tmp_path / "lexmem"
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s-2", "cwd": str(repo),
              "prompt": "This repository's secret plan"}  # fmt: skip
    async with serve(server_env(home, tmp_path / "userhome"), repo) as session:
        (repo / ".lexmem-optout").write_text("")
        with anyio.fail_after(CALL_TIMEOUT):
            result = await session.call_tool(HOOK_TOOL, prompt)
        assert not result.is_error
        assert inbox_events(home) == []
        assert b"secret plan" not in (every_byte(home) if home.exists() else b"")
        (repo / ".lexmem-optout").unlink()
        with anyio.fail_after(CALL_TIMEOUT):
            await session.call_tool(HOOK_TOOL, prompt)
        assert [e["event_type"] for e in inbox_events(home)] == ["prompt"]


# -- the agent's order ------------------------------------------------------------------------


class Recording(Extractor):
    def __init__(self) -> None:
        super().__init__()
        self.windows: list[list[str]] = []

    def extract(self, events: Sequence[Mapping[str, Any]], *, final: bool = False) -> Any:
        self.windows.append([str(e["content"]) for e in events])
        return super().extract(events, final=final)


def test_agent_order_sorts_by_time_and_keeps_arrival_order_among_equals() -> None:
    events = [
        {"content": "b", "timestamp": "2026-01-01T10:00:02+00:00"},
        {"content": "a", "timestamp": "2026-01-01T10:00:01+00:00"},
        {"content": "c1", "timestamp": "2026-01-01T11:00:02+01:00"},  # the same moment as b
        {"content": "c2", "timestamp": "2026-01-01T10:00:02Z"},
    ]
    assert [e["content"] for e in agent_order(events)] == ["a", "b", "c1", "c2"]


def test_events_that_arrive_out_of_order_are_windowed_in_the_agents_order(
    service: CaptureService, tmp_path: Path
) -> None:
    """A tool's result from a hook the agent did not wait for lands after the answer that
    followed it: the window the extractor reads has it back in its place."""
    recording = Recording()
    service.extractor = recording
    repo = str(tmp_path / "shop")
    inbox = Inbox(service.lm.paths.inbox)

    def event(kind: str, content: str, second: int) -> dict[str, Any]:
        return dict(
            make_event(
                kind,
                content,
                session_id="s-order",
                agent="claude",
                project=repo,
                cwd=repo,
                timestamp=f"2026-01-01T10:00:0{second}+00:00",
                metadata={},
            )
        )

    arrival = [
        event("prompt", "Run the tests with pnpm", 1),
        event("tool_call", "Bash: pnpm test", 2),
        event("response", "The tests pass.", 4),
        event("tool_result", "12 passed", 3),  # written last
    ]
    for e in arrival:
        inbox.write(e)  # type: ignore[arg-type]
    service.drain()
    assert recording.windows == [
        ["Run the tests with pnpm", "Bash: pnpm test", "12 passed", "The tests pass."]
    ]
