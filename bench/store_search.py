"""Store and search benchmark: embedding, insert, search latency, index choice, disk use.

Measures, in one process and against baselines from the same run:

1. raw embedding throughput of the embedded model (``Embedder`` with default
   ``EmbeddingSettings``) and single-sentence latency, which every hybrid or
   vector query pays;
2. insert throughput through lexmem's own API (``encoder.encode_batch`` then
   ``store.store_many``), with and without the embedding;
3. search latency p50/p95 at each size for ``hybrid``, ``bm25`` and ``vector``
   (``Lexmem.search(..., record_access=False)``), beside a numpy brute-force cosine
   baseline over the very same vectors, with and without the query embedding;
4. whether lexmem built an IVF_PQ vector index, and with ``--compare-index`` (at the
   largest size) the same store with and without it: latency and recall@10 against
   exact search, and the index build time;
5. disk use per 1,000 memories.

Vectors: the first ``--real`` memories are embedded by the real model; the rest
are *variants* of those (same template and topic, other project, person, file,
numbers, dates) whose vectors are their base's real vector plus gaussian noise,
renormalised, with the noise calibrated so a noisy copy sits as far from its base
as a real variant's embedding does. The JSON says so under ``"vectors"``.

Prints the JSON on stdout (and writes ``--out DIR/store_search.json``), then a
one-line summary. ``--quick`` runs 1k and 10k rows in about two minutes.
"""

from __future__ import annotations

import os

# A baseline robust to other processes on the machine: multi-threaded BLAS gemv on a
# busy 2-core box spends more time synchronising than computing (10k rows: ~12 ms with
# 2 threads vs ~1.4 ms with 1). Set before numpy loads; the environment can override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # bench/ is not a package: imported from its folder
    BenchError,
    MemoryCorpus,
    MemoryRow,
    Query,
    Stopwatch,
    bench_tempdir,
    dir_bytes,
    load_average,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "store_search"
MODES = ("hybrid", "bm25", "vector")
LIMIT = 10


def log(message: str) -> None:
    print(f"[{NAME} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def size_label(n: int) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


# --- options -------------------------------------------------------------------


@dataclass(slots=True)
class Options:
    sizes: list[int]
    real: int
    real_budget_s: float
    queries: int
    warmup: int
    embed_sentences: int
    batch: int
    seed: int
    compare_index: bool
    quick: bool
    out: Path | None
    tmp_dir: Path | None


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(x.replace("_", "").strip()) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}") from None
    if not sizes or sizes[0] < 20:
        raise argparse.ArgumentTypeError("sizes must be at least 20 rows each")
    return sizes


def parse_args(argv: Sequence[str] | None) -> Options:
    p = argparse.ArgumentParser(
        prog="store_search.py",
        description=(
            "Benchmark lexmem's embedding, insert and search (hybrid, bm25, vector) at "
            "1k/10k/100k memories against a numpy brute-force baseline. Prints JSON and "
            "a one-line summary."
        ),
    )
    p.add_argument("--quick", action="store_true", help="1k and 10k rows only (about 2 minutes)")
    p.add_argument("--out", type=Path, help="also write DIR/store_search.json")
    p.add_argument(
        "--sizes", type=_sizes, help="comma-separated store sizes (default 1000,10000,100000)"
    )
    p.add_argument(
        "--real",
        type=int,
        help="memories embedded by the real model; the rest reuse noisy real vectors "
        "(default 5000, quick 1000)",
    )
    p.add_argument(
        "--real-budget",
        type=float,
        help="stop real embedding after this many seconds and use variants for the rest "
        "(default 60, quick 45; 0 = no limit)",
    )
    p.add_argument("--queries", type=int, help="measured queries per mode (default 150, quick 60)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up queries per mode (default 5)")
    p.add_argument(
        "--embed-sentences",
        type=int,
        help="sentences for the raw embedding throughput (default 512, quick 256)",
    )
    p.add_argument("--batch", type=int, default=500, help="memories per store_many (default 500)")
    p.add_argument("--seed", type=int, default=7, help="corpus seed (default 7)")
    p.add_argument(
        "--compare-index",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also measure the largest size as a flat scan before lexmem builds its IVF_PQ "
        "vector index, and the index build (default: off; adds about 3 minutes at 100k)",
    )
    p.add_argument("--tmp-dir", type=Path, help="where to build the stores (default: system temp)")
    a = p.parse_args(argv)
    sizes = a.sizes or ([1000, 10000] if a.quick else [1000, 10000, 100000])
    opts = Options(
        sizes=sizes,
        real=a.real if a.real is not None else (1000 if a.quick else 5000),
        real_budget_s=a.real_budget if a.real_budget is not None else (45.0 if a.quick else 60.0),
        queries=a.queries if a.queries is not None else (60 if a.quick else 150),
        warmup=a.warmup,
        embed_sentences=a.embed_sentences or (256 if a.quick else 512),
        batch=a.batch,
        seed=a.seed,
        compare_index=bool(a.compare_index),
        quick=a.quick,
        out=a.out,
        tmp_dir=a.tmp_dir,
    )
    for name in ("real", "queries", "embed_sentences", "batch"):
        if getattr(opts, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if opts.warmup < 0 or opts.real_budget_s < 0:
        p.error("--warmup and --real-budget must not be negative")
    opts.real = min(opts.real, sizes[-1])
    return opts


# --- building the store --------------------------------------------------------------


@dataclass(slots=True)
class Growth:
    """Everything inserted so far, and how long each part took."""

    rows: list[MemoryRow]  # the base rows, embedded by the real model
    vectors: Any  # np.ndarray (max size, dim), filled up to ``count``
    n_real: int  # rows below this are real embeddings (lowered when the budget runs out)
    min_real: int  # never fewer real rows than this (the queries' answers are there)
    real_budget_s: float
    ids: list[str] = field(default_factory=list)
    encode: Stopwatch = field(default_factory=Stopwatch)
    store_real: Stopwatch = field(default_factory=Stopwatch)
    store_variant: Stopwatch = field(default_factory=Stopwatch)
    build_variant: Stopwatch = field(default_factory=Stopwatch)
    commits: int = 0
    sigma: float | None = None
    calibration: dict[str, Any] = field(default_factory=dict)
    noise_rng: Any = None

    @property
    def count(self) -> int:
        return len(self.ids)


def calibrate_noise(g: Growth, corpus: MemoryCorpus, embedder: Any) -> None:
    """Noise such that a noisy copy is as similar to its base as a real variant's embedding."""
    import numpy as np

    n_real = g.n_real
    picks = list(range(0, n_real, max(1, n_real // 64)))[:64]
    texts = [corpus.variant(g.rows[b], b, -1 - k).text for k, b in enumerate(picks)]
    emb = embedder.embed(texts)
    cos = (emb * g.vectors[picks]).sum(axis=1)
    c = float(np.clip(cos.mean(), 0.05, 0.999))
    dim = g.vectors.shape[1]
    sigma = float(np.sqrt((1.0 / c**2 - 1.0) / dim))
    rng = np.random.default_rng(12345)
    noisy = g.vectors[picks] + rng.standard_normal((len(picks), dim)).astype(np.float32) * sigma
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    achieved = (noisy * g.vectors[picks]).sum(axis=1)
    g.sigma = sigma
    g.calibration = {
        "samples": len(picks),
        "real_variant_cosine_to_base_mean": round(c, 4),
        "real_variant_cosine_to_base_p10_p90": [
            round(float(np.percentile(cos, 10)), 4),
            round(float(np.percentile(cos, 90)), 4),
        ],
        "noise_sigma_per_component": round(sigma, 5),
        "noisy_copy_cosine_to_base_mean": round(float(achieved.mean()), 4),
    }


def grow(lm: Any, corpus: MemoryCorpus, g: Growth, target: int, batch: int) -> float:
    """Insert rows up to ``target``; returns the store-only seconds spent in this stage."""
    import numpy as np

    from lexmem.encoder import EncodingRequest
    from lexmem.models import Memory, MemoryContext, MemorySource, MemoryType

    stage_store = Stopwatch()
    while g.count < target:
        start = g.count
        end = min(target, start + batch)
        if start < g.n_real:  # real embeddings through the encoder
            end = min(end, g.n_real)
            part = g.rows[start:end]
            requests = [
                EncodingRequest(
                    r.text, context=MemoryContext(source=MemorySource(r.source), project=r.project)
                )
                for r in part
            ]
            with g.encode:
                memories = lm.encoder.encode_batch(requests)
            if len(memories) != len(part):
                raise BenchError(
                    f"encode_batch returned {len(memories)} memories for {len(part)} texts"
                )
            with g.store_real, stage_store:
                lm.store.store_many(memories)
            g.vectors[start:end] = np.asarray([m.embedding for m in memories], dtype=np.float32)
            over = g.real_budget_s and g.encode.seconds > g.real_budget_s
            if over and g.min_real <= end < g.n_real:
                log(
                    f"real embedding budget ({g.real_budget_s:.0f} s) spent: {end:,} real rows, variants from here"
                )
                g.n_real = end
        else:  # variants: a base's real vector plus calibrated noise
            if g.sigma is None:
                log("calibrating the noise for variant vectors")
                calibrate_noise(g, corpus, lm.embedder)
            with g.build_variant:
                bases = [i % g.n_real for i in range(start, end)]
                rows = [corpus.variant(g.rows[b], b, i) for b, i in zip(bases, range(start, end), strict=True)]  # fmt: skip
                noise = g.noise_rng.standard_normal((end - start, g.vectors.shape[1]))
                vecs = g.vectors[bases] + noise.astype(np.float32) * np.float32(g.sigma)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                memories = [
                    Memory(
                        content=r.text, type=MemoryType(r.type), project=r.project,
                        source=MemorySource(r.source), embedding=v.tolist(),
                    )
                    for r, v in zip(rows, vecs, strict=True)
                ]  # fmt: skip
            with g.store_variant, stage_store:
                lm.store.store_many(memories)
            g.vectors[start:end] = vecs
        g.ids.extend(m.id for m in memories)
        g.commits += 1
        if g.count % 10_000 == 0 or g.count == target:
            log(f"  {g.count:,} memories stored")
    return stage_store.seconds


def index_info(lm: Any) -> list[dict[str, Any]]:
    out = []
    for i in lm.store.table().list_indices():
        out.append(
            {
                "name": getattr(i, "name", None),
                "type": getattr(i, "index_type", None),
                "columns": list(getattr(i, "columns", []) or []),
                "indexed_rows": getattr(i, "num_indexed_rows", None),
                "unindexed_rows": getattr(i, "num_unindexed_rows", None),
            }
        )
    return out


def disk_usage(lm: Any, home: Path, rows: int) -> dict[str, Any]:
    """Store folder size as lexmem leaves it, then after pruning every old version."""
    from datetime import timedelta

    before = dir_bytes(home / "store")
    with warnings.catch_warnings():  # "removes every version": intended, nothing else reads
        warnings.simplefilter("ignore")
        for name in ("memories", "links", "confidence"):
            lm.store.table(name).optimize(cleanup_older_than=timedelta(0))
    after = dir_bytes(home / "store")
    return {
        "store_bytes_after_optimize": before,
        "store_bytes_after_pruning_old_versions": after,
        "mib_per_1000_after_optimize": round(before / 2**20 / rows * 1000, 3),
        "mib_per_1000_after_pruning": round(after / 2**20 / rows * 1000, 3),
    }


# --- measuring search ------------------------------------------------------------------


def _topk(matrix: Any, vector: Any, k: int) -> Any:
    import numpy as np

    scores = matrix @ vector
    if k >= len(scores):
        return np.argsort(-scores)
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def measure_search(
    lm: Any, g: Growth, size: int, queries: list[Query], warm: list[Query]
) -> dict[str, Any]:
    """Every query through each mode and the numpy baseline, interleaved query by query
    (the order rotates), so load from other processes hits all of them alike."""
    import numpy as np

    embedder = lm.embedder
    matrix = np.ascontiguousarray(g.vectors[:size])
    ids = g.ids[:size]
    k = min(LIMIT, size)

    def numpy_query(text: str) -> tuple[float, Any, set[str]]:
        t0 = time.perf_counter()
        v = embedder.embed_one(text)
        top = _topk(matrix, v, k)
        return (time.perf_counter() - t0) * 1000, v, {ids[i] for i in top}

    for q in warm:
        numpy_query(q.text)
        for mode in MODES:
            lm.search(q.text, limit=LIMIT, mode=mode, record_access=False)

    walls: dict[str, list[float]] = {m: [] for m in (*MODES, "numpy")}
    parts: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    unaccounted: dict[str, list[float]] = {m: [] for m in MODES}
    found: dict[str, int] = dict.fromkeys((*MODES, "numpy"), 0)
    recall: list[float] = []
    qvecs: list[Any] = []
    hybrid_hits: list[list[str]] = []
    runners = ("numpy", *MODES)
    for qi, q in enumerate(queries):
        target = ids[q.target]
        exact: set[str] = set()
        vector_hits: set[str] = set()
        for j in range(len(runners)):
            mode = runners[(qi + j) % len(runners)]
            if mode == "numpy":
                ms, v, exact = numpy_query(q.text)
                walls["numpy"].append(ms)
                qvecs.append(v)
                found["numpy"] += target in exact
                continue
            t0 = time.perf_counter()
            result = lm.search(q.text, limit=LIMIT, mode=mode, record_access=False)
            wall = (time.perf_counter() - t0) * 1000
            walls[mode].append(wall)
            for key, part_ms in result.timings_ms.items():
                parts[mode].setdefault(key, []).append(part_ms)
            unaccounted[mode].append(wall - sum(result.timings_ms.values()))
            hit_ids = [h.memory.id for h in result.hits]
            found[mode] += target in hit_ids
            if mode == "vector":
                vector_hits = set(hit_ids)
            elif mode == "hybrid":
                hybrid_hits.append(hit_ids)
        recall.append(len(exact & vector_hits) / k)

    out: dict[str, Any] = {}
    for mode in MODES:
        entry: dict[str, Any] = percentiles(walls[mode])
        entry["parts_p50_ms"] = {key: percentiles(v)["p50_ms"] for key, v in parts[mode].items()}
        entry["parts_p50_ms"]["unaccounted"] = percentiles(unaccounted[mode])["p50_ms"]
        entry["answer_in_top10"] = round(found[mode] / len(queries), 3)
        if mode == "vector":
            entry["recall_at_10_vs_exact"] = round(float(np.mean(recall)), 4)
        out[mode] = entry

    bare = []
    for v in qvecs:
        t0 = time.perf_counter()
        _topk(matrix, v, k)
        bare.append((time.perf_counter() - t0) * 1000)
    nb = percentiles(bare)
    nb["note"] = "matrix @ query + argpartition top 10 over the same float32 vectors"
    ne = percentiles(walls["numpy"])
    ne["note"] = "query embedding (Embedder.embed_one) + the brute force above"
    ne["answer_in_top10"] = round(found["numpy"] / len(queries), 3)
    out["numpy_bruteforce"] = nb
    out["numpy_bruteforce_plus_embed"] = ne

    # Fetching the 10 result rows (Store.get_many): part of "fuse" in the timings.
    fetch = []
    for hit_ids in hybrid_hits[:40]:
        t0 = time.perf_counter()
        lm.store.get_many(hit_ids)
        fetch.append((time.perf_counter() - t0) * 1000)
    out["fetch_rows_get_many_10"] = percentiles(fetch)

    out["vector_index"] = lm.store.has_vector_index()
    out["vector_index_min_rows"] = lm.store.settings.vector_index_min_rows
    out["ratio_hybrid_vs_numpy"] = round(out["hybrid"]["p50_ms"] / ne["p50_ms"], 3)
    out["ratio_vector_vs_numpy"] = round(out["vector"]["p50_ms"] / ne["p50_ms"], 3)
    out["ratio_bm25_vs_numpy_bare"] = round(out["bm25"]["p50_ms"] / max(nb["p50_ms"], 1e-3), 3)
    return out


# --- embedding ---------------------------------------------------------------------------


def measure_embedding(embedder: Any, texts: list[str], queries: list[Query]) -> dict[str, Any]:
    batch_size = embedder.settings.batch_size
    embedder.embed(texts[:batch_size])  # warm-up (first call allocates the session's buffers)
    t0 = time.perf_counter()
    embedder.embed(texts)
    seconds = time.perf_counter() - t0
    for q in queries[:5]:
        embedder.embed_one(q.text)
    single = []
    for q in queries:
        t0 = time.perf_counter()
        embedder.embed_one(q.text)
        single.append((time.perf_counter() - t0) * 1000)
    return {
        "model": embedder.model_name,
        "batch_size": batch_size,
        "threads_setting": embedder.settings.threads or "onnxruntime default",
        "sentences": len(texts),
        "mean_words_per_sentence": round(sum(len(t.split()) for t in texts) / len(texts), 1),
        "sentences_per_s": round(len(texts) / seconds, 1),
        "single_query_latency": percentiles(single),
    }


# --- the run ------------------------------------------------------------------------------


def run(opts: Options, tmp: Path) -> dict[str, Any]:
    import numpy as np

    import lexmem.embedder
    from lexmem.api import Lexmem
    from lexmem.embedder import Embedder
    from lexmem.settings import EmbeddingSettings, Settings, StoreSettings

    # Every timed search and embedding is of a question embedded afresh: the
    # query-embedding cache would answer the questions this bench asks again in each
    # mode and at each size, which a new question never is.
    lexmem.embedder.QUERY_CACHE_SIZE = 0

    started = time.perf_counter()
    cpu_started = os.times()
    phases: dict[str, float] = {}
    result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info()}
    max_size = opts.sizes[-1]
    n_real = opts.real  # may drop when the real-embedding budget runs out
    default_min_rows = StoreSettings().vector_index_min_rows

    corpus = MemoryCorpus(opts.seed)
    rows = [corpus.row(i) for i in range(n_real)]
    among = min(opts.sizes[0], n_real, 1000)
    queries = corpus.queries(rows, among, opts.queries, salt="measure")
    warm = corpus.queries(rows, among, opts.warmup, salt="warmup") if opts.warmup else []

    t0 = time.perf_counter()
    embedder = Embedder(EmbeddingSettings(), tmp / "models")
    embedder.load()
    phases["model_load_s"] = time.perf_counter() - t0

    log(f"embedding throughput over {opts.embed_sentences} sentences")
    t0 = time.perf_counter()
    sample = [corpus.row(10_000_000 + i).text for i in range(opts.embed_sentences)]
    result["embedding"] = measure_embedding(embedder, sample, queries)
    phases["embedding_s"] = time.perf_counter() - t0

    home = tmp / "lexmem"
    compare_at = max_size if opts.compare_index else None
    grow_settings = Settings(
        store=StoreSettings(vector_index_min_rows=10**12 if compare_at else default_min_rows)
    )
    lm = Lexmem.open(home, settings=grow_settings, embedder=embedder)
    g = Growth(
        rows=rows,
        vectors=np.zeros((max_size, embedder.dim), dtype=np.float32),
        n_real=n_real,
        min_real=among,
        real_budget_s=opts.real_budget_s,
        noise_rng=np.random.default_rng(opts.seed + 1),
    )
    search: dict[str, Any] = {}
    disk: dict[str, Any] = {}
    by_stage: dict[str, float] = {}
    comparison: dict[str, Any] = {}
    try:
        for size in opts.sizes:
            first = g.count
            log(f"growing the store to {size:,} memories")
            t0 = time.perf_counter()
            store_s = grow(lm, corpus, g, size, opts.batch)
            phases[f"insert_to_{size}_s"] = time.perf_counter() - t0
            by_stage[f"{first}-{size}"] = round((size - first) / store_s, 1) if store_s else 0.0
            t0 = time.perf_counter()
            lm.store.optimize()
            optimize_s = time.perf_counter() - t0
            log(f"measuring search at {size:,} ({len(queries)} queries x {len(MODES)} modes)")
            t0 = time.perf_counter()
            entry = measure_search(lm, g, size, queries, warm)
            phases[f"search_{size}_s"] = time.perf_counter() - t0
            entry["optimize_s"] = round(optimize_s, 3)
            entry["indices"] = index_info(lm)
            entry["rows"] = lm.store.count()
            key = f"{size}_flat" if size == compare_at else str(size)
            if size == compare_at:
                entry["config"] = "vector index disabled (vector_index_min_rows raised): flat scan"
            elif compare_at and size >= default_min_rows:
                entry["config"] = "vector index disabled (vector_index_min_rows raised)"
            elif size < default_min_rows:
                entry["config"] = (
                    f"default settings (below vector_index_min_rows={default_min_rows})"
                )
            else:
                entry["config"] = "default settings"
            search[key] = entry
            disk[str(size)] = disk_usage(lm, home, size)
            gc.collect()
        if compare_at is not None:
            # Same data, lexmem's own optimize() builds the IVF_PQ index this time.
            min_rows = min(default_min_rows, compare_at)
            lm.close()
            lm = Lexmem.open(
                home,
                settings=Settings(store=StoreSettings(vector_index_min_rows=min_rows)),
                embedder=embedder,
            )
            log(f"building the IVF_PQ vector index at {compare_at:,} (optimize)")
            t0 = time.perf_counter()
            lm.store.optimize()
            build_s = time.perf_counter() - t0
            log(f"measuring search at {compare_at:,} with the vector index")
            t0 = time.perf_counter()
            entry = measure_search(lm, g, compare_at, queries, warm)
            phases[f"search_{compare_at}_indexed_s"] = time.perf_counter() - t0
            entry["optimize_s"] = round(build_s, 3)
            entry["config"] = (
                "default settings"
                if min_rows == default_min_rows
                else f"vector_index_min_rows lowered to {min_rows} to build the index"
            )
            entry["indices"] = index_info(lm)
            entry["rows"] = lm.store.count()
            search[str(compare_at)] = entry
            disk[f"{compare_at}_with_vector_index"] = disk_usage(lm, home, compare_at)
            flat = search[f"{compare_at}_flat"]

            def brief(e: dict[str, Any]) -> dict[str, Any]:
                return {
                    "vector_index": e["vector_index"],
                    "vector_p50_ms": e["vector"]["p50_ms"],
                    "vector_p95_ms": e["vector"]["p95_ms"],
                    "vector_leg_p50_ms": e["vector"]["parts_p50_ms"].get("vector"),
                    "hybrid_p50_ms": e["hybrid"]["p50_ms"],
                    "hybrid_p95_ms": e["hybrid"]["p95_ms"],
                    "recall_at_10_vs_exact": e["vector"].get("recall_at_10_vs_exact"),
                    "hybrid_answer_in_top10": e["hybrid"]["answer_in_top10"],
                }

            comparison = {
                "rows": compare_at,
                "flat": brief(flat),
                "ivf_pq": {
                    **brief(entry),
                    "build_s_in_optimize": round(build_s, 3),
                    "parameters_as_in_lexmem_store": {  # restated here, not read back
                        "num_partitions": max(16, min(1024, int(compare_at**0.5))),
                        "num_sub_vectors": max(1, embedder.dim // 8),
                        "query_nprobes": 32,
                        "query_refine_factor": 4,
                    },
                },
                "vector_leg_speedup": round(
                    (flat["vector"]["parts_p50_ms"].get("vector") or 0)
                    / max(entry["vector"]["parts_p50_ms"].get("vector") or 0, 1e-3),
                    2,
                ),
                "hybrid_speedup": round(flat["hybrid"]["p50_ms"] / entry["hybrid"]["p50_ms"], 2),
            }
    finally:
        lm.close()

    stored = g.count
    n_real = g.n_real
    encode_store = g.encode.seconds + g.store_real.seconds
    store_all = g.store_real.seconds + g.store_variant.seconds
    result["insert"] = {
        "api": "Lexmem.open(tmp, embedder=shared); encoder.encode_batch(EncodingRequest...) "
        "then store.store_many(batch)",
        "batch_size": opts.batch,
        "commits": g.commits,
        "real_embedded_memories": n_real,
        "encode_plus_store_per_s": round(n_real / encode_store, 1) if encode_store else None,
        "encode_only_per_s": round(n_real / g.encode.seconds, 1) if g.encode.seconds else None,
        "store_only_per_s": round(stored / store_all, 1) if store_all else None,
        "store_only_per_s_by_stage": by_stage,
        "variant_build_s": round(g.build_variant.seconds, 3),
        "note": "store_many includes lexmem's own compaction every 64 commits; the final "
        "optimize() per size is reported as search[size].optimize_s"
        + (
            "; during the insert the vector index threshold was disabled, the index build "
            "is search[largest].optimize_s"
            if compare_at
            else ""
        ),
    }
    variants = max(0, max_size - n_real)
    result["vectors"] = {
        "real_model_embeddings": n_real,
        "synthetic_variants": variants,
        "how": (
            f"rows 0..{n_real - 1} are embedded by the real model; rows {n_real}.. are "
            "variants of row (i mod n_real): same template and topic with project, person, "
            "file, numbers and dates redrawn, vector = base's real vector + gaussian noise "
            "(sigma per component below), renormalised"
            if variants
            else "every vector is a real embedding from the model"
        ),
        "calibration": g.calibration,
    }
    result["queries"] = {
        "measured_per_mode": len(queries),
        "warmup_per_mode": len(warm),
        "limit": LIMIT,
        "record_access": False,
        "targets_among_first_rows": among,
        "examples": [q.text for q in queries[:5]],
        "answer_in_top10": "share of queries whose source memory is in the 10 results "
        "(variants with other projects compete; informative, not a quality benchmark)",
    }
    result["search"] = search
    if comparison:
        result["vector_index_comparison"] = comparison
    result["disk"] = disk
    head_key = str(max_size)
    head = search[head_key]
    result["summary"] = make_summary(
        f"{size_label(max_size)} hybrid search p50",
        head["hybrid"]["p50_ms"],
        "ms",
        "numpy brute-force cosine + query embedding p50",
        head["numpy_bruteforce_plus_embed"]["p50_ms"],
    )
    rows: list[tuple[str, float, str, str, float]] = []
    for size_key, at in search.items():
        if "numpy_bruteforce_plus_embed" not in at:
            continue
        size, _, variant = size_key.partition("_")  # "100000_flat": without the vector index
        label = size_label(int(size)) + (" without the vector index" if variant else "")
        base = at["numpy_bruteforce_plus_embed"]
        for mode in ("hybrid", "bm25", "vector"):
            for pct in ("p50_ms", "p95_ms"):
                rows.append((
                    f"{label} {mode} search {pct[:3]}", at[mode][pct], "ms",
                    f"numpy brute-force cosine + query embedding {pct[:3]}", base[pct],
                ))  # fmt: skip
    raw = 1000 * g.vectors.shape[1] * 4 / 1024 / 1024  # 1,000 float32 vectors, in MiB
    for size_key, d in disk.items():
        size, _, variant = size_key.partition("_")  # "100000_with_vector_index"
        label = size_label(int(size)) + (f" {variant.replace('_', ' ')}" if variant else "")
        rows.append((
            f"{label} on disk per 1,000 memories", d["mib_per_1000_after_pruning"],
            "MiB", "their float32 vectors alone", raw,
        ))  # fmt: skip
    result["figures"] = make_figures(*rows)
    result["run"] = {
        "options": {
            "sizes": opts.sizes, "real": opts.real, "real_budget_s": opts.real_budget_s,
            "queries": opts.queries, "warmup": opts.warmup,
            "embed_sentences": opts.embed_sentences, "batch": opts.batch, "seed": opts.seed,
            "compare_index": opts.compare_index, "quick": opts.quick,
        },
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
        "total_s": round(time.perf_counter() - started, 1),
        "process_cpu_s": round(
            sum(os.times()[:2]) - sum(cpu_started[:2]), 1
        ),  # vs total_s x usable cpus: how much of the machine this run actually got
        "peak_rss_mib": peak_rss_mib(),
        "load_average_at_end": load_average(),
    }  # fmt: skip
    return result


def peak_rss_mib() -> float | None:
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def summary_line(result: dict[str, Any]) -> str:
    s = result["summary"]
    ins = result["insert"]
    return (
        f"{NAME}: {s['headline'].replace(' search', '')} {s['value']:.1f} ms "
        f"(numpy brute force {s['baseline_value']:.1f} ms, x{s['ratio']:.1f}), "
        f"insert {ins['encode_plus_store_per_s'] or 0:.0f}/s "
        f"(store only {ins['store_only_per_s'] or 0:.0f}/s), "
        f"embed {result['embedding']['sentences_per_s']:.0f}/s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        from lexmem.errors import LexmemError
    except ImportError as exc:
        print(f"{NAME}: error: lexmem is not importable ({exc}); use .venv/bin/python", file=sys.stderr)  # fmt: skip
        return 1
    # SIGTERM (a timeout, a kill) unwinds like Ctrl-C, so the temporary stores are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if opts.out is not None:  # fail now, not after ten minutes of measuring
            try:
                opts.out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BenchError(f"cannot create {opts.out} ({exc.strerror})") from exc
        with bench_tempdir(opts.tmp_dir) as tmp:
            result = run(opts, tmp)
        write_result(NAME, result, opts.out)
        print(summary_line(result), flush=True)
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, LexmemError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{NAME}: error: {exc.strerror or exc} ({exc.filename or ''})", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{NAME}: error: out of memory (try smaller --sizes)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
