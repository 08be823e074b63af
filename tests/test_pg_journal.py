"""The capture journal on PostgreSQL (:class:`PostgresJournal`) on a real server, opened
directly on a :class:`PostgresStore` (no core): every operation, a retry adding nothing,
one commit per operation, erasure leaving no byte in the database's files, and two
processes writing at once losing nothing. ``tests/test_journal.py`` runs the same journal
through a whole core, beside LanceDB's."""

from __future__ import annotations

import array
import os
import secrets
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from diskscan import assert_nowhere, find_markers
from store_backends import use_postgres
from test_store_protocol import mismatches

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.errors import InvalidInputError, StoreError, StoreLockedError
from lexmem.models import Memory, MemorySource, utcnow
from lexmem.service.ops import apply_op
from lexmem.service.writer import CaptureService
from lexmem.store.postgres.journal import PostgresJournal
from lexmem.store.postgres.store import PostgresStore
from lexmem.store.protocol import AuditEntry, JournalBackend, Session, SessionStatus

DIM = 3  # the memories table's vector size here: the journal never embeds
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(pg_database: str, tmp_path: Path) -> Iterator[PostgresStore]:
    s = PostgresStore(Paths(tmp_path / "home"), dim=DIM, space_id="test", url=pg_database).open()
    yield s
    s.close()


@pytest.fixture
def journal(store: PostgresStore) -> PostgresJournal:
    return PostgresJournal(store)


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


def _memory(url: str, mid: str, content: str, source: str, created: datetime) -> None:
    """A memory row written straight into the table (the journal reads it; storing memories
    is the store's own operation, tested with the store)."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO lexmem.memories (id, memory_type, content, embedding, source, user_id,"
            " created_at) VALUES (%s, 'semantic', %s, '[1,0,0]', %s, 'u', %s)",
            (mid, content, source, created),
        )


def test_it_has_every_operation_of_the_journal_protocol() -> None:
    assert mismatches(PostgresJournal, JournalBackend) == []


# -- the event buffer -----------------------------------------------------------------


def test_events_are_seen_buffered_in_seq_order_and_a_retry_adds_nothing(
    journal: PostgresJournal,
) -> None:
    # Code-point order, as Python sorts: "B" before "a", "Z9" before "a1".
    events = [_event("e1", "s1", "a1"), _event("e2", "s1", "Z9"), _event("e3", "s1", "B"),
              _event("e4", "s2", "1", text="héllo ✓")]  # fmt: skip
    assert journal.seen(["e1"]) == set() and journal.seen([]) == set()
    journal.take_in(events, events)
    journal.take_in(events, events)  # a retry after a crash
    journal.take_in([], events)  # nothing taken in: nothing buffered either
    assert journal.seen(["e1", "e2", "e3", "e4", "e5"]) == {"e1", "e2", "e3", "e4"}
    assert [e["event_id"] for e in journal.buffered("s1")] == ["e3", "e2", "e1"]
    assert journal.buffered("s2") == [events[3]]  # the event whole, as it came
    assert journal.buffered_sessions() == ["s1", "s2"]
    assert journal.counts() == {"processed": 4, "buffer": 4, "sessions": 0, "audit": 0,
                                "file_hashes": 0, "reviews": 0}  # fmt: skip
    journal.release(["e1", "e3", "unknown"])
    assert [e["event_id"] for e in journal.buffered("s1")] == ["e2"]
    journal.release(["e2"])
    assert journal.buffered_sessions() == ["s2"]
    assert journal.seen(["e1", "e2"]) == {"e1", "e2"}  # released, still known
    journal.release([])
    assert journal.counts()["buffer"] == 1 and journal.counts()["processed"] == 4


def test_taking_in_is_one_commit(journal: PostgresJournal) -> None:
    good = _event("e1", "s1", "1")
    broken = {"event_id": "e2", "session_id": None, "_seq": "2"}  # a buffer row needs a session
    with pytest.raises(InvalidInputError) as err:
        journal.take_in([good, broken], [good, broken])
    assert "\n" not in str(err.value)
    assert journal.seen(["e1", "e2"]) == set() and journal.buffered("s1") == []


def test_only_events_taken_in_are_buffered_events_only_once(journal: PostgresJournal) -> None:
    first = _event("e1", "s1", "1", text="first")
    journal.take_in([first], [first])
    again = _event("e1", "s1", "1", text="another text")  # the same id: left as it was
    journal.take_in([again], [again])
    assert journal.buffered("s1") == [first]


# -- sessions ---------------------------------------------------------------------------


def test_sessions_are_saved_replaced_and_listed_most_recent_first(
    journal: PostgresJournal,
) -> None:
    now = utcnow()
    old = Session("s-old", "claude", "/w/shop", now - timedelta(hours=2), now - timedelta(hours=2))
    new = Session("s-new", "codex", None, now - timedelta(hours=1), now)
    done = Session("s-done", "claude", "/w/shop", now, now - timedelta(hours=3),
                   ended_at=now, status=SessionStatus.COMPLETED, memory_count=2, event_count=9)  # fmt: skip
    tie = Session("s-a", "codex", None, now, now)  # the same time as s-new: ties by id
    journal.save_sessions([old, new, done, tie])
    journal.save_sessions([])
    assert [s.id for s in journal.sessions()] == ["s-a", "s-new", "s-old", "s-done"]
    assert [s.id for s in journal.sessions(SessionStatus.ACTIVE, limit=2)] == ["s-a", "s-new"]
    assert [s.id for s in journal.sessions(SessionStatus.COMPLETED)] == ["s-done"]
    assert journal.current_session() == tie
    assert journal.current_session("claude") == old
    assert journal.current_session("nobody") is None
    got = journal.session("s-done")
    assert got == done and got is not None and got.started_at.tzinfo is UTC
    old.memory_count, old.status = 4, SessionStatus.ABANDONED
    journal.save_sessions([old])
    assert journal.session("s-old") == old
    assert journal.current_session("claude") is None
    assert journal.session("nope") is None
    assert journal.counts()["sessions"] == 4


def test_session_topics_are_each_sessions_first_title(journal: PostgresJournal) -> None:
    now = utcnow()
    journal.audit([
        _entry("b", session_id="s1", timestamp=now, title="Second"),
        _entry("a", session_id="s1", timestamp=now, title="First by id"),
        _entry("c", session_id="s1", timestamp=now - timedelta(seconds=1), title="",
               decision="skipped"),
        _entry("d", session_id="s2", timestamp=now - timedelta(hours=1), title="Applied",
               decision="applied"),
        _entry("e", session_id="s2", timestamp=now, title="Topic two"),
        _entry("f", session_id="s3", timestamp=now, title="Not asked"),
    ])  # fmt: skip
    assert journal.session_topics(["s1", "s2", "s4"]) == {"s1": "First by id", "s2": "Topic two"}
    assert journal.session_topics([]) == {}


# -- the audit log --------------------------------------------------------------------


def test_the_audit_log_adds_once_filters_and_lists_newest_first(
    journal: PostgresJournal,
) -> None:
    now = utcnow()
    a = _entry("a1", timestamp=now - timedelta(minutes=2), memory_id="m1", project="/w/shop")
    b = _entry("a2", timestamp=now - timedelta(minutes=1), decision="skipped", session_id="s2")
    c = _entry("a3", timestamp=now, title="Kept", text="kept text",
               metadata={"k": 1, "nested": {"l": [1, "two"]}}, project="/w/shop/sub")  # fmt: skip
    d = _entry("a4", timestamp=now, kind="fact", rule="r", confidence=0.25)  # a tie with a3
    journal.audit([a, b, c, d])
    journal.audit([_entry("a1", reason="a retry")])  # an id already there stays as it was
    journal.audit([])
    assert [e.id for e in journal.audit_entries()] == ["a4", "a3", "a2", "a1"]
    assert [e.id for e in journal.audit_entries(limit=2)] == ["a4", "a3"]
    assert [e.id for e in journal.audit_entries(decision="skipped")] == ["a2"]
    assert [e.id for e in journal.audit_entries(session_id="s1", limit=1)] == ["a4"]
    assert [e.id for e in journal.audit_entries(memory_id="m1")] == ["a1"]
    assert [e.id for e in journal.audit_entries(decision="saved", session_id="s2")] == []
    assert journal.audit_entry("a3") == c
    assert journal.audit_entry("a4") == d
    got = journal.audit_entry("a1")
    assert got is not None and got.reason == "a fact" and got.timestamp.tzinfo is UTC
    assert journal.audit_entry("zz") is None
    assert journal.has_audit_entry("a2") and not journal.has_audit_entry("zz")
    assert journal.counts()["audit"] == 4


def test_what_postgresql_cannot_hold_is_written_as_near_as_it_can(
    journal: PostgresJournal,
) -> None:
    nul = "before\x00after"
    event = _event("e1", "s1", "1", text=nul)
    journal.take_in([event], [event])
    assert journal.buffered("s1") == [event]  # kept whole: JSON escapes the NUL
    journal.audit([_entry("a1", title=nul, text=nul, reason=nul,
                          metadata={"x": nul, nul: [float("nan"), float("inf"), 1.5]})])  # fmt: skip
    got = journal.audit_entry("a1")
    assert got is not None
    assert got.title == got.text == got.reason == "before\ufffdafter"
    assert got.metadata == {"x": "before\ufffdafter", "before\ufffdafter": ["nan", "inf", 1.5]}
    journal.record_reviews([{"memory_id": "m1", "decision": "rejected", "particulars": nul}])
    assert journal.rejected()[0]["particulars"] == "before\ufffdafter"


def test_audit_projects_under_a_root_take_care_of_prefixes(journal: PostgresJournal) -> None:
    journal.audit([
        _entry(str(i), project=p)
        for i, p in enumerate(["/w/shop", "/w/shop/sub", "/w/shop/sub", "/w/shopping", "/w/sh",
                               "/w/shop_x", "C:\\w\\shop\\sub", "C:\\w\\shop", "", None])
    ])  # fmt: skip
    assert journal.audit_projects_under("/w/shop") == ["/w/shop", "/w/shop/sub"]
    assert journal.audit_projects_under("/w/shop/") == ["/w/shop", "/w/shop/sub"]
    assert journal.audit_projects_under("/w/sh") == ["/w/sh"]
    assert journal.audit_projects_under("/w/shop_") == []  # _ is no wildcard
    assert journal.audit_projects_under("C:\\w\\shop") == ["C:\\w\\shop", "C:\\w\\shop\\sub"]
    assert journal.audit_projects_under("/nothing") == []


def test_scrubbing_keeps_the_decision_and_takes_the_text(journal: PostgresJournal) -> None:
    journal.audit([
        _entry("a1", memory_id="m1", title="Secret plan", text="the plan", metadata={"x": 1}),
        _entry("a2", project="/w/gone", title="Gone project", text="gone text"),
        _entry("a3", title="Quoting: billing moves to NATS JetStream", text=None),
        _entry("a4", session_id="s9", title="Billing moves to NATS JetStream"),
        _entry("a5", title="Unrelated", text="stays", metadata={"y": 2}),
        _entry("a6", title="Other", text="billing moves to nats jetstream, said the handoff"),
        _entry("a7", title="Billing moves", text="somewhere"),  # half of the words only
    ])  # fmt: skip
    journal.scrub_audit()  # nothing named: nothing happens
    journal.scrub_audit(
        ["m1"], projects=["/w/gone"], related=[("s1", "Billing moves to NATS JetStream"),
                                               (None, "Unrelated stays"), ("s1", "a b")]
    )  # fmt: skip
    entries = {e.id: e for e in journal.audit_entries()}
    for gone in ("a1", "a2", "a3", "a6"):
        e = entries[gone]
        assert (e.title, e.text, e.metadata) == ("", None, {}), gone
        assert e.decision == "saved" and e.reason == "a fact" and e.candidate_id == f"c-{gone}"
    assert entries["a4"].title == "Billing moves to NATS JetStream"  # another session
    assert (entries["a5"].text, entries["a5"].metadata) == ("stays", {"y": 2})
    assert entries["a7"].title == "Billing moves"


# -- watched files --------------------------------------------------------------------


def test_file_hashes_are_recorded_replaced_and_listed_under_a_folder(
    journal: PostgresJournal,
) -> None:
    root = "/w/notes_1"
    assert journal.file_hashes_under(root) == set()
    journal.set_file_hash(f"{root}/a.md", "1" * 64)
    journal.set_file_hash(f"{root}/sub/b.md", "2" * 64)
    journal.set_file_hash(f"{root}-other/c.md", "3" * 64)
    journal.set_file_hash("/w/notesX1/d.md", "5" * 64)  # what LIKE's _ would have matched
    journal.set_file_hash(f"{root}/a.md", "4" * 64)  # replaced
    assert journal.file_hash(f"{root}/a.md") == "4" * 64
    assert journal.file_hash(f"{root}/none.md") is None
    assert journal.file_hashes_under(root) == {f"{root}/a.md", f"{root}/sub/b.md"}
    assert journal.file_hashes_under(root + "/") == {f"{root}/a.md", f"{root}/sub/b.md"}
    assert journal.counts()["file_hashes"] == 4


# -- review -----------------------------------------------------------------------------


def test_reviews_and_the_review_queue(store: PostgresStore, journal: PostgresJournal) -> None:
    now = utcnow()
    _memory(store.url, "m-old", "Captured first", "conversation", now - timedelta(minutes=9))
    _memory(store.url, "m-new", "Captured second", "hook_event", now - timedelta(minutes=8))
    _memory(store.url, "m-tie", "Captured with a tie", "hook_event", now - timedelta(minutes=8))
    _memory(store.url, "m-exp", "Remembered on purpose", "explicit", now - timedelta(minutes=7))
    _memory(store.url, "m-arc", "Archived", "conversation", now)
    with psycopg.connect(store.url) as conn:
        conn.execute("UPDATE lexmem.memories SET status = 'archived' WHERE id = 'm-arc'")
    assert journal.review_queue() == ["m-new", "m-tie", "m-old"]
    assert journal.review_queue(limit=1) == ["m-new"]
    emb = [0.1, 0.5, -2.0 / 3.0]
    row = {"fingerprint": "fp", "project": None, "embedding": emb, "particulars": "p"}
    journal.record_reviews([{**row, "memory_id": "m-new", "decision": "accepted"},
                            {**row, "memory_id": "gone", "decision": "rejected"},
                            {**row, "memory_id": "no-vector", "decision": "rejected",
                             "embedding": None, "project": "/w/p"}])  # fmt: skip
    journal.record_reviews([])
    assert journal.reviewed_ids() == {"m-new", "gone", "no-vector"}
    assert journal.review_queue() == ["m-tie", "m-old"]
    rejected = {r["memory_id"]: r for r in journal.rejected()}
    assert set(rejected) == {"gone", "no-vector"}
    gone = rejected["gone"]
    assert (gone["decision"], gone["fingerprint"], gone["project"], gone["particulars"]) == (
        "rejected", "fp", None, "p",
    )  # fmt: skip
    # The floats the column holds (float32), as a list of Python floats, like LanceDB's.
    assert gone["embedding"] == array.array("f", emb).tolist()
    assert all(type(v) is float for v in gone["embedding"])
    assert gone["reviewed_at"].tzinfo is UTC
    assert rejected["no-vector"]["embedding"] is None
    journal.record_reviews([{**row, "memory_id": "gone", "decision": "accepted"}])  # replaced
    assert set(r["memory_id"] for r in journal.rejected()) == {"no-vector"}
    journal.forget_review(["m-new", "gone"])
    journal.forget_review([])
    assert journal.reviewed_ids() == {"no-vector"}
    assert journal.review_queue() == ["m-new", "m-tie", "m-old"]
    with pytest.raises(InvalidInputError) as err:
        journal.record_reviews([{**row, "memory_id": "x", "decision": "maybe"}])
    assert "\n" not in str(err.value) and journal.counts()["reviews"] == 1


# -- purge ------------------------------------------------------------------------------


def test_purging_a_repository_takes_its_sessions_and_buffered_events(
    journal: PostgresJournal,
) -> None:
    now = utcnow()
    journal.save_sessions([
        Session("mine", "claude", "/w/shop", now - timedelta(minutes=1), now - timedelta(minutes=1)),
        Session("inside", "claude", "/w/shop/sub", now, now),
        Session("other", "claude", "/w/shopping", now, now),
        Session("none", "claude", None, now, now),
    ])  # fmt: skip
    events = [
        _event("e1", "mine", "1", project="/w/shop"),
        _event("e2", "x", "1", cwd="/w/shop/sub"),
        _event("e3", "other", "1", project="/w/shopping"),
        _event("e4", "none", "1"),
    ]
    journal.take_in(events, events)
    assert journal.purge_sessions("/w/shop/") == ["inside", "mine"]  # most recent first
    journal.erase()
    assert sorted(s.id for s in journal.sessions()) == ["none", "other"]
    assert journal.buffered_sessions() == ["none", "other"]
    assert journal.seen(["e1", "e2"]) == {"e1", "e2"}
    assert journal.purge_sessions("/w/shop") == []


# -- erasure ----------------------------------------------------------------------------


def _database_files(url: str) -> tuple[Path, list[Path]]:
    """The database's folder and its files, after a checkpoint wrote every page out."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute(
            "SELECT current_setting('data_directory'), oid FROM pg_database"
            " WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    folder = Path(row[0]) / "base" / str(row[1])
    return folder, sorted(p for p in folder.iterdir() if p.is_file())


def _holding(url: str, *texts: str) -> set[str]:
    """Which of ``texts`` some file of the database holds (as UTF-8 bytes)."""
    _, files = _database_files(url)
    found = set()
    for path in files:
        data = path.read_bytes()
        found.update(t for t in texts if t.encode() in data)
    return found


def _table_file(url: str, table: str) -> Path:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT current_setting('data_directory'), pg_relation_filepath(%s::regclass)",
            (table,),
        ).fetchone()
    assert row is not None
    return Path(row[0]) / row[1]


def test_erase_leaves_no_byte_of_deleted_or_scrubbed_text_in_the_files(
    store: PostgresStore, journal: PostgresJournal
) -> None:
    now = utcnow()
    scrubbed, kept = "Zanzibar-scrubbed-title", "Quixotic-kept-title"
    event_text, session_project = "Xylophone-event-text", "/w/Marzipan-repository"
    review_text, memory_text = "Pumpernickel-particulars", "Flibbertigibbet-memory-content"
    # Past 2 kB and incompressible: stored out of line, as is, in the TOAST table.
    long_text = "Lollapalooza-long-text " + secrets.token_hex(2000)
    journal.audit([_entry("a1", memory_id="m1", title=scrubbed, text=long_text),
                   _entry("a2", title=kept)])  # fmt: skip
    journal.save_sessions([Session("s1", "claude", session_project, now, now)])
    event = _event("e1", "s1", "1", text=event_text, project=session_project)
    journal.take_in([event], [event])
    journal.record_reviews([{"memory_id": "m9", "decision": "rejected", "fingerprint": "f",
                             "project": None, "embedding": [1.0], "particulars": review_text}])  # fmt: skip
    _memory(store.url, "m1", memory_text, "conversation", now)
    # The memory's words are in the full-text index too, stemmed and lower-cased.
    texts = (scrubbed, kept, event_text, session_project, review_text, memory_text,
             "flibbertigibbet", "Lollapalooza-long-text")  # fmt: skip
    audit_file = _table_file(store.url, "lexmem.audit")
    assert _holding(store.url, *texts) == set(texts)  # the test can see text in the files

    with psycopg.connect(store.url) as conn:
        conn.execute("DELETE FROM lexmem.memories WHERE id = 'm1'")
    journal.scrub_audit(["m1"])
    journal.purge_sessions("/w/Marzipan-repository")
    journal.forget_review(["m9"])
    assert _holding(store.url, *texts) == set(texts)  # deleted rows stay in the pages
    journal.erase()
    assert _holding(store.url, *texts) == {kept}
    assert not audit_file.exists() or audit_file.stat().st_size == 0  # the old file went
    assert journal.audit_entry("a1") is not None and journal.audit_entry("a2") is not None


def test_erase_leaves_no_value_in_the_planners_statistics(
    journal: PostgresJournal, store: PostgresStore
) -> None:
    now = utcnow()
    gone, stays = "/w/Snickerdoodle-repository", "/w/Macaroon-repository"
    journal.save_sessions([Session(f"s{i}", "claude", gone if i % 2 else stays, now, now)
                           for i in range(40)])  # fmt: skip
    with psycopg.connect(store.url) as conn:
        conn.execute("ANALYZE lexmem.sessions")  # as autovacuum would: a common value
        stats = conn.execute(
            "SELECT most_common_vals::text FROM pg_stats WHERE schemaname = 'lexmem'"
            " AND tablename = 'sessions' AND attname = 'project'"
        ).fetchone()
    assert stats is not None and gone in stats[0]
    journal.purge_sessions(gone)
    journal.erase()
    assert _holding(store.url, gone, stays) == {stays}


def test_release_erases_the_events_text(journal: PostgresJournal, store: PostgresStore) -> None:
    gone, stays = "Kumquat-released-text", "Rutabaga-waiting-text"
    events = [_event("e1", "s1", "1", text=gone), _event("e2", "s2", "1", text=stays)]
    journal.take_in(events, events)
    assert _holding(store.url, gone, stays) == {gone, stays}
    journal.release(["e1"])
    assert _holding(store.url, gone, stays) == {stays}


def test_erase_inside_the_write_lock_after_other_writes(
    journal: PostgresJournal, store: PostgresStore
) -> None:
    """As forget does: delete, scrub and erase under one write lock."""
    secret = "Gobbledygook-secret-title"
    journal.audit([_entry("a1", memory_id="m1", title=secret)])
    with store.writing():
        journal.scrub_audit(["m1"])
        journal.erase()
    assert _holding(store.url, secret) == set()


def test_forgetting_as_the_core_does_leaves_no_byte_of_the_memory(
    store: PostgresStore, journal: PostgresJournal
) -> None:
    """Lexmem.erase_memories' sequence: the store deletes without erasing, the journal
    drops the review, scrubs the audit (the memory's entries and the entries of its session
    that quote it) and erases, all under one write lock."""
    content, quoted = "Vermicelli-decision: billing moves", "Vermicelli-decision: billing moves"
    memory = Memory(content=content, title="Vermicelli-title", embedding=[1.0, 0.0, 0.0],
                    source=MemorySource.CONVERSATION, session_id="s1")  # fmt: skip
    kept = Memory(content="Cardamom-kept memory", embedding=[0.0, 1.0, 0.0])
    store.store_many([memory, kept])
    journal.audit([_entry("a1", memory_id=memory.id, title=memory.title, text=content),
                   _entry("a2", session_id="s1", title="Handoff", text=f"{quoted} soon")])  # fmt: skip
    journal.record_reviews([{"memory_id": memory.id, "decision": "accepted", "fingerprint": "f",
                             "project": None, "embedding": None, "particulars": "Vermicelli-p"}])  # fmt: skip
    texts = ("Vermicelli", "Cardamom")
    assert _holding(store.url, *texts) == set(texts)
    with store.writing():
        deleted = store.delete_many([memory.id], erase=False)
        journal.forget_review(deleted)
        journal.scrub_audit(deleted, related=[(memory.session_id, memory.content)])
        journal.erase()
    assert deleted == [memory.id]
    assert _holding(store.url, *texts) == {"Cardamom"}
    assert journal.audit_entry("a2") is not None and journal.reviewed_ids() == set()


def test_erase_refuses_to_run_inside_a_transaction(journal: PostgresJournal) -> None:
    with journal.db.write("a test's transaction"), pytest.raises(StoreError) as err:
        journal.erase()
    assert "inside a transaction" in str(err.value) and "\n" not in str(err.value)


def test_erase_waits_for_a_reader_then_says_the_store_is_locked(
    journal: PostgresJournal, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lexmem.store.postgres.db as module  # where the rewrite reads it

    monkeypatch.setattr(module, "WRITE_LOCK_TIMEOUT", 0.3)
    with psycopg.connect(store.url) as reader:
        reader.execute("SELECT count(*) FROM lexmem.audit")  # its transaction stays open
        with pytest.raises(StoreLockedError):
            journal.erase()
    journal.erase()  # the reader gone, it runs
    journal.audit([_entry("a1")])  # and the writing connection works on
    assert journal.has_audit_entry("a1")


def test_erase_by_a_role_that_cannot_rewrite_the_tables_fails_loudly(
    store: PostgresStore, tmp_path: Path
) -> None:
    role = f"lexmem_writer_{uuid.uuid4().hex[:8]}"  # roles are the whole server's
    with psycopg.connect(store.url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA lexmem TO {role}")
        admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA lexmem TO {role}")
    url = store.url.replace("postgres:@", f"{role}:@", 1)
    try:
        other = PostgresStore(Paths(tmp_path / "other"), dim=DIM, space_id="test", url=url).open()
        try:
            journal = PostgresJournal(other)
            journal.audit([_entry("a1", title="written by the role")])
            with pytest.raises(StoreError) as err:
                journal.erase()  # VACUUM only warns and skips a table the role does not own
            assert "did not rewrite" in str(err.value) and "\n" not in str(err.value)
        finally:
            other.close()
    finally:
        with psycopg.connect(store.url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


# -- through the capture service ---------------------------------------------------------


@pytest.fixture
def pg_service(data_home: Path, embedder: Embedder, pg_database: str) -> Iterator[CaptureService]:
    """The capture service on a data folder whose memories are in a fresh database."""
    use_postgres(data_home, pg_database)
    lm = Lexmem.open(data_home, embedder=embedder, backend="postgres")
    svc = CaptureService(lm)
    svc.acquire()
    yield svc
    svc.release()
    lm.close()


def _say(service: CaptureService, sid: str, text: str, *, project: str | None = None) -> None:
    """One short agent session in which the person says ``text``, drained."""
    inbox = Inbox(service.lm.paths.inbox)
    for event_type, body in (("prompt", text), ("response", "Noted."), ("session_end", "")):
        inbox.write(make_event(event_type, body, session_id=sid, agent="claude",
                               project=project, cwd=project))  # fmt: skip
    service.drain()


def _assert_gone(service: CaptureService, markers: list[str]) -> None:
    """No file of the database, nor of the local data folder, holds any of ``markers``."""
    url = service.lm.settings.store.url
    folder, _ = _database_files(url)
    assert_nowhere(folder, markers)
    assert_nowhere(service.lm.paths.home, markers)


def test_forget_through_the_service_erases_the_text_from_the_database(
    pg_service: CaptureService,
) -> None:
    lm = pg_service.lm
    pg_service.settings.mode = "full"
    _say(pg_service, "s1", "We decided to use zqxmarker1a as the billing queue, not RabbitMQ.")
    _say(pg_service, "s2", "We decided the zqxmarker2b cluster hosts staging.")
    (captured,) = [m.id for m in lm.store.list_memories() if "zqxmarker1a" in m.content]
    folder, _ = _database_files(lm.settings.store.url)
    assert find_markers(folder, ["zqxmarker1a", "zqxmarker2b"])  # the scan sees them
    apply_op(lm, "forget", {"ident": captured}, "op-1")
    _assert_gone(pg_service, ["zqxmarker1a"])
    assert find_markers(folder, ["zqxmarker2b"])  # the other memory is untouched
    saved = [e for e in lm.audit_entries(decision="saved") if e.memory_id == captured]
    assert saved and saved[0].title == "" and saved[0].text is None and saved[0].reason


def test_purge_project_through_the_service_erases_the_repository_from_the_database(
    pg_service: CaptureService,
) -> None:
    lm = pg_service.lm
    pg_service.settings.mode = "full"
    repo, other = "/work/secretrepo", "/work/shop"
    _say(pg_service, "r1", "We decided zqxmarker8h signs every release of this repo.", project=repo)
    lm.remember("The sub-package uses zqxmarker9i for its cache.", project=f"{repo}/pkg")
    lm.remember("The shop uses zqxmarker0j for payments.", project=other)
    # A session still open: its events wait in the buffer.
    Inbox(lm.paths.inbox).write(make_event(
        "prompt", "Also remember zqxmarker1k please", session_id="r2", agent="claude",
        project=repo, cwd=repo,
    ))  # fmt: skip
    pg_service.drain()
    assert lm.journal.counts()["buffer"] >= 1
    changes = apply_op(lm, "purge_project", {"root": repo}, "op-purge")["changes"]
    assert len(changes["deleted"]) == 2
    # The audit keeps each entry's project (who saved or skipped what, and where), as
    # the local journal does: the repository's texts go, not its name.
    _assert_gone(pg_service, ["zqxmarker8h", "zqxmarker9i", "zqxmarker1k"])
    assert lm.projects() == [other]
    assert all(s.project != repo for s in lm.sessions())
    assert lm.journal.buffered("r2") == []


# -- two processes ----------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys
    import time
    from datetime import timedelta
    from pathlib import Path

    from lexmem.config import Paths
    from lexmem.models import utcnow
    from lexmem.store.postgres.journal import PostgresJournal
    from lexmem.store.postgres.store import PostgresStore
    from lexmem.store.protocol import AuditEntry, Session

    url, tag, home, n, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    store = PostgresStore(Paths(Path(home)), dim=3, space_id="test", url=url).open()
    journal = PostgresJournal(store)
    print("ready", flush=True)
    while not Path(go).exists():  # both start writing together
        time.sleep(0.005)
    began = time.time()
    for i in range(n):
        now = utcnow()
        mine = {"event_id": f"{tag}-{i}", "session_id": tag, "_seq": f"{i:04d}", "text": "x"}
        shared = {"event_id": f"shared-{i}", "session_id": "shared", "_seq": f"{i:04d}"}
        journal.take_in([mine, shared], [mine, shared])
        journal.audit([AuditEntry(f"{tag}-a{i}", now, tag, "c", "saved", "r", 0.5, "rule"),
                       AuditEntry(f"shared-a{i}", now, "shared", "c", "saved", "r", 0.5, "rule")])
        journal.save_sessions([Session(tag, "agent", None, now - timedelta(seconds=1), now,
                                       event_count=i + 1)])
        journal.set_file_hash(f"/notes/{tag}/{i}.md", "0" * 64)
        if i % 10 == 9:
            journal.release([f"{tag}-{i - 9}"])
    ended = time.time()
    store.close()
    print("done", began, ended)
    """
)


def test_two_processes_writing_at_once_lose_nothing(
    journal: PostgresJournal, store: PostgresStore, tmp_path: Path
) -> None:
    n = 40
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, store.url, tag, str(tmp_path / tag), str(n), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("p1", "p2")
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    finally:
        go.touch()  # a writer that did start never waits forever
    outs: list[Any] = [p.communicate(timeout=300) for p in procs]
    spans = []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        word, began, ended = out.split()
        assert word == "done"
        spans.append((float(began), float(ended)))
    assert max(b for b, _ in spans) < min(e for _, e in spans)  # they wrote at the same time
    counts = journal.counts()
    released = n // 10
    assert counts == {"processed": 3 * n, "buffer": 3 * n - 2 * released, "sessions": 2,
                      "audit": 3 * n, "file_hashes": 2 * n, "reviews": 0}  # fmt: skip
    assert [e["_seq"] for e in journal.buffered("shared")] == [f"{i:04d}" for i in range(n)]
    assert {s.id: s.event_count for s in journal.sessions()} == {"p1": n, "p2": n}
