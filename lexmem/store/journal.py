"""The capture journal: the service's own tables beside the memories.

- ``processed``: every event id the service has taken in (idempotency: an event
  file seen twice after a crash is recognised and dropped).
- ``buffer``: events waiting for their session's window to close. Durable, so a
  crash between taking an event in and extracting from its window loses nothing;
  rows leave once their window is extracted (lexmem keeps memories, not transcripts),
  and with them every older version of the table: a released event's text is in no
  file afterwards (:meth:`Journal.release`).
- ``sessions``: agent sessions (seed 002 SessionManager): status, times, counts.
- ``audit``: every candidate saved or skipped, with reason, confidence and rule
  (seed 003); never the content of a secret or of an opted-out repository. When a
  memory is forgotten its entries keep id, time, decision and reason, not its title or text.
- ``file_hashes``: sha256 per watched Markdown file, so unchanged files are skipped
  across restarts (seed 002).

All writes go through the store's write lock; ids are deterministic where a retry
must not duplicate (audit rows, buffered events).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lexmem.models import utcnow
from lexmem.store.lance import MemoryStore, q, store_boundary
from lexmem.store.lancedb_import import import_lancedb
from lexmem.store.protocol import (
    AuditEntry,
    JournalBackend,
    Session,
    SessionStatus,
    holds_text,
    text_words,
    under,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ERASE_KEYS",
    "AuditEntry",
    "Journal",
    "Session",
    "SessionStatus",
    "review_queue",
    "under",
]

PROCESSED, BUFFER, SESSIONS, AUDIT, FILE_HASHES, REVIEWS = (
    "processed",
    "buffer",
    "sessions",
    "audit",
    "file_hashes",
    "reviews",
)


# The journal tables that can hold a memory's text or an event's, with their unique key:
# what an erasure rewrites (MemoryStore.erase). ``processed`` and ``file_hashes`` hold
# ids, paths and hashes only.
ERASE_KEYS = {BUFFER: "event_id", SESSIONS: "id", AUDIT: "id", REVIEWS: "memory_id"}


def _schemas() -> dict[str, pa.Schema]:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    s = pa.string()
    return {
        PROCESSED: pa.schema([("event_id", s), ("session_id", s), ("processed_at", ts)]),
        BUFFER: pa.schema(
            [("event_id", s), ("session_id", s), ("seq", s), ("event", s), ("received_at", ts)]
        ),
        SESSIONS: pa.schema(
            [
                ("id", s),
                ("agent", s),
                ("project", s),
                ("started_at", ts),
                ("last_event_at", ts),
                ("ended_at", ts),
                ("status", s),
                ("memory_count", pa.int64()),
                ("event_count", pa.int64()),
            ]
        ),
        AUDIT: pa.schema(
            [
                ("id", s),
                ("timestamp", ts),
                ("session_id", s),
                ("candidate_id", s),
                ("decision", s),
                ("reason", s),
                ("confidence", pa.float64()),
                ("rule", s),
                ("kind", s),
                ("memory_id", s),
                ("title", s),
                ("project", s),
                ("text", s),
                ("metadata", s),
            ]
        ),
        FILE_HASHES: pa.schema([("path", s), ("sha256", s), ("processed_at", ts)]),
        # One row per reviewed memory: accepted, or rejected (its fingerprint and
        # embedding then keep the same candidate from being captured again).
        REVIEWS: pa.schema(
            [
                ("memory_id", s),
                ("decision", s),
                ("fingerprint", s),
                ("project", s),
                ("reviewed_at", ts),
                ("embedding", pa.list_(pa.float32())),
                ("particulars", s),
            ]
        ),
    }


@store_boundary(JournalBackend)
class Journal:
    """The capture tables, in the store's LanceDB folder, under its write lock: the
    LanceDB backend of :class:`~lexmem.store.protocol.JournalBackend`."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._ensured = False

    def ensure(self) -> None:
        if self._ensured:
            return
        import_lancedb()
        from lancedb.index import BTree

        # Reads need no lock once the tables exist (the common case after the first run).
        listed = set(self.store.list_tables())
        if set(_schemas()) <= listed and all(self._opens(name) for name in _schemas()):
            self._ensured = True
            return
        with self.store.writing():
            existing = set(self.store.list_tables())
            for name, schema in _schemas().items():
                if name in existing and self._opens(name):
                    continue
                if name in existing:
                    # Listed, but no version was ever committed: a create cut short by a
                    # full disk or a crash. It holds nothing; it is made again.
                    self.store.db.drop_table(name)
                key = {PROCESSED: "event_id", BUFFER: "session_id", SESSIONS: "id", AUDIT: "session_id",
                       FILE_HASHES: "path", REVIEWS: "memory_id"}[name]  # fmt: skip
                try:
                    table = self.store.db.create_table(name, schema=schema)
                    table.create_index(key, config=BTree(), replace=True)
                except BaseException:
                    # Nothing half-made is left for the next start to trip over.
                    with contextlib.suppress(Exception):
                        self.store.db.drop_table(name)
                    raise
        self._ensured = True

    def _opens(self, name: str) -> bool:
        try:
            self.store.table(name)
        except ValueError:  # LanceDB: "Table 'x' was not found" (a folder, but no version)
            return False
        return True

    def t(self, name: str) -> Any:
        self.ensure()
        return self.store.table(name)

    def _rows(
        self, name: str, where: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        table = self.t(name)
        query = table.search()
        if where:
            query = query.where(where)
        n = (
            limit
            if limit is not None
            else max(1, table.count_rows(where) if where else table.count_rows())
        )
        rows: list[dict[str, Any]] = query.limit(n).to_list()
        return rows

    # -- idempotency --------------------------------------------------------------

    def seen(self, event_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(event_ids), 500):
            part = event_ids[start : start + 500]
            if not part:
                continue
            where = "event_id IN (" + ", ".join(q(i) for i in part) + ")"
            found.update(r["event_id"] for r in self._rows(PROCESSED, where, limit=len(part)))
        return found

    def take_in(
        self, events: Sequence[Mapping[str, Any]], buffered: Sequence[Mapping[str, Any]]
    ) -> None:
        """Record events as processed and buffer the ones that wait for a window (one lock)."""
        import pyarrow as pa

        if not events:
            return
        now = utcnow()
        schemas = _schemas()
        with self.store.writing():
            if buffered:
                rows = [
                    {"event_id": e["event_id"], "session_id": e["session_id"], "seq": e["_seq"],
                     "event": json.dumps(e, ensure_ascii=False), "received_at": now}
                    for e in buffered
                ]  # fmt: skip
                data = pa.Table.from_pylist(rows, schema=schemas[BUFFER])
                self.t(BUFFER).merge_insert("event_id").when_not_matched_insert_all().execute(data)
            rows = [
                {"event_id": e["event_id"], "session_id": e["session_id"], "processed_at": now}
                for e in events
            ]
            data = pa.Table.from_pylist(rows, schema=schemas[PROCESSED])
            self.t(PROCESSED).merge_insert("event_id").when_not_matched_insert_all().execute(data)

    def buffered(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._rows(BUFFER, f"session_id = {q(session_id)}")
        rows.sort(key=lambda r: r["seq"])
        return [json.loads(r["event"]) for r in rows]

    def buffered_sessions(self) -> list[str]:
        rows = (
            self.t(BUFFER)
            .search()
            .select(["session_id"])
            .limit(max(1, self.t(BUFFER).count_rows()))
            .to_list()
        )
        return sorted({r["session_id"] for r in rows})

    def release(self, event_ids: Sequence[str]) -> None:
        """Drop buffered events whose window has been extracted, and erase them: raw event
        text must not outlive its drain in any file.

        Constraint: a Lance delete only marks rows; their text stays in the data file and
        in every older version until the table is rewritten and its versions cleaned up.
        The buffer holds only the open sessions' events (a few hundred rows), so the
        rewrite is cheap (measured in docs/privacy.md); only the service reads it, so no
        reader can be holding a version the clean-up removes."""
        if not event_ids:
            return
        with self.store.writing():
            for start in range(0, len(event_ids), 500):
                part = event_ids[start : start + 500]
                self.t(BUFFER).delete("event_id IN (" + ", ".join(q(i) for i in part) + ")")
            self.store.erase_tables({BUFFER: ERASE_KEYS[BUFFER]})

    def buffered_under(self, root: str) -> list[str]:
        """Ids of buffered events from the repository ``root`` (its project or working
        folder is the root or inside it)."""
        out = []
        for r in self._rows(BUFFER):
            event = json.loads(r["event"])
            if under(event.get("project"), root) or under(event.get("cwd"), root):
                out.append(str(r["event_id"]))
        return out

    # -- erasure ----------------------------------------------------------------------

    def scrub_audit(
        self,
        memory_ids: Sequence[str] = (),
        projects: Sequence[str] = (),
        related: Sequence[tuple[str | None, str]] = (),
    ) -> None:
        """Forgotten memories' audit entries (and, for a purge, every entry of these
        projects) keep id, time, decision and reason; their title, text and metadata go.

        ``related`` is (session id, text) of each forgotten memory: other candidates of its
        session that hold its text (a handoff quoting the decision, say, skipped with its
        text kept for "capture anyway") lose their text too."""
        conds = []
        near = _related_entries(self, related)
        if near:
            conds.append("id IN (" + ", ".join(q(i) for i in near) + ")")
        for start in range(0, len(memory_ids), 500):
            conds.append(
                "memory_id IN (" + ", ".join(q(i) for i in memory_ids[start : start + 500]) + ")"
            )
        for start in range(0, len(projects), 500):
            conds.append(
                "project IN (" + ", ".join(q(p) for p in projects[start : start + 500]) + ")"
            )
        if not conds:
            return
        with self.store.writing():
            for cond in conds:
                self.t(AUDIT).update(
                    where=cond, values_sql={"title": "''", "text": "NULL", "metadata": "NULL"}
                )

    def audit_projects_under(self, root: str) -> list[str]:
        """Every project named in the audit that is ``root`` or inside it."""
        table = self.t(AUDIT)
        n = int(table.count_rows("project IS NOT NULL"))
        if not n:
            return []
        names = table.search().where("project IS NOT NULL").select(["project"]).limit(n)
        return sorted({p for p in names.to_arrow()["project"].to_pylist() if under(p, root)})

    def purge_sessions(self, root: str) -> list[str]:
        """Delete the sessions of the repository ``root`` and their buffered events;
        returns the session ids. The caller erases (:meth:`MemoryStore.erase`)."""
        sessions = [s.id for s in self.sessions(limit=1_000_000) if under(s.project, root)]
        events = self.buffered_under(root)
        with self.store.writing():
            for start in range(0, len(sessions), 500):
                part = ", ".join(q(i) for i in sessions[start : start + 500])
                self.t(SESSIONS).delete(f"id IN ({part})")
            for start in range(0, len(events), 500):
                part = ", ".join(q(i) for i in events[start : start + 500])
                self.t(BUFFER).delete(f"event_id IN ({part})")
        return sessions

    def erase(self) -> None:
        """Erase the memory tables and the journal's text-bearing tables (see
        :meth:`MemoryStore.erase`)."""
        self.ensure()
        self.store.erase(others=ERASE_KEYS)

    # -- sessions -------------------------------------------------------------------

    def session(self, session_id: str) -> Session | None:
        rows = self._rows(SESSIONS, f"id = {q(session_id)}", limit=1)
        return _session(rows[0]) if rows else None

    def sessions(self, status: str | None = None, limit: int = 100) -> list[Session]:
        rows = self._rows(SESSIONS, f"status = {q(status)}" if status else None)
        out = sorted((_session(r) for r in rows), key=lambda s: s.last_event_at, reverse=True)
        return out[:limit]

    def current_session(self, agent: str | None = None) -> Session | None:
        """Seed 002's current session: the most recently active one (of an agent), if any."""
        active = [
            s for s in self.sessions(SessionStatus.ACTIVE, limit=10_000) if agent in (None, s.agent)
        ]
        return active[0] if active else None

    def save_sessions(self, sessions: Sequence[Session]) -> None:
        import pyarrow as pa

        if not sessions:
            return
        rows = [
            {"id": s.id, "agent": s.agent, "project": s.project, "started_at": s.started_at,
             "last_event_at": s.last_event_at, "ended_at": s.ended_at, "status": s.status,
             "memory_count": s.memory_count, "event_count": s.event_count}
            for s in sessions
        ]  # fmt: skip
        data = pa.Table.from_pylist(rows, schema=_schemas()[SESSIONS])
        with self.store.writing():
            self.t(SESSIONS).merge_insert(
                "id"
            ).when_matched_update_all().when_not_matched_insert_all().execute(data)

    def session_topics(self, session_ids: Sequence[str]) -> dict[str, str]:
        if not session_ids:
            return {}
        where = (
            "session_id IN (" + ", ".join(q(i) for i in session_ids) + ") AND title != ''"
            " AND decision != 'applied'"
        )
        table = self.t(AUDIT)
        n = int(table.count_rows(where))
        if not n:
            return {}
        # Three short columns only: a session's texts are never read for this.
        rows = table.search().where(where).select(["session_id", "timestamp", "id", "title"])
        found = rows.limit(n).to_arrow().sort_by([("timestamp", "ascending"), ("id", "ascending")])
        out: dict[str, str] = {}
        for sid, title in zip(
            found["session_id"].to_pylist(), found["title"].to_pylist(), strict=True
        ):
            out.setdefault(sid, title)
        return out

    # -- audit ------------------------------------------------------------------------

    def audit(self, entries: Sequence[AuditEntry]) -> None:
        import pyarrow as pa

        if not entries:
            return
        rows = []
        for e in entries:
            row = e.to_dict()
            row["timestamp"] = e.timestamp
            row["metadata"] = (
                json.dumps(e.metadata, sort_keys=True, default=str) if e.metadata else None
            )
            rows.append(row)
        data = pa.Table.from_pylist(rows, schema=_schemas()[AUDIT])
        with self.store.writing():
            self.t(AUDIT).merge_insert("id").when_not_matched_insert_all().execute(data)

    def audit_entries(
        self, *, decision: str | None = None, session_id: str | None = None, memory_id: str | None = None,
        limit: int = 200,
    ) -> list[AuditEntry]:  # fmt: skip
        parts = []
        if decision:
            parts.append(f"decision = {q(decision)}")
        if session_id:
            parts.append(f"session_id = {q(session_id)}")
        if memory_id:
            parts.append(f"memory_id = {q(memory_id)}")
        where = " AND ".join(parts) or None
        table = self.t(AUDIT)
        query = table.search().where(where) if where else table.search()
        n = max(1, table.count_rows(where) if where else table.count_rows())
        # Sorted and cut in Arrow: only the rows returned become Python objects (turning
        # all of a long log into dicts holds the GIL for a UI-visible while).
        found = query.limit(n).to_arrow()
        found = found.sort_by([("timestamp", "descending"), ("id", "descending")])
        return [_audit(r) for r in found.slice(0, limit).to_pylist()]

    def audit_entry(self, entry_id: str) -> AuditEntry | None:
        rows = self._rows(AUDIT, f"id = {q(entry_id)}", limit=1)
        return _audit(rows[0]) if rows else None

    def has_audit_entry(self, entry_id: str) -> bool:
        return int(self.t(AUDIT).count_rows(f"id = {q(entry_id)}")) > 0

    # -- watched files ----------------------------------------------------------------

    def file_hash(self, path: str) -> str | None:
        rows = self._rows(FILE_HASHES, f"path = {q(path)}", limit=1)
        return str(rows[0]["sha256"]) if rows else None

    def file_hashes_under(self, root: str) -> set[str]:
        if FILE_HASHES not in self.store.list_tables():
            return set()  # a reader creates no journal table
        table = self.t(FILE_HASHES)
        where = f"path LIKE {q(root.rstrip(os.sep) + os.sep + '%')}"
        rows = table.search().where(where).select(["path"]).limit(max(1, table.count_rows(where)))
        return {str(r["path"]) for r in rows.to_list()}

    def set_file_hash(self, path: str, sha256: str) -> None:
        import pyarrow as pa

        data = pa.Table.from_pylist(
            [{"path": path, "sha256": sha256, "processed_at": utcnow()}],
            schema=_schemas()[FILE_HASHES],
        )
        with self.store.writing():
            self.t(FILE_HASHES).merge_insert(
                "path"
            ).when_matched_update_all().when_not_matched_insert_all().execute(data)

    # -- review -----------------------------------------------------------------------

    def record_reviews(self, rows: Sequence[dict[str, Any]]) -> None:
        """Rows of memory_id, decision (accepted/rejected), fingerprint, project, embedding."""
        import pyarrow as pa

        if not rows:
            return
        now = utcnow()
        data = pa.Table.from_pylist(
            [{**r, "reviewed_at": now} for r in rows], schema=_schemas()[REVIEWS]
        )
        with self.store.writing():
            self.t(REVIEWS).merge_insert(
                "memory_id"
            ).when_matched_update_all().when_not_matched_insert_all().execute(data)

    def forget_review(self, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        with self.store.writing():
            self.t(REVIEWS).delete("memory_id IN (" + ", ".join(q(i) for i in memory_ids) + ")")

    def reviewed_ids(self) -> set[str]:
        table = self.t(REVIEWS)
        n = int(table.count_rows())
        if not n:
            return set()
        return set(
            table.search().select(["memory_id"]).limit(n).to_arrow()["memory_id"].to_pylist()
        )

    def rejected(self) -> list[dict[str, Any]]:
        """What review rejected: fingerprint, project and embedding of each."""
        return self._rows(REVIEWS, "decision = 'rejected'")

    def review_queue(self, limit: int | None = None) -> list[str]:
        import pyarrow.compute as pc

        table = self.store.table()
        where = "status = 'active' AND source != 'explicit'"
        n = int(table.count_rows(where))
        if not n:
            return []
        rows = table.search().where(where).select(["id", "created_at"]).limit(n).to_arrow()
        rows = rows.sort_by([("created_at", "descending"), ("id", "ascending")])
        reviewed = self.reviewed_ids()
        ids = [i for i in pc.cast(rows["id"], "string").to_pylist() if i not in reviewed]
        return ids if limit is None else ids[:limit]

    def counts(self) -> dict[str, int]:
        return {
            name: int(self.t(name).count_rows())
            for name in (PROCESSED, BUFFER, SESSIONS, AUDIT, FILE_HASHES, REVIEWS)
        }


def _related_entries(journal: Journal, related: Sequence[tuple[str | None, str]]) -> list[str]:
    """Audit entries of these sessions whose title or text holds most of the words of one
    of the given texts (:func:`~lexmem.store.protocol.holds_text`)."""
    by_session: dict[str, list[frozenset[str]]] = {}
    for session_id, text in related:
        if session_id and text_words(text):
            by_session.setdefault(session_id, []).append(text_words(text))
    if not by_session:
        return []
    where = "session_id IN (" + ", ".join(q(s) for s in sorted(by_session)) + ")"
    out = []
    for r in journal._rows(AUDIT, where):
        if any(holds_text(r["title"], r["text"], w) for w in by_session.get(r["session_id"], [])):
            out.append(str(r["id"]))
    return out


def _session(r: dict[str, Any]) -> Session:
    return Session(
        id=r["id"], agent=r["agent"] or "", project=r["project"], started_at=r["started_at"],
        last_event_at=r["last_event_at"], ended_at=r["ended_at"], status=r["status"],
        memory_count=int(r["memory_count"] or 0), event_count=int(r["event_count"] or 0),
    )  # fmt: skip


def _audit(r: dict[str, Any]) -> AuditEntry:
    return AuditEntry(
        id=r["id"], timestamp=r["timestamp"], session_id=r["session_id"], candidate_id=r["candidate_id"],
        decision=r["decision"], reason=r["reason"], confidence=float(r["confidence"] or 0.0),
        rule=r["rule"] or "", kind=r["kind"] or "", memory_id=r["memory_id"], title=r["title"] or "",
        project=r["project"], text=r["text"], metadata=json.loads(r["metadata"]) if r["metadata"] else {},
    )  # fmt: skip


def review_queue(store: MemoryStore, limit: int | None = None) -> list[str]:
    """Ids of memories captured automatically and not reviewed yet, newest first
    (:meth:`Journal.review_queue`)."""
    return Journal(store).review_queue(limit)
