"""Benchmark backup, restore, the doctor's full read and the layout migration; prints JSON
and a one-line summary.

On one store of N memories (384-number vectors; fixed random ones, since the model is not
what is measured), every figure beside a baseline measured in the same run:

1. ``lexmem backup`` (``create_backup``) against copying the store folder with
   ``shutil.copytree`` (a copy that is only consistent with lexmem stopped);
2. what a running service feels: how long a backup holds the store's write lock, and
   the latency of a writer process's one-memory commits while backups run, against the
   same writer's commits with no backup running (the commits that also compact the
   tables are counted apart: they are slow with or without a backup);
3. ``restore_backup`` into a fresh folder, against ``shutil.copytree`` of the store;
4. ``lexmem doctor``'s table check (every table read in full), against one Arrow scan of
   the memories table (every column, vectors included);
5. the layout 1 -> 2 migration on open (the context column added, filled, indexed),
   against opening the same store once it is current.

``--quick`` uses 3,000 memories (about a minute); the default is 30,000.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # bench/ is not a package: imported from its folder
    BenchError,
    MemoryCorpus,
    bench_tempdir,
    dir_bytes,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "backup"
DIM = 384
SPACE = "bench/fixed-vectors"

# A writer standing in for the service: one memory per commit, every 20 ms, each commit's
# latency recorded (what a capture waits for), and whether it was the one in 64 that also
# compacts the tables (seconds at this size, backup or not), until told to stop.
WRITER = f"""
import json, sys, time
from pathlib import Path
from lexmem.config import Paths, tighten_umask
from lexmem.models import Memory
from lexmem.store.lance import MemoryStore

home, stop, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
tighten_umask()
store = MemoryStore(Paths(home), dim={DIM}, space_id={SPACE!r}).open()
out.with_suffix(".ready").touch()
samples = []
i = 0
while not stop.exists():
    m = Memory(content=f"a capture while the backup runs, number {{i}}", embedding=[0.05] * {DIM})
    compacted = store.read_meta().get("optimized_version")
    t0 = time.perf_counter()
    store.store(m)
    ms = (time.perf_counter() - t0) * 1000
    samples.append([time.time(), ms, store.read_meta().get("optimized_version") != compacted])
    i += 1
    time.sleep(0.02)
out.write_text(json.dumps(samples))
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="3,000 memories (about a minute)")
    p.add_argument("--out", type=Path, help="also write DIR/backup.json")
    p.add_argument("--memories", type=int, default=None, help="store size (default 30,000)")
    p.add_argument("--runs", type=int, default=None, help="backups per figure (default 5)")
    opts = p.parse_args(argv)
    opts.memories = opts.memories or (3_000 if opts.quick else 30_000)
    opts.runs = opts.runs or (3 if opts.quick else 5)
    return opts


def log(message: str) -> None:
    print(f"[{NAME}] {message}", file=sys.stderr, flush=True)


def build_store(home: Path, n: int) -> None:
    """N memories in batches, the way a long-lived store looks: compacted, with the last
    few hundred commits since the compaction not yet folded in."""
    import numpy as np

    from lexmem.config import Paths
    from lexmem.models import Memory, MemoryLink, MemorySource
    from lexmem.store.lance import MemoryStore

    corpus = MemoryCorpus(seed=5)
    rng = np.random.default_rng(5)
    store = MemoryStore(Paths(home), dim=DIM, space_id=SPACE).open()
    batch = 1000
    for start in range(0, n, batch):
        vecs = rng.standard_normal((min(batch, n - start), DIM)).astype("float32")
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = [corpus.row(start + k) for k in range(len(vecs))]
        store.store_many(
            [
                Memory(content=r.text, embedding=[float(x) for x in v], project=r.project,
                       source=MemorySource.CONVERSATION, session_id=f"s{(start + k) // 40}")
                for k, (r, v) in enumerate(zip(rows, vecs, strict=True))
            ]
        )  # fmt: skip
    store.optimize(build_vector_index=False)
    ids = store.list_ids()
    for k in range(min(200, len(ids) - 1)):  # recent commits since the compaction
        store.store_link(MemoryLink(ids[k], ids[k + 1], "relates_to", 0.5))
    store.close()


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return (time.perf_counter() - t0) * 1000, value


def measure(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from lexmem.config import Paths
    from lexmem.store.backup import create_backup, restore_backup
    from lexmem.store.lance import MemoryStore
    from lexmem.store.repair import check_tables

    home = tmp / "home"
    log(f"building a store of {opts.memories:,} memories")
    build_store(home, opts.memories)
    paths = Paths(home)
    store_bytes = dir_bytes(paths.store)

    import lexmem.store.backup as backup_module

    held_ms: list[float] = []
    take = backup_module._take_between_commits

    def recording(path: Path, timeout: float) -> Any:
        """The write lock, timed from acquired to released."""
        lock = take(path, timeout)
        t0, release = time.perf_counter(), lock.release

        def timed_release() -> None:
            held_ms.append((time.perf_counter() - t0) * 1000)
            release()

        lock.release = timed_release  # type: ignore[method-assign]
        return lock

    backup_module._take_between_commits = recording

    log(f"backups and copies of the store ({opts.runs} each, interleaved)")
    backup_ms, copy_ms, sizes = [], [], []
    made: list[Path] = []
    for run in range(opts.runs):
        ms, info = timed(lambda run=run: create_backup(paths, tmp / f"b{run}.tar.gz"))
        backup_ms.append(ms)
        sizes.append(info.size)
        made.append(info.path)
        ms, _ = timed(lambda run=run: shutil.copytree(paths.store, tmp / f"copy{run}"))
        copy_ms.append(ms)
        shutil.rmtree(tmp / f"copy{run}")

    log("a writer's commits, without and with backups running")
    stop, samples = tmp / "stop", tmp / "samples.json"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(home), str(stop), str(samples)])
    try:
        deadline = time.monotonic() + 120
        while not samples.with_suffix(".ready").exists():  # the writer's start-up
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError("the writer process did not start")
            time.sleep(0.05)
        time.sleep(3.0)  # commits with nothing else running
        quiet_until = time.time()
        windows = []
        for run in range(opts.runs):
            t0 = time.time()
            create_backup(paths, tmp / f"w{run}.tar.gz")
            windows.append((t0, time.time()))
            time.sleep(0.5)
    finally:
        stop.touch()
        proc.wait(timeout=120)
    recorded = json.loads(samples.read_text())
    quiet = [ms for at, ms, c in recorded if quiet_until - 3.0 <= at < quiet_until and not c]
    during = [(ms, c) for at, ms, c in recorded if any(a <= at <= b + 0.05 for a, b in windows)]
    busy = [ms for ms, c in during if not c]
    compactions = [ms for ms, c in during if c]
    if not quiet or not busy:
        raise BenchError("the writer recorded no commits; is the store writable?")

    log("restores into fresh folders, and copies")
    restore_ms, restore_copy_ms = [], []
    for run in range(opts.runs):
        fresh = Paths(tmp / f"restored{run}")
        ms, _ = timed(lambda fresh=fresh, run=run: restore_backup(fresh, made[run]))
        restore_ms.append(ms)
        ms, _ = timed(lambda run=run: shutil.copytree(paths.store, tmp / f"copy-r{run}"))
        restore_copy_ms.append(ms)
        shutil.rmtree(fresh.home)
        shutil.rmtree(tmp / f"copy-r{run}")

    log("the doctor's full read, and one Arrow scan of the memories")
    doctor_ms, scan_ms = [], []
    store = MemoryStore(paths, dim=DIM, space_id=SPACE).open()
    for _ in range(opts.runs):
        ms, check = timed(lambda: check_tables(paths))
        if check.state != "ok":
            raise BenchError(f"the doctor found damage in a fresh store: {check.detail}")
        doctor_ms.append(ms)
        ms, _ = timed(lambda: store.table().to_arrow())
        scan_ms.append(ms)
    store.close()

    log("the layout 1 -> 2 migration, and opening the store once current")
    migrate_ms, open_ms = [], []
    for run in range(min(opts.runs, 3)):
        old = Paths(tmp / f"old{run}")
        shutil.copytree(paths.store, old.store)
        s = MemoryStore(old, dim=DIM, space_id=SPACE).open()
        s.table().drop_index("context_idx")
        s.table().drop_columns(["context"])
        s.write_meta(dict(s.read_meta(), schema_version=1))
        s.close()
        ms, s = timed(lambda old=old: MemoryStore(old, dim=DIM, space_id=SPACE).open())
        if "context" not in s.table().schema.names:
            raise BenchError("the migration did not add the context column")
        s.close()
        migrate_ms.append(ms)
        ms, s = timed(lambda old=old: MemoryStore(old, dim=DIM, space_id=SPACE).open())
        s.close()
        open_ms.append(ms)
        shutil.rmtree(old.home)

    return {
        "memories": opts.memories,
        "store_bytes": store_bytes,
        "backup_bytes": int(sum(sizes) / len(sizes)),
        "backup": percentiles(backup_ms),
        "write_lock_held": percentiles(held_ms),
        "copytree": percentiles(copy_ms),
        "commit_quiet": percentiles(quiet),
        "commit_during_backup": percentiles(busy),
        "commit_compacting_during_backup": percentiles(compactions),
        "restore": percentiles(restore_ms),
        "restore_copytree": percentiles(restore_copy_ms),
        "doctor_tables": percentiles(doctor_ms),
        "arrow_scan": percentiles(scan_ms),
        "migrate_1_to_2": percentiles(migrate_ms),
        "open_current": percentiles(open_ms),
    }


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        from lexmem.errors import LexmemError
    except ImportError as exc:
        print(f"{NAME}: error: lexmem is not importable ({exc}); use .venv/bin/python", file=sys.stderr)  # fmt: skip
        return 1
    try:
        with bench_tempdir() as tmp:
            figures = measure(opts, tmp)
        result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(), **figures}
        f = figures
        result["summary"] = make_summary(
            f"lexmem backup of {f['memories']:,} memories p50", f["backup"]["p50_ms"], "ms",
            "shutil.copytree of the store p50", f["copytree"]["p50_ms"],
        )  # fmt: skip
        result["figures"] = make_figures(
            (f"lexmem backup of {f['memories']:,} memories p50", f["backup"]["p50_ms"], "ms",
             "shutil.copytree of the store p50", f["copytree"]["p50_ms"]),
            ("write lock held by a backup, max", f["write_lock_held"]["max_ms"], "ms",
             "writer commit with no backup, p50", f["commit_quiet"]["p50_ms"]),
            ("writer commit while a backup runs, max (no compaction)", f["commit_during_backup"]["max_ms"], "ms",
             "writer commit with no backup, max (no compaction)", f["commit_quiet"]["max_ms"]),
            ("writer commit while a backup runs, p50", f["commit_during_backup"]["p50_ms"], "ms",
             "writer commit with no backup, p50", f["commit_quiet"]["p50_ms"]),
            ("restore_backup into a fresh folder p50", f["restore"]["p50_ms"], "ms",
             "shutil.copytree of the store p50", f["restore_copytree"]["p50_ms"]),
            ("doctor: every table read in full p50", f["doctor_tables"]["p50_ms"], "ms",
             "one Arrow scan of the memories p50", f["arrow_scan"]["p50_ms"]),
            ("open with the layout 1 -> 2 migration p50", f["migrate_1_to_2"]["p50_ms"], "ms",
             "open once current p50", f["open_current"]["p50_ms"]),
            ("backup size", f["backup_bytes"] / 2**20, "MiB", "store folder", f["store_bytes"] / 2**20),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        print(
            f"{NAME}: {f['memories']:,} memories: backup p50 {f['backup']['p50_ms']:.0f} ms "
            f"(copytree {f['copytree']['p50_ms']:.0f} ms), write lock held max "
            f"{f['write_lock_held']['max_ms']:.0f} ms, writer commit max "
            f"{f['commit_during_backup']['max_ms']:.0f} ms during backups vs "
            f"{f['commit_quiet']['max_ms']:.0f} ms without, restore p50 "
            f"{f['restore']['p50_ms']:.0f} ms, doctor {f['doctor_tables']['p50_ms']:.0f} ms "
            f"(Arrow scan {f['arrow_scan']['p50_ms']:.0f} ms), migration "
            f"{f['migrate_1_to_2']['p50_ms']:.0f} ms (open {f['open_current']['p50_ms']:.0f} ms)",
            flush=True,
        )
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, LexmemError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
