"""Opt-out, where the save comes from and what the audit keeps, with real components:
real ``git`` repositories, the ``lexmem`` CLI and ``lexmem-hook`` as subprocesses, the
MCP SDK's client against ``lexmem mcp`` (relayed to a real ``lexmem serve``), and a scan
of the data folder that decodes every LanceDB table version (``tests/diskscan.py``).

- ``lexmem remember`` given inside an opted-out repository (a folder of it, or one of
  its worktrees), with no ``--project``, is refused as ``--project`` into it is: one
  line, exit 2, nothing written. So is MCP ``save_memory`` from a server running there.
- The audit entry of events dropped because their repository was opted out keeps the
  decision and the reason, not where they came from: no session id, project or path,
  in any table version or full-text index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from diskscan import find_markers
from faultkit import environment, lexmem_command
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from test_hook import SESSION, claude_payload, inbox_files, ok, run_hook
from test_mcp import CALL_TIMEOUT, Client, server_env
from test_optout import add_worktree, new_repo, opt_out_by_settings
from test_readers import serving

from lexmem.capture import policy
from lexmem.config import Paths
from lexmem.service.writer import CaptureService

MODULE = [sys.executable, "-m", "lexmem"]
# One token each, as the full-text tokenizer keeps it: found wherever it is on disk.
REPO_NAME = "zqxoptrepo5q"
WORDS = "zqxoptwords7q"


def lexmem(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MODULE, *args], capture_output=True, text=True, env=environment(home), cwd=cwd,
        timeout=300, check=False,
    )  # fmt: skip


def refused(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lexmem: error: not saved: "), lines
    assert "opted out" in lines[0]
    return lines[0]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return new_repo(tmp_path / "work" / REPO_NAME)


@pytest.mark.parametrize("how", ["a marker file", "lexmem optout add"])
def test_remember_inside_an_opted_out_repository_is_refused(
    how: str, repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "lexmem"
    worktree = add_worktree(repo, f"{REPO_NAME}-feature")
    (repo / "src" / "deep").mkdir(parents=True)
    if how == "a marker file":
        (repo / policy.OPTOUT_MARKER).touch()  # not committed: the worktree has none
    else:
        opt_out_by_settings(home, str(repo))
    for cwd in (repo, repo / "src" / "deep", worktree):
        for args in (
            ["remember", f"The VPN is needed {WORDS}"],
            ["remember", "--json", f"The VPN is needed {WORDS}"],
            ["remember", "--project", "", f"A general note {WORDS}"],
            ["remember", "--project", "ops", f"Elsewhere, said from here {WORDS}"],
        ):
            line = refused(lexmem(home, *args, cwd=cwd))
            assert str(cwd) in line, line
    assert inbox_files(home) == []
    # Outside it, remembering works as ever, a general memory included.
    elsewhere = new_repo(tmp_path / "work" / "elsewhere")
    done = lexmem(home, "remember", "--json", "Deploys go out on Tuesdays", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    listed = json.loads(lexmem(home, "list", "--json", cwd=elsewhere).stdout)
    assert [m["content"] for m in listed] == ["Deploys go out on Tuesdays"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def mcp_session(env: dict[str, str], cwd: Path, *, relayed: bool) -> AsyncIterator[ClientSession]:  # fmt: skip
    """An MCP session as an agent starts one in ``cwd``: ``lexmem mcp`` served in its own
    process, or (``relayed``) the console script relaying it to the running service."""
    command = [*lexmem_command(), "mcp"] if relayed else [*MODULE, "mcp"]
    if not relayed:
        env = {**env, "LEXMEM_NO_SERVICE": "1"}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(cwd))
    with open(cwd.parent / "server.stderr", "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(CALL_TIMEOUT):
                await session.initialize()
            yield session


@pytest.mark.anyio
async def test_save_memory_from_a_server_in_an_opted_out_repository_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "lexmem"
    (repo / policy.OPTOUT_MARKER).touch()
    (repo / "src").mkdir()
    elsewhere = new_repo(tmp_path / "work" / "elsewhere")
    env = server_env(home, tmp_path / "userhome")
    done = lexmem(home, "remember", "Deploys go out on Tuesdays", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    for relayed in (False, True):  # in its own process, and relayed to a running service
        with serving(home) if relayed else open(os.devnull):
            async with mcp_session(env, repo / "src", relayed=relayed) as session:
                c = Client(session, home, repo)
                for arguments in ({}, {"project": ""}, {"project": "ops"}):
                    message = await c.error("save_memory", text=f"Use tabs {WORDS}", **arguments)
                    assert "not saved" in message and "opted out" in message, message
    assert inbox_files(home) == []
    listed = json.loads(lexmem(home, "list", "--json", cwd=elsewhere).stdout)
    assert [m["content"] for m in listed] == ["Deploys go out on Tuesdays"]


def test_the_audit_of_opted_out_events_keeps_no_session_project_or_path(
    repo: Path, service: CaptureService, data_home: Path
) -> None:
    """Events queued in a repository, which is opted out before they are drained."""
    elsewhere = new_repo(data_home.parent / "work" / "elsewhere")
    sends = [
        claude_payload("SessionStart", repo, source="startup"),
        claude_payload("UserPromptSubmit", repo, prompt=f"We decided to use PostgreSQL 16 {WORDS}"),
        claude_payload(
            "PostToolUse", repo, tool_name="Read",
            tool_input={"file_path": str(repo / "README.md")}, tool_response={"file": {"content": "x"}},
        ),
        claude_payload("SessionEnd", repo, reason="prompt_input_exit"),
        # An agent elsewhere reading a file of the repository: dropped too.
        claude_payload("PreToolUse", elsewhere, tool_name="Read",
                       tool_input={"file_path": str(repo / "config" / "prod.env")}),
    ]  # fmt: skip
    for payload in sends:
        ok(run_hook("claude", payload=payload, cwd=Path(payload["cwd"])), b"")
    assert len(inbox_files(data_home)) == len(sends)
    (repo / policy.OPTOUT_MARKER).touch()
    report = service.drain()
    assert report.skipped == len(sends) and inbox_files(data_home) == []
    rows: list[dict[str, Any]] = [e.to_dict() for e in service.lm.audit_entries(limit=1000)]
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["decision"], row["reason"], row["metadata"]) == (
        "skipped", "opted out", {"events": len(sends)},
    )  # fmt: skip
    service.lm.store.optimize(build_vector_index=False)  # the indices brought up to date
    markers = [SESSION, SESSION.rsplit("-", 1)[-1], REPO_NAME, WORDS]
    assert find_markers(Paths(data_home).home, markers) == []
    assert row["session_id"] is None and row["project"] is None
    assert not row["text"] and not row["title"]
