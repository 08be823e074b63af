"""The writer's client side: how a process that is not the writer gets something
written. Every producer writes an inbox event; a process that needs the result now (the
CLI, MCP, the tray) drains the inbox itself when no service runs, then reads the outcome
from the audit log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexmem.capture.inbox import Inbox, derived_id
from lexmem.errors import (
    DataFolderError,
    InvalidInputError,
    LexmemError,
)
from lexmem.models import (
    Changes,
    Memory,
)

if TYPE_CHECKING:
    from lexmem.api import Lexmem
    from lexmem.capture.inbox import InboxEvent
    from lexmem.store.journal import AuditEntry
    from lexmem.store.protocol import JournalBackend

from lexmem.service.writer import (
    CaptureService,
    Progress,
    ServiceBusyError,
    apply_access,
    progress_sink,
    published_progress,
    redacted_event,
)

__all__ = [
    "InboxWriter",
    "Interrupted",
    "Remembered",
    "apply_access_if_no_service",
    "drain_if_no_service",
    "enqueue",
    "interrupted",
    "maintain",
    "maintenance_progress",
    "remember_through_inbox",
    "watch_sigint",
    "withdraw",
]

log = logging.getLogger("lexmem.capture")

# Set once SIGINT came to this process (see watch_sigint).
_SIGINT = threading.Event()


def watch_sigint() -> None:
    """From now on, also remember that SIGINT came, not only raise KeyboardInterrupt: an
    interrupt that lands inside an import or native code comes out as another exception
    ("ImportError: initialization failed"), and it is still Ctrl-C. The main thread only,
    and only where Python's own handler is in place (a background job ignores SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return  # ignored, someone else's, or already this one

    def handler(signum: int, frame: Any) -> None:
        _SIGINT.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, handler)


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is, or came of, Ctrl-C."""
    return isinstance(exc, KeyboardInterrupt) or _SIGINT.is_set()


class InboxWriter:
    """The core's write methods, routed through the inbox to the single writer.

    With no service running, this process becomes the service for a moment (takes
    the lock, drains, lets go); with one running, it waits for it to apply the change.
    """

    def __init__(
        self,
        lm: Lexmem,
        *,
        agent: str = "cli",
        wait: float = 30.0,
        notify: Callable[[], None] | None = None,
    ) -> None:
        self.lm = lm
        self.agent = agent
        self.wait = wait
        # An in-process service to wake at once (the app), rather than through watchdog.
        self.notify = notify

    def _run(self, op: str, **kwargs: Any) -> dict[str, Any]:
        from lexmem.capture.inbox import make_event
        from lexmem.capture.policy import scrub
        from lexmem.errors import LexmemError

        for key in ("content", "title", "with_text"):  # secrets never reach the inbox either
            if isinstance(kwargs.get(key), str):
                kwargs[key] = scrub(kwargs[key])
        event = make_event(
            "memory_op", "", session_id=f"{self.agent}-ops", agent=self.agent,
            metadata={"op": op, "kwargs": kwargs},
        )  # fmt: skip
        journal = self.lm.journal
        entry_id = derived_id("op", event["event_id"])
        watch_sigint()
        try:
            enqueue(self.lm, event)
            if self.notify is not None:
                self.notify()
            drain_if_no_service(self.lm)
            deadline = time.monotonic() + self.wait
            retry = time.monotonic() + 0.5
            while True:
                self.lm.store.refresh()
                found = _outcome(journal, entry_id)
                if found is not None:
                    break
                if time.monotonic() >= deadline:
                    raise LexmemError(
                        "the running lexmem service has not applied it yet; it stays queued"
                    )
                if time.monotonic() >= retry:  # the service went away (or was only a commit)
                    drain_if_no_service(self.lm)
                    retry = time.monotonic() + 0.5
                time.sleep(0.05)
        except BaseException as exc:
            if not interrupted(exc):
                raise

            def applied() -> bool:
                try:
                    self.lm.store.refresh()
                    return _outcome(journal, entry_id) is not None
                except Exception:  # noqa: BLE001 - no journal yet: nothing was applied
                    return False

            what = op.replace("_", " ")
            said = _withdraw(
                self.lm, event["event_id"], applied, done=f"it was already done ({what})",
                owned=f"the running lexmem service has it ({what}) and will still do it",
                gone="nothing was changed",
            )  # fmt: skip
            raise Interrupted(said) from None
        if found.decision == "failed":
            error = LexmemError(found.reason)
            error.exit_code = int(found.metadata.get("exit_code", 1))
            raise error
        result: dict[str, Any] = found.metadata.get("result") or {}
        return result

    @staticmethod
    def _changes(result: dict[str, Any]) -> Changes:
        c = result.get("changes") or {}
        return Changes(tuple(c.get("created", ())), tuple(c.get("updated", ())), tuple(c.get("deleted", ())),
                       bool(c.get("links")))  # fmt: skip

    def pin(self, ident: str, pinned: bool = True) -> Changes:
        return self._changes(self._run("pin", ident=ident, pinned=pinned))

    def archive(self, ident: str) -> Changes:
        return self._changes(self._run("archive", ident=ident))

    def restore(self, ident: str) -> Changes:
        return self._changes(self._run("restore", ident=ident))

    def forget(self, ident: str) -> Changes:
        return self._changes(self._run("forget", ident=ident))

    def purge_project(self, root: str) -> Changes:
        """Erase every memory, session and buffered event of the repository ``root``."""
        return self._changes(self._run("purge_project", root=root))

    def reinforce(self, ident: str, boost: float = 0.1) -> Changes:
        return self._changes(self._run("reinforce", ident=ident, boost=boost))

    def link(self, a: str, b: str, link_type: str, strength: float = 0.5) -> Changes:
        return self._changes(self._run("link", a=a, b=b, link_type=link_type, strength=strength))

    def edit(self, ident: str, **fields: Any) -> Changes:
        if fields.get("type") is not None:
            fields["type"] = str(fields["type"])
        return self._changes(self._run("edit", ident=ident, **fields))

    def supersede(
        self, old: str, *, by: str | None = None, with_text: str | None = None, own: bool = False
    ) -> tuple[Changes, str]:
        """``own``: ``with_text`` is the person's own words (see :meth:`Lexmem.supersede`)."""
        result = self._run("supersede", old=old, by=by, with_text=with_text, own=own)
        return self._changes(result), str(result["new_id"])

    def decay(self, factor: float | None = None) -> tuple[Changes, int]:
        result = self._run("decay", factor=factor)
        return self._changes(result), int(result["count"])

    def unlink(self, a: str, b: str, link_type: str) -> Changes:
        return self._changes(self._run("unlink", a=a, b=b, link_type=link_type))

    def review(self, ids: Sequence[str], decision: str) -> Changes:
        return self._changes(self._run("review", ids=list(ids), decision=decision))

    def unsupersede(self, old: str, drop: str | None = None) -> Changes:
        return self._changes(self._run("unsupersede", old=old, drop=drop))


def _outcome(journal: JournalBackend, entry_id: str) -> AuditEntry | None:
    """The writer's audit entry for a request, if it is there yet. A journal whose tables
    a service that just started has not made yet holds no outcome (a reader never makes
    them: only the writer writes)."""
    from lexmem.errors import WriterElsewhereError

    try:
        return journal.audit_entry(entry_id)
    except WriterElsewhereError:
        return None


def enqueue(lm: Lexmem, event: InboxEvent) -> Path:
    """Write one event for the single writer; a full or read-only disk is one clear line
    (and the inbox holds no half-written event). Every field is redacted first, so what
    a person passes to the CLI or an agent to MCP (a project name, a search it confirms)
    reaches the inbox only as the store will keep it; ``event`` itself is not changed."""
    try:
        return Inbox(lm.paths.inbox).write(redacted_event(event.copy()))
    except OSError as exc:
        raise DataFolderError(
            f"cannot write to the inbox, so nothing was done ({exc.strerror or exc})",
            path=str(lm.paths.inbox),
        ) from exc


def drain_if_no_service(lm: Lexmem) -> None:
    """With no service running, this process is the service for a moment (as the CLI
    is): it takes the lock, drains the inbox, and lets go."""
    from lexmem.locks import service_running

    if service_running(lm.paths):
        return
    service = CaptureService(lm)
    try:
        service.acquire()
    except ServiceBusyError:
        return  # one started meanwhile: it will apply the event
    except BaseException:
        # Cut short (Ctrl-C) while it recovered, the lock taken: let it go, so that the
        # caller can still withdraw its event and a service can start.
        if CaptureService.in_process(lm.paths) is service:
            service.release()
        raise
    try:
        service.drain()
    finally:
        service.release()


def maintain(
    lm: Lexmem,
    job: str,
    kwargs: dict[str, Any],
    progress: Progress | None = None,
    *,
    agent: str = "cli",
) -> dict[str, Any]:
    """Have the single writer run a maintenance job (import, reembed, optimize,
    scan_notes) and return its result, reporting its progress on the way:

    - this process runs the service (the tray): the job goes to the service's thread;
    - no service runs: this process becomes the service for the job, then lets go;
    - a service runs in another process: the job travels as an inbox event; its progress
      is read from the file the writer publishes, its outcome from the audit log.
    """
    from lexmem.locks import service_running

    here = CaptureService.in_process(lm.paths)
    if here is not None:
        return here.maintenance(job, kwargs, progress)
    if not service_running(lm.paths):
        own = CaptureService(lm)
        try:
            own.acquire()
        except ServiceBusyError:
            pass  # one started meanwhile: it runs the job
        else:
            try:
                return own.maintenance(job, kwargs, progress)
            finally:
                own.release()
    return _maintain_through_inbox(lm, job, kwargs, progress, agent)


def _maintain_through_inbox(
    lm: Lexmem, job: str, kwargs: dict[str, Any], progress: Progress | None, agent: str
) -> dict[str, Any]:
    from lexmem.capture.inbox import make_event
    from lexmem.errors import LexmemError
    from lexmem.locks import service_running

    event = make_event(
        "memory_op", "", session_id=f"{agent}-ops", agent=agent,
        metadata={"op": job, "kwargs": kwargs},
    )  # fmt: skip
    event_id = event["event_id"]
    enqueue(lm, event)
    progress_sink(event_id, progress)  # if this process ends up running it (below)
    journal = lm.journal
    entry_id = derived_id("op", event_id)
    seen: tuple[str, int, int] | None = None
    check = 0.0
    try:
        while True:
            if progress is not None:
                for p in published_progress(lm.paths):
                    if p.get("id") == event_id:
                        now = (str(p["phase"]), int(p["done"]), int(p["total"]))
                        if now != seen:
                            seen = now
                            progress(*now)
            if time.monotonic() >= check:  # the audit log: a few reads a second at most
                lm.store.refresh()
                found = _outcome(journal, entry_id)
                if found is not None:
                    break
                if not service_running(lm.paths):  # the service stopped: run it here
                    drain_if_no_service(lm)
                check = time.monotonic() + 0.3
            time.sleep(0.1)
    finally:
        progress_sink(event_id, None)
    if found.decision == "failed":
        error = LexmemError(found.reason)
        error.exit_code = int(found.metadata.get("exit_code", 1))
        raise error
    result: dict[str, Any] = found.metadata.get("result") or {}
    return result


def maintenance_progress(lm: Lexmem, job: str, key: str) -> tuple[int, int] | None:
    """How far the writer's running ``job`` on ``key`` (a folder, an export) is, as
    (done, total), from any process; ``None`` when no such job runs."""
    for p in published_progress(lm.paths):
        if p.get("job") == job and p.get("key") == key:
            return int(p["done"]), int(p["total"])
    return None


def apply_access_if_no_service(lm: Lexmem) -> None:
    """Apply the searches' queued access records now when no service runs to do it (a
    CLI command at its end): this process is the writer for that one commit. With a
    service running, they wait for its next batch."""
    from lexmem.errors import WriterElsewhereError
    from lexmem.locks import service_running

    if CaptureService.in_process(lm.paths) is not None or service_running(lm.paths):
        return
    with contextlib.suppress(WriterElsewhereError):  # a service started meanwhile: it will
        apply_access(lm)


@dataclass(slots=True)
class Remembered:
    event_id: str
    memories: list[Memory]
    queued: bool  # a running service has it, but cannot store it now
    memory_id: str = ""  # the id it has, or will have once stored
    why: str = ""  # why it is queued rather than stored


class Interrupted(LexmemError):
    """Ctrl-C during a write; its message says exactly what became of the write
    ("nothing was kept", or the id it was or will be stored as). Exit code 130, as a
    shell reports a command SIGINT ended."""

    exit_code = 130


# How long a running service may show no sign of work at all (no inbox file taken, no
# commit, no job's progress) before a waiting ``remember`` says its memory stays queued.
# A sign of work starts the count again: a long text it is storing shows none for as
# long as the model takes, so this is generous; it is not how long a write may take.
STALL_S = 300.0


def _signs_of_work(lm: Lexmem, name: str) -> tuple[Any, ...]:
    """What changes while a service works through the inbox up to the file ``name``."""
    try:
        ahead = tuple(p.name for p in Inbox(lm.paths.inbox).pending() if p.name <= name)
    except OSError:
        ahead = ()
    jobs = tuple((p.get("id"), p.get("phase"), p.get("done")) for p in published_progress(lm.paths))
    try:
        count: int | None = lm.store.count()
    except Exception:  # noqa: BLE001 - a store that cannot count now: the rest tells
        count = None
    return ahead, jobs, count


def _busy_with(lm: Lexmem) -> str:
    """The maintenance job a running service is in, as words ("" when none): while it
    runs, the service takes in no event."""
    for p in published_progress(lm.paths):
        job = str(p.get("job") or "maintenance")
        done, total = p.get("done"), p.get("total")
        if isinstance(done, int) and isinstance(total, int) and total:
            return f"{job} ({done} of {total})"
        return job
    return ""


def withdraw(lm: Lexmem, event_id: str, memory_id: str) -> str:
    """After Ctrl-C during a remember: take its event back if no writer has it, and say
    what became of it (see :func:`_withdraw`)."""
    show = f"{memory_id} (lexmem show {memory_id[:8]})"
    return _withdraw(
        lm, event_id, lambda: _stored(lm, memory_id), done=f"it was already stored as {show}",
        owned=f"the running lexmem service has it and will still store it as {show}",
        gone="nothing was kept",
    )  # fmt: skip


def _withdraw(
    lm: Lexmem, event_id: str, applied: Callable[[], bool], *, done: str, owned: str, gone: str
) -> str:
    """Take the event ``event_id`` back if no writer has it; which of the three things
    became of it: ``done`` (``applied()`` already), ``owned`` (a running service has it
    and will apply it) or ``gone`` (withdrawn, or never written).

    An event file leaves the inbox only after what it does is committed, and only a
    process holding the writer's lock may remove one a writer could be reading: when a
    running service holds the lock, the event is the service's."""
    import signal
    import threading

    from lexmem.locks import FileLock, LockTimeout, held_here

    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        folder = lm.paths.inbox
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            names = []
        for n in names:  # this process's own write, cut short: never an event
            if n.startswith(f".tmp-{event_id}-"):
                (folder / n).unlink(missing_ok=True)
        mine = [n for n in names if n.endswith(f"-{event_id}.json") and not n.startswith(".")]
        if not mine:
            return done if applied() else gone
        lock = FileLock(lm.paths.service_lock, timeout=0)
        try:
            lock.acquire()
        except (LockTimeout, OSError):
            # Held in this very process (a commit the interrupt cut short let go of
            # nothing): no other writer can have the event either.
            if not held_here(lm.paths.service_lock):
                return owned
        try:
            if applied():
                return done
            for n in mine:
                (folder / n).unlink(missing_ok=True)
            return gone
        finally:
            lock.release()
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)


def _stored(lm: Lexmem, memory_id: str) -> bool:
    try:
        lm.store.refresh()
        return lm.store.get_optional(memory_id, with_embedding=False) is not None
    except Exception:  # noqa: BLE001 - no store yet: nothing was stored
        return False


def remember_through_inbox(
    lm: Lexmem,
    text: str,
    *,
    mtype: str | None = None,
    project: str | None = None,
    title: str | None = None,
    pin: bool = False,
    agent: str = "cli",
    wait: float | None = None,
    notify: Callable[[], None] | None = None,
    cwd: str | None = None,
) -> Remembered:
    """An explicit "remember this" as the single-writer design has it: an inbox event.

    With no service running, this process becomes the service for a moment: it takes
    the lock, drains the inbox (this event and anything agents left) and lets go.
    With one running, it waits for the memory to appear: up to ``wait`` seconds when
    given; else for as long as the service is alive and working, answering "queued"
    (with the id the memory will have) only when the service cannot store it now (a
    maintenance job holds it, or it showed no sign of work for :data:`STALL_S`).

    ``cwd``: where the save comes from; inside an opted-out repository it is refused.
    Ctrl-C raises :class:`Interrupted` saying what became of the event.
    """
    from lexmem.capture.inbox import make_event, new_event_id
    from lexmem.capture.policy import refuse_opted_out, scrub
    from lexmem.locks import service_running

    event_id = new_event_id()
    memory_id = derived_id("explicit", event_id)
    watch_sigint()
    try:
        body = scrub(text)
        if not body:
            raise InvalidInputError("nothing to remember: the text is empty")
        refuse_opted_out(lm.paths, lm.settings.capture, project, cwd=cwd)
        lm.check_storage(1)  # say so now, rather than leave the person waiting on a skip
        meta: dict[str, Any] = {"pin": pin}
        if mtype:
            meta["type"] = mtype
        if title:
            meta["title"] = scrub(title)
        event = make_event(
            "explicit", body, session_id=f"{agent}-explicit", agent=agent, project=project,
            metadata=meta, event_id=event_id,
        )  # fmt: skip
        name = enqueue(lm, event).name
        if notify is not None:
            notify()
        drain_if_no_service(lm)
        deadline = None if wait is None else time.monotonic() + wait
        retry = time.monotonic() + 0.5
        signs, quiet_since = _signs_of_work(lm, name), time.monotonic()
        look = quiet_since + 1.0
        while True:
            if time.monotonic() >= retry:  # the service went away (or was only a commit)
                drain_if_no_service(lm)
                retry = time.monotonic() + 0.5
            lm.store.refresh()
            first = lm.store.get_optional(memory_id, with_embedding=False)
            if first is not None:
                ids = [memory_id]
                if first.chunk and first.chunk.total_chunks > 1:
                    ids += [
                        derived_id("explicit", event_id, str(i))
                        for i in range(1, first.chunk.total_chunks)
                    ]
                return Remembered(event_id, lm.store.get_many(ids), False, memory_id)
            now = time.monotonic()
            why = ""
            if deadline is not None and now >= deadline:
                why = (
                    "handed to the running lexmem service"
                    if wait == 0
                    else "the running lexmem service has not stored it yet"
                )
            elif deadline is None and service_running(lm.paths):
                busy = _busy_with(lm)
                if busy:
                    why = f"the running lexmem service is busy with {busy}"
                elif now >= look:  # a few looks a second would cost the service reads
                    look = now + 1.0
                    seen = _signs_of_work(lm, name)
                    if seen != signs:
                        signs, quiet_since = seen, now
                    elif now - quiet_since >= STALL_S:
                        why = "the running lexmem service shows no progress"
            if why:
                return Remembered(event_id, [], True, memory_id, why)
            time.sleep(0.05)
    except BaseException as exc:
        if not interrupted(exc):
            raise
        raise Interrupted(withdraw(lm, event_id, memory_id)) from None
