"""Security, systematically: owner-only modes, no secret at rest, no socket, no key in a file.

One realistic workload runs through the real entry points, each a subprocess under a
permissive umask (022) so that every mode on disk is one lexmem set itself: ``lexmem
remember``, the ``lexmem-hook`` command fed a Claude Code session, valid events a wrapper
wrote into the inbox itself (unredacted), ``lexmem ingest``, ``lexmem serve`` with bad
inbox files to quarantine, a watched Markdown folder, the MCP server saving a memory
through the SDK's client, then ``search``, ``digest``, ``export``, ``optout add`` (a
settings change), ``audit`` and ``doctor``; both logs rotate on the way. Every channel
carries its own planted secrets (FAKE, built at run time from a seeded generator: no
string here looks like a live credential) and a harmless canary that must reach disk,
so a clean scan cannot come from a channel that wrote nothing. The workload is shared by
the module's permission and secret tests.

The socket tests run ``lexmem serve``, ``lexmem mcp`` and ``lexmem app`` (offscreen), each
under the same umask, read their sockets from ``/proc`` and check their data folder's
modes. The key tests enter a licence key and an LLM API key as a person would (the CLI,
the licence window, the settings window) with the in-memory keyring of tests/conftest.py,
and scan every file for them.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import signal
import stat
import string
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lexmem import licence as lic_mod
from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.capture.redact import redact
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.licence import WRITER_PRO, encode_token
from lexmem.llm import LlmClient, LlmError
from lexmem.locks import FileLock, service_running
from lexmem.settings import load_settings

pytestmark = pytest.mark.skipif(os.name != "posix", reason="owner-only modes and /proc are POSIX")

LEXMEM = Path(sys.executable).with_name("lexmem")
HOOK = Path(sys.executable).with_name("lexmem-hook")
TIMEOUT = 180.0  # a ceiling for one command on a busy machine, never a measurement
WAIT = 120.0
WAIT_MS = 60_000

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


# -- fake secrets ------------------------------------------------------------------------


def _fake(rng: random.Random, alphabet: str, n: int) -> str:
    """Random text from ``alphabet`` that mixes lower case, upper case and digits when it can."""
    chars = [rng.choice(alphabet) for _ in range(n)]
    for i, pool in enumerate((string.ascii_lowercase, string.ascii_uppercase, string.digits)):
        allowed = sorted(set(pool) & set(alphabet))
        if allowed and not set(chars) & set(pool):
            chars[(i * 7 + 3) % n] = rng.choice(allowed)
    return "".join(chars)


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def secret_set(seed: int) -> dict[str, str]:
    """One of each kind the issue names, every value unique to ``seed``."""
    rng = random.Random(seed)
    jwt = ".".join((
        _b64url({"kid": _fake(rng, ALNUM, 16), "alg": "HS256", "typ": "JWT"}),  # unique head
        _b64url({"sub": _fake(rng, string.digits, 10), "name": "Test User", "iat": 1516239022}),
        _fake(rng, URLSAFE, 43),
    ))  # fmt: skip
    return {
        "aws_access_key_id": "AK" + "IA" + _fake(rng, UPPER_DIGITS, 16),
        "aws_secret_access_key": _fake(rng, B64, 40),
        "github_token": "gh" + "p_" + _fake(rng, ALNUM, 36),
        "slack_token": "xo" + "xb-" + _fake(rng, string.digits, 12) + "-" + _fake(rng, ALNUM, 24),
        "private_key": "\n".join(_fake(rng, B64, 64) for _ in range(4)),
        "jwt": jwt,
        "url_password": "Pw-" + _fake(rng, ALNUM, 18),
        "openai_api_key": "sk" + "-" + _fake(rng, ALNUM, 48),
        "password": "Pa55-" + _fake(rng, ALNUM, 18),
    }


def leak_text(s: dict[str, str], canary: str) -> str:
    """What an agent session or a note holds when someone pastes a .env and a key."""
    return (
        f"Deploy notes for {canary}: staging reads its credentials from .env.\n"
        f"export AWS_ACCESS_KEY_ID={s['aws_access_key_id']}\n"
        f"export AWS_SECRET_ACCESS_KEY={s['aws_secret_access_key']}\n"
        f"GITHUB_TOKEN={s['github_token']}\n"
        f"SLACK_BOT_TOKEN={s['slack_token']}\n"
        f"OPENAI_API_KEY={s['openai_api_key']}\n"
        f"DATABASE_URL=postgres://app:{s['url_password']}@db.internal:5432/app\n"
        f"password={s['password']}\n"
        f"curl -H 'Authorization: Bearer {s['jwt']}' https://api.internal/v1/deploy\n"
        f"-----BEGIN RSA PRIVATE KEY-----\n{s['private_key']}\n-----END RSA PRIVATE KEY-----\n"
    )


def needles(s: dict[str, str]) -> dict[str, list[bytes]]:
    """Per kind, the byte strings that must not be anywhere: each whole value (each line of
    a key), and its first and last 20 characters, which catch a value cut short by a
    message that quotes it, or whose prefix alone was replaced."""
    return {
        kind: [
            part.encode() for line in value.splitlines() for part in (line, line[:20], line[-20:])
        ]
        for kind, value in s.items()
    }


def canary(channel: str) -> str:
    return f"canary{channel.replace('_', '')}{uuid.uuid4().hex[:12]}"


# -- processes and files -------------------------------------------------------------------


def permissive(cmd: Sequence[str | Path]) -> list[str]:
    """``cmd`` under umask 022: whatever comes out owner-only, lexmem made so."""
    return ["/bin/sh", "-c", 'umask 022 && exec "$0" "$@"', *(str(c) for c in cmd)]


def isolated_env(home: Path, user_home: Path) -> dict[str, str]:
    """tests/conftest.py's isolation, for processes that outlive one test function."""
    env = dict(os.environ)
    for key in ("LEXMEM_LICENCE", "LEXMEM_LICENCE_FILE", "LEXMEM_DEBUG", "DISPLAY",
                "WAYLAND_DISPLAY"):  # fmt: skip
        env.pop(key, None)
    user_home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(user_home),
        LEXMEM_HOME=str(home),
        XDG_DATA_HOME=str(user_home / ".local" / "share"),
        XDG_CONFIG_HOME=str(user_home / ".config"),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    return env


def wait_for(condition: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM (what a logout sends), then SIGKILL if it will not go; never left running."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def every_file(*roots: Path) -> Iterator[Path]:
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                yield path


def leaks(sources: dict[str, bytes], planted: dict[str, dict[str, str]]) -> list[str]:
    """One line per channel that leaked: the kinds found, and where (case-insensitively).

    A table's data files are named by their table (``store/memories_v1.lance/…``).
    """
    lowered = {where: data.lower() for where, data in sources.items()}
    lines = []
    for channel, secrets in planted.items():
        kinds, places = [], []
        for kind, patterns in needles(secrets).items():
            hits = [w for w, data in lowered.items() if any(p.lower() in data for p in patterns)]
            if hits:
                kinds.append(kind)
                places += [w for w in dict.fromkeys(map(_place, hits)) if w not in places]
        if kinds:
            lines.append(f"{channel}: {', '.join(kinds)} in {', '.join(places)}")
    return lines


def _place(where: str) -> str:
    parts = Path(where).parts
    if "lexmem" in parts or "export" in parts:
        root = parts.index("lexmem") if "lexmem" in parts else parts.index("export")
        parts = parts[root + (1 if parts[root] == "lexmem" else 0) :]
        lance = [i for i, part in enumerate(parts) if part.endswith(".lance")]
        return "/".join(parts[: lance[0] + 1]) + "/…" if lance else "/".join(parts)
    return where


def mode_offenders(*roots: Path) -> list[str]:
    """Every folder not 0700 and file not 0600 under ``roots`` (and the roots themselves)."""
    bad = []
    for root in roots:
        for path in [root, *sorted(root.rglob("*"))]:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
            if stat.S_IMODE(st.st_mode) != want:
                bad.append(f"{oct(stat.S_IMODE(st.st_mode))} {path} (want {oct(want)})")
    return bad


# -- the workload --------------------------------------------------------------------------

CHANNELS = (
    "remember", "hook", "hook_log", "inbox_raw", "quarantine", "quarantine_reason", "notes", "mcp",
)  # fmt: skip


@dataclass
class Workload:
    """A data folder after a day's work through every entry point, and what went in."""

    base: Path
    home: Path
    export: Path
    repo: Path
    env: dict[str, str]
    planted: dict[str, dict[str, str]] = field(default_factory=dict)
    canaries: dict[str, str] = field(default_factory=dict)
    inbox_before_drain: dict[str, bytes] = field(default_factory=dict)
    outputs: dict[str, bytes] = field(default_factory=dict)

    def run(
        self,
        name: str,
        cmd: Sequence[str | Path],
        *,
        stdin: bytes = b"",
        codes: tuple[int, ...] = (0,),
    ) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            permissive(cmd), input=stdin, capture_output=True, env=self.env, cwd=self.repo,
            timeout=TIMEOUT, check=False,
        )  # fmt: skip
        self.outputs[f"<stdout of {name}>"] = proc.stdout
        self.outputs[f"<stderr of {name}>"] = proc.stderr
        assert proc.returncode in codes, f"{name}: exit {proc.returncode}: {proc.stderr[-2000:]!r}"
        return proc

    def hook(self, name: str, payload: Any, *args: str) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        proc = self.run(f"lexmem-hook {name}", [HOOK, *(args or ("claude",))], stdin=data)
        assert proc.stderr == b"", proc.stderr

    def claude(self, event: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": "5b1e2c3d-4f50-4a6b-8c7d-9e0f1a2b3c4d",
            "transcript_path": str(self.base / "transcripts" / "session.jsonl"),
            "cwd": str(self.repo), "permission_mode": "default", "hook_event_name": event,
            **fields,
        }  # fmt: skip


def _hook_session(w: Workload) -> None:
    """A Claude Code session whose prompt, tool input, tool output and answer hold secrets."""
    s, c = w.planted["hook"], w.canaries["hook"]
    w.hook("SessionStart", w.claude("SessionStart", source="startup"))
    w.hook("UserPromptSubmit", w.claude("UserPromptSubmit", prompt=(
        f"We always deploy staging with `make deploy-staging`. Here is the .env:\n{leak_text(s, c)}"
    )))  # fmt: skip
    command = (
        f"AWS_SECRET_ACCESS_KEY={s['aws_secret_access_key']} aws s3 ls && "
        f"curl -H 'Authorization: Bearer {s['jwt']}' https://api.internal/v1/deploy"
    )
    tool_input = {"command": command, "description": "Deploy"}
    w.hook("PreToolUse", w.claude("PreToolUse", tool_name="Bash", tool_use_id="toolu_01",
                                  tool_input=tool_input))  # fmt: skip
    w.hook("PostToolUse", w.claude(
        "PostToolUse", tool_name="Bash", tool_use_id="toolu_02",
        tool_input={"command": "cat .env", "description": "Show the environment"},
        tool_response={"stdout": leak_text(s, c), "stderr": "", "interrupted": False},
    ))  # fmt: skip
    w.hook("Stop", w.claude("Stop", stop_hook_active=False, last_assistant_message=(
        f"Staging deploys with `make deploy-staging`. I rotated the token: the new one is "
        f"{s['github_token']} and the database password is {s['password']}."
    )))  # fmt: skip
    w.hook("SessionEnd", w.claude("SessionEnd", reason="prompt_input_exit"))


def _hook_failures(w: Workload) -> None:
    """Payloads the hook cannot use: each becomes one hook.log line, quoting what it got."""
    s, c = w.planted["hook_log"], w.canaries["hook_log"]
    w.hook("unknown event", w.claude(f"{c} GITHUB_TOKEN={s['github_token']}"))
    w.hook("invalid event", {
        "session_id": "s-1", "event_id": "e-1", "content": leak_text(s, c),
        "event_type": f"export OPENAI_API_KEY={s['openai_api_key']}",
    }, "event")  # fmt: skip
    w.hook("malformed", ('{"type": "agent-turn-complete", "input-messages": ["'
                         + leak_text(s, c).replace("\n", " ")).encode(), "codex")  # fmt: skip
    # hook.log rotates past 1 MiB: grow it (as months of lines would), then log once more.
    log = w.home / "logs" / "hook.log"
    with open(log, "ab") as fh:
        fh.write(b"2026-01-01T00:00:00+00:00 filler line standing in for old problems\n" * 16_000)
    w.hook("unknown event after rotation", w.claude(f"{c} password={s['password']}"))


def _raw_events(w: Workload) -> None:
    """Valid events from a producer that does not redact (a wrapper writing the inbox itself):
    the single writer is the last place a secret can be stopped."""
    inbox = Inbox(w.home / "inbox")
    text = leak_text(w.planted["inbox_raw"], w.canaries["inbox_raw"])
    for event_type in ("explicit", "prompt", "session_end"):
        content = "" if event_type == "session_end" else text
        inbox.write(make_event(event_type, content, session_id="wrapper-1", agent="wrapper",
                               cwd=str(w.repo), project=str(w.repo)))  # fmt: skip


def _quarantine_files(w: Workload) -> list[Path]:
    """Two inbox files the service must set aside: broken JSON, and an unknown event type."""
    inbox = Inbox(w.home / "inbox")
    s, c = w.planted["quarantine"], w.canaries["quarantine"]
    first = f"{time.time_ns():020d}-{uuid.uuid4()}.json"
    broken = '{"v": 1, "event_type": "prompt", "content": ' + json.dumps(leak_text(s, c))[:-40]
    r = w.planted["quarantine_reason"]
    second = f"{time.time_ns():020d}-{uuid.uuid4()}.json"
    unknown = make_event("prompt", leak_text(r, w.canaries["quarantine_reason"]), session_id="s-q")
    unknown["event_type"] = f"GITHUB_TOKEN={r['github_token']}"
    paths = []
    for name, text in ((first, broken), (second, json.dumps(unknown))):
        fd = os.open(inbox.folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        paths.append(inbox.folder / name)
    return paths


async def _mcp_save(w: Workload) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command="/bin/sh", args=permissive([sys.executable, "-m", "lexmem", "mcp"])[1:],
        env=w.env, cwd=str(w.repo),
    )  # fmt: skip
    with open(w.base / "mcp.stderr", "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(WAIT):
                await session.initialize()
                text = leak_text(w.planted["mcp"], w.canaries["mcp"])
                saved = await session.call_tool("save_memory", {"text": text, "project": "infra"})
                assert not saved.is_error, saved.content
                found = await session.call_tool("search_memory", {"query": "deploy staging"})
                assert not found.is_error, found.content
                w.outputs["<mcp replies>"] = json.dumps(
                    [saved.structured_content, found.structured_content]
                ).encode()


def _serve_phase(w: Workload) -> None:
    """``lexmem serve`` running: it quarantines, takes a watched folder, and stores MCP saves."""
    # lexmem.log rotates past 5 MB: grow it as a long-running service would have.
    log = w.home / "logs" / "lexmem.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "ab") as fh:
        fh.write(b"2026-01-01 00:00:00,000 INFO lexmem.capture filler standing in for old lines\n"
                 * 70_000)  # fmt: skip
    paths = Paths(w.home)
    with open(w.base / "serve.stderr", "wb") as err:
        serve = subprocess.Popen(
            permissive([LEXMEM, "serve"]), env=w.env, cwd=w.base, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        try:
            wait_for(lambda: service_running(paths), "lexmem serve to take the service lock")
            bad = _quarantine_files(w)
            quarantine = Inbox(paths.inbox).quarantine

            def both_aside() -> bool:
                aside = len(list(quarantine.glob("*.json"))) == len(bad)
                return aside and not any(p.exists() for p in bad)

            wait_for(both_aside, "the service to quarantine both files")
            notes = w.base / "notes"
            notes.mkdir()
            (notes / "deploy.md").write_text(
                f"# Staging deploy\n\nHow staging is deployed.\n\n```\n"
                f"{leak_text(w.planted['notes'], w.canaries['notes'])}```\n", encoding="utf-8"
            )  # fmt: skip
            w.run("lexmem watch add", [LEXMEM, "watch", "add", notes])
            anyio.run(_mcp_save, w)
        finally:
            stop(serve)
    w.outputs["<stderr of lexmem serve>"] = (w.base / "serve.stderr").read_bytes()
    w.outputs["<stderr of lexmem mcp>"] = (w.base / "mcp.stderr").read_bytes()


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    base = tmp_path_factory.mktemp("security")
    repo = base / "work" / "shop-api"
    (repo / ".git").mkdir(parents=True)
    w = Workload(
        base=base, home=base / "lexmem", export=base / "export", repo=repo.resolve(),
        env=isolated_env(base / "lexmem", base / "userhome"),
    )  # fmt: skip
    w.env["LEXMEM_DEBUG"] = "1"  # the most lexmem ever says: tracebacks instead of one line
    # The premise of every mode check: these processes start with a permissive umask.
    probe = [sys.executable, "-c", "import os; print(oct(os.umask(0)))"]
    assert subprocess.run(permissive(probe), capture_output=True, text=True, check=True,
                          timeout=TIMEOUT).stdout.strip() == "0o22"  # fmt: skip
    for i, channel in enumerate(CHANNELS):
        w.planted[channel] = secret_set(1000 + i)
        w.canaries[channel] = canary(channel)
        # The premise: redact.py knows every kind planted here, in the form it is planted.
        cleaned = redact(leak_text(w.planted[channel], w.canaries[channel])).text.encode()
        missed = leaks({"redact()": cleaned}, {channel: w.planted[channel]})
        assert not missed, f"redact.py misses a planted kind: {missed}"

    remember = leak_text(w.planted["remember"], w.canaries["remember"])
    w.run(
        "lexmem remember", [LEXMEM, "remember", "-", "--project", "demo"], stdin=remember.encode()
    )
    # The hook runs while the service lock is held (as by a running service, so SessionStart
    # starts no daemon), and its events wait in the inbox to be read as they were written.
    lock = FileLock(Paths(w.home).service_lock, timeout=0)
    lock.acquire()
    try:
        _hook_session(w)
        _hook_failures(w)
    finally:
        lock.release()
    w.inbox_before_drain = {str(p): p.read_bytes() for p in (w.home / "inbox").glob("*.json")}
    assert len(w.inbox_before_drain) >= 6, sorted(w.inbox_before_drain)
    _raw_events(w)
    w.run("lexmem ingest", [LEXMEM, "ingest"])
    _serve_phase(w)
    w.run("lexmem watch scan", [LEXMEM, "watch", "scan"])
    w.run("lexmem ingest (after serve)", [LEXMEM, "ingest"])
    w.run("lexmem search", [LEXMEM, "search", "deploy", "staging", "--json"])
    w.run("lexmem digest", [LEXMEM, "digest", "--project", str(w.repo)])
    w.run("lexmem export", [LEXMEM, "export", w.export])
    w.run("lexmem optout add", [LEXMEM, "optout", "add", w.base / "work" / "private-repo"])
    w.run("lexmem audit", [LEXMEM, "audit", "--json", "--limit", "1000"])
    w.run("lexmem doctor", [LEXMEM, "doctor"], codes=(0, 1))  # 1: a check failed (said why)
    return w


def test_the_mode_check_names_every_offender(tmp_path: Path) -> None:
    """The check below is not blind: a loose folder and a loose file are both named."""
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    root.chmod(0o700)
    (root / "sub").chmod(0o755)
    (root / "sub" / "a.json").write_text("{}")
    (root / "sub" / "a.json").chmod(0o644)
    (root / "b.txt").write_text("ok")
    (root / "b.txt").chmod(0o600)
    (root / "link").symlink_to("/etc/hostname")  # a link's own mode means nothing
    named = [(line.split()[0], Path(line.split()[1]).name) for line in mode_offenders(root)]
    assert named == [("0o755", "sub"), ("0o644", "a.json")]


def test_every_file_is_0600_and_every_folder_0700(workload: Workload) -> None:
    home = workload.home
    # The workload reached every corner it is meant to: both logs rotated, a quarantine,
    # digests, a settings file, an export, the store's tables.
    for expected in ("logs/hook.log.1", "logs/lexmem.log.1", "logs/lexmem.log", "settings.toml",
                     "trial.json", "store/meta.json", "service.lock"):  # fmt: skip
        assert (home / expected).is_file(), expected
    assert list((home / "inbox" / "quarantine").glob("*.json"))
    assert list((home / "digests").glob("*.md"))
    assert list(workload.export.iterdir())
    offenders = mode_offenders(home, workload.export)
    assert not offenders, "not owner-only:\n" + "\n".join(offenders)


def test_no_planted_secret_is_anywhere_in_the_data_folder_or_the_output(
    workload: Workload,
) -> None:
    files = {str(p): p.read_bytes() for p in every_file(workload.home, workload.export)}
    # Each channel reached disk (so a clean scan means redacted, not absent).
    everything = b"\n".join(files.values())
    store = b"\n".join(d for p, d in files.items() if "/store/" in p)
    quarantined = b"\n".join(d for p, d in files.items() if "/quarantine/" in p)
    hook_logs = b"\n".join(d for p, d in files.items() if "/logs/hook.log" in p)
    inbox = b"\n".join(workload.inbox_before_drain.values())
    c = {k: v.encode() for k, v in workload.canaries.items()}
    reached = {
        "remember in the store": c["remember"] in store,
        "mcp in the store": c["mcp"] in store,
        "notes in the store": c["notes"] in store,
        "hook in the inbox": c["hook"] in inbox,
        "inbox_raw in the store": c["inbox_raw"] in store,
        "hook_log in hook.log": c["hook_log"] in hook_logs,
        "quarantine in the quarantine": c["quarantine"] in quarantined,
        "quarantine_reason in the quarantine": c["quarantine_reason"] in quarantined,
    }
    assert all(reached.values()), reached
    assert b"[REDACTED:" in hook_logs and b"[REDACTED:" in quarantined and b"[REDACTED:" in store
    assert everything.count(b"[REDACTED:") > 20

    found = leaks({**files, **workload.outputs}, workload.planted)
    assert not found, "planted secrets found:\n" + "\n".join(found)


def test_the_hook_wrote_no_secret_into_the_inbox(workload: Workload) -> None:
    """The hook redacts before it writes: not even the spool ever held a secret."""
    found = leaks(workload.inbox_before_drain, workload.planted)
    assert not found, "planted secrets in inbox files:\n" + "\n".join(found)


# -- no listening sockets ----------------------------------------------------------------

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads sockets from Linux's /proc"
)


def _ppid(pid: int) -> int | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat_line.rsplit(")", 1)[1].split()[1])


def family(root: int) -> set[int]:
    """``root`` and every process descended from it."""
    parents = {int(p): _ppid(int(p)) for p in os.listdir("/proc") if p.isdigit()}
    found = {root}
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def socket_inodes(pids: set[int]) -> dict[str, int]:
    """Socket inode -> the process holding it."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes[link[8:-1]] = pid
    return inodes


def listening(pids: set[int], home: Path | None = None) -> list[str]:
    """Every listening TCP or unix socket, and every bound UDP or raw socket, of ``pids``;
    but the service's reader socket in the data folder ``home`` (DESIGN.md allows exactly
    that one: a Unix-domain socket, 0600, in the 0700 folder)."""
    allowed = {str(home / "reader.sock")} if home is not None else set()
    inodes = socket_inodes(pids)
    net = Path(f"/proc/{min(pids)}/net")
    bad = []
    for proto in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        try:
            rows = (net / proto).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if inode not in inodes:
                continue
            if not proto.startswith("tcp") or state == "0A":  # 0A: TCP_LISTEN
                bad.append(f"pid {inodes[inode]}: {proto} {local} (state {state})")
    for row in (net / "unix").read_text().splitlines()[1:]:
        cols = row.split()
        flags, inode = int(cols[3], 16), cols[6]
        if inode in inodes and flags & 0x10000:  # __SO_ACCEPTCON: listen() was called
            where = cols[7] if len(cols) > 7 else "(unnamed)"
            # A deep data folder's socket is bound through /proc/self/fd/N/reader.sock.
            if where in allowed or (
                allowed and re.fullmatch(r"/proc/self/fd/\d+/reader\.sock", where)
            ):
                assert home is not None
                mode = stat.S_IMODE(os.lstat(home / "reader.sock").st_mode)
                assert mode == 0o600, f"the reader socket is {mode:o}, not 600"
                continue
            bad.append(f"pid {inodes[inode]}: unix {where}")
    return bad


@linux_only
def test_the_socket_reader_sees_listening_sockets() -> None:
    """The check below is not blind: this process's own listeners show up."""
    import socket

    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        before = set(listening({os.getpid()}))  # other tests' servers may share this process
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", 0))
        unix.bind("\0lexmem-test-" + uuid.uuid4().hex)
        unix.listen()
        new = set(listening({os.getpid()})) - before
        assert sorted(line.split(": ")[1].split()[0] for line in new) == ["tcp", "udp", "unix"]
    finally:
        for s in (tcp, udp, unix):
            s.close()


def _drained_probe(paths: Paths) -> None:
    """Wait until the service has read an event: its loop, watcher and store are all up."""
    inbox = Inbox(paths.inbox)
    inbox.write(make_event("probe", "is the service up?"))
    wait_for(lambda: not inbox.pending(), "the service to drain a probe event")


@linux_only
def test_lexmem_serve_listens_on_its_reader_socket_only(data_home: Path, tmp_path: Path) -> None:
    paths = Paths(data_home)
    with open(tmp_path / "serve.stderr", "wb") as err:
        proc = subprocess.Popen(
            permissive([LEXMEM, "serve"]), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err, cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_for(lambda: service_running(paths), "lexmem serve to take the service lock")
            _drained_probe(paths)
            assert proc.poll() is None
            assert listening(family(proc.pid), data_home) == []
        finally:
            stop(proc)
    assert mode_offenders(data_home) == []


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@linux_only
@pytest.mark.anyio
@pytest.mark.parametrize("how", ["in-process", "relay"])
async def test_lexmem_mcp_listens_on_nothing_but_the_reader_socket(
    data_home: Path, tmp_path: Path, how: str
) -> None:
    """``python -m lexmem mcp`` serves in its process; ``lexmem mcp`` relays to a service
    it starts, whose one listening socket is the reader socket in the data folder."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    if how == "relay":
        Paths(data_home).ensure()  # the relay serves an existing data folder
    command = [sys.executable, "-m", "lexmem", "mcp"] if how == "in-process" else [LEXMEM, "mcp"]
    params = StdioServerParameters(
        command="/bin/sh", args=permissive(command)[1:], env=dict(os.environ), cwd=str(repo),
    )  # fmt: skip
    with open(tmp_path / "mcp.stderr", "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(WAIT):
                await session.initialize()
                saved = await session.call_tool("save_memory", {"text": "Staging is kiwi"})
                assert not saved.is_error, saved.content
                assert not (await session.call_tool("search_memory", {"query": "kiwi"})).is_error
            servers = [
                pid for pid in family(os.getpid()) - {os.getpid()}
                if b"mcp" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ]  # fmt: skip
            assert len(servers) == 1, servers
            assert listening(family(servers[0]), data_home) == []
            if how == "relay":  # the service it started, and nothing else, listens
                from lexmem.service.registry import services

                started = [s.pid for s in services() if s.home == data_home]
                assert started
                assert listening(set().union(*(family(p) for p in started)), data_home) == []
    if how == "relay":
        from lexmem.service.registry import services

        for s in services():
            if s.home == data_home:
                os.kill(s.pid, 15)
        wait_for(lambda: not service_running(Paths(data_home)), "the service to stop")
    assert mode_offenders(data_home) == []


@linux_only
def test_the_desktop_app_listens_on_its_reader_socket_only(data_home: Path, tmp_path: Path) -> None:
    paths = Paths(data_home)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    with open(tmp_path / "app.stderr", "wb") as err:
        proc = subprocess.Popen(
            permissive([LEXMEM, "app"]), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err, env=env, cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_for(lambda: service_running(paths) or proc.poll() is not None,
                     "the app's in-process service to take the lock")  # fmt: skip
            assert proc.poll() is None, (tmp_path / "app.stderr").read_text()
            _drained_probe(paths)
            assert listening(family(proc.pid), data_home) == []
        finally:
            stop(proc)
    assert proc.returncode == 0, (tmp_path / "app.stderr").read_text()
    assert mode_offenders(data_home) == []


# -- keys live in the keyring, never in a file ------------------------------------------------

LLM_KEY = "sk" + "-" + _fake(random.Random(77), ALNUM, 48)
KID = "security-test-1"


class Vendor:
    """This test's own signing key; lexmem trusts it for the test only."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public = base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def issue(self, licensee: str) -> str:
        now = datetime.now(UTC)
        return encode_token({
            "v": 1, "kid": KID, "licensee": licensee, "email": "ada@example.invalid",
            "tier": WRITER_PRO, "issued": now.isoformat(), "starts": now.isoformat(),
            "expires": (now + timedelta(days=365)).isoformat(),
        }, self.key.sign)  # fmt: skip


class Endpoint(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint on 127.0.0.1: answers while the key is right; then, as
    hosted providers do, a 401 whose body quotes the key it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.authorizations: list[str] = []
        self.reject = False
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: Endpoint

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        auth = self.headers.get("Authorization", "")
        self.server.authorizations.append(auth)
        if self.server.reject:
            status = 401
            body = {"error": {"message": f"Incorrect API key provided: {auth[7:]}",
                              "type": "invalid_request_error"}}  # fmt: skip
        else:
            status = 200
            message = {"role": "assistant", "content": '{"ok": true}'}
            choice = {"message": message, "finish_reason": "stop"}
            body = {"choices": [choice], "usage": {"total_tokens": 12}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_licence_and_llm_keys_reach_the_keyring_and_no_file(
    qtbot: Any, data_home: Path, embedder: Embedder, memory_keyring: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from PySide6.QtCore import Qt

    from ui.context import AppContext
    from ui.licence_dialog import LicenceDialog
    from ui.settings_dialog import SettingsDialog

    vendor = Vendor()
    monkeypatch.setitem(lic_mod.PUBLIC_KEYS, KID, vendor.public)
    typed, pasted = vendor.issue("Ada Typed"), vendor.issue("Ada Pasted")
    from_env = vendor.issue("Ada Environment")
    # 1. The command line: `lexmem licence activate KEY`, and a key in LEXMEM_LICENCE.
    result = CliRunner().invoke(cli, ["licence", "activate", typed], prog_name="lexmem")
    assert result.exit_code == 0, result.output
    assert memory_keyring.secrets[("lexmem", "licence")] == typed
    outputs = []
    for args in (["licence", "show", "--json"], ["status"]):
        result = CliRunner().invoke(cli, args, env={"LEXMEM_LICENCE": from_env})
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert json.loads(outputs[0])["source"] == "key (LEXMEM_LICENCE)"
    assert not [out for out in outputs if from_env in out or typed in out]

    lm = Lexmem.open(data_home, embedder=embedder)
    ctx = AppContext(lm)
    endpoint = Endpoint()
    try:
        # 2. The licence window: a key pasted and activated.
        window = LicenceDialog(ctx)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitUntil(lambda: window.status is not None, timeout=WAIT_MS)
        window.key.setPlainText(pasted)
        qtbot.waitUntil(window.activate_button.isEnabled, timeout=WAIT_MS)
        with qtbot.waitSignal(window.licence_changed, timeout=WAIT_MS):
            window.activate_button.click()
        assert memory_keyring.secrets[("lexmem", "licence")] == pasted

        # 3. The settings window: an endpoint, a model and its API key.
        dialog = SettingsDialog(ctx)
        qtbot.addWidget(dialog)
        qtbot.waitUntil(lambda: "No key stored" in dialog.key_status.text(), timeout=WAIT_MS)
        dialog.llm_url.setText(endpoint.url)
        dialog.llm_url.editingFinished.emit()
        dialog.llm_model.setText("llama3.2")
        dialog.llm_model.editingFinished.emit()
        dialog.api_key.setText(LLM_KEY)
        qtbot.keyClick(dialog.api_key, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: "A key is stored" in dialog.key_status.text(), timeout=WAIT_MS)
        qtbot.waitUntil(lambda: load_settings(lm.paths).llm.model == "llama3.2", timeout=WAIT_MS)
        assert memory_keyring.secrets[("lexmem", "llm-api-key")] == LLM_KEY

        # 4. The key in use: sent as a header, then quoted back in a provider's 401.
        client = LlmClient(load_settings(lm.paths).llm, lm.paths)
        assert client.test()["ok"] is True
        endpoint.reject = True
        with pytest.raises(LlmError):
            client.test()
        assert endpoint.authorizations == [f"Bearer {LLM_KEY}"] * 2
    finally:
        endpoint.shutdown()
        endpoint.server_close()
        ctx.close()
        lm.close()

    settings = lm.paths.settings.read_text(encoding="utf-8")
    assert endpoint.url in settings and "llama3.2" in settings
    assert (lm.paths.home / "llm.json").is_file()
    keys = {"licence key (typed)": typed, "licence key (pasted)": pasted,
            "licence key (LEXMEM_LICENCE)": from_env, "LLM API key": LLM_KEY}  # fmt: skip
    found = [
        f"{path}: {name}"
        for path in every_file(lm.paths.home)
        for name, key in keys.items()
        if key.encode() in path.read_bytes() or key.split(".")[-1].encode() in path.read_bytes()
    ]
    assert not found, "keys found in files:\n" + "\n".join(found)


def _one_line_refusal(proc: subprocess.CompletedProcess[str], key: str) -> None:
    assert proc.returncode != 0, f"accepted: {proc.stdout}"
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("lexmem: error:"), proc.stderr
    assert key not in proc.stderr and key not in proc.stdout


def test_an_api_key_written_into_settings_toml_is_refused_in_one_line(data_home: Path) -> None:
    key = "sk" + "-" + _fake(random.Random(78), ALNUM, 48)
    data_home.mkdir(mode=0o700, parents=True)
    settings = Paths(data_home).settings
    settings.write_text(f'schema_version = 1\n\n[llm]\nurl = "http://127.0.0.1:9/v1"\n'
                        f'api_key = "{key}"\n', encoding="utf-8")  # fmt: skip
    proc = subprocess.run([LEXMEM, "status"], capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)  # fmt: skip
    _one_line_refusal(proc, key)
    assert "unknown setting llm.api_key" in proc.stderr
    # The hook cannot know the opt-outs from such a file: it captures nothing and says why
    # in its log, without the key.
    payload = {
        "session_id": "s", "cwd": str(data_home.parent), "hook_event_name": "UserPromptSubmit",
        "prompt": "We deploy with make deploy",
    }  # fmt: skip
    hook = subprocess.run([HOOK, "claude"], input=json.dumps(payload), capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)  # fmt: skip
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
    log = (data_home / "logs" / "hook.log").read_text(encoding="utf-8")
    assert "settings unreadable" in log and "llm.api_key" in log and key not in log
    assert not list((data_home / "inbox").glob("*.json"))


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_an_llm_url_carrying_a_key_is_refused_in_one_line(data_home: Path, form: str) -> None:
    """A key smuggled into ``[llm] url`` is still a key in the settings file."""
    key = "sk" + "-" + _fake(random.Random(79), ALNUM, 48)
    url = {
        "userinfo": f"https://lexmem:{key}@llm.example.invalid/v1",
        "query": f"https://llm.example.invalid/v1?api_key={key}",
    }[form]
    data_home.mkdir(mode=0o700, parents=True)
    Paths(data_home).settings.write_text(f'schema_version = 1\n\n[llm]\nurl = "{url}"\n',
                                         encoding="utf-8")  # fmt: skip
    proc = subprocess.run([LEXMEM, "status"], capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)  # fmt: skip
    _one_line_refusal(proc, key)
    assert "llm.url" in proc.stderr
