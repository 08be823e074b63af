"""lexmem's public core API: one object per data folder, one method per user action.

:class:`Lexmem` is the composition root of the core: it reads the settings
once, builds the embedder, store, encoder and searcher, and hands each only
what it needs. Every mutation returns :class:`~lexmem.models.Changes`, so the
CLI, the desktop app and the context digests all learn what changed the same way.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from lexmem.capture.inbox import Inbox, make_event
from lexmem.capture.policy import (
    is_paused,
    optout_rules,
    project_opted_out,
    refuse_opted_out,
    scrub,
)
from lexmem.config import (
    CAPTURE_MODES,
    DEFAULT_MODEL,
    Paths,
    llm_url_problem,
    resolve_paths,
    secure_umask,
    tighten_umask,
)
from lexmem.desktop import (
    Moved,
    autostart_command,
    autostart_enabled,
    autostart_path,
    autostart_supported,
    move_data_folder,
    set_autostart,
)
from lexmem.embedder import Embedder
from lexmem.encoder import EncoderOptions, LlmClassifier, LlmSummariser, MemoryEncoder
from lexmem.errors import InvalidInputError
from lexmem.keystore import LLM_API_KEY, get_secret, set_secret
from lexmem.keystore import backend_available as keyring_available
from lexmem.licence import (
    CAPTURE,
    CORE_ACTIVE_LIMIT,
    ENCODER,
    GATES,
    KEY_URL,
    STORAGE,
    TIER_NAMES,
    TRIAL_DAYS,
    Licence,
    LicenceError,
    LicenceRequiredError,
    LicenceService,
    LicenceStatus,
    verify_token,
)
from lexmem.llm import status_line as llm_status_line
from lexmem.locks import FileLock, LockTimeout
from lexmem.models import (
    Changes,
    ConfidencePoint,
    Memory,
    MemoryContext,
    MemoryLink,
    MemorySource,
    MemoryStatus,
    MemoryType,
    TypeClassification,
    fingerprint,
    make_title,
)
from lexmem.projects import (
    home_short,
    project_choices,
    project_labels,
    project_name,
    resolve_project,
)
from lexmem.service.client import InboxWriter, remember_through_inbox
from lexmem.service.ops import memories_under
from lexmem.service.writer import CaptureService, DrainReport, ServiceBusyError
from lexmem.settings import Settings, load_settings, save_settings
from lexmem.store.backends import journal_for, make_store, searcher_for
from lexmem.store.journal import AuditEntry, Session
from lexmem.store.protocol import JournalBackend, MemoryBackend, MemoryFilter
from lexmem.store.search import SearchHit, SearchResult, listed, match_spans
from lexmem.team.recorder import SharingStore

if TYPE_CHECKING:
    from lexmem.llm import LlmClient
    from lexmem.service.watcher import WatchReport
    from lexmem.settings import EmbeddingSettings

# The facade's own names, and the types its methods take and return (re-exported, so that
# the desktop layer needs nothing below the facade to name them). The desktop app may import
# nothing below the facade (pyproject's import-linter contract), so the writer it runs
# in-process and its client side, the licence's tiers and gates, the OS keyring's state and
# a few constants and checks of the settings are re-exported here too.
__all__ = [
    "CAPTURE",
    "CAPTURE_MODES",
    "CORE_ACTIVE_LIMIT",
    "DEFAULT_MODEL",
    "ENCODER",
    "GATES",
    "KEY_URL",
    "STORAGE",
    "TIER_NAMES",
    "TRIAL_DAYS",
    "AuditEntry",
    "CaptureService",
    "DrainReport",
    "FileLock",
    "InboxWriter",
    "Lexmem",
    "Licence",
    "LicenceError",
    "LicenceRequiredError",
    "LicenceStatus",
    "LockTimeout",
    "MemoryDetail",
    "MemoryFilter",
    "Moved",
    "RememberResult",
    "SearchHit",
    "SearchResult",
    "ServiceBusyError",
    "Session",
    "Settings",
    "autostart_command",
    "autostart_enabled",
    "autostart_path",
    "autostart_supported",
    "home_short",
    "is_paused",
    "keyring_available",
    "listed",
    "llm_api_key_stored",
    "llm_status_line",
    "llm_url_problem",
    "match_spans",
    "move_data_folder",
    "normalise_link_type",
    "project_choices",
    "project_labels",
    "project_name",
    "remember_through_inbox",
    "resolve_project",
    "set_autostart",
    "set_llm_api_key",
    "start_team_server",
    "stop_team_server",
]

log = logging.getLogger("lexmem")


@dataclass(slots=True)
class RememberResult:
    memories: list[Memory]
    classification: TypeClassification
    changes: Changes


@dataclass(slots=True)
class MemoryDetail:
    """A memory with everything around it: links, chain, trajectory."""

    memory: Memory
    links_from: list[MemoryLink] = field(default_factory=list)
    links_to: list[MemoryLink] = field(default_factory=list)
    newer: list[Memory] = field(default_factory=list)
    older: list[Memory] = field(default_factory=list)
    confidence: list[ConfidencePoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def link(lk: MemoryLink) -> dict[str, Any]:
            return {"from": lk.from_id, "to": lk.to_id, "type": lk.link_type, "strength": lk.strength,
                    "created_at": lk.created_at.isoformat()}  # fmt: skip

        return {
            **self.memory.to_dict(),
            "links_from": [link(lk) for lk in self.links_from],
            "links_to": [link(lk) for lk in self.links_to],
            "superseded_by_chain": [m.id for m in self.newer],
            "supersedes_chain": [m.id for m in self.older],
            "confidence_history": [
                {"confidence": p.confidence, "recorded_at": p.recorded_at.isoformat()}
                for p in self.confidence
            ],
        }


def _is_client(llm: object) -> TypeGuard[LlmClient]:
    """Whether ``llm`` is lexmem's own client (a test may pass any classifier)."""
    from lexmem.llm import LlmClient

    return isinstance(llm, LlmClient)


def normalise_link_type(text: str) -> str:
    """One spelling per link type: "Depends On", "depends-on" and "depends_on" agree."""
    kind = re.sub(r"[\s\-]+", "_", text.strip().lower()).strip("_")
    if not kind:
        raise InvalidInputError("a link needs a type (e.g. relates_to, depends_on)")
    return kind


def llm_api_key_stored() -> bool:
    """Whether the OS keyring holds an API key for the LLM (never the settings file)."""
    return get_secret(LLM_API_KEY) is not None


def set_llm_api_key(key: str) -> None:
    """Keep the LLM's API key in the OS keyring; an empty key removes it."""
    set_secret(LLM_API_KEY, key)


class Lexmem:
    """The core, opened on one data folder."""

    def __init__(
        self,
        paths: Paths,
        settings: Settings,
        *,
        llm: LlmClassifier | None = None,
        embedder: Embedder | None = None,
        licence: LicenceService | None = None,
        backend: str | None = None,
    ) -> None:
        self.paths = paths
        self.settings = settings
        # Only the composition root (or a test) chooses the licence's trust roots.
        self._licence = licence
        # An embedder may be shared (one loaded model serving several stores in one process).
        self.embedder = embedder or Embedder(settings.embedding, paths.models)
        self.store: MemoryBackend = make_store(
            paths,
            dim=settings.embedding.dim,
            space_id=self.embedder.space_id,
            settings=settings.store,
            backend=backend or settings.store.backend,
        )
        # The backend itself; ``store`` is it behind the team's outbox when the data
        # folder has a team (every write of a shared memory is queued for the server).
        self.raw_store: MemoryBackend = self.store
        if settings.team.url:
            self.share_with_team()
        self.encoder = MemoryEncoder(self.embedder, options=EncoderOptions(), llm=None)
        # The optional LLM (seeds 000 and 001), used only when [llm] names an endpoint and
        # the tier includes LLM-assisted encoding; the capture service takes it from here.
        self.llm: LlmClient | None = None
        if llm is None and settings.llm.url.strip():
            from lexmem.llm import LlmClient

            llm = LlmClient(settings.llm, paths)
        if llm is not None and self.licence.is_enabled(ENCODER):  # the encoder gate, once
            summariser = llm if isinstance(llm, LlmSummariser) else None
            self.encoder = MemoryEncoder(
                self.embedder, options=EncoderOptions(), llm=llm, summariser=summariser
            )
            self.llm = llm if _is_client(llm) else None
        self.searcher = searcher_for(self.raw_store, self.embedder, settings.search)
        self._journal: JournalBackend | None = None
        self._access_queued = False

    @classmethod
    def open(
        cls,
        home: Path | str | None = None,
        *,
        settings: Settings | None = None,
        llm: LlmClassifier | None = None,
        embedder: Embedder | None = None,
        licence: LicenceService | None = None,
        backend: str | None = None,
    ) -> Lexmem:
        """Open (creating if needed) the data folder: ``home``, else ``LEXMEM_HOME``, else the
        platform's. ``backend`` names the storage backend (:mod:`lexmem.store.backends`);
        without it, ``[store] backend`` does."""
        paths = Paths(Path(home).expanduser().absolute()) if home is not None else resolve_paths()
        tighten_umask()
        paths.ensure()
        # The settings file is rewritten in a newer layout only by the store's opening,
        # all or nothing with the store's own migration (lexmem.store.migrations).
        settings = settings or load_settings(paths, write_back=False)
        lm = cls(paths, settings, llm=llm, embedder=embedder, licence=licence, backend=backend)
        lm.store.open()
        return lm

    def close(self) -> None:
        if self._access_queued:  # a CLI command's searches: counted before it ends
            self._access_queued = False
            from lexmem.errors import LexmemError
            from lexmem.service.client import apply_access_if_no_service

            try:
                apply_access_if_no_service(self)
            except (LexmemError, OSError) as exc:  # queued still: the next writer applies them
                log.warning("could not apply the searches' access records: %s", exc)
        self.searcher.close()
        self.store.close()

    def __enter__(self) -> Lexmem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def licence(self) -> LicenceService:
        """The tier this data folder runs as, and its gates (built when first asked)."""
        if self._licence is None:
            self._licence = LicenceService(self.paths)
        return self._licence

    def check_storage(self, adding: int = 1) -> None:
        """The storage gate: Core keeps up to 1,000 active memories."""
        if adding > 0:
            self.licence.check_storage(self.store.count(MemoryFilter()), adding)

    # -- ids ----------------------------------------------------------------

    def resolve(self, ident: str) -> str:
        """A full memory id from an id or a unique prefix."""
        return self.store.resolve_id(ident)

    def _require_current_space(self) -> None:
        if self.store.needs_reembed:
            raise InvalidInputError(
                f"the embedding model changed ({self.store.stored_space} → {self.embedder.space_id}); "
                "run `lexmem reembed` first"
            )

    # -- remembering ----------------------------------------------------------

    def classify(self, text: str) -> TypeClassification:
        if not text.strip():
            raise InvalidInputError("nothing to classify: the text is empty")
        return self.encoder.classify_type(text)

    def remember(
        self,
        text: str,
        *,
        type: MemoryType | None = None,
        project: str | None = None,
        title: str | None = None,
        pin: bool = False,
        source: MemorySource = MemorySource.EXPLICIT,
        context: MemoryContext | None = None,
        memory_id: str | None = None,
    ) -> RememberResult:
        """Store what the user (or a capture) asked to keep; long text becomes linked chunks.

        ``memory_id`` fixes the first memory's id (a retried operation must not add twice).
        """
        text = scrub(text)
        if not text:
            raise InvalidInputError("nothing to remember: the text is empty")
        if title is not None:
            title = scrub(title)
        if context is None and project:
            project = self.project_meant(project)
        refuse_opted_out(self.paths, self.settings.capture, context.project if context else project)
        self._require_current_space()
        ctx = context or MemoryContext(
            source=source,
            project=project,
            title=title,
            pinned=pin,
            user_id=self.settings.store.user_id,
        )
        if type is None:
            cls_ = self.encoder.classify_type(text)
            memories = self.encoder.encode_classified(text, cls_, ctx)
        else:
            memories = self.encoder.encode_with_type(text, type, ctx)
            cls_ = TypeClassification(
                type, 1.0, memories[0].classification_method, "given by the caller"
            )
        self.check_storage(1)
        if memory_id is not None:
            if self.store.get_optional(memory_id, with_embedding=False) is not None:
                raise InvalidInputError(f"a memory with id {memory_id} already exists")
            for i, m in enumerate(memories):
                m.id = memory_id if i == 0 else str(uuid.uuid5(uuid.UUID(memory_id), str(i)))
        self.store.store_many(memories)
        links = False
        for prev, nxt in itertools.pairwise(memories):
            self.store.store_link(MemoryLink(nxt.id, prev.id, "continues", 1.0))
            links = True
        return RememberResult(
            memories, cls_, Changes(created=tuple(m.id for m in memories), links=links, counts=True)
        )

    # -- reading --------------------------------------------------------------

    def get(self, ident: str) -> Memory:
        return self.store.get(self.resolve(ident))

    def detail(self, ident: str) -> MemoryDetail:
        mid = self.resolve(ident)
        return MemoryDetail(
            memory=self.store.get(mid, with_embedding=False),
            links_from=self.store.get_links_from(mid),
            links_to=self.store.get_links_to(mid),
            newer=self.store.supersede_chain(mid, forward=True),
            older=self.store.supersede_chain(mid, forward=False),
            confidence=self.store.confidence_history(mid),
        )

    def list_memories(
        self,
        flt: MemoryFilter | None = None,
        *,
        sort: str = "created",
        limit: int | None = 50,
        offset: int = 0,
    ) -> list[Memory]:
        return self.store.list_memories(flt, sort=sort, limit=limit, offset=offset)

    def count(self, flt: MemoryFilter | None = None) -> int:
        return self.store.count(flt)

    def search(
        self,
        query: str,
        flt: MemoryFilter | None = None,
        *,
        limit: int | None = None,
        mode: str = "hybrid",
        record_access: bool = True,
    ) -> SearchResult:
        if mode != "bm25":
            self._require_current_space()
        # An erasure in another process may remove the version being read: reopen, retry.
        result = self.store.reading(
            lambda: self.searcher.search(
                query,
                flt,
                limit=self.settings.search.default_limit if limit is None else limit,
                mode=mode,
                record_access=False,
            )
        )
        if record_access and result.hits:
            # Not a commit: queued for the writer, which applies them in batches.
            t0 = time.perf_counter()
            self._queue_access([h.memory.id for h in result.hits])
            result.timings_ms["record_access"] = (time.perf_counter() - t0) * 1000
        return result

    def _queue_access(self, ids: list[str]) -> None:
        from lexmem.capture.inbox import queue_access

        try:
            queue_access(self.paths.access, ids)
            self._access_queued = True
        except OSError as exc:  # a record of use is not worth failing a search for
            log.warning("could not queue the searches' access records: %s", exc)

    # -- changing ---------------------------------------------------------------

    def pin(self, ident: str, pinned: bool = True) -> Changes:
        mid = self.resolve(ident)
        self.store.set_pinned(mid, pinned)
        return Changes(updated=(mid,))

    def archive(self, ident: str) -> Changes:
        mid = self.resolve(ident)
        self.store.archive(mid)
        return Changes(updated=(mid,), counts=True)

    def restore(self, ident: str) -> Changes:
        mid = self.resolve(ident)
        self.store.restore(mid)
        return Changes(updated=(mid,), counts=True)

    def supersede(
        self,
        old: str,
        *,
        by: str | None = None,
        with_text: str | None = None,
        new_memory_id: str | None = None,
        own: bool = False,
    ) -> tuple[Changes, str]:
        """Replace ``old`` by an existing memory or by a new one written from ``with_text``.
        ``own``: the text is the person's own words (the browser, ``lexmem supersede``), so
        the new version is theirs (source ``explicit``) and waits for no review; an
        agent's correction keeps the old memory's source."""
        if (by is None) == (with_text is None):
            raise InvalidInputError("supersede needs exactly one of a replacement id or a new text")
        old_id = self.resolve(old)
        created: tuple[str, ...] = ()
        if by is not None:
            new_id = self.resolve(by)
        else:
            previous = self.store.get(old_id, with_embedding=False)
            if new_memory_id and self.store.get_optional(new_memory_id, with_embedding=False):
                # Written before a crash cut the operation short: finish it.
                self.store.supersede(old_id, new_memory_id)
                return Changes(
                    created=(new_memory_id,), updated=(old_id,), links=True
                ), new_memory_id
            result = self.remember(
                with_text or "",
                type=previous.type,
                context=MemoryContext(
                    source=MemorySource.EXPLICIT if own else previous.source,
                    project=previous.project, user_id=previous.user_id,
                    pinned=previous.pinned, learning_context=f"supersedes {old_id}",
                ),
                memory_id=new_memory_id,
            )  # fmt: skip
            new_id = result.memories[0].id
            created = result.changes.created
        self.store.supersede(old_id, new_id)
        return Changes(created=created, updated=(old_id,), links=True, counts=True), new_id

    def edit(
        self,
        ident: str,
        *,
        content: str | None = None,
        title: str | None = None,
        type: MemoryType | None = None,
        project: str | None = None,
        salience: float | None = None,
    ) -> Changes:
        """Change a memory in place; new content is re-embedded."""
        mid = self.resolve(ident)
        current = self.store.get(mid, with_embedding=False)
        fields: dict[str, Any] = {}
        if content is not None:
            content = scrub(content)
            if not content:
                raise InvalidInputError(
                    "the new content is empty (use `forget` to delete a memory)"
                )
            if content != current.content:
                self._require_current_space()
                fields["content"] = content
                fields["embedding"] = [float(x) for x in self.embedder.embed_one(content)]
                fields["word_count"] = len(content.split())
                if title is None and current.title == make_title(current.content):
                    fields["title"] = make_title(content)
        if title is not None:
            title = scrub(title)
            if not title:
                raise InvalidInputError("the title is empty")
            if title.strip() != current.title:
                fields["title"] = title.strip()
        if type is not None and type != current.type:
            fields["type"] = type
        if project is not None and (project or None) != current.project:
            fields["project"] = project or None
        if salience is not None:
            if not 0.0 <= salience <= 1.0:
                raise InvalidInputError(f"salience must be between 0 and 1, not {salience}")
            if salience != current.salience:
                fields["salience"] = salience
        if not fields:
            return Changes()
        merged = current.replace(**{k: v for k, v in fields.items() if k != "embedding"})
        fields["fingerprint"] = fingerprint(
            merged.title, merged.content, merged.project, merged.type
        )
        self.store.edit(mid, **fields)
        return Changes(updated=(mid,))

    def forget(self, ident: str) -> Changes:
        """Hard delete: the memory, its links and its history are gone for good, and no
        byte of its text stays in any file of the data folder (:meth:`erase_memories`)."""
        from lexmem.errors import NotFoundError

        mid = self.resolve(ident)
        successors = self.store.ids_superseded_by(mid)
        if not self.erase_memories([mid]):
            raise NotFoundError("memory", mid)
        return Changes(updated=tuple(successors), deleted=(mid,), links=True, counts=True)

    def erase_memories(
        self, ids: Sequence[str], *, keep_review: bool = False, projects: Sequence[str] = ()
    ) -> list[str]:
        """Delete these memories (unknown ids are skipped) and erase their text from disk:
        the tables' older versions and indices, the neighbours' ``context``, the audit's
        titles and texts (and every audit entry of ``projects``, for a purge) and the
        digests that showed them, rewritten at once. ``keep_review`` keeps a rejection's
        record (fingerprint, embedding, particulars hash: no text) so review's reject still
        refuses the same candidate. Returns the ids deleted."""
        from lexmem.service.digest import DigestKeeper

        memories = self.store.get_many(list(ids))
        shown = {m.project for m in memories}
        related = [(m.session_id, text) for m in memories for text in (m.content, m.title)]
        with self.store.writing():
            deleted = self.store.delete_many(ids, erase=False)
            if not deleted and not projects:
                return []
            journal = self.journal
            if not keep_review:
                journal.forget_review(deleted)
            journal.scrub_audit(deleted, projects=projects, related=related)
            journal.erase()
        # A digest is a plain file: the ones that showed these memories are written again
        # now, not at the service's next flush (a memory with no project is in every one).
        keeper = DigestKeeper(self)
        keeper.mark(shown)
        keeper.flush(force=True)
        return deleted

    def link(self, a: str, b: str, link_type: str, strength: float = 0.5) -> Changes:
        if not 0.0 <= strength <= 1.0:
            raise InvalidInputError(f"strength must be between 0 and 1, not {strength}")
        link_type = normalise_link_type(link_type)
        self.store.store_link(MemoryLink(self.resolve(a), self.resolve(b), link_type, strength))
        return Changes(links=True)

    def unlink(self, a: str, b: str, link_type: str) -> Changes:
        link_type = normalise_link_type(link_type)
        self.store.delete_link(self.resolve(a), self.resolve(b), link_type)
        return Changes(links=True)

    def decay(self, factor: float | None = None) -> tuple[Changes, int]:
        n = self.store.decay_all(self.settings.store.decay_factor if factor is None else factor)
        return Changes(counts=True), n

    def reinforce(self, ident: str, boost: float = 0.1) -> Changes:
        mid = self.resolve(ident)
        self.store.reinforce(mid, boost)
        return Changes(updated=(mid,))

    # -- whole-store operations ---------------------------------------------------

    def stats(self) -> dict[str, Any]:
        from lexmem.store.lens import stats

        data = stats(self.store)
        data["data_folder"] = str(self.paths.home)
        data["embedding_model"] = self.embedder.model_name
        data["encoder"] = {
            "encoded_by_type": dict(self.encoder.encoded_by_type),
            "classifications_by_method": dict(self.encoder.classifications_by_method),
        }
        return data

    def llm_status(self) -> dict[str, Any]:
        """The optional LLM today: calls and tokens against the budget, the breaker, the
        last failure, and whether it is used (configured, and in the tier)."""
        from lexmem.llm import LlmClient

        figures = (self.llm or LlmClient(self.settings.llm, self.paths)).status()
        figures["enabled"] = self.llm is not None
        return figures

    def export(self, out: Path, fmt: str = "jsonl") -> dict[str, int]:
        from lexmem.store.lens import export_store

        return export_store(self.store, out, fmt)

    def import_(
        self,
        source: Path,
        progress: Callable[[int, int], None] | None = None,
        reembed_progress: Callable[[int, int], None] | None = None,
        *,
        skip_existing: bool = False,
    ) -> dict[str, int]:
        """Import an export folder; vectors from another model are recomputed. The
        single writer does it (:func:`lexmem.service.client.maintain`).

        Returns the rows added per table and, under ``skipped_*``, those left out because
        they were here already (``skip_existing``; without it they refuse the import).
        Ctrl-C in the process that runs the import raises
        :class:`~lexmem.store.lens.ImportInterrupted`, which says what was kept."""
        from lexmem.locks import service_running
        from lexmem.store.lens import (
            IMPORTS_HERE,
            ImportInterrupted,
            interrupted_after,
            interrupted_at,
        )

        source = Path(source).expanduser().absolute()
        kwargs: dict[str, Any] = {"source": str(source)}
        if skip_existing:
            kwargs["skip_existing"] = True
        IMPORTS_HERE.pop(str(source), None)
        try:
            result = self._maintain(
                "import", kwargs, {"import": progress, "reembed": reembed_progress}
            )
        except ImportInterrupted:
            raise
        except KeyboardInterrupt as exc:
            if str(source) in IMPORTS_HERE:
                done = IMPORTS_HERE[str(source)]
                if done is None:  # as it began, before it heard Ctrl-C itself: count
                    raise ImportInterrupted(interrupted_at(self.store, source)) from exc
                raise ImportInterrupted(interrupted_after(done)) from exc
            if service_running(self.paths):
                raise ImportInterrupted(
                    "interrupted while waiting for the lexmem service, which goes on with "
                    "the import if it had received it (`lexmem stats` shows the count)"
                ) from exc
            raise ImportInterrupted(
                "interrupted before the import began: nothing was imported"
            ) from exc
        finally:
            IMPORTS_HERE.pop(str(source), None)
        counts = {str(k): int(v) for k, v in result.items()}
        if counts.pop("interrupted", 0):
            raise ImportInterrupted(interrupted_after(counts))
        return counts

    def reembed(
        self,
        progress: Callable[[int, int], None] | None = None,
        *,
        embedding: EmbeddingSettings | None = None,
    ) -> int:
        """Recompute every vector with the configured model (after a model change), or
        with ``embedding``'s model (switching to it; the settings are the caller's to
        save). The single writer does it; searches keep working meanwhile."""
        chosen = embedding or self.settings.embedding
        wanted = {"model": chosen.model, "path": chosen.path, "dim": chosen.dim}
        result = self._maintain("reembed", {"embedding": wanted}, {"reembed": progress})
        return int(result.get("reembedded", 0))

    def optimize(self) -> None:
        """Build missing indices and compact: the single writer does it."""
        self._maintain("optimize", {}, {})

    def scan_notes(
        self, folder: Path, progress: Callable[[int, int], None] | None = None
    ) -> WatchReport:
        """Read a watched folder's Markdown notes now, with ``progress(files_done,
        files_total)``: the single writer does it, wherever it runs."""
        from lexmem.service.watcher import WatchReport

        root = str(Path(folder).expanduser().resolve())
        result = self._maintain("scan_notes", {"folder": root}, {"scan_notes": progress})
        return WatchReport(
            **{k: result[k] for k in WatchReport.__dataclass_fields__ if k in result}
        )

    def notes_progress(self, folder: Path) -> tuple[int, int] | None:
        """How far the writer's scan of ``folder`` is, as (files read, files), whichever
        process runs it; ``None`` when no scan of it runs."""
        from lexmem.service.client import maintenance_progress

        return maintenance_progress(self, "scan_notes", str(Path(folder).expanduser().resolve()))

    def _maintain(
        self,
        job: str,
        kwargs: dict[str, Any],
        phases: dict[str, Callable[[int, int], None] | None],
    ) -> dict[str, Any]:
        """Run a maintenance job in the single writer; ``phases`` says who hears the
        progress of each of its phases."""
        from lexmem.service.client import maintain

        def report(phase: str, done: int, total: int) -> None:
            to = phases.get(phase)
            if to is not None:
                to(done, total)

        try:
            return maintain(self, job, kwargs, report)
        finally:
            self.refresh()  # see what the writer committed

    # -- what the writer runs (lexmem.service.writer): callers use the methods above ----

    def apply_import(
        self,
        source: Path,
        progress: Callable[[int, int], None] | None = None,
        reembed_progress: Callable[[int, int], None] | None = None,
        *,
        skip_existing: bool = False,
    ) -> dict[str, int]:
        from lexmem.store.lens import IMPORTS_HERE, ctrl_c_between_batches, import_store

        key = str(Path(source).expanduser().absolute())
        IMPORTS_HERE[key] = None
        with ctrl_c_between_batches() as pressed:
            counts = import_store(
                self.store, source, progress, skip_existing=skip_existing, interrupted=pressed
            )
            # Re-embedding runs to its end: stopping it would leave two models' vectors.
            if counts.pop("needs_reembed", 0):
                counts["reembedded"] = self.apply_reembed(reembed_progress)
            IMPORTS_HERE[key] = dict(counts)
            if pressed():  # too late to undo: the caller hears that it was all done
                counts["interrupted"] = 1
        return counts

    def apply_reembed(self, progress: Callable[[int, int], None] | None = None) -> int:
        with secure_umask():
            return self.store.reembed(lambda texts: self.embedder.embed(texts), progress)

    def apply_optimize(self) -> None:
        self.store.optimize()

    def memories_for(self, ids: Sequence[str]) -> list[Memory]:
        return self.store.get_many(list(ids))

    def refresh(self) -> None:
        """See what other processes (or the in-process service) committed since."""
        self.store.refresh()

    def list_ids(self, flt: MemoryFilter | None = None, *, sort: str = "created") -> list[str]:
        """Ids only, in order: cheap for 100,000 memories (the browser's table holds these)."""
        return self.store.list_ids(flt, sort=sort)

    def projects(self) -> list[str]:
        """Every project a memory names, sorted."""
        return self.store.project_names()

    def project_meant(self, typed: str, known: Sequence[str] | None = None) -> str | None:
        """The project a person means by ``typed``: "shop" typed while the repository
        ~/work/shop is known is that project, not a second one that only looks the same
        (:func:`lexmem.projects.resolve_project`). A name never resolves into an opted-out
        repository: it then stays the name it was."""
        meant = resolve_project(typed, self.projects() if known is None else known)
        if meant is not None and meant != typed.strip():
            rules = optout_rules(self.paths, self.settings.capture)
            if project_opted_out(meant, rules):
                return typed.strip() or None
        return meant

    def audit_entries(
        self,
        *,
        decision: str | None = None,
        session_id: str | None = None,
        memory_id: str | None = None,
        limit: int = 200,
    ) -> list[AuditEntry]:
        """What capture saved, skipped or reinforced, and why; newest first."""
        return self.journal.audit_entries(
            decision=decision, session_id=session_id, memory_id=memory_id, limit=limit
        )

    def session(self, session_id: str) -> Session | None:
        """One agent session by its id (None when capture never recorded it)."""
        return self.journal.session(session_id)

    def sessions(self, status: str | None = None, limit: int = 100) -> list[Session]:
        """Agent sessions seen by capture, newest first."""
        return self.journal.sessions(status, limit=limit)

    def session_topics(self, session_ids: Sequence[str]) -> dict[str, str]:
        """What each session was about: the title of the first candidate capture took
        from it (the prompts themselves are not kept), by session id."""
        return self.journal.session_topics(session_ids)

    @property
    def journal(self) -> JournalBackend:
        """The capture journal (sessions, audit log, reviews) beside the memories."""
        if self._journal is None:
            self._journal = journal_for(self.raw_store)
        return self._journal

    def insights(self, days: int = 30) -> dict[str, Any]:
        """Memories per day by type and source, top projects, skip reasons (DuckDB)."""
        from lexmem.store.lens import insights

        return insights(self.store, days=days)

    def review_queue(self, limit: int | None = None) -> list[str]:
        """Ids of memories captured automatically and not reviewed yet, newest first."""
        return self.journal.review_queue(limit)

    def status_counts(self) -> dict[str, int]:
        return {s.value: self.store.count(MemoryFilter(status=s)) for s in MemoryStatus}

    # -- team mode ------------------------------------------------------------------------

    def share_with_team(self) -> SharingStore:
        """Put the team's outbox in front of the store (idempotent): from now on every
        change to a memory of a joined project is queued for the team's server."""
        if isinstance(self.store, SharingStore):
            self.store.projects = dict(self.settings.team.projects)
            return self.store
        sharing = SharingStore(
            self.raw_store, self.paths, self.settings.team.projects, self.settings.capture
        )
        self.store = cast("MemoryBackend", sharing)
        return sharing

    def team_status(self, *, reach: bool = True) -> dict[str, Any]:
        """Where team sync stands: the server (never a password), the lag in revisions and
        seconds, the outbox's size, the last sync and its error, conflicts seen.
        ``reach``: ask the server for its latest revision (otherwise local figures only)."""
        from lexmem.team.membership import status

        return status(
            self.paths,
            load_settings(self.paths, write_back=False),
            dim=self.settings.embedding.dim,
            space=self.embedder.space_id,
            reach=reach,
        )

    def shared_projects(self) -> dict[str, str]:
        """The local projects shared with a team, each with the team's name for it."""
        team = load_settings(self.paths, write_back=False).team
        return dict(team.projects) if team.url else {}

    def is_shared(self, memory: Memory) -> bool:
        """Whether the team sees this memory: its project is joined (and not opted out)."""
        projects = self.shared_projects()
        if not memory.project or memory.project not in projects:
            return False
        return not project_opted_out(
            memory.project, optout_rules(self.paths, self.settings.capture)
        )

    def team_join(
        self,
        url: str,
        *,
        project: str | None = None,
        team_name: str | None = None,
        user: str = "",
        password: str | None = None,
        cwd: str | None = None,
    ) -> dict[str, Any]:
        """Share a local project (default: the repository ``cwd`` is in) with the team
        whose database is at ``url`` (never with its password: that goes to the keyring),
        as ``team_name`` (default: the project's folder name). The server and its schema
        are checked before anything is kept; the running writer starts syncing."""
        from lexmem.team.membership import join

        result = join(
            self.paths, url, project=project, team_name=team_name, user=user,
            password=password, dim=self.settings.embedding.dim,
            space=self.embedder.space_id, cwd=cwd,
        )  # fmt: skip
        self.settings.team = load_settings(self.paths, write_back=False).team
        return result

    def team_leave(self, project: str | None = None, *, cwd: str | None = None) -> dict[str, Any]:
        """Stop sharing a project; what was pulled stays here, unpushed changes are dropped."""
        from lexmem.team.membership import leave

        result = leave(self.paths, project, cwd)
        self.settings.team = load_settings(self.paths, write_back=False).team
        if isinstance(self.store, SharingStore):
            self.store.projects = dict(self.settings.team.projects)
        return result

    def team_admin(
        self,
        url: str,
        team: str,
        *,
        share: Sequence[str] = (),
        members: Sequence[str] = (),
        passwords: Mapping[str, str] | None = None,
        user: str = "",
        password: str | None = None,
    ) -> dict[str, Any]:
        """As the team database's administrator (``user``, the tables' owner or a role
        that may create roles): lay out the schema, make ``team`` if missing, share the
        team projects ``share`` with it and make each of ``members`` a member (a login
        role of its own, with its password from ``passwords`` when given)."""
        from lexmem.settings import TeamSettings
        from lexmem.team.sync import open_server

        settings = TeamSettings(url=url, user=user)
        from lexmem.config import team_url_problem

        check = team_url_problem(url)
        if check:
            raise InvalidInputError(check)
        server = open_server(
            settings, dim=self.settings.embedding.dim, space=self.embedder.space_id,
            password=password,
        )  # fmt: skip
        try:
            server.create_team(team)
            for project in share:
                server.share_project(team, project)
            for role in members:
                server.add_member(team, role, password=(passwords or {}).get(role))
            return {"server": server.where, "team": team, "shared": list(share),
                    "members": list(members)}  # fmt: skip
        finally:
            server.close()

    def team_sync(self) -> dict[str, Any]:
        """Push the outbox and pull the team's changes now: the single writer does it."""
        return self._maintain("team_sync", {}, {})

    # -- for the desktop app (it imports nothing below the facade) ------------------------

    def capture_service(self) -> CaptureService:
        """The single writer of this data folder, built on this core, for a process that
        runs it itself (the desktop app, on its own thread)."""
        return CaptureService(self)

    def save_settings(self, settings: Settings) -> None:
        """Write ``settings`` to this data folder's settings file (the hook and other
        processes read it there); the object this core uses is the caller's to update."""
        save_settings(self.paths, settings)

    def post_event(
        self,
        event_type: str,
        content: str = "",
        *,
        session_id: str,
        agent: str,
        metadata: dict[str, Any] | None = None,
    ) -> Path:
        """Leave an event for the writer in the inbox (a configuration change, a request
        to show the app); returns the event's file."""
        event = make_event(
            event_type, content, session_id=session_id, agent=agent, metadata=metadata
        )
        return Inbox(self.paths.inbox).write(event)

    def memories_under(self, root: str) -> int:
        """How many memories (of any status) the repository ``root`` has: its project or one
        inside it (what an opt-out's purge would erase)."""
        return memories_under(self, root)

    def verify_licence_key(self, text: str) -> Licence:
        """Check a pasted licence key against this core's trust roots and clock, without
        activating it; raises :class:`LicenceError` when it is not a valid key."""
        svc = self.licence
        return verify_token(text, svc.public_keys, svc.clock())


def _team_server_folder(folder: Path | None, home: Path | str | None) -> Path:
    from lexmem.store.postgres import local

    data = Path(home).expanduser().absolute() if home is not None else resolve_paths().home
    return folder or local.default_folder(data)


def start_team_server(
    folder: Path | None = None, *, home: Path | str | None = None
) -> tuple[Path, str]:
    """Start a PostgreSQL with pgvector on this machine for trying team memory, in
    ``folder`` (by default beside the data folder ``home``); the folder and the URL of
    its ``lexmem`` database. Already running there: the same URL."""
    from lexmem.store.postgres import local

    where = _team_server_folder(folder, home)
    return where, local.start(where)


def stop_team_server(
    folder: Path | None = None, *, home: Path | str | None = None
) -> tuple[Path, bool]:
    """Stop the server :func:`start_team_server` started (its data stays); the folder,
    and whether one ran there."""
    from lexmem.store.postgres import local

    where = _team_server_folder(folder, home)
    return where, local.stop(where)
