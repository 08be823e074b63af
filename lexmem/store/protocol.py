"""The store's boundary: every operation the rest of lexmem asks of a storage backend.

Three protocols: :class:`MemoryBackend` (the memories, their links and confidence history,
and the maintenance of their tables), :class:`JournalBackend` (the capture journal:
processed events and the event buffer, sessions, the audit log, reviews and watched
files' hashes) and :class:`SearchBackend` (hybrid search). Code outside :mod:`lexmem.store` types against these, never against a
backend's class, and never builds a backend's query: what it needs is a named operation
here. :mod:`lexmem.store.backends` makes a backend by name.

LanceDB (:class:`lexmem.store.lance.MemoryStore`, :class:`lexmem.store.journal.Journal`) is
the one backend today. A second one (PostgreSQL + pgvector) implements every member with
the promises written in each docstring, and passes the conformance suite: the store's tests
run once per backend (``tests/store_backends.py``), and ``tests/test_store_protocol.py``
checks that each backend has every member here with the same signature.

Promises every backend keeps:

- Reads may run in any process, on any thread; writes are serialised across processes
  (:meth:`MemoryBackend.writing`) and each operation commits all or nothing.
- A missing id is :class:`~lexmem.errors.NotFoundError` where the docstring says so, and
  skipped where it says so.
- The backend's own failures leave it as :class:`~lexmem.errors.StoreError` subclasses:
  :class:`~lexmem.errors.StoreIOError` when the machine failed a read or write,
  :class:`~lexmem.errors.StoreDamagedError` when a table cannot be read; the backend's
  exception is the ``__cause__``.
- Forgetting erases: after :meth:`MemoryBackend.delete_many` (with ``erase``) and
  :meth:`JournalBackend.erase`, no file of the data folder holds a byte of the text.

The value types the operations return (:class:`Neighbour`, :class:`DigestColumns`, the
journal's :class:`Session` and :class:`AuditEntry`) are here too, with the rules every
journal applies the same way (:func:`under`, :func:`holds_text`); the memory types are in
:mod:`lexmem.models`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from lexmem.models import MemorySource, MemoryStatus, MemoryType

if TYPE_CHECKING:
    import pyarrow as pa

    from lexmem.config import Paths
    from lexmem.models import ConfidencePoint, Memory, MemoryLink
    from lexmem.store.search import SearchResult

__all__ = [
    "AuditEntry",
    "DigestColumns",
    "JournalBackend",
    "MemoryBackend",
    "MemoryFilter",
    "Neighbour",
    "SearchBackend",
    "Session",
    "SessionStatus",
    "holds_text",
    "members",
    "text_words",
    "under",
]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a list, count or search looks at. ``None`` means any. Every field
    given must hold (AND); a backend renders it as its own query."""

    project: str | None = None
    type: MemoryType | None = None
    status: MemoryStatus | None = MemoryStatus.ACTIVE
    source: MemorySource | None = None
    pinned: bool | None = None
    session_id: str | None = None
    user_id: str | None = None
    created_after: datetime | None = None  # at or after
    created_before: datetime | None = None  # strictly before
    source_document: str | None = None
    # Projects left out (what an agent is never served: opted-out repositories); memories
    # with no project stay in.
    exclude_projects: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A memory near a vector: its id, its content and its cosine similarity (1 is the same
    direction)."""

    id: str
    content: str
    similarity: float


@dataclass(frozen=True, slots=True)
class DigestColumns:
    """The columns a context digest ranks by, one entry per memory, as numpy arrays (the
    digest scores 100,000 memories at once, vectorised).

    Times are microseconds since the epoch as float64, NaN where unset; ``salience`` and
    ``access_count`` are float64 with 0 where unset; ``pinned`` and ``general`` (the memory
    has no project) are bool. :attr:`keys` gives, for positions into these arrays (a
    sequence or numpy array of ints), each
    memory's (id, fingerprint, source document): the digest reads those only for the few
    rows that can reach it.
    """

    salience: Any
    pinned: Any
    access_count: Any
    created_us: Any
    last_accessed_us: Any
    last_reinforced_us: Any
    general: Any
    keys: Callable[[Any], list[tuple[str, str | None, str | None]]]  # positions: ints

    def __len__(self) -> int:
        return len(self.salience)


def under(path: str | None, root: str) -> bool:
    """Whether ``path`` is the folder ``root`` or inside it (the opt-out purge's test)."""
    if not path:
        return False
    root = root.rstrip("/\\") or root
    return path == root or path.startswith(root + "/") or path.startswith(root + "\\")


def text_words(text: str | None) -> frozenset[str]:
    """The words of ``text`` that :func:`holds_text` compares: case-folded, longer than two
    characters."""
    return frozenset(w for w in re.findall(r"\w+", (text or "").casefold()) if len(w) > 2)


# An audit entry holds a forgotten memory's text when it has this share of its words:
# extraction rewords a little ("Decided: use X" becomes "Decision: use X").
HOLDS = 0.75


def holds_text(title: str | None, text: str | None, words: frozenset[str]) -> bool:
    """Whether an audit entry's ``title`` or ``text`` holds most of ``words`` (:data:`HOLDS`
    of them): :meth:`JournalBackend.scrub_audit`'s "related" rule."""
    mine = text_words(title) | text_words(text)
    return len(words & mine) >= HOLDS * len(words)


class SessionStatus:
    ACTIVE = "active"
    COMPLETED = "completed"
    ABANDONED = "abandoned"


@dataclass(slots=True)
class Session:
    id: str
    agent: str
    project: str | None
    started_at: datetime
    last_event_at: datetime
    ended_at: datetime | None = None
    status: str = SessionStatus.ACTIVE
    memory_count: int = 0
    event_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "agent": self.agent, "project": self.project,
            "started_at": self.started_at.isoformat(), "last_event_at": self.last_event_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None, "status": self.status,
            "memory_count": self.memory_count, "event_count": self.event_count,
        }  # fmt: skip


@dataclass(slots=True)
class AuditEntry:
    id: str
    timestamp: datetime
    session_id: str | None
    candidate_id: str
    decision: str  # saved, skipped, reinforced, quarantined, superseded
    reason: str
    confidence: float
    rule: str
    kind: str = ""
    memory_id: str | None = None
    title: str = ""
    project: str | None = None
    text: str | None = (
        None  # kept only where it is safe to keep (never secrets or opted-out content)
    )
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["timestamp"] = self.timestamp.isoformat()
        return out


class MemoryBackend(Protocol):
    """The memories (seed 004's ``IMemoryStore``), their links and confidence trajectory,
    and the upkeep of the tables that hold them."""

    # -- what it is -----------------------------------------------------------------

    @property
    def paths(self) -> Paths:
        """The data folder it lives in (a server backend keeps its local files there)."""

    @property
    def dim(self) -> int:
        """How many numbers a vector has in this store."""

    @property
    def stored_space(self) -> str:
        """The vector space the stored vectors belong to (the embedding model's id)."""

    @property
    def needs_reembed(self) -> bool:
        """Whether the stored vectors are from another space than the one it was opened
        for: vector search must wait for :meth:`reembed`."""

    # -- opening, reading, writing --------------------------------------------------

    def open(self) -> Self:
        """Create the tables when there are none, bring an older layout up to date (all or
        nothing) or refuse a newer one untouched; returns the store, ready."""

    def close(self) -> None:
        """Let go of every handle; the store is not used after."""

    def refresh(self) -> None:
        """See every commit made since this store opened, by any process."""

    def reading(self, read: Callable[[], _T]) -> _T:
        """Run ``read`` (which reads this store) and return what it returns; a backend whose
        reads can lose the version they read to another process's erasure runs it once
        more on a fresh view."""

    def writing(self) -> AbstractContextManager[None]:
        """The store's write lock, held across processes for the ``with`` block (re-entrant
        in a thread): several operations, and the journal's, commit without another
        writer between them. :class:`~lexmem.errors.StoreLockedError` when another process
        holds it too long."""

    # -- reading memories -----------------------------------------------------------

    def count(self, flt: MemoryFilter | None = None) -> int:
        """How many memories ``flt`` admits (every memory, of any status, without one)."""

    def resolve_id(self, ident: str) -> str:
        """The full id from an id or a unique prefix of at least 4 characters;
        :class:`~lexmem.errors.InvalidInputError` for a short, malformed or ambiguous one,
        :class:`~lexmem.errors.NotFoundError` when nothing starts so."""

    def get(self, memory_id: str, *, with_embedding: bool = True) -> Memory:
        """One memory; :class:`~lexmem.errors.NotFoundError` when there is none."""

    def get_optional(self, memory_id: str, *, with_embedding: bool = True) -> Memory | None:
        """One memory, or None."""

    def get_many(self, ids: Sequence[str], *, with_embedding: bool = False) -> list[Memory]:
        """Memories in the order of ``ids``; unknown ids are skipped."""

    def get_by_type(self, mtype: MemoryType, user_id: str, limit: int = 50) -> list[Memory]:
        """Active memories of a type for a user, most salient first (seed 004)."""

    def iter_all(self, *, batch: int = 512, with_embedding: bool = True) -> Iterator[list[Memory]]:
        """Every memory (of any status), oldest first, ``batch`` at a time."""

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are stored."""

    def list_ids(self, flt: MemoryFilter | None = None, *, sort: str = "created") -> list[str]:
        """The ids ``flt`` admits in the order of ``sort`` (salience, created, accessed,
        updated: newest or highest first; title: A to Z), ties by id. Cheap enough for
        100,000 memories."""

    def list_memories(
        self,
        flt: MemoryFilter | None = None,
        *,
        sort: str = "created",
        limit: int | None = 50,
        offset: int = 0,
    ) -> list[Memory]:
        """One page of :meth:`list_ids`' order, without vectors."""

    def ids_superseded_by(self, memory_id: str) -> list[str]:
        """The memories whose replacement is ``memory_id`` (of any status)."""

    def ids_in_projects(self, projects: Sequence[str]) -> list[str]:
        """Every memory (of any status) whose project is one of ``projects``."""

    def project_names(self) -> list[str]:
        """Every project a memory names (of any status), sorted, once each."""

    def recent_fingerprint(self, fingerprint: str, since: datetime) -> str | None:
        """An active memory with this fingerprint created at ``since`` or later, or None
        (capture's exact-repeat check)."""

    def nearest(self, embedding: Sequence[float], flt: MemoryFilter, k: int) -> list[Neighbour]:
        """The ``k`` memories ``flt`` admits that are nearest ``embedding`` by cosine,
        nearest first (an approximate index may serve it once the store is large)."""

    def archived_before(self, cutoff: datetime, limit: int = 10_000) -> list[str]:
        """Archived, unpinned memories last updated (or, never updated, created) before
        ``cutoff``: what retention forgets. At most ``limit``."""

    def digest_columns(self, project: str | None) -> DigestColumns:
        """The ranking columns of the active memories of ``project`` and of those with no
        project; with None, of those with no project only."""

    def get_links_from(self, memory_id: str) -> list[MemoryLink]:
        """Links out of a memory, oldest first."""

    def get_links_to(self, memory_id: str) -> list[MemoryLink]:
        """Links into a memory, oldest first."""

    def all_links(self) -> list[MemoryLink]:
        """Every link, oldest first."""

    def all_confidence(self) -> list[ConfidencePoint]:
        """Every confidence point of every memory."""

    def confidence_history(self, memory_id: str) -> list[ConfidencePoint]:
        """A memory's confidence trajectory, oldest first."""

    def supersede_chain(self, memory_id: str, *, forward: bool = True) -> list[Memory]:
        """The memories that replaced this one in turn (forward) or that it replaced, in
        turn (backward); stops at a cycle or a gap."""

    # -- writing memories -----------------------------------------------------------

    def store(self, memory: Memory) -> Memory:
        """Persist one new memory (see :meth:`store_many`)."""

    def store_many(self, memories: Sequence[Memory]) -> list[Memory]:
        """Persist new memories with all their fields in one commit, each with the first
        point of its confidence trajectory, and give each conversation memory its session
        neighbours' text as context (and them its). An id already stored, or twice in the
        batch, or a vector of the wrong size: :class:`~lexmem.errors.InvalidInputError`,
        and nothing is written."""

    def edit(self, memory_id: str, **fields: Any) -> Memory:
        """Change some fields (content, title, type, project, embedding, salience,
        importance, metadata, fingerprint, word_count, learning_context); another field is
        :class:`~lexmem.errors.InvalidInputError`, an unknown id
        :class:`~lexmem.errors.NotFoundError`."""

    def update_salience(self, memory_id: str, salience: float) -> None:
        """Set salience in [0, 1] (another value is :class:`~lexmem.errors.InvalidInputError`);
        :class:`~lexmem.errors.NotFoundError` for an unknown id."""

    def record_confidence(self, memory_id: str, confidence: float) -> None:
        """Set the memory's confidence in [0, 1] and append it to its trajectory."""

    def set_pinned(self, memory_id: str, pinned: bool) -> None:
        """Pin or unpin; :class:`~lexmem.errors.NotFoundError` for an unknown id."""

    def archive(self, memory_id: str) -> None:
        """Status archived; :class:`~lexmem.errors.NotFoundError` for an unknown id."""

    def restore(self, memory_id: str) -> None:
        """Active again, its replacement forgotten; :class:`~lexmem.errors.NotFoundError`."""

    def supersede(self, memory_id: str, replacement_id: str) -> None:
        """``memory_id`` superseded by ``replacement_id``, with a ``supersedes`` link;
        refuses a cycle, a memory already superseded by another, and unknown ids."""

    def reinforce(self, memory_id: str, boost: float = 0.1) -> Memory:
        """Salience raised toward 1 by ``boost`` of the way, last reinforced now."""

    def decay_all(self, factor: float) -> int:
        """Multiply the salience of active, unpinned memories above the floor by
        ``factor`` in (0, 1]; returns how many changed."""

    def record_access(self, memory_id: str) -> None:
        """Count one access, last accessed now (seed 004);
        :class:`~lexmem.errors.NotFoundError` for an unknown id."""

    def record_access_many(self, memory_ids: Sequence[str]) -> int:
        """Count one access of each, last accessed now; returns how many were found."""

    def record_accesses(self, counts: Mapping[str, int]) -> int:
        """Add searches' access records merged per memory (id -> times), last accessed
        now, as one batch (the writer's); returns how many were found."""

    def delete(self, memory_id: str) -> None:
        """Forget one memory as :meth:`delete_many` does, erased;
        :class:`~lexmem.errors.NotFoundError` for an unknown id."""

    def delete_many(self, memory_ids: Sequence[str], *, erase: bool = True) -> list[str]:
        """Delete these memories with their links and confidence history (unknown ids
        skipped), clear the pointers of the memories they replaced and their neighbours'
        context, and (``erase``) leave no byte of them in any file. Returns the ids
        deleted."""

    def store_link(self, link: MemoryLink) -> MemoryLink:
        """Store a link; the same (from, to, type) again updates its strength. Refuses a
        link to itself, an empty type and unknown ids."""

    def delete_link(self, from_id: str, to_id: str, link_type: str) -> int:
        """Remove one link; how many went (0 or 1)."""

    def add_missing_confidence(self) -> int:
        """Give every memory with no confidence point its first one (a kill between the
        two commits of :meth:`store_many`); returns how many."""

    # -- the tables whole ------------------------------------------------------------

    def list_tables(self) -> list[str]:
        """The names of the backend's tables that exist now, the journal's among them
        once made (under these names: ``processed``, ``buffer``, ``sessions``, ``audit``,
        ``file_hashes``, ``reviews``)."""

    def arrow_table(self, name: str, columns: Sequence[str] | None = None) -> pa.Table:
        """A whole table (``memories``, ``links``, ``confidence`` or a journal table) as
        Arrow, every column or ``columns``: the DuckDB lens' statistics and export."""

    def import_rows(
        self,
        memories: pa.Table,
        links: pa.Table,
        confidence: pa.Table,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 2000,
    ) -> tuple[int, int, int]:
        """Add exported rows exactly as they are, all or nothing; a repeated or existing
        id is :class:`~lexmem.errors.InvalidInputError`. Returns the three counts."""

    def reembed(
        self,
        embed: Callable[[list[str]], Any],
        progress: Callable[[int, int], None] | None = None,
        batch: int = 256,
    ) -> int:
        """Recompute every vector with ``embed`` into the space the store was opened for,
        switching over at once at the end (a crash part-way leaves the old vectors).
        Returns how many."""

    def optimize(self, *, build_vector_index: bool = True) -> None:
        """Build missing indices (the vector index too, once the store is large), compact
        and prune old versions."""

    def needs_vector_index(self) -> bool:
        """Whether the store is large enough for a vector index and has none."""

    def has_vector_index(self) -> bool:
        """Whether vector search uses an approximate index."""

    def versions_on_disk(self) -> int:
        """How many versions of the memories table are kept (1 for a backend without)."""


class JournalBackend(Protocol):
    """The capture journal beside the memories: what the one writer took in, the events
    waiting for their window, sessions, the audit log, reviews and watched files. Writes
    take the store's write lock; reading creates no table."""

    def ensure(self) -> None:
        """Create the journal's tables that do not exist (a half-made one is made again)."""

    # -- idempotency and the event buffer --------------------------------------------

    def seen(self, event_ids: Sequence[str]) -> set[str]:
        """Which of these events were taken in before."""

    def take_in(
        self, events: Sequence[Mapping[str, Any]], buffered: Sequence[Mapping[str, Any]]
    ) -> None:
        """Record ``events`` as taken in and keep ``buffered`` (events with ``event_id``,
        ``session_id`` and ``_seq``) until their window is extracted; one commit, and
        repeating it changes nothing."""

    def buffered(self, session_id: str) -> list[dict[str, Any]]:
        """A session's buffered events in order."""

    def buffered_sessions(self) -> list[str]:
        """The sessions with buffered events, sorted."""

    def release(self, event_ids: Sequence[str]) -> None:
        """Drop these buffered events and erase their text from every file."""

    def purge_sessions(self, root: str) -> list[str]:
        """Delete the sessions of the repository ``root`` (its folder or inside it) and
        their buffered events; returns the session ids. :meth:`erase` then erases."""

    # -- sessions ---------------------------------------------------------------------

    def session(self, session_id: str) -> Session | None:
        """One session, or None."""

    def sessions(self, status: str | None = None, limit: int = 100) -> list[Session]:
        """Sessions (of a status), most recently active first."""

    def current_session(self, agent: str | None = None) -> Session | None:
        """The most recently active session that is still active (of an agent)."""

    def save_sessions(self, sessions: Sequence[Session]) -> None:
        """Insert or replace these sessions by id."""

    def session_topics(self, session_ids: Sequence[str]) -> dict[str, str]:
        """Each session's first candidate title (what capture first took from it, saved
        or skipped), by session id; sessions with none are left out."""

    # -- the audit log ----------------------------------------------------------------

    def audit(self, entries: Sequence[AuditEntry]) -> None:
        """Add entries; an id already there is left as it is (a retry adds nothing)."""

    def audit_entries(
        self,
        *,
        decision: str | None = None,
        session_id: str | None = None,
        memory_id: str | None = None,
        limit: int = 200,
    ) -> list[AuditEntry]:
        """Entries matching every given field, newest first (ties by id, descending)."""

    def audit_entry(self, entry_id: str) -> AuditEntry | None:
        """One entry, or None."""

    def has_audit_entry(self, entry_id: str) -> bool:
        """Whether an entry with this id exists (cheaper than reading it)."""

    def audit_projects_under(self, root: str) -> list[str]:
        """Every project the audit names that is ``root`` or inside it, sorted."""

    def scrub_audit(
        self,
        memory_ids: Sequence[str] = (),
        projects: Sequence[str] = (),
        related: Sequence[tuple[str | None, str]] = (),
    ) -> None:
        """Clear title, text and metadata (keeping id, time, decision, reason) of the
        entries of these memories, of these projects, and of the entries of each
        (session, text) in ``related`` whose title or text holds most of that text."""

    def erase(self) -> None:
        """Leave no byte of deleted or scrubbed text, of the memories' tables or the
        journal's, in any file (older versions and indices included)."""

    # -- watched files ----------------------------------------------------------------

    def file_hash(self, path: str) -> str | None:
        """The sha256 recorded for a watched file, or None."""

    def set_file_hash(self, path: str, sha256: str) -> None:
        """Record (or replace) a watched file's sha256."""

    def file_hashes_under(self, root: str) -> set[str]:
        """The watched files with a recorded hash inside the folder ``root``; an empty set,
        creating nothing, before the journal's tables exist."""

    # -- review -----------------------------------------------------------------------

    def record_reviews(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace, by memory id, rows of memory_id, decision (accepted or
        rejected), fingerprint, project, embedding and particulars."""

    def forget_review(self, memory_ids: Sequence[str]) -> None:
        """Drop these memories' review records."""

    def reviewed_ids(self) -> set[str]:
        """The memories with a review record."""

    def rejected(self) -> list[dict[str, Any]]:
        """Review's rejections: rows with memory_id, fingerprint, project, embedding and
        particulars."""

    def review_queue(self, limit: int | None = None) -> list[str]:
        """Active memories captured automatically (not remembered on purpose) and not
        reviewed yet, newest first (ties by id)."""

    def counts(self) -> dict[str, int]:
        """Rows per journal table."""


class SearchBackend(Protocol):
    """Hybrid search over a store: its keyword and vector legs are the backend's own
    queries; fusion and ranking are :mod:`lexmem.store.search`'s."""

    def search(
        self,
        query: str,
        flt: MemoryFilter | None = None,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        record_access: bool = True,
        now: datetime | None = None,
    ) -> SearchResult:
        """The best ``limit`` (1 to 1000) memories for ``query`` under ``flt`` (active ones
        by default), in ``mode`` (hybrid, bm25 or vector), each with why it ranked there;
        their access is recorded unless ``record_access`` is False."""

    def close(self) -> None:
        """Let go of the worker threads."""


def members(protocol: type) -> dict[str, inspect.Signature | None]:
    """The members a backend must have: each method's signature, None for a property."""
    out: dict[str, inspect.Signature | None] = {}
    for name, value in vars(protocol).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            out[name] = None
        elif inspect.isfunction(value):
            out[name] = inspect.signature(value)
    return out
