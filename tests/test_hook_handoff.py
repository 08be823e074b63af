"""What ``lexmem-hook`` cannot check within its work budget, or cannot read whole, reaches
the service whole, and is written only once redacted.

Each case runs the real console script as an agent would; the payload is handed to its
detached child (``lexmem-hook --handoff``), which gives it to the service over the reader
socket. The service is the real reader socket with lexmem's own handlers on a real core
(in this process, so that a test can stand between the socket and the handler), or a real
``lexmem serve`` the child starts itself. Waits have hard timeouts far above normal: they
catch a hang, they measure nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultkit import wait_for

from lexmem.api import Lexmem
from lexmem.capture import hook
from lexmem.cli import reader_handlers
from lexmem.config import Paths
from lexmem.locks import service_running
from lexmem.service import intake
from lexmem.service.readers import ReaderServer
from lexmem.service.registry import services
from lexmem.service.writer import CaptureService
from lexmem.settings import CaptureSettings, Settings, save_settings

HOOK = Path(sys.executable).with_name("lexmem-hook")
SESSION = "7a1e2b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b"
TOKEN = "ghp_Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg9Fe8Dc7B"
HANG = 120.0  # a hang detector, far above normal


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "work" / "shop-api"
    (root / ".git").mkdir(parents=True)
    return root.resolve()


def payload(event: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "cwd": str(cwd), "hook_event_name": event,
            "permission_mode": "default", **fields}  # fmt: skip


def dense_prompt(tag: str) -> str:
    """A prompt with a secret in it, then text made of little but redaction candidates:
    more than the hook checks itself."""
    return f"{tag} deploy with GITHUB_TOKEN={TOKEN} please\n" + "token: " * 30_000


def inbox(home: Path) -> list[dict[str, Any]]:
    folder = home / "inbox"
    files = sorted(folder.glob("*.json")) if folder.exists() else []
    return [json.loads(p.read_text(encoding="utf-8")) for p in files]


def log(home: Path) -> str:
    file = home / "logs" / "hook.log"
    return file.read_text(encoding="utf-8") if file.exists() else ""


def no_secret_on_disk(home: Path, *secrets: str) -> None:
    for path in sorted(home.rglob("*")):
        if path.is_file() and not path.is_socket():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret[:10]}… in {path.relative_to(home)}"


def children_of(home: Path) -> list[int]:
    """The hook's handoff children still running for ``home``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if hook.HANDOFF_FLAG.encode() in argv and f"LEXMEM_HOME={home}".encode() in env:
            found.append(int(pid))
    return found


def start_hook(cwd: Path | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(HOOK), "claude"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=os.environ, cwd=cwd,
    )  # fmt: skip


def finish(proc: subprocess.Popen[bytes]) -> None:
    """The hook has returned, exit 0, silent."""
    try:
        code = proc.wait(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert (code, out, err) == (0, b"", b"")


@pytest.fixture
def reader_socket(lm: Lexmem) -> Iterator[ReaderServer]:
    """The service's reader socket with lexmem's own handlers, on a real core."""
    server = ReaderServer(lm.paths, reader_handlers(lm))
    assert server.start()
    yield server
    server.stop()


# -- reading stdin ---------------------------------------------------------------------


@pytest.mark.parametrize("pause", [0.5, hook.STDIN_IDLE_SECONDS + 1.5])
def test_a_payload_written_in_two_chunks_with_a_pause_is_captured_whole(
    pause: float, repo: Path, data_home: Path, reader_socket: ReaderServer
) -> None:
    """The pipe is kept open after the second chunk. A short pause: the hook reads on, and
    stops at the whole object. A pause past STDIN_IDLE_SECONDS: the hook returns and its
    child reads the rest; either way the prompt is captured whole, its secret redacted."""
    data = json.dumps(payload("UserPromptSubmit", repo, prompt=f"first half\nTOKEN={TOKEN}\n"
                                                               "second half")).encode()  # fmt: skip
    proc = start_hook(repo)
    assert proc.stdin is not None
    proc.stdin.write(data[:60])
    proc.stdin.flush()
    time.sleep(pause)
    try:
        proc.stdin.write(data[60:])
        proc.stdin.flush()
        finish(proc)  # the pipe still open
        wait_for(lambda: inbox(data_home), "the event", HANG)
    finally:
        proc.stdin.close()
    (event,) = inbox(data_home)
    assert event["content"] == "first half\nTOKEN=[REDACTED:github_token]\nsecond half"
    assert event["session_id"] == SESSION and event["project"] == str(repo)
    handed = "handed to the service" in log(data_home)
    assert handed == (pause > hook.STDIN_IDLE_SECONDS)
    no_secret_on_disk(data_home, TOKEN)


# -- over the work budget ----------------------------------------------------------------


def test_a_payload_of_redaction_candidates_is_handed_over_not_dropped(
    repo: Path, data_home: Path, reader_socket: ReaderServer
) -> None:
    proc = start_hook(repo)
    assert proc.stdin is not None
    proc.stdin.write(
        json.dumps(payload("UserPromptSubmit", repo, prompt=dense_prompt("p1"))).encode()
    )
    proc.stdin.close()
    finish(proc)
    wait_for(lambda: inbox(data_home) and not children_of(data_home), "the handed event", HANG)
    (event,) = inbox(data_home)
    assert event["event_type"] == "prompt" and event["session_id"] == SESSION
    assert "dropped" not in event["metadata"]
    # the budget is the hook's alone: the service checks all of it
    assert event["content"].startswith("p1 deploy with GITHUB_TOKEN=[REDACTED:github_token]")
    assert "handed to the service" in log(data_home)
    assert "lost" not in log(data_home)
    no_secret_on_disk(data_home, TOKEN)


def test_with_no_service_the_child_starts_one_and_hands_over(
    repo: Path, data_home: Path, embedder: Any
) -> None:
    """No service runs: the hook returns at once, its child starts `lexmem serve`, waits for
    its socket and hands the payload over; the service stores it."""
    proc = start_hook(repo)
    assert proc.stdin is not None
    proc.stdin.write(
        json.dumps(payload("UserPromptSubmit", repo, prompt=dense_prompt("p2"))).encode()
    )
    proc.stdin.close()
    try:
        finish(proc)
        wait_for(lambda: service_running(Paths(data_home)), "the service the child starts", HANG)
        wait_for(lambda: not children_of(data_home), "the child to hand over", HANG)
        wait_for(lambda: not inbox(data_home), "the service to take the event in", HANG)
    finally:
        for s in services():
            if s.home == data_home:
                os.kill(s.pid, 15)
        wait_for(lambda: not service_running(Paths(data_home)), "the service to stop", HANG)
    core = Lexmem.open(data_home, embedder=embedder)
    try:
        (event,) = core.journal.buffered(SESSION)
    finally:
        core.close()
    assert event["event_type"] == "prompt" and "dropped" not in event["metadata"]
    assert "handed to the service" in log(data_home) and "lost" not in log(data_home)
    no_secret_on_disk(data_home, TOKEN)


def test_a_service_killed_mid_handoff_is_asked_again_and_stores_the_event_once(
    repo: Path, data_home: Path, lm: Lexmem
) -> None:
    """The first service writes the events and goes away before it answers; the child asks
    again, and the second answer's events carry the same ids: stored once."""
    calls: list[int] = []
    handlers = reader_handlers(lm)
    real = handlers["event"]

    class Gone:
        """A connection whose service died before its answer went out."""

        def __init__(self, conn: Any) -> None:
            self.conn = conn

        def settimeout(self, value: Any) -> None:
            self.conn.settimeout(value)

        def sendall(self, data: bytes) -> None:
            raise BrokenPipeError("the service went away")

    def dies_once(request: dict[str, Any], conn: Any, stream: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            try:
                real(request, Gone(conn), stream)
            except BrokenPipeError:
                return  # the connection closes unanswered
        real(request, conn, stream)

    handlers["event"] = dies_once
    with ReaderServer(lm.paths, handlers):
        proc = start_hook(repo)
        assert proc.stdin is not None
        proc.stdin.write(
            json.dumps(payload("UserPromptSubmit", repo, prompt=dense_prompt("p3"))).encode()
        )
        proc.stdin.close()
        finish(proc)
        wait_for(
            lambda: not children_of(data_home) and len(calls) >= 2, "the second delivery", HANG
        )
    assert len(calls) == 2
    written = inbox(data_home)
    assert len(written) == 2 and written[0]["event_id"] == written[1]["event_id"]
    service = CaptureService(lm)
    service.acquire()
    try:
        service.drain()
    finally:
        service.release()
    assert [e["event_id"] for e in lm.journal.buffered(SESSION)] == [written[0]["event_id"]]
    assert "lost" not in log(data_home)
    no_secret_on_disk(data_home, TOKEN)


# -- the intake, as the MCP tool hook calls it --------------------------------------------


def test_accept_captures_as_the_hook_does_and_honours_opt_out_and_pause(
    repo: Path, data_home: Path, lm: Lexmem, tmp_path: Path
) -> None:
    sent = payload("PostToolUse", repo, tool_name="Bash", tool_input={"command": "env"},
                   tool_response={"stdout": f"GITHUB_TOKEN={TOKEN}\nDEBUG=1", "stderr": ""})  # fmt: skip
    first = intake.accept(lm, "claude", sent, event_id="0b8a5d1e-2f3c-4a5b-8c6d-7e8f9a0b1c2d",
                          timestamp="2026-01-02T03:04:05+00:00")  # fmt: skip
    again = intake.accept(lm, "claude", sent, event_id="0b8a5d1e-2f3c-4a5b-8c6d-7e8f9a0b1c2d",
                          timestamp="2026-01-02T03:04:05+00:00")  # fmt: skip
    assert first == again == ["0b8a5d1e-2f3c-4a5b-8c6d-7e8f9a0b1c2d"]
    assert hook.run(["claude"], stdin=json.dumps(sent).encode()) == 0
    by_hook, *same = sorted(inbox(data_home), key=lambda e: e["event_id"] in first)
    assert all(e["event_id"] == first[0] for e in same) and len(same) == 2
    keep = ("event_type", "session_id", "project", "cwd", "content", "metadata", "agent")
    assert {k: by_hook[k] for k in keep} == {k: same[0][k] for k in keep}
    assert same[0]["content"] == "GITHUB_TOKEN=[REDACTED:github_token]\nDEBUG=1"
    # a payload that names no folder takes the caller's
    bare = {"session_id": SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "where?"}
    (ident,) = intake.accept(lm, "claude", bare, str(repo))
    (where,) = [e for e in inbox(data_home) if e["event_id"] == ident]
    assert (where["cwd"], where["project"]) == (str(repo), str(repo))
    # an opted-out repository: nothing; paused capture: nothing
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    (other / ".lexmem-optout").touch()
    assert intake.accept(lm, "claude", payload("UserPromptSubmit", other, prompt="hi")) == []
    save_settings(lm.paths, Settings(capture=CaptureSettings(paused_until="2999-01-01T00:00:00Z")))
    assert intake.accept(lm, "claude", payload("UserPromptSubmit", repo, prompt="hi")) == []
    assert len(inbox(data_home)) == 4
    no_secret_on_disk(data_home, TOKEN)
