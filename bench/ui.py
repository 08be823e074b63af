"""The memory browser under load: first paint and event-loop stalls while searching.

    python bench/ui.py [--out DIR] [--quick] [--size N]

For a small store (the baseline, 1,000 memories) and a large one (100,000; 10,000
with ``--quick``) it measures, on the offscreen platform, in one process:

- first paint: from building the Memories page to the table painting its first rows;
- search as you type: a person types a question at ~8 keys a second while a 5 ms probe
  timer runs on the UI loop; the worst gap between probe ticks beyond their interval
  is the loop's worst stall (what a person would feel as a freeze), with p99 and the
  time from the last key to the results on screen.

The large store is grown like ``bench/store_search.py`` grows it: real embeddings of
realistic memories, then variants with calibrated noise. The summary compares the
large store with the small one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import (  # noqa: E402 - after the path set-up
    BenchError,
    MemoryCorpus,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "ui"
QUESTION = "which database does the billing service use for its ledger"
KEY_INTERVAL_MS = 120  # a steady typist, ~8 keys a second
PROBE_MS = 5


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def pump(until: Callable[[], bool], timeout_s: float = 120.0) -> bool:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    deadline = time.perf_counter() + timeout_s
    while not until():
        if time.perf_counter() > deadline:
            return False
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 10)
        time.sleep(0.001)
    return True


def grow_store(home: Path, size: int, embedder: Any, seed: int) -> Any:
    import numpy as np
    from store_search import Growth, grow

    from lexmem.api import Lexmem

    lm = Lexmem.open(home, embedder=embedder)
    corpus = MemoryCorpus(seed)
    n_real = min(size, 1000)
    g = Growth(
        rows=[corpus.row(i) for i in range(n_real)],
        vectors=np.zeros((size, embedder.dim), dtype=np.float32),
        n_real=n_real, min_real=min(size, 500), real_budget_s=40.0,
        noise_rng=np.random.default_rng(seed + 1),
    )  # fmt: skip
    t0 = time.perf_counter()
    grow(lm, corpus, g, size, 1000)
    log(f"  grown to {size:,} in {time.perf_counter() - t0:.1f} s; optimizing")
    lm.optimize()
    return lm


def measure(lm: Any, label: str) -> dict[str, Any]:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ui.browser import MemoriesPage
    from ui.context import AppContext

    app = QApplication.instance()
    assert app is not None
    ctx = AppContext(lm)
    # first paint: construction to the first painted rows
    painted: list[float] = []
    t0 = time.perf_counter()
    page = MemoriesPage(ctx)
    page.first_paint_done.connect(lambda: painted.append(time.perf_counter()))
    page.resize(1280, 800)
    page.show()
    if not pump(lambda: bool(painted)):
        raise BenchError(f"{label}: the table never painted its first rows")
    first_paint_ms = (painted[0] - t0) * 1000
    pump(lambda: ctx.runner.pending == 0)

    # search as you type, with a probe timer measuring the loop's stalls
    gaps: list[float] = []
    last = [time.perf_counter()]

    def probe() -> None:
        now = time.perf_counter()
        gaps.append(max(0.0, (now - last[0]) * 1000 - PROBE_MS))
        last[0] = now

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)
    results: list[float] = []
    page.results_changed.connect(lambda _n: results.append(time.perf_counter()))
    last[0] = time.perf_counter()
    timer.start()
    box = page.search_box
    typed_at = 0.0
    for ch in QUESTION:
        box.setText(box.text() + ch)  # what a key press does to the line edit
        typed_at = time.perf_counter()
        end = typed_at + KEY_INTERVAL_MS / 1000
        pump(lambda end=end: time.perf_counter() >= end)  # type: ignore[misc]
    results.clear()
    if not pump(lambda: bool(results) and ctx.runner.pending == 0):
        raise BenchError(f"{label}: the search results never arrived")
    settle_ms = (results[-1] - typed_at) * 1000
    timer.stop()
    hits = page.model.rowCount()
    page.close()
    ctx.close()
    stall = percentiles(gaps)
    log(f"  {label}: first paint {first_paint_ms:.0f} ms, worst stall {stall['max_ms']:.1f} ms, "
        f"results {settle_ms:.0f} ms after the last key")  # fmt: skip
    return {
        "memories": lm.count(),
        "first_paint_ms": round(first_paint_ms, 1),
        "typing": {
            "query": QUESTION,
            "keys": len(QUESTION),
            "key_interval_ms": KEY_INTERVAL_MS,
            "probe_interval_ms": PROBE_MS,
            "loop_stall_ms": stall,
            "worst_stall_ms": stall.get("max_ms", 0.0),
            "results_after_last_key_ms": round(settle_ms, 1),
            "hits_shown": hits,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write DIR/ui.json")
    p.add_argument("--quick", action="store_true", help="10,000 memories instead of 100,000")
    p.add_argument("--size", type=int, help="the large store's size")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    size = a.size or (10_000 if a.quick else 100_000)
    baseline_size = min(1000, size)
    try:
        from PySide6.QtWidgets import QApplication

        from lexmem.embedder import Embedder
        from lexmem.settings import EmbeddingSettings
        from ui.theme import apply_theme

        qt = QApplication.instance() or QApplication(sys.argv[:1])
        assert isinstance(qt, QApplication)
        apply_theme(qt, "light")
        with bench_tempdir() as tmp:
            embedder = Embedder(EmbeddingSettings(), tmp / "models")
            embedder.load()
            runs: dict[str, Any] = {}
            for n in (baseline_size, size):
                log(f"building a store of {n:,} memories")
                lm = grow_store(tmp / f"store-{n}", n, embedder, a.seed)
                runs[str(n)] = measure(lm, f"{n:,} memories")
                lm.close()
    except BenchError as exc:
        print(f"bench/ui.py: {exc}", file=sys.stderr)
        return 1
    big, small = runs[str(size)], runs[str(baseline_size)]
    result = {
        "benchmark": NAME,
        "machine": machine_info(),
        "runs": runs,
        "targets": {"first_paint_ms": 1000, "worst_stall_ms": 50},
    }
    result["summary"] = make_summary(
        f"browser first paint at {size:,} memories", big["first_paint_ms"], "ms",
        f"first paint at {baseline_size:,}", small["first_paint_ms"],
    )  # fmt: skip
    result["figures"] = make_figures(
        (f"browser first paint at {size:,} memories", big["first_paint_ms"], "ms",
         f"first paint at {baseline_size:,}", small["first_paint_ms"]),
        (f"worst loop stall while typing at {size:,}", big["typing"]["worst_stall_ms"], "ms",
         "target (a frame and a half at 30 fps)", 50.0),
    )  # fmt: skip
    write_result(NAME, result, a.out)
    print(
        f"ui: first paint {big['first_paint_ms']:.0f} ms at {size:,} memories "
        f"({small['first_paint_ms']:.0f} ms at {baseline_size:,}); worst loop stall while "
        f"typing {big['typing']['worst_stall_ms']:.1f} ms "
        f"({small['typing']['worst_stall_ms']:.1f} ms at {baseline_size:,})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
