"""Fault and load benchmark of lexmem's capture path; prints JSON and a one-line summary.

1. Crash run: N events (default 5,000; a tenth of them agent turns, the rest explicit
   "remember this" events) written by a producer process while ``lexmem serve`` is
   SIGKILLed at random moments (default 50 kills: a quarter during start-up, the rest
   while it drains) and restarted each time; then it finishes, and the data folder is
   verified: every event's effect exactly once (lost, duplicated, quarantined, left in
   the inbox are counted), the store opens and searches in a fresh process, and
   ``lexmem doctor`` passes. Baseline: the same feed into a fresh data folder with the
   service never killed, in the same run.
2. Concurrent producers: 8 processes × 500 Claude Code payloads each through the real
   ``lexmem-hook`` while ``lexmem serve`` drains; every event accounted for in the
   journal, per session. Baseline: one producer's rate (one process × 500), same run.

The harness (feeding, killing, verifying) is ``tests/faultkit.py``; ``tests/test_faults.py``
runs the same two runs at CI size.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the fault harness

from _common import (
    BenchError,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)
from faultkit import (
    CrashRun,
    Feed,
    HarnessError,
    LoadRun,
    Verdict,
    baseline_run,
    crash_run,
    expected_sessions,
    load_run,
    verify,
    verify_load,
)

NAME = "faults"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="smaller runs (a few minutes)")
    p.add_argument("--out", type=Path, help="also write DIR/faults.json")
    p.add_argument("--events", type=int, help="events fed in the crash run (default 5000)")
    p.add_argument("--kills", type=int, help="SIGKILLs in the crash run (default 50)")
    p.add_argument("--producers", type=int, default=8, help="hook producer processes (8)")
    p.add_argument("--per-producer", type=int, help="hook events per producer (default 500)")
    p.add_argument("--seed", type=int, default=2026, help="feed and kill moments (2026)")
    opts = p.parse_args(argv)
    opts.events = opts.events or (500 if opts.quick else 5000)
    opts.kills = opts.kills or (10 if opts.quick else 50)
    opts.per_producer = opts.per_producer or (50 if opts.quick else 500)
    if min(opts.events, opts.kills, opts.producers, opts.per_producer) < 1:
        raise BenchError("--events, --kills, --producers and --per-producer must be at least 1")
    return opts


def _progress(message: str) -> None:
    print(f"[{NAME}] {message}", file=sys.stderr, flush=True)


def _crash_part(run: CrashRun, verdict: Verdict) -> dict[str, Any]:
    lives = run.taken_in_per_life
    return {
        "events_fed": run.fed,
        "kills": run.kills,
        "kills_in_startup": run.kills_in_startup,
        "kills_while_draining": run.kills_while_draining,
        "killed_after_s": percentiles([s * 1000 for s in run.kill_moments_s]),
        "events_taken_in_per_killed_life": {
            "lives_measured": len(lives),
            "lives_that_took_in_nothing": sum(1 for n in lives if n == 0),
            "max": max(lives, default=0),
            "mean": round(sum(lives) / len(lives), 1) if lives else 0,
        },
        "seconds": round(run.seconds, 1),
        "events_per_s": round(run.events_per_s, 1),
        "verdict": verdict.to_dict(),
    }


def _load_part(run: LoadRun, verdict: Verdict) -> dict[str, Any]:
    return {
        "producers": run.producers,
        "events_per_producer": run.per_producer,
        "events_sent": run.sent,
        "seconds_feeding": round(run.feeding_s, 1),
        "seconds_until_all_accounted": round(run.accounted_s, 1),
        "events_per_s": round(run.events_per_s, 1),
        "hook_ms": percentiles(run.hook_ms),
        "verdict": verdict.to_dict(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    try:
        opts = parse_args(argv)
    except BenchError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        feed = Feed(opts.events, seed=opts.seed)
        with bench_tempdir() as tmp:
            _progress(f"baseline: {feed.n} events, the service never killed")
            base = baseline_run(tmp / "baseline", feed)
            base_verdict = verify(tmp / "baseline", feed, doctor=False)
            _progress(f"crash run: {feed.n} events, {opts.kills} SIGKILLs")
            crash = crash_run(tmp / "crash", feed, kills=opts.kills, seed=opts.seed)
            _progress("verifying the crash run (and lexmem doctor)")
            verdict = verify(tmp / "crash", feed)
            repo = tmp / "repo"
            (repo / ".git").mkdir(parents=True)
            _progress(f"1 hook producer x {opts.per_producer} events")
            single = load_run(tmp / "single", repo, producers=1, per_producer=opts.per_producer,
                              tag="single")  # fmt: skip
            single_verdict = verify_load(
                tmp / "single", expected_sessions("single", 1, opts.per_producer)
            )
            _progress(f"{opts.producers} hook producers x {opts.per_producer} events")
            load = load_run(tmp / "load", repo, producers=opts.producers,
                            per_producer=opts.per_producer, tag="load")  # fmt: skip
            load_verdict = verify_load(
                tmp / "load", expected_sessions("load", opts.producers, opts.per_producer)
            )
        result: dict[str, Any] = {
            "benchmark": NAME,
            "machine": machine_info(),
            "crash": _crash_part(crash, verdict),
            "crash_baseline": _crash_part(base, base_verdict),
            "producers": _load_part(load, load_verdict),
            "producers_baseline": _load_part(single, single_verdict),
        }
        lost, dup = len(verdict.lost), len(verdict.duplicated)
        quarantined, left = len(verdict.quarantined), len(verdict.leftovers)
        unaccounted = len(load_verdict.lost) + len(load_verdict.duplicated)
        result["summary"] = make_summary(
            f"crash-run throughput with {crash.kills} SIGKILLs", crash.events_per_s, "events/s",
            "same feed, never killed", base.events_per_s,
        )  # fmt: skip
        result["figures"] = make_figures(
            (f"crash-run throughput with {crash.kills} SIGKILLs", crash.events_per_s, "events/s",
             "same feed, never killed", base.events_per_s),
            ("events lost across the kills", lost, "events", "events fed", crash.fed),
            ("events duplicated across the kills", dup, "events", "events fed", crash.fed),
            ("events quarantined", quarantined, "events", "events fed", crash.fed),
            (f"{load.producers} hook producers, fed to accounted", load.events_per_s, "events/s",
             "1 hook producer", single.events_per_s),
            ("hook events not accounted for", unaccounted, "events", "events sent", load.sent),
            (f"hook p95 with {load.producers} producers", percentiles(load.hook_ms)["p95_ms"],
             "ms", "hook p95, 1 producer", percentiles(single.hook_ms)["p95_ms"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        failed = [v for v in (verdict, base_verdict, load_verdict, single_verdict) if not v.ok]
        print(
            f"{NAME}: {crash.fed} events fed, {crash.kills} SIGKILLs "
            f"({crash.kills_in_startup} in start-up): {lost} lost, {dup} duplicated, "
            f"{quarantined} quarantined, {left} left in the inbox"
            f"{', doctor and store OK' if not verdict.problems else ''}; "
            f"{crash.events_per_s:.0f} events/s with kills vs {base.events_per_s:.0f} without; "
            f"{load.producers}x{load.per_producer} hook events: {unaccounted} unaccounted, "
            f"{load.events_per_s:.0f}/s vs {single.events_per_s:.0f}/s for one producer",
            flush=True,
        )
        if failed:
            print(f"{NAME}: error: {failed[0].summary()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, HarnessError, subprocess.SubprocessError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
