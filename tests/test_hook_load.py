"""A busy machine loses no memory: 1,000 hook calls, 50 at a time, on saturated cores.

Twenty rounds of fifty real ``lexmem-hook claude`` processes, started at once and then
each given a realistic Claude Code payload (a prompt, a tool call's result, some with a
secret), while thirty
busy loops keep every core saturated (started by the test, always killed, and each ends
by itself after a few minutes whatever happens). Then a real service drains the inbox.
All 1,000 events must be stored with their content, none twice, and no secret anywhere
in the data folder (every file, every table version decoded: tests/diskscan.py).

Nothing here times the hook: on a busy machine it is slower, and that is all. The
timeouts only catch a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from diskscan import assert_nowhere

from lexmem.api import Lexmem
from lexmem.cli import reader_handlers
from lexmem.service.readers import ReaderServer
from lexmem.service.writer import CaptureService

HOOK = Path(sys.executable).with_name("lexmem-hook")
ROUNDS, AT_ONCE, BUSY = 20, 50, 30
HANG = 300.0  # a hang detector for a whole round on a saturated machine


def session(round_: int) -> str:
    return f"5a0d0000-0000-4000-8000-{round_:012d}"


def secret(i: int) -> str:
    return f"zqxs{i:04d}k9q"  # one token to the full-text index, as diskscan wants


def marker(i: int) -> str:
    return f"evmark{i:04d}q"


def hook_payload(i: int, repo: Path) -> dict[str, Any]:
    """The i-th call: mostly short prompts and tool results, as an agent sends them; every
    fifth carries a secret (an env file printed, a token in a prompt)."""
    base = {"session_id": session(i // AT_ONCE), "cwd": str(repo),
            "transcript_path": str(repo / ".claude" / "t.jsonl"), "permission_mode": "default"}  # fmt: skip
    leak = i % 5 == 0
    if i % 2 == 0:
        prompt = f"fix the failing test {marker(i)} please"  # ~45 bytes, as agents send
        if leak:
            prompt += f"\nuse DB_PASSWORD={secret(i)} for the staging db"
        return {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    lines = "".join(f"tests/test_{n}.py::test_case_{n} PASSED\n" for n in range(i % 40 * 5))
    stdout = f"{marker(i)}\n{lines}" + (f"export API_KEY={secret(i)}\n" if leak else "")
    return {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_use_id": f"toolu_{i:06d}", "tool_input": {"command": "pytest -q"},
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False}}  # fmt: skip


def run_round(round_: int, repo: Path) -> None:
    """Fifty hooks started at once, then given their payloads: on a saturated machine the
    agent, a process like any other, may write its payload a while after the hook began."""
    calls = range(round_ * AT_ONCE, (round_ + 1) * AT_ONCE)
    procs = [
        subprocess.Popen(
            [str(HOOK), "claude"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=os.environ,
            cwd=repo,
        )
        for _ in calls
    ]
    for i, proc in zip(calls, procs, strict=True):
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(hook_payload(i, repo)).encode())
            proc.stdin.close()
        except BrokenPipeError:  # the hook stopped waiting for it: the payload is lost
            with contextlib.suppress(OSError):
                proc.stdin.close()
    for proc in procs:
        try:
            assert proc.wait(timeout=HANG) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.stderr is not None
        assert proc.stderr.read() == b""
        proc.stderr.close()


@pytest.mark.slow
def test_a_thousand_hook_calls_on_a_saturated_machine_are_all_kept(
    tmp_path: Path, data_home: Path, lm: Lexmem
) -> None:
    repo = tmp_path / "work" / "shop-api"
    (repo / ".git").mkdir(parents=True)
    repo = repo.resolve()
    service = CaptureService(lm)
    service.acquire()
    # The service's reader socket, as `lexmem serve` has it: what a hook hands over.
    with ReaderServer(lm.paths, reader_handlers(lm)):
        try:
            loops = _busy_loops()
            started, load = time.monotonic(), 0.0
            try:
                for round_ in range(ROUNDS):
                    run_round(round_, repo)
                    load = max(load, os.getloadavg()[0])
            finally:
                _stop(loops)
            ran = time.monotonic() - started
            service.drain()
            print(f"\nload average up to {load:.1f} on {os.cpu_count()} cores; hooks {ran:.0f}s, "
                  f"drain {time.monotonic() - started - ran:.0f}s")  # fmt: skip
        finally:
            service.release()
    events = [e for r in range(ROUNDS) for e in lm.journal.buffered(session(r))]
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids)), "an event stored twice"
    contents = "\n".join(e["content"] for e in events)
    missing = [i for i in range(ROUNDS * AT_ONCE) if marker(i) not in contents]
    log = data_home / "logs" / "hook.log"
    said = log.read_text(encoding="utf-8") if log.exists() else ""
    why = {k: said.count(k) for k in ("stdin still open", "too large to check", "handed to")}
    print(f"hook.log: {why}, {said.count('slow hook')} slow hook lines")
    assert not missing, f"{len(missing)} of {ROUNDS * AT_ONCE} lost their content; log: {why}"
    assert len(events) == ROUNDS * AT_ONCE
    assert_nowhere(data_home, [secret(i) for i in range(0, ROUNDS * AT_ONCE, 5)])


BUSY_LOOP = "import time\nend = time.monotonic() + 240\nwhile time.monotonic() < end:\n    pass\n"


def _busy_loops() -> list[subprocess.Popen[bytes]]:
    """Busy loops saturating every core while the hooks run: stopped at the end, and
    each stops by itself after four minutes should the test die before it can."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", BUSY_LOOP],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(BUSY)
    ]


def _stop(loops: list[subprocess.Popen[bytes]]) -> None:
    for proc in loops:
        proc.kill()
    for proc in loops:
        proc.wait()
