"""The Markdown watcher (seed 002's MDFileWatcher), run inside the service.

Watched folders are scanned recursively for ``.md`` files. A file whose sha256 is
unchanged since it was last processed is skipped (the hashes live in the journal,
so this holds across restarts). A changed file is re-chunked; its previous chunks
are superseded by the new ones, never duplicated. A deleted file leaves its
memories in place (logged). Errors are logged and never stop the watcher.

watchdog calls back on its own thread: the callbacks only note the path and the
time; the service loop processes files once they have been quiet for the debounce
interval (1 s), and works through a first scan a few files at a time so capture
never waits for a large folder.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexmem.capture.chunker import ChunkerError, TextChunker
from lexmem.capture.redact import redact
from lexmem.models import Memory, MemoryContext, MemorySource, MemoryStatus, make_title

if TYPE_CHECKING:
    from lexmem.service.writer import CaptureService

__all__ = ["MarkdownWatcher", "WatchReport"]

log = logging.getLogger("lexmem.watcher")
DEBOUNCE_S = 1.0
SCAN_STEP = 20  # files per loop iteration during a first scan


@dataclass(slots=True)
class WatchReport:
    files: int = 0
    unchanged: int = 0
    chunks: int = 0
    superseded: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _is_markdown(path: str) -> bool:
    return path.lower().endswith((".md", ".markdown"))


class MarkdownWatcher:
    """Turns Markdown notes in watched folders into memories, through the service."""

    def __init__(self, service: CaptureService, folders: Iterable[str]) -> None:
        self.service = service
        self.folders = [Path(f).expanduser().resolve() for f in folders]
        self.chunker = TextChunker()
        self._pending: dict[str, float] = {}
        self._lock = threading.Lock()
        self._scan: list[Path] = []
        self._scan_total = 0
        self._observer: Any = None
        self.on_progress: Callable[[int, int], None] | None = None

    # -- watchdog side (its own thread) -----------------------------------------------

    def note(self, path: str, deleted: bool = False) -> None:
        if not _is_markdown(path):
            return
        if deleted:
            log.info("[MEM:CAPTURE] %s was deleted; its memories stay", redact(path).text)
            return
        with self._lock:
            self._pending[path] = time.monotonic()
        self.service.wake()

    def start(self) -> None:
        """Watch the folders (missing ones are logged and skipped) and queue a first scan."""
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):  # type: ignore[misc]
            def on_created(self, event: Any) -> None:
                if not event.is_directory:
                    watcher.note(str(event.src_path))

            def on_modified(self, event: Any) -> None:
                if not event.is_directory:
                    watcher.note(str(event.src_path))

            def on_moved(self, event: Any) -> None:
                if not event.is_directory:
                    watcher.note(str(event.dest_path))

            def on_deleted(self, event: Any) -> None:
                if not event.is_directory:
                    watcher.note(str(event.src_path), deleted=True)

        self._observer = Observer()
        for folder in self.folders:
            if not folder.is_dir():
                log.warning("[MEM:CAPTURE] watched folder %s does not exist; skipped", folder)
                continue
            self._observer.schedule(Handler(), str(folder), recursive=True)
        self._observer.daemon = True
        self._observer.start()
        self.queue_scan()

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    # -- service side (the loop's thread) -----------------------------------------------

    def queue_scan(self) -> int:
        files: list[Path] = []
        for folder in self.folders:
            if folder.is_dir():
                for root, dirs, names in os.walk(folder):
                    dirs[:] = [d for d in dirs if not d.startswith(".")]
                    files.extend(Path(root) / n for n in sorted(names) if _is_markdown(n))
        self._scan = files
        self._scan_total = len(files)
        return len(files)

    @property
    def scanning(self) -> bool:
        return bool(self._scan)

    def step(self, now: float | None = None) -> WatchReport:
        """Process files quiet for the debounce interval, and the next slice of a scan."""
        now = time.monotonic() if now is None else now
        with self._lock:
            ready = [p for p, t in self._pending.items() if now - t >= DEBOUNCE_S]
            for p in ready:
                del self._pending[p]
        report = WatchReport()
        for name in ready:
            self._process(Path(name), report)
        if self._scan:
            batch, self._scan = self._scan[:SCAN_STEP], self._scan[SCAN_STEP:]
            for file in batch:
                self._process(file, report)
            if self.on_progress:
                self.on_progress(self._scan_total - len(self._scan), self._scan_total)
        return report

    def scan_all(self, progress: Callable[[int, int], None] | None = None) -> WatchReport:
        """A whole scan now (``lexmem watch scan``), with progress."""
        self.queue_scan()
        report = WatchReport()
        done = 0
        while self._scan:
            path = self._scan.pop(0)
            self._process(path, report)
            done += 1
            if progress:
                progress(done, self._scan_total)
        return report

    def _process(self, path: Path, report: WatchReport) -> None:
        try:
            self.process_file(path, report)
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop the watcher
            message = redact(f"{path}: {type(exc).__name__}: {exc}").text
            report.errors.append(message)
            log.warning("[MEM:CAPTURE] could not capture %s", message)

    def _folder_of(self, path: Path) -> str | None:
        for folder in self.folders:
            if folder == path or folder in path.parents:
                return str(folder)
        return None

    def process_file(self, path: Path, report: WatchReport | None = None) -> list[str]:
        """Capture one Markdown file's chunks (seed 002 process_file); returns new memory ids."""
        from lexmem.capture.inbox import derived_id
        from lexmem.capture.policy import capture_mode, is_opted_out

        report = report if report is not None else WatchReport()
        path = path.expanduser().resolve()
        if not path.is_file():
            return []
        settings = self.service.settings
        folder = self._folder_of(path)
        if is_opted_out(str(path.parent), settings) or capture_mode(folder, settings) == "off":
            return []
        # Names are captured text too: a key in a file or folder name, or in a heading,
        # must not reach the store, the journal or the log any more than one in the body.
        project = redact(folder).text if folder else None
        raw = path.read_bytes()
        report.files += 1
        digest = hashlib.sha256(raw).hexdigest()
        journal = self.service.journal
        key = redact(str(path)).text
        if journal.file_hash(key) == digest:
            report.unchanged += 1
            return []
        text = raw.decode("utf-8")  # seed 002: invalid UTF-8 is an error for this file
        # The whole note is redacted before it is cut: a chunk may start after the words
        # that make a value a secret ("az login -u x -p" ... "pw"), and then no rule sees it.
        text = redact(text).text
        store = self.service.lm.store
        old = [
            m
            for m in store.list_memories(_doc_filter(key), limit=None, sort="created")
            if m.source == MemorySource.MARKDOWN_CHUNK
        ]
        try:
            chunks = self.chunker.chunk_text(text, key)
        except ChunkerError:
            chunks = []  # an emptied file: its old chunks are superseded below by nothing
        heading = _heading(text) or redact(path.stem).text
        memories: list[Memory] = []
        if chunks:
            encoder = self.service.lm.encoder
            ctx = MemoryContext(
                source=MemorySource.MARKDOWN_CHUNK, project=project, source_document=key,
                learning_context=f"from {Path(key).name}", user_id=self.service.lm.settings.store.user_id,
                capture_mode=settings.mode,
            )  # fmt: skip
            # A note is the user's own file, but a key pasted into it must not reach the
            # store: the note was redacted whole above, and each chunk again (idempotent).
            texts = [redact(c.content).text for c in chunks]
            classes = [encoder.classify_type(t) for t in texts]
            vectors = encoder.embedder.embed(texts)
            for c, text, cls, v in zip(chunks, texts, classes, vectors, strict=True):
                n, total = c.metadata.chunk_index + 1, c.metadata.total_chunks
                title = make_title(heading, limit=64) + (f" ({n}/{total})" if total > 1 else "")
                m = Memory(
                    content=text, title=title, type=cls.type, confidence=cls.confidence,
                    classification_method=cls.method, embedding=[float(x) for x in v], chunk=c.metadata,
                    id=derived_id("markdown", key, digest, str(c.metadata.chunk_index)),
                    source=ctx.source, project=project, source_document=key,
                    learning_context=ctx.learning_context, user_id=ctx.user_id, capture_mode=ctx.capture_mode,
                )  # fmt: skip
                memories.append(m)
            fresh = [m for m in memories if store.get_optional(m.id, with_embedding=False) is None]
            store.store_many(fresh)
            report.chunks += len(fresh)
        new_ids = {m.id for m in memories}
        for i, m in enumerate(o for o in old if o.id not in new_ids):
            if m.status != MemoryStatus.ACTIVE:
                continue
            if memories:
                store.supersede(m.id, memories[min(i, len(memories) - 1)].id)
            else:
                store.archive(m.id)
            report.superseded += 1
        journal.set_file_hash(key, digest)
        if memories:
            from lexmem.service.events import MemoryCaptured

            log.info("[MEM:CAPTURE] Captured %d chunks of %s", len(memories), key)
            self.service.bus.publish(
                MemoryCaptured(None, MemorySource.MARKDOWN_CHUNK, tuple(m.id for m in memories))
            )
        return [m.id for m in memories]


def _doc_filter(key: str) -> Any:
    from lexmem.store.protocol import MemoryFilter

    return MemoryFilter(source_document=key, status=None)


def _heading(text: str) -> str | None:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            return stripped.lstrip("#").strip() or None
        if stripped:
            return None
    return None
