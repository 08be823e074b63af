"""Benchmark the team database's vector index: HNSW against ivfflat on pgvector; prints
JSON and a one-line summary.

On a real PostgreSQL 16 with pgvector 0.6.2 (pgserver, the ``team`` extra), in lexmem's
team schema laid out by ``migrate``, with N memories whose vectors are synthetic (384
numbers, unit length, drawn around N/50 topic centres at a cosine of about 0.7 to their
centre, a fixed seed; the model is not what is measured), every figure beside a baseline
measured in the same run:

1. loading the N rows with ``COPY``: with the HNSW index in place (as rows arrive one by
   one in a team), against the same load into a table with no vector index;
2. building each index over the loaded rows: HNSW (m 16, ef_construction 64, pgvector's
   defaults) and ivfflat (lists N/1000, at least 10, as pgvector advises);
3. query latency (``ORDER BY embedding <=> q LIMIT 10``) and recall@10 against the exact
   answer (numpy over the same vectors): HNSW at ef_search 40 and 100, ivfflat at probes
   1 and sqrt(lists) (pgvector's advice), ivfflat built on the empty table before the
   rows came (a new team's database) at sqrt(lists) probes, against the exact scan (no
   index).

``--quick`` uses 2,000 memories (under a minute); the default is 10,000.
"""

from __future__ import annotations

import argparse
import signal
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

NAME = "pg_index"
DIM = 384
K = 10
# Gaussian spread around a topic centre: |noise| ~ SPREAD * sqrt(DIM) ~ 1, a cosine of
# about 0.7 between a memory and its topic.
SPREAD = 0.052


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="2,000 memories (under a minute)")
    p.add_argument("--out", type=Path, help="also write DIR/pg_index.json")
    p.add_argument("--memories", type=int, default=None, help="rows (default 10,000)")
    p.add_argument("--queries", type=int, default=None, help="queries per figure (default 100)")
    p.add_argument("--seed", type=int, default=2026, help="vectors and queries (2026)")
    opts = p.parse_args(argv)
    opts.memories = opts.memories or (2_000 if opts.quick else 10_000)
    opts.queries = opts.queries or (50 if opts.quick else 100)
    if opts.memories < 100 or opts.queries < 1:
        raise BenchError("--memories must be at least 100 and --queries at least 1")
    return opts


def log(message: str) -> None:
    print(f"[{NAME}] {message}", file=sys.stderr, flush=True)


def vectors(n: int, queries: int, seed: int) -> tuple[Any, Any]:
    """N memory vectors and the query vectors, unit length, around shared topic centres."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 50), DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    def around(count: int) -> Any:
        picked = centres[rng.integers(0, len(centres), count)]
        v = picked + rng.standard_normal((count, DIM)).astype(np.float32) * SPREAD
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    return around(n), around(queries)


def literal(v: Any) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in v) + "]"


@contextmanager
def server(root: Path) -> Iterator[Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import pgserver
    except ImportError as exc:
        raise BenchError("pgserver is not installed (pip install -e '.[team]')") from exc
    handle = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield handle
    finally:
        handle.cleanup()


def database(handle: Any, name: str, *, steps: int | None = None) -> Any:
    """A new database of the team schema (its first ``steps`` steps), connected."""
    import psycopg

    from lexmem.store.postgres.migrations import migrate
    from lexmem.store.postgres.schema import STEPS

    with psycopg.connect(handle.get_uri(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conn = psycopg.connect(handle.get_uri(name), autocommit=True)
    migrate(conn, dim=DIM, space="bench", steps=STEPS[:steps] if steps else STEPS)
    return conn


def load(conn: Any, rows: Sequence[str]) -> float:
    """COPY the rows in; seconds."""
    t0 = time.perf_counter()
    with conn.cursor().copy(
        "COPY lexmem.memories (id, memory_type, content, embedding, user_id) FROM STDIN"
    ) as copy:
        for i, vector in enumerate(rows):
            copy.write_row((f"m{i}", "semantic", f"memory {i}", vector, "bench"))
    conn.execute("ANALYZE lexmem.memories")
    return time.perf_counter() - t0


def build(conn: Any, ddl: str) -> float:
    t0 = time.perf_counter()
    conn.execute(ddl)
    return time.perf_counter() - t0


def queries_run(
    conn: Any, queries: Sequence[str], truth: Sequence[set[str]], settings: dict[str, str]
) -> dict[str, Any]:
    """Each query's latency and recall@K under ``settings`` (SET LOCAL each)."""
    times: list[float] = []
    found = 0
    for q, exact in zip(queries, truth, strict=True):
        with conn.transaction():
            for key, value in settings.items():
                conn.execute(f"SET LOCAL {key} = {value}")
            t0 = time.perf_counter()
            rows = conn.execute(
                "SELECT id FROM lexmem.memories ORDER BY embedding <=> %s::vector LIMIT %s",
                (q, K),
            ).fetchall()
            times.append((time.perf_counter() - t0) * 1000)
        found += len({r[0] for r in rows} & exact)
    return {**percentiles(times), "recall_at_10": round(found / (K * len(queries)), 3)}


def measure(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import numpy as np

    n = opts.memories
    log(f"{n:,} vectors, {opts.queries} queries")
    data, asked = vectors(n, opts.queries, opts.seed)
    rows = [literal(v) for v in data]
    queries = [literal(v) for v in asked]
    # The exact answer: cosine is a dot product between unit vectors.
    nearest = np.argsort(-(asked @ data.T), axis=1)[:, :K]
    truth = [{f"m{j}" for j in row} for row in nearest]
    lists = max(10, n // 1000)
    probes = max(1, round(lists**0.5))
    hnsw = "CREATE INDEX vec ON lexmem.memories USING hnsw (embedding vector_cosine_ops)"
    ivfflat = (
        "CREATE INDEX vec ON lexmem.memories USING ivfflat (embedding vector_cosine_ops)"
        f" WITH (lists = {lists})"
    )
    out: dict[str, Any] = {
        "memories": n,
        "queries": opts.queries,
        "ivfflat_lists": lists,
        "ivfflat_probes": probes,
    }
    out["vectors"] = (
        f"synthetic: {DIM} numbers, unit length, around {max(1, n // 50)} topic centres "
        f"(noise sd {SPREAD} per number), seed {opts.seed}"
    )
    with server(tmp) as handle:
        # 1. Loading, with and without the vector index in place (step 1 of the schema
        # has no vector index; step 2 adds the HNSW one).
        conn = database(handle, "hnsw_in_place", steps=1)
        build(conn, hnsw)
        log("loading with HNSW in place")
        out["load_with_hnsw_s"] = round(load(conn, rows), 3)
        conn.close()

        conn = database(handle, "plain", steps=1)
        log("loading with no vector index")
        out["load_plain_s"] = round(load(conn, rows), 3)
        log("exact scan")
        out["exact"] = queries_run(conn, queries, truth, {})
        # 2, 3. Each index over the loaded rows, then its queries.
        log("HNSW: build, queries")
        out["build_hnsw_s"] = round(build(conn, hnsw), 3)
        for ef in (40, 100):
            out[f"hnsw_ef{ef}"] = queries_run(conn, queries, truth, {"hnsw.ef_search": str(ef)})
        conn.execute("DROP INDEX lexmem.vec")
        log("ivfflat: build, queries")
        out["build_ivfflat_s"] = round(build(conn, ivfflat), 3)
        out["ivfflat_probes1"] = queries_run(conn, queries, truth, {"ivfflat.probes": "1"})
        out["ivfflat"] = queries_run(conn, queries, truth, {"ivfflat.probes": str(probes)})
        conn.close()

        conn = database(handle, "ivfflat_empty", steps=1)
        build(conn, ivfflat)
        log("ivfflat built on the empty table: load, queries")
        out["load_with_ivfflat_s"] = round(load(conn, rows), 3)
        out["ivfflat_built_empty"] = queries_run(
            conn, queries, truth, {"ivfflat.probes": str(probes)}
        )
        conn.close()
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
            f"HNSW query p50 at {n} vectors", f["hnsw_ef40"]["p50_ms"], "ms",
            "exact scan p50", f["exact"]["p50_ms"],
        )  # fmt: skip
        result["figures"] = make_figures(
            (f"HNSW query p50 at {n} vectors", f["hnsw_ef40"]["p50_ms"], "ms",
             "exact scan p50", f["exact"]["p50_ms"]),
            ("HNSW recall@10 (ef_search 40)", f["hnsw_ef40"]["recall_at_10"], "",
             "ivfflat recall@10 (sqrt(lists) probes)", f["ivfflat"]["recall_at_10"]),
            ("ivfflat built on the empty table, recall@10",
             f["ivfflat_built_empty"]["recall_at_10"], "",
             "ivfflat built after the load", f["ivfflat"]["recall_at_10"]),
            (f"COPY {n} rows with HNSW in place", f["load_with_hnsw_s"], "s",
             "with no vector index", f["load_plain_s"]),
            ("HNSW build over the loaded rows", f["build_hnsw_s"], "s",
             "ivfflat build", f["build_ivfflat_s"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        print(
            f"{NAME}: {n} vectors: HNSW p50 {f['hnsw_ef40']['p50_ms']:.1f} ms recall "
            f"{f['hnsw_ef40']['recall_at_10']:.2f} (ef 100: {f['hnsw_ef100']['recall_at_10']:.2f}), "
            f"ivfflat p50 {f['ivfflat']['p50_ms']:.1f} ms recall "
            f"{f['ivfflat']['recall_at_10']:.2f} (built empty: "
            f"{f['ivfflat_built_empty']['recall_at_10']:.2f}), exact p50 "
            f"{f['exact']['p50_ms']:.1f} ms; COPY {f['load_with_hnsw_s']:.1f} s with HNSW vs "
            f"{f['load_plain_s']:.1f} s without, HNSW build {f['build_hnsw_s']:.1f} s",
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
