"""``lexmem-hook ADAPTER --background``: a call the agent does not wait for (Claude Code's
``async`` hooks, SessionStart's and SessionEnd's background commands) goes to the warm
service whole, with next to nothing imported; with no service to take it, the hook
records it itself, the same event under the same id. Nothing is lost, nothing is written
unredacted, an opted-out repository leaves no trace.

Each case runs the real console script as an agent would, against the real reader socket
with lexmem's own handlers on a real core (in this process, so that a test can see what
the service was sent). Waits have hard timeouts far above normal: they catch a hang,
they measure nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

# The handed-over payload's tests: the same repository, inbox and disk check.
import test_hook_handoff as handoff
from faultkit import wait_for
from test_hook_handoff import inbox, no_secret_on_disk

from lexmem import wire
from lexmem.api import Lexmem
from lexmem.capture import entry, hook
from lexmem.cli import reader_handlers
from lexmem.service.readers import ReaderServer

repo = handoff.repo  # the fixture: a repository's root, with its .git folder
HOOK = Path(sys.executable).with_name("lexmem-hook")
SESSION = "5b2c3d4e-5f60-4a71-8b92-a3b4c5d6e7f8"
TOKEN = "ghp_Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7B"
HANG = 120.0  # a hang detector, far above normal
# What a background call that the service takes may import of lexmem's: where the data
# folder is, the event's id and time, the socket's wire. Not the hook's machinery.
HANDED_OVER = {
    "lexmem", "lexmem.capture", "lexmem.capture.entry", "lexmem.capture.stamps",
    "lexmem.capture.payload", "lexmem.places", "lexmem.wire", "lexmem.version",
}  # fmt: skip


@pytest.fixture
def asked(lm: Lexmem) -> Iterator[list[dict[str, Any]]]:
    """The service's reader socket, the ``event`` requests it was sent."""
    requests: list[dict[str, Any]] = []
    handlers = reader_handlers(lm)
    real = handlers["event"]

    def event(request: dict[str, Any], conn: Any, stream: Any) -> None:
        requests.append(request)
        real(request, conn, stream)

    handlers["event"] = event
    with ReaderServer(lm.paths, handlers):
        yield requests


def tool_result(cwd: Path, output: str) -> bytes:
    return json.dumps({
        "session_id": SESSION, "cwd": str(cwd), "hook_event_name": "PostToolUse",
        "permission_mode": "default", "tool_name": "Bash", "tool_use_id": "toolu_01",
        "tool_input": {"command": "./deploy.sh"}, "tool_response": {"stdout": output},
    }).encode()  # fmt: skip


def call(cwd: Path, data: bytes, *flags: str, importtime: bool = False) -> str:
    """Run ``lexmem-hook claude FLAGS`` with ``data`` on stdin, as the agent does: it
    exits 0 and prints nothing; what it said on stderr (``-X importtime``) is returned."""
    argv = [str(HOOK), "claude", *flags]
    if importtime:
        argv = [sys.executable, "-X", "importtime", *argv]
    done = subprocess.run(argv, check=False, input=data, capture_output=True, cwd=cwd, timeout=HANG)
    assert (done.returncode, done.stdout) == (0, b"")
    return done.stderr.decode()


def imported(importtime: str) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^import time:.*\|\s*(\S+)\s*$",
                                                    importtime, re.M)}  # fmt: skip


def test_a_background_call_goes_to_the_service_whole_with_the_hooks_machinery_unloaded(
    repo: Path, data_home: Path, asked: list[dict[str, Any]]
) -> None:
    said = call(repo, tool_result(repo, f"deployed with GITHUB_TOKEN={TOKEN}"), "--background",
                importtime=True)  # fmt: skip
    assert [r["adapter"] for r in asked] == ["claude"]
    (event,) = inbox(data_home)
    assert event["event_id"] == asked[0]["event_id"] and event["session_id"] == SESSION
    assert event["event_type"] == "tool_result" and event["project"] == str(repo)
    assert "GITHUB_TOKEN=[REDACTED:github_token]" in event["content"]
    no_secret_on_disk(data_home, TOKEN)
    modules = imported(said)
    assert {m for m in modules if m.split(".")[0] == "lexmem"} <= HANDED_OVER
    # (pathlib aside: the development install's import finder loads it in every process)
    assert not modules & {"lexmem.capture.hook", "lexmem.capture.redact", "subprocess"}


def test_the_agents_time_of_the_call_is_the_events(
    repo: Path, data_home: Path, asked: list[dict[str, Any]]
) -> None:
    """Stamped with when the agent started the process, as the hook stamps its events: a
    call that reaches the service late keeps its place in the session."""
    before = time.time()
    call(repo, tool_result(repo, "ok"), "--background")
    after = time.time()
    (event,) = inbox(data_home)
    assert event["timestamp"] == asked[0]["timestamp"]
    when = datetime.fromisoformat(event["timestamp"]).timestamp()
    assert before - 0.02 <= when <= after  # the process's start, to the clock tick


def test_an_opted_out_repository_leaves_no_trace_through_the_service(
    repo: Path, data_home: Path, asked: list[dict[str, Any]]
) -> None:
    (repo / ".lexmem-optout").write_text("")
    call(repo, tool_result(repo, f"secret plans, GITHUB_TOKEN={TOKEN}"), "--background")
    assert len(asked) == 1  # the service was given it, and decided
    assert inbox(data_home) == []
    no_secret_on_disk(data_home, TOKEN, "secret plans")


def test_with_no_service_the_hook_records_a_background_call_itself(
    repo: Path, data_home: Path
) -> None:
    data_home.mkdir(parents=True, exist_ok=True)
    call(repo, tool_result(repo, f"deployed with GITHUB_TOKEN={TOKEN}"), "--background")
    (event,) = inbox(data_home)
    assert event["event_type"] == "tool_result" and event["session_id"] == SESSION
    assert "GITHUB_TOKEN=[REDACTED:github_token]" in event["content"]
    no_secret_on_disk(data_home, TOKEN)


def test_a_service_that_does_not_take_it_leaves_it_to_the_hook_under_the_same_id(
    repo: Path, data_home: Path, lm: Lexmem
) -> None:
    """A service too old for ``event`` requests (it answers an error): the hook records
    the very bytes it read, under the event id it sent, so a service that did write them
    stores nothing twice."""
    sent: list[dict[str, Any]] = []
    handlers = reader_handlers(lm)

    def refuses(request: dict[str, Any], conn: Any, stream: Any) -> None:
        sent.append(request)
        stream.read(request["size"])
        wire.send_json(conn, {"error": "no such request: 'event'"})

    handlers["event"] = refuses
    with ReaderServer(lm.paths, handlers):
        call(repo, tool_result(repo, f"deployed with GITHUB_TOKEN={TOKEN}"), "--background")
    (event,) = inbox(data_home)
    assert [r["event_id"] for r in sent] == [event["event_id"]]
    assert event["timestamp"] == sent[0]["timestamp"]
    assert "GITHUB_TOKEN=[REDACTED:github_token]" in event["content"]
    no_secret_on_disk(data_home, TOKEN)


def test_a_pipe_held_open_mid_document_is_read_to_the_end_all_the_same(
    repo: Path, data_home: Path, asked: list[dict[str, Any]]
) -> None:
    data = tool_result(repo, f"first half\nGITHUB_TOKEN={TOKEN}\nsecond half")
    proc = subprocess.Popen([str(HOOK), "claude", "--background"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=repo)  # fmt: skip
    assert proc.stdin is not None
    try:
        proc.stdin.write(data[:60])
        proc.stdin.flush()
        time.sleep(entry.STDIN_IDLE_SECONDS + 1.0)
        proc.stdin.write(data[60:])
        proc.stdin.flush()
        assert proc.wait(timeout=HANG) == 0
        wait_for(lambda: inbox(data_home), "the event", HANG)
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
    (event,) = inbox(data_home)
    assert "first half" in event["content"] and "second half" in event["content"]
    assert "GITHUB_TOKEN=[REDACTED:github_token]" in event["content"]
    no_secret_on_disk(data_home, TOKEN)


def test_without_the_flag_the_hook_does_its_own_work(
    repo: Path, data_home: Path, asked: list[dict[str, Any]]
) -> None:
    """A call the agent waits for is the hook's, service or not (it is quicker than a
    round trip to a service that may be busy)."""
    call(repo, tool_result(repo, "ok"))
    assert asked == []
    assert len(inbox(data_home)) == 1


def test_the_entrys_constants_are_the_hooks() -> None:
    assert entry.ADAPTERS == hook.ADAPTERS
    assert entry.MAX_INPUT_BYTES == hook.MAX_INPUT_BYTES
    assert entry.STDIN_IDLE_SECONDS == hook.STDIN_IDLE_SECONDS
    assert entry.HANDOFF_WAIT_SECONDS == hook.HANDOFF_WAIT_SECONDS
    assert os.path.basename(str(HOOK)) == "lexmem-hook"
