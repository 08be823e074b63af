"""``lexmem-hook`` can never hang or stall the agent, and never writes what it could not check.

Each case drives the real console script as an agent would, with input meant to hold it:
a transcript that is a FIFO or ``/dev/zero``, a 50 MB transcript, a stdin that never
closes or never ends, 10 MB of stdin, JSON nested as deep as the parser goes, and text
the redaction rules are slow on. Each must end with exit 0 well inside a hard timeout
(the machine running the tests may be loaded; the timeout only catches a hang), and
leave no planted secret in any file.

The budget counts work (characters to check, the rules' candidates), not time: in-process
(``hook.run``, what ``lexmem-hook`` calls) a deliberately slow redaction function gives
the same events as the real one, and what is over the budget is handed over whole
(tests/test_hook_handoff.py follows it to the service).
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
# A hang detector, not a timing assertion: the hook's budget counts work, not time.
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


def test_a_stdin_that_never_closes_or_never_ends_is_captured_and_returns(
    repo: Path, data_home: Path
) -> None:
    """The whole payload written and the pipe held open; then a writer that never stops
    writing blanks after it. Either way the payload is whole, and captured."""
    whole = json.dumps(payload("UserPromptSubmit", repo, prompt="hello")).encode()
    limit = HARD_TIMEOUT
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
    assert [e["content"] for e in events(data_home)] == ["hello", "hello"]
    assert log(data_home) == ""


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


# -- the budget counts work, not time ------------------------------------------------------------

SLOW = "slow-for-the-rules"


def run_in_process(sent: dict[str, Any]) -> float:
    started = time.monotonic()
    assert hook.run(["claude"], stdin=json.dumps(sent).encode(), out=io.StringIO()) == 0
    return time.monotonic() - started


def slow_tool_result(repo: Path) -> dict[str, Any]:
    return payload("PostToolUse", repo, tool_name="Bash",
                   tool_input={"command": f"cat .env  # {TOKEN}"},
                   tool_response={"stdout": f"TOKEN={TOKEN}\n{SLOW}\n", "stderr": ""})  # fmt: skip


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("event_id", "timestamp")}


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bytes]]:
    """What the hook hands to the service, recorded instead of given to a detached child
    (tests/test_hook_handoff.py runs the child itself)."""
    calls: list[tuple[str, bytes]] = []

    def record(paths: Any, adapter: str, raw: bytes, *args: Any, **kw: Any) -> None:
        calls.append((adapter, raw))

    monkeypatch.setattr(hook, "_hand_over", record)
    return calls


def test_a_slow_machine_gets_the_same_events_as_a_fast_one(
    repo: Path, data_home: Path, monkeypatch: pytest.MonkeyPatch, handed: list[Any]
) -> None:
    """Each redaction call 0.3 s slower (the hook used to drop what took it past 0.8 s):
    the same events, content and all, nothing dropped, nothing handed over."""
    sent = slow_tool_result(repo)
    run_in_process(sent)
    (fast,) = events(data_home)
    for file in (data_home / "inbox").glob("*.json"):
        file.unlink()
    real = redact_module.redact

    def slow(text: str, **kw: Any) -> Any:
        time.sleep(0.3)
        return real(text, **kw)

    monkeypatch.setattr(redact_module, "redact", slow)
    elapsed = run_in_process(sent)
    (busy,) = events(data_home)
    print(f"\nslow rules: {elapsed:.2f}s")
    assert comparable(busy) == comparable(fast)
    assert SLOW in busy["content"] and "dropped" not in busy["metadata"]
    assert handed == []
    assert all("slow hook" in line for line in log(data_home).splitlines())  # said, not dropped
    assert_nothing_unredacted(data_home, TOKEN)


def test_more_than_the_work_budget_is_handed_over_whole(
    repo: Path, data_home: Path, handed: list[tuple[str, bytes]]
) -> None:
    """Past HOOK_WORK_CHARS, or text the rules find too dense to check: nothing of the
    payload is written by the hook, and all of it goes to the service."""
    # 200 fields of tool input, each kept up to MAX_META_CHARS: ~3 M characters to check
    many = {f"field_{i}": f"value {i} " * 2_000 for i in range(200)}
    wide = payload("PostToolUse", repo, tool_name="mcp__x", tool_input=many, tool_response="ok")
    dense = payload("UserPromptSubmit", repo, prompt=f"TOKEN={TOKEN} " + "token: " * 30_000)
    for sent in (wide, dense):
        run_in_process(sent)
    assert [(adapter, json.loads(raw)) for adapter, raw in handed] == [
        ("claude", wide),
        ("claude", dense),
    ]
    assert events(data_home) == []
    assert_nothing_unredacted(data_home, TOKEN)


def test_old_dropped_events_are_still_audited(
    repo: Path, data_home: Path, service: CaptureService
) -> None:
    """Events an older hook wrote with ``metadata.dropped`` keep their audit entry."""
    from lexmem.capture.inbox import Inbox, make_event

    event = make_event("tool_result", "", session_id=SESSION, agent="claude", cwd=str(repo),
                       project=str(repo), metadata={"dropped": "too large to check"})  # fmt: skip
    Inbox(data_home / "inbox").write(event)
    service.drain()
    audited = [
        e for e in service.journal.audit_entries(session_id=SESSION) if e.rule == "hook.budget"
    ]
    assert len(audited) == 1
    assert "too large to check" in audited[0].reason
    assert audited[0].candidate_id == event["event_id"]


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
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []
    (event,) = events(data_home)
    assert event["content"] == "hello"
