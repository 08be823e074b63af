"""The capture journal on PostgreSQL: :class:`PostgresJournal` implements
:class:`lexmem.store.protocol.JournalBackend` in the team database's journal tables
(step 3 of :mod:`lexmem.store.postgres.schema`), beside a :class:`PostgresStore`'s
memories, under the same write lock.

It keeps the LanceDB journal's (:mod:`lexmem.store.journal`) semantics: a retry adds
nothing (``ON CONFLICT DO NOTHING`` by event id and audit id), sessions and reviews are
replaced by id, a session's buffered events come back in ``_seq`` order, and every order
that compares strings compares them as Python does (code points: ``COLLATE "C"``), whatever
the database's collation. Each operation is one transaction: all or nothing.

Where PostgreSQL cannot hold a value as LanceDB does: a NUL character in the audit's and
reviews' texts is written as U+FFFD (PostgreSQL's text refuses NUL), and in audit metadata
(``jsonb``) so is a NUL, and NaN or an infinity becomes its text (``"nan"``), as any value
JSON has no word for already does. A buffered event is kept as JSON text, whole.

Erasure on a server: a deleted or updated row stays in its table's pages (a dead tuple)
until the table is rewritten, and an index keeps its keys. :meth:`PostgresJournal.erase`
and :meth:`PostgresJournal.release` therefore rewrite the tables that can hold a memory's
or an event's text with ``VACUUM FULL`` (a new file of the live rows, the indexes and the
TOAST table built again, the old files emptied at commit). What stays:

- the write-ahead log (``pg_wal``) holds what was written until the server recycles the
  segment (after a checkpoint, or later when it is archived or a replication slot holds
  it), and a base backup or replica holds what it copied;
- a row version that a transaction open at the time of the rewrite can still see is
  copied into the new file (PostgreSQL's rule); lexmem's own transactions are short;
- the planner's column statistics (the catalog ``pg_statistic``), which ``ANALYZE`` (and
  autovacuum) take from a sample of rows, may have held a short value (a project's path,
  a title) as a common value or a histogram bound. The rewrite analyses the tables again,
  which replaces them, and :meth:`PostgresJournal.erase` rewrites the catalog too when its
  role owns the database (or is a superuser); for another role the replaced catalog rows
  stay in its pages until the server vacuums it. :meth:`PostgresJournal.release`, run at
  every window, leaves the catalog to the next erase.

``VACUUM FULL`` takes each table's exclusive lock for its rewrite: readers wait meanwhile.
"""

from __future__ import annotations

import array
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from lexmem.models import utcnow
from lexmem.store.postgres.schema import SCHEMA
from lexmem.store.postgres.store import PostgresStore
from lexmem.store.protocol import AuditEntry, Session, SessionStatus, holds_text, text_words, under

__all__ = ["ERASED_TABLES", "PostgresJournal"]

# The tables whose rows can hold a memory's text or an event's: what erase() rewrites
# (the memories' tables, and the journal's as the LanceDB journal's ERASE_KEYS). ``processed``
# and ``file_hashes`` hold ids, paths and hashes only.
ERASED_TABLES = (
    "memories",
    "memory_links",
    "memory_confidence_history",
    "buffer",
    "sessions",
    "audit",
    "reviews",
)
_JOURNAL_TABLES = ("processed", "buffer", "sessions", "audit", "file_hashes", "reviews")

_SESSION_COLUMNS = (
    "id, agent, project, started_at, last_event_at, ended_at, status, memory_count, event_count"
)
_AUDIT_COLUMNS = (
    'id, "timestamp", session_id, candidate_id, decision, reason, confidence, rule, kind,'
    " memory_id, title, project, text, metadata"
)


def _t(name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(SCHEMA), sql.Identifier(name))


def _root_args(root: str) -> tuple[str, str, str]:
    """The parameters of :data:`_UNDER` for ``root``: :func:`under`'s test, in SQL."""
    root = root.rstrip("/\\") or root
    return root, root + "/", root + "\\"


# ``{col}`` is the folder ``root`` or inside it (lexmem.store.protocol.under): an exact
# prefix, a separator after it, so /a/bc is not inside /a/b; no LIKE, whose _ and % a path
# may hold.
_UNDER = "({col} <> '' AND ({col} = %s OR starts_with({col}, %s) OR starts_with({col}, %s)))"


def _clean(text: str | None) -> str | None:
    """``text`` as PostgreSQL can hold it: its text type refuses NUL, written as U+FFFD."""
    return text.replace("\x00", "\ufffd") if text else text


def _storable(value: Any) -> Any:
    """Audit metadata as ``jsonb`` takes it: NUL in a string (or key) as U+FFFD, and a
    number JSON has no word for (NaN, infinities) as its text, as ``default=str`` writes any
    other value JSON cannot."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {_storable(str(k)): _storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(v) for v in value]
    return value


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def _vector_text(values: Sequence[float] | None) -> str | None:
    if values is None:
        return None
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def _vector(text: str | None) -> list[float] | None:
    """pgvector's text as a list of floats, each the float32 the column holds (as the
    LanceDB journal's list of float32 reads back)."""
    if text is None:
        return None
    inner = text.strip()[1:-1]
    return array.array("f", (float(v) for v in inner.split(",") if v)).tolist()


class PostgresJournal:
    """The journal's tables in the store's database."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.db = store.db

    def ensure(self) -> None:
        """The tables are made by the schema's steps, in the transaction of each, when the
        store opens (:mod:`lexmem.store.postgres.migrations`): none is ever half made."""

    # -- idempotency and the event buffer --------------------------------------------

    def seen(self, event_ids: Sequence[str]) -> set[str]:
        if not event_ids:
            return set()
        with self.db.tx("reading the events taken in") as cur:
            cur.execute(
                sql.SQL("SELECT event_id FROM {} WHERE event_id = ANY(%s)").format(_t("processed")),
                (list(event_ids),),
            )
            return {str(r[0]) for r in cur.fetchall()}

    def take_in(
        self, events: Sequence[Mapping[str, Any]], buffered: Sequence[Mapping[str, Any]]
    ) -> None:
        if not events:
            return
        now = utcnow()
        buffer_rows = [
            (e["event_id"], e["session_id"], e["_seq"], json.dumps(e, ensure_ascii=False), now)
            for e in buffered
        ]
        processed_rows = [(e["event_id"], e["session_id"], now) for e in events]
        with self.db.write("taking events in") as cur:
            if buffer_rows:
                cur.executemany(
                    sql.SQL(
                        "INSERT INTO {} (event_id, session_id, seq, event, received_at)"
                        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (event_id) DO NOTHING"
                    ).format(_t("buffer")),
                    buffer_rows,
                )
            cur.executemany(
                sql.SQL(
                    "INSERT INTO {} (event_id, session_id, processed_at) VALUES (%s, %s, %s)"
                    " ON CONFLICT (event_id) DO NOTHING"
                ).format(_t("processed")),
                processed_rows,
            )

    def buffered(self, session_id: str) -> list[dict[str, Any]]:
        with self.db.tx("reading a session's buffered events") as cur:
            cur.execute(
                sql.SQL(
                    'SELECT event FROM {} WHERE session_id = %s ORDER BY seq COLLATE "C",'
                    ' event_id COLLATE "C"'
                ).format(_t("buffer")),
                (session_id,),
            )
            return [json.loads(r[0]) for r in cur.fetchall()]

    def buffered_sessions(self) -> list[str]:
        with self.db.tx("reading the buffered sessions") as cur:
            cur.execute(
                sql.SQL('SELECT DISTINCT session_id COLLATE "C" AS s FROM {} ORDER BY s').format(
                    _t("buffer")
                )
            )
            return [str(r[0]) for r in cur.fetchall()]

    def release(self, event_ids: Sequence[str]) -> None:
        """Drop buffered events whose window has been extracted and rewrite the buffer, so
        raw event text does not outlive its drain in the table's files (the module's
        docstring says what stays). The buffer holds only the open sessions' events, so
        the rewrite is small."""
        if not event_ids:
            return
        with self.db.writing():
            with self.db.write("letting buffered events go") as cur:
                cur.execute(
                    sql.SQL("DELETE FROM {} WHERE event_id = ANY(%s)").format(_t("buffer")),
                    (list(event_ids),),
                )
            self._rewrite(("buffer",), "erasing released events")

    def purge_sessions(self, root: str) -> list[str]:
        args = _root_args(root)
        with self.db.write("purging a repository's sessions") as cur:
            cur.execute(
                sql.SQL(
                    "DELETE FROM {} WHERE " + _UNDER.format(col="project") + " RETURNING id,"
                    " last_event_at"
                ).format(_t("sessions")),
                args,
            )
            gone = sorted(cur.fetchall(), key=lambda r: str(r[0]))
            gone.sort(key=lambda r: r[1], reverse=True)
            # A buffered event names its repository inside its JSON (project, or the
            # working folder): read in Python, as an event may hold text jsonb refuses.
            cur.execute(sql.SQL("SELECT event_id, event FROM {}").format(_t("buffer")))
            events = []
            for event_id, text in cur.fetchall():
                event = json.loads(text)
                if under(event.get("project"), root) or under(event.get("cwd"), root):
                    events.append(str(event_id))
            if events:
                cur.execute(
                    sql.SQL("DELETE FROM {} WHERE event_id = ANY(%s)").format(_t("buffer")),
                    (events,),
                )
        return [str(r[0]) for r in gone]

    # -- sessions ---------------------------------------------------------------------

    def session(self, session_id: str) -> Session | None:
        with self.db.tx("reading a session") as cur:
            cur.execute(
                sql.SQL("SELECT " + _SESSION_COLUMNS + " FROM {} WHERE id = %s").format(
                    _t("sessions")
                ),
                (session_id,),
            )
            row = cur.fetchone()
        return _session(row) if row else None

    def sessions(self, status: str | None = None, limit: int = 100) -> list[Session]:
        return self._sessions(status, None, limit)

    def current_session(self, agent: str | None = None) -> Session | None:
        found = self._sessions(SessionStatus.ACTIVE, agent, 1)
        return found[0] if found else None

    def _sessions(self, status: str | None, agent: str | None, limit: int) -> list[Session]:
        conds, args = [], []
        if status:
            conds.append("status = %s")
            args.append(status)
        if agent is not None:
            conds.append("agent = %s")
            args.append(agent)
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        with self.db.tx("reading sessions") as cur:
            cur.execute(
                sql.SQL(
                    "SELECT " + _SESSION_COLUMNS + " FROM {}" + where + " ORDER BY last_event_at"
                    ' DESC, id COLLATE "C" LIMIT %s'
                ).format(_t("sessions")),
                (*args, limit),
            )
            return [_session(r) for r in cur.fetchall()]

    def save_sessions(self, sessions: Sequence[Session]) -> None:
        if not sessions:
            return
        rows = [
            (s.id, s.agent, s.project, s.started_at, s.last_event_at, s.ended_at, s.status,
             s.memory_count, s.event_count)
            for s in sessions
        ]  # fmt: skip
        with self.db.write("saving sessions") as cur:
            cur.executemany(
                sql.SQL(
                    "INSERT INTO {} (" + _SESSION_COLUMNS + ") VALUES (%s, %s, %s, %s, %s, %s,"
                    " %s, %s, %s) ON CONFLICT (id) DO UPDATE SET agent = EXCLUDED.agent,"
                    " project = EXCLUDED.project, started_at = EXCLUDED.started_at,"
                    " last_event_at = EXCLUDED.last_event_at, ended_at = EXCLUDED.ended_at,"
                    " status = EXCLUDED.status, memory_count = EXCLUDED.memory_count,"
                    " event_count = EXCLUDED.event_count"
                ).format(_t("sessions")),
                rows,
            )

    def session_topics(self, session_ids: Sequence[str]) -> dict[str, str]:
        if not session_ids:
            return {}
        # Three short columns only: a session's texts are never read for this.
        with self.db.tx("reading sessions' topics") as cur:
            cur.execute(
                sql.SQL(
                    "SELECT DISTINCT ON (session_id) session_id, title FROM {}"
                    " WHERE session_id = ANY(%s) AND title <> '' AND decision <> 'applied'"
                    ' ORDER BY session_id, "timestamp", id COLLATE "C"'
                ).format(_t("audit")),
                (list(session_ids),),
            )
            return {str(sid): str(title) for sid, title in cur.fetchall()}

    # -- the audit log ----------------------------------------------------------------

    def audit(self, entries: Sequence[AuditEntry]) -> None:
        if not entries:
            return
        rows = [
            (e.id, e.timestamp, e.session_id, _clean(e.candidate_id), _clean(e.decision),
             _clean(e.reason), e.confidence, _clean(e.rule), _clean(e.kind), e.memory_id,
             _clean(e.title), e.project, _clean(e.text),
             json.dumps(_storable(e.metadata), sort_keys=True, default=str) if e.metadata else None)
            for e in entries
        ]  # fmt: skip
        with self.db.write("adding to the audit log") as cur:
            cur.executemany(
                sql.SQL(
                    "INSERT INTO {} (" + _AUDIT_COLUMNS + ") VALUES (%s, %s, %s, %s, %s, %s,"
                    " %s, %s, %s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (id) DO NOTHING"
                ).format(_t("audit")),
                rows,
            )

    def audit_entries(
        self,
        *,
        decision: str | None = None,
        session_id: str | None = None,
        memory_id: str | None = None,
        limit: int = 200,
    ) -> list[AuditEntry]:
        conds, args = [], []
        for column, value in (
            ("decision", decision),
            ("session_id", session_id),
            ("memory_id", memory_id),
        ):
            if value:
                conds.append(f"{column} = %s")
                args.append(value)
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        with self.db.tx("reading the audit log") as cur:
            cur.execute(
                sql.SQL(
                    "SELECT " + _AUDIT_COLUMNS + " FROM {}" + where + ' ORDER BY "timestamp"'
                    ' DESC, id COLLATE "C" DESC LIMIT %s'
                ).format(_t("audit")),
                (*args, limit),
            )
            return [_audit(r) for r in cur.fetchall()]

    def audit_entry(self, entry_id: str) -> AuditEntry | None:
        with self.db.tx("reading an audit entry") as cur:
            cur.execute(
                sql.SQL("SELECT " + _AUDIT_COLUMNS + " FROM {} WHERE id = %s").format(_t("audit")),
                (entry_id,),
            )
            row = cur.fetchone()
        return _audit(row) if row else None

    def has_audit_entry(self, entry_id: str) -> bool:
        with self.db.tx("reading an audit entry") as cur:
            cur.execute(
                sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE id = %s)").format(_t("audit")),
                (entry_id,),
            )
            row = cur.fetchone()
        return bool(row and row[0])

    def audit_projects_under(self, root: str) -> list[str]:
        with self.db.tx("reading the audit's projects") as cur:
            cur.execute(
                sql.SQL(
                    "SELECT DISTINCT project FROM {} WHERE " + _UNDER.format(col="project")
                ).format(_t("audit")),
                _root_args(root),
            )
            return sorted(str(r[0]) for r in cur.fetchall())

    def scrub_audit(
        self,
        memory_ids: Sequence[str] = (),
        projects: Sequence[str] = (),
        related: Sequence[tuple[str | None, str]] = (),
    ) -> None:
        by_session: dict[str, list[frozenset[str]]] = {}
        for session_id, text in related:
            if session_id and text_words(text):
                by_session.setdefault(session_id, []).append(text_words(text))
        if not (memory_ids or projects or by_session):
            return
        with self.db.write("scrubbing the audit log") as cur:
            near: list[str] = []
            if by_session:
                cur.execute(
                    sql.SQL(
                        "SELECT id, session_id, title, text FROM {} WHERE session_id = ANY(%s)"
                    ).format(_t("audit")),
                    (sorted(by_session),),
                )
                near = [
                    str(entry_id)
                    for entry_id, sid, title, text in cur.fetchall()
                    if any(holds_text(title, text, w) for w in by_session.get(sid, []))
                ]
            cur.execute(
                sql.SQL(
                    "UPDATE {} SET title = '', text = NULL, metadata = NULL WHERE (id = ANY(%s)"
                    " OR memory_id = ANY(%s) OR project = ANY(%s)) AND (title <> '' OR text IS"
                    " NOT NULL OR metadata IS NOT NULL)"
                ).format(_t("audit")),
                (near, list(memory_ids), list(projects)),
            )

    def erase(self) -> None:
        """Rewrite the memories' tables and the journal's text-bearing ones
        (:data:`ERASED_TABLES`) so no deleted or overwritten row is left in their files
        (the module's docstring says what stays on the server)."""
        self._rewrite(ERASED_TABLES, "erasing forgotten text", statistics=True)

    def _rewrite(self, tables: Sequence[str], doing: str, *, statistics: bool = False) -> None:
        """``VACUUM FULL`` of ``tables`` under the write lock, analysed again; with
        ``statistics``, the planner's statistics catalog rewritten too when the role may
        (the database's owner or a superuser). VACUUM runs outside a transaction: on this
        thread's writing connection, switched to autocommit for it."""

        def catalog(conn: psycopg.Connection[Any]) -> None:
            # ANALYZE replaced the statistics sampled from these tables (a title or a
            # path among their common values); the replaced catalog rows stay in
            # pg_statistic's pages until it is rewritten, which its owner may do.
            if statistics and _owns_database(conn):
                conn.execute("VACUUM FULL pg_catalog.pg_statistic")

        vacuum = sql.SQL("VACUUM (FULL, ANALYZE) {}").format(
            sql.SQL(", ").join(_t(t) for t in tables)
        )
        self.store.db.rewrite([vacuum], doing, after=catalog)

    # -- watched files ----------------------------------------------------------------

    def file_hash(self, path: str) -> str | None:
        with self.db.tx("reading a watched file's hash") as cur:
            cur.execute(
                sql.SQL("SELECT sha256 FROM {} WHERE path = %s").format(_t("file_hashes")),
                (path,),
            )
            row = cur.fetchone()
        return str(row[0]) if row else None

    def set_file_hash(self, path: str, sha256: str) -> None:
        with self.db.write("recording a watched file's hash") as cur:
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (path, sha256, processed_at) VALUES (%s, %s, %s)"
                    " ON CONFLICT (path) DO UPDATE SET sha256 = EXCLUDED.sha256,"
                    " processed_at = EXCLUDED.processed_at"
                ).format(_t("file_hashes")),
                (path, sha256, utcnow()),
            )

    def file_hashes_under(self, root: str) -> set[str]:
        prefix = root.rstrip(os.sep) + os.sep
        with self.db.tx("reading watched files' hashes") as cur:
            cur.execute(
                sql.SQL("SELECT path FROM {} WHERE starts_with(path, %s)").format(
                    _t("file_hashes")
                ),
                (prefix,),
            )
            return {str(r[0]) for r in cur.fetchall()}

    # -- review -----------------------------------------------------------------------

    def record_reviews(self, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        now = utcnow()
        values = [
            (r.get("memory_id"), r.get("decision"), r.get("fingerprint"), r.get("project"), now,
             _vector_text(r.get("embedding")), _clean(r.get("particulars")))
            for r in rows
        ]  # fmt: skip
        with self.db.write("recording reviews") as cur:
            cur.executemany(
                sql.SQL(
                    "INSERT INTO {} (memory_id, decision, fingerprint, project, reviewed_at,"
                    " embedding, particulars) VALUES (%s, %s, %s, %s, %s, %s::vector, %s)"
                    " ON CONFLICT (memory_id) DO UPDATE SET decision = EXCLUDED.decision,"
                    " fingerprint = EXCLUDED.fingerprint, project = EXCLUDED.project,"
                    " reviewed_at = EXCLUDED.reviewed_at, embedding = EXCLUDED.embedding,"
                    " particulars = EXCLUDED.particulars"
                ).format(_t("reviews")),
                values,
            )

    def forget_review(self, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        with self.db.write("forgetting reviews") as cur:
            cur.execute(
                sql.SQL("DELETE FROM {} WHERE memory_id = ANY(%s)").format(_t("reviews")),
                (list(memory_ids),),
            )

    def reviewed_ids(self) -> set[str]:
        with self.db.tx("reading the reviews") as cur:
            cur.execute(sql.SQL("SELECT memory_id FROM {}").format(_t("reviews")))
            return {str(r[0]) for r in cur.fetchall()}

    def rejected(self) -> list[dict[str, Any]]:
        with self.db.tx("reading review's rejections") as cur:
            cur.execute(
                sql.SQL(
                    "SELECT memory_id, decision, fingerprint, project, reviewed_at,"
                    " embedding::text, particulars FROM {} WHERE decision = 'rejected'"
                    ' ORDER BY reviewed_at, memory_id COLLATE "C"'
                ).format(_t("reviews")),
            )
            rows = cur.fetchall()
        return [
            {"memory_id": mid, "decision": decision, "fingerprint": fp, "project": project,
             "reviewed_at": _utc(at), "embedding": _vector(emb), "particulars": particulars}
            for mid, decision, fp, project, at, emb, particulars in rows
        ]  # fmt: skip

    def review_queue(self, limit: int | None = None) -> list[str]:
        with self.db.tx("reading the review queue") as cur:
            cur.execute(
                sql.SQL(
                    "SELECT m.id FROM {} m WHERE m.status = 'active' AND m.source <> 'explicit'"
                    " AND NOT EXISTS (SELECT 1 FROM {} r WHERE r.memory_id = m.id)"
                    ' ORDER BY m.created_at DESC, m.id COLLATE "C" LIMIT %s'
                ).format(_t("memories"), _t("reviews")),
                (limit,),
            )
            return [str(r[0]) for r in cur.fetchall()]

    def counts(self) -> dict[str, int]:
        query = sql.SQL("SELECT ") + sql.SQL(", ").join(
            sql.SQL("(SELECT count(*) FROM {})").format(_t(name)) for name in _JOURNAL_TABLES
        )
        with self.db.tx("counting the journal's rows") as cur:
            cur.execute(query)
            row = cur.fetchone()
        assert row is not None  # a SELECT of counts returns one row
        return {name: int(n) for name, n in zip(_JOURNAL_TABLES, row, strict=True)}


def _owns_database(conn: psycopg.Connection[Any]) -> bool:
    """Whether the connection's role may vacuum the database's catalogs (it has its
    owner's privileges; a superuser has every role's)."""
    row = conn.execute(
        "SELECT pg_has_role(current_user, datdba, 'USAGE') FROM pg_database"
        " WHERE datname = current_database()"
    ).fetchone()
    return bool(row and row[0])


def _session(r: Sequence[Any]) -> Session:
    (sid, agent, project, started, last, ended, status, memories, events) = r
    return Session(
        id=sid, agent=agent or "", project=project, started_at=_utc(started) or started,
        last_event_at=_utc(last) or last, ended_at=_utc(ended), status=status,
        memory_count=int(memories or 0), event_count=int(events or 0),
    )  # fmt: skip


def _audit(r: Sequence[Any]) -> AuditEntry:
    (eid, ts, sid, candidate, decision, reason, confidence, rule, kind, mid, title, project,
     text, metadata) = r  # fmt: skip
    return AuditEntry(
        id=eid, timestamp=_utc(ts) or ts, session_id=sid, candidate_id=candidate,
        decision=decision, reason=reason, confidence=float(confidence or 0.0), rule=rule or "",
        kind=kind or "", memory_id=mid, title=title or "", project=project, text=text,
        metadata=metadata or {},
    )  # fmt: skip
