"""The capture service: the single writer that drains the inbox into memories.

``CaptureService`` is the capture pipeline (:mod:`lexmem.service.pipeline`, how an event
becomes a memory) with what runs it: the service lock, the loop that drains the inbox,
the whole-store maintenance jobs it runs alone, and the searches' access batches.

Faults: what the machine gets wrong (a full or read-only disk, a missing or corrupt
model, a store locked too long) stops a drain before anything of its batch is half
done, with one line saying what is wrong; the events stay in the inbox and the running
service retries until it can take them in. What one event gets wrong is that event's
alone: a file that cannot be read, or whose processing fails while others succeed, is
quarantined; a window whose extraction fails is let go with an audit entry.

The service holds ``service.lock`` for its lifetime. ``lexmem serve`` runs it
headless; the desktop app runs it in-process; ``lexmem ingest`` drains once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lexmem.base import atomic_write
from lexmem.capture.extract import Extractor
from lexmem.capture.inbox import queued_access
from lexmem.capture.policy import is_paused
from lexmem.capture.redact import redact
from lexmem.errors import (
    DataFolderError,
    InvalidInputError,
    LexmemError,
    StoreError,
    StoreIOError,
    io_failure,
)
from lexmem.licence import CAPTURE
from lexmem.locks import FileLock, LockTimeout, held_here
from lexmem.models import utcnow
from lexmem.service.pipeline import (
    BOUNDARY,
    MAINTENANCE,
    CapturePipeline,
    DrainReport,
    _first_line,
    environmental,
    redacted_event,
)
from lexmem.service.readers import Handler, ReaderServer
from lexmem.service.registry import register, unregister
from lexmem.store.journal import AuditEntry, SessionStatus
from lexmem.team.sync import ChangeListener, TeamSync

if TYPE_CHECKING:
    from lexmem.api import Lexmem
    from lexmem.config import Paths


__all__ = [
    "MAINTENANCE",
    "CaptureService",
    "DrainReport",
    "Progress",
    "ServiceBusyError",
    "apply_access",
    "environmental",
    "progress_sink",
    "published_progress",
    "redacted_event",
]

log = logging.getLogger("lexmem.capture")


OPTIMIZE_EVERY_S = 600.0
# How often the loop checks that its data folder still exists (a deleted folder stops it).
FOLDER_CHECK_S = 5.0
# Searches' access records wait at most this long between commits. Each batch rewrites
# the rows it counts, which then sit outside the store's indices until the next
# compaction, and every search scans them flat: so batches are few, and each is folded
# into the indices at once (a fraction of a second at 10,000 memories).
ACCESS_EVERY_S = 10.0
# Agents' events settle before they are taken in (``[capture] settle_seconds``, at most
# SETTLE_MAX_S), unless this many are waiting.
SETTLE_MAX_S = 60.0
SETTLE_MAX_EVENTS = 500
# The watchdog notices that may bring an event file: renamed into the inbox (how lexmem
# writes), or made there, or closed after writing (another writer).
_ARRIVING = frozenset({"created", "moved", "closed"})
# What an agent's hooks write (lexmem.capture.hook): the events that settle.
AGENT_EVENTS = frozenset({
    "prompt", "response", "tool_call", "tool_result", "session_start", "session_end", "stop",
    "compact",
})  # fmt: skip

# A maintenance job's progress: (phase, done, total); the phase is the job's name, or
# "reembed" for an import's re-embedding.
Progress = Callable[[str, int, int], None]

# This process's running service per data folder (the one holding its lock), so that a
# caller in the same process hands its job to it rather than to the inbox.
_IN_PROCESS: dict[str, CaptureService] = {}
_IN_PROCESS_LOCK = threading.Lock()
# In-process callers waiting on a job that travels as an inbox event (by event id):
# the drain that runs it reports to them directly as well as to the progress file.
_SINKS: dict[str, Progress] = {}


def progress_sink(event_id: str, progress: Progress | None) -> None:
    """Hear the progress of the job sent as event ``event_id`` if this process runs it
    (``None``: stop hearing it)."""
    if progress is None:
        _SINKS.pop(event_id, None)
    else:
        _SINKS[event_id] = progress


def published_progress(paths: Paths) -> list[dict[str, Any]]:
    """The maintenance jobs running now, as their writer publishes them (any process):
    ``{"id", "job", "phase", "done", "total", "key"}`` each."""
    out: list[dict[str, Any]] = []
    try:
        names = sorted(n for n in os.listdir(paths.progress) if n.endswith(".json"))
    except OSError:
        return out
    for name in names:
        try:
            data = json.loads((paths.progress / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # gone meanwhile, or being replaced
        if isinstance(data, dict):
            out.append(data)
    return out


class _Publisher:
    """Publishes one job's progress: to the caller in this process, and to a small file
    in the data folder (rewritten atomically, at most ten times a second) for a caller
    in another process."""

    def __init__(self, paths: Paths, job_id: str, job: str, key: str, sink: Progress | None):
        self.path = paths.progress / f"{job_id}.json"
        self.base = {"id": job_id, "job": job, "key": key}
        self.sink = sink
        self.folder = paths.progress
        self._last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.sink is not None:
            self.sink(phase, done, total)
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        data = json.dumps({**self.base, "phase": phase, "done": done, "total": total})
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            atomic_write(
                self.path, data, durable=False
            )  # read while the job runs, not after a crash
        except OSError:  # progress is a courtesy: the job goes on without it
            pass

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass(slots=True)
class _Job:
    job: str
    kwargs: dict[str, Any]
    progress: Progress | None
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: BaseException | None = None


def apply_access(lm: Lexmem) -> int:
    """Apply the searches' queued access records, merged per memory, in one commit."""
    counts, files = queued_access(lm.paths.access)
    if not files:
        return 0
    if counts:
        lm.store.record_accesses(counts)
    for path in files:
        path.unlink(missing_ok=True)
    return len(files)


class ServiceBusyError(LexmemError, RuntimeError):
    """Another process already runs the service for this data folder."""


# How a failed drain's message ends: what waits. The cause is what comes before it.
_QUEUED_NOTE = "nothing is lost: "


class CaptureService(CapturePipeline):
    """Drains the inbox into the store; one per data folder at a time."""

    def __init__(self, lm: Lexmem, *, extractor: Extractor | None = None) -> None:
        super().__init__(lm, extractor=extractor)
        self._lock = FileLock(lm.paths.service_lock, timeout=0)
        self._wake = threading.Event()
        self._gate_checked: tuple[float, bool] = (-1e9, True)
        # Windows a crash left unextracted, still to finish (retried by the next drain
        # when finishing them failed at start-up, e.g. for want of the model).
        self._recover_pending = False
        # Team sync (lexmem.team): set up from [team] when the data folder has a team,
        # and again whenever the settings file changes (a join or leave elsewhere).
        self.team: TeamSync | None = None
        self._team_listener: ChangeListener | None = None
        self._team_settings_seen: float | None = None
        self._team_said = ""
        # Maintenance jobs handed over by other threads of this process, run by the loop.
        self._jobs: deque[_Job] = deque()
        # Held for each step of the loop and for each maintenance job: one at a time.
        self._exclusive = threading.RLock()
        self._loop_thread: threading.Thread | None = None
        self._access_at = -1e9
        self._kinds: dict[str, str] = {}  # inbox file name -> event type (see settling)
        # What the reader socket answers while the loop runs, by request kind (the
        # entry point that runs the service provides them: the CLI's reads, MCP).
        self.readers: Mapping[str, Handler] | None = None
        self.readers_warm: Callable[[], None] | None = None
        self.reader_server: ReaderServer | None = None

    @classmethod
    def in_process(cls, paths: Paths) -> CaptureService | None:
        """The service this process runs for ``paths`` (holding its lock), if any."""
        with _IN_PROCESS_LOCK:
            return _IN_PROCESS.get(str(paths.home))

    # -- the lock -------------------------------------------------------------------

    def acquire(self) -> None:
        """Become the service for this data folder, or raise :class:`ServiceBusyError`."""
        try:
            self._take_lock()
        except LockTimeout as exc:
            raise ServiceBusyError(
                f"the lexmem service already runs for {self.lm.paths.home}"
            ) from exc
        except OSError as exc:  # a read-only or full data folder
            raise self._still_queued(DataFolderError(
                f"cannot take the service lock ({exc.strerror or exc})",
                path=str(self.lm.paths.service_lock),
            )) from exc  # fmt: skip
        with _IN_PROCESS_LOCK:
            _IN_PROCESS[str(self.lm.paths.home)] = self
        try:
            self.inbox.ensure()
            self.journal.ensure()
        except Exception as exc:
            self._forget_in_process()
            self._lock.release()
            reason = io_failure(exc)
            if reason is None:
                raise
            raise self._still_queued(
                DataFolderError(
                    f"cannot write to the data folder ({reason})", path=str(self.lm.paths.home)
                )
            ) from exc
        self._recover_pending = True
        try:
            self.recover()
        except Exception as exc:
            if not environmental(exc):
                raise
            # The service still starts: it says so, and the first drain tries again.
            log.error("[MEM:CAPTURE] Recovering unextracted windows failed: %s", exc)

    def _take_lock(self) -> None:
        """The service lock; while a thread of this process holds it for one commit (the
        store takes it so when no service runs), wait for that commit to end."""
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self._lock.acquire()
                return
            except LockTimeout:
                if not held_here(self.lm.paths.service_lock) or time.monotonic() >= deadline:
                    raise
                if self.in_process(self.lm.paths) is not None:
                    raise
                time.sleep(0.02)

    def recover(self) -> DrainReport:
        """Finish windows that closed before a crash but were never extracted, and
        sweep away the temporary files of producers killed mid-write."""
        report = DrainReport()
        try:
            if swept := self.inbox.sweep():
                log.info("[MEM:CAPTURE] Removed %d abandoned temporary inbox files", swept)
        except OSError as exc:  # a read-only folder: the drain says so in its own words
            log.warning("[MEM:CAPTURE] Could not sweep the inbox: %s", exc)
        try:  # a kill between store_many's two commits; best effort, like the sweep
            self.lm.store.add_missing_confidence()
        except Exception as exc:  # noqa: BLE001 - a damaged store is the drain's to report
            log.warning("[MEM:CAPTURE] Could not check the confidence history: %s", exc)
        for session_id in self.journal.buffered_sessions():
            types = {e["event_type"] for e in self.journal.buffered(session_id)}
            if types & BOUNDARY:
                report.add(self._window_or_let_go(session_id, final="session_end" in types))
        self._recover_pending = False
        return report

    def release(self) -> None:
        # A one-shot drain (the CLI acting as the service) leaves the digests current too.
        try:
            self.digests.flush(force=True)
        finally:
            if self._lock.held:
                self._forget_in_process()
            self._lock.release()

    def _forget_in_process(self) -> None:
        with _IN_PROCESS_LOCK:
            if _IN_PROCESS.get(str(self.lm.paths.home)) is self:
                del _IN_PROCESS[str(self.lm.paths.home)]

    def __enter__(self) -> CaptureService:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- draining -------------------------------------------------------------------

    def settling(self) -> float:
        """Seconds the inbox's agent events are left alone yet: while an agent works, its
        events keep coming, and the service takes them in once none has come for
        ``[capture] settle_seconds`` (the agent then waits for the model, or is done), so
        its extraction and embedding do not compete with the agent for the machine. 0
        when anything else waits (what a person gave: a remember, an edit, a probe), when
        :data:`SETTLE_MAX_EVENTS` are waiting, or when the last came long enough ago.
        Nothing is dropped or held longer than that: the events are on disk, redacted."""
        settle = min(SETTLE_MAX_S, max(0.0, float(self.settings.settle_seconds or 0)))
        if settle <= 0:
            return 0.0
        files = self.inbox.pending()
        if not files or len(files) >= SETTLE_MAX_EVENTS:
            return 0.0
        try:  # names start with the time they were written, in nanoseconds
            newest = max(int(p.name.split("-", 1)[0]) for p in files) / 1e9
        except ValueError:
            return 0.0
        left = settle - (time.time() - newest)
        if left <= 0:
            return 0.0
        kinds = self._kinds
        for p in files:
            kind = kinds.get(p.name)
            if kind is None:
                try:
                    kind = str(json.loads(p.read_bytes()).get("event_type"))
                except (OSError, ValueError, AttributeError):
                    return 0.0  # the drain says what is wrong with it
                kinds[p.name] = kind
            if kind not in AGENT_EVENTS:
                return 0.0
        if len(kinds) > 4 * SETTLE_MAX_EVENTS:  # names of events taken in since
            live = {p.name for p in files}
            self._kinds = {n: k for n, k in kinds.items() if n in live}
        return left

    def drain(self, *, batch: int = 200, max_events: int | None = None) -> DrainReport:
        """Process every event waiting (or up to ``max_events``), in batches.

        Raises a :class:`~lexmem.errors.LexmemError` whose one line says what is wrong
        when the machine is (see :func:`environmental`); the events stay in the inbox.
        """
        with self._exclusive:  # a maintenance job of another thread waits, and vice versa
            return self._drain(batch, max_events)

    def _drain(self, batch: int, max_events: int | None) -> DrainReport:
        report = DrainReport()
        try:
            if self._recover_pending:
                report.add(self.recover())
            files = self.inbox.pending()
            if max_events is not None:
                files = files[:max_events]
            for start in range(0, len(files), batch):
                report.add(self._take(files[start : start + batch]))
            if time.monotonic() - self._access_at >= ACCESS_EVERY_S:
                if apply_access(self.lm):
                    self.lm.store.optimize(build_vector_index=False)
                self._access_at = time.monotonic()
            self.digests.flush()
        except StoreIOError as exc:  # the machine: where it failed, as for any other file
            raise self._still_queued(
                StoreError(f"cannot write to {self.lm.paths.home} ({exc.reason})")
            ) from exc
        except LexmemError as exc:
            self._still_queued(exc)
            raise
        except Exception as exc:
            reason = io_failure(exc)
            if reason is None:
                raise
            raise self._still_queued(
                StoreError(f"cannot write to {self.lm.paths.home} ({reason})")
            ) from exc
        return report

    def _still_queued(self, error: LexmemError) -> LexmemError:
        """The error, its one line saying that nothing is lost: the events wait."""
        try:
            waiting = len(self.inbox.pending())
        except OSError:
            return error
        note = _QUEUED_NOTE + (
            "1 event waits in the inbox" if waiting == 1 else f"{waiting} events wait in the inbox"
        )
        if waiting and note not in str(error):
            # The message is the first argument of every lexmem error; the type, exit code
            # and attributes stay as they were.
            error.args = (f"{error}; {note}", *error.args[1:])
        return error

    def _take(self, files: Sequence[Any]) -> DrainReport:
        """One batch; when it fails for something an event did, each event alone, and
        the ones that fail while others go through are quarantined.

        When every event fails alike, lexmem (or its store) is broken, not the events:
        they all stay in the inbox and the caller hears what failed. So a poisonous
        event alone waits until the next event shows the rest works.
        """
        try:
            return self._batch(files)
        except Exception as exc:
            if environmental(exc) or len(files) == 1:
                raise
        report = DrainReport()
        failed: list[tuple[Any, Exception]] = []
        for path in files:
            try:
                report.add(self._batch([path]))
            except Exception as one:
                if environmental(one):
                    raise
                failed.append((path, one))
        if len(failed) == len(files):
            raise failed[0][1]
        for path, error in failed:
            log.error("[MEM:CAPTURE] Processing %s failed", path.name, exc_info=error)
            self._quarantine(path, redact(f"processing failed ({_first_line(error)})").text)
            report.quarantined += 1
        return report

    # -- maintenance: whole-store jobs, run by the writer alone ---------------------------

    def _maintenance_op(
        self, event_id: str, op: str, kwargs: dict[str, Any], entry: AuditEntry
    ) -> None:
        """A maintenance job another process asked for: run now, alone; its progress is
        published, its outcome (or its one-line failure) goes to the audit log."""
        try:
            result = self._run_job(op, kwargs, _SINKS.get(event_id), job_id=event_id)
            entry.metadata = {"result": result}
        except LexmemError as exc:
            entry.decision, entry.reason = "failed", str(exc)
            entry.metadata = {"exit_code": exc.exit_code}
        except Exception as exc:
            # The asking process waits for this entry: it hears the failure, nothing retries
            # a job that may have run half-way (each job may be run again safely).
            log.exception("[MEM:CAPTURE] Maintenance %s failed", op)
            entry.decision = "failed"
            entry.reason = redact(f"{op} failed ({_first_line(exc)})").text
            entry.metadata = {"exit_code": 1}
        self.journal.audit([entry])

    def maintenance(
        self, job: str, kwargs: dict[str, Any], progress: Progress | None = None
    ) -> dict[str, Any]:
        """Run a maintenance job (:data:`MAINTENANCE`) as this data folder's writer and
        return its JSON-ready result. When the service's loop runs, the job is handed to
        the loop's thread and this one waits for it; otherwise it runs here. Either way
        nothing else is written while it runs."""
        if job not in MAINTENANCE:
            raise InvalidInputError(f"unknown maintenance job {job!r}")
        loop = self._loop_thread
        if loop is None or loop is threading.current_thread():
            return self._run_job(job, kwargs, progress)
        handed = _Job(job, kwargs, progress)
        self._jobs.append(handed)
        self.wake()
        while not handed.done.wait(0.5):
            if self._loop_thread is None and not handed.done.is_set():
                self._fail_jobs("the lexmem service stopped before the job ran")
        if handed.error is not None:
            raise handed.error
        return handed.result or {}

    def _run_jobs(self) -> None:
        """The jobs other threads handed over (the loop's thread only)."""
        while self._jobs:
            handed = self._jobs.popleft()
            try:
                handed.result = self._run_job(handed.job, handed.kwargs, handed.progress)
            except BaseException as exc:  # noqa: BLE001 - the waiting caller re-raises it
                handed.error = exc
            finally:
                handed.done.set()

    def _fail_jobs(self, why: str) -> None:
        while self._jobs:
            handed = self._jobs.popleft()
            handed.error = LexmemError(why)
            handed.done.set()

    def _run_job(
        self,
        job: str,
        kwargs: dict[str, Any],
        sink: Progress | None,
        *,
        job_id: str | None = None,
    ) -> dict[str, Any]:
        from pathlib import Path

        key = str(kwargs.get("folder") or kwargs.get("source") or "")
        publish = _Publisher(self.lm.paths, job_id or uuid.uuid4().hex, job, key, sink)
        try:
            with self._exclusive:
                if job == "optimize":
                    self.lm.apply_optimize()
                    return {}
                if job == "reembed":
                    return {"reembedded": self._reembed(kwargs.get("embedding"), publish)}
                if job == "import":
                    counts = self.lm.apply_import(
                        Path(str(kwargs["source"])),
                        lambda d, t: publish("import", d, t),
                        lambda d, t: publish("reembed", d, t),
                        skip_existing=bool(kwargs.get("skip_existing")),
                    )
                    self.digests.mark_all()
                    return dict(counts)
                if job == "team_sync":
                    self._team_check(force=True)
                    if self.team is None:
                        raise InvalidInputError(
                            "this data folder is in no team (`lexmem team join URL`)"
                        )
                    return self.team.sync_once().to_dict()
                if job == "scan_notes":
                    from lexmem.service.watcher import MarkdownWatcher

                    watcher = MarkdownWatcher(self, [str(kwargs["folder"])])
                    report = watcher.scan_all(lambda d, t: publish("scan_notes", d, t))
                    return report.to_dict()
                raise InvalidInputError(f"unknown maintenance job {job!r}")
        finally:
            publish.close()

    def _reembed(self, embedding: dict[str, Any] | None, publish: Progress) -> int:
        """Every vector again: with this service's model, or with ``embedding`` (model,
        path, dim), the model a caller configured (the service keeps its own until it
        restarts; the store then holds the new model's vectors)."""
        import copy

        mine = self.lm.settings.embedding
        wanted = {k: v for k, v in (embedding or {}).items() if k in ("model", "path", "dim")}
        if all(getattr(mine, k) == v for k, v in wanted.items()):
            publish("reembed", 0, self.lm.store.count())
            n = self.lm.apply_reembed(lambda d, t: publish("reembed", d, t))
        else:
            settings = copy.deepcopy(self.lm.settings)
            for k, v in wanted.items():
                setattr(settings.embedding, k, v)
            other = type(self.lm).open(self.lm.paths.home, settings=settings)
            try:
                other.embedder.embed_one("lexmem checks the model")  # load it, check its size
                publish("reembed", 0, other.store.count())
                n = other.apply_reembed(lambda d, t: publish("reembed", d, t))
            finally:
                other.close()
            self.lm.store.refresh()
        self.digests.mark_all()
        return n

    # -- maintenance and the loop ---------------------------------------------------------

    def abandon_idle(self, now: datetime | None = None) -> DrainReport:
        """Sessions silent for too long: extract what is buffered, mark them abandoned."""
        now = now or utcnow()
        limit = timedelta(minutes=self.settings.abandon_after_minutes)
        report = DrainReport()
        for s in self.journal.sessions(SessionStatus.ACTIVE, limit=10_000):
            if now - s.last_event_at >= limit:
                report.add(self._window_or_let_go(s.id, final=True))
                s.status, s.ended_at = SessionStatus.ABANDONED, now
                self.journal.save_sessions([s])
                self.extractor.forget(s.id)
        return report

    def maintain(self) -> None:
        """Background upkeep: compact, fold new rows into the indices, build the vector
        index once the store is large enough (captures wait in the inbox meanwhile)."""
        # Recency and use move the digests' ranking even without a change: refresh them all.
        self.digests.mark_all()
        try:
            self.forget_expired()
            self.lm.store.optimize()
        except Exception:  # upkeep failing must not stop capture; it retries later
            log.exception("[MEM:STORE] background optimize failed")

    def forget_expired(self, now: datetime | None = None) -> int:
        """Retention: archived memories older than ``retention_days`` are forgotten for good,
        erased from disk as ``forget`` erases."""
        days = self.lm.settings.store.retention_days
        if days <= 0:
            return 0
        cutoff = (now or utcnow()) - timedelta(days=days)
        ids = self.lm.store.archived_before(cutoff)
        if ids:
            # One erasure for the lot: text, audit texts, older versions, digests.
            self.lm.erase_memories(ids)
            log.info("[MEM:STORE] Retention forgot %d archived memories", len(ids))
        return len(ids)

    def wake(self) -> None:
        self._wake.set()

    def _may_capture(self) -> bool:
        """The capture gate for the Markdown watcher (asked at most once a minute)."""
        now = time.monotonic()
        if now - self._gate_checked[0] > 60:
            self._gate_checked = (now, self.lm.licence.is_enabled(CAPTURE))
        return self._gate_checked[1]

    def run(
        self,
        stop: threading.Event,
        *,
        poll: float = 2.0,
        on_report: Callable[[DrainReport], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        """Watch the inbox (and Markdown folders) and drain until ``stop`` is set.

        The watchdog threads only wake this loop; all store work happens here. A drain
        that fails (a full disk, a broken model) does not end the loop: ``on_error``
        hears the one-line reason once, and the loop retries, less often while the
        failure lasts (a new inbox event wakes it at once).
        """
        from lexmem.service.watcher import MarkdownWatcher

        observer = self._watch()
        record = register(self.lm.paths.home)
        if self.readers:
            self.reader_server = ReaderServer(self.lm.paths, self.readers, warm=self.readers_warm)
            self.reader_server.start()
        folder_checked = time.monotonic()
        notes: MarkdownWatcher | None = None
        watching: list[str] = []
        last_maintenance = 0.0
        last_optimize = time.monotonic()
        self.digests.mark_all()  # digests written by an older version, or never
        failures, said = 0, ""
        # From here jobs other threads hand over wait for this loop (none runs on theirs).
        self._loop_thread = threading.current_thread()
        try:
            try:  # rows written while no service ran (a cold CLI's access records) into the indices
                with self._exclusive:
                    self.lm.store.optimize(build_vector_index=False)
            except Exception:  # upkeep: the loop's own maintenance retries it
                log.exception("[MEM:STORE] folding new rows into the indices failed")
            while not stop.is_set():
                if time.monotonic() - folder_checked > FOLDER_CHECK_S:
                    folder_checked = time.monotonic()
                    if self.folder_gone():
                        log.warning("[MEM:CAPTURE] The data folder %s is gone: the service "
                                    "stops", self.lm.paths.home)  # fmt: skip
                        if on_error is not None:
                            on_error(f"the data folder {self.lm.paths.home} is gone; "
                                     "the service stopped")  # fmt: skip
                        break
                busy = False
                failed: Exception | None = None
                with self._exclusive:  # a maintenance job from another thread waits
                    try:
                        self._run_jobs()
                        if list(self.settings.watch) != watching:  # folders added or removed
                            if notes is not None:
                                notes.stop()
                            watching = list(self.settings.watch)
                            notes = MarkdownWatcher(self, watching) if watching else None
                            if notes is not None:
                                notes.start()
                        settling = self.settling()
                        report = self.drain() if settling <= 0 else DrainReport()
                        if on_report and (report.events or report.quarantined):
                            on_report(report)
                        if (
                            notes is not None
                            and not is_paused(self.settings)
                            and self._may_capture()
                        ):
                            notes.step()
                            busy = notes.scanning
                        if time.monotonic() - last_maintenance > 60:
                            self.abandon_idle()
                            last_maintenance = time.monotonic()
                        if time.monotonic() - last_optimize > OPTIMIZE_EVERY_S:
                            self.maintain()
                            last_optimize = time.monotonic()
                        self.digests.flush()
                        self._team_step()
                    except Exception as exc:  # noqa: BLE001 - said below, and retried
                        failed = exc
                if failed is not None:
                    failures += 1
                    message = (
                        str(failed) if isinstance(failed, LexmemError) else _first_line(failed)
                    )
                    cause = message.partition(f"; {_QUEUED_NOTE}")[0]
                    if cause != said:  # once per cause, not at every retry
                        log.error("[MEM:CAPTURE] %s", message,
                                  exc_info=failed if not isinstance(failed, LexmemError) else None)  # fmt: skip
                        if on_error is not None:
                            on_error(message)
                        said = cause
                    self._wake.wait(min(30.0, poll * 2 ** min(failures, 4)))
                    self._wake.clear()
                    continue
                if failures:
                    log.info("[MEM:CAPTURE] Capture works again after %d failed tries", failures)
                    failures, said = 0, ""
                if not self._jobs:
                    pause = 0.25 if busy or (notes and notes._pending) else poll
                    self._wake.wait(min(pause, settling) if settling > 0 else pause)
                self._wake.clear()
        finally:
            self._team_stop()
            if self.reader_server is not None:
                self.reader_server.stop()
                self.reader_server = None
            unregister(record)
            self._loop_thread = None
            self._fail_jobs("the lexmem service stopped before the job ran")
            if notes is not None:
                notes.stop()
            if observer is not None:
                observer.stop()
                observer.join(timeout=5)

    # -- team sync --------------------------------------------------------------------------

    def _team_check(self, *, force: bool = False) -> None:
        """Set team sync up, change it or end it as ``[team]`` in the settings file says
        (read again only when the file changed)."""
        from lexmem.settings import load_settings

        try:
            seen = self.lm.paths.settings.stat().st_mtime
        except OSError:
            seen = 0.0
        if not force and seen == self._team_settings_seen:
            return
        self._team_settings_seen = seen
        team = load_settings(self.lm.paths, write_back=False).team
        self.lm.settings.team = team
        if not (team.url and team.projects):
            if self.team is not None:
                self.team.store.projects = {}
            self._team_stop()
            return
        sharing = self.lm.share_with_team()
        sharing.on_queued = self.wake
        space = self.lm.embedder.space_id
        dim = self.lm.settings.embedding.dim
        if self.team is None:
            self.team = TeamSync(sharing, team, erase=self.lm.erase_memories, dim=dim, space=space)
        else:
            moved = (team.url, team.user) != (self.team.settings.url, self.team.settings.user)
            self.team.configure(team)
            if moved and self._team_listener is not None:
                self._team_listener.stop()
                self._team_listener = None
        if self._team_listener is None and self._loop_thread is not None:
            self._team_listener = ChangeListener(team, dim=dim, space=space, wake=self.wake)
            self._team_listener.start()

    def _team_step(self) -> None:
        """Push and pull when due (the loop's thread). A failure (the server down) never
        stops capture: it is said once per cause and retried with backoff."""
        self._team_check()
        if self.team is None:
            return
        listener = self._team_listener
        notified = listener is not None and listener.notified.is_set()
        if not self.team.due(notified):
            return
        if listener is not None:
            listener.notified.clear()
        try:
            report = self.team.sync_once()
        except Exception as exc:  # recorded for `lexmem team status`, retried
            message = str(exc) if isinstance(exc, LexmemError) else _first_line(exc)
            if message != self._team_said:
                log.warning("[MEM:TEAM] Sync failed (retried): %s", message,
                            exc_info=None if isinstance(exc, LexmemError) else exc)  # fmt: skip
                self._team_said = message
            return
        if self._team_said:
            log.info("[MEM:TEAM] Sync works again")
            self._team_said = ""
        if report.pulled or report.deleted:
            self.digests.mark_all()

    def _team_stop(self) -> None:
        if self._team_listener is not None:
            self._team_listener.stop()
            self._team_listener = None
        if self.team is not None:
            self.team.close()
            self.team = None

    def folder_gone(self) -> bool:
        """Whether the data folder was deleted (or moved away) under the running service:
        its lock file, which the service keeps open, no longer has a name there."""
        try:
            return not self.lm.paths.service_lock.exists()
        except OSError:
            return True

    def _watch(self) -> Any:
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:  # pragma: no cover - a dependency; polling still works
            return None
        service = self

        class Handler(FileSystemEventHandler):  # type: ignore[misc]
            # Runs on watchdog's thread: it only sets a flag, the loop does the work. Only
            # an event file arriving wakes it: each write is several notices (the hidden
            # temporary file made, written, closed, renamed), and the drain's own removals
            # are more; each woken turn of the loop costs the machine, beside an agent.
            def on_any_event(self, event: Any) -> None:
                if event.is_directory or event.event_type not in _ARRIVING:
                    return
                path = getattr(event, "dest_path", "") or event.src_path
                name = os.path.basename(os.fsdecode(path))
                if name.endswith(".json") and not name.startswith("."):
                    service.wake()

        observer = Observer()
        observer.schedule(Handler(), str(self.inbox.folder), recursive=False)
        observer.daemon = True
        observer.start()
        return observer
