"""lexmem.base: the one atomic write, and the frozen value base.

Also: no module of the core or the desktop writes a file by renaming a temporary one
itself; they all go through :func:`lexmem.base.atomic_write`.
"""

from __future__ import annotations

import ast
import copy
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import pytest

from lexmem import base
from lexmem.base import Frozen, atomic_write, atomic_writer

ROOT = Path(__file__).resolve().parent.parent
POSIX = pytest.mark.skipif(os.name != "posix", reason="modes and folder fsync are POSIX")


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder of its own (``tmp_path`` holds the tests' home folder too)."""
    made = tmp_path / "here"
    made.mkdir()
    return made


# -- atomic_write ------------------------------------------------------------------------------


def test_bytes_and_text_are_written_as_given(folder: Path) -> None:
    target = folder / "a.json"
    atomic_write(target, b"\x00\xffbytes")
    assert target.read_bytes() == b"\x00\xffbytes"
    atomic_write(target, "caf\u00e9\r\nline\n")  # no newline translation
    assert target.read_bytes() == "caf\u00e9\r\nline\n".encode()
    atomic_write(target, "caf\u00e9", encoding="latin-1")
    assert target.read_bytes() == b"caf\xe9"
    assert _names(folder) == ["a.json"]  # no temporary file left


def test_a_file_is_replaced_whole_and_a_path_may_be_a_string(folder: Path) -> None:
    target = folder / "settings.toml"
    target.write_text("old, and longer than the new content\n")
    atomic_write(str(target), "new\n")
    assert target.read_text() == "new\n"


@POSIX
@pytest.mark.parametrize("mode", [0o600, 0o644, 0o640])
def test_the_file_gets_exactly_the_mode_asked_whatever_the_umask(folder: Path, mode: int) -> None:
    target = folder / "f"
    old = os.umask(0o077)
    try:
        atomic_write(target, "x", mode=mode)
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == mode
    target.chmod(0o666)
    atomic_write(target, "y")  # the default: owner-only, not the old file's mode
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_the_temporary_name_is_hidden_unique_and_takes_the_prefix_asked(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        seen.append(os.path.basename(src))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    atomic_write(folder / "e.json", "1")
    atomic_write(folder / "e.json", "2")
    atomic_write(folder / "q.json", "3", tmp_prefix=".tmp-q-")
    first, second, third = seen
    assert first != second
    assert first.startswith(".e.json.") and first.endswith(".tmp")
    assert third.startswith(".tmp-q-") and third.endswith(".tmp")
    assert not any(name.endswith(".json") for name in seen)  # never taken for the real thing


def test_a_temporary_name_already_taken_is_never_written_over(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    draws = iter([b"\x00" * 6, b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(os, "urandom", lambda n: next(draws))
    taken = folder / f".f.{'00' * 6}.tmp"  # another writer's, mid-write
    taken.write_text("theirs")
    atomic_write(folder / "f", "mine")
    assert (folder / "f").read_text() == "mine"
    assert taken.read_text() == "theirs"
    assert _names(folder) == [taken.name, "f"]


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_a_failure_leaves_the_old_file_and_no_temporary_one(
    folder: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    target = folder / "state.json"
    target.write_text("old")

    def fail(*_: Any, **__: Any) -> None:
        raise OSError(28, "No space left on device")

    if where == "write":
        with pytest.raises(OSError, match="No space"), atomic_writer(target) as fh:
            fh.write(b"half")
            fail()
    else:
        monkeypatch.setattr(os, where, fail)
        with pytest.raises(OSError, match="No space"):
            atomic_write(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert _names(folder) == ["state.json"]


def test_any_exception_in_the_body_cleans_up_and_is_raised_on(folder: Path) -> None:
    with pytest.raises(KeyboardInterrupt), atomic_writer(folder / "big.tar.gz") as fh:
        fh.write(b"partial")
        raise KeyboardInterrupt
    assert _names(folder) == []


def test_a_missing_folder_is_an_error_not_created(folder: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write(folder / "no" / "f", "x")
    assert _names(folder) == []


@POSIX
def test_the_file_then_its_folder_are_synced(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append("folder" if stat.S_ISDIR(st.st_mode) else "file")
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        synced.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(folder / "f", "x")
    assert synced == ["file", "replace", "folder"]
    # A courtesy file (a job's progress, a search's access record) is renamed, not synced.
    synced.clear()
    atomic_write(folder / "g", "y", durable=False)
    assert synced == ["replace"] and (folder / "g").read_text() == "y"


@POSIX
def test_a_folder_that_cannot_be_synced_does_not_fail_a_finished_write(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(22, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(folder / "f", "x")
    assert (folder / "f").read_text() == "x"


def test_a_streamed_write_is_atomic_too(folder: Path) -> None:
    target = folder / "archive"
    with atomic_writer(target, mode=0o600) as fh:
        for _ in range(3):
            fh.write(b"block")
        assert not target.exists()  # nothing under the real name until the end
    assert target.read_bytes() == b"block" * 3


# -- no hand-written atomic writes ---------------------------------------------------------------

# Renames that are not writes of a file's content: each one moves something that exists.
MOVES = {
    ("lexmem/store/backup.py", "_swap_in"),  # the data folder's items aside and back
    ("lexmem/store/repair.py", "move"),  # a version file aside, kept in repair-<time>/
    ("lexmem/store/repair.py", "put_back"),  # ... and back again
    ("lexmem/store/lens.py", "export_store"),  # the export's staging folder into place
    ("lexmem/desktop.py", "_copy_and_switch"),  # the copied data folder into place
    ("lexmem/capture/hook.py", "write"),  # hook.log rotated to hook.log.1
    ("lexmem/service/digest.py", "_link"),  # a digest's link by folder (a symlink) swapped in
}


def _renames() -> set[tuple[str, str]]:
    """(file, function) for every ``os.replace``/``os.rename``/``Path.replace``/
    ``Path.rename`` call in lexmem/ and ui/, but lexmem/base.py."""
    found: set[tuple[str, str]] = set()
    for path in sorted([*(ROOT / "lexmem").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "lexmem/base.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                name, owner = node.func.attr, node.func.value
                by_os = isinstance(owner, ast.Name) and owner.id == "os"
                if (by_os and name in ("replace", "rename", "renames")) or (
                    name in ("rename", "replace")
                    and not by_os
                    # Path.replace(target) takes one argument; str.replace takes two or more,
                    # dataclasses.replace and Memory.replace keyword arguments, and
                    # MemoryStore.replace (``self.replace``) a memory.
                    and not (isinstance(owner, ast.Name) and owner.id == "self")
                    and len(node.args) == 1
                    and not node.keywords
                ):
                    found.add((rel, func.name))
    return found


def test_no_module_writes_a_file_through_its_own_rename() -> None:
    assert _renames() == MOVES


def test_no_module_syncs_or_makes_temporary_files_itself_but_folder_copies() -> None:
    """fsync, mkstemp and NamedTemporaryFile belong to lexmem.base; the one other fsync
    is the data folder's move, which copies file by file into a staging folder."""
    found = set()
    for path in sorted([*(ROOT / "lexmem").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "lexmem/base.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in (
                "fsync",
                "mkstemp",
                "NamedTemporaryFile",
            ):
                found.add((rel, node.attr))
    assert found == {("lexmem/desktop.py", "fsync")}


# -- Frozen ----------------------------------------------------------------------------------------


class Point(Frozen):
    __slots__ = ("x", "y")
    __match_args__ = ("x", "y")
    x: int
    y: int

    def __init__(self, x: int, y: int) -> None:
        super().__init__(x, y)


class Other(Frozen):
    __slots__ = ("x", "y")
    __match_args__ = ("x", "y")

    def __init__(self, x: int, y: int) -> None:
        super().__init__(x, y)


def test_a_frozen_value_has_a_dataclass_surface() -> None:
    p = Point(1, 2)
    assert (p.x, p.y) == (1, 2)
    assert p == Point(1, 2) and p != Point(2, 1)
    assert p != Other(1, 2)  # another class is never equal
    assert hash(p) == hash(Point(1, 2)) == hash((1, 2))
    assert repr(p) == "Point(x=1, y=2)"
    assert copy.copy(p) == p and copy.deepcopy(p) == p
    assert pickle.loads(pickle.dumps(p)) == p
    match p:
        case Point(a, b):
            assert (a, b) == (1, 2)
        case _:
            pytest.fail("no match")
    assert not hasattr(p, "__dict__")


def test_a_frozen_value_cannot_change() -> None:
    p = Point(1, 2)
    with pytest.raises(AttributeError, match="cannot assign to field 'x': Point is frozen"):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'y': Point is frozen"):
        del p.y  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.z = 0  # type: ignore[attr-defined]
    assert (p.x, p.y) == (1, 2)


def test_a_frozen_value_needs_all_its_fields() -> None:
    with pytest.raises(ValueError):
        Frozen.__init__(Point.__new__(Point), 1)


def test_the_module_loads_nothing_but_itself() -> None:
    """The hook imports it on every call: no other module may come with it."""
    import subprocess
    import sys

    code = (
        "import sys\nbefore = set(sys.modules)\nimport lexmem.base\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # (lexmem.version: the package's own version, which imports nothing)
    assert out.stdout.split() == ["lexmem", "lexmem.base", "lexmem.version"]
    assert base.__all__ == ["FILE_MODE", "Frozen", "atomic_write", "atomic_writer"]
