"""The real Claude Code and Codex CLIs with lexmem installed, against a fake model server.

``./dev`` installs both CLIs from ``tests/agents/package-lock.json`` (``npm ci``); the
model is :mod:`fakemodel`, a real HTTP server on 127.0.0.1 that records every request and
answers from a script. Nothing is downloaded here, and nothing leaves 127.0.0.1.

For each agent one journey runs, once, in a temporary HOME with the user's own settings
already there: ``lexmem install``; a memory seeded with ``lexmem remember``; session 1,
where the user states a preference; session 2, where the scripted model calls lexmem's
``search_memory``; ``lexmem uninstall``. The tests below each check one thing the journey
recorded, so one failure does not hide the others.

Without node and npm the tests skip, saying so; under ``CI=true`` a missing CLI fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fakemodel import FakeModel, Recorded, Turn
from realagents import CLI_TIMEOUT, Run, Sandbox, agent_bin, missing_reason

from lexmem.config import Paths
from lexmem.locks import FileLock, service_running
from lexmem.service.registry import services

pytestmark = pytest.mark.slow

SEEDED = "To release the shop, run 'make ship' from the release branch, never from main"
PREFERENCE = "Remember this: in this project we always use pnpm, never npm."
SEARCH_INPUT = {"query": "how do we release the shop"}
TOOL = "mcp__lexmem__search_memory"

# What the user had before lexmem: files the agent reads, in the agents' own formatting.
CLAUDE_SETTINGS = {
    "permissions": {"allow": ["Bash(git status)"], "deny": []},
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true # the user's own hook"}]}]},
    "env": {"MY_SETTING": "kept"},
}
CLAUDE_JSON = {
    "hasCompletedOnboarding": True,
    "mcpServers": {"other": {"type": "stdio", "command": "true", "args": []}},
}
CODEX_HOOKS = {
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true # the user's own hook"}]}]}
}


@dataclass
class Journey:
    """What one agent's journey recorded, for the tests to check."""

    agent: str
    sandbox: Sandbox
    before: dict[str, bytes | None] = field(default_factory=dict)
    after_plain_uninstall: dict[str, bytes | None] = field(default_factory=dict)
    after_uninstall: dict[str, bytes | None] = field(default_factory=dict)
    before_uninstall: dict[str, bytes | None] = field(default_factory=dict)
    session1: list[Recorded] = field(default_factory=list)
    session2: list[Recorded] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    digest: str = ""
    inbox_left: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def _require(agent: str) -> None:
    reason = missing_reason(agent)
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI=true but the {agent} CLI cannot run: {reason}")
    pytest.skip(reason)


def _snapshot(paths: list[Path]) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.exists() else None) for p in paths}


def _user_files(sb: Sandbox, agent: str) -> list[Path]:
    if agent == "claude":
        return [sb.home / ".claude" / "settings.json", sb.home / ".claude.json"]
    return [sb.codex_home / "hooks.json", sb.codex_home / "config.toml"]


def _write_user_config(sb: Sandbox, agent: str) -> None:
    if agent == "claude":
        (sb.home / ".claude").mkdir(exist_ok=True)
        (sb.home / ".claude" / "settings.json").write_text(json.dumps(CLAUDE_SETTINGS, indent=2))
        (sb.home / ".claude.json").write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n")
    else:
        (sb.codex_home / "hooks.json").write_text(json.dumps(CODEX_HOOKS, indent=4) + "\n")
        (sb.codex_home / "config.toml").write_text(
            "# my Codex settings\n" + sb.codex_provider_config()
        )


def trust_codex_hooks(sb: Sandbox) -> list[str]:
    """Trust lexmem's Codex hooks as a user does in its /hooks screen: ``codex app-server`` lists
    them (``hooks/list``: each hook's key and ``currentHash``) and records the trust
    (``config/batchWrite`` of ``hooks.state.<key>.trusted_hash`` into config.toml), the
    requests Codex's own interface sends. Returns the keys trusted."""
    proc = subprocess.Popen(
        [str(agent_bin("codex")), "app-server"], cwd=sb.project, env=sb.env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    deadline = time.monotonic() + 60

    def call(rid: int, method: str, params: dict[str, Any]) -> Any:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"id": rid, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"codex app-server ended during {method}")
            msg = json.loads(line)
            if msg.get("id") == rid:
                if "error" in msg:
                    raise AssertionError(f"codex app-server {method}: {msg['error']}")
                return msg["result"]
        raise AssertionError(f"codex app-server did not answer {method}")

    try:
        call(1, "initialize", {"clientInfo": {"name": "lexmem-tests", "version": "1"}})
        proc.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        proc.stdin.flush()
        listed = call(2, "hooks/list", {"cwds": [str(sb.project)]})
        hooks = [h for entry in listed["data"] for h in entry["hooks"]]
        ours = [h for h in hooks if "lexmem-hook" in (h.get("command") or "")]
        state = {h["key"]: {"trusted_hash": h["currentHash"]} for h in ours}
        edit = {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": state}
        call(3, "config/batchWrite", {"edits": [edit]})
        again = call(4, "hooks/list", {"cwds": [str(sb.project)]})
        status = {h["key"]: h["trustStatus"] for e in again["data"] for h in e["hooks"]
                  if h["key"] in state}  # fmt: skip
        assert all(s == "trusted" for s in status.values()), status
        return sorted(state)
    finally:
        proc.kill()
        proc.wait()


# Claude Code's SessionEnd hook may run in the background after the session, and the
# service takes events in once they settle: the inbox counts as drained once it stayed
# empty this long.
QUIET_S = 3.0


def _drained(sb: Sandbox, predicate: Any, seconds: float = 60) -> bool:
    """Wait until the inbox is empty and ``predicate()`` holds, and both stay so for
    :data:`QUIET_S` (the service, started by the SessionStart hook, drains the inbox on
    its own)."""
    deadline = time.monotonic() + seconds
    since: float | None = None
    while time.monotonic() < deadline:
        pending = list((sb.lexmem_home / "inbox").glob("*.json"))
        if not pending and predicate():
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= QUIET_S:
                return True
        else:
            since = None
        time.sleep(0.5)
    return False


def _session(sb: Sandbox, agent: str, prompt: str) -> Run:
    return sb.claude(prompt) if agent == "claude" else sb.codex(prompt)


def _journey(agent: str, root: Path) -> Iterator[Journey]:
    with FakeModel() as model:
        sb = Sandbox(root, model.url)
        j = Journey(agent, sb)
        try:
            _write_user_config(sb, agent)
            files = _user_files(sb, agent)
            j.before = _snapshot(files)
            # Install and uninstall with no session between: the files come back as they were.
            sb.lexmem("install", agent)
            sb.lexmem("uninstall", agent)
            j.after_plain_uninstall = _snapshot(files)
            sb.lexmem("install", agent)
            if agent == "codex":
                trust_codex_hooks(sb)
            sb.lexmem("remember", SEEDED, "--project", str(sb.project))

            # Session 1: the user states a preference worth keeping.
            model.script(Turn(text="Noted: pnpm, never npm."))
            start = time.monotonic()
            j.runs.append(_session(sb, agent, PREFERENCE))
            j.seconds["session1"] = time.monotonic() - start
            j.session1 = model.main_requests()

            def captured() -> bool:
                j.memories = sb.lexmem_json("list", "--project", str(sb.project))
                return any("pnpm" in m.get("content", "") for m in j.memories)

            _drained(sb, captured)
            j.inbox_left = [p.name for p in (sb.lexmem_home / "inbox").glob("*.json")]
            j.sessions = sb.lexmem_json("sessions")
            j.audit = sb.lexmem_json("audit")
            j.digest = sb.lexmem("digest", "--project", str(sb.project)).stdout

            # Session 2: the model searches lexmem through its MCP tool, then answers.
            model.reset()
            model.script(Turn(tool=TOOL, input=SEARCH_INPUT), Turn(text="Use make ship."))
            start = time.monotonic()
            j.runs.append(_session(sb, agent, "How do we release the shop?"))
            j.seconds["session2"] = time.monotonic() - start
            j.session2 = model.main_requests()

            j.before_uninstall = _snapshot(files)
            sb.lexmem("uninstall", agent)
            j.after_uninstall = _snapshot(files)
        except AssertionError as exc:
            j.errors.append(str(exc))
        try:
            yield j
        finally:
            sb.close()


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journey]:
    _require("claude")
    yield from _journey("claude", tmp_path_factory.mktemp("claude"))


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journey]:
    _require("codex")
    yield from _journey("codex", tmp_path_factory.mktemp("codex"))


@pytest.fixture(params=["claude", "codex"])
def journey(request: pytest.FixtureRequest) -> Journey:
    j: Journey = request.getfixturevalue(request.param)
    assert not j.errors, f"the {j.agent} journey stopped early:\n" + "\n".join(j.errors)
    return j


def test_sessions_ran_within_the_time_limit(journey: Journey) -> None:
    assert len(journey.runs) == 2
    for run in journey.runs:
        assert run.returncode == 0 and run.seconds < CLI_TIMEOUT


def test_hooks_fired_and_the_inbox_drained(journey: Journey) -> None:
    assert journey.inbox_left == [], "the service did not drain the inbox"
    rules = {e.get("rule") for e in journey.audit}
    assert rules - {"explicit"}, f"no audit entry came from the session's hooks: {journey.audit}"
    agents = {s.get("agent") for s in journey.sessions}
    assert journey.agent in agents, (
        f"lexmem sessions shows no {journey.agent} session: {journey.sessions}"
    )


def test_the_stated_preference_became_a_memory(journey: Journey) -> None:
    texts = [m.get("content", "") for m in journey.memories]
    assert any("pnpm" in t for t in texts), (texts, journey.audit)


def test_first_request_of_each_session_carries_the_digest(journey: Journey) -> None:
    for name, requests in (("session 1", journey.session1), ("session 2", journey.session2)):
        assert requests, f"{name} sent no model request"
        assert SEEDED in requests[0].strings, f"{name}'s first request lacks the digest"
    # Session 2's first request carries the project's digest as `lexmem digest` shows it,
    # what session 1 taught included.
    first = journey.session2[0].strings
    lines = [ln.strip() for ln in journey.digest.splitlines() if ln.strip()]
    missing = [ln for ln in lines if ln not in first]
    assert not missing, f"session 2's first request lacks these digest lines: {missing}"
    assert any("pnpm" in ln for ln in lines), f"the digest lacks the preference:\n{journey.digest}"


def test_lexmem_tools_are_in_the_first_request(journey: Journey) -> None:
    for name, requests in (("session 1", journey.session1), ("session 2", journey.session2)):
        offered = requests[0].tool_names
        assert TOOL in offered, f"{name}'s first request offers no lexmem tool: {offered}"


def test_a_scripted_mcp_call_returns_the_seeded_memory(journey: Journey) -> None:
    requests = journey.session2
    assert len(requests) >= 2, "the model's tool call got no second request"
    result = requests[1]
    outputs = _tool_results(result)
    assert outputs, (
        f"the second request carries no tool result: {result.body.get('messages') or result.body.get('input')}"
    )
    assert any("make ship" in o for o in outputs), (
        f"the tool result lacks the seeded memory: {outputs}"
    )


def _tool_results(rec: Recorded) -> list[str]:
    """The tool results in a request (Anthropic tool_result blocks, Responses
    function_call_output items), as text."""
    found = []
    for msg in rec.body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found.append(json.dumps(block.get("content"), ensure_ascii=False))
    for item in rec.body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            found.append(json.dumps(item.get("output"), ensure_ascii=False))
    return found


def test_uninstall_restores_the_users_files_byte_for_byte(journey: Journey) -> None:
    assert journey.after_plain_uninstall == journey.before
    for path, before in journey.before.items():
        after = journey.after_uninstall[path]
        if path.endswith(".claude.json"):
            # Claude Code itself rewrites ~/.claude.json as it runs (start counts, projects,
            # migrations): uninstall takes out lexmem's server and nothing else, and the
            # user's own servers are as they were.
            assert after is not None and before is not None
            expected = json.loads(journey.before_uninstall[path] or b"{}")
            del expected["mcpServers"]["lexmem"]
            assert json.loads(after) == expected
            assert json.loads(after)["mcpServers"] == json.loads(before)["mcpServers"]
            continue
        assert after == before, f"{path} differs after uninstall:\n{(after or b'').decode()}"


# -- the opening while the service starts ----------------------------------------------------
#
# The newest Claude Code as well as the pinned one: installed (npm --prefix) in
# $LEXMEM_NEWEST_AGENTS, by default tests/agents/newest; its test skips when it is not.
# Claude Code 2.1.332 opens with a server/discover probe of MCP 2026-07-28, then a
# subscriptions/listen stream it waits to see acknowledged, then the listings.
NEWEST_DIR = Path(
    os.environ.get("LEXMEM_NEWEST_AGENTS") or Path(__file__).parent / "agents" / "newest"
)


def _cli(agent: str, which: str) -> Path:
    if which == "pinned":
        _require(agent)
        return agent_bin(agent)
    exe = NEWEST_DIR / "node_modules" / ".bin" / agent
    if not exe.exists():
        pytest.skip(f"the newest {agent} CLI is not installed in {NEWEST_DIR} (npm --prefix)")
    return exe


def _argv(agent: str, exe: Path, prompt: str) -> list[str]:
    """What Sandbox.claude and Sandbox.codex run, with ``exe``."""
    if agent == "claude":
        return [str(exe), "-p", prompt, "--dangerously-skip-permissions", "--output-format", "json"]
    return [str(exe), "exec", "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check", "--color", "never", prompt]  # fmt: skip


def _stop_services(sb: Sandbox) -> None:
    for s in services():
        if s.home == sb.lexmem_home:
            os.kill(s.pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while service_running(Paths(sb.lexmem_home)) and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.parametrize("which", ["pinned", "newest"])
def test_claude_has_lexmems_tools_while_the_service_starts(which: str, tmp_path: Path) -> None:
    """No service up when the session starts (one is starting: its lock held, no socket
    yet): the relay answers Claude's opening from the manifest, so the first request
    offers lexmem's tools; the scripted search then waits for the service and finds
    the seeded memory. On 60c5e3c the newest Claude Code's probe waited for the service
    and held back the rest of its opening: no lexmem tool in the session."""
    exe = _cli("claude", which)
    with FakeModel() as model:
        sb = Sandbox(tmp_path, model.url)
        lock = FileLock(Paths(sb.lexmem_home).service_lock, timeout=0)
        asked = threading.Event()

        def release_once_asked() -> None:
            deadline = time.monotonic() + CLI_TIMEOUT
            while not asked.is_set() and not model.main_requests():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            lock.release()  # the service may start now
            held = sb.lexmem_home / "service.lock"
            if held.read_text().split()[:1] == [str(os.getpid())]:
                held.write_text("")  # not this process's pid for the sandbox to stop

        releaser = threading.Thread(target=release_once_asked, daemon=True)
        try:
            (sb.home / ".claude.json").write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n")
            sb.lexmem("install", "claude")
            sb.lexmem("remember", SEEDED, "--project", str(sb.project))
            _stop_services(sb)
            lock.acquire()
            releaser.start()
            model.script(Turn(tool=TOOL, input=SEARCH_INPUT), Turn(text="Use make ship."))
            run = sb.run(_argv("claude", exe, "How do we release the shop?"))
            assert run.returncode == 0
            requests = model.main_requests()
            assert requests, "the session sent no model request"
            offered = requests[0].tool_names
            assert TOOL in offered, f"the first request offers no lexmem tool: {offered}"
            assert len(requests) >= 2, "the model's tool call got no second request"
            outputs = _tool_results(requests[1])
            assert any("make ship" in o for o in outputs), outputs
        finally:
            asked.set()
            if releaser.is_alive() or releaser.ident is not None:
                releaser.join(CLI_TIMEOUT)
            _stop_services(sb)
            sb.close()


class _KillingModel(FakeModel):
    """The fake model, killing the lexmem service (SIGKILL) as the session's second main
    request comes: between the agent's two calls of lexmem's tool."""

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home, self.killed = home, list[int]()

    def _next_turn(self, rec: Recorded) -> Turn:
        if rec.tool_names and len(self.main_requests()) == 2 and not self.killed:
            for s in services():
                if s.home == self.home:
                    os.kill(s.pid, signal.SIGKILL)
                    self.killed.append(s.pid)
        return super()._next_turn(rec)


@pytest.mark.parametrize("which", ["pinned", "newest"])
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_service_killed_mid_session_does_not_end_lexmems_tools(
    agent: str, which: str, tmp_path: Path
) -> None:
    """The relay starts another service and the agent's next call is answered, in the
    same ``lexmem mcp``. On 60c5e3c the relay ended with the service, and the next call
    depended on timing: one that reached the ending relay failed (seen with both Codex
    versions), one made after it had ended went to a ``lexmem mcp`` the agent started
    again. The scripted test in test_relay_opening.py shows the difference for sure."""
    exe = _cli(agent, which)
    root = tmp_path / "sandbox"
    root.mkdir()
    with _KillingModel(root / "lexmem") as model:
        sb = Sandbox(root, model.url)
        assert model.home == sb.lexmem_home
        try:
            if agent == "codex":
                (sb.codex_home / "config.toml").write_text(sb.codex_provider_config())
            else:
                (sb.home / ".claude.json").write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n")
            sb.lexmem("install", agent)
            sb.lexmem("remember", SEEDED, "--project", str(sb.project))
            second = {"query": "the release branch"}
            model.script(Turn(tool=TOOL, input=SEARCH_INPUT), Turn(tool=TOOL, input=second),
                         Turn(text="Use make ship."))  # fmt: skip
            run = sb.run(_argv(agent, exe, "How do we release the shop?"))
            assert run.returncode == 0
            requests = model.main_requests()
            assert model.killed, "no service was running to kill"
            assert len(requests) >= 3, f"{len(requests)} requests: the second call got no answer"
            for n in (1, 2):
                outputs = _tool_results(requests[n])
                assert any("make ship" in o for o in outputs), (n, outputs)
        finally:
            _stop_services(sb)
            sb.close()
