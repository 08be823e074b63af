"""Claude Code's SessionStart command: the digest printed by the shell with no Python
process for the agent to wait on, wherever that gives what ``lexmem-hook claude`` would
print, and ``lexmem-hook claude`` everywhere else.

Each test runs the command ``lexmem install claude`` writes, with ``/bin/sh -c`` in the
session's folder and the event's payload on stdin, as Claude Code runs it, against a
data folder whose digests a real core wrote. The hook is reached through a recorder
that notes how it was called (``claude --no-digest --background`` in the background: the shell
printed the digest; ``claude``: the hook decided) and then runs the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lexmem.agents import integrations
from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox
from lexmem.capture.policy import OPTOUT_MARKER
from lexmem.cli import cli
from lexmem.config import DIGEST_LINKS, digest_link, digest_path
from lexmem.locks import FileLock
from lexmem.service.client import remember_through_inbox
from lexmem.service.digest import DigestKeeper, write_digest

pytestmark = pytest.mark.skipif(os.name == "nt", reason="a POSIX shell's command")

HOOK = Path(sys.executable).with_name("lexmem-hook")
SLOW = 60.0  # a ceiling for a busy machine, not a measurement


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "work" / "shop-api"
    (root / ".git").mkdir(parents=True)
    return root.resolve()


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``lexmem-hook`` that writes down its arguments, then runs the real one."""
    calls = tmp_path / "calls.txt"
    script = tmp_path / "bin" / "lexmem-hook"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {HOOK} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setattr(integrations, "_hook_command", lambda adapter: f"{script} {adapter}")
    return calls


@pytest.fixture
def lock(lm: Lexmem) -> Iterator[FileLock]:
    """The service's lock, held once the test's memories are in (``hold``): a running
    service, so the hook starts none."""
    held = FileLock(lm.paths.service_lock, timeout=0)
    yield held
    if held.held:
        held.release()


def start(lm: Lexmem, cwd: Path, lock: FileLock, **env: str) -> tuple[str, float, float]:
    """Run the SessionStart command as Claude Code does, with a service running; what it
    printed, and the times before it was started and once it was done."""
    if not lock.held:
        lock.acquire()
    command = integrations.session_start_command(lm.paths.home)
    payload = {"session_id": "5e55-10n", "transcript_path": "", "cwd": str(cwd),
               "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip
    before = time.time()
    out, after = run_shell(command, payload, cwd, {**os.environ, **env})
    return out.decode("utf-8"), before, after


def run_shell(
    command: str, payload: dict[str, Any], cwd: Path, env: dict[str, str]
) -> tuple[bytes, float]:
    """``/bin/sh -c COMMAND`` as Claude Code runs it; its output, and the time it was
    done. What it left running in the background (with the test's service lock held, so
    it starts no service) is waited for, so that no hook outlives the test."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command], cwd=cwd, env=env, start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = proc.communicate(json.dumps(payload).encode(), timeout=SLOW)
    after = time.time()
    assert proc.returncode == 0 and err == b"", err
    deadline = time.monotonic() + SLOW
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    return out, after


def how_called(calls: Path) -> list[str]:
    deadline = time.monotonic() + SLOW
    while time.monotonic() < deadline:  # the background hook writes down its call first
        if calls.exists() and calls.read_text().strip():
            break
        time.sleep(0.02)
    return calls.read_text().split("\n")[:-1] if calls.exists() else []


def written_events(lm: Lexmem) -> list[dict[str, Any]]:
    deadline = time.monotonic() + SLOW
    while time.monotonic() < deadline:  # the background hook's event, once it is written
        found = [json.loads(p.read_text()) for p in Inbox(lm.paths.inbox).pending()]
        if found:
            return found
        time.sleep(0.05)
    return []


def remember(lm: Lexmem, text: str, project: str) -> str:
    return remember_through_inbox(lm, text, project=project).memories[0].id


def test_the_shell_prints_the_digest_and_the_hook_records_the_event_in_the_background(
    lm: Lexmem, repo: Path, recorder: Path, lock: FileLock
) -> None:
    mid = remember(lm, "The shop API is deployed with make release", str(repo))
    link = digest_link(lm.paths, str(repo))
    assert link is not None and link.is_symlink()
    assert link.resolve() == digest_path(lm.paths, str(repo)).resolve()
    out, before, after = start(lm, repo, lock)
    assert out == digest_path(lm.paths, str(repo)).read_text(encoding="utf-8")
    assert f"[{mid[:8]}]" in out
    assert how_called(recorder) == ["claude --no-digest --background"]
    (event,) = written_events(lm)
    assert event["event_type"] == "session_start" and event["session_id"] == "5e55-10n"
    # Stamped when the agent started it (before the shell was done), not when Python got
    # going in the background, after it.
    stamp = datetime.fromisoformat(event["timestamp"]).timestamp()
    assert before - 0.05 <= stamp <= after


def test_what_the_shell_cannot_decide_goes_to_the_hook_which_prints_what_it_always_did(
    lm: Lexmem, repo: Path, recorder: Path, tmp_path: Path, lock: FileLock
) -> None:
    remember(lm, "The shop API is deployed with make release", str(repo))
    expected = digest_path(lm.paths, str(repo)).read_text(encoding="utf-8")
    # A subfolder of the repository: its project is the repository's.
    sub = repo / "src"
    sub.mkdir()
    assert start(lm, sub, lock)[0] == expected
    # The settings changed after the digest was written (an opt-out may be in them).
    time.sleep(0.01)
    lm.paths.settings.write_text(f'[capture]\noptout = ["{repo}"]\n', encoding="utf-8")
    assert start(lm, repo, lock)[0] == ""
    lm.paths.settings.unlink()
    # A marker in the repository, or in a folder above it.
    (repo / OPTOUT_MARKER).write_text("")
    assert start(lm, repo, lock)[0] == ""
    (repo / OPTOUT_MARKER).unlink()
    (repo.parent / OPTOUT_MARKER).write_text("")
    assert start(lm, repo, lock)[0] == ""
    (repo.parent / OPTOUT_MARKER).unlink()
    # A folder with no digest of its own yet starts with the general one (none here).
    fresh = tmp_path / "elsewhere"
    fresh.mkdir()
    assert start(lm, fresh, lock)[0] == ""
    # Another data folder for this agent (LEXMEM_HOME wins over the one installed for).
    other = tmp_path / "other-home"
    other.mkdir(mode=0o700)
    theirs = FileLock(other / "service.lock", timeout=0)  # a service there too: none started
    theirs.acquire()
    try:
        assert start(lm, repo, lock, LEXMEM_HOME=str(other))[0] == ""
    finally:
        theirs.release()
    assert how_called(recorder) == ["claude"] * 6


def test_a_linked_worktree_gets_its_main_repositorys_digest_through_the_hook(
    lm: Lexmem, tmp_path: Path, recorder: Path, lock: FileLock
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed for a worktree")
    main = tmp_path / "shop"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"],
                   check=True, env=env)  # fmt: skip
    tree = tmp_path / "shop-feature"
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tree)], check=True)
    main = main.resolve()
    remember(lm, "Feature branches are merged by squash", str(main))
    # A project of the worktree's own folder, remembered by hand, is not its project.
    remember(lm, "Not the worktree's digest", str(tree.resolve()))
    out = start(lm, tree.resolve(), lock)[0]
    assert "merged by squash" in out and "Not the worktree's" not in out
    assert how_called(recorder) == ["claude"]


def test_a_project_that_loses_its_digest_leaves_no_folder_name_behind(
    lm: Lexmem, repo: Path
) -> None:
    mid = remember(lm, "The shop API listens on port 8080", str(repo))
    index = lm.paths.digests / DIGEST_LINKS
    assert any(index.rglob("*"))
    lm.forget(mid)
    assert write_digest(lm, str(repo)) is None
    assert list(index.rglob("*")) == []
    # A link whose digest went another way is pruned with the rest.
    remember(lm, "The shop API listens on port 8081", str(repo))
    digest_path(lm.paths, str(repo)).unlink()
    keeper = DigestKeeper(lm)
    keeper.mark_all()
    keeper.flush(force=True)  # rewrites it: the link is good again
    assert digest_link(lm.paths, str(repo)).exists()  # type: ignore[union-attr]
    digest_path(lm.paths, str(repo)).unlink()
    DigestKeeper._prune_links(index)
    assert list(index.rglob("*")) == []


def test_install_writes_it_and_uninstall_takes_it_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(integrations, "claude_version", lambda: (2, 1, 337))
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    assert CliRunner().invoke(cli, ["install", "claude"]).exit_code == 0
    data = json.loads(settings.read_text())
    (group,) = data["hooks"]["SessionStart"]
    (handler,) = group["hooks"]
    assert handler["type"] == "command" and "async" not in handler
    assert handler["command"].startswith(integrations.SESSION_START_MARK)
    assert CliRunner().invoke(cli, ["install", "claude"]).exit_code == 0  # again: the same
    assert json.loads(settings.read_text()) == data
    assert CliRunner().invoke(cli, ["uninstall", "claude"]).exit_code == 0
    after = json.loads(settings.read_text()) if settings.exists() else {}
    assert "SessionStart" not in after.get("hooks", {})


def test_a_background_command_records_the_event_and_the_agent_waits_for_the_shell_only(
    lm: Lexmem, repo: Path, lock: FileLock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code before 2.1.332 gives an async SessionEnd hook no payload: its command
    starts the hook in the background instead (with the payload), and returns."""
    lock.acquire()
    command = integrations.background_command("claude")
    payload = {"session_id": "5e55-10n", "transcript_path": "", "cwd": str(repo),
               "hook_event_name": "SessionEnd", "reason": "other"}  # fmt: skip
    out, _ = run_shell(command, payload, repo, dict(os.environ))
    assert out == b""
    (event,) = written_events(lm)
    assert event["event_type"] == "session_end" and event["session_id"] == "5e55-10n"


@pytest.mark.parametrize("version", [(2, 1, 197), (2, 1, 337), None])
def test_session_end_is_never_waited_for(
    version: tuple[int, ...] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(integrations, "claude_version", lambda: version)
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    assert CliRunner().invoke(cli, ["install", "claude"]).exit_code == 0
    (group,) = json.loads(settings.read_text())["hooks"]["SessionEnd"]
    (handler,) = group["hooks"]
    if version is not None and version >= (2, 1, 332):
        assert handler["async"] is True and "lexmem-hook" in handler["command"]
    else:  # an async one gets no payload before 2.1.332
        assert "async" not in handler
        assert handler["command"].startswith(integrations.BACKGROUND_MARK)
    assert CliRunner().invoke(cli, ["uninstall", "claude"]).exit_code == 0
    after = json.loads(settings.read_text()) if settings.exists() else {}
    assert "SessionEnd" not in after.get("hooks", {})
