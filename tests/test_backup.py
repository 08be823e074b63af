"""``lexmem backup`` while another process writes, and ``lexmem restore --backup``.

A real writer process commits memories, links and confidence points to the data folder
as fast as it can while backups are taken; it holds the service lock meanwhile, as the
running service (the store's one writer) does. The backups are then restored
into fresh folders and read back with the real store.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lexmem.config import Paths
from lexmem.locks import FileLock
from lexmem.store.backup import read_backup
from lexmem.store.lance import MemoryStore
from lexmem.store.repair import check_tables

DIM = 8
SPACE = "test/fixed-vectors"

# The writer: unit i is memory i (with its first confidence point, one commit), then a
# link from i to i - 1, then a second confidence point for i: three commits, in order.
# Fixed vectors, not the model: embedding is not what is under test, and it would slow
# the writer to a handful of commits a second.
WRITER = f"""
import sys, time
from pathlib import Path
from lexmem.config import Paths, tighten_umask
from lexmem.locks import FileLock
from lexmem.models import Memory, MemoryLink, MemorySource
from lexmem.store.lance import MemoryStore

home, stop, progress, limit = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
tighten_umask()
Paths(home).ensure()
FileLock(Paths(home).service_lock, timeout=30).acquire()  # the writer, as the service is
store = MemoryStore(Paths(home), dim={DIM}, space_id={SPACE!r}).open()
def mid(i):
    return f"{{i:08d}}-0000-4000-8000-{{i:012d}}"
for i in range(limit):
    if stop.exists():
        break
    vector = [float((i + k) % 7) / 7 for k in range({DIM})]
    store.store(Memory(id=mid(i), content=f"memory number {{i}}", embedding=vector,
                       source=MemorySource.EXPLICIT))
    if i:
        store.store_link(MemoryLink(mid(i), mid(i - 1), "follows", 0.5))
    store.record_confidence(mid(i), 0.5)
    progress.write_text(str(i + 1))
"""


def mid(i: int) -> str:
    return f"{i:08d}-0000-4000-8000-{i:012d}"


def lexmem(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli_main(), list(args), prog_name="lexmem")
    assert result.exit_code == code, f"{args}: {result.output}"
    return result


def cli_main() -> Any:
    from lexmem.cli import cli

    return cli


def file_hashes(home: Path) -> dict[str, str]:
    """Every file in the data folder but the lock files (whose content is the pid of the
    last holder), by path."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and p.suffix != ".lock"
    }


def open_store(home: Path) -> MemoryStore:
    return MemoryStore(Paths(home), dim=DIM, space_id=SPACE).open()


@pytest.fixture
def writer(data_home: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The writer process, started and running; stopped (and waited for) at the end."""
    stop, progress = tmp_path / "stop", tmp_path / "progress"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data_home), str(stop), str(progress), "400"],
        stderr=subprocess.PIPE,
    )
    try:
        yield stop, progress
    finally:
        stop.touch()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()


def written(progress: Path) -> int:
    try:
        return int(progress.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def wait_for(progress: Path, n: int) -> None:
    deadline = time.monotonic() + 120  # a guard against a dead writer, not a measurement
    while written(progress) < n:
        assert time.monotonic() < deadline, f"the writer stopped at {written(progress)}"
        time.sleep(0.05)


def check_consistent_prefix(store: MemoryStore) -> int:
    """The store holds units 0..k-1 (for some k) with everything each unit committed
    before the next began; returns k."""
    ids = sorted(m.id for batch in store.iter_all(with_embedding=False) for m in batch)
    k = len(ids)
    assert ids == [mid(i) for i in range(k)]  # a prefix: no gaps
    links = {(lk.from_id, lk.to_id) for lk in store.all_links()}
    assert all(a in ids and b in ids for a, b in links)  # no link to a missing memory
    # Unit i's link and second point were committed before unit i + 1's memory.
    assert {(mid(i), mid(i - 1)) for i in range(1, k - 1)} <= links
    points: dict[str, int] = {}
    for p in store.all_confidence():
        points[p.memory_id] = points.get(p.memory_id, 0) + 1
    assert set(points) == set(ids)  # every memory has the point it was stored with
    assert all(points[mid(i)] == 2 for i in range(k - 1))
    return k


def test_a_backup_taken_while_another_process_writes_is_a_consistent_prefix(
    data_home: Path, tmp_path: Path, writer: tuple[Path, Path]
) -> None:
    stop, progress = writer
    wait_for(progress, 15)
    first = json.loads(lexmem("backup", "--json").stdout)  # default place: backups/
    wait_for(progress, written(progress) + 10)
    second_path = tmp_path / "elsewhere" / "second.tar.gz"
    second_path.parent.mkdir()
    second = json.loads(lexmem("backup", str(second_path), "--json").stdout)
    stop.touch()

    assert Path(first["path"]).parent == data_home / "backups"
    assert stat.S_IMODE((data_home / "backups").stat().st_mode) == 0o700
    for made in (first, second):
        assert stat.S_IMODE(Path(made["path"]).stat().st_mode) == 0o600
    listed = json.loads(lexmem("backup", "--list", "--json").stdout)
    assert [b["path"] for b in listed] == [first["path"]]

    for n, made in enumerate((first, second)):
        fresh = tmp_path / f"fresh-{n}"
        restored = json.loads(
            lexmem("--home", str(fresh), "restore", "--backup", made["path"], "--json").stdout
        )
        assert restored["replaced"] is None  # a fresh folder: nothing to move aside
        # Exactly the backup: every file it lists, byte for byte, and nothing else.
        manifest = _manifest(Path(made["path"]))
        assert {f: v["sha256"] for f, v in manifest["files"].items()} == file_hashes(fresh)
        assert check_tables(Paths(fresh)).state == "ok"
        store = open_store(fresh)
        k = check_consistent_prefix(store)
        tables = made["tables"]
        assert k == made["memories"] == tables[made["memories_table"]]["rows"] >= 15
        assert len(store.all_links()) == tables["links"]["rows"]
        assert len(store.all_confidence()) == tables["confidence"]["rows"]
        store.close()
    assert first["memories"] < second["memories"]


def _manifest(path: Path) -> dict[str, Any]:
    import tarfile

    with tarfile.open(path, "r:gz") as tar:
        member = tar.extractfile("MANIFEST.json")
        assert member is not None
        data: dict[str, Any] = json.load(member)
        return data


@pytest.fixture(scope="module")
def a_backup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A backup of a small store: three units, written by the writer run to its end (one
    for the module: the tests below only read it)."""
    home = tmp_path_factory.mktemp("source") / "lexmem"
    work = tmp_path_factory.mktemp("backups")
    subprocess.run(
        [sys.executable, "-c", WRITER, str(home), str(work / "stop"), str(work / "progress"), "3"],
        check=True,
    )
    made = json.loads(lexmem("--home", str(home), "backup", str(work), "--json").stdout)
    return Path(made["path"])


@pytest.fixture
def restored(data_home: Path, a_backup: Path) -> Path:
    """The data folder, restored from the backup."""
    lexmem("restore", "--backup", str(a_backup))
    return data_home


def test_restore_moves_the_current_data_aside_and_puts_the_backup_in_place(
    restored: Path, a_backup: Path
) -> None:
    store = open_store(restored)
    store.delete(mid(0))  # the data changes after the backup
    store.close()
    changed = file_hashes(restored)
    out = lexmem("restore", "--backup", str(a_backup)).stdout
    assert "from " + str(a_backup) in out and "3 memories" in out
    replaced = Path(out.split("kept in ", 1)[1].strip().rstrip("."))
    assert replaced.parent == restored and replaced.name.startswith("replaced-")
    # What it replaced is kept, file for file.
    kept = {k.removeprefix(replaced.name + "/"): v for k, v in file_hashes(restored).items()
            if k.startswith(replaced.name + "/")}  # fmt: skip
    items = ("store", "settings.toml", "digests")
    assert kept == {k: v for k, v in changed.items() if k.split("/")[0] in items}
    store = open_store(restored)
    assert check_consistent_prefix(store) == 3
    store.close()


def test_restore_refuses_while_the_service_runs(restored: Path, a_backup: Path) -> None:
    before = file_hashes(restored)
    with FileLock(Paths(restored).service_lock, timeout=0):  # as a running service holds it
        err = lexmem("restore", "--backup", str(a_backup), code=2).stderr
    assert err.startswith("lexmem: error: the lexmem service is running")
    assert "quit lexmem or stop `lexmem serve` first" in err and err.count("\n") == 1
    assert file_hashes(restored) == before


def _flipped(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x40  # one bit of one byte
    return bytes(out)


def _gunzipped(data: bytes) -> bytes | None:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        return None


def _first_flip(data: bytes, start: int, *, harmless: bool) -> int:
    """The first byte from ``start`` whose flipped bit changes what the archive holds
    (or, with ``harmless``, leaves it byte for byte the same).

    Deflate leaves some bits of its stream unread, and a bit flipped there decodes to
    the very same archive: a backup that is whole, and restores as one (about one byte
    in fifty of a small backup, so a fixed place in a backup written at a new time each
    run landed on one now and then)."""
    whole = gzip.decompress(data)
    for at in range(start, len(data) - 8):  # gzip's trailer has its own test below
        if (_gunzipped(_flipped(data, at)) == whole) == harmless:
            return at
    raise AssertionError(f"no such byte after {start}")


@pytest.mark.parametrize("where", [0.5, 0.9])
def test_a_damaged_backup_is_refused_and_nothing_changes(
    restored: Path, tmp_path: Path, a_backup: Path, where: float
) -> None:
    damaged = tmp_path / "damaged.tar.gz"
    data = a_backup.read_bytes()
    damaged.write_bytes(_flipped(data, _first_flip(data, int(len(data) * where), harmless=False)))
    before = file_hashes(restored)
    err = lexmem("restore", "--backup", str(damaged), code=2).stderr
    assert err.startswith(f"lexmem: error: {damaged}") and err.count("\n") == 1
    assert file_hashes(restored) == before
    assert [p.name for p in restored.iterdir() if p.name.startswith((".", "replaced-"))] == []


def test_a_flipped_bit_deflate_never_reads_restores_the_backup_whole(
    restored: Path, tmp_path: Path, a_backup: Path
) -> None:
    data = a_backup.read_bytes()
    at = _first_flip(data, len(data) // 10, harmless=True)
    flipped = tmp_path / "flipped.tar.gz"
    flipped.write_bytes(_flipped(data, at))
    store = open_store(restored)
    store.delete(mid(0))
    store.close()
    lexmem("restore", "--backup", str(flipped))
    manifest = _manifest(a_backup)
    restored_files = {
        k: v for k, v in file_hashes(restored).items() if not k.startswith("replaced-")
    }
    assert {f: v["sha256"] for f, v in manifest["files"].items()}.items() <= restored_files.items()
    store = open_store(restored)
    assert check_consistent_prefix(store) == 3
    store.close()


@pytest.mark.parametrize("back", [6, 2])  # gzip's stored CRC-32, then its stored length
def test_a_damaged_trailer_is_refused_too(
    restored: Path, tmp_path: Path, a_backup: Path, back: int
) -> None:
    """tar stops reading at its end-of-archive marker, so a damaged byte after it (the
    archive's zero padding, gzip's CRC and length) passed unseen: one in a few runs of the
    test above, wherever the flipped bit landed. The whole file is read and checked now."""
    damaged = tmp_path / "damaged.tar.gz"
    data = bytearray(a_backup.read_bytes())
    data[len(data) - back] ^= 0x40
    damaged.write_bytes(bytes(data))
    before = file_hashes(restored)
    err = lexmem("restore", "--backup", str(damaged), code=2).stderr
    assert err.startswith(f"lexmem: error: {damaged}") and err.count("\n") == 1
    assert file_hashes(restored) == before


def test_backup_and_restore_say_what_is_wrong_in_one_line(
    restored: Path, tmp_path: Path, a_backup: Path
) -> None:
    cases = [
        (["--home", str(tmp_path / "empty"), "backup"], "nothing to back up"),
        (["backup", str(a_backup)], "already exists"),
        (["backup", str(tmp_path / "backup.zip")], "ending in .tar.gz"),
        (["restore"], "give the ID of a memory to restore, or --backup PATH"),
        (["restore", "abcd1234", "--backup", str(a_backup)], "not both"),
        (["restore", "--backup", str(tmp_path / "missing.tar.gz")], "no backup at"),
    ]
    for args, words in cases:
        err = lexmem(*args, code=2).stderr
        assert words in err and err.count("\n") == 1, (args, err)
    not_a_backup = tmp_path / "notes.tar.gz"
    not_a_backup.write_bytes(os.urandom(64))
    assert (
        "damaged or not a lexmem backup"
        in lexmem("restore", "--backup", str(not_a_backup), code=2).stderr
    )


def test_a_backup_from_a_newer_lexmem_is_refused(tmp_path: Path, a_backup: Path) -> None:
    import gzip
    import io
    import tarfile

    from lexmem.store.backup import _checksum

    manifest = _manifest(a_backup)
    manifest["store_schema_version"] += 1
    manifest["checksum"] = _checksum(manifest)
    newer = tmp_path / "newer.tar.gz"
    with (
        tarfile.open(a_backup, "r:gz") as src,
        gzip.open(newer, "wb") as gz,
        tarfile.open(fileobj=gz, mode="w") as dst,
    ):
        for member in src:
            if member.name == "MANIFEST.json":
                body = json.dumps(manifest).encode()
                member.size = len(body)
                dst.addfile(member, io.BytesIO(body))
            else:
                dst.addfile(member, src.extractfile(member))
    assert read_backup(newer).store_schema_version == manifest["store_schema_version"]
    fresh = tmp_path / "fresh"
    err = lexmem("--home", str(fresh), "restore", "--backup", str(newer), code=2).stderr
    assert "newer lexmem" in err and "upgrade lexmem" in err
    assert not (fresh / "store").exists()


def test_a_restore_that_fails_half_way_puts_the_old_data_back(
    restored: Path, a_backup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lexmem.store.backup as backup_module

    store = open_store(restored)
    store.delete(mid(1))
    store.close()
    before = file_hashes(restored)
    real = backup_module._verify_store
    calls: list[Path] = []

    def fails_in_place(store_dir: Path, manifest: dict[str, Any]) -> None:
        calls.append(store_dir)
        if store_dir == Paths(restored).store:  # the backup is in place by now
            raise backup_module._Damaged("a table does not read (disk error)")
        real(store_dir, manifest)

    monkeypatch.setattr(backup_module, "_verify_store", fails_in_place)
    err = lexmem("restore", "--backup", str(a_backup), code=1).stderr
    assert "the data folder is as it was" in err and err.count("\n") == 1
    assert calls[-1] == Paths(restored).store  # it got as far as putting the backup in place
    assert file_hashes(restored) == before
    assert [p.name for p in restored.iterdir() if p.name.startswith((".", "replaced-"))] == []


def test_a_backup_of_a_damaged_store_fails_and_leaves_nothing(restored: Path) -> None:
    data = next((restored / "store" / "links.lance" / "data").iterdir())
    data.write_bytes(data.read_bytes()[:10])
    err = lexmem("backup", code=1).stderr
    assert "a table is damaged" in err and "lexmem doctor --repair" in err
    assert err.count("\n") == 1
    assert list((restored / "backups").iterdir()) == []
    assert [p.name for p in restored.iterdir() if p.name.startswith(".")] == []
