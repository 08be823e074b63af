"""Seed 002's Markdown watcher: chunks, hashes across restarts, supersede on change, debounce."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.models import MemorySource, MemoryStatus
from lexmem.service.watcher import MarkdownWatcher
from lexmem.service.writer import CaptureService
from lexmem.store.lance import MemoryFilter

NOTE = "# Release process\n\n" + " ".join(
    f"Step {i}: the release manager checks item {i} of the release checklist before tagging."
    for i in range(40)
)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "release.md").write_text(NOTE)
    (folder / "sub" / "style.md").write_text("# Style\n\nChapter titles stay under five words.\n")
    (folder / "ignore.txt").write_text("not markdown")
    return folder


@pytest.fixture
def service(data_home: Path, embedder: Embedder, notes: Path) -> Iterator[CaptureService]:
    lm = Lexmem.open(data_home, embedder=embedder)
    lm.settings.capture.watch = [str(notes)]
    svc = CaptureService(lm)
    svc.acquire()
    yield svc
    svc.release()
    lm.close()


def chunks(svc: CaptureService, status: MemoryStatus | None = MemoryStatus.ACTIVE) -> list:  # type: ignore[type-arg]
    return svc.lm.list_memories(
        MemoryFilter(source=MemorySource.MARKDOWN_CHUNK, status=status), limit=None
    )


def test_a_scan_chunks_markdown_files_and_skips_unchanged_ones_across_restarts(
    service: CaptureService, notes: Path, data_home: Path, embedder: Embedder
) -> None:
    seen: list[tuple[int, int]] = []
    published: list[object] = []
    service.bus.subscribe(published.append)
    report = MarkdownWatcher(service, [str(notes)]).scan_all(lambda d, t: seen.append((d, t)))
    assert {e.source for e in published} == {MemorySource.MARKDOWN_CHUNK}  # type: ignore[attr-defined]
    assert report.files == 2 and report.chunks >= 3 and not report.errors
    assert seen[-1] == (2, 2)
    release = [m for m in chunks(service) if m.source_document == str(notes / "release.md")]
    assert len(release) >= 2 and all(
        m.chunk and m.chunk.total_chunks == len(release) for m in release
    )
    assert release[0].title.startswith("Release process")
    assert service.lm.search("what does the release manager check", record_access=False).hits
    # A restarted service (new watcher, same journal) skips files whose hash is unchanged.
    again = MarkdownWatcher(service, [str(notes)]).scan_all()
    assert (again.unchanged, again.chunks) == (2, 0)


def test_a_changed_file_supersedes_its_old_chunks(service: CaptureService, notes: Path) -> None:
    watcher = MarkdownWatcher(service, [str(notes)])
    watcher.scan_all()
    before = {m.id for m in chunks(service) if m.source_document == str(notes / "sub" / "style.md")}
    (notes / "sub" / "style.md").write_text("# Style\n\nChapter titles stay under three words.\n")
    report = watcher.scan_all()
    assert report.superseded == 1 and report.chunks == 1
    now = [m for m in chunks(service) if m.source_document == str(notes / "sub" / "style.md")]
    assert len(now) == 1 and "three words" in now[0].content
    old = service.lm.get(before.pop())
    assert old.status == MemoryStatus.SUPERSEDED and old.superseded_by == now[0].id


def test_deleted_files_keep_their_memories_and_bad_files_do_not_stop_the_watcher(
    service: CaptureService, notes: Path
) -> None:
    watcher = MarkdownWatcher(service, [str(notes)])
    watcher.scan_all()
    n = len(chunks(service))
    (notes / "sub" / "style.md").unlink()
    watcher.note(str(notes / "sub" / "style.md"), deleted=True)
    (notes / "broken.md").write_bytes(b"\xff\xfe not utf-8 \xc3\x28")
    report = watcher.scan_all()
    assert len(report.errors) == 1 and "broken.md" in report.errors[0]
    assert len(chunks(service)) == n


def test_the_running_service_debounces_edits_and_captures_them(
    service: CaptureService, notes: Path
) -> None:
    stop = threading.Event()
    runner = threading.Thread(target=service.run, args=(stop,), kwargs={"poll": 0.2}, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while len(chunks(service)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(chunks(service)) >= 3  # the first scan ran inside the loop
        target = notes / "decisions.md"
        for i in range(5):  # a burst of saves: one capture after the quiet second
            target.write_text(f"# Decisions\n\nWe decided to ship weekly (draft {i}).\n")
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = [m for m in chunks(service, None) if m.source_document == str(target)]
            if found and "draft 4" in found[-1].content:
                break
            time.sleep(0.2)
        found = [m for m in chunks(service, None) if m.source_document == str(target)]
        assert [
            m.content.endswith("(draft 4).") for m in found if m.status == MemoryStatus.ACTIVE
        ] == [True]
        assert len(found) <= 2  # debounced: not one chunk per save
    finally:
        stop.set()
        service.wake()
        runner.join(30)
    assert not runner.is_alive()


def test_a_secret_in_a_notes_heading_or_file_name_reaches_neither_store_nor_journal(
    service: CaptureService, notes: Path, data_home: Path
) -> None:
    # Fake, built here: a GitHub token shape in the file name and one in the heading.
    in_name = "ghp_" + "Zq7Lm2Xc9Vb4Nk8Rt1Yw6Pa3Sd5Fg0Hj2Kl4M"
    in_heading = "ghp_" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz"
    note = notes / f"deploy-{in_name}.md"
    note.write_text(f"# Deploy with {in_heading}\n\nThe deploy script tags the release first.\n")
    report = MarkdownWatcher(service, [str(notes)]).scan_all()
    assert not report.errors
    captured = [m for m in chunks(service) if "deploy" in (m.source_document or "")]
    assert captured, "the note was captured"
    for m in captured:
        for field in (m.title, m.content, m.source_document, m.learning_context):
            assert in_name not in (field or "") and in_heading not in (field or "")
        assert "[REDACTED:" in m.title and "[REDACTED:" in (m.source_document or "")
    rows = service.journal.store.table("file_hashes").to_arrow().to_pylist()
    assert rows and not any(in_name in str(r) for r in rows)
