"""Benchmark the postgres backend's store (``PostgresStore``) where it does bulk work;
prints JSON and a one-line summary.

On a real PostgreSQL 16 with pgvector 0.6.2 (pgserver, the ``team`` extra), each figure
in a fresh database laid out by the store's own ``open``, with N memories whose vectors
are synthetic (384 numbers, unit length, a fixed seed; the model is not what is
measured):

1. ``store_many`` of the N memories in one call into an empty database, and
   ``import_rows`` of the same N into another (both load without the HNSW index and
   build it after, as a large load does); then ``store_many`` of 50 more into the N
   (the index kept up row by row, as a capture batch lands);
2. how the vectors travel: turning the N vectors into pgvector's text (what the store
   sends) against packing them as pgvector's binary format, in Python alone;
3. ``nearest`` (k 10) p50, unfiltered and with a filter that keeps 1 % of the rows;
4. ``delete`` of one memory, erased (the tables rewritten by ``VACUUM FULL``).

``--quick`` uses 500 memories; the default is 2,000.
"""

from __future__ import annotations

import argparse
import signal
import struct
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # bench/ is not a package: imported from its folder
    BenchError,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "pg_store"
DIM = 384


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="500 memories")
    p.add_argument("--out", type=Path, help="also write DIR/pg_store.json")
    p.add_argument("--memories", type=int, default=None, help="rows (default 2,000)")
    p.add_argument("--queries", type=int, default=50, help="queries per figure (default 50)")
    opts = p.parse_args(argv)
    opts.memories = opts.memories or (500 if opts.quick else 2000)
    if opts.memories < 100:
        raise BenchError("--memories must be at least 100")
    return opts


def log(message: str) -> None:
    print(f"{NAME}: {message}", file=sys.stderr, flush=True)


@contextmanager
def server(root: Path) -> Iterator[Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:
        raise BenchError("pgserver is not installed (pip install -e '.[team]')") from exc
    handle = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield handle
    finally:
        handle.cleanup()


def database(handle: Any, name: str) -> str:
    import psycopg

    with psycopg.connect(str(handle.get_uri()), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return str(handle.get_uri(name))


def measure(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    from lexmem.config import Paths
    from lexmem.models import Memory, MemorySource
    from lexmem.store.postgres.store import PostgresStore, vector_text
    from lexmem.store.protocol import MemoryFilter
    from lexmem.store.schema import confidence_schema, links_schema, memory_schema, memory_to_row

    n = opts.memories
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    lists = [[float(x) for x in v] for v in vecs]
    items = [
        Memory(
            content=f"memory {i} about topic {i % 37}",
            embedding=lists[i],
            source=MemorySource.CORRECTION if i % 100 == 0 else MemorySource.EXPLICIT,
        )
        for i in range(n)
    ]
    out: dict[str, Any] = {"memories": n}

    t0 = time.perf_counter()
    for v in lists:
        vector_text(v)
    out["vectors_as_text_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    for v in lists:
        struct.pack(f">HH{DIM}f", DIM, 0, *v)
    out["vectors_as_binary_s"] = round(time.perf_counter() - t0, 3)

    with server(tmp) as handle:
        log(f"store_many of {n:,} memories (HNSW in place)")
        store = PostgresStore(
            Paths(tmp / "a"), dim=DIM, space_id="bench", url=database(handle, "a")
        ).open()
        t0 = time.perf_counter()
        store.store_many(items)
        out["store_many_s"] = round(time.perf_counter() - t0, 3)
        more = [
            Memory(content=f"later {i}", embedding=[float(x) for x in v])
            for i, v in enumerate(rng.standard_normal((50, DIM)).astype(np.float32))
        ]
        t0 = time.perf_counter()
        store.store_many(more)
        out["store_many_50_more_s"] = round(time.perf_counter() - t0, 3)

        log("nearest")
        queries = rng.standard_normal((opts.queries, DIM)).astype(np.float32)
        for label, flt in (
            ("nearest", MemoryFilter()),
            ("nearest_selective", MemoryFilter(source=MemorySource.CORRECTION)),
        ):
            times = []
            for q in queries:
                qv = [float(x) for x in q]
                t0 = time.perf_counter()
                hits = store.nearest(qv, flt, 10)
                times.append((time.perf_counter() - t0) * 1000)
                if len(hits) != min(10, n if flt.source is None else (n + 99) // 100):
                    raise BenchError(f"nearest returned {len(hits)} rows")
            out[label] = percentiles(times)

        log("delete, erased")
        t0 = time.perf_counter()
        store.delete(items[1].id)
        out["delete_erased_s"] = round(time.perf_counter() - t0, 3)
        store.close()

        log(f"import_rows of {n:,} memories (index built after)")
        table = pa.Table.from_pylist([memory_to_row(m) for m in items], schema=memory_schema(DIM))
        other = PostgresStore(
            Paths(tmp / "b"), dim=DIM, space_id="bench", url=database(handle, "b")
        ).open()
        t0 = time.perf_counter()
        other.import_rows(table, links_schema().empty_table(), confidence_schema().empty_table())
        out["import_rows_s"] = round(time.perf_counter() - t0, 3)
        other.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        from lexmem.errors import LexmemError
    except ImportError as exc:
        print(f"{NAME}: error: lexmem is not importable ({exc}); use .venv/bin/python", file=sys.stderr)  # fmt: skip
        return 1
    try:
        opts = parse_args(argv)
        with bench_tempdir() as tmp:
            f = measure(opts, tmp)
        n = f"{f['memories']:,}"
        result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(), **f}
        result["summary"] = make_summary(
            f"store_many of {n} memories", f["store_many_s"], "s",
            "import_rows (index after)", f["import_rows_s"],
        )  # fmt: skip
        result["figures"] = make_figures(
            (f"store_many of {n} memories", f["store_many_s"], "s",
             "import_rows (index after)", f["import_rows_s"]),
            (f"store_many of 50 into {n} (HNSW kept)", f["store_many_50_more_s"], "s",
             f"of {n} into none", f["store_many_s"]),
            (f"{n} vectors as pgvector text", f["vectors_as_text_s"], "s",
             "as pgvector binary", f["vectors_as_binary_s"]),
            ("nearest k=10 p50, 1 % filter", f["nearest_selective"]["p50_ms"], "ms",
             "unfiltered", f["nearest"]["p50_ms"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        print(
            f"{NAME}: {n} memories: store_many {f['store_many_s']:.2f} s (50 more: "
            f"{f['store_many_50_more_s']:.2f} s), import_rows "
            f"{f['import_rows_s']:.2f} s; vectors as text {f['vectors_as_text_s']:.2f} s vs "
            f"binary {f['vectors_as_binary_s']:.2f} s; nearest p50 {f['nearest']['p50_ms']:.1f} ms "
            f"(1 % filter {f['nearest_selective']['p50_ms']:.1f} ms); one erased delete "
            f"{f['delete_erased_s']:.2f} s",
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
