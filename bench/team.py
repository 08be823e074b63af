"""Team memory benchmark: the team database (PostgreSQL + pgvector) beside the local store.

Measures, in one run, on one local PostgreSQL (pgserver, Unix socket only) started for it:

1. **search latency** at each size (default 10k and 100k memories; ``--sizes`` adds
   1,000,000 as a documented run): the same memories in the local store (LanceDB) and in
   the PostgreSQL backend, the same queries through ``Lexmem.search`` (hybrid, with the
   query embedding, access not recorded), interleaved query by query so that load from
   other processes hits both alike; p50/p95, the answer in the top 10, and how far the
   two top-10 lists agree;
2. **push and pull throughput**: the team database's own (``TeamServer.push`` / ``pull``,
   batches of 500, as the database's owner; and a repeated push, which changes nothing)
   and the sync engine's, end to end (an outbox of memories pushed by one client's
   writer, pulled into the other's local store);
3. **capture to searchable**: two data folders joined to one team database, each with
   its writer running as the service runs it (team sync and the change listener on a
   thread); a memory remembered on one, the time until a search on the other returns
   it, p50 and p95 over ``--trials`` (bench/team_sync.py's measurement, run here).

Memories: the first ``--real`` are embedded by the real model, the rest are variants of
those (bench/store_search.py's ``grow``: the same texts re-rendered, vectors as noisy
copies of real ones). The JSON says so under ``"vectors"``.

Prints the JSON on stdout (``--out DIR`` also writes ``DIR/team.json``), then a one-line
summary. ``--quick`` runs 2k and 10k rows in a few minutes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see bench/store_search.py

import argparse
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
    load_average,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)
from store_search import Growth, grow, size_label

NAME = "team"
LIMIT = 10
TEAM_PROJECT = "bench"


def log(message: str) -> None:
    print(f"[{NAME} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(x.replace("_", "").strip()) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}") from None
    if not sizes or sizes[0] < 100:
        raise argparse.ArgumentTypeError("sizes must be at least 100 rows each")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="team.py",
        description=(
            "Benchmark team memory: search on the PostgreSQL backend against the local "
            "store at 10k and 100k memories, push and pull throughput, and the time from "
            "a capture on one client to a search hit on another. Prints JSON and a "
            "one-line summary."
        ),
    )
    p.add_argument("--quick", action="store_true", help="2k and 10k rows, fewer trials")
    p.add_argument("--out", type=Path, help="also write DIR/team.json")
    p.add_argument(
        "--sizes", type=_sizes, help="comma-separated sizes (default 10000,100000; 1000000 runs)"
    )
    p.add_argument("--real", type=int, help="memories embedded by the real model (default 2000)")
    p.add_argument("--queries", type=int, help="measured queries per size (default 100)")
    p.add_argument("--sync-rows", type=int, help="memories pushed and pulled (default 5000)")
    p.add_argument("--trials", type=int, help="capture-to-searchable trials (default 20)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--tmp-dir", type=Path, help="where to build the stores (default: temp)")
    a = p.parse_args(argv)
    a.sizes = a.sizes or ([2000, 10000] if a.quick else [10000, 100000])
    a.real = min(a.real or (1000 if a.quick else 2000), a.sizes[-1])
    a.queries = a.queries or (40 if a.quick else 100)
    a.sync_rows = a.sync_rows or (1000 if a.quick else 5000)
    a.trials = a.trials or (8 if a.quick else 20)
    for name in ("real", "queries", "sync_rows", "trials"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return a


# --- the server ------------------------------------------------------------------------


def new_database(url: str, name: str) -> str:
    """A fresh database beside ``url``'s with pgvector in it: its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    target = psycopg.conninfo.make_conninfo(url, dbname=name)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return target


# --- 1. search, local against the server -----------------------------------------------


def copy_new(local: Any, remote: Any, ids: Sequence[str]) -> float:
    """Copy the memories ``ids`` (and their confidence points) from the local store into
    the PostgreSQL one through its bulk import; seconds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(list(ids), pa.string())
    memories = local.store.arrow_table("memories")
    memories = memories.filter(pc.is_in(memories["id"], value_set=wanted))
    if "context" in memories.column_names:  # derived on import, as an export leaves it out
        memories = memories.drop_columns(["context"])
    confidence = local.store.arrow_table("confidence")
    confidence = confidence.filter(pc.is_in(confidence["memory_id"], value_set=wanted))
    links = local.store.arrow_table("links").slice(0, 0)
    t0 = time.perf_counter()
    remote.store.import_rows(memories, links, confidence)
    return time.perf_counter() - t0


def measure_search(local: Any, remote: Any, queries: list[Any], ids: list[str]) -> dict[str, Any]:
    walls: dict[str, list[float]] = {"local": [], "postgres": []}
    found = {"local": 0, "postgres": 0}
    overlap: list[float] = []
    same_top1 = 0
    for q in queries[:5]:  # warm both: caches, pools, the model
        local.search(q.text, limit=LIMIT, record_access=False)
        remote.search(q.text, limit=LIMIT, record_access=False)
    for qi, q in enumerate(queries):
        order = (("local", local), ("postgres", remote))
        if qi % 2:
            order = order[::-1]
        hits: dict[str, list[str]] = {}
        for name, lm in order:
            t0 = time.perf_counter()
            result = lm.search(q.text, limit=LIMIT, record_access=False)
            walls[name].append((time.perf_counter() - t0) * 1000)
            hits[name] = [h.memory.id for h in result.hits]
            found[name] += ids[q.target] in hits[name]
        a, b = hits["local"], hits["postgres"]
        overlap.append(len(set(a) & set(b)) / max(1, min(len(a), len(b))))
        same_top1 += bool(a and b and a[0] == b[0])
    out: dict[str, Any] = {}
    for name, values in walls.items():
        entry: dict[str, Any] = percentiles(values)
        entry["answer_in_top10"] = round(found[name] / len(queries), 3)
        out[name] = entry
    out["ratio_postgres_vs_local_p50"] = round(
        out["postgres"]["p50_ms"] / max(out["local"]["p50_ms"], 1e-3), 3
    )
    out["top10_overlap_mean"] = round(sum(overlap) / len(overlap), 3)
    out["same_top1_share"] = round(same_top1 / len(queries), 3)
    return out


# --- 2. push and pull ------------------------------------------------------------------


def measure_sync(local: Any, team_url: str, n: int, dim: int, space: str) -> dict[str, Any]:
    from lexmem.store.postgres.team import Change, TeamServer
    from lexmem.store.schema import memory_to_row

    # Only the n memories measured: a whole million read as Python objects is ~20 GB.
    ids = local.store.list_ids(sort="created")[:n]
    memories = local.store.get_many(ids, with_embedding=True)
    changes = []
    for m in memories:
        row = memory_to_row(m)
        row["project"] = TEAM_PROJECT
        changes.append(Change(m.id, 1, row=row, project=TEAM_PROJECT))
    out: dict[str, Any] = {"memories": len(changes), "batch": 500}
    with TeamServer(team_url, dim=dim, space=space) as server:
        server.create_team(TEAM_PROJECT)
        server.share_project(TEAM_PROJECT, TEAM_PROJECT)

        def push_all() -> float:
            t0 = time.perf_counter()
            for start in range(0, len(changes), 500):
                outcome = server.push(changes[start : start + 500])
                if outcome.conflicts:
                    raise BenchError(f"{len(outcome.conflicts)} conflicts in a first push")
            return time.perf_counter() - t0

        push_s = push_all()
        again_s = push_all()
        t0 = time.perf_counter()
        after, pulled = 0, 0
        while True:
            batch = server.pull([TEAM_PROJECT], after, limit=500)
            if not batch.changes:
                break
            pulled += len(batch.changes)
            after = batch.revision
        pull_s = time.perf_counter() - t0
    if pulled != len(changes):
        raise BenchError(f"pulled {pulled} of {len(changes)} pushed memories")
    out["push_per_s"] = round(len(changes) / push_s, 1)
    out["push_again_per_s"] = round(len(changes) / again_s, 1)
    out["pull_per_s"] = round(pulled / pull_s, 1)
    out["push_s"], out["pull_s"] = round(push_s, 3), round(pull_s, 3)
    return out


# --- 3. capture on one client, searchable on the other ---------------------------------


def measure_live(tmp: Path, trials: int, bulk: int) -> dict[str, Any]:
    """bench/team_sync.py's run: two clients with their writers running (team sync and
    change listener as the service runs them), a remember through ann's inbox until
    bob's search returns it; then the sync engine's own push and pull of ``bulk``."""
    import team_sync

    opts = argparse.Namespace(quick=False, captures=trials, bulk=bulk)
    root = tmp / "live"
    root.mkdir()
    return team_sync.measure(opts, root)


# --- the run ---------------------------------------------------------------------------


def run(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import numpy as np

    import lexmem.embedder
    from lexmem.api import Lexmem
    from lexmem.embedder import Embedder
    from lexmem.settings import EmbeddingSettings, Settings, StoreSettings
    from lexmem.store.postgres import local as local_server

    # Each question is asked of both stores: with the query-embedding cache on, whichever
    # asks second would find it embedded. Both embed afresh.
    lexmem.embedder.QUERY_CACHE_SIZE = 0
    started = time.perf_counter()
    result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info()}
    corpus = MemoryCorpus(opts.seed)
    rows = [corpus.row(i) for i in range(opts.real)]
    queries = corpus.queries(rows, min(opts.real, 1000), opts.queries, salt="team")
    embedder = Embedder(EmbeddingSettings(), tmp / "models")
    embedder.load()

    log("starting PostgreSQL with pgvector (pgserver, Unix socket only)")
    t0 = time.perf_counter()
    server_folder = tmp / "pg"
    url = local_server.start(server_folder)
    result["server_start_s"] = round(time.perf_counter() - t0, 2)
    try:
        local = Lexmem.open(tmp / "local", embedder=embedder)
        remote = Lexmem.open(
            tmp / "remote",
            settings=Settings(store=StoreSettings(backend="postgres", url=url)),
            embedder=embedder,
        )
        g = Growth(
            rows=rows,
            vectors=np.zeros((opts.sizes[-1], embedder.dim), dtype=np.float32),
            n_real=opts.real,
            min_real=min(opts.real, 1000),
            real_budget_s=0.0,
            noise_rng=np.random.default_rng(opts.seed + 1),
        )
        search: dict[str, Any] = {}
        try:
            for size in opts.sizes:
                first = g.count
                log(f"growing the local store to {size:,}")
                grow(local, corpus, g, size, 1000)
                local.store.optimize()
                log(f"importing {size - first:,} memories into the team database")
                import_s = copy_new(local, remote, g.ids[first:size])
                remote.store.optimize()
                log(f"search at {size:,}: {len(queries)} queries on each backend")
                entry = measure_search(local, remote, queries, g.ids)
                entry["postgres_import_s"] = round(import_s, 2)
                entry["rows"] = {"local": local.store.count(), "postgres": remote.store.count()}
                search[str(size)] = entry
            result["search"] = search
            log(f"push and pull of {opts.sync_rows:,} memories")
            team_url = new_database(url, "lexmem_team_sync")
            result["sync"] = measure_sync(
                local, team_url, opts.sync_rows, embedder.dim, embedder.space_id
            )
        finally:
            local.close()
            remote.close()
        log(f"capture to searchable: {opts.trials} captures on two clients")
        live = measure_live(tmp, opts.trials, opts.sync_rows)
        result["capture_to_searchable"] = {
            **live["capture_to_searchable_elsewhere"],
            "captures": live["captures"],
            "baseline_stored_on_the_capturing_client": live["capture_to_stored_here"],
        }
        result["sync_engine"] = {
            key: live[key] for key in ("bulk", "push_per_s", "pull_per_s", "push_s", "pull_s")
        }
    finally:
        local_server.stop(server_folder)
    result["vectors"] = {
        "real": g.n_real,
        "variants": g.count - g.n_real,
        "note": "variants: re-rendered texts with noisy copies of real vectors (store_search.py)",
    }
    result["load_average_end"] = load_average()
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def add_summary(result: dict[str, Any]) -> None:
    """The headline (search on the server at the largest size against the local store)
    and every other figure against its baseline, for run_all.py."""
    rows: list[tuple[str, float, str, str, float]] = []
    for size, entry in result["search"].items():
        label = size_label(int(size))
        rows.append(
            (f"team database hybrid search p50 at {label}", entry["postgres"]["p50_ms"], "ms",
             "local store, same run", entry["local"]["p50_ms"])
        )  # fmt: skip
    sync = result["sync"]
    rows.append(
        ("team push", sync["push_per_s"], "memories/s", "pull, same run", sync["pull_per_s"])
    )
    live = result["capture_to_searchable"]
    if "p50_ms" in live:
        rows.append(
            ("capture on one client to searchable on another, p50", live["p50_ms"], "ms",
             "target", 2000.0)
        )  # fmt: skip
    result["summary"] = make_summary(*rows[len(result["search"]) - 1])
    result["figures"] = make_figures(*rows)


def summary_line(result: dict[str, Any]) -> str:
    parts = []
    for size, entry in result["search"].items():
        parts.append(
            f"{size_label(int(size))} search p50 {entry['postgres']['p50_ms']:.1f} ms on the "
            f"server vs {entry['local']['p50_ms']:.1f} ms local"
        )
    engine = result["sync_engine"]
    parts.append(f"sync push {engine['push_per_s']:.0f}/s, pull {engine['pull_per_s']:.0f}/s")
    live = result["capture_to_searchable"]
    if "p50_ms" in live:
        parts.append(f"capture to searchable p50 {live['p50_ms'] / 1000:.2f} s")
    return f"{NAME}: " + "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    opts = parse_args(argv)
    from lexmem.errors import LexmemError

    # SIGTERM unwinds like Ctrl-C, so the temporary stores and the server go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with bench_tempdir(opts.tmp_dir) as tmp:
            result = run(opts, tmp)
        add_summary(result)
        write_result(NAME, result, opts.out)
        print(summary_line(result), flush=True)
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, LexmemError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
