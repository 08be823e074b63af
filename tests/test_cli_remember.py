"""``lexmem remember`` as a person runs it: the real CLI as a subprocess, interrupted
with a real SIGINT at several moments, with and without a real ``lexmem serve``.

- Ctrl-C before the text is handed over keeps nothing; after, while this process is the
  writer, the event is withdrawn and nothing is kept; once a running service has it,
  the message says the id it will still be stored as (and it is).
- With a service running, ``remember`` answers with the memory's id (it waits for the
  service's work, however long the text takes), in text and in JSON; ``show`` finds it.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from faultkit import environment, wait_for
from test_readers import serving

from lexmem.capture.inbox import derived_id

MODULE = [sys.executable, "-m", "lexmem"]
WORDS = ["orders", "deploy", "database", "migration", "staging", "sequence", "role", "grant", "invoice", "ledger", "service", "queue", "retry", "backoff", "cache", "shard", "replica", "index", "vacuum"]  # fmt: skip


def long_text(n_bytes: int, seed: int) -> bytes:
    """Text long enough to become many linked chunks (the model's work takes a while)."""
    rng = random.Random(seed)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < n_bytes:
        words.append(rng.choice(WORDS))
    return " ".join(words).encode()


def lexmem(home: Path, *args: str, stdin: bytes = b"", code: int = 0) -> subprocess.CompletedProcess[str]:  # fmt: skip
    done = subprocess.run(
        [*MODULE, *args], input=stdin.decode(), capture_output=True, text=True,
        env=environment(home), timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


def stored(home: Path) -> list[dict[str, Any]]:
    listed = json.loads(lexmem(home, "list", "--json", "--limit", "1000").stdout)
    assert isinstance(listed, list)
    return listed


def inbox_events(home: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(home / "inbox") if n.endswith(".json") and n[0] != ".")
    except FileNotFoundError:
        return []


def start_remember(home: Path) -> subprocess.Popen[bytes]:
    """``lexmem remember -`` reading a pipe this test writes (and holds open)."""
    return subprocess.Popen(
        [*MODULE, "remember", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=environment(home),
    )  # fmt: skip


def reading_stdin(pid: int) -> bool:
    """The process is blocked in read(2) on its standard input (Linux's /proc)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == 0


def interrupt(proc: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    if proc.stdin is not None and proc.stdin.closed:
        proc.stdin = None  # all of it was written already
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out.decode(), err.decode()


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/syscall").exists(), reason="reads /proc/PID/syscall (Linux)"
)


@needs_proc
@pytest.mark.parametrize("service", [False, True], ids=["no service", "a service"])
def test_ctrl_c_before_the_text_is_handed_over_keeps_nothing(tmp_path: Path, service: bool) -> None:
    home = tmp_path / "lexmem"
    lexmem(home, "remember", "The shop deploys on Tuesdays.")

    def run() -> None:
        proc = start_remember(home)
        assert proc.stdin is not None
        proc.stdin.write(b"Half a text, never finished")
        proc.stdin.flush()  # the pipe stays open: the command is still reading it
        wait_for(lambda: reading_stdin(proc.pid) or proc.poll() is not None, "a read of stdin")
        code, out, err = interrupt(proc)
        assert (code, out, err) == (130, "", "lexmem: interrupted: nothing was kept\n")

    if service:
        with serving(home):
            run()
    else:
        run()
    assert inbox_events(home) == []
    assert [m["content"] for m in stored(home)] == ["The shop deploys on Tuesdays."]


def test_ctrl_c_while_this_process_stores_it_withdraws_the_event(tmp_path: Path) -> None:
    """No service: the command is the writer, busy with a long text, when SIGINT comes."""
    home = tmp_path / "lexmem"
    lexmem(home, "remember", "The shop deploys on Tuesdays.")
    proc = start_remember(home)
    assert proc.stdin is not None
    proc.stdin.write(long_text(100_000, seed=1))
    proc.stdin.close()
    wait_for(lambda: inbox_events(home) or proc.poll() is not None, "the event in the inbox")
    code, out, err = interrupt(proc)
    assert (code, out, err) == (130, "", "lexmem: interrupted: nothing was kept\n")
    assert inbox_events(home) == []
    # A later, unrelated remember stores its own text, and nothing of the interrupted one.
    lexmem(home, "remember", "Invoices go out on the first of the month.")
    assert sorted(m["content"] for m in stored(home)) == [
        "Invoices go out on the first of the month.", "The shop deploys on Tuesdays.",
    ]  # fmt: skip


def test_with_a_service_remember_answers_with_the_memory_id_and_ctrl_c_says_which_it_will_be(
    tmp_path: Path,
) -> None:
    home = tmp_path / "lexmem"
    lexmem(home, "remember", "The shop deploys on Tuesdays.")
    with serving(home):
        # A long text: the service takes its time, and the command waits for it.
        said = lexmem(home, "remember", "-", stdin=long_text(100_000, seed=2)).stdout
        found = re.fullmatch(r"Remembered ([0-9a-f]{8}) as \w+ \(.*\) in (\d+) chunks: .*\n", said)
        assert found, said
        shown = json.loads(lexmem(home, "show", found.group(1), "--json").stdout)
        assert shown["chunk"]["total_chunks"] == int(found.group(2)) > 1
        answer = json.loads(
            lexmem(home, "remember", "--json", "-", stdin=long_text(30_000, seed=3)).stdout
        )
        assert answer["queued"] is False and len(answer["ids"]) > 1
        assert json.loads(lexmem(home, "show", answer["ids"][0], "--json").stdout)
        # --no-wait: handed over, answered at once with the id it will have, then stored
        handed = json.loads(
            lexmem(home, "remember", "--no-wait", "--json", "The shop closes at six.").stdout
        )
        assert (
            handed["queued"] is True and handed["reason"] == "handed to the running lexmem service"
        )
        wait_for(
            lambda: subprocess.run([*MODULE, "show", handed["id"][:8]], env=environment(home),
                                   capture_output=True, check=False).returncode == 0,
            "the handed-over memory stored by the service", timeout=600,
        )  # fmt: skip

        # Ctrl-C once the service has the event: it says which memory it will be.
        proc = start_remember(home)
        assert proc.stdin is not None
        proc.stdin.write(long_text(30_000, seed=4))
        proc.stdin.close()
        wait_for(lambda: inbox_events(home) or proc.poll() is not None, "the event in the inbox")
        event_id = inbox_events(home)[0][21:-5] if inbox_events(home) else ""
        code, out, err = interrupt(proc)
        mid = derived_id("explicit", event_id)
        assert (code, out) == (130, ""), err
        assert err in (
            "lexmem: interrupted: the running lexmem service has it and will still store it "
            f"as {mid} (lexmem show {mid[:8]})\n",
            f"lexmem: interrupted: it was already stored as {mid} (lexmem show {mid[:8]})\n",
        ), err
        wait_for(
            lambda: subprocess.run([*MODULE, "show", mid[:8]], env=environment(home),
                                   capture_output=True, check=False).returncode == 0,
            "the interrupted memory stored by the service", timeout=600,
        )  # fmt: skip


def test_ctrl_c_while_this_process_applies_a_change_withdraws_it(tmp_path: Path) -> None:
    """No service: ``supersede --with -`` of a long text, interrupted while the command
    applies it; the old memory stays as it was, and nothing waits in the inbox."""
    home = tmp_path / "lexmem"
    old = json.loads(lexmem(home, "remember", "--json", "The shop deploys on Tuesdays.").stdout)
    proc = subprocess.Popen(
        [*MODULE, "supersede", old["ids"][0][:8], "--with", "-"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(home),
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(long_text(100_000, seed=5))
    proc.stdin.close()
    wait_for(lambda: inbox_events(home) or proc.poll() is not None, "the event in the inbox")
    code, out, err = interrupt(proc)
    assert (code, out, err) == (130, "", "lexmem: interrupted: nothing was changed\n"), err
    assert inbox_events(home) == []
    lexmem(home, "remember", "Invoices go out on the first of the month.")
    assert sorted((m["content"], m["status"]) for m in stored(home)) == [
        ("Invoices go out on the first of the month.", "active"),
        ("The shop deploys on Tuesdays.", "active"),
    ]
