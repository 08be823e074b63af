"""Where `lexmem export` and `lexmem backup` write, and what they say when they cannot:
one line naming the path and the reason, the right exit code, and nothing half-written.

The destinations are real file systems: tmpfs mounts made for the test (an empty mount
point, a read-only one, a nearly full one). Mounting needs root (or CAP_SYS_ADMIN); the
tests skip where it is not permitted."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clirun import error, run
from conftest import shared_model

from lexmem.embedder import Embedder


@pytest.fixture(autouse=True)
def _shared_model(embedder: Embedder) -> Iterator[None]:
    with shared_model(embedder):
        yield


Mount = Callable[..., Path]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Mount]:
    """``tmpfs(name, "size=8k", ...)``: a fresh tmpfs mounted at ``tmp_path/name``,
    unmounted afterwards; ``ro=True`` remounts it read-only once ``fill`` has run."""
    mounted: list[Path] = []

    def mount(name: str, *options: str, ro: bool = False, fill: Callable[[Path], None] | None = None) -> Path:  # fmt: skip
        if shutil.which("mount") is None:
            pytest.skip("no mount command")
        where = tmp_path / name
        where.mkdir(exist_ok=True)  # a folder made inside another mount by its fill
        opts = ",".join(("mode=0700", *options))
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()})")
        mounted.append(where)
        if fill is not None:
            fill(where)
        if ro:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


def remember_some(n: int = 3) -> None:
    for i in range(n):
        run("remember", f"Release {i} shipped with the new billing reports and the fixes")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_export_onto_an_empty_mount_point_names_it_and_leaves_it_as_it_was(
    tmpfs: Mount, tmp_path: Path
) -> None:
    """A mount point cannot be renamed over (EBUSY): that used to end in `internal error:
    OSError [Errno 16]`."""
    remember_some(1)
    usb = tmpfs("usb")
    before = leftovers(tmp_path)
    msg = error("export", str(usb), code=2)
    assert msg == (
        f"lexmem: error: cannot export to {usb} (it is a mount point): export into "
        f"a new folder inside it, e.g. {usb / 'lexmem-export'}"
    )
    assert leftovers(tmp_path) == before  # no temporary folder beside it
    assert usb.is_dir() and leftovers(usb) == [] and usb.is_mount()
    # What the message suggests works.
    run("export", str(usb / "lexmem-export"))
    assert (
        json.loads((usb / "lexmem-export" / "manifest.json").read_text())["counts"]["memories"] == 1
    )

    # /mnt read-only, /mnt/usb a writable mount in it: the mount point is the cause named.
    mnt = tmpfs("mnt", ro=True, fill=lambda where: (where / "usb").mkdir())
    inner = tmpfs("mnt/usb")
    assert inner == mnt / "usb"
    msg = error("export", str(inner), code=2)
    assert msg.startswith(f"lexmem: error: cannot export to {inner} (it is a mount point): ")


def test_export_to_a_read_only_or_full_disk_is_one_line_and_leaves_nothing(
    tmpfs: Mount,
) -> None:
    remember_some(3)  # ~9 KB of vectors each: more than the small disk below holds
    ro = tmpfs("ro", ro=True)
    msg = error("export", str(ro / "out"), code=1)
    assert msg == (
        f"lexmem: error: cannot export to {ro / 'out'} (read-only file system); nothing was written"
    )
    small = tmpfs("small", "size=12k")
    msg = error("export", str(small / "out"), code=1)
    assert msg == (
        f"lexmem: error: cannot export to {small / 'out'} (no space left on the device); "
        "nothing was written"
    )
    assert leftovers(small) == []


def test_backup_to_a_read_only_or_full_disk_is_one_line_and_leaves_nothing(
    tmpfs: Mount,
) -> None:
    remember_some(3)
    ro = tmpfs("ro", ro=True)
    msg = error("backup", str(ro), code=1)
    assert msg.startswith(f"lexmem: error: cannot back up to {ro}/lexmem-")
    assert msg.endswith(".tar.gz (read-only file system); nothing was written")
    msg = error("backup", str(ro / "new.tar.gz"), code=1)
    assert msg == (
        f"lexmem: error: cannot back up to {ro / 'new.tar.gz'} (read-only file system); "
        "nothing was written"
    )
    small = tmpfs("small", "size=12k")
    msg = error("backup", str(small), code=1)
    assert msg.startswith(f"lexmem: error: cannot back up to {small}/lexmem-")
    assert msg.endswith(".tar.gz (no space left on the device); nothing was written")
    assert leftovers(small) == []
