"""Opt-out holds everywhere (issue 15, part 4), with real components: real ``git``
repositories and worktrees in temporary folders, the ``lexmem-hook`` and ``lexmem``
console scripts as subprocesses, the real service and model, and ``lexmem mcp`` driven
by the MCP SDK's client.

- A linked worktree is its main repository: the main repository's opt-out (settings, or
  a marker file committed or not) holds in it; a submodule keeps its own root.
- The service asks again at drain time: what was queued (or taken in) before an opt-out
  leaves nothing.
- A tool call on a file inside an opted-out repository is dropped, wherever the agent works.
- Saving into an opted-out repository is refused with one line, and writes nothing.
- Nothing of an opted-out repository is served to agents; the person still sees it all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_hook import (
    MARKER,
    SESSION,
    assert_no_trace,
    assistant_line,
    claude_payload,
    every_event_payload,
    inbox_events,
    inbox_files,
    log_lines,
    ok,
    run_hook,
    text,
    write_transcript,
)
from test_mcp import Client, serve, server_env

from lexmem import config
from lexmem.api import Lexmem
from lexmem.capture import policy
from lexmem.capture.inbox import Inbox, make_event
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.errors import InvalidInputError
from lexmem.locks import FileLock
from lexmem.models import utcnow
from lexmem.service.digest import DigestKeeper
from lexmem.service.writer import CaptureService
from lexmem.settings import CaptureSettings, Settings, save_settings

LEXMEM = Path(sys.executable).with_name("lexmem")
# What a session in the repository says: enough for the extractor to keep memories.
DECISION = f"We decided to use PostgreSQL 16 for the orders database, not MySQL. {MARKER}"
ANSWER = (
    "Fixed: the orders migration failed because the sequence was owned by another role; "
    f"granting USAGE on the sequence to the app role fixed it. {MARKER}"
)


# -- real git -------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    # The test's HOME has no git identity; a commit needs one.
    subprocess.run(
        ["git", "-c", "user.name=lexmem tests", "-c", "user.email=tests@lexmem.invalid", *args],
        cwd=cwd, check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def new_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=root)
    (root / "README.md").write_text(f"{root.name}\n", encoding="utf-8")
    git("add", "README.md", cwd=root)
    git("commit", "-q", "-m", "start", cwd=root)
    return root.resolve()


def add_worktree(repo: Path, name: str) -> Path:
    """``git worktree add`` beside the repository, on a new branch."""
    path = repo.parent / name
    git("worktree", "add", "-q", "-b", name, str(path), cwd=repo)
    assert (path / ".git").is_file()  # a linked worktree: its .git is a file
    return path.resolve()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real repository with one commit."""
    return new_repo(tmp_path / "work" / "shop")


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """Another repository, never opted out: where the agent works in some tests."""
    return new_repo(tmp_path / "work" / "elsewhere")


def lexmem(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The ``lexmem`` console script, as a person's shell runs it."""
    return subprocess.run(
        [str(LEXMEM), *args], capture_output=True, text=True, env=os.environ, cwd=cwd,
        timeout=120, check=False,
    )  # fmt: skip


def opt_out_by_settings(data_home: Path, *folders: str) -> None:
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(optout=list(folders))))


def audit_rows(lm: Lexmem) -> list[dict[str, Any]]:
    return [e.to_dict() for e in lm.audit_entries(limit=10_000)]


# -- 1. worktrees map to their main repository ------------------------------------------------


def test_a_worktree_maps_to_its_main_repository_and_a_submodule_keeps_its_own(
    repo: Path, tmp_path: Path, data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worktree = add_worktree(repo, "shop-feature")
    (worktree / "src" / "api").mkdir(parents=True)
    lib = new_repo(tmp_path / "work" / "lib")
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib",
        cwd=repo)  # fmt: skip
    assert (repo / "vendor" / "lib" / ".git").is_file()  # a submodule's .git is a file too

    def no_git(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the hook must not run git: it runs on every agent event")

    with monkeypatch.context() as mp:
        mp.setattr(subprocess, "Popen", no_git)
        assert policy.project_root(str(worktree)) == str(repo)
        assert policy.project_root(str(worktree / "src" / "api")) == str(repo)
        assert policy.project_root(str(repo)) == str(repo)
        assert policy.project_root(str(repo / "vendor" / "lib")) == str(repo / "vendor" / "lib")
    # A worktree whose main repository is gone stands alone rather than failing.
    lonely = add_worktree(lib, "lib-feature")
    (lonely / ".git").write_text("gitdir: /nonexistent/.git/worktrees/lib-feature\n")
    assert policy.project_root(str(lonely)) == str(lonely)

    # The hook, as the agent runs it, files a worktree's events under the main repository.
    prompt = claude_payload("UserPromptSubmit", worktree / "src", prompt="Why is CI red?")
    ok(run_hook("claude", payload=prompt, cwd=worktree / "src"))
    assert [(e["project"], e["cwd"]) for e in inbox_events(data_home)] == [
        (str(repo), str(worktree / "src"))
    ]


def test_the_main_repositorys_opt_out_holds_in_every_worktree(
    repo: Path, data_home: Path, tmp_path: Path, service_up: FileLock
) -> None:
    transcript = write_transcript(tmp_path / "t.jsonl", [assistant_line("m", text(MARKER))])
    # A digest of the repository from before: a session starting in a worktree shows none.
    for project in (str(repo), None):
        digest = config.digest_path(Paths(data_home), project)
        digest.parent.mkdir(parents=True, exist_ok=True)
        digest.write_text("# lexmem · shop\n- [0b7d4411] a memory from before\n")

    def every_event_leaves_no_trace(cwd: Path) -> None:
        for argv, payload in every_event_payload(cwd, transcript):
            ok(run_hook(*argv, payload=payload, cwd=cwd))  # SessionStart prints nothing either
        assert_no_trace(data_home, repo)
        assert log_lines(data_home) == []

    # By the settings: the main repository's root is listed; the agent is in a worktree.
    worktree = add_worktree(repo, "shop-feature")
    (worktree / "src").mkdir()
    opt_out_by_settings(data_home, str(repo))
    every_event_leaves_no_trace(worktree / "src")
    (Paths(data_home).settings).unlink()

    # By a marker that is only in the main checkout's working tree (never committed).
    (repo / policy.OPTOUT_MARKER).touch()
    assert not (worktree / policy.OPTOUT_MARKER).exists()
    every_event_leaves_no_trace(worktree)
    # Committed: a worktree made afterwards has the marker checked out as well.
    git("add", policy.OPTOUT_MARKER, cwd=repo)
    git("commit", "-q", "-m", "opt out of lexmem", cwd=repo)
    every_event_leaves_no_trace(add_worktree(repo, "shop-later"))
    git("rm", "-q", policy.OPTOUT_MARKER, cwd=repo)
    git("commit", "-q", "-m", "opt in again", cwd=repo)
    # A marker in the worktree alone opts out that worktree.
    (worktree / policy.OPTOUT_MARKER).touch()
    every_event_leaves_no_trace(worktree / "src")
    (worktree / policy.OPTOUT_MARKER).unlink()

    # Opted in again: the worktree is captured, as the main repository.
    ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", worktree, prompt="hi")))
    assert [e["project"] for e in inbox_events(data_home)] == [str(repo)]


# -- 2. the service asks again at drain time -------------------------------------------------


def queue_a_session(repo: Path, data_home: Path, cwd: Path | None = None) -> int:
    """A whole agent session in ``repo`` (or a folder of it), written by the real hook,
    and a ``remember --project`` event: all queued, none drained."""
    where = cwd or repo
    sends = [
        claude_payload("SessionStart", where, source="startup"),
        claude_payload("UserPromptSubmit", where, prompt=DECISION),
        claude_payload(
            "PostToolUse", where, tool_name="Bash", tool_input={"command": "psql -c 'select 1'"},
            tool_response={"stdout": f"ERROR: permission denied for sequence {MARKER}"},
        ),
        claude_payload("Stop", where, stop_hook_active=False, last_assistant_message=ANSWER),
        claude_payload("SessionEnd", where, reason="prompt_input_exit"),
    ]  # fmt: skip
    for payload in sends:
        ok(run_hook("claude", payload=payload, cwd=where), b"")
    explicit = make_event(
        "explicit", f"Orders deploys need the VPN {MARKER}", session_id="cli-explicit",
        agent="cli", project=str(repo), metadata={"pin": False},
    )  # fmt: skip
    Inbox(Paths(data_home).inbox).write(explicit)
    queued = len(inbox_files(data_home))
    assert queued == len(sends) + 1
    return queued


def assert_nothing_kept(service: CaptureService, data_home: Path, repo: Path) -> None:
    lm = service.lm
    lm.refresh()
    assert inbox_files(data_home) == []
    assert lm.count() == 0
    assert service.journal.buffered_sessions() == []
    assert service.journal.sessions(limit=1000) == []
    rows = audit_rows(lm)
    assert rows, "the audit says that something was dropped"
    for row in rows:
        assert row["reason"] == "opted out" and row["decision"] == "skipped", row
        assert not row["text"] and not row["title"] and not row["project"], row
        assert MARKER not in json.dumps(row)
    digests = Paths(data_home).digests
    for file in digests.glob("*.md") if digests.exists() else []:
        assert MARKER not in file.read_text(encoding="utf-8")


@pytest.mark.parametrize("how", ["lexmem optout add", "a marker file", "a worktree's main repo"])
def test_events_queued_before_an_opt_out_leave_nothing(
    how: str, repo: Path, service: CaptureService, data_home: Path
) -> None:
    cwd = add_worktree(repo, "shop-feature") if how == "a worktree's main repo" else repo
    queue_a_session(repo, data_home, cwd)
    if how == "lexmem optout add":
        # Another process changes the settings; the service started before it.
        done = lexmem("optout", "add", str(repo))
        assert done.returncode == 0, done.stderr
    else:
        (repo / policy.OPTOUT_MARKER).touch()  # never committed: the worktree has none
    service.drain()
    assert_nothing_kept(service, data_home, repo)


def test_events_taken_in_before_an_opt_out_are_let_go_unread(
    repo: Path, service: CaptureService, data_home: Path
) -> None:
    """Events drained into the window buffer, their session not over yet: the window is
    let go unread when the session is abandoned after the opt-out."""
    for prompt in (
        f"Remember: the orders database runs on port 5433 in staging. {MARKER}",
        DECISION,
    ):
        ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", repo, prompt=prompt)))
    service.drain()
    assert len(service.journal.buffered(SESSION)) == 2  # waiting for the window to close
    (repo / policy.OPTOUT_MARKER).touch()
    service.abandon_idle(now=utcnow() + timedelta(days=1))
    service.lm.refresh()
    assert service.lm.count() == 0
    assert service.journal.buffered_sessions() == []
    for row in audit_rows(service.lm):
        assert row["reason"] == "opted out" and not row["text"] and not row["title"], row


# -- 3. tool calls on files inside an opted-out repository -------------------------------------


def tool_payloads(cwd: Path, target: Path, relative: str) -> list[dict[str, Any]]:
    """Every tool that names a path, pointed at ``target`` (a folder of the opted-out repo)."""
    file = target / "prod.env"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("Read", {"file_path": str(file)}),
        ("Read", {"file_path": relative}),  # relative to where the agent works
        ("Edit", {"file_path": str(file), "old_string": "x", "new_string": MARKER}),
        ("Write", {"file_path": str(target / "new.py"), "content": MARKER}),
        ("Grep", {"pattern": "password", "path": str(target), "output_mode": "content"}),
        ("Glob", {"pattern": "**/*.env", "path": str(target)}),
        ("NotebookEdit", {"notebook_path": str(target / "nb.ipynb"), "new_source": MARKER}),
        ("Bash", {"command": f"cat {file} | head -5"}),
    ]
    out = []
    for tool, tool_input in calls:
        fields = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1"}
        out.append(claude_payload("PreToolUse", cwd, **fields))
        out.append(claude_payload("PostToolUse", cwd, **fields,
                                  tool_response={"file": {"content": f"DB_HOST=db {MARKER}"}}))  # fmt: skip
    return out


def test_a_tool_call_on_a_file_inside_an_opted_out_repository_is_dropped_by_the_hook(
    repo: Path, elsewhere: Path, data_home: Path, service_up: FileLock
) -> None:
    worktree = add_worktree(repo, "shop-feature")
    opt_out_by_settings(data_home, str(repo))
    for target, relative in (
        (repo / "config", "../shop/config/prod.env"),
        (worktree / "config", "../shop-feature/config/prod.env"),  # the repository's worktree
    ):
        for payload in tool_payloads(elsewhere, target, relative):
            ok(run_hook("claude", payload=payload, cwd=elsewhere))
    assert_no_trace(data_home, repo)
    # The agent's own files are captured as ever.
    own = {"tool_name": "Read", "tool_input": {"file_path": str(elsewhere / "README.md")}}
    ok(run_hook("claude", payload=claude_payload("PreToolUse", elsewhere, **own), cwd=elsewhere))
    assert [e["content"] for e in inbox_events(data_home)] == [f"Read: {elsewhere / 'README.md'}"]


def test_a_tool_call_queued_before_its_repository_was_opted_out_is_dropped_at_drain_time(
    repo: Path, elsewhere: Path, service: CaptureService, data_home: Path
) -> None:
    for payload in tool_payloads(elsewhere, repo / "config", "../shop/config/prod.env"):
        ok(run_hook("claude", payload=payload, cwd=elsewhere))
    own = {"tool_name": "Read", "tool_input": {"file_path": str(elsewhere / "README.md")},
           "tool_response": {"file": {"content": "elsewhere"}}}  # fmt: skip
    ok(run_hook("claude", payload=claude_payload("PostToolUse", elsewhere, **own), cwd=elsewhere))
    (repo / policy.OPTOUT_MARKER).touch()
    report = service.drain()
    assert inbox_files(data_home) == []
    assert report.events == 1 and report.skipped == 16
    buffered = service.journal.buffered(SESSION)
    assert [e["metadata"]["tool_input"]["file_path"] for e in buffered] == [
        str(elsewhere / "README.md")
    ]
    assert MARKER not in json.dumps(buffered)
    rows = [r for r in audit_rows(service.lm) if r["reason"] == "opted out"]
    assert len(rows) == 1 and rows[0]["metadata"] == {"events": 16}
    assert MARKER not in json.dumps(rows)


# -- 4. saving into an opted-out repository is refused -----------------------------------------


def test_remember_into_an_opted_out_repository_is_refused_and_writes_nothing(
    repo: Path, data_home: Path, lm: Lexmem
) -> None:
    named = "payroll"  # a named project can be opted out too
    opt_out_by_settings(data_home, named)
    (repo / policy.OPTOUT_MARKER).touch()
    for project, cwd in ((str(repo), None), (named, None), (".", repo)):
        done = lexmem("remember", "--project", project, f"The VPN is needed {MARKER}", cwd=cwd)
        assert done.returncode == 2, (project, done.stdout, done.stderr)
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("lexmem: error: not saved: "), lines
        assert "opted out" in lines[0]
    with pytest.raises(InvalidInputError, match="opted out"):
        lm.remember(f"The VPN is needed {MARKER}", project=str(repo))
    with pytest.raises(InvalidInputError, match="opted out"):
        lm.remember(f"The VPN is needed {MARKER}", project=named)
    assert inbox_files(data_home) == []
    lm.refresh()
    assert lm.count() == 0
    # Elsewhere, remembering works as ever.
    assert lm.remember("Deploys go out on Tuesdays", project="ops").memories


# -- 5. nothing of an opted-out repository is served to agents ---------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def read_resource_text(result: Any) -> str:
    return str(result.contents[0].text)


@pytest.mark.anyio
async def test_nothing_of_an_opted_out_repository_is_served_to_agents(
    repo: Path, elsewhere: Path, tmp_path: Path, data_home: Path, embedder: Embedder
) -> None:
    worktree = add_worktree(repo, "shop-feature")
    lm = Lexmem.open(data_home, embedder=embedder)
    try:
        # Captured before the opt-out: in the repository, and (by an older lexmem that
        # filed worktrees apart) under the worktree's own path.
        hidden = [
            lm.remember(f"The orders service uses PostgreSQL 16 {MARKER}", project=str(repo),
                        pin=True).memories[0].id,
            lm.remember(f"The orders PostgreSQL runs on port 5433 {MARKER}",
                        project=str(worktree)).memories[0].id,
        ]  # fmt: skip
        shown = [
            lm.remember("The billing service uses PostgreSQL 15", project=str(elsewhere))
            .memories[0]
            .id,
            lm.remember("I prefer PostgreSQL over MySQL for new services").memories[0].id,
        ]
        keeper = DigestKeeper(lm)
        keeper.mark_all()
        keeper.flush(force=True)
        assert MARKER in config.digest_path(lm.paths, str(repo)).read_text(encoding="utf-8")

        (repo / policy.OPTOUT_MARKER).touch()  # not committed: the worktree has no marker

        # SessionStart in the repository or its worktree prints no digest, not even the
        # one written before the opt-out.
        for cwd in (repo, worktree):
            start = claude_payload("SessionStart", cwd, source="startup")
            with FileLock(lm.paths.service_lock, timeout=0):  # no service is spawned
                ok(run_hook("claude", payload=start, cwd=cwd), b"")
        # The service's next pass over the digests: none for the repository; the general
        # and the other projects' digests never held its memories.
        keeper.mark_all()
        keeper.flush(force=True)
        assert not config.digest_path(lm.paths, str(repo)).exists()
        for file in lm.paths.digests.glob("*.md"):
            assert MARKER not in file.read_text(encoding="utf-8")
        # The person still sees their data until they purge it.
        assert {m.id for m in lm.list_memories()} == {*hidden, *shown}
    finally:
        lm.close()

    env = server_env(data_home, tmp_path / "userhome")
    async with serve(env, elsewhere) as session:
        c = Client(session, data_home, elsewhere)
        found = await c.search_ids("PostgreSQL orders service port", limit=20)
        assert set(found) == set(shown)
        assert await c.search_ids("PostgreSQL", project=str(repo)) == []
        recent = await c.call("recent_memories", limit=100)
        assert {m["id"] for m in recent["memories"]} == set(shown)
        line = await c.call("timeline", before=50)
        assert {m["id"] for m in line["memories"]} == set(shown)
        for tool, arguments in (
            ("get_memory", {"ids": hidden[0]}),
            ("get_memory", {"ids": [shown[0], hidden[1]]}),
            ("timeline", {"anchor": hidden[0][:8]}),
            ("confirm_memory", {"memory_id": hidden[0]}),
            ("correct_memory", {"memory_id": hidden[1], "corrected_text": "port 5434"}),
        ):
            assert "no memory with id" in await c.error(tool, **arguments), tool
        for uri in (f"lexmem://digest/{repo}", f"lexmem://digest/{worktree}"):
            served = read_resource_text(await session.read_resource(uri))
            assert MARKER not in served and "opted out" in served
        # A save into it is refused, and nothing is written.
        refused = await c.error("save_memory", text=f"Orders use UUIDs {MARKER}", project=str(repo))
        assert "not saved" in refused and "opted out" in refused
        assert inbox_files(data_home) == []

    async with serve(env, worktree) as session:
        c = Client(session, data_home, worktree)
        served = read_resource_text(await session.read_resource("lexmem://digest"))
        assert MARKER not in served and "opted out" in served
        # A server running in the opted-out repository saves nothing, general included.
        for project in (None, ""):
            arguments = {} if project is None else {"project": project}
            message = await c.error("save_memory", text=f"Use tabs {MARKER}", **arguments)
            assert "opted out" in message
    assert inbox_files(data_home) == []
    lm = Lexmem.open(data_home, embedder=embedder)
    try:
        assert lm.count() == 4
    finally:
        lm.close()
