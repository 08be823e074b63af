"""``lexmem-hook`` can never hang or stall the agent, and never writes what it could not check.

Each case drives the real console script as an agent would, with input meant to hold it:
a transcript that is a FIFO or ``/dev/zero``, a 50 MB transcript, a stdin that never
closes or never ends, 10 MB of stdin, JSON nested as deep as the parser goes, and text
the redaction rules are slow on. Each must end with exit 0 well inside a hard timeout
(far above the hook's own budget, since the machine running the tests may be loaded; the
timeout only catches a hang), leave no planted secret in any file, and say so when it
dropped what it could not check in time.

The budget itself is tested in-process (``hook.run``, what ``lexmem-hook`` calls) with a
deliberately slow redaction function: the real rules are meant to be fast on every
input, so only a stand-in can show that the budget holds when they are not.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lexmem.capture import hook
from lexmem.capture import redact as redact_module
from lexmem.locks import FileLock
from lexmem.service.writer import CaptureService

HOOK = Path(sys.executable).with_name("lexmem-hook")
SESSION = "5d0c9a7e-1b4d-4e6f-9a0c-5d7e8f9a1b2c"
# A hang detector, not a timing assertion: the hook's budget is HOOK_BUDGET_SECONDS.
HARD_TIMEOUT = 5.0
TOKEN = "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8s9"
PASSWORD = "p4ssw0rdXy77"
ADVERSARIAL = f"GITHUB_TOKEN={TOKEN} " + "key=" * 200_000


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "work" / "shop-api"
    (root / ".git").mkdir(parents=True)
    return root.resolve()


def payload(event: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "cwd": str(cwd), "hook_event_name": event,
            "permission_mode": "default", **fields}  # fmt: skip


def run_hook(
    data: bytes, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [str(HOOK), "claude"],
        check=False,
        input=data,
        capture_output=True,
        env=os.environ,
        cwd=cwd,
        timeout=HARD_TIMEOUT,
    )
    return proc, time.monotonic() - started


def ok(proc: subprocess.CompletedProcess[bytes]) -> None:
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def events(home: Path) -> list[dict[str, Any]]:
    folder = home / "inbox"
    files = sorted(folder.glob("*.json")) if folder.exists() else []
    return [json.loads(p.read_text(encoding="utf-8")) for p in files]


def log(home: Path) -> str:
    file = home / "logs" / "hook.log"
    return file.read_text(encoding="utf-8") if file.exists() else ""


def assert_nothing_unredacted(home: Path, *secrets: str) -> None:
    for path in sorted(home.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret[:10]}… in {path.relative_to(home)}"


def assert_redacted_or_dropped(event: dict[str, Any], start: str) -> None:
    """The rules either finished in time (the text is kept, redacted) or did not (nothing
    of it is kept, and the event says why)."""
    if event["metadata"].get("dropped"):
        assert event["metadata"]["dropped"] == "too large to check"
        assert event["content"] == ""
    else:
        assert event["content"].startswith(start)


def assistant_line(text: str) -> str:
    message = {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": text}]}
    return json.dumps({"type": "assistant", "message": message}) + "\n"


# -- transcripts ----------------------------------------------------------------------------


@pytest.fixture
def special(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    kind = request.param
    if kind == "/dev/zero":
        yield "/dev/zero"
        return
    fifo = tmp_path / "transcript.fifo"
    os.mkfifo(fifo)  # nobody ever writes to it: opening it to read would wait for ever
    if kind == "fifo":
        yield str(fifo)
    else:
        link = tmp_path / "transcript.jsonl"
        link.symlink_to(fifo)
        yield str(link)


@pytest.mark.parametrize("special", ["fifo", "link to a fifo", "/dev/zero"], indirect=True)
def test_a_transcript_that_is_not_a_regular_file_is_not_read(
    special: str, repo: Path, data_home: Path
) -> None:
    stop = payload("Stop", repo, transcript_path=special, stop_hook_active=False)
    proc, _ = run_hook(json.dumps(stop).encode(), cwd=repo)
    ok(proc)
    assert events(data_home) == []  # no answer to be had from it: nothing captured
    # Nor is a folder or a socket (opening those fails outright, so no test of them could
    # fail before the check on the open descriptor; they are listed for what is skipped).
    folder = repo / "a-folder"
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    sock = repo.parent / "t.sock"
    server.bind(str(sock))
    try:
        for path in (folder, sock):
            assert hook.last_assistant_message(str(path)) == ""
    finally:
        server.close()


def test_a_50_mb_transcript_is_read_from_its_tail_within_the_budget(
    repo: Path, data_home: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "big.jsonl"
    filler = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "x" * 1000}]}}) + "\n"  # fmt: skip
    with transcript.open("w", encoding="utf-8") as fh:
        fh.write(filler * (50 * 1024 * 1024 // len(filler)))
        fh.write(assistant_line(ADVERSARIAL))  # the answer: a secret, then slow text
    assert transcript.stat().st_size > 50 * 1024 * 1024
    stop = payload("Stop", repo, transcript_path=str(transcript), stop_hook_active=False)
    proc, elapsed = run_hook(json.dumps(stop).encode(), cwd=repo)
    ok(proc)
    print(f"\n50 MB transcript: {elapsed:.2f}s")
    (event,) = events(data_home)
    assert event["event_type"] == "response"
    assert_redacted_or_dropped(event, "GITHUB_TOKEN=")
    assert_nothing_unredacted(data_home, TOKEN)


# -- stdin ----------------------------------------------------------------------------------


def test_a_stdin_that_never_closes_or_never_ends_returns_in_time(
    repo: Path, data_home: Path
) -> None:
    """The whole payload written and the pipe held open; then a writer that never stops.

    The hard timeout here is below the 3 s the hook used to wait for stdin."""
    whole = json.dumps(payload("UserPromptSubmit", repo, prompt="hello")).encode()
    limit = hook.HOOK_BUDGET_SECONDS + 2.0
    for endless in (False, True):
        proc = subprocess.Popen(
            [str(HOOK), "claude"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ,
            cwd=repo,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stop = threading.Event()

        def write(pipe: Any = proc.stdin, endless: bool = endless, stop: Any = stop) -> None:
            try:
                pipe.write(whole)
                pipe.flush()
                while endless and not stop.is_set():
                    pipe.write(b" " * 65536)  # never ends
            except (BrokenPipeError, ValueError, OSError):
                return

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        started = time.monotonic()
        try:
            code = proc.wait(timeout=limit)
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            writer.join(5)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    out = pipe.read() if pipe is not proc.stdin else b""
                    assert out == b""
                finally:
                    with contextlib.suppress(OSError):
                        pipe.close()
        print(f"\n{'endless' if endless else 'held open'}: {time.monotonic() - started:.2f}s")
        assert code == 0
    assert events(data_home) == []
    lines = log(data_home).splitlines()
    assert len(lines) == 2
    assert "stdin still open" in lines[0]
    assert "larger than" in lines[1]


def edit_payloads(repo: Path, env: str) -> list[dict[str, Any]]:
    """Claude Code's file tools as their PostToolUse hooks receive them."""
    path = str(repo / ".env")
    patch = [{"oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2,
              "lines": [f"-{line}" for line in env.splitlines()]
              + [f"+{line}" for line in env.splitlines()]}]  # fmt: skip
    edit = {"file_path": path, "old_string": env, "new_string": env, "replace_all": False}
    return [
        payload("PostToolUse", repo, tool_name="Edit", tool_input=edit, tool_response={
            "filePath": path, "oldString": env, "newString": env, "originalFile": env,
            "structuredPatch": patch, "userModified": False, "replaceAll": False}),
        payload("PostToolUse", repo, tool_name="MultiEdit", tool_input={
            "file_path": path, "edits": [{"old_string": env, "new_string": env}]},
            tool_response={"filePath": path, "edits": [{"old_string": env, "new_string": env}],
                           "originalFileContents": env, "structuredPatch": patch}),
        payload("PostToolUse", repo, tool_name="Write", tool_input={"file_path": path, "content": env},
                tool_response={"type": "update", "filePath": path, "content": env,
                               "structuredPatch": patch}),
        payload("PostToolUse", repo, tool_name="NotebookEdit", tool_input={
            "notebook_path": str(repo / "n.ipynb"), "cell_id": "c1", "new_source": env,
            "edit_mode": "replace"}, tool_response={"new_source": env, "cell_id": "c1",
            "cell_type": "code", "language": "python", "edit_mode": "replace"}),
    ]  # fmt: skip


def test_file_tools_are_redacted_field_by_field_and_keep_the_lines_around_a_secret(
    repo: Path, data_home: Path
) -> None:
    """Edit / MultiEdit / Write / NotebookEdit: inputs and structured responses.

    Redacting the JSON text of a response instead lets a value run on over the escaped
    newline and swallow the next line (or, with other rules, leak); field by field, the
    newline stays the boundary it is."""
    env = f"DB_PASSWORD={PASSWORD}\nDEBUG=1\n"
    for sent in edit_payloads(repo, env):
        proc, _ = run_hook(json.dumps(sent).encode(), cwd=repo)
        ok(proc)
    edit, multi, write, notebook = events(data_home)
    assert_nothing_unredacted(data_home, PASSWORD)
    original = json.loads(edit["content"])["originalFile"]
    assert original.startswith("DB_PASSWORD=[REDACTED") and original.endswith("\nDEBUG=1\n")
    assert edit["metadata"]["tool_input"]["old_string"].endswith("\nDEBUG=1\n")
    lines = json.loads(edit["content"])["structuredPatch"][0]["lines"]
    assert len(lines) == 4 and lines[1] == "-DEBUG=1" and lines[3] == "+DEBUG=1"
    assert json.loads(multi["content"])["originalFileContents"].endswith("\nDEBUG=1\n")
    assert write["content"].endswith("\nDEBUG=1\n")  # Write's response has a text field
    assert notebook["metadata"]["tool_input"]["new_source"].endswith("\nDEBUG=1\n")
    assert all(e["metadata"].get("redactions", 0) > 0 for e in (edit, multi, write, notebook))


def test_10_mb_of_stdin_is_captured_clipped_and_redacted_in_time(
    repo: Path, data_home: Path
) -> None:
    env = f"DB_PASSWORD={PASSWORD}\nDEBUG=1\n"
    # ~1 MB of file, which the payload holds ten times over (old, new, original, patch)
    big = env + "".join(f"LINE_{i}=value {i}\n" for i in range(65_000))
    (edit, *_rest) = edit_payloads(repo, big)
    data = json.dumps(edit).encode()
    assert 10 * 1024 * 1024 <= len(data) < hook.MAX_INPUT_BYTES
    proc, elapsed = run_hook(data, cwd=repo)
    ok(proc)
    print(f"\n{len(data) / 1e6:.1f} MB of stdin: {elapsed:.2f}s")
    (event,) = events(data_home)
    assert_nothing_unredacted(data_home, PASSWORD)
    assert "more characters not captured" in event["content"]
    assert len(event["content"]) < hook.MAX_CONTENT_CHARS + 200
    assert event["metadata"]["tool_input"]["old_string"].startswith("DB_PASSWORD=[REDACTED")
    assert "\nDEBUG=1\nLINE_0=value 0\n" in event["metadata"]["tool_input"]["old_string"]
    # In the response (text at last), the value stops at its line's end: the lines after
    # it are kept, not swallowed up to the next space.
    assert '"oldString": "DB_PASSWORD=[REDACTED' in event["content"]
    assert "\\nDEBUG=1\\nLINE_0=value 0\\nLINE_1=" in event["content"]


def test_json_nested_as_deep_as_the_parser_goes_is_captured_shallow(
    repo: Path, data_home: Path
) -> None:
    deep: Any = f"password={PASSWORD}"
    for _ in range(450):  # 900 levels: json.dumps' own limit is near
        deep = {"k": [deep]}
    sent = payload("PostToolUse", repo, tool_name="mcp__db__query",
                   tool_input={"filter": deep}, tool_response={"rows": deep})  # fmt: skip
    proc, _ = run_hook(json.dumps(sent).encode(), cwd=repo)
    ok(proc)
    (event,) = events(data_home)
    assert_nothing_unredacted(data_home, PASSWORD)
    kept, depth = event["metadata"]["tool_input"]["filter"], 0
    while isinstance(kept, (dict, list)):
        kept = kept["k"] if isinstance(kept, dict) else kept[0]
        depth += 1
    assert kept == "[not captured: nested too deeply]"
    assert depth < 2 * hook.MAX_TEXT_DEPTH
    assert log(data_home) == ""


def test_text_the_rules_are_slow_on_is_redacted_or_dropped_in_time(
    repo: Path, data_home: Path
) -> None:
    sent = payload("UserPromptSubmit", repo, prompt=ADVERSARIAL)
    proc, elapsed = run_hook(json.dumps(sent).encode(), cwd=repo)
    ok(proc)
    print(f"\n{len(ADVERSARIAL)} characters of 'key=': {elapsed:.2f}s")
    (event,) = events(data_home)
    assert_redacted_or_dropped(event, "GITHUB_TOKEN=")
    assert_nothing_unredacted(data_home, TOKEN)


# -- the budget, with a slow redaction function ---------------------------------------------------

SLOW = "slow-for-the-rules"


@pytest.fixture(params=["sleeps", "computes"])
def slow_rules(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real rules, but a text holding SLOW takes 60 s (asleep, or busy in Python).

    A stand-in, not the real rules: those are meant to be fast on every input, so only a
    deliberately slow function can show that the budget holds when they are not.
    """
    real = redact_module.redact

    def slow(text: str, **kw: Any) -> Any:
        if SLOW in text:
            until = time.monotonic() + 60
            while time.monotonic() < until:
                if request.param == "sleeps":
                    time.sleep(0.05)
                else:
                    sum(range(10_000))
        return real(text, **kw)

    monkeypatch.setattr(redact_module, "redact", slow)


def run_in_process(sent: dict[str, Any]) -> float:
    started = time.monotonic()
    assert hook.run(["claude"], stdin=json.dumps(sent).encode(), out=io.StringIO()) == 0
    return time.monotonic() - started


def slow_tool_result(repo: Path) -> dict[str, Any]:
    return payload("PostToolUse", repo, tool_name="Bash",
                   tool_input={"command": f"cat .env  # {TOKEN}"},
                   tool_response={"stdout": f"TOKEN={TOKEN}\n{SLOW}\n", "stderr": ""})  # fmt: skip


@pytest.mark.usefixtures("slow_rules")
def test_what_cannot_be_checked_in_time_is_dropped_and_said(repo: Path, data_home: Path) -> None:
    elapsed = run_in_process(slow_tool_result(repo))
    assert elapsed < HARD_TIMEOUT
    (event,) = events(data_home)
    assert event["event_type"] == "tool_result"
    assert event["metadata"] == {"dropped": "too large to check", "hook_event_name": "PostToolUse"}
    assert event["content"] == ""
    assert event["session_id"] == SESSION and event["project"] == str(repo)
    assert_nothing_unredacted(data_home, TOKEN, SLOW)
    assert "too large to check" in log(data_home)


def test_without_an_alarm_the_budget_is_kept_between_fields(
    repo: Path, data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where there is no alarm (Windows), each field may take its time, but no field is
    begun once the budget is spent: here every call takes 0.3 s."""
    real = redact_module.redact

    def slow(text: str, **kw: Any) -> Any:
        time.sleep(0.3)
        return real(text, **kw)

    monkeypatch.setattr(redact_module, "redact", slow)
    monkeypatch.setattr(hook, "_arm", lambda seconds: None)
    many = {f"field_{i}": f"value {i}" for i in range(40)}
    sent = payload("PostToolUse", repo, tool_name="mcp__x", tool_input={"a": 1},
                   tool_response=[many] * 40)  # fmt: skip
    elapsed = run_in_process(sent)
    assert elapsed < hook.HOOK_BUDGET_SECONDS + 3 * 0.3 + 1.0
    (event,) = events(data_home)
    assert event["metadata"]["dropped"] == "too large to check"


def test_the_service_audits_a_dropped_event(
    repo: Path, data_home: Path, service: CaptureService, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = redact_module.redact

    def slow(text: str, **kw: Any) -> Any:
        if SLOW in text:
            time.sleep(60)
        return real(text, **kw)

    with monkeypatch.context() as patched:
        patched.setattr(redact_module, "redact", slow)
        run_in_process(slow_tool_result(repo))
    (event,) = events(data_home)
    service.drain()
    audited = [
        e for e in service.journal.audit_entries(session_id=SESSION) if e.rule == "hook.budget"
    ]
    assert len(audited) == 1
    assert "too large to check" in audited[0].reason
    assert audited[0].candidate_id == event["event_id"]
    assert audited[0].project == str(repo)
    assert_nothing_unredacted(data_home, TOKEN, SLOW)


def test_a_hook_run_leaves_no_alarm_behind(
    repo: Path, data_home: Path, service_up: FileLock
) -> None:
    """The alarm is the hook's own: a timer set before (a test runner's) is put back."""
    import signal

    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        run_in_process(payload("UserPromptSubmit", repo, prompt="hello"))
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < remaining <= 30
        assert signal.getsignal(signal.SIGALRM) is not hook._expired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []
    (event,) = events(data_home)
    assert event["content"] == "hello"
