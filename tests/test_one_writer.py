"""One writer, for real: the store is committed to only by the process holding the
writer's lock; maintenance (import, reembed, optimize, a notes scan) and searches' access
records reach it from every caller: a service in another process (a real `lexmem serve`),
this process's own service, or no service at all."""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import shared_model
from faultkit import serving, wait_for

from lexmem.api import Lexmem
from lexmem.cli import cli
from lexmem.embedder import Embedder
from lexmem.errors import InvalidInputError, LexmemError, WriterElsewhereError
from lexmem.locks import service_running
from lexmem.service.client import drain_if_no_service
from lexmem.service.writer import CaptureService

ROOT = Path(__file__).resolve().parent.parent


def cli_run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), prog_name="lexmem", catch_exceptions=False)
    assert result.exit_code == code, f"lexmem {' '.join(args)}: {result.stdout}{result.stderr}"
    return result


def notes_folder(base: Path, n: int = 2) -> Path:
    notes = base / "notes"
    notes.mkdir()
    for i in range(n):
        (notes / f"n{i}.md").write_text(f"# Host {i}\n\nThe build server {i} is ci-{i}.example.\n")
    return notes


# -- the rule, checked over the code ------------------------------------------------------

# The store's methods that commit, and the facade's that only the writer may call.
STORE_WRITES = frozenset({
    "store", "store_many", "replace", "update_salience", "record_access", "record_access_many",
    "record_accesses", "reinforce", "set_pinned", "archive", "restore", "supersede", "edit",
    "delete", "delete_many", "erase", "erase_tables", "decay_all", "store_link", "delete_link",
    "record_confidence", "import_rows", "reembed", "optimize", "add_missing_confidence",
    "rebuild_context", "write_meta", "writing",
})  # fmt: skip
WRITER_ONLY = frozenset({"apply_import", "apply_reembed", "apply_optimize", "apply_access"})
# The writer's own modules (and the store itself, and the facade's write methods, which
# the writer's operations call).
WRITER_MODULES = ("lexmem/store/", "lexmem/service/writer.py", "lexmem/service/pipeline.py",
                  "lexmem/service/ops.py", "lexmem/service/watcher.py", "lexmem/api.py",
                  # the team's outbox in front of the store, and the sync the writer runs
                  "lexmem/team/recorder.py", "lexmem/team/sync.py")  # fmt: skip


def _store_writes(source: str) -> list[tuple[int, str]]:
    """Calls ``<...>.store.<write>(...)`` / ``store.<write>(...)`` and of the writer-only
    methods, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, receiver = node.func.attr, node.func.value
        on_store = (isinstance(receiver, ast.Attribute) and receiver.attr == "store") or (
            isinstance(receiver, ast.Name) and receiver.id == "store"
        )
        if (on_store and name in STORE_WRITES) or name in WRITER_ONLY:
            found.append((node.lineno, name))
    return found


def test_only_the_writers_modules_call_the_stores_write_methods() -> None:
    offenders = []
    for path in sorted([*(ROOT / "lexmem").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(WRITER_MODULES):
            continue
        for line, name in _store_writes(path.read_text(encoding="utf-8")):
            if rel == "lexmem/service/client.py" and name == "apply_access":
                continue  # the access batch when no service runs: under the writer's lock
            offenders.append(f"{rel}:{line} {name}")
    assert offenders == []


def test_the_static_check_can_fail() -> None:
    assert _store_writes("lm.store.optimize()\nstore.set_pinned(i, True)\nlm.apply_reembed()") == [
        (1, "optimize"), (2, "set_pinned"), (3, "apply_reembed"),
    ]  # fmt: skip
    assert _store_writes("lm.store.get(i)\nlm.optimize()") == []


# -- the rule, at run time ---------------------------------------------------------------


def test_a_write_while_another_process_is_the_writer_is_refused(lm: Lexmem) -> None:
    mid = lm.remember("The staging database listens on port 5433").memories[0].id
    assert not service_running(lm.paths)  # the commit took the writer's lock, and let go
    with serving(lm.paths.home):
        with pytest.raises(WriterElsewhereError, match="only writer"):
            lm.store.set_pinned(mid, True)
        with pytest.raises(WriterElsewhereError):
            lm.pin(mid)
        assert isinstance(WriterElsewhereError("x"), LexmemError)
        lm.refresh()
        assert not lm.get(mid).pinned
    lm.pin(mid)  # no service: this process is the writer for the commit
    assert lm.get(mid).pinned and not service_running(lm.paths)


def test_cli_maintenance_and_searches_go_through_a_running_service(
    lm: Lexmem, embedder: Embedder, tmp_path: Path
) -> None:
    for text in ("The staging database listens on port 5433", "Deploys go out on Tuesdays"):
        lm.remember(text)
    other = Lexmem.open(tmp_path / "other", embedder=embedder)
    other.remember("The release train leaves on Fridays")
    other.export(tmp_path / "export", "jsonl")
    other.close()
    with serving(lm.paths.home), shared_model(embedder):
        imported = cli_run("import", str(tmp_path / "export"))
        assert imported.stdout.startswith("Imported 1 memories")
        again = cli_run("import", str(tmp_path / "export"), code=InvalidInputError.exit_code)
        assert "already exist" in again.stderr
        assert cli_run("reembed").stdout.startswith("Re-embedded 3 memories with ")
        assert cli_run("optimize").stdout.startswith("Optimized: ")
        found = cli_run("search", "staging database port", "--json").stdout
        assert "5433" in found
        lm.refresh()
        hit = lm.search("staging database port", record_access=False).hits[0].memory
        assert hit.content.endswith("5433")

        def counted() -> bool:
            lm.refresh()
            return lm.get(hit.id).access_count == 1

        wait_for(counted, "the service to apply the search's access record")
        report = lm.scan_notes(notes_folder(tmp_path))  # this process, through the inbox
        assert (report.files, report.chunks) == (2, 2)
        ops = sorted(
            (e.rule, e.decision) for e in lm.audit_entries(limit=50) if e.kind == "memory_op"
        )
    # Each ran in the service (its audit entry says so), none in this process.
    assert ops == [
        ("op.import", "applied"), ("op.import", "failed"), ("op.optimize", "applied"),
        ("op.reembed", "applied"), ("op.scan_notes", "applied"),
    ]  # fmt: skip
    assert lm.count() == 5 and not list(lm.paths.access.glob("*.json"))


def test_this_processs_own_service_runs_the_jobs_on_its_thread(
    service: CaptureService, tmp_path: Path
) -> None:
    stop = threading.Event()
    loop = threading.Thread(
        target=service.run, args=(stop,), kwargs={"poll": 0.1}, name="writer", daemon=True
    )
    loop.start()
    try:
        client = Lexmem.open(service.lm.paths.home, embedder=service.lm.embedder)
        service.lm.remember("Deploys go out on Tuesdays")  # this process is the writer
        seen: list[tuple[str, int, int]] = []

        def progress(done: int, total: int) -> None:
            seen.append((threading.current_thread().name, done, total))

        assert client.reembed(progress) == 1
        assert seen[-1] == ("writer", 1, 1)
        seen.clear()
        report = client.scan_notes(notes_folder(tmp_path, 3), progress)
        assert report.files == 3 and seen[-1] == ("writer", 3, 3)
        client.optimize()
        assert not [e for e in client.audit_entries(limit=50) if e.kind == "memory_op"]
        client.close()
    finally:
        stop.set()
        service.wake()
        loop.join(30)


def test_with_no_service_the_caller_is_the_writer_for_the_job(lm: Lexmem, tmp_path: Path) -> None:
    lm.remember("Deploys go out on Tuesdays")
    seen: list[tuple[int, int]] = []
    assert lm.reembed(lambda d, t: seen.append((d, t))) == 1
    assert seen[0] == (0, 1) and seen[-1] == (1, 1)
    report = lm.scan_notes(notes_folder(tmp_path), lambda d, t: seen.append((d, t)))
    assert report.chunks == 2 and seen[-1] == (2, 2)
    lm.optimize()
    assert not service_running(lm.paths)
    assert not list(lm.paths.progress.glob("*.json"))  # nothing published is left behind


def test_searches_queue_access_records_and_the_writer_applies_them_in_one_batch(
    lm: Lexmem,
) -> None:
    mid = lm.remember("The staging database listens on port 5433").memories[0].id
    version = lm.store.table().version
    for _ in range(3):
        assert lm.search("staging database", limit=1).hits[0].memory.id == mid
    assert lm.store.table().version == version  # no search committed anything
    assert len(list(lm.paths.access.glob("*.json"))) == 3
    drain_if_no_service(lm)
    lm.refresh()
    assert lm.get(mid).access_count == 3
    # One update for the three searches, then the rewritten row folded into the indices
    # (a compaction and an index update), so that searches do not scan it flat.
    assert version + 1 < lm.store.table().version <= version + 3
    assert all(i.num_unindexed_rows == 0 for i in lm.store.table().list_indices())


def test_a_cli_search_with_no_service_is_counted_when_the_command_ends(
    lm: Lexmem, embedder: Embedder
) -> None:
    mid = lm.remember("The staging database listens on port 5433").memories[0].id
    with shared_model(embedder):
        cli_run("search", "staging database")
    lm.refresh()
    assert lm.get(mid).access_count == 1 and not service_running(lm.paths)


def test_the_writer_reads_its_own_commit_while_another_thread_refreshes(lm: Lexmem) -> None:
    """The desktop app refreshes and reads on its own threads while the writer commits and
    reads back what it wrote (team sync queues the row it just stored): a table handle
    another thread opened before the commit must not hide it from the writer."""
    from lexmem.models import Memory, MemoryType

    store = lm.store
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            store.refresh()
            store.get_optional("not-a-memory", with_embedding=False)

    thread = threading.Thread(target=reader)
    thread.start()
    missing = stale = 0
    try:
        for i in range(120):
            m = Memory(content=f"memory {i}", embedding=[0.1] * 384, type=MemoryType.SEMANTIC)
            store.store_many([m])
            missing += not store.get_many([m.id], with_embedding=True)
            store.set_pinned(m.id, True)
            got = store.get_many([m.id], with_embedding=True)
            stale += bool(got) and not got[0].pinned
    finally:
        stop.set()
        thread.join()
    assert (missing, stale) == (0, 0)
