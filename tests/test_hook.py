"""``lexmem-hook`` as agents run it: the real console script, fed the JSON they send.

Every test drives the installed ``lexmem-hook`` as a subprocess with realistic Claude
Code, Codex and seed-003 payloads, then reads what reached the data folder. The only
in-process tests are the SessionStart service start (``hook.start_service`` recorded
instead of spawning a real ``lexmem serve``, which other tests cover) and the lock probe.

A SessionStart that finds no service starts ``lexmem serve`` detached; subprocess tests
that send one hold the service lock (``service_up``) so no daemon outlives the test.
"""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lexmem import config, locks
from lexmem.capture import hook, policy
from lexmem.capture.inbox import Inbox
from lexmem.config import Paths
from lexmem.locks import FileLock
from lexmem.settings import CaptureSettings, Settings, save_settings

HOOK = Path(sys.executable).with_name("lexmem-hook")
SESSION = "3f2c8a7e-1b4d-4e6f-9a0c-5d7e8f9a1b2c"
TOOL_USE_ID = "toolu_01H8xQ4a9pLkN2sT7vW3yZ5b"
MODEL = "claude-sonnet-4-5-20250929"
LIGHT_LEXMEM_MODULES = {
    "lexmem",
    "lexmem.base",  # atomic_write (the inbox) and the frozen value base
    "lexmem.capture",  # an empty package
    "lexmem.capture.hook",
    "lexmem.capture.inbox",
    "lexmem.capture.policy",  # opt-out, pause, capture mode: asked before anything is written
    "lexmem.capture.redact",
    "lexmem.capture.stamps",  # an event's id and time (os and time only)
    "lexmem.capture.entry",  # the console script's entry: --background calls to the service
    "lexmem.capture.payload",  # reading an agent's payload (the hook's and the entry's)
    "lexmem.config",
    "lexmem.errors",
    "lexmem.locks",  # the lock probe (SessionStart)
    "lexmem.places",  # where the data folder is (os and sys only)
    "lexmem.version",  # lexmem's version, which the package re-exports (imports nothing)
}
HEAVY = ("lancedb", "pyarrow", "numpy", "fastembed", "duckdb", "onnxruntime", "click", "PySide6")

BASH_INPUT = {"command": "pytest -q tests/test_api.py", "description": "Run the API tests"}

# What Claude Code sends per event, beyond the common fields -- and the one inbox event
# each must become: (fields, event_type, content, metadata that must be there).
CLAUDE_CASES: dict[str, tuple[dict[str, Any], str, str, dict[str, Any]]] = {
    "SessionStart": (
        {"source": "startup", "model": MODEL},
        "session_start",
        "",
        {"source": "startup", "model": MODEL},
    ),
    "UserPromptSubmit": (
        {"prompt": "Why does test_api fail on CI but not locally?"},
        "prompt",
        "Why does test_api fail on CI but not locally?",
        {},
    ),
    "PreToolUse": (
        {"tool_name": "Bash", "tool_input": BASH_INPUT, "tool_use_id": TOOL_USE_ID},
        "tool_call",
        "Bash: pytest -q tests/test_api.py",
        {"tool_name": "Bash", "tool_input": BASH_INPUT, "tool_use_id": TOOL_USE_ID},
    ),
    "PostToolUse": (
        {
            "tool_name": "Bash",
            "tool_input": BASH_INPUT,
            "tool_response": {
                "stdout": "FAILED tests/test_api.py::test_login - assert 500 == 200\n1 failed, 41 passed",
                "stderr": "",
                "interrupted": False,
                "isImage": False,
            },
            "tool_use_id": TOOL_USE_ID,
        },
        "tool_result",
        "FAILED tests/test_api.py::test_login - assert 500 == 200\n1 failed, 41 passed",
        {
            "tool_name": "Bash",
            "tool_input": BASH_INPUT,
            "tool_use_id": TOOL_USE_ID,
            "interrupted": False,
        },
    ),
    "PostToolUseFailure": (
        {
            "tool_name": "Bash",
            "tool_input": BASH_INPUT,
            "tool_use_id": TOOL_USE_ID,
            "error": "Exit code 1\nE   AssertionError: expected 200, got 500",
            "is_interrupt": False,
        },
        "tool_result",
        "Exit code 1\nE   AssertionError: expected 200, got 500",
        {
            "tool_name": "Bash",
            "tool_input": BASH_INPUT,
            "tool_use_id": TOOL_USE_ID,
            "is_error": True,
            "is_interrupt": False,
        },
    ),
    "Stop": (
        {
            "stop_hook_active": False,
            "last_assistant_message": "CI runs Python 3.11 where datetime.UTC exists; locally you "
            "have 3.10. Pinned the runner to 3.11 in ci.yml.",
        },
        "response",
        "CI runs Python 3.11 where datetime.UTC exists; locally you have 3.10. "
        "Pinned the runner to 3.11 in ci.yml.",
        {"stop_hook_active": False},
    ),
    "SessionEnd": (
        {"reason": "prompt_input_exit"},
        "session_end",
        "",
        {"reason": "prompt_input_exit"},
    ),
    "PreCompact": (
        {"trigger": "manual", "custom_instructions": "Keep the CI findings"},
        "compact",
        "",
        {"trigger": "manual", "custom_instructions": "Keep the CI findings"},
    ),
}


# -- helpers -------------------------------------------------------------------------


def run_hook(
    *args: str,
    payload: Any = None,
    raw: bytes | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[bytes]:
    """Run the console script as an agent does: payload on stdin, stdout read back."""
    data = raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
    return subprocess.run(
        [str(HOOK), *args],
        check=False,
        input=data,
        capture_output=True,
        env=os.environ,
        cwd=cwd,
        timeout=timeout,
    )


def ok(proc: subprocess.CompletedProcess[bytes], stdout: bytes = b"") -> None:
    """Exit 0, nothing on stderr, and only what is expected on stdout."""
    assert proc.returncode == 0
    assert proc.stderr == b""
    assert proc.stdout == stdout


def claude_payload(
    event: str, cwd: Path, transcript: Path | None = None, **fields: Any
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": SESSION,
        "transcript_path": str(
            transcript or Path.home() / ".claude" / "projects" / "x" / f"{SESSION}.jsonl"
        ),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
    }
    payload.update(fields)
    return payload


def inbox_files(home: Path) -> list[Path]:
    folder = home / "inbox"
    return sorted(folder.glob("*.json")) if folder.exists() else []


def inbox_events(home: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in inbox_files(home)]


def log_lines(home: Path) -> list[str]:
    log = home / "logs" / "hook.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def every_file(home: Path) -> Iterator[tuple[Path, bytes]]:
    for path in sorted(home.rglob("*")):
        if path.is_file():
            yield path, path.read_bytes()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def write_transcript(path: Path, entries: list[dict[str, Any]], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + tail, encoding="utf-8")
    return path


def user_line(text: str) -> dict[str, Any]:
    return {"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": text}}


def assistant_line(msg_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "assistant",
        "sessionId": SESSION,
        "message": {"id": msg_id, "role": "assistant", "model": MODEL, "content": list(parts)},
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": TOOL_USE_ID, "name": "Bash", "input": {"command": command}}


def tool_result_line(output: str) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": TOOL_USE_ID, "content": output}],
        },
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository (``.git/``) with a source folder, outside the data folder."""
    root = tmp_path / "work" / "shop-api"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "api").mkdir(parents=True)
    return root.resolve()


# -- 1. standard library only ----------------------------------------------------------


def _modules_loaded(code: str) -> list[str]:
    script = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        f"{code}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env=os.environ, check=True, timeout=60
    )
    return list(json.loads(out.stdout.decode().splitlines()[-1]))


def _not_stdlib(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] not in sys.stdlib_module_names]


def test_importing_the_hook_loads_only_the_standard_library_and_light_lexmem_modules() -> None:
    loaded = _modules_loaded("import lexmem.capture.hook")
    ours = sorted(m for m in loaded if m.split(".")[0] == "lexmem")
    print(f"\nlexmem modules loaded by `import lexmem.capture.hook`: {', '.join(ours)}")
    assert [m for m in _not_stdlib(loaded) if m.split(".")[0] != "lexmem"] == []
    assert set(ours) <= LIGHT_LEXMEM_MODULES
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]


# What would cost the agent milliseconds on every call (``typing`` ~3 ms, ``dataclasses``
# with ``inspect`` ~10 ms, ``tomllib`` ~4 ms, ``uuid`` with ``platform`` ~3 ms, ...): the
# hook gets by without them, and reads the settings without building their dataclasses.
SLOW_TO_IMPORT = (
    "typing", "dataclasses", "inspect", "tomllib", "uuid", "platform", "datetime",
    "contextlib", "subprocess", "hashlib", "lexmem.settings",
)  # fmt: skip


def test_importing_the_hook_loads_nothing_slow() -> None:
    loaded = set(_modules_loaded("import lexmem.capture.hook"))
    assert [m for m in SLOW_TO_IMPORT if m in loaded] == []


def test_a_prompt_with_a_settings_file_loads_nothing_slow_but_the_toml_parser(
    repo: Path, data_home: Path
) -> None:
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(optout=["elsewhere"])))
    prompt = json.dumps(claude_payload("UserPromptSubmit", repo, prompt="use pnpm, not npm"))
    code = f"import io\nfrom lexmem.capture import hook\nhook.run(['claude'], stdin={prompt.encode()!r})\n"
    loaded = set(_modules_loaded(code))
    toml = {"tomllib", "typing", "datetime"}  # the parser imports the other two itself
    assert [m for m in SLOW_TO_IMPORT if m in loaded and m not in toml] == []
    assert "tomllib" in loaded
    assert len(inbox_files(data_home)) == 1


def test_inbox_ids_and_timestamps_are_what_uuid4_and_datetime_would_write() -> None:
    from lexmem.capture.inbox import new_event_id, now_iso

    ids = {new_event_id() for _ in range(1000)}
    assert len(ids) == 1000
    for text in list(ids)[:100]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text
    before = datetime.now(UTC)
    stamp = now_iso()
    after = datetime.now(UTC)
    parsed_stamp = datetime.fromisoformat(stamp)
    assert parsed_stamp.tzinfo is not None and parsed_stamp.utcoffset() == timedelta(0)
    assert before - timedelta(microseconds=1) <= parsed_stamp <= after
    assert parsed_stamp.isoformat() == stamp  # datetime's own format, fraction and all


def test_an_inbox_is_a_frozen_value() -> None:
    import copy
    import pickle

    a, b = Inbox(Path("/x/inbox")), Inbox(Path("/x/inbox"))
    assert a == b and hash(a) == hash(b) and a != Inbox(Path("/y"))
    assert repr(a) == f"Inbox(folder={Path('/x/inbox')!r})"
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    with pytest.raises(AttributeError):
        a.folder = Path("/y")
    match a:
        case Inbox(folder):
            assert folder == Path("/x/inbox")


def test_a_whole_session_start_run_loads_only_the_standard_library(
    repo: Path, data_home: Path, service_up: FileLock
) -> None:
    start = json.dumps(claude_payload("SessionStart", repo, source="startup", model=MODEL))
    tool = json.dumps(claude_payload("PostToolUse", repo, **CLAUDE_CASES["PostToolUse"][0]))
    code = (
        "import io\nfrom lexmem.capture import hook\n"
        f"hook.run(['claude'], stdin={start.encode()!r}, out=io.StringIO())\n"
        f"hook.run(['claude'], stdin={tool.encode()!r}, out=io.StringIO())\n"
    )
    loaded = _modules_loaded(code)
    ours = sorted(m for m in loaded if m.split(".")[0] == "lexmem")
    print(f"\nlexmem modules loaded by a SessionStart and a PostToolUse: {', '.join(ours)}")
    assert [m for m in _not_stdlib(loaded) if m.split(".")[0] != "lexmem"] == []
    assert set(ours) <= LIGHT_LEXMEM_MODULES
    assert len(inbox_files(data_home)) == 2


# -- 2. each Claude Code event becomes exactly the expected inbox event ------------------------


@pytest.mark.parametrize("event", list(CLAUDE_CASES))
def test_each_claude_event_becomes_one_inbox_event(
    event: str, repo: Path, data_home: Path, service_up: FileLock
) -> None:
    fields, event_type, content, meta = CLAUDE_CASES[event]
    cwd = repo / "src" / "api"
    payload = claude_payload(event, cwd, **fields)
    ok(run_hook("claude", payload=payload, cwd=cwd))

    files = inbox_files(data_home)
    assert len(files) == 1
    ev = json.loads(files[0].read_text(encoding="utf-8"))
    assert ev["event_type"] == event_type
    assert ev["session_id"] == SESSION
    assert ev["agent"] == "claude"
    assert ev["cwd"] == str(cwd)
    assert ev["project"] == str(repo)  # the repository root, not the folder the agent is in
    assert ev["content"] == content
    assert ev["v"] == 1
    assert str(uuid.UUID(ev["event_id"])) == ev["event_id"]
    assert datetime.fromisoformat(ev["timestamp"]).tzinfo is not None
    assert ev["metadata"]["hook_event_name"] == event
    assert ev["metadata"]["permission_mode"] == "default"
    assert ev["metadata"]["transcript_path"] == payload["transcript_path"]
    for key, value in meta.items():
        assert ev["metadata"][key] == value, key
    assert "redactions" not in ev["metadata"]
    # The service's own reader accepts it as it is.
    assert Inbox(data_home / "inbox").read(files[0])["event_id"] == ev["event_id"]

    assert mode(files[0]) == 0o600
    assert mode(data_home / "inbox") == 0o700
    assert [p.name for p in (data_home / "inbox").iterdir() if p.name.startswith(".tmp-")] == []
    assert log_lines(data_home) == []


def test_a_fresh_data_folder_is_created_owner_only_even_by_a_log_line(data_home: Path) -> None:
    assert not data_home.exists()
    ok(run_hook("claude", raw=b'{"session_id": "s", "hook_event_name": '))
    assert mode(data_home) == 0o700
    assert mode(data_home / "logs") == 0o700
    assert mode(data_home / "logs" / "hook.log") == 0o600


def test_tool_output_of_megabytes_is_clipped_and_says_so(repo: Path, data_home: Path) -> None:
    big = "log line\n" * (12 * 1024 * 1024 // 9)  # ~12 MB of output, under the input cap
    payload = claude_payload(
        "PostToolUse",
        repo,
        tool_name="Bash",
        tool_input={"command": "cat build.log"},
        tool_response={"stdout": big, "stderr": ""},
        tool_use_id=TOOL_USE_ID,
    )
    ok(run_hook("claude", payload=payload, cwd=repo))
    (ev,) = inbox_events(data_home)
    assert ev["content"].startswith("log line\nlog line\n")
    assert ev["content"].endswith("more characters not captured]")
    assert len(ev["content"]) < hook.MAX_CONTENT_CHARS + 100
    assert inbox_files(data_home)[0].stat().st_size < 200_000


def test_a_big_tool_input_keeps_its_small_fields_whole(repo: Path, data_home: Path) -> None:
    write_input = {"file_path": str(repo / "src" / "big.py"), "content": "x = 1\n" * 100_000}
    payload = claude_payload(
        "PreToolUse", repo, tool_name="Write", tool_input=write_input, tool_use_id=TOOL_USE_ID
    )
    ok(run_hook("claude", payload=payload, cwd=repo))
    (ev,) = inbox_events(data_home)
    assert ev["content"] == f"Write: {repo / 'src' / 'big.py'}"
    assert ev["metadata"]["tool_input"]["file_path"] == write_input["file_path"]
    assert ev["metadata"]["tool_input"]["content"].endswith("more characters not captured]")


def test_subagent_stop_reads_the_subagents_transcript_not_the_sessions(
    repo: Path, data_home: Path, tmp_path: Path
) -> None:
    main = write_transcript(
        tmp_path / "t" / "main.jsonl",
        [user_line("Audit the API"), assistant_line("msg_main", text("Main agent's last answer"))],
    )
    sub = write_transcript(
        tmp_path / "t" / "agent-a1b2.jsonl",
        [
            user_line("Find slow queries"),
            assistant_line("msg_sub", text("orders_by_user scans the table")),
        ],
    )
    payload = claude_payload(
        "SubagentStop",
        repo,
        transcript=main,
        stop_hook_active=False,
        agent_id="a1b2",
        agent_type="Explore",
        agent_transcript_path=str(sub),
    )
    ok(run_hook("claude", payload=payload, cwd=repo))
    (ev,) = inbox_events(data_home)
    assert ev["event_type"] == "response"
    assert ev["content"] == "orders_by_user scans the table"
    assert ev["metadata"]["subagent"] is True
    assert ev["metadata"]["agent_type"] == "Explore"


def test_notification_and_permission_events_are_ignored_quietly(
    repo: Path, data_home: Path
) -> None:
    for event in ("Notification", "PermissionRequest", "SubagentStart"):
        payload = claude_payload(event, repo, message="Claude needs your permission to use Bash")
        ok(run_hook("claude", payload=payload, cwd=repo))
    assert inbox_files(data_home) == []
    assert log_lines(data_home) == []


def test_parallel_hooks_each_write_their_own_event(repo: Path, data_home: Path) -> None:
    """Claude Code runs the hooks of parallel tool calls at the same time."""
    procs = []
    for i in range(16):
        payload = claude_payload(
            "PreToolUse",
            repo,
            tool_name="Read",
            tool_input={"file_path": f"/src/m{i}.py"},
            tool_use_id=f"toolu_{i:02d}",
        )
        proc = subprocess.Popen(
            [str(HOOK), "claude"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ,
            cwd=repo,
        )
        # As Claude Code does: the payload written and stdin closed as the hook starts
        # (a payload this small fits the pipe's buffer), not once the previous one ended.
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        procs.append(proc)
    for proc in procs:
        code = proc.wait(timeout=60)
        assert proc.stdout is not None and proc.stderr is not None
        with proc.stdout, proc.stderr:
            assert (code, proc.stdout.read(), proc.stderr.read()) == (0, b"", b"")
    inbox = Inbox(data_home / "inbox")
    events = [inbox.read(p) for p in inbox_files(data_home)]
    assert sorted(e["metadata"]["tool_use_id"] for e in events) == [
        f"toolu_{i:02d}" for i in range(16)
    ]
    assert len({e["event_id"] for e in events}) == 16
    assert not [p for p in (data_home / "inbox").iterdir() if p.name.startswith(".tmp-")]


# -- 3. Stop without last_assistant_message reads the transcript ------------------------------


FINAL_ANSWER = "The login test failed because the fixture used naive datetimes.\nFixed in conftest.py; all 42 tests pass."


@pytest.mark.parametrize("layout", ["one line per block", "blocks in one line"])
def test_stop_without_last_assistant_message_reads_the_transcript(
    layout: str, repo: Path, data_home: Path, tmp_path: Path
) -> None:
    part1, part2 = FINAL_ANSWER.split("\n")
    if layout == "one line per block":  # what Claude Code writes: one line per content block
        final = [
            assistant_line("msg_02", text(part1)),
            assistant_line("msg_02", tool_use("pytest -q")),
            assistant_line("msg_02", text(part2)),
        ]
    else:
        final = [assistant_line("msg_02", text(part1), tool_use("pytest -q"), text(part2))]
    transcript = write_transcript(
        tmp_path / "claude" / f"{SESSION}.jsonl",
        [
            {"type": "summary", "summary": "Fixing the login test", "leafUuid": "u1"},
            user_line("Why does test_login fail?"),
            assistant_line("msg_01", text("Let me run the tests first."), tool_use("pytest -q")),
            tool_result_line("1 failed, 41 passed"),
            *final,
            {"type": "system", "content": "Stop hook running", "level": "info"},
        ],
        tail='{"type":"assistant","message":{"role":"assist',  # a line being written
    )
    payload = claude_payload("Stop", repo, transcript=transcript, stop_hook_active=False)
    ok(run_hook("claude", payload=payload, cwd=repo))
    (ev,) = inbox_events(data_home)
    assert ev["event_type"] == "response"
    assert ev["content"] == FINAL_ANSWER


def test_stop_before_the_answer_is_written_captures_nothing_rather_than_the_last_answer(
    repo: Path, data_home: Path, tmp_path: Path
) -> None:
    transcript = write_transcript(
        tmp_path / "claude" / f"{SESSION}.jsonl",
        [
            user_line("First question"),
            assistant_line("msg_01", text("First answer")),
            user_line("Second question"),
        ],
    )
    payload = claude_payload("Stop", repo, transcript=transcript, stop_hook_active=False)
    ok(run_hook("claude", payload=payload, cwd=repo))
    assert inbox_events(data_home) == []


def test_stop_with_no_transcript_and_no_message_captures_nothing(
    repo: Path, data_home: Path
) -> None:
    payload = claude_payload("Stop", repo, stop_hook_active=True)
    ok(run_hook("claude", payload=payload, cwd=repo))
    assert inbox_events(data_home) == []
    assert log_lines(data_home) == []


# -- 4. Codex: hooks and the notify program --------------------------------------------------


def codex_payload(event: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b",
        "turn_id": "7",
        "transcript_path": None,
        "cwd": str(cwd),
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "hook_event_name": event,
    }
    payload.update(fields)
    return payload


def test_codex_hook_payloads_become_prompt_tool_and_response_events(
    repo: Path, data_home: Path
) -> None:
    sends = [
        codex_payload("UserPromptSubmit", repo, prompt="Add a retry to the payment client"),
        codex_payload(
            "PostToolUse",
            repo,
            tool_name="shell",
            tool_input={"command": "cargo test -p payments"},
            tool_response="test result: ok. 12 passed",
            tool_use_id="call_8f2a",
        ),
        codex_payload(
            "Stop",
            repo,
            stop_hook_active=False,
            last_assistant_message="Added exponential backoff (3 tries) to PaymentClient::charge.",
        ),
        codex_payload("Stop", repo, stop_hook_active=False, last_assistant_message=None),
    ]
    for payload in sends:
        ok(run_hook("codex", payload=payload, cwd=repo))
    events = inbox_events(data_home)
    assert [e["event_type"] for e in events] == ["prompt", "tool_result", "response"]
    assert [e["content"] for e in events] == [
        "Add a retry to the payment client",
        "test result: ok. 12 passed",
        "Added exponential backoff (3 tries) to PaymentClient::charge.",
    ]
    for e in events:
        assert e["agent"] == "codex"
        assert e["session_id"] == "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b"
        assert e["project"] == str(repo)
        assert e["metadata"]["turn_id"] == "7"
        assert e["metadata"]["model"] == "gpt-5-codex"
        assert "transcript_path" not in e["metadata"]
    assert events[1]["metadata"]["tool_name"] == "shell"
    assert log_lines(data_home) == []


def test_codex_stop_without_a_message_reads_the_codex_rollout(
    repo: Path, data_home: Path, tmp_path: Path
) -> None:
    def item(role: str, kind: str, body: str) -> dict[str, Any]:
        content = [{"type": kind, "text": body}]
        return {
            "timestamp": "2026-02-20T12:00:00.000Z",
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": content},
        }

    rollout = write_transcript(
        tmp_path / "codex" / "rollout-2026-02-20T12-00-00.jsonl",
        [
            {"timestamp": "2026-02-20T12:00:00.000Z", "type": "session_meta", "payload": {}},
            item("user", "input_text", "Why is the build slow?"),
            {"type": "response_item", "payload": {"type": "reasoning", "summary": []}},
            item("assistant", "output_text", "Link-time optimisation is on in debug builds."),
            {"type": "event_msg", "payload": {"type": "token_count"}},
        ],
    )
    payload = codex_payload(
        "Stop",
        repo,
        transcript_path=str(rollout),
        stop_hook_active=False,
        last_assistant_message=None,
    )
    ok(run_hook("codex", payload=payload, cwd=repo))
    (ev,) = inbox_events(data_home)
    assert (ev["event_type"], ev["content"]) == (
        "response",
        "Link-time optimisation is on in debug builds.",
    )


def test_codex_notify_argument_becomes_a_prompt_and_a_response(repo: Path, data_home: Path) -> None:
    notify = {
        "type": "agent-turn-complete",
        "thread-id": "b5f6c1c2-1111-2222-3333-444455556666",
        "turn-id": "12345",
        "cwd": str(repo / "src"),
        "client": "codex-tui",
        "input-messages": ["Rename `foo` to `bar` and update the callsites."],
        "last-assistant-message": "Rename complete and verified `cargo build` succeeds.",
    }
    # Codex runs notify with stdin closed to /dev/null: the hook must not wait on it.
    proc = subprocess.run(
        [str(HOOK), "codex", json.dumps(notify)],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=os.environ,
        cwd=repo,
        timeout=60,
    )
    ok(proc)
    events = inbox_events(data_home)
    assert [(e["event_type"], e["content"]) for e in events] == [
        ("prompt", "Rename `foo` to `bar` and update the callsites."),
        ("response", "Rename complete and verified `cargo build` succeeds."),
    ]
    for e in events:
        assert e["session_id"] == "b5f6c1c2-1111-2222-3333-444455556666"
        assert e["agent"] == "codex"
        assert e["project"] == str(repo)
        assert e["metadata"]["turn_id"] == "12345"
        assert e["metadata"]["notify"] is True


def test_codex_notify_of_another_type_is_ignored(repo: Path, data_home: Path) -> None:
    ok(run_hook("codex", json.dumps({"type": "approval-requested", "cwd": str(repo)})))
    assert inbox_files(data_home) == []
    assert log_lines(data_home) == []


# -- 5. the generic seed-003 event ------------------------------------------------------------


def generic_event(**fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "session_id": "wrapper-session-42",
        "event_id": "6b1f5c9e-2d3a-4e8b-9f70-1a2b3c4d5e6f",
        "event_type": "tool_call",
        "timestamp": "2026-02-20T12:00:00Z",
        "content": "search: how do we rotate the signing key?",
        "metadata": {"tool_name": "search", "project": "codex-mem"},
    }
    event.update(fields)
    return event


def test_a_valid_generic_event_is_written_as_sent(data_home: Path) -> None:
    ok(run_hook("event", payload=generic_event()))
    (path,) = inbox_files(data_home)
    ev = Inbox(data_home / "inbox").read(path)
    assert ev["event_id"] == "6b1f5c9e-2d3a-4e8b-9f70-1a2b3c4d5e6f"
    assert ev["session_id"] == "wrapper-session-42"
    assert ev["event_type"] == "tool_call"
    assert ev["timestamp"] == "2026-02-20T12:00:00Z"
    assert ev["content"] == "search: how do we rotate the signing key?"
    assert ev["metadata"]["tool_name"] == "search"
    assert ev["project"] == "codex-mem"  # a named project, as the wrapper called it
    assert ev["agent"] == "generic"
    assert log_lines(data_home) == []


def test_generic_event_ids_become_canonical_uuids_the_same_way_every_time(data_home: Path) -> None:
    ok(run_hook("event", payload=generic_event(event_id="6B1F5C9E-2D3A-4E8B-9F70-1A2B3C4D5E6F")))
    ok(run_hook("event", payload=generic_event(event_id="e1", event_type="prompt")))
    ok(run_hook("event", payload=generic_event(event_id="e1", event_type="prompt")))
    inbox = Inbox(data_home / "inbox")
    events = [inbox.read(p) for p in inbox_files(data_home)]  # the service's reader accepts all
    assert events[0]["event_id"] == "6b1f5c9e-2d3a-4e8b-9f70-1a2b3c4d5e6f"
    assert events[1]["event_id"] == events[2]["event_id"]  # a replay keeps its id
    assert events[1]["metadata"]["source_event_id"] == "e1"


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (generic_event(event_type="thought"), "unknown event_type 'thought'"),
        (generic_event(event_type="memory_op"), "is not one an agent may send"),
        ({k: v for k, v in generic_event().items() if k != "event_id"}, "'event_id' is missing"),
        (generic_event(timestamp="yesterday"), "not ISO 8601"),
        (generic_event(content={"text": "hi"}), "'content' must be a string"),
    ],
)
def test_an_invalid_generic_event_is_logged_and_not_written(
    event: dict[str, Any], reason: str, data_home: Path
) -> None:
    ok(run_hook("event", payload=event))
    assert inbox_files(data_home) == []
    (line,) = log_lines(data_home)
    assert "invalid event" in line
    assert reason in line


# -- 5b. who said it: the speaker of a conversation turn --------------------------------------


def test_a_prompt_is_the_persons_and_a_response_the_agents(
    repo: Path, data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGNAME", "ada")
    monkeypatch.setenv("USER", "ada")
    for event, fields in (
        ("UserPromptSubmit", {"prompt": "Never deploy on Fridays."}),
        ("PreToolUse", {"tool_name": "Bash", "tool_input": BASH_INPUT, "tool_use_id": "t1"}),
        (
            "Stop",
            {"stop_hook_active": False, "last_assistant_message": "Noted: no Friday deploys."},
        ),
    ):
        ok(run_hook("claude", payload=claude_payload(event, repo, **fields), cwd=repo))
    ok(
        run_hook(
            "codex", payload=codex_payload("Stop", repo, last_assistant_message="Done."), cwd=repo
        )
    )
    events = inbox_events(data_home)
    assert [(e["event_type"], e.get("speaker")) for e in events] == [
        ("prompt", "ada"),
        ("tool_call", None),  # tool activity is said by no one: no field at all
        ("response", "Claude"),
        ("response", "Codex"),
    ]
    assert "speaker" not in events[1]
    inbox = Inbox(data_home / "inbox")
    assert [inbox.read(p).get("speaker") for p in inbox_files(data_home)] == [
        "ada", None, "Claude", "Codex",
    ]  # fmt: skip


def test_the_configured_user_name_is_the_speaker_of_prompts(
    repo: Path, data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGNAME", "ada")
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(user_name="Ada Lovelace")))
    ok(
        run_hook(
            "claude", payload=claude_payload("UserPromptSubmit", repo, prompt="Use tabs."), cwd=repo
        )
    )
    notify = {"type": "agent-turn-complete", "thread-id": "t-1", "cwd": str(repo),
              "input-messages": ["Use spaces."], "last-assistant-message": "Switched to spaces."}  # fmt: skip
    ok(run_hook("codex", json.dumps(notify), cwd=repo))
    assert [(e["event_type"], e["speaker"]) for e in inbox_events(data_home)] == [
        ("prompt", "Ada Lovelace"),
        ("prompt", "Ada Lovelace"),
        ("response", "Codex"),
    ]


def test_a_generic_event_keeps_the_speaker_it_names_redacted(data_home: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    sends = [
        generic_event(event_type="prompt", content="We meet on Tuesdays.", speaker="Caroline"),
        generic_event(
            event_id="7c2a6d0f-3e4b-4f9c-8a81-2b3c4d5e6f70",
            event_type="response",
            content="Noted.",
            speaker=f"bot {token}",
        ),
        generic_event(event_id="8d3b7e1a-4f5c-4a0d-9b92-3c4d5e6f7081"),  # no speaker: none
    ]
    for event in sends:
        ok(run_hook("event", payload=event))
    events = inbox_events(data_home)
    assert events[0]["speaker"] == "Caroline"
    assert token not in json.dumps(events[1]) and events[1]["speaker"].startswith("bot [REDACTED")
    assert "speaker" not in events[2]


def test_a_generic_event_whose_speaker_is_not_a_string_is_refused(data_home: Path) -> None:
    ok(run_hook("event", payload=generic_event(event_type="prompt", speaker=["Caroline"])))
    assert inbox_files(data_home) == []
    (line,) = log_lines(data_home)
    assert "field 'speaker' must be a string or null" in line


def test_old_events_without_a_speaker_stay_valid() -> None:
    from lexmem.capture.inbox import BadEvent, make_event, validate_event

    old = make_event("prompt", "hi", session_id="s")
    assert "speaker" not in old
    assert "speaker" not in validate_event(dict(old))
    assert validate_event(make_event("prompt", "hi", speaker="Ada"))["speaker"] == "Ada"
    assert validate_event({**old, "speaker": None})["speaker"] is None
    with pytest.raises(BadEvent, match="speaker"):
        validate_event({**old, "speaker": 7})


# -- 6. the hook never fails ------------------------------------------------------------------


VALID = json.dumps(claude_payload("UserPromptSubmit", Path("/tmp"), prompt="hello")).encode()

BAD_INPUTS = {
    "invalid JSON": b'{"session_id": nope}',
    "truncated JSON": VALID[: len(VALID) // 2],
    "empty stdin": b"",
    "whitespace only": b"  \n",
    "invalid UTF-8": b"\xff\xfe\x00{\x80\x81 not json",
    "a JSON array": b'[{"hook_event_name": "Stop"}]',
    "a JSON string": b'"SessionStart"',
    "JSON null": b"null",
    "100k levels of nesting": b"[" * 100_000 + b"]" * 100_000,
    "100k levels inside an object": b'{"hook_event_name": "Stop", "x": ' + b"[" * 100_000,
    "unknown hook_event_name": json.dumps(
        {"hook_event_name": "BeforeLunch", "session_id": "s"}
    ).encode(),
    "missing hook_event_name": json.dumps({"session_id": "s", "prompt": "hi"}).encode(),
    "hook_event_name not a string": json.dumps({"hook_event_name": ["Stop"]}).encode(),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_0_silently_with_one_log_line(case: str, data_home: Path) -> None:
    started = time.monotonic()
    ok(run_hook("claude", raw=BAD_INPUTS[case]))
    print(f"\n{case}: {time.monotonic() - started:.3f}s")
    assert inbox_files(data_home) == []
    assert len(log_lines(data_home)) == 1


@pytest.mark.parametrize("argv", [["gemini"], [], ["--version"]])
def test_an_unknown_adapter_exits_0_with_one_log_line(argv: list[str], data_home: Path) -> None:
    ok(run_hook(*argv, raw=VALID))
    assert inbox_files(data_home) == []
    (line,) = log_lines(data_home)
    assert "unknown adapter" in line


def test_help_prints_the_usage() -> None:
    proc = run_hook("--help")
    assert proc.returncode == 0
    assert b"lexmem-hook claude" in proc.stdout


def test_invalid_utf8_inside_a_string_is_captured_replaced_and_logged(
    repo: Path, data_home: Path
) -> None:
    raw = json.dumps(claude_payload("UserPromptSubmit", repo, prompt="caf@ menu")).encode()
    ok(run_hook("claude", raw=raw.replace(b"@", b"\xe9")))  # Latin-1, not UTF-8
    (ev,) = inbox_events(data_home)
    assert ev["content"] == "caf\ufffd menu"
    (line,) = log_lines(data_home)
    assert "not valid UTF-8" in line


def test_a_lone_surrogate_from_a_cut_emoji_is_captured(repo: Path, data_home: Path) -> None:
    raw = json.dumps(claude_payload("UserPromptSubmit", repo, prompt="ship it \ud83d")).encode()
    assert b"\\ud83d" in raw  # what a JavaScript agent writes for half an emoji
    ok(run_hook("claude", raw=raw))
    (ev,) = inbox_events(data_home)
    assert ev["content"].startswith("ship it ")


def test_a_deeply_nested_tool_input_json_can_parse_is_still_captured(
    repo: Path, data_home: Path
) -> None:
    deep: Any = "bottom"
    for _ in range(900):
        deep = [deep]
    payload = claude_payload(
        "PostToolUse",
        repo,
        tool_name="mcp__db__query",
        tool_input={"filter": deep},
        tool_response={"result": deep},
        tool_use_id=TOOL_USE_ID,
    )
    ok(run_hook("claude", payload=payload, cwd=repo))
    (ev,) = inbox_events(data_home)
    assert ev["metadata"]["tool_name"] == "mcp__db__query"
    kept = ev["metadata"]["tool_input"]["filter"]
    depth = 0
    while isinstance(kept, list):
        (kept,) = kept
        depth += 1
    assert depth < hook.MAX_TEXT_DEPTH  # what no person reads is said, not kept
    assert kept == "[not captured: nested too deeply]"
    assert log_lines(data_home) == []


def test_a_data_folder_under_a_regular_file_exits_0_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("I am a file\n")
    monkeypatch.setenv("LEXMEM_HOME", str(blocker / "lexmem"))
    for raw in (VALID, b"{broken", json.dumps(claude_payload("SessionStart", tmp_path)).encode()):
        ok(run_hook("claude", raw=raw))
    assert blocker.read_text() == "I am a file\n"


def test_a_full_disk_exits_0_and_leaves_no_partial_event(repo: Path, data_home: Path) -> None:
    import resource

    def no_room() -> None:  # every write that grows a file fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    payload = json.dumps(
        claude_payload("UserPromptSubmit", repo, prompt="remember: deploy on Fridays")
    ).encode()
    proc = subprocess.run(
        [str(HOOK), "claude"],
        check=False,
        input=payload,
        capture_output=True,
        env=os.environ,
        timeout=60,
        preexec_fn=no_room,
    )
    ok(proc)
    assert inbox_files(data_home) == []
    leftovers = [p for p in data_home.rglob("*") if p.is_file()]
    assert all(p.stat().st_size == 0 for p in leftovers)
    assert not [p for p in leftovers if p.name.startswith(".tmp-")]


def test_stdin_left_open_does_not_stall_the_agent(data_home: Path) -> None:
    """Half a payload and a pipe never closed: the hook returns once the pipe has been
    idle a while, and hands the rest of the reading to its detached child; here the pipe
    then ends mid-document, and the child says so (no service is started for it)."""
    proc = subprocess.Popen(
        [str(HOOK), "claude"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ,
    )
    assert proc.stdin is not None
    proc.stdin.write(VALID[:40])
    proc.stdin.flush()  # ...and never closed (communicate() would close it)
    started = time.monotonic()
    try:
        code = proc.wait(timeout=hook.STDIN_IDLE_SECONDS + 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()  # the child, reading the rest, now sees the end
    elapsed = time.monotonic() - started
    print(f"\nreturned {elapsed:.2f}s after an agent that never closes stdin")
    assert proc.stdout is not None and proc.stderr is not None
    assert code == 0
    assert (proc.stdout.read(), proc.stderr.read()) == (b"", b"")
    proc.stdout.close()
    proc.stderr.close()
    until = time.monotonic() + 30  # a hang detector: the child's line comes at once
    while len(log_lines(data_home)) < 2 and time.monotonic() < until:
        time.sleep(0.05)
    assert inbox_files(data_home) == []
    handed, malformed = log_lines(data_home)
    assert "handed to the service" in handed and "stdin idle" in handed
    assert "malformed JSON payload" in malformed
    assert not (data_home / "service.lock").exists() or not locks.service_running(Paths(data_home))


def test_an_agent_that_closed_stdout_still_gets_the_event_captured(
    repo: Path, data_home: Path, service_up: FileLock
) -> None:
    project = str(repo)
    digest = config.digest_path(Paths(data_home), project)
    digest.parent.mkdir(parents=True, exist_ok=True)
    digest.write_text("# Context\n" + "- pinned: use uv, not pip\n" * 20_000, encoding="utf-8")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone: writing the digest raises EPIPE
    try:
        proc = subprocess.run(
            [str(HOOK), "claude"],
            check=False,
            input=json.dumps(claude_payload("SessionStart", repo, source="resume")).encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=os.environ,
            cwd=repo,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0
    assert proc.stderr == b""
    assert [e["event_type"] for e in inbox_events(data_home)] == ["session_start"]
    (line,) = log_lines(data_home)
    assert "could not print the digest" in line


# -- 7. secrets never reach the disk ----------------------------------------------------------

GITHUB_TOKEN = "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8s9"
AWS_KEY_ID = "AKIAZ7Q3XJ5LRMVKW2PB"
AWS_SECRET = "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"
OPENAI_KEY = "sk-proj-Xq9vR2mT7kLp4sW8yB3nD6fH1jA5cE0gZuQiOoPx"
KEY_LINES = (
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACBq5m3Zp8YhL0vT2cRk9WnX4eJ7sG1uA6dF3bH8yK2iOwAAAJgR7a2xEe2t",
)
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(KEY_LINES)
    + "\n-----END OPENSSH PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
DB_PASSWORD = "Tr0ub4dor-staging-77"
URL_PASSWORD = "pgS3cr3t-Passw0rd"
CURL_PASSWORD = "CurlPa55w0rd"
SECRET_TEXT = (
    f"export GITHUB_TOKEN={GITHUB_TOKEN}\n"
    f"aws configure set aws_access_key_id {AWS_KEY_ID}\n"
    f"aws_secret_access_key={AWS_SECRET}\n"
    f"OPENAI_API_KEY: {OPENAI_KEY}\n"
    f"{PRIVATE_KEY}\n"
    f"Authorization token {JWT}\n"
    f"PASSWORD={DB_PASSWORD}\n"
    f"psql postgres://admin:{URL_PASSWORD}@db.internal:5432/shop\n"
    f"curl -u deploy:{CURL_PASSWORD} https://api.example.com/v1/orders\n"
)
SECRETS = (
    GITHUB_TOKEN,
    AWS_KEY_ID,
    AWS_SECRET,
    OPENAI_KEY,
    *KEY_LINES,
    JWT,
    JWT.split(".")[1],
    JWT.split(".")[2],
    DB_PASSWORD,
    URL_PASSWORD,
    CURL_PASSWORD,
)


def test_no_secret_from_any_field_reaches_any_file(
    repo: Path, data_home: Path, tmp_path: Path, service_up: FileLock
) -> None:
    transcript = write_transcript(
        tmp_path / "claude" / f"{SESSION}.jsonl",
        [
            user_line(f"Set up the deploy\n{SECRET_TEXT}"),
            assistant_line("msg_9", text(f"Done.\n{SECRET_TEXT}")),
        ],
    )
    command = f"{SECRET_TEXT}./deploy.sh --token {GITHUB_TOKEN}"
    bash = {
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Deploy", "password": DB_PASSWORD},
        "tool_use_id": TOOL_USE_ID,
    }
    output = {"stdout": SECRET_TEXT, "stderr": f"warning: {OPENAI_KEY}", "interrupted": False}
    cut = "x" * (hook.MAX_CONTENT_CHARS - 12) + " " + GITHUB_TOKEN  # straddles the cut

    def claude(event: str, **fields: Any) -> None:
        ok(run_hook("claude", payload=claude_payload(event, repo, transcript, **fields), cwd=repo))

    claude("SessionStart", source="startup", model=MODEL)
    claude("UserPromptSubmit", prompt=SECRET_TEXT)
    claude("PreToolUse", **bash)
    claude("PostToolUse", **bash, tool_response=output)
    claude("PostToolUseFailure", **bash, error=f"Exit code 1\n{SECRET_TEXT}")
    claude("Stop", stop_hook_active=False, last_assistant_message=SECRET_TEXT)
    claude("Stop", stop_hook_active=False)  # from the transcript
    claude("PreCompact", trigger="manual", custom_instructions=SECRET_TEXT)
    claude("SessionEnd", reason="other")
    claude("UserPromptSubmit", prompt=cut)
    claude(GITHUB_TOKEN)  # an unknown event: its name goes to the log
    ok(run_hook("event", payload=generic_event(timestamp=GITHUB_TOKEN)))  # logged as invalid
    meta = {"tool_name": "shell", "env": SECRET_TEXT}
    ok(run_hook("event", payload=generic_event(content=SECRET_TEXT, metadata=meta)))
    notify = {
        "type": "agent-turn-complete",
        "thread-id": "t-1",
        "turn-id": "1",
        "cwd": str(repo),
        "input-messages": [SECRET_TEXT],
        "last-assistant-message": SECRET_TEXT,
    }
    ok(run_hook("codex", json.dumps(notify), cwd=repo))

    events = inbox_events(data_home)
    assert len(events) == 13  # every send but the unknown event and the invalid one
    assert len(log_lines(data_home)) == 2
    with_secrets = [
        e
        for e in events
        if e["event_type"] not in ("session_start", "session_end")
        and not e["content"].startswith("xxx")
    ]
    assert all(e["metadata"].get("redactions", 0) > 0 for e in with_secrets)

    for path, data in every_file(data_home):
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret[:12]}… in {path.relative_to(data_home)}"
        assert GITHUB_TOKEN[:10].encode() not in data, f"a token prefix in {path}"


# -- 8. opt-out -------------------------------------------------------------------------------

MARKER = "zebra-quokka-7e3f-opted-out"


def every_event_payload(cwd: Path, transcript: Path) -> list[tuple[list[str], dict[str, Any]]]:
    sends: list[tuple[list[str], dict[str, Any]]] = []
    for event, (fields, *_rest) in CLAUDE_CASES.items():
        fields = dict(fields)
        for key in ("prompt", "last_assistant_message", "error", "custom_instructions"):
            if key in fields:
                fields[key] = f"{fields[key]} {MARKER}"
        if "tool_input" in fields:
            fields["tool_input"] = {"command": f"echo {MARKER}"}
        sends.append((["claude"], claude_payload(event, cwd, transcript, **fields)))
    sends.append((["claude"], claude_payload("Stop", cwd, transcript, stop_hook_active=False)))
    sends.append((["claude"], claude_payload("BeforeLunch", cwd, transcript, note=MARKER)))
    sends.append((["codex"], codex_payload("UserPromptSubmit", cwd, prompt=MARKER)))
    meta = {"cwd": str(cwd), "tool_name": "search"}
    sends.append((["event"], generic_event(content=MARKER, metadata=meta)))
    sends.append((["event"], generic_event(event_type="bogus", content=MARKER, metadata=meta)))
    return sends


def assert_no_trace(data_home: Path, repo: Path) -> None:
    assert inbox_files(data_home) == []
    inbox = data_home / "inbox"
    assert not inbox.exists() or not any(inbox.iterdir())
    for path, data in every_file(data_home):
        assert MARKER.encode() not in data, path
    assert [line for line in log_lines(data_home) if str(repo) in line or repo.name in line] == []


@pytest.mark.parametrize("where", ["repository root", "a subfolder"])
def test_an_optout_file_leaves_no_trace(
    where: str, repo: Path, data_home: Path, tmp_path: Path, service_up: FileLock
) -> None:
    (repo / policy.OPTOUT_MARKER).touch()
    cwd = repo if where == "repository root" else repo / "src" / "api"
    transcript = write_transcript(
        tmp_path / "t.jsonl", [assistant_line("m", text(f"answer {MARKER}"))]
    )
    digest = config.digest_path(Paths(data_home), str(repo))
    digest.parent.mkdir(parents=True, exist_ok=True)
    digest.write_text("# old digest of an opted-out repository\n")
    for argv, payload in every_event_payload(cwd, transcript):
        ok(run_hook(*argv, payload=payload, cwd=cwd))  # nothing printed, not even the digest
    notify = {
        "type": "agent-turn-complete",
        "thread-id": "t",
        "turn-id": "1",
        "cwd": str(cwd),
        "input-messages": [MARKER],
        "last-assistant-message": MARKER,
    }
    ok(run_hook("codex", json.dumps(notify), cwd=cwd))
    assert_no_trace(data_home, repo)
    assert log_lines(data_home) == []


def test_a_repository_in_the_settings_optout_list_leaves_no_trace(
    repo: Path, data_home: Path, tmp_path: Path, service_up: FileLock
) -> None:
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(optout=[str(repo)])))
    cwd = repo / "src"
    transcript = write_transcript(
        tmp_path / "t.jsonl", [assistant_line("m", text(f"answer {MARKER}"))]
    )
    for argv, payload in every_event_payload(cwd, transcript):
        ok(run_hook(*argv, payload=payload, cwd=cwd))
    assert_no_trace(data_home, repo)
    assert log_lines(data_home) == []
    # Another repository is still captured.
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    ok(
        run_hook(
            "claude", payload=claude_payload("UserPromptSubmit", other, prompt="hi"), cwd=other
        )
    )
    assert len(inbox_files(data_home)) == 1


def test_a_named_project_in_the_optout_list_leaves_no_trace(data_home: Path) -> None:
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(optout=["codex-mem"])))
    ok(run_hook("event", payload=generic_event(content=MARKER)))
    assert inbox_files(data_home) == []


# -- 9. capture modes and allowed paths --------------------------------------------------------


def test_capture_mode_off_writes_nothing_but_still_prints_the_digest(
    repo: Path, data_home: Path, service_up: FileLock
) -> None:
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(mode="off")))
    digest = config.digest_path(Paths(data_home), str(repo))
    digest.parent.mkdir(parents=True, exist_ok=True)
    digest.write_text("# shop-api\n- pinned: deploys go through `make release`\n", encoding="utf-8")
    for event, (fields, *_rest) in CLAUDE_CASES.items():
        proc = run_hook("claude", payload=claude_payload(event, repo, **fields), cwd=repo)
        ok(proc, digest.read_bytes() if event == "SessionStart" else b"")
    assert inbox_files(data_home) == []
    assert log_lines(data_home) == []


def test_capture_mode_off_for_one_project_only(repo: Path, data_home: Path, tmp_path: Path) -> None:
    other = (tmp_path / "other").resolve()
    (other / ".git").mkdir(parents=True)
    capture = CaptureSettings(mode="full", project_modes={str(repo): "off", str(other): "assist"})
    save_settings(Paths(data_home), Settings(capture=capture))
    ok(
        run_hook(
            "claude", payload=claude_payload("UserPromptSubmit", repo / "src", prompt="in repo")
        )
    )
    ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", other, prompt="in other")))
    assert [e["content"] for e in inbox_events(data_home)] == ["in other"]


def test_allow_paths_excludes_other_folders(repo: Path, data_home: Path, tmp_path: Path) -> None:
    allowed = (tmp_path / "allowed").resolve()
    (allowed / "proj" / ".git").mkdir(parents=True)
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(allow_paths=[str(allowed)])))
    ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", repo, prompt="outside")))
    ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", tmp_path, prompt="parent")))
    ok(
        run_hook(
            "claude", payload=claude_payload("UserPromptSubmit", allowed / "proj", prompt="inside")
        )
    )
    assert [e["content"] for e in inbox_events(data_home)] == ["inside"]


def test_unreadable_settings_capture_nothing_and_say_why(repo: Path, data_home: Path) -> None:
    data_home.mkdir(parents=True)
    (data_home / "settings.toml").write_text("[capture\nmode = 'full'\n")
    ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", repo, prompt="hi")))
    assert inbox_files(data_home) == []
    (line,) = log_lines(data_home)
    assert "settings unreadable" in line


# -- 10. SessionStart: the digest and the service ----------------------------------------------


def test_session_start_prints_the_projects_digest(
    repo: Path, data_home: Path, service_up: FileLock
) -> None:
    digest = config.digest_path(Paths(data_home), str(repo))
    digest.parent.mkdir(parents=True, exist_ok=True)
    body = "# shop-api — what lexmem remembers\n\n- Pinned: run `make check` before pushing\n- CI uses Python 3.11 — déjà vu\n"
    digest.write_text(body, encoding="utf-8")
    cwd = repo / "src" / "api"
    for source in ("startup", "resume", "clear", "compact"):
        payload = claude_payload("SessionStart", cwd, source=source, model=MODEL)
        ok(run_hook("claude", payload=payload, cwd=cwd), stdout=body.encode("utf-8"))
    # Codex sends SessionStart too.
    ok(
        run_hook("codex", payload=codex_payload("SessionStart", cwd, source="startup")),
        stdout=body.encode(),
    )
    # Any other event prints nothing.
    ok(run_hook("claude", payload=claude_payload("UserPromptSubmit", cwd, prompt="hi")))


def test_session_start_prints_nothing_without_a_digest(
    repo: Path, data_home: Path, service_up: FileLock
) -> None:
    ok(run_hook("claude", payload=claude_payload("SessionStart", repo, source="startup")))
    other = config.digest_path(Paths(data_home), "/some/other/project")
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text("# another project's digest\n")
    ok(run_hook("claude", payload=claude_payload("SessionStart", repo, source="startup")))
    assert len(inbox_files(data_home)) == 2


@pytest.fixture
def spawns(monkeypatch: pytest.MonkeyPatch) -> list[Paths]:
    """``hook.start_service`` recorded instead of starting a real ``lexmem serve``."""
    calls: list[Paths] = []
    monkeypatch.setattr(hook, "start_service", calls.append)
    return calls


def run_in_process(payload: dict[str, Any], adapter: str = "claude") -> str:
    out = io.StringIO()
    assert hook.run([adapter], stdin=json.dumps(payload).encode(), out=out) == 0
    return out.getvalue()


def test_session_start_starts_the_service_when_none_runs(
    repo: Path, data_home: Path, spawns: list[Paths]
) -> None:
    run_in_process(claude_payload("SessionStart", repo, source="startup"))
    assert spawns == [Paths(data_home)]
    # Other events never start it.
    run_in_process(claude_payload("UserPromptSubmit", repo, prompt="hi"))
    run_in_process(claude_payload("Stop", repo, last_assistant_message="done"))
    assert len(spawns) == 1


def test_session_start_starts_the_service_when_its_holder_died(
    repo: Path, data_home: Path, spawns: list[Paths]
) -> None:
    data_home.mkdir(parents=True)
    (data_home / "service.lock").write_text("12345\n")  # left by a service that crashed
    run_in_process(claude_payload("SessionStart", repo, source="startup"))
    assert spawns == [Paths(data_home)]


def test_session_start_leaves_a_running_service_alone(
    repo: Path, data_home: Path, spawns: list[Paths], service_up: FileLock
) -> None:
    run_in_process(claude_payload("SessionStart", repo, source="startup"))
    assert spawns == []
    assert [e["event_type"] for e in inbox_events(data_home)] == ["session_start"]


def test_no_service_is_started_for_an_opted_out_or_captureless_session(
    repo: Path, data_home: Path, spawns: list[Paths], tmp_path: Path
) -> None:
    (repo / policy.OPTOUT_MARKER).touch()
    run_in_process(claude_payload("SessionStart", repo, source="startup"))
    other = tmp_path / "other"
    other.mkdir()
    save_settings(Paths(data_home), Settings(capture=CaptureSettings(mode="off")))
    run_in_process(claude_payload("SessionStart", other, source="startup"))
    assert spawns == []


def test_service_running_follows_a_real_lock(data_home: Path) -> None:
    paths = Paths(data_home)
    assert locks.service_running(paths) is False
    assert not data_home.exists()  # the probe creates nothing
    data_home.mkdir(parents=True)
    lock = FileLock(paths.service_lock, timeout=0)
    with lock:
        content = paths.service_lock.read_bytes()
        assert locks.service_running(paths) is True
        assert paths.service_lock.read_bytes() == content  # the holder's pid is untouched
    assert locks.service_running(paths) is False


def test_service_running_sees_a_lock_held_by_another_process_until_it_dies(data_home: Path) -> None:
    paths = Paths(data_home)
    data_home.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom lexmem.locks import FileLock\n"
            f"FileLock(Path({str(paths.service_lock)!r}), timeout=0).acquire()\n"
            "print('held', flush=True)\ntime.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        env=os.environ,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        assert locks.service_running(paths) is True
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert locks.service_running(paths) is False  # the OS released it with the process


# -- 11. latency, for information ----------------------------------------------------------


def _median_ms(cmd: list[str], stdin: bytes, runs: int = 20) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(
            cmd, check=False, input=stdin, capture_output=True, env=os.environ, timeout=60
        )
        times.append(time.perf_counter() - started)
        assert proc.returncode == 0
    return statistics.median(times) * 1000


def test_report_hook_latency(repo: Path) -> None:
    """Not asserted (house rule); run with ``-s`` to see the numbers."""
    payload = json.dumps(
        claude_payload("PostToolUse", repo, **CLAUDE_CASES["PostToolUse"][0])
    ).encode()
    bare = _median_ms(["python3", "-c", "pass"], b"")
    venv = _median_ms([sys.executable, "-c", "pass"], b"")
    tool = _median_ms([str(HOOK), "claude"], payload)
    print(
        f"\nmedian of 20 runs: lexmem-hook claude (PostToolUse) {tool:.1f} ms; "
        f"python3 -c pass {bare:.1f} ms; venv python -c pass {venv:.1f} ms"
    )


@pytest.mark.parametrize(
    ("adapter", "tool"),
    [
        ("claude", "mcp__lexmem__search_memory"),
        ("claude", "mcp__lexmem__save_memory"),
        ("claude", "WaitForMcpServers"),
        ("claude", "ToolSearch"),
        ("codex", "mcp__lexmem__search_memory"),
    ],
)
def test_lexmems_own_tools_and_the_agents_plumbing_are_not_recorded(
    adapter: str, tool: str, repo: Path, data_home: Path
) -> None:
    make = claude_payload if adapter == "claude" else codex_payload
    for event in ("PreToolUse", "PostToolUse"):
        payload = make(event, repo, tool_name=tool, tool_input={"query": "deploy"},
                       tool_response={"hits": []}, tool_use_id="toolu_1")  # fmt: skip
        ok(run_hook(adapter, payload=payload, cwd=repo))
    assert inbox_files(data_home) == []
    assert log_lines(data_home) == []
    # Another server's tool is work like any other.
    other = make("PostToolUse", repo, tool_name="mcp__github__list_issues",
                 tool_input={"repo": "shop"}, tool_response="3 open", tool_use_id="toolu_2")  # fmt: skip
    ok(run_hook(adapter, payload=other, cwd=repo))
    assert [e["metadata"]["tool_name"] for e in inbox_events(data_home)] == [
        "mcp__github__list_issues"
    ]


@pytest.mark.parametrize(
    ("command", "response"),
    [
        ("echo $DB_PASSWORD", {"stdout": "Vq7rLm2Xw9TpK4s\n", "stderr": "", "interrupted": False}),
        (
            "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
            {"stdout": "pR3tty-l0ng-pass", "stderr": "", "interrupted": False},
        ),
        (["bash", "-lc", "printenv STRIPE_API_KEY"], "Hq3nT8vLx2Wm"),
    ],
)
def test_the_output_of_a_command_that_prints_a_secret_is_withheld(
    repo: Path, command: Any, response: Any
) -> None:
    """The command names the secret; its output, which the agent reports apart from the
    command, is the value: no rule reading the output alone could tell."""
    value = (response["stdout"] if isinstance(response, dict) else response).strip()
    payload = claude_payload(
        "PostToolUse", repo, tool_name="Bash", tool_input={"command": command},
        tool_response=response, tool_use_id=TOOL_USE_ID,
    )  # fmt: skip
    ok(run_hook("claude", payload=payload, cwd=repo))
    (event,) = inbox_events(Path(os.environ["LEXMEM_HOME"]))
    assert value not in json.dumps(event)
    assert "[REDACTED:cli_secret]" in event["content"]
    # A command that prints no secret keeps its output.
    plain = claude_payload(
        "PostToolUse", repo, tool_name="Bash", tool_input={"command": "echo $HOME"},
        tool_response={"stdout": "/home/ann\n", "stderr": "", "interrupted": False},
        tool_use_id=TOOL_USE_ID,
    )  # fmt: skip
    ok(run_hook("claude", payload=plain, cwd=repo))
    assert any("/home/ann" in e["content"] for e in inbox_events(Path(os.environ["LEXMEM_HOME"])))
