"""The real Claude Code with lexmem's hooks as MCP tool calls: nothing it waits for
starts a process, and a session is captured as with the command hooks.

The pinned Claude Code (tests/agents) and the newest (installed with ``npm install
--prefix`` in $LEXMEM_NEWEST_AGENTS, by default tests/agents/newest; skipped when it is
not there), each against :mod:`fakemodel`. For each, one session with the hooks lexmem
installs for that version, and the same session with today's command hooks (the version
unknown), in sandboxes of their own. ``lexmem-hook`` is wrapped so that every process of
it says which event started it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fakemodel import FakeModel, Recorded, Turn
from realagents import CLI_TIMEOUT, REPO, Sandbox, agent_bin, missing_reason

from lexmem.agents.integrations import HOOK_TOOL_NAME
from lexmem.config import Paths
from lexmem.wire import socket_path

pytestmark = pytest.mark.slow

NEWEST_DIR = Path(
    os.environ.get("LEXMEM_NEWEST_AGENTS") or Path(__file__).parent / "agents" / "newest"
)
SEEDED = "To release the shop, run 'make ship' from the release branch, never from main"
PREFERENCE = "Remember this: in this project we always use pnpm, never npm."
BASH = {"command": "echo hello-from-bash", "description": "Say hello"}
ANSWER = "Noted: pnpm, never npm. The shell said hello-from-bash."


def claude_exe(which: str) -> Path:
    if which == "pinned":
        reason = missing_reason("claude")
        if reason is not None:
            if os.environ.get("CI"):
                pytest.fail(f"CI=true but the claude CLI cannot run: {reason}")
            pytest.skip(reason)
        return agent_bin("claude")
    exe = NEWEST_DIR / "node_modules" / ".bin" / "claude"
    if not exe.exists():
        pytest.skip(
            f"the newest Claude Code is not installed in {NEWEST_DIR} (npm install --prefix)"
        )
    return exe


def wrap_hook(sb: Sandbox, log: Path) -> None:
    """``lexmem-hook`` that first writes the event that started it to ``log``, then runs
    the hook on the same payload, then writes ``EVENT:done``."""
    script = sb.python.parent / "lexmem-hook"
    script.write_text(
        f"#!{sb.python}\nimport json, os, sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "data = sys.stdin.buffer.read()\n"
        "try:\n    name = json.loads(data).get('hook_event_name')\n"
        "except ValueError:\n    name = None\n"
        f"with open({str(log)!r}, 'a') as fh:\n    fh.write(f'{{name}}\\n')\n"
        "from lexmem.capture.hook import run\n"
        "code = run(sys.argv[1:], stdin=data)\nsys.stdout.flush()\n"
        f"with open({str(log)!r}, 'a') as fh:\n    fh.write(f'{{name}}:done\\n')\n"
        "os._exit(code)\n"
    )


def start_service(sb: Sandbox) -> None:
    """A running service, as a previous session leaves it (its manifest recorded): the
    session's tool hooks then reach it at once."""
    proc = subprocess.Popen(
        [str(sb.python), "-m", "lexmem", "serve"], cwd=sb.lexmem_home.parent, env=sb.env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    sb._leftovers.append(proc.pid)
    manifest = sb.lexmem_home / "mcp-manifest.json"
    deadline = time.monotonic() + CLI_TIMEOUT
    while not (socket_path(Paths(sb.lexmem_home)).exists() and manifest.exists()):
        assert proc.poll() is None, "lexmem serve stopped"
        assert time.monotonic() < deadline, "lexmem serve did not come up"
        time.sleep(0.1)


@dataclass
class Session:
    requests: list[Recorded]
    hook_processes: list[str]
    settings: dict[str, Any]
    memories: list[str] = field(default_factory=list)
    events: int = 0


def one_session(exe: Path, root: Path, *, tool_hooks: bool) -> Session:
    with FakeModel() as model:
        sb = Sandbox(root, model.url)
        try:
            log = root / "hook-processes.log"
            wrap_hook(sb, log)
            (sb.home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
            if tool_hooks:  # install finds this Claude Code (`claude --version`) on PATH
                sb.env["PATH"] = f"{exe.parent}{os.pathsep}{sb.env['PATH']}"
            sb.lexmem("install", "claude")
            settings = json.loads((sb.home / ".claude" / "settings.json").read_text())
            sb.lexmem("remember", SEEDED, "--project", str(sb.project))
            start_service(sb)
            model.script(Turn(tool="Bash", input=BASH), Turn(text=ANSWER))
            run = sb.run(
                [str(exe), "-p", PREFERENCE, "--dangerously-skip-permissions",
                 "--output-format", "json"]
            )  # fmt: skip
            assert run.returncode == 0
            session_id = json.loads(run.stdout)["session_id"]
            got = Session(model.main_requests(), [], settings)
            deadline = time.monotonic() + CLI_TIMEOUT
            while True:  # the service drains what the session handed over, its end included
                pending = list((sb.lexmem_home / "inbox").glob("*.json"))
                sessions = sb.lexmem_json("sessions")
                ours = [s for s in sessions if s.get("id", s.get("session_id")) == session_id]
                ended = ours and ours[0].get("status") != "active"
                # SessionEnd's hook may run in the background after the session.
                last = log.exists() and "SessionEnd:done" in log.read_text().split()
                if not pending and ended and last:
                    got.events = int(ours[0].get("event_count") or ours[0].get("events") or 0)
                    break
                assert time.monotonic() < deadline, (
                    f"session not drained: {sessions}; hooks: "
                    f"{log.read_text().split() if log.exists() else None}; pending: {pending}"
                )
                time.sleep(0.3)
            memories = sb.lexmem_json("list", "--project", str(sb.project))
            got.memories = sorted(m["content"] for m in memories)
            started = log.read_text().split() if log.exists() else []
            got.hook_processes = [e for e in started if not e.endswith(":done")]
            return got
        finally:
            sb.close()


@pytest.mark.parametrize("which", ["pinned", "newest"])
def test_claude_hooks_run_as_tool_calls_and_capture_what_the_commands_capture(
    which: str, tmp_path: Path
) -> None:
    exe = claude_exe(which)
    tools = one_session(exe, tmp_path / "tools", tool_hooks=True)
    commands = one_session(exe, tmp_path / "commands", tool_hooks=False)
    stop = tools.settings["hooks"]["Stop"][0]["hooks"][0]
    assert stop["type"] == "mcp_tool", tools.settings
    assert commands.settings["hooks"]["Stop"][0]["hooks"][0]["type"] == "command"

    # No lexmem-hook process for an event the agent waits for: SessionStart's (its digest)
    # and SessionEnd's only, where the commands ran one for every event.
    assert tools.hook_processes[:1] == ["SessionStart"]
    assert set(tools.hook_processes) <= {"SessionStart", "SessionEnd"}, tools.hook_processes
    assert {"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"} <= set(commands.hook_processes)

    # The SessionStart digest reaches the first request; the hooks' tool is never offered.
    for s in (tools, commands):
        assert s.requests and SEEDED in s.requests[0].strings
        offered = {name for r in s.requests for name in r.tool_names}
        assert HOOK_TOOL_NAME not in offered
        assert any(name.startswith("mcp__lexmem__") for name in offered)

    # The same session, captured the same: its events and the memories made of them.
    assert tools.events == commands.events >= 6  # start, prompt, call, result, answer, end
    assert tools.memories == commands.memories
    assert any("pnpm" in m for m in tools.memories), tools.memories


def test_codex_is_not_offered_the_hooks_tool(tmp_path: Path) -> None:
    """Codex runs no tool hooks (docs/agents.md): its model gets lexmem's tools but the
    hooks' one, which install lists under the server's ``disabled_tools``."""
    reason = missing_reason("codex")
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but the codex CLI cannot run: {reason}")
        pytest.skip(reason)
    with FakeModel() as model:
        sb = Sandbox(tmp_path, model.url)
        try:
            (sb.codex_home / "config.toml").write_text(sb.codex_provider_config())
            sb.lexmem("install", "codex")
            model.script(Turn(text="Done."))
            sb.codex("Say done.")
            requests = model.main_requests()
            assert requests, "the session sent no model request"
            offered = requests[0].tool_names
            assert "mcp__lexmem__search_memory" in offered, offered
            assert not [name for name in offered if "record_hook_event" in name], offered
        finally:
            sb.close()
