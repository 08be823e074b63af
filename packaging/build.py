"""Build the one-folder lexmem bundle with PyInstaller: ``dist/lexmem/`` by default.

    .venv/bin/python packaging/build.py [--dist DIR] [--work DIR] [--clean] [--json]

(``./dev bundle`` runs it.) It builds from this checkout's own files through
``packaging/lexmem.spec``, into a hidden folder beside the target that is renamed into
place only when PyInstaller succeeded: a failed build leaves the previous bundle as it
was and nothing half-written. The last line says where the bundle is, how long the
build took and how big it is (``--json`` prints those as JSON instead).

On macOS the result is ``DIR/lexmem.app`` (the spec's BUNDLE step); elsewhere
``DIR/lexmem/`` with the executables ``lexmem`` and ``lexmem-hook``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "packaging" / "lexmem.spec"
NAME = "lexmem"


class BuildError(Exception):
    """What stopped the build, in one line."""


def bundle_name() -> str:
    """The folder (or macOS app) PyInstaller produces inside the dist folder."""
    return "lexmem.app" if sys.platform == "darwin" else "lexmem"


def executable(bundle: Path, name: str = "lexmem") -> Path:
    """Where the bundle's ``name`` executable is (inside Contents/MacOS in a macOS app)."""
    folder = bundle / "Contents" / "MacOS" if bundle.suffix == ".app" else bundle
    return folder / (name + (".exe" if os.name == "nt" else ""))


def folder_size(path: Path) -> tuple[int, int]:
    """(bytes, files) below ``path``; symbolic links count as links, not their targets."""
    total = files = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            total += os.lstat(os.path.join(root, n)).st_size
            files += 1
    return total, files


def build(dist: Path, work: Path, *, clean: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Run PyInstaller on the spec; returns where the bundle is, the seconds and the size."""
    if importlib.util.find_spec("PyInstaller") is None:
        raise BuildError(
            "PyInstaller is not installed in this environment: `./dev setup` installs the "
            "dev dependencies (or pip install -e '.[dev]')"
        )
    if sys.platform.startswith("linux") and shutil.which("objcopy") is None:
        # PyInstaller stores the Python archive in an ELF section of each executable.
        raise BuildError(
            "PyInstaller needs objcopy on Linux: install binutils (apt-get install binutils)"
        )
    dist, work = dist.absolute(), work.absolute()
    staging = dist / f".{NAME}-building-{os.getpid()}"
    target = dist / bundle_name()
    cmd = [
        sys.executable, "-m", "PyInstaller", str(SPEC), "--noconfirm",
        "--distpath", str(staging), "--workpath", str(work),
        "--log-level", "WARN" if quiet else "INFO",
    ]  # fmt: skip
    if clean:
        cmd.append("--clean")
    # The build environment's own settings must not leak into the analysis.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    started = time.perf_counter()
    try:
        dist.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            raise BuildError(f"PyInstaller exited {done.returncode} (its log is above)")
        built = staging / bundle_name()
        if not executable(built).is_file():
            raise BuildError(f"PyInstaller finished but {executable(built)} is missing")
        if target.exists():
            shutil.rmtree(target)
        built.rename(target)
    except OSError as exc:
        raise BuildError(f"cannot build into {dist}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    seconds = time.perf_counter() - started
    size, files = folder_size(target)
    return {
        "bundle": str(target),
        "executable": str(executable(target)),
        "hook": str(executable(target, "lexmem-hook")),
        "seconds": round(seconds, 1),
        "bytes": size,
        "files": files,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--dist", type=Path, default=ROOT / "dist", help="where the bundle goes")
    p.add_argument(
        "--work", type=Path, default=ROOT / "build" / "pyinstaller", help="PyInstaller's cache"
    )
    p.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    opts = p.parse_args(argv)
    try:
        result = build(opts.dist, opts.work, clean=opts.clean, quiet=opts.json)
    except BuildError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    if opts.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"Built {result['bundle']} in {result['seconds']:.0f} s: "
            f"{result['bytes'] / 1e6:.0f} MB in {result['files']} files "
            f"(run {result['executable']} --help)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
