"""File trees: listing a folder's files, and recreating them elsewhere as hard links.

Backups stage the store this way under its write lock, and migrations keep the old
layout beside the new one the same way: LanceDB never changes a file once written, so a
hard link is a snapshot that costs nothing.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from lexmem.config import DIR_MODE, secure_umask

__all__ = ["link_tree", "tree_files"]

# Inside a ``<table>.lance`` folder, what LanceDB writes once and never changes (so a hard
# link is as good as a copy until the file is removed); everything else is copied.
_IMMUTABLE = frozenset({"data", "_indices", "_deletions"})


def _immutable(rel: PurePosixPath) -> bool:
    parts = rel.parts
    return any(
        part.endswith(".lance") and i + 1 < len(parts) - 1 and parts[i + 1] in _IMMUTABLE
        for i, part in enumerate(parts)
    )


def tree_files(root: Path, *, hidden: bool = False) -> list[str]:
    """Every regular file below ``root``, as sorted POSIX paths relative to it. Symbolic
    links are left out, and so, unless ``hidden``, are names starting with a dot (the
    temporary files of a write in progress). (``os.scandir``: the file types come with
    the listing, no stat per file.)"""
    out: list[str] = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith(".") and not hidden:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, f"{prefix}{entry.name}/")
                elif entry.is_file(follow_symlinks=False):
                    out.append(prefix + entry.name)

    if root.is_dir():
        walk(str(root), "")
    return sorted(out)


def link_tree(
    src: Path, dst: Path, keep: Callable[[str], bool] | None = None, *, hidden: bool = False
) -> int:
    """Recreate the files below ``src`` (those ``keep`` admits; see :func:`tree_files` for
    ``hidden``) under ``dst``: LanceDB's write-once files as hard links (cheap at any
    size), everything else as copies. Falls back to copies where the file system has no
    hard links. Returns the number of files."""
    files = [rel for rel in tree_files(src, hidden=hidden) if keep is None or keep(rel)]
    linking = True
    made: set[Path] = set()
    with secure_umask():
        dst.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        for rel in files:
            source, target = src / rel, dst / rel
            if target.parent not in made:
                target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
                made.add(target.parent)
            if linking and _immutable(PurePosixPath(rel)):
                try:
                    os.link(source, target)
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                        raise
                    linking = False
            shutil.copy2(source, target)
    return len(files)
