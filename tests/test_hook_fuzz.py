"""Random and adversarial input to the capture path, property-based (hypothesis).

Whatever an agent pipes into ``lexmem-hook`` — invalid JSON, invalid UTF-8, a 16 MB
field, nesting a hundred thousand deep, every field of the wrong type or missing,
binary tool output — the hook exits 0, every file it leaves in the inbox is a valid
event holding no planted secret, and the real service takes those files in without
failing. Whatever lands in the inbox by other means (any bytes, any JSON) is either
taken in or quarantined, and the drain goes on.

The hook runs in-process (``lexmem.capture.hook.run``, the function ``lexmem-hook`` calls) for
the generated examples, and as the real console script for a handful of explicit ones.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lexmem.api import Lexmem
from lexmem.capture import hook
from lexmem.capture.inbox import BadEvent, Inbox, make_event, validate_event
from lexmem.embedder import Embedder
from lexmem.locks import FileLock
from lexmem.service.writer import CaptureService

HOOK = Path(sys.executable).with_name("lexmem-hook")
# Generous: a hang detector, never a timing assertion (the hook's budget counts work, not
# time: HOOK_WORK_CHARS characters to check; a call takes tens of milliseconds).
HANG_S = 120

AWS_KEY_ID = "AKIAZ7Q3XJ5LRMVKW2PB"
GITHUB_TOKEN = "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8s9"
OPENAI_KEY = "sk-proj-Xq9vR2mT7kLp4sW8yB3nD6fH1jA5cE0gZuQiOoPx"
PLANTED = (
    f"aws_access_key_id = {AWS_KEY_ID}",
    f"export GITHUB_TOKEN={GITHUB_TOKEN}",
    f"OPENAI_API_KEY: {OPENAI_KEY}",
)
SECRETS = (AWS_KEY_ID.encode(), GITHUB_TOKEN.encode(), OPENAI_KEY.encode())

HOOK_NAMES = sorted({*hook.CLAUDE_EVENTS, *hook.IGNORED_EVENTS})
FIELDS = (
    "session_id", "cwd", "transcript_path", "permission_mode", "prompt", "tool_name",
    "tool_input", "tool_response", "tool_use_id", "error", "is_interrupt",
    "last_assistant_message", "stop_hook_active", "reason", "source", "trigger",
    "custom_instructions", "agent_id", "agent_type", "agent_transcript_path", "model",
)  # fmt: skip
GENERIC_FIELDS = (
    "event_id", "session_id", "event_type", "timestamp", "content", "metadata", "agent",
    "project", "cwd", "v",
)  # fmt: skip


# -- strategies -------------------------------------------------------------------------------

# Text as agents and tools produce it, and worse: control characters, NUL, lone
# surrogates (a cut emoji), bytes read as Latin-1 (binary tool output).
texts = st.one_of(
    st.text(max_size=200),
    st.text(st.characters(codec="utf-8"), max_size=50),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.sampled_from(["", " ", "\x00", "\ufeff", "../../etc/passwd", "/", "~", "C:\\"]),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), texts,
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def secret_text(draw: st.DrawFn) -> str:
    """Tool output (or a prompt) with a secret somewhere in it, on a line of its own."""
    before, after = draw(texts), draw(texts)
    return f"{before}\n{draw(st.sampled_from(PLANTED))}\n{after}"


def plausible(key: str) -> st.SearchStrategy[Any]:
    """A value of the type an agent sends for ``key`` (the text itself anything at all)."""
    if key == "tool_input":
        return st.dictionaries(st.sampled_from(["command", "file_path", "pattern", "x"]), texts)
    if key == "tool_response":
        return st.one_of(
            st.fixed_dictionaries({"stdout": texts, "stderr": texts, "interrupted": st.booleans()}),
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), max_size=3),
            texts,
        )
    if key in ("stop_hook_active", "is_interrupt"):
        return st.booleans()
    return texts


@st.composite
def claude_payloads(draw: st.DrawFn, repo: str) -> dict[str, Any]:
    """A Claude Code (or Codex hook) payload: mostly a known event name, sometimes an
    unknown one or none; any subset of the fields, each plausible or of any type."""
    payload: dict[str, Any] = {}
    roll = draw(st.integers(0, 19))
    if roll < 16:
        payload["hook_event_name"] = draw(st.sampled_from(HOOK_NAMES))
    elif roll < 19:
        payload["hook_event_name"] = draw(json_values)
    for key in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=len(FIELDS))):
        payload[key] = draw(plausible(key) if draw(st.integers(0, 4)) > 1 else json_values)
    if draw(st.booleans()):
        payload["cwd"] = repo  # a real repository: the event gets a project
    if draw(st.booleans()):  # a secret in the tool's output or the prompt
        key = draw(st.sampled_from(["tool_response", "prompt", "last_assistant_message", "error"]))
        secret = draw(secret_text())
        payload[key] = {"stdout": secret, "stderr": ""} if key == "tool_response" else secret
    return payload


@st.composite
def generic_payloads(draw: st.DrawFn) -> dict[str, Any]:
    """Seed 003's event contract, valid but for up to two fields missing or of any type."""
    valid = {
        "event_id": draw(st.one_of(st.uuids().map(str), st.text(min_size=1, max_size=20))),
        "session_id": "s-1", "timestamp": "2025-01-31T09:05:03+00:00",
        "event_type": draw(st.sampled_from(sorted(hook.GENERIC_EVENT_TYPES))),
        "content": draw(st.one_of(secret_text(), texts)), "metadata": {"cwd": "/tmp"},
        "agent": "wrapper", "project": None, "cwd": None, "v": 1,
    }  # fmt: skip
    out = dict(valid)
    for key in draw(st.lists(st.sampled_from(GENERIC_FIELDS), unique=True, max_size=2)):
        if draw(st.booleans()):
            del out[key]
        else:
            out[key] = draw(json_values)
    return out


def _broken(data: bytes, cut: int, junk: bytes) -> bytes:
    cut = cut % (len(data) + 1)
    return data[:cut] + junk + data[cut:]


@st.composite
def raw_inputs(draw: st.DrawFn, repo: str) -> tuple[list[str], bytes]:
    """argv and stdin bytes: valid JSON, JSON with bytes spliced in or cut off, invalid
    UTF-8, a BOM, or any bytes at all."""
    adapter = draw(st.sampled_from(["claude", "codex", "event"]))
    payload = draw(generic_payloads() if adapter == "event" else claude_payloads(repo))
    data = json.dumps(payload, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    how = draw(st.integers(0, 9))  # 0 and 5 to 9: as sent
    if how == 1:
        data = _broken(data, draw(st.integers(0, 10**6)), draw(st.binary(min_size=1, max_size=8)))
    elif how == 2:
        data = data[: draw(st.integers(0, len(data)))]
    elif how == 3:
        data = b"\xef\xbb\xbf" + data
    elif how == 4:
        data = draw(st.binary(max_size=400))
    if adapter == "codex" and draw(st.booleans()):  # the older notify form: JSON as argv
        notify = {
            "type": draw(st.sampled_from(["agent-turn-complete", "other"])),
            "thread-id": draw(json_values), "turn-id": draw(json_values),
            "input-messages": draw(json_values), "last-assistant-message": draw(json_values),
        }  # fmt: skip
        return ["codex", json.dumps(notify)], b""
    return [adapter], data


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    return root


def written(home: Path) -> list[Path]:
    folder = home / "inbox"
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.exists() else []


def assert_valid_and_clean(home: Path, files: list[Path]) -> None:
    """Every file the hook left is a whole, valid event, and no planted secret is on disk."""
    for path in files:
        assert not path.name.startswith("."), f"a temporary file was left: {path.name}"
        event = Inbox(path.parent).read(path)  # the name, UTF-8, JSON and the event's shape
        assert validate_event(dict(event)) == event
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in SECRETS:
                assert secret not in data, f"{secret[:8]!r}… reached {path.relative_to(home)}"


def run_hook(argv: list[str], raw: bytes) -> subprocess.CompletedProcess[bytes]:
    """The real console script, as an agent runs it."""
    return subprocess.run(
        [str(HOOK), *argv], input=raw, capture_output=True, env=os.environ, timeout=HANG_S,
        check=False,
    )  # fmt: skip


def drained_by_the_service(home: Path, embedder: Embedder, files: list[Path]) -> CaptureService:
    """Move ``files`` into a fresh data folder's inbox and let the real service drain it."""
    lm = Lexmem.open(home, embedder=embedder)
    inbox = Inbox(lm.paths.inbox)
    inbox.ensure()
    for path in files:
        shutil.copy2(path, inbox.folder / path.name)
    service = CaptureService(lm)
    service.acquire()
    return service


# -- the hook ------------------------------------------------------------------------------------


def test_any_payload_leaves_only_valid_redacted_events_the_service_takes_in(
    data_home: Path, tmp_path: Path, repo: Path, embedder: Embedder, service_up: FileLock
) -> None:
    """Generated payloads through the hook, in-process; then the real service drains
    everything they wrote, with no quarantine and no error."""
    kept = tmp_path / "kept"
    kept.mkdir()
    seen: list[Path] = []

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)  # fmt: skip
    @given(raw_inputs(str(repo)))
    def one(given_input: tuple[list[str], bytes]) -> None:
        argv, raw = given_input
        assert hook.run(argv, stdin=raw, out=io.StringIO()) == 0
        files = written(data_home)
        assert_valid_and_clean(data_home, files)
        for path in files:  # set aside for the service; the next example starts empty
            shutil.move(path, kept / path.name)
            seen.append(kept / path.name)

    one()
    assert seen, "no generated payload made an event: the strategies are too narrow"
    service = drained_by_the_service(tmp_path / "service", embedder, seen)
    try:
        report = service.drain()
        assert report.quarantined == 0
        assert service.inbox.pending() == [] and service.inbox.quarantined() == []
        ids = [json.loads(p.read_bytes())["event_id"] for p in seen]
        assert service.journal.seen(ids) == set(ids)
        assert_valid_and_clean(tmp_path / "service", [])
    finally:
        service.release()
        service.lm.close()


def test_a_field_of_megabytes_is_clipped_and_redacted(
    data_home: Path, repo: Path, service_up: FileLock
) -> None:
    """One explicit example (not generated): tool output just under the hook's input cap
    with a key at its end and one at its start, through the real command."""
    output = f"{PLANTED[0]}\n" + "x" * (hook.MAX_INPUT_BYTES - 4096) + f"\n{PLANTED[1]}\n"
    payload = {
        "session_id": "big", "cwd": str(repo), "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "cat huge.log"},
        "tool_response": {"stdout": output, "stderr": "", "interrupted": False},
    }  # fmt: skip
    proc = run_hook(["claude"], json.dumps(payload).encode())
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    [path] = written(data_home)
    assert_valid_and_clean(data_home, [path])
    event = json.loads(path.read_bytes())
    assert len(event["content"]) < hook.MAX_CONTENT_CHARS + 200
    assert "more characters not captured" in event["content"]
    assert "[REDACTED:" in event["content"]


@pytest.mark.parametrize(
    ("raw", "logged"),
    [
        pytest.param(b"[" * 100_000, "nested too deeply", id="100000-levels-of-["),
        pytest.param(
            b'{"hook_event_name": "PostToolUse", "tool_response": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}",
            "nested too deeply",
            id="deep-tool-response",
        ),
        pytest.param(
            b'{"hook_event_name": "UserPromptSubmit", "prompt": "caf\xe9 \xff\xfe"}',
            "not valid UTF-8",
            id="invalid-utf-8",
        ),
        pytest.param(bytes(range(256)) * 64, "malformed JSON", id="binary"),
        pytest.param(
            b'{"hook_event_name": "Stop", "last_assistant_message": "cut',
            "malformed",
            id="truncated",
        ),
        pytest.param(b'["not", "an", "object"]', "not an object", id="a-list"),
    ],
)
def test_adversarial_stdin_through_the_real_command(
    raw: bytes, logged: str, data_home: Path, service_up: FileLock
) -> None:
    proc = run_hook(["claude"], raw)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    files = written(data_home)
    assert_valid_and_clean(data_home, files)
    log = (data_home / "logs" / "hook.log").read_text(encoding="utf-8")
    assert logged in log
    if logged != "not valid UTF-8":
        assert files == []  # nothing to capture from it


@pytest.mark.parametrize("depth", [500, 990, 5_000])
def test_nesting_just_under_and_over_the_parser_limit(
    depth: int, data_home: Path, repo: Path, service_up: FileLock
) -> None:
    """Tool input nested as deep as the JSON parser allows (and deeper) never fails the
    hook; what it keeps is a valid event or nothing."""
    deep: Any = "bottom"
    for _ in range(depth):
        deep = {"k": [deep]}
    text = json.dumps({"k": 1})
    try:
        text = json.dumps(deep)
    except RecursionError:
        text = '{"k": [' * depth + '"bottom"' + "]}" * depth
    raw = (
        '{"hook_event_name": "PreToolUse", "session_id": "deep", "cwd": '
        + json.dumps(str(repo))
        + ', "tool_name": "mcp__x", "tool_input": '
        + text
        + "}"
    ).encode()
    assert hook.run(["claude"], stdin=raw, out=io.StringIO()) == 0
    assert_valid_and_clean(data_home, written(data_home))


# -- the inbox itself ----------------------------------------------------------------------------


META_KEYS = ("op", "kwargs", "key", "old", "new", "pin", "type", "title", "memory_id", "query",
             "original", "corrected", "context", "doctor")  # fmt: skip
OPS = ("pin", "archive", "restore", "forget", "supersede", "edit", "link", "decay", "reinforce",
       "review", "unsupersede", "unlink", "explode", 7)  # fmt: skip


def _event_like(draw: st.DrawFn) -> Any:
    """A JSON value shaped like an event: a valid one with any metadata (what processing
    meets), or one with fields deleted or of the wrong type (what validation meets)."""
    kind = draw(st.sampled_from(["explicit", "prompt", "response", "memory_op", "config_change",
                                 "correction", "search_confirmation", "show_app", "probe",
                                 "session_start", "session_end", "tool_result", "stop"]))  # fmt: skip
    base = make_event(kind, draw(texts), session_id=draw(st.sampled_from(["fuzz", "cli-ops"])))
    base["metadata"] = draw(st.dictionaries(st.sampled_from(META_KEYS), json_values, max_size=5))
    if kind == "memory_op" and draw(st.booleans()):
        kwargs = draw(st.dictionaries(
            st.sampled_from(["ident", "old", "by", "with_text", "a", "b", "link_type", "ids",
                             "decision", "factor", "boost", "pinned", "text", "title", "type"]),
            json_values, max_size=4,
        ))  # fmt: skip
        base["metadata"] = {"op": draw(st.sampled_from(OPS)), "kwargs": kwargs}
    if draw(st.booleans()):
        for key in draw(st.lists(st.sampled_from(sorted(base)), unique=True, max_size=3)):
            if draw(st.booleans()):
                del base[key]
            else:
                base[key] = draw(json_values)
    return base


@st.composite
def inbox_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """A file name and contents, as anything could leave them in the inbox."""
    kind = draw(st.integers(0, 9))  # 6 to 9: an event-like object, what processing meets
    name = f"{draw(st.integers(0, 10**19)):020d}-{uuid.uuid4()}.json"
    if kind == 0:
        return name, draw(st.binary(max_size=300))
    if kind == 1:
        return name, json.dumps(draw(json_values)).encode("utf-8", "surrogatepass")
    if kind == 2:
        return name, b"[" * draw(st.integers(900, 100_000))
    if kind == 3:
        return name, b'{"event_id": ' + b"9" * draw(st.integers(4_301, 10_000)) + b"}"
    if kind == 4:  # a lone surrogate, escaped: valid JSON, no UTF-8 form
        event = make_event("explicit", "caf\\ud83d", session_id="fuzz")
        return name, json.dumps(event).replace("caf\\\\ud83d", "caf\\ud83d").encode()
    if kind == 5:
        return draw(st.sampled_from(["x.json", "notes.json", f"{uuid.uuid4()}.json"])), (
            json.dumps(make_event("explicit", "a valid event under a wrong name")).encode()
        )
    # ASCII escapes keep lone surrogates valid JSON ("\\ud800"); raw, they are not UTF-8.
    text = json.dumps(_event_like(draw), ensure_ascii=draw(st.booleans()))
    return name, text.encode("utf-8", "surrogatepass")


def test_the_drain_survives_anything_in_the_inbox(service: CaptureService, tmp_path: Path) -> None:
    """Fuzzed files beside one good event: the drain never raises; every file is taken
    in or quarantined (with an audit entry); the good event is always taken in."""
    inbox = service.inbox
    probe = Inbox(tmp_path / "probe")  # where a file's validity is judged independently
    probe.ensure()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)  # fmt: skip
    @given(st.lists(inbox_files(), min_size=1, max_size=4))
    def one(files: list[tuple[str, bytes]]) -> None:
        for old in inbox.quarantined():
            old.unlink()
        good = make_event("explicit", f"The fuzz run {uuid.uuid4()} logs to /var/log/fuzz.")
        inbox.write(good)
        contents = dict(files)
        for name, data in contents.items():
            (inbox.folder / name).write_bytes(data)
        service.drain()  # never raises
        assert not [p for p in inbox.folder.iterdir() if p.is_file()], "something was left"
        assert service.journal.seen([good["event_id"]]) == {good["event_id"]}
        moved = {p.name for p in inbox.quarantined()}
        audited = {
            e.candidate_id
            for e in service.journal.audit_entries(decision="quarantined", limit=100_000)
        }
        assert moved <= audited
        for name, data in contents.items():
            if name in moved:
                continue
            (probe.folder / name).write_bytes(data)
            try:
                event = probe.read(probe.folder / name)
            except BadEvent as exc:
                raise AssertionError(f"{name} ({exc.reason}) was not quarantined") from None
            finally:
                (probe.folder / name).unlink()
            assert service.journal.seen([event["event_id"]]), f"{name}: not taken in"

    one()
