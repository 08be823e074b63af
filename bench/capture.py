"""Benchmark lexmem's capture path; prints JSON and a one-line summary.

1. Hook latency: the real ``lexmem-hook claude`` on a UserPromptSubmit payload, and
   on a SessionStart that prints a digest, against a bare ``python -c pass`` of the
   same interpreter, interleaved in one run (targets: p50 <= 2x, p99 <= 3x).
2. Capture-to-searchable: a real ``lexmem serve`` subprocess; an agent turn ("remember
   that …", then Stop) goes in through the real hook and this process polls the store
   until the memory is readable (target p50 <= 1 s, from the first hook call).
3. Sustained ingest: N explicit events drained by the service, against embedding the
   same texts with the same model in the same run (target: overhead <= 25 %).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BenchError,
    MemoryCorpus,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "capture"
BIN = Path(sys.executable).parent


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="fewer runs (about a minute)")
    p.add_argument("--out", type=Path, help="also write DIR/capture.json")
    p.add_argument(
        "--hook-runs", type=int, default=None, help="hook invocations per variant (default 60)"
    )
    p.add_argument(
        "--searchable", type=int, default=None, help="capture-to-searchable samples (default 30)"
    )
    p.add_argument(
        "--ingest", type=int, default=None, help="events for the ingest throughput (default 1000)"
    )
    opts = p.parse_args(argv)
    opts.hook_runs = opts.hook_runs or (20 if opts.quick else 60)
    opts.searchable = opts.searchable or (10 if opts.quick else 30)
    opts.ingest = opts.ingest or (300 if opts.quick else 1000)
    return opts


def _time(cmd: list[str], payload: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=payload, capture_output=True, env=env, check=False)
    ms = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise BenchError(f"{cmd[0]} exited {proc.returncode}: {proc.stderr.decode()[:200]}")
    return ms, proc.stdout


def hook_latency(home: Path, repo: Path, runs: int) -> dict[str, Any]:
    from lexmem.config import Paths, digest_path
    from lexmem.locks import FileLock

    # Byte-compiled modules, as any installed package has them (pip compiles on install):
    # a PYTHONDONTWRITEBYTECODE environment would otherwise recompile lexmem's source on
    # every call. The bare interpreter runs with the same environment.
    env = dict(os.environ, LEXMEM_HOME=str(home), PYTHONPYCACHEPREFIX=str(home / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    paths = Paths(home)
    paths.ensure()
    digest = digest_path(paths, str(repo))
    digest.parent.mkdir(parents=True, exist_ok=True)
    # A digest at its default cap (6 KB), as the service writes it for a busy project.
    lines = [
        f"- [{i:08x}] memory {i}: a fact about the deploy pipeline, the database, its port"
        for i in range(60)
    ]
    digest.write_text("# lexmem · shop\n\n## Pinned\n" + "\n".join(lines) + "\n")
    # Hold the service lock so SessionStart does not start a real service.
    lock = FileLock(paths.service_lock, timeout=0)
    lock.acquire()
    hook = [str(BIN / "lexmem-hook"), "claude"]
    bare = [sys.executable, "-c", "pass"]
    prompt = json.dumps({
        "session_id": "bench", "transcript_path": None, "cwd": str(repo), "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "From now on always use pnpm instead of npm; the API token lives in the keyring.",
    }).encode()  # fmt: skip
    start = json.dumps({
        "session_id": "bench", "transcript_path": None, "cwd": str(repo), "hook_event_name": "SessionStart",
        "source": "startup", "model": "claude",
    }).encode()  # fmt: skip
    times: dict[str, list[float]] = {
        "bare_python": [],
        "hook_prompt": [],
        "hook_session_start_digest": [],
    }
    try:
        for _ in range(3):  # warm the file cache
            _time(bare, b"", env)
            _time(hook, prompt, env)
        for _ in range(runs):
            times["bare_python"].append(_time(bare, b"", env)[0])
            times["hook_prompt"].append(_time(hook, prompt, env)[0])
            ms, out = _time(hook, start, env)
            if b"memory 59" not in out:
                raise BenchError("the SessionStart hook did not print the digest")
            times["hook_session_start_digest"].append(ms)
    finally:
        lock.release()
    result: dict[str, Any] = {k: _pcts(v) for k, v in times.items()}
    result["bytecode"] = "cached in a temporary PYTHONPYCACHEPREFIX, as an installed package has it"
    base = result["bare_python"]
    for k in ("hook_prompt", "hook_session_start_digest"):
        result[k]["ratio_p50_vs_bare"] = round(result[k]["p50_ms"] / base["p50_ms"], 2)
        result[k]["ratio_p99_vs_bare"] = round(result[k]["p99_ms"] / base["p99_ms"], 2)
    return result


def _pcts(values: list[float]) -> dict[str, Any]:
    out = percentiles(values)
    xs = sorted(values)
    out["p99_ms"] = round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 3)
    return out


def capture_to_searchable(
    home: Path, repo: Path, samples: int, corpus: MemoryCorpus
) -> dict[str, Any]:
    from lexmem.api import Lexmem

    env = dict(os.environ, LEXMEM_HOME=str(home))
    server = subprocess.Popen(
        [str(BIN / "lexmem"), "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        reader = Lexmem.open(home)
        reader.embedder.load()
        deadline = time.monotonic() + 60
        while not (home / "service.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the service loads its model before its first drain
        latencies = []
        hook = [str(BIN / "lexmem-hook"), "claude"]
        for i in range(samples + 2):
            # An agent turn: the user states a fact to keep, the agent answers (Stop).
            fact = corpus.row(i).text.rstrip(".")
            turn = [
                {
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": f"Remember that {fact[0].lower()}{fact[1:]}.",
                },
                {
                    "hook_event_name": "Stop",
                    "stop_hook_active": False,
                    "last_assistant_message": "Noted.",
                },
            ]
            before = reader.store.count()
            t0 = time.perf_counter()
            for payload in turn:
                body = {
                    "session_id": f"bench-{i}",
                    "transcript_path": None,
                    "cwd": str(repo),
                    **payload,
                }
                subprocess.run(
                    hook, input=json.dumps(body).encode(), env=env, check=True, capture_output=True
                )
            while True:
                reader.store.refresh()
                if reader.store.count() > before:
                    break
                if time.perf_counter() - t0 > 30:
                    raise BenchError("a captured memory did not become searchable within 30 s")
                time.sleep(0.01)
            if i >= 2:  # the first two warm the service up
                latencies.append((time.perf_counter() - t0) * 1000)
        hit = reader.search(corpus.row(3).text, record_access=False).hits
        reader.close()
        return {**_pcts(latencies), "found_by_search": bool(hit)}
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def ingest_throughput(home: Path, n: int, corpus: MemoryCorpus) -> dict[str, Any]:
    from lexmem.api import Lexmem
    from lexmem.capture.inbox import Inbox, make_event
    from lexmem.service.writer import CaptureService

    texts = [corpus.row(10_000 + i).text for i in range(n)]
    lm = Lexmem.open(home)
    lm.embedder.load()
    lm.embedder.embed(texts[:64])  # warm
    t0 = time.perf_counter()
    lm.embedder.embed(texts)
    raw_s = time.perf_counter() - t0
    inbox = Inbox(lm.paths.inbox)
    for t in texts:
        inbox.write(make_event("explicit", t, session_id="bench-ingest", agent="bench"))
    service = CaptureService(lm)
    service.acquire()
    try:
        t0 = time.perf_counter()
        report = service.drain()
        ingest_s = time.perf_counter() - t0
    finally:
        service.release()
    lm.close()
    if report.saved < n:
        raise BenchError(f"only {report.saved} of {n} events became memories")
    raw_rate, ingest_rate = n / raw_s, n / ingest_s
    return {
        "events": n,
        "raw_embedding_per_s": round(raw_rate, 1),
        "ingest_per_s": round(ingest_rate, 1),
        "pipeline_overhead": round(1 - ingest_rate / raw_rate, 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        corpus = MemoryCorpus(seed=11)
        with bench_tempdir() as tmp:
            repo = tmp / "repo"
            (repo / ".git").mkdir(parents=True)
            print(
                f"[{NAME}] hook latency ({opts.hook_runs} runs per variant)",
                file=sys.stderr,
                flush=True,
            )
            hooks = hook_latency(tmp / "hooks", repo, opts.hook_runs)
            print(
                f"[{NAME}] capture to searchable ({opts.searchable} samples)",
                file=sys.stderr,
                flush=True,
            )
            searchable = capture_to_searchable(tmp / "live", repo, opts.searchable, corpus)
            print(f"[{NAME}] ingest throughput ({opts.ingest} events)", file=sys.stderr, flush=True)
            ingest = ingest_throughput(tmp / "ingest", opts.ingest, corpus)
        result: dict[str, Any] = {
            "benchmark": NAME,
            "machine": machine_info(),
            "hook": hooks,
            "capture_to_searchable": searchable,
            "ingest": ingest,
            "targets": {
                "hook_p50_ratio": 2.0,
                "hook_p99_ratio": 3.0,
                "searchable_p50_ms": 1000,
                "pipeline_overhead": 0.25,
            },
        }
        result["summary"] = make_summary(
            "hook p50",
            hooks["hook_prompt"]["p50_ms"],
            "ms",
            "python -c pass p50",
            hooks["bare_python"]["p50_ms"],
        )
        bare, start = hooks["bare_python"], hooks["hook_session_start_digest"]
        result["figures"] = make_figures(
            ("hook p50", hooks["hook_prompt"]["p50_ms"], "ms", "python -c pass p50", bare["p50_ms"]),
            ("hook p99", hooks["hook_prompt"]["p99_ms"], "ms", "python -c pass p99", bare["p99_ms"]),
            ("SessionStart hook printing a 5 KB digest p50", start["p50_ms"], "ms",
             "python -c pass p50", bare["p50_ms"]),
            ("capture to searchable p50", searchable["p50_ms"], "ms", "target", 1000.0),
            ("ingest throughput", ingest["ingest_per_s"], "memories/s",
             "raw embedding of the same texts", ingest["raw_embedding_per_s"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        h = hooks["hook_prompt"]
        print(
            f"{NAME}: hook p50 {h['p50_ms']:.0f} ms (x{h['ratio_p50_vs_bare']} bare python, p99 "
            f"x{h['ratio_p99_vs_bare']}), capture-to-searchable p50 {searchable['p50_ms']:.0f} ms, "
            f"ingest {ingest['ingest_per_s']:.0f}/s vs raw embedding {ingest['raw_embedding_per_s']:.0f}/s "
            f"(overhead {ingest['pipeline_overhead']:.0%})",
            flush=True,
        )
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, subprocess.CalledProcessError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
