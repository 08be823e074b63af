"""Benchmark team sync between two clients: the time from a capture on one client to the
memory being searchable on the other, and push and pull throughput; prints JSON and a
one-line summary.

One real PostgreSQL 16 with pgvector (pgserver, the ``team`` extra) on a Unix socket, a
team that shares the project ``shop`` with two member roles, and two lexmem data folders
in this process, each with its own writer (``CaptureService.run`` on a thread: its team
sync, its change listener) and the real model, sharing one loaded copy of it:

1. capture to searchable: ann remembers a memory through the inbox (as ``lexmem
   remember`` does with a service running); the clock runs until bob's search for its
   text returns it. Beside it, the baseline: the same remember until it is stored on
   ann's own machine.
2. push and pull: ann queues N memories while her writer is stopped, then one
   ``team_sync`` pushes them all; bob's ``team_sync`` then pulls them all. Memories per
   second each way.

``--quick``: 10 captures and 200 memories for throughput (about a minute); the default
is 30 and 1,000.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
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

NAME = "team_sync"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="10 captures, 200 memories")
    p.add_argument("--out", type=Path, help="also write DIR/team_sync.json")
    p.add_argument("--captures", type=int, default=None, help="captures timed (default 30)")
    p.add_argument(
        "--bulk", type=int, default=None, help="memories pushed and pulled (default 1,000)"
    )
    return p.parse_args(argv)


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


class Client:
    def __init__(self, root: Path, name: str, url: str, embedder: Any) -> None:
        from lexmem.api import CaptureService, Lexmem

        self.home, self.repo = root / f"{name}-data", root / f"{name}-work" / "shop"
        (self.repo / ".git").mkdir(parents=True)
        lm = Lexmem.open(self.home, embedder=embedder)
        lm.team_join(url, project=str(self.repo), team_name="shop", user=name)
        lm.close()
        self.lm = Lexmem.open(self.home, embedder=embedder)
        self.service = CaptureService(self.lm)
        self.service.acquire()
        self.stop: threading.Event | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self.service.run, args=(self.stop,), kwargs={"poll": 0.5}, daemon=True
        )
        self.thread.start()

    def halt(self) -> None:
        if self.stop is not None and self.thread is not None:
            self.stop.set()
            self.service.wake()
            self.thread.join(timeout=60)
            self.stop = self.thread = None

    def close(self) -> None:
        self.halt()
        self.service.release()
        self.lm.close()


def measure(opts: argparse.Namespace, root: Path) -> dict[str, Any]:
    from lexmem.api import remember_through_inbox
    from lexmem.embedder import Embedder
    from lexmem.settings import EmbeddingSettings

    captures = opts.captures or (10 if opts.quick else 30)
    bulk = opts.bulk or (200 if opts.quick else 1000)
    embedder = Embedder(EmbeddingSettings(), root / "models")
    embedder.load()
    with server(root) as handle:
        import psycopg

        with psycopg.connect(handle.get_uri(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE team")
        url = handle.get_uri("team")
        from lexmem.store.postgres.team import TeamServer

        with TeamServer(url, dim=384, space=embedder.space_id).open() as admin_server:
            admin_server.create_team("devs")
            admin_server.share_project("devs", "shop")
            for person in ("ann", "bob"):
                admin_server.add_member("devs", person)
        ann, bob = Client(root, "ann", url, embedder), Client(root, "bob", url, embedder)
        try:
            ann.start()
            bob.start()
            local_ms: list[float] = []
            remote_ms: list[float] = []
            for i in range(captures):
                text = f"Capture {i}: the shop's job number {i} runs on worker {i * 7 % 13}."
                t0 = time.perf_counter()
                done = remember_through_inbox(
                    ann.lm, text, project=str(ann.repo), notify=ann.service.wake, wait=30
                )
                local_ms.append((time.perf_counter() - t0) * 1000)
                mid = done.memories[0].id
                deadline = time.monotonic() + 60
                while True:
                    bob.lm.refresh()
                    hits = bob.lm.search(text, limit=5, record_access=False).hits
                    if any(h.memory.id == mid for h in hits):
                        break
                    if time.monotonic() > deadline:
                        raise BenchError(f"capture {i} never became searchable on bob's side")
                    time.sleep(0.01)
                remote_ms.append((time.perf_counter() - t0) * 1000)
            ann.halt()
            bob.halt()
            texts = [f"Bulk {i}: the shop's report {i} goes to team {i % 17}." for i in range(bulk)]
            vectors = embedder.embed(texts)
            from lexmem.models import Memory, MemorySource, MemoryType

            batch = [
                Memory(content=t, embedding=[float(x) for x in v], project=str(ann.repo),
                       type=MemoryType.SEMANTIC, source=MemorySource.EXPLICIT)
                for t, v in zip(texts, vectors, strict=True)
            ]  # fmt: skip
            for i in range(0, bulk, 200):
                ann.lm.store.store_many(batch[i : i + 200])
            t0 = time.perf_counter()
            pushed = ann.service.maintenance("team_sync", {})
            push_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pulled = bob.service.maintenance("team_sync", {})
            pull_s = time.perf_counter() - t0
            if pushed["pushed"] < bulk or pulled["pulled"] < bulk:
                raise BenchError(f"pushed {pushed['pushed']}, pulled {pulled['pulled']} of {bulk}")
        finally:
            ann.close()
            bob.close()
    return {
        "captures": captures,
        "bulk": bulk,
        "capture_to_searchable_elsewhere": percentiles(remote_ms),
        "capture_to_stored_here": percentiles(local_ms),
        "push_per_s": round(bulk / push_s, 1),
        "pull_per_s": round(bulk / pull_s, 1),
        "push_s": round(push_s, 3),
        "pull_s": round(pull_s, 3),
    }


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
        remote, local = f["capture_to_searchable_elsewhere"], f["capture_to_stored_here"]
        result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(), **f}
        result["summary"] = make_summary(
            "capture to searchable on the other client, p50", remote["p50_ms"], "ms",
            "capture to stored on this client, p50", local["p50_ms"],
        )  # fmt: skip
        result["figures"] = make_figures(
            ("capture to searchable on the other client, p50", remote["p50_ms"], "ms",
             "capture to stored on this client, p50", local["p50_ms"]),
            ("capture to searchable on the other client, p95", remote["p95_ms"], "ms",
             "capture to stored on this client, p95", local["p95_ms"]),
            (f"push of {f['bulk']:,} memories", f["push_per_s"], "memories/s",
             f"pull of {f['bulk']:,} memories", f["pull_per_s"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        print(
            f"{NAME}: capture to searchable on the other client p50 {remote['p50_ms']:.0f} ms "
            f"(p95 {remote['p95_ms']:.0f} ms; stored here p50 {local['p50_ms']:.0f} ms) over "
            f"{f['captures']} captures; push {f['push_per_s']:.0f}/s, pull "
            f"{f['pull_per_s']:.0f}/s over {f['bulk']:,} memories",
            flush=True,
        )
    except (BenchError, LexmemError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
