"""The capture journal on the real store: the event buffer, sessions, the audit log,
watched files and reviews. Part of the store's conformance suite: every test runs once per
storage backend (the ``backend`` fixture, ``tests/store_backends.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from store_backends import open_core

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.models import Memory, MemorySource, utcnow
from lexmem.store.journal import AuditEntry, Session, SessionStatus
from lexmem.store.protocol import JournalBackend


@pytest.fixture
def lm(data_home: Path, embedder: Embedder, backend: str) -> Iterator[Lexmem]:
    core = open_core(data_home, embedder, backend)
    yield core
    core.close()


@pytest.fixture
def journal(lm: Lexmem) -> JournalBackend:
    return lm.journal


def _event(event_id: str, session_id: str, seq: str, **fields: object) -> dict[str, object]:
    return {"event_id": event_id, "session_id": session_id, "_seq": seq, "event_type": "prompt",
            **fields}  # fmt: skip


def _entry(entry_id: str, **fields: object) -> AuditEntry:
    values: dict[str, object] = {
        "id": entry_id, "timestamp": utcnow(), "session_id": "s1", "candidate_id": f"c-{entry_id}",
        "decision": "saved", "reason": "a fact", "confidence": 0.8, "rule": "rule.fact",
    }  # fmt: skip
    values.update(fields)
    return AuditEntry(**values)  # type: ignore[arg-type]


def test_events_taken_in_are_seen_and_buffered_until_released(journal: JournalBackend) -> None:
    events = [_event("e1", "s1", "0002"), _event("e2", "s1", "0001"), _event("e3", "s2", "0001")]
    assert journal.seen(["e1", "e2"]) == set()
    journal.take_in(events, events[:2] + events[2:])
    journal.take_in(events, events)  # a retry after a crash changes nothing
    assert journal.seen(["e1", "e2", "e3", "e4"]) == {"e1", "e2", "e3"}
    assert [e["event_id"] for e in journal.buffered("s1")] == ["e2", "e1"]  # by sequence
    assert journal.buffered_sessions() == ["s1", "s2"]
    journal.release(["e1", "e2"])
    assert journal.buffered("s1") == [] and journal.buffered_sessions() == ["s2"]
    assert journal.seen(["e1"]) == {"e1"}  # released, still known
    assert journal.counts()["processed"] == 3 and journal.counts()["buffer"] == 1


def test_sessions_are_saved_read_and_listed_most_recent_first(journal: JournalBackend) -> None:
    now = utcnow()
    old = Session("s-old", "claude", "/w/shop", now - timedelta(hours=2), now - timedelta(hours=2))
    new = Session("s-new", "codex", None, now - timedelta(hours=1), now)
    done = Session("s-done", "claude", "/w/shop", now, now - timedelta(hours=3),
                   status=SessionStatus.COMPLETED)  # fmt: skip
    journal.save_sessions([old, new, done])
    assert [s.id for s in journal.sessions()] == ["s-new", "s-old", "s-done"]
    assert [s.id for s in journal.sessions(SessionStatus.ACTIVE, limit=1)] == ["s-new"]
    assert journal.current_session() == new
    current = journal.current_session("claude")
    assert current is not None and current.id == "s-old"
    old.memory_count, old.status = 4, SessionStatus.ABANDONED
    journal.save_sessions([old])  # replaced by id
    got = journal.session("s-old")
    assert got is not None and got.memory_count == 4 and got.status == SessionStatus.ABANDONED
    assert journal.session("nope") is None


def test_the_audit_log_adds_once_filters_and_lists_newest_first(
    journal: JournalBackend,
) -> None:
    now = utcnow()
    a = _entry("a1", timestamp=now - timedelta(minutes=2), memory_id="m1", project="/w/shop")
    b = _entry("a2", timestamp=now - timedelta(minutes=1), decision="skipped", session_id="s2")
    c = _entry("a3", timestamp=now, title="Kept", text="kept text", metadata={"k": 1},
               project="/w/shop/sub")  # fmt: skip
    journal.audit([a, b, c])
    journal.audit([_entry("a1", reason="a retry")])  # an id already there stays as it was
    assert [e.id for e in journal.audit_entries()] == ["a3", "a2", "a1"]
    assert [e.id for e in journal.audit_entries(decision="skipped")] == ["a2"]
    assert [e.id for e in journal.audit_entries(session_id="s1", limit=1)] == ["a3"]
    assert [e.id for e in journal.audit_entries(memory_id="m1")] == ["a1"]
    got = journal.audit_entry("a3")
    assert got is not None and got.metadata == {"k": 1} and got.text == "kept text"
    assert journal.audit_entry("a1") is not None and journal.audit_entry("a1").reason == "a fact"  # type: ignore[union-attr]
    assert journal.has_audit_entry("a2") and not journal.has_audit_entry("zz")
    assert journal.audit_projects_under("/w/shop") == ["/w/shop", "/w/shop/sub"]
    assert journal.audit_projects_under("/w/sh") == []


def test_scrubbing_keeps_the_decision_and_takes_the_text(journal: JournalBackend) -> None:
    journal.audit([
        _entry("a1", memory_id="m1", title="Secret plan", text="the plan", metadata={"x": 1}),
        _entry("a2", project="/w/gone", title="Gone project", text="gone text"),
        _entry("a3", title="Quoting: billing moves to NATS JetStream", text=None),
        _entry("a4", session_id="s9", title="Billing moves to NATS JetStream"),
        _entry("a5", title="Unrelated", text="stays"),
    ])  # fmt: skip
    journal.scrub_audit(
        ["m1"], projects=["/w/gone"], related=[("s1", "Billing moves to NATS JetStream")]
    )
    entries = {e.id: e for e in journal.audit_entries()}
    for gone in ("a1", "a2", "a3"):
        e = entries[gone]
        assert (e.title, e.text, e.metadata) == ("", None, {}), gone
        assert e.decision == "saved" and e.reason == "a fact"
    assert entries["a4"].title == "Billing moves to NATS JetStream"  # another session
    assert entries["a5"].text == "stays"


def test_file_hashes_under_a_folder_creates_nothing_before_the_tables(
    lm: Lexmem, journal: JournalBackend, tmp_path: Path, backend: str
) -> None:
    root = str(tmp_path / "notes")
    tables = set(lm.store.list_tables())
    if backend == "lance":  # a server's schema makes the journal's tables with the rest
        assert "file_hashes" not in tables
    assert journal.file_hashes_under(root) == set()
    assert set(lm.store.list_tables()) == tables  # a reader made no table
    journal.set_file_hash(f"{root}/a.md", "1" * 64)
    journal.set_file_hash(f"{root}/sub/b.md", "2" * 64)
    journal.set_file_hash(f"{root}-other/c.md", "3" * 64)
    journal.set_file_hash(f"{root}/a.md", "4" * 64)  # replaced
    assert journal.file_hash(f"{root}/a.md") == "4" * 64
    assert journal.file_hash(f"{root}/none.md") is None
    assert journal.file_hashes_under(root) == {f"{root}/a.md", f"{root}/sub/b.md"}


def test_reviews_and_the_review_queue(lm: Lexmem, journal: JournalBackend) -> None:
    def made(text: str, source: MemorySource, at: int) -> Memory:
        vec = [float(x) for x in lm.embedder.embed_one(text)]
        created = utcnow() - timedelta(minutes=10 - at)
        return Memory(content=text, embedding=vec, source=source, created_at=created)

    older = made("Captured first", MemorySource.CONVERSATION, 1)
    newer = made("Captured second", MemorySource.HOOK_EVENT, 2)
    explicit = made("Remembered on purpose", MemorySource.EXPLICIT, 3)
    lm.store.store_many([older, newer, explicit])
    assert journal.review_queue() == [newer.id, older.id]
    assert journal.review_queue(limit=1) == [newer.id]
    row = {"fingerprint": "fp", "project": None, "embedding": [0.5, 0.5], "particulars": "p"}
    journal.record_reviews([{**row, "memory_id": newer.id, "decision": "accepted"},
                            {**row, "memory_id": "gone", "decision": "rejected"}])  # fmt: skip
    assert journal.reviewed_ids() == {newer.id, "gone"}
    assert journal.review_queue() == [older.id]
    (rejected,) = journal.rejected()
    assert rejected["memory_id"] == "gone" and rejected["fingerprint"] == "fp"
    assert list(rejected["embedding"]) == pytest.approx([0.5, 0.5])
    journal.forget_review([newer.id])
    assert journal.reviewed_ids() == {"gone"}
    assert journal.review_queue() == [newer.id, older.id]


def test_purging_a_repository_takes_its_sessions_and_buffered_events(
    journal: JournalBackend,
) -> None:
    now = utcnow()
    journal.save_sessions([
        Session("mine", "claude", "/w/shop", now, now),
        Session("inside", "claude", "/w/shop/sub", now, now),
        Session("other", "claude", "/w/shopping", now, now),
    ])  # fmt: skip
    events = [
        _event("e1", "mine", "1", project="/w/shop"),
        _event("e2", "x", "1", cwd="/w/shop/sub"),
        _event("e3", "other", "1", project="/w/shopping"),
    ]
    journal.take_in(events, events)
    assert sorted(journal.purge_sessions("/w/shop")) == ["inside", "mine"]
    journal.erase()
    assert [s.id for s in journal.sessions()] == ["other"]
    assert journal.buffered_sessions() == ["other"]
