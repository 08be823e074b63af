"""tools/demo_data.py, the data behind ``./dev screenshots``: what it promises is there.

It runs as a person would run it, in a subprocess (it points HOME and the keyring at its
own folders, so it must not run inside the test process), with few notes and two sessions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from lexmem.api import Lexmem, MemoryFilter
from lexmem.models import MemorySource, MemoryStatus

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "demo_data.py"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    base = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(TOOL), str(base), "--memories", "60", "--sessions", "2"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return base / "lexmem", base / "home" / "dana", done.stdout


@pytest.fixture
def core(demo: tuple[Path, Path, str]) -> Iterator[Lexmem]:
    lm = Lexmem.open(demo[0])
    yield lm
    lm.close()


def test_it_says_what_it_made_in_one_line(demo: tuple[Path, Path, str]) -> None:
    data, home, out = demo
    assert out.count("\n") == 1
    assert "active memories" in out and f"LEXMEM_HOME={data}" in out and f"HOME={home}" in out


def test_one_project_is_named_both_ways_among_many(
    demo: tuple[Path, Path, str], core: Lexmem
) -> None:
    home = demo[1]
    projects = core.projects()
    assert "shop" in projects and str(home / "work" / "shop") in projects
    assert "novel" in projects
    assert len(projects) >= 8
    assert (home / "work" / "shop" / ".git").is_dir()
    # The watched Markdown folder was read as the watcher reads it.
    assert str(home / "notes") in core.settings.capture.watch
    assert core.count(MemoryFilter(source=MemorySource.MARKDOWN_CHUNK)) >= 4


def test_the_sessions_went_through_the_hook_with_their_events(core: Lexmem) -> None:
    sessions = core.sessions()
    assert len(sessions) == 2
    assert all(s.agent == "claude" and s.event_count >= 10 for s in sessions)
    assert all(s.status == "completed" for s in sessions)
    # What the agents were told became memories: the fix, a correction, a preference.
    kinds = Counter(a.kind for s in sessions for a in core.audit_entries(session_id=s.id))
    assert kinds["fix"] == 1 and kinds["correction"] >= 1 and kinds["preference"] >= 1


def test_a_supersede_chain_links_pins_and_archived_memories(core: Lexmem) -> None:
    superseded = core.list_ids(MemoryFilter(status=MemoryStatus.SUPERSEDED))
    chain = [m for m in core.memories_for(superseded) if "staging database" in m.content]
    assert len(chain) == 2
    newest = {m.superseded_by or "" for m in chain} - {m.id for m in chain}
    assert len(newest) == 1
    detail = core.detail(newest.pop())
    assert "6543" in detail.memory.content
    assert len(detail.older) == 2
    assert "relates_to" in {lk.link_type for lk in detail.links_to + detail.links_from}
    assert core.status_counts()["archived"] >= 2
    assert core.count(MemoryFilter(pinned=True)) >= 4
    assert any(len(m.title) > 120 for m in core.memories_for(core.list_ids()))


def test_the_audit_log_holds_several_decisions(core: Lexmem) -> None:
    decisions = Counter(a.decision for a in core.audit_entries(limit=10_000))
    assert decisions["saved"] >= 5
    assert decisions["skipped"] >= 1
    assert decisions["quarantined"] == 1
    rules = {a.rule for a in core.audit_entries(limit=10_000)}
    assert "configuration-change" in rules


def test_it_refuses_a_folder_already_used(demo: tuple[Path, Path, str]) -> None:
    base = demo[0].parent
    done = subprocess.run(
        [sys.executable, str(TOOL), str(base), "--memories", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "not empty" in done.stderr
