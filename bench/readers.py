"""Readers of a warm service: `lexmem search` from a shell and `lexmem mcp`, timed.

With a real ``lexmem serve`` on a data folder of N memories (10,000; ``--quick``:
2,000), each figure beside its baseline from the same run:

- ``lexmem search`` from a shell, wall time per command (p50), against
  ``python -c pass`` (target: at most 4x) and against the same command with no service
  (``LEXMEM_NO_SERVICE=1``: the cold CLI);
- ``lexmem mcp``: from starting the command to the answer to ``initialize`` (p50),
  against ``python -c pass`` (target: at most 150 ms), and against the same with no
  service running, answered by the relay from the service's recorded answers;
- ``tools/call search_memory`` over one relayed session (p50; target at most 60 ms at
  10,000 memories), against the same search called inside a warm process.

Usage: python bench/readers.py [--quick] [--memories N] [--runs N] [--out DIR]
Prints the result as JSON, then a one-line summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import (  # noqa: E402
    BenchError,
    MemoryCorpus,
    bench_tempdir,
    machine_info,
    make_summary,
    percentiles,
    write_result,
)

NAME = "readers"
BIN = Path(sys.executable).parent


def log(message: str) -> None:
    print(f"[readers] {message}", file=sys.stderr, flush=True)


def lexmem_command() -> list[str]:
    exe = BIN / ("lexmem.exe" if os.name == "nt" else "lexmem")
    if not exe.exists():
        raise BenchError(f"{exe} is missing: run ./dev setup")
    return [str(exe)]


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, LEXMEM_HOME=str(home), COLUMNS="120")
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "LEXMEM_NO_SERVICE"):
        env.pop(name, None)
    env.update(extra)
    return env


def fill(home: Path, n: int, seed: int, questions: int = 60) -> list[str]:
    """``n`` memories with real embeddings; ``questions`` questions about them."""
    from lexmem.api import Lexmem
    from lexmem.encoder import EncodingRequest
    from lexmem.models import MemoryContext, MemorySource

    corpus = MemoryCorpus(seed)
    rows = [corpus.row(i) for i in range(n)]
    lm = Lexmem.open(home)
    try:
        for start in range(0, n, 500):
            part = rows[start : start + 500]
            requests = [
                EncodingRequest(r.text, context=MemoryContext(source=MemorySource(r.source), project=r.project))
                for r in part
            ]  # fmt: skip
            lm.store.store_many(lm.encoder.encode_batch(requests))
            log(f"  {min(n, start + 500):,} memories stored")
        lm.optimize()  # indices over every row, as the service keeps a store it writes
    finally:
        lm.close()
    return [q.text for q in corpus.queries(rows, among=n, n=questions, salt="readers")]


def timed(argv: Sequence[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    result = subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    ms = (time.perf_counter() - t0) * 1e3
    if result.returncode != 0:
        raise BenchError(
            f"{' '.join(argv[:3])}… exited {result.returncode}: {result.stderr.decode()[-300:]}"
        )
    return ms


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "1"}},
}  # fmt: skip


class Session:
    """``lexmem mcp`` as an agent starts it."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [*lexmem_command(), "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.n = 1

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def receive(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise BenchError("lexmem mcp closed the session")
        return json.loads(line)

    def initialize(self) -> float:
        self.send(INITIALIZE)
        self.receive()
        ms = (time.perf_counter() - self.t0) * 1e3
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return ms

    def search(self, query: str) -> float:
        self.n += 1
        t0 = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": self.n, "method": "tools/call",
                   "params": {"name": "search_memory", "arguments": {"query": query}}})  # fmt: skip
        reply = self.receive()
        if "result" not in reply or reply["result"].get("isError"):
            raise BenchError(f"search_memory failed: {str(reply)[:300]}")
        return (time.perf_counter() - t0) * 1e3

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def start_service(home: Path) -> subprocess.Popen[bytes]:
    from lexmem import wire
    from lexmem.config import Paths

    proc = subprocess.Popen([*lexmem_command(), "serve"], env=environment(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while wire.connect(Paths(home)) is None or not (home / "mcp-manifest.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BenchError("lexmem serve did not come up")
        time.sleep(0.05)
    return proc


def stop_service(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(60)


def run(opts: argparse.Namespace) -> dict[str, Any]:
    n = opts.memories or (2_000 if opts.quick else 10_000)
    runs = opts.runs or (12 if opts.quick else 30)
    with bench_tempdir(prefix="lexmem-bench-readers-") as tmp:
        home = tmp / "lexmem"
        log(f"filling {n:,} memories")
        # The service keeps the vectors of questions it was asked lately (the embedder's
        # query cache): the tools/call section asks questions the shell section did not.
        queries = fill(home, n, opts.seed, questions=runs * 3 + 1)
        env = environment(home)
        # Warm-process baseline: the same searches inside one process (model loaded).
        from lexmem.api import Lexmem

        lm = Lexmem.open(home)
        lm.search(queries[0])
        inproc = []
        for q in queries[:runs]:
            t0 = time.perf_counter()
            lm.search(q)
            inproc.append((time.perf_counter() - t0) * 1e3)
        lm.close()

        log("baseline: python -c pass")
        bare = [timed([sys.executable, "-c", "pass"], env) for _ in range(runs)]
        log("cold CLI search (no service)")
        cold = [timed([*lexmem_command(), "search", q], environment(home, LEXMEM_NO_SERVICE="1"))
                for q in queries[: max(3, runs // 4)]]  # fmt: skip

        log("starting lexmem serve")
        service = start_service(home)
        try:
            timed(
                [*lexmem_command(), "search", queries[0]], env
            )  # the service's first search loads the model
            log("lexmem search through the service")
            warm_search = [timed([*lexmem_command(), "search", q], env) for q in queries[:runs]]
            log("lexmem mcp: initialize")
            inits = []
            for _ in range(runs):
                s = Session(home, env)
                inits.append(s.initialize())
                s.close()
            log("lexmem mcp: tools/call search_memory")
            s = Session(home, env)
            s.initialize()
            s.search(queries[runs])
            calls = [s.search(q) for q in queries[runs + 1 : runs * 3 + 1]]
            s.close()
        finally:
            stop_service(service)

        log("lexmem mcp: initialize with no service running (recorded answers)")
        opening = []
        for _ in range(max(3, runs // 4)):
            s = Session(home, env)
            opening.append(s.initialize())
            s.close()
            from lexmem.config import Paths
            from lexmem.locks import service_running
            from lexmem.service.registry import services

            for svc in services():  # the relay started one: stop it for the next run
                if svc.home == home:
                    os.kill(svc.pid, 15)
            deadline = time.monotonic() + 60
            while service_running(Paths(home)) and time.monotonic() < deadline:
                time.sleep(0.05)

    p_bare = percentiles(bare)["p50_ms"]
    p_search = percentiles(warm_search)["p50_ms"]
    p_init = percentiles(inits)["p50_ms"]
    p_call = percentiles(calls)["p50_ms"]
    p_inproc = percentiles(inproc)["p50_ms"]
    figures = [
        make_summary("lexmem search from a shell, service running (p50)", p_search, "ms",
                     "python -c pass", p_bare),
        make_summary("lexmem mcp initialize, service running (p50)", p_init, "ms",
                     "python -c pass", p_bare),
        make_summary(f"tools/call search_memory at {n:,} memories (p50)", p_call, "ms",
                     "the same search in a warm process", p_inproc),
        make_summary("lexmem search with no service (p50)", percentiles(cold)["p50_ms"], "ms",
                     "python -c pass", p_bare),
        make_summary("lexmem mcp initialize, no service yet (p50)", percentiles(opening)["p50_ms"],
                     "ms", "python -c pass", p_bare),
    ]  # fmt: skip
    return {
        "name": NAME,
        "memories": n,
        "runs": runs,
        "python_pass_ms": percentiles(bare),
        "cli_search_service_ms": percentiles(warm_search),
        "cli_search_cold_ms": percentiles(cold),
        "mcp_initialize_service_ms": percentiles(inits),
        "mcp_initialize_no_service_ms": percentiles(opening),
        "mcp_search_call_ms": percentiles(calls),
        "inprocess_search_ms": percentiles(inproc),
        "targets": {
            "cli_search_vs_pass_max_ratio": 4.0,
            "mcp_initialize_p50_max_ms": 150.0,
            "mcp_search_p50_max_ms_at_10k": 60.0,
        },
        "met": {
            "cli_search": p_search <= 4.0 * p_bare,
            "mcp_initialize": p_init <= 150.0,
            "mcp_search": p_call <= 60.0 if n >= 10_000 else None,
        },
        "summary": figures[0],
        "figures": figures,
        "machine": machine_info(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2,000 memories, fewer runs")
    p.add_argument("--memories", type=int, help="how many memories (default 10,000)")
    p.add_argument("--runs", type=int, help="runs per figure (default 30; --quick 12)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, help="also write DIR/readers.json")
    opts = p.parse_args(argv)
    try:
        result = run(opts)
    except BenchError as exc:
        print(f"readers: error: {exc}", file=sys.stderr)
        return 1
    write_result(NAME, result, opts.out)
    s = result["cli_search_service_ms"]["p50_ms"]
    print(
        f"readers: lexmem search {s:.0f} ms (x{s / result['python_pass_ms']['p50_ms']:.1f} python -c pass), "
        f"mcp initialize {result['mcp_initialize_service_ms']['p50_ms']:.0f} ms, "
        f"search_memory {result['mcp_search_call_ms']['p50_ms']:.0f} ms at {result['memories']:,} memories "
        f"(in-process {result['inprocess_search_ms']['p50_ms']:.0f} ms); "
        f"cold search {result['cli_search_cold_ms']['p50_ms']:.0f} ms; "
        f"initialize before the service is up {result['mcp_initialize_no_service_ms']['p50_ms']:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
