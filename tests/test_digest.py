"""Context digests: what a session starts with, ranked, grouped, capped, kept current.

The end-to-end test drives the real ``lexmem-hook`` with Claude Code's payloads: a
session captures a fact, the service drains it and rewrites the digest, and the next
SessionStart prints it, as the agent would read it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lexmem.api import Lexmem
from lexmem.config import digest_path
from lexmem.locks import FileLock
from lexmem.models import MemoryType
from lexmem.service.client import InboxWriter, remember_through_inbox
from lexmem.service.digest import DigestKeeper, render_digest, write_digest
from lexmem.service.writer import CaptureService

HOOK = Path(sys.executable).with_name("lexmem-hook")
PROJECT = "/work/shop"


def remember(lm: Lexmem, text: str, **kw: Any) -> str:
    return remember_through_inbox(lm, text, **kw).memories[0].id


def test_pinned_first_then_grouped_by_type_one_line_each_with_its_id(lm: Lexmem) -> None:
    fact = remember(
        lm, "The shop uses PostgreSQL 16 for orders", project=PROJECT, mtype=MemoryType.SEMANTIC
    )
    how = remember(
        lm, "To deploy, run 'make build'\nthen 'make deploy'", project=PROJECT,
        mtype=MemoryType.PROCEDURAL, pin=True,
    )  # fmt: skip
    event = remember(lm, "Yesterday the staging deploy failed on a migration", project=PROJECT,
                     mtype=MemoryType.EPISODIC)  # fmt: skip
    remember(lm, "The blog uses Hugo", project="/work/blog")
    text = render_digest(lm, PROJECT)
    lines = text.splitlines()
    assert lines[0] == "# lexmem · shop"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Pinned", "## Facts and decisions", "## Recent events"]
    assert f"- [{how[:8]}] To deploy, run 'make build' then 'make deploy'" in lines
    assert lines.index("## Pinned") < lines.index(
        f"- [{how[:8]}] To deploy, run 'make build' then 'make deploy'"
    )
    assert f"- [{fact[:8]}] The shop uses PostgreSQL 16 for orders" in lines
    assert any(line.startswith(f"- [{event[:8]}]") for line in lines)
    assert "Hugo" not in text  # another project's memory
    assert lm.resolve(how[:8]) == how  # the id shown opens the memory


def test_general_memories_appear_in_every_project_behind_its_own(lm: Lexmem) -> None:
    general = remember(lm, "I prefer tabs over spaces in every language", mtype=MemoryType.SEMANTIC)
    own = remember(
        lm, "The shop formats Python with ruff format", project=PROJECT, mtype=MemoryType.SEMANTIC
    )
    text = render_digest(lm, PROJECT)
    assert text.index(own[:8]) < text.index(general[:8])
    assert general[:8] in render_digest(lm, "/work/other")
    general_only = render_digest(lm, None)
    assert "every project" in general_only and own[:8] not in general_only


def test_repeats_and_archived_memories_are_left_out(lm: Lexmem) -> None:
    a = remember(lm, "Deploys go through make release", project=PROJECT)
    remember(lm, "Deploys go through make release")  # the same text, kept generally
    gone = remember(lm, "The shop used MySQL before 2024", project=PROJECT)
    InboxWriter(lm).archive(gone)
    text = render_digest(lm, PROJECT)
    assert text.count("Deploys go through make release") == 1
    assert a[:8] in text  # the project's own copy outranks the general one
    assert gone[:8] not in text


def test_the_digest_stays_within_its_size_cap_keeping_the_pinned(lm: Lexmem) -> None:
    pinned = remember(
        lm, "Never push to main directly; open a pull request", project=PROJECT, pin=True
    )
    for i in range(120):
        remember(lm, f"Service number {i} listens on port {8000 + i} and logs to /var/log/s{i}.log",
                 project=PROJECT)  # fmt: skip
    for cap in (1024, 2048, 6144):
        text = render_digest(lm, PROJECT, max_bytes=cap)
        assert len(text.encode("utf-8")) <= cap
        assert pinned[:8] in text
        assert text.endswith("\n")
    small, large = (
        render_digest(lm, PROJECT, max_bytes=1024),
        render_digest(lm, PROJECT, max_bytes=6144),
    )
    assert small.count("\n- [") < large.count("\n- [")
    # the setting is the default cap
    lm.settings.context.digest_bytes = 2048
    assert len(render_digest(lm, PROJECT).encode("utf-8")) <= 2048


def test_a_long_memory_shows_its_first_words(lm: Lexmem) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    mid = remember(lm, f"Notes on the release process: {words}", project=PROJECT)
    line = next(x for x in render_digest(lm, PROJECT).splitlines() if mid[:8] in x)
    assert line.endswith("…") and len(line) < 320


def test_more_used_and_reinforced_memories_rank_higher(lm: Lexmem) -> None:
    plain = remember(lm, "The admin panel lives under /admin", project=PROJECT)
    used = remember(lm, "The API rate limit is 100 requests per minute", project=PROJECT)
    for _ in range(5):
        lm.store.record_access(used)
        lm.store.reinforce(used, 0.1)
    text = render_digest(lm, PROJECT)
    assert text.index(used[:8]) < text.index(plain[:8])


def test_files_are_owner_only_and_a_project_with_nothing_left_loses_its_file(lm: Lexmem) -> None:
    mid = remember(lm, "The shop's CDN is CloudFront", project=PROJECT)
    path = write_digest(lm, PROJECT)
    assert path == digest_path(lm.paths, PROJECT)
    assert path is not None and mid[:8] in path.read_text(encoding="utf-8")
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    InboxWriter(lm).forget(mid)
    assert write_digest(lm, PROJECT) is None
    assert not path.exists()


def test_the_service_rewrites_digests_after_changes(lm: Lexmem) -> None:
    path = digest_path(lm.paths, PROJECT)
    a = remember(lm, "Orders are stored in the orders schema", project=PROJECT)
    # remember_through_inbox drained on the spot: the one-shot service wrote the digest
    assert a[:8] in path.read_text(encoding="utf-8")
    InboxWriter(lm).pin(a)  # an op by id marks every project
    assert "## Pinned" in path.read_text(encoding="utf-8")
    InboxWriter(lm).archive(a)
    assert not path.exists()


def test_the_keeper_throttles_and_retries(lm: Lexmem) -> None:
    remember(lm, "The shop runs on Kubernetes", project=PROJECT)
    keeper = DigestKeeper(lm, interval=3600)
    keeper.mark([PROJECT])
    assert keeper.flush() == 1
    keeper.mark([PROJECT])
    assert keeper.flush() == 0 and keeper.pending  # too soon: still stale
    assert keeper.flush(force=True) == 1 and not keeper.pending
    keeper.mark_all()
    assert keeper.flush(force=True) == 1  # no general memories: no general digest
    remember(lm, "I write commit messages in the imperative")
    keeper.mark_all()
    assert keeper.flush(force=True) == 2
    assert digest_path(lm.paths, None).exists()


# -- end to end: capture → digest → SessionStart ----------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "work" / "shop-api"
    (root / ".git").mkdir(parents=True)
    return root.resolve()


def hook(event: str, cwd: Path, **fields: Any) -> subprocess.CompletedProcess[bytes]:
    payload = {
        "session_id": "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9",
        "transcript_path": str(Path.home() / "t.jsonl"),
        "cwd": str(cwd), "hook_event_name": event, **fields,
    }  # fmt: skip
    return subprocess.run(
        [str(HOOK), "claude"], input=json.dumps(payload).encode(), capture_output=True,
        env=os.environ, cwd=cwd, timeout=60, check=False,
    )  # fmt: skip


def test_a_fact_captured_in_one_session_starts_the_next(
    lm: Lexmem, repo: Path, service_up: FileLock
) -> None:
    first = hook("SessionStart", repo, source="startup")
    assert first.returncode == 0 and first.stdout == b""  # nothing known yet
    hook(
        "UserPromptSubmit",
        repo,
        prompt="Remember that we deploy the shop API with `make release` only",
    )
    hook("Stop", repo, last_assistant_message="Noted: deploys go through `make release`.")
    service_up.release()
    with CaptureService(lm) as service:
        report = service.drain()
    assert report.saved >= 1
    service_up.acquire()
    second = hook("SessionStart", repo, source="startup")
    assert second.returncode == 0 and second.stderr == b""
    out = second.stdout.decode("utf-8")
    assert out.startswith("# lexmem · shop-api\n")
    line = next(x for x in out.splitlines() if "make release" in x)
    mid = line.split("]")[0].removeprefix("- [")
    assert lm.get(lm.resolve(mid)).project == str(repo)


def test_a_new_folder_starts_with_the_general_digest(
    lm: Lexmem, tmp_path: Path, service_up: FileLock
) -> None:
    service_up.release()
    remember(lm, "I prefer short commit messages in the imperative")
    service_up.acquire()
    fresh = tmp_path / "elsewhere"
    fresh.mkdir()
    out = hook("SessionStart", fresh, source="startup").stdout.decode("utf-8")
    assert out.startswith("# lexmem · general") and "imperative" in out


def test_lexmem_digest_shows_what_a_session_here_starts_with(lm: Lexmem, repo: Path) -> None:
    cli = [str(Path(sys.executable).with_name("lexmem"))]
    empty = subprocess.run([*cli, "digest"], cwd=repo, capture_output=True, text=True, check=False)
    assert empty.returncode == 0 and "No memories for" in empty.stdout
    mid = remember(lm, "The shop API listens on port 8080", project=str(repo))
    lm.close()
    out = subprocess.run([*cli, "digest"], cwd=repo, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == digest_path(lm.paths, str(repo)).read_text(encoding="utf-8")
    assert f"[{mid[:8]}] The shop API listens on port 8080" in out.stdout
    data = json.loads(
        subprocess.run(
            [*cli, "digest", "--json", "--bytes", "600"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert data["project"] == str(repo) and data["bytes"] <= 600
