"""Whether ``lexmem-hook`` keeps every event on a saturated machine, and what a call costs.

Runs ROUNDS rounds of AT_ONCE concurrent ``lexmem-hook claude`` processes, each given a
realistic Claude Code payload (short prompts, Bash results of a few KB, every fifth with
a secret), while BUSY busy loops saturate the cores (0: an idle machine). Each round also
runs the same number of ``python -c pass`` (the interpreter's own start) and of ``true``
(the same registration doing nothing) with the same payloads on stdin, so the three are
timed under the same load. A real service (the writer, in this process, with its reader
socket for what the hook hands over) then drains the inbox.

Reports events sent, stored, stored with their content, stored twice, and secrets found
in the data folder (every file and table version decoded: tests/diskscan.py); per-call
wall time p50/p95 of the hook, ``python -c pass`` and ``true``; the load average.

    .venv/bin/python bench/hook_load.py [--rounds N] [--at-once N] [--busy N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _common import (  # noqa: E402
    BenchError,
    bench_tempdir,
    load_average,
    machine_info,
    make_summary,
    percentiles,
    write_result,
)

NAME = "hook_load"
KINDS = ("hook", "python -c pass", "true")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=20, help="rounds of concurrent calls (20)")
    p.add_argument("--at-once", type=int, default=50, help="calls at once in a round (50)")
    p.add_argument("--busy", type=int, default=30, help="busy loops saturating the cores (30)")
    p.add_argument("--out", type=Path, help="also write DIR/hook_load.json")
    return p.parse_args(argv)


def session(round_: int) -> str:
    return f"5a0d0000-0000-4000-8000-{round_:012d}"


def secret(i: int) -> str:
    return f"zqxs{i:04d}k9q"


def marker(i: int) -> str:
    return f"evmark{i:04d}q"


def hook_payload(i: int, at_once: int, repo: Path) -> dict[str, Any]:
    base = {"session_id": session(i // at_once), "cwd": str(repo),
            "transcript_path": str(repo / ".claude" / "t.jsonl"), "permission_mode": "default"}  # fmt: skip
    leak = i % 5 == 0
    if i % 2 == 0:
        prompt = f"fix the failing test {marker(i)} please"
        if leak:
            prompt += f"\nuse DB_PASSWORD={secret(i)} for the staging db"
        return {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    lines = "".join(f"tests/test_{n}.py::test_case_{n} PASSED\n" for n in range(i % 40 * 5))
    stdout = f"{marker(i)}\n{lines}" + (f"export API_KEY={secret(i)}\n" if leak else "")
    return {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_use_id": f"toolu_{i:06d}", "tool_input": {"command": "pytest -q"},
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False}}  # fmt: skip


def batch(cmd: list[str], payloads: list[bytes], env: dict[str, str], cwd: Path) -> list[float]:
    """Run one process per payload, all at once; each one's wall time in ms."""
    times: list[float] = []
    lock = threading.Lock()

    def one(data: bytes) -> None:
        started = time.perf_counter()
        subprocess.run(cmd, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env, cwd=cwd, check=False, timeout=600)  # fmt: skip
        with lock:
            times.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=one, args=(data,)) for data in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def handoffs(home: Path) -> int:
    """The hook's handoff children (``lexmem-hook --handoff``) still running for ``home``."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        found += b"--handoff" in argv and f"LEXMEM_HOME={home}".encode() in env
    return found


def log_reasons(log: Path) -> dict[str, int]:
    """The hook log's lines by what they say."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    kinds = ("slow hook", "handed to the service", "stdin still open", "too large to check")
    out = {k: sum(k in line for line in lines) for k in kinds}
    out["other"] = len(lines) - sum(out.values())
    return out


def measure(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from diskscan import find_markers

    from lexmem.api import Lexmem
    from lexmem.cli import reader_handlers
    from lexmem.service.readers import ReaderServer
    from lexmem.service.writer import CaptureService

    hook = shutil.which("lexmem-hook", path=str(Path(sys.executable).parent))
    if hook is None:
        raise BenchError("lexmem-hook is not installed beside this Python")
    home, repo = tmp / "lexmem", tmp / "work" / "shop-api"
    (repo / ".git").mkdir(parents=True)
    env = dict(os.environ, LEXMEM_HOME=str(home))
    os.environ["LEXMEM_HOME"] = str(home)
    commands = {"hook": [hook, "claude"], "python -c pass": [sys.executable, "-c", "pass"],
                "true": ["true"]}  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    loads: list[float] = []
    lm = Lexmem.open(home)
    service = CaptureService(lm)
    service.acquire()
    try:
        with ReaderServer(lm.paths, reader_handlers(lm)):
            busy = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"
            loops = [
                subprocess.Popen(
                    [sys.executable, "-c", busy],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(opts.busy)
            ]
            try:
                for r in range(opts.rounds):
                    first = r * opts.at_once
                    payloads = [json.dumps(hook_payload(i, opts.at_once, repo)).encode()
                                for i in range(first, first + opts.at_once)]  # fmt: skip
                    for kind in KINDS:
                        times[kind] += batch(commands[kind], payloads, env, repo)
                    loads.append(os.getloadavg()[0])
            finally:
                for proc in loops:
                    proc.kill()
                for proc in loops:
                    proc.wait()
            deadline = time.monotonic() + 300  # what was handed over: written by now
            while time.monotonic() < deadline and handoffs(home):
                time.sleep(0.1)
            service.drain()
        sent = opts.rounds * opts.at_once
        events = [e for r in range(opts.rounds) for e in lm.journal.buffered(session(r))]
    finally:
        service.release()
        lm.close()
    ids = [e["event_id"] for e in events]
    contents = "\n".join(e["content"] for e in events)
    log = home / "logs" / "hook.log"
    return {
        "rounds": opts.rounds,
        "at_once": opts.at_once,
        "busy_loops": opts.busy,
        "load_average_during": round(max(loads), 1) if loads else None,
        "load_average_after": load_average(),
        "events_sent": sent,
        "events_stored": len(set(ids)),
        "events_with_content": sum(1 for i in range(sent) if marker(i) in contents),
        "events_duplicated": len(ids) - len(set(ids)),
        "secrets_on_disk": len(find_markers(home, [secret(i) for i in range(0, sent, 5)])),
        "hook_log": log_reasons(log),
        "wall_ms": {kind: percentiles(times[kind]) for kind in KINDS},
    }


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        opts = parse_args(argv)
        with bench_tempdir() as tmp:
            f = measure(opts, tmp)
        result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(), **f}
        w = f["wall_ms"]
        result["summary"] = make_summary(
            "events kept with their content under load", f["events_with_content"], "events",
            "events sent", f["events_sent"],
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        print(
            f"{NAME}: {f['events_sent']} sent, {f['events_stored']} stored, "
            f"{f['events_with_content']} with content, {f['events_duplicated']} duplicated, "
            f"{f['secrets_on_disk']} secrets on disk; per call p50/p95 ms: hook "
            f"{w['hook']['p50_ms']:.0f}/{w['hook']['p95_ms']:.0f}, python -c pass "
            f"{w['python -c pass']['p50_ms']:.0f}/{w['python -c pass']['p95_ms']:.0f}, true "
            f"{w['true']['p50_ms']:.0f}/{w['true']['p95_ms']:.0f}; load {f['load_average_during']} "
            f"on {os.cpu_count()} cores ({f['busy_loops']} busy loops)",
            flush=True,
        )
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except BenchError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
