"""``lexmem-hook``: the command agents call on every hook event (standard library only).

    lexmem-hook claude            Claude Code hook payload on stdin
    lexmem-hook codex [PAYLOAD]   Codex CLI hook payload on stdin, or the older
                                  ``notify`` form with one JSON argument
    lexmem-hook event             seed 003's generic event contract on stdin

It turns the payload into inbox events and returns. It never fails or stalls the
agent: whatever goes wrong, it exits 0 and writes one line to ``logs/hook.log``.
Before anything touches disk it honours opt-out (a ``.lexmem-optout`` file in the
repository or any parent, or the repository in the settings' opt-out list), the
capture mode and the allowed paths, and it redacts secrets. On SessionStart it
prints the project's context digest (unless the repository is opted out), and
starts ``lexmem serve`` when no service is running, so capture works without the
tray.

Constraint: this module and everything it imports are standard library only and
import in a few milliseconds (a test checks); the agent waits for it. What only
some events need (``subprocess``, ``hashlib``, ``select``, ``uuid``, ``datetime``,
the lock probe, and the redaction rules, which an opted-out or ignored event never
reaches) is imported where it is used, and nothing here imports ``typing``,
``dataclasses`` or ``contextlib`` at run time: each would add milliseconds to every
call (the settings are read through :func:`~lexmem.config.load_capture_rules`, which
builds no dataclass).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

from .config import CaptureRules, Paths, load_capture_rules, resolve_paths, secure_umask
from .inbox import EVENT_VERSION, BadEvent, Inbox, make_event, now_iso, validate_event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any

    from .config import CaptureSettings

    # What the hook applies: the full settings' section, or the rules it reads itself.
    Capture = CaptureSettings | CaptureRules

__all__ = [
    "OPTOUT_MARKER",
    "capture_mode",
    "digest_path",
    "events_from_codex_notify",
    "events_from_generic",
    "events_from_hook",
    "is_opted_out",
    "is_paused",
    "last_assistant_message",
    "main",
    "opted_out_event",
    "optout_rules",
    "project_opted_out",
    "project_root",
    "run",
    "service_running",
    "start_service",
    "tool_paths",
]

OPTOUT_MARKER = ".lexmem-optout"
ADAPTERS = ("claude", "codex", "event")
MAX_INPUT_BYTES = 64 * 1024 * 1024
# An agent writes its payload at once and closes the pipe; one that does not must not
# hold the hook (and so itself) hostage.
STDIN_BUDGET_SECONDS = 3.0
# What one event keeps of a field: tool output can be megabytes; memories need the gist.
MAX_CONTENT_CHARS = 100_000
MAX_META_CHARS = 8_000
# A field is redacted this far past its cut before it is cut, so a secret that straddles
# the cut is replaced whole instead of leaving a prefix no rule recognises any more.
CLIP_MARGIN_CHARS = 8_192
# Tool responses nest; nothing a person reads is deeper than this.
MAX_TEXT_DEPTH = 32
TRANSCRIPT_TAIL_BYTES = 2 * 1024 * 1024
DIGEST_MAX_BYTES = 1024 * 1024
LOG_MAX_BYTES = 1024 * 1024
SLOW_SECONDS = 1.0
# Payload fields kept as metadata when present; the one-line description of a tool call;
# the status fields of a tool response.
_META_KEYS = ("permission_mode", "turn_id", "model", "source", "reason", "trigger",
              "transcript_path")  # fmt: skip
_DESCRIBE_KEYS = ("command", "file_path", "path", "notebook_path", "url", "pattern", "query",
                  "prompt")  # fmt: skip
_STATUS_KEYS = ("exit_code", "exitCode", "returncode", "interrupted", "is_error", "success")


# -- where, and whether, to capture ---------------------------------------------


def _resolved(path: str | Path) -> Path:
    p = Path(path).expanduser()
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p


def _small_text(path: Path) -> str | None:
    """The first line of a small git bookkeeping file, or None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None
    return head.splitlines()[0].strip() if head.strip() else None


def _core_worktree(git_dir: Path) -> Path | None:
    """``core.worktree`` of a git directory's config (a submodule's git dir has it)."""
    try:
        with open(git_dir / "config", "rb") as fh:
            text = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return None
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().lower()
        elif section == "core" and "=" in line:
            key, _, value = line.partition("=")
            if key.strip().lower() == "worktree" and value.strip():
                found = Path(value.strip().strip('"')).expanduser()
                return _resolved(found if found.is_absolute() else git_dir / found)
    return None


def _main_worktree(folder: Path) -> Path | None:
    """The main repository's root when ``folder`` is a linked worktree, else None.

    A ``git worktree add`` checkout has a ``.git`` *file* ("gitdir: /main/.git/worktrees/NAME")
    whose folder holds a ``commondir`` file pointing at the main ``.git``. A submodule's
    ``.git`` file points at ``.git/modules/NAME``, which has no ``commondir``: it keeps
    its own root. Read from the files rather than asked of git: the hook runs on every
    agent event and a subprocess would cost more than the rest of it.
    """
    line = _small_text(folder / ".git")
    if not line or not line.startswith("gitdir:"):
        return None
    git_dir = Path(line[len("gitdir:") :].strip()).expanduser()
    if not git_dir.is_absolute():
        git_dir = folder / git_dir
    common = _small_text(git_dir / "commondir")
    if not common:
        return None
    common_dir = Path(common).expanduser()
    common_dir = _resolved(common_dir if common_dir.is_absolute() else git_dir / common_dir)
    if not common_dir.is_dir():
        return None  # the main repository moved or was deleted: the worktree stands alone
    if common_dir.name == ".git":
        return common_dir.parent
    # A bare repository, or a submodule's git dir (a worktree of a submodule): its
    # configured checkout when it has one, else the git dir itself names the project.
    return _core_worktree(common_dir) or common_dir


def _real(path: str) -> str:
    """``path`` absolute, links resolved (as strings: pathlib costs the hook time on every event)."""
    expanded = os.path.expanduser(path)
    try:
        return os.path.realpath(expanded)
    except (OSError, ValueError):
        return os.path.abspath(expanded)


def _chain(folder: str) -> Iterator[str]:
    """``folder`` and every folder above it."""
    while True:
        yield folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _git_root(start: str) -> str | None:
    """The repository root at or above the real path ``start`` (a worktree's: its main one)."""
    for folder in _chain(start):
        try:
            mode = os.stat(os.path.join(folder, ".git")).st_mode  # one check per folder
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            return folder
        main = _main_worktree(Path(folder))
        return str(main) if main is not None else folder
    return None


def project_root(cwd: str | None) -> str | None:
    """The repository root above ``cwd`` (a ``.git`` entry), else ``cwd`` itself.

    A linked worktree maps to its main repository, so its memories, digest and opt-out
    are the repository's; a submodule keeps its own root.
    """
    if not cwd:
        return None
    start = _real(cwd)
    return _git_root(start) or start


def _under(path: str, roots: Iterable[str]) -> bool:
    """``path`` is one of ``roots`` or inside one; a named project only matches its name."""
    if not Path(path).expanduser().is_absolute():
        return path in roots
    p = _resolved(path)
    for root in roots:
        if not Path(root).expanduser().is_absolute():
            continue  # a named project, not a folder
        r = _resolved(root)
        if p == r or r in p.parents:
            return True
    return False


def is_opted_out(cwd: str | None, capture: Capture) -> bool:
    """Opted out by a marker file in ``cwd`` or any parent, or by the settings' list.

    Inside a linked worktree the main repository's marker (committed or not) and
    settings entry hold too: a worktree is the same repository checked out elsewhere.
    """
    if not cwd:
        return False
    start = _real(cwd)
    places = [start]
    root = _git_root(start)
    if root is not None and not _within(start, root):
        places.append(root)
    seen: set[str] = set()
    for place in places:
        for folder in _chain(place):
            if folder in seen:
                break  # the rest of this chain was checked from the other place
            seen.add(folder)
            if os.path.exists(os.path.join(folder, OPTOUT_MARKER)):
                return True
    return bool(capture.optout) and any(_under(place, capture.optout) for place in places)


# Tool input fields that name a file or folder the tool reads or writes (Read, Edit,
# Write, NotebookEdit, Grep, Glob, ...).
_PATH_KEYS = ("file_path", "path", "notebook_path")
# How much of a shell command is searched for absolute paths, and how many are checked:
# a heredoc can be megabytes, and each path costs a few file system checks.
_COMMAND_SCAN_CHARS = 4096
_COMMAND_MAX_PATHS = 16


def tool_paths(tool_input: Any, cwd: str | None = None) -> list[str]:
    """The files and folders a tool call names: its path fields, and the absolute paths
    in a shell command (``cat /other/repo/.env``). Relative paths are taken from ``cwd``."""
    if not isinstance(tool_input, dict):
        return []
    found = [v for v in (tool_input.get(k) for k in _PATH_KEYS) if isinstance(v, str) and v]
    command = tool_input.get("command")
    if isinstance(command, str):
        for token in command[:_COMMAND_SCAN_CHARS].split():
            token = token.strip("'\"`;|&<>(){}")
            if token.startswith(("/", "~/")) and len(found) < _COMMAND_MAX_PATHS:
                found.append(token)
    out = []
    for path in found:
        p = Path(path).expanduser()
        if not p.is_absolute():
            if not cwd:
                continue
            p = Path(cwd).expanduser() / p
        out.append(str(p))
    return out


def _opted_out(
    cwd: str | None, project: str | None, capture: Capture, paths: Sequence[str] = ()
) -> bool:
    """An event is dropped when where it happened, its project, or a file its tool
    touched lies in an opted-out repository (an agent elsewhere reading a file in one)."""
    if cwd and is_opted_out(cwd, capture):
        return True
    if any(is_opted_out(p, capture) for p in paths):
        return True
    if not project:
        return False
    if project in capture.optout:
        return True
    if not os.path.isabs(os.path.expanduser(project)):
        return False
    # The usual project is the repository around ``cwd``: that chain was just checked.
    return not (cwd and _within(_real(cwd), _real(project))) and is_opted_out(project, capture)


def opted_out_event(event: Mapping[str, Any], capture: Capture) -> bool:
    """An inbox event that belongs to an opted-out repository (the service asks this at
    drain time: the repository may have been opted out since the event was queued)."""
    meta = event.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    cwd, project = _str(event.get("cwd")), _str(event.get("project"))
    return _opted_out(cwd, project, capture, tool_paths(meta.get("tool_input"), cwd))


def _payload_paths(adapter: str, payload: Mapping[str, Any], cwd: str | None) -> list[str]:
    """The paths a payload's tool call names (a wrapper's event keeps them in metadata)."""
    holder = payload.get("metadata") if adapter == "event" else payload
    return tool_paths(holder.get("tool_input"), cwd) if isinstance(holder, dict) else []


def project_opted_out(project: str | None, capture: Capture) -> bool:
    """A memory's project (a repository root or a name) is opted out."""
    return bool(project) and _opted_out(None, project, capture)


def optout_rules(paths: Paths, capture: Capture | None = None) -> CaptureRules:
    """The opt-outs as they stand now, for a long-lived process: the settings file, which
    another process (``lexmem optout add``, the tray) may have changed since this one
    read it, and ``capture``, this process's own settings. An unreadable file raises
    :class:`~lexmem.errors.ConfigError`: then the opt-outs cannot be known."""
    rules = load_capture_rules(paths)
    if capture is not None:
        rules.optout = [*rules.optout, *(p for p in capture.optout if p not in rules.optout)]
    return rules


def _allowed(cwd: str | None, project: str | None, capture: Capture) -> bool:
    """With ``allow_paths`` set, only sessions in (or below) one of them are captured."""
    if not capture.allow_paths:
        return True
    return any(p and _under(p, capture.allow_paths) for p in (cwd, project))


def is_paused(capture: Capture, now: str | None = None) -> bool:
    """Capture paused by the user (tray: "Pause for 1 hour" or "until resumed").

    ``paused_until`` is a UTC time as "YYYY-MM-DDTHH:MM:SSZ", so plain string order is time order.
    """
    until = capture.paused_until
    if not until:
        return False
    if now is None:
        import time as _time

        now = _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime())
    return bool(now < until)


def capture_mode(project: str | None, capture: Capture) -> str:
    """The mode for a project: its override if one is set (the most specific), else the global mode."""
    mode = capture.mode
    if project:
        if project in capture.project_modes:
            mode = capture.project_modes[project]
        else:
            best = ""
            for root, root_mode in capture.project_modes.items():
                if len(root) > len(best) and _under(project, [root]):
                    best, mode = root, root_mode
    return mode.strip().lower()


def digest_path(paths: Paths, project: str | None) -> Path:
    """Where the service keeps a project's context digest."""
    # The interpreter's built-in SHA-256 when it has one: ``hashlib`` loads OpenSSL
    # (~3 ms of every SessionStart). The digest is the same either way.
    try:
        from _sha2 import sha256  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256

    key = sha256((project or "").encode("utf-8")).hexdigest()[:16]
    return paths.digests / f"{key}.md"


def service_running(paths: Paths) -> bool:
    """True when a process holds the service lock (the lock is released if it dies).

    The probe only reads: it neither creates the lock file nor writes its own pid
    into it, so it never disturbs what a person reading the file sees.
    """
    try:
        fd = os.open(paths.service_lock, os.O_RDONLY)
    except OSError:
        return False  # no lock file: no service ever ran on this data folder
    try:
        if os.name == "nt":  # pragma: no cover - Windows only
            from .locks import FileLock, LockTimeout

            probe = FileLock(paths.service_lock, timeout=0)
            try:
                probe.acquire()
            except LockTimeout:
                return True
            probe.release()
            return False
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


def start_service(paths: Paths) -> None:
    """Start ``lexmem serve`` detached: it outlives the hook and the agent's session."""
    import subprocess

    name = "lexmem.exe" if os.name == "nt" else "lexmem"
    # In a bundle, sys.executable is this lexmem-hook's absolute path (argv[0] may be the
    # bare name PATH found), and lexmem is its sibling.
    here = sys.executable if getattr(sys, "frozen", False) else (sys.argv[0] if sys.argv else "")
    exe = Path(here).with_name(name) if here else None
    cmd = [str(exe), "serve"] if exe and exe.exists() else [sys.executable, "-m", "lexmem", "serve"]
    env = dict(os.environ, LEXMEM_HOME=str(paths.home))
    kwargs: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "env": env,
        "cwd": str(paths.home),  # not the agent's repository: a daemon must not pin it
        "close_fds": True,
    }
    if os.name == "nt":  # pragma: no cover - Windows only
        kwargs["creationflags"] = 0x00000008 | 0x00000200  # DETACHED_PROCESS | NEW_PROCESS_GROUP
    else:
        kwargs["start_new_session"] = True
    subprocess.Popen(cmd, **kwargs)


# -- payload to events ------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    from .redact import redact

    head = redact(text[: limit + CLIP_MARGIN_CHARS]).text[:limit]
    # Said, never silent: the reader sees how much was left out.
    return f"{head}\n[… {len(text) - limit} more characters not captured]"


def _json(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def _text(value: Any, depth: int = 0) -> str:
    """Readable text from a tool response or message content (str, list of parts, dict)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if depth >= MAX_TEXT_DEPTH:
        return ""
    if isinstance(value, list):
        return "\n".join(t for t in (_text(v, depth + 1) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "content", "output", "stdout", "result", "message"):
            if key in value and value[key] not in (None, ""):
                parts = [_text(value[key], depth + 1)]
                if key == "stdout" and value.get("stderr"):
                    parts.append(_text(value["stderr"], depth + 1))
                return "\n".join(p for p in parts if p)
        return _json(value) or ""
    return str(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _small(value: Any) -> Any:
    """A metadata value small enough to keep (long strings clipped, big objects summarised)."""
    if isinstance(value, str):
        return _clip(value, MAX_META_CHARS)
    text = _json(value)
    if text is None:
        return "[not captured: not representable as JSON]"
    if len(text) <= MAX_META_CHARS:
        return value
    return _clip(text, MAX_META_CHARS)


def _tool_input(value: Any) -> Any:
    """A tool's input for metadata: small fields whole, only the big ones clipped."""
    if isinstance(value, dict):
        return {str(k): _small(v) for k, v in value.items()}
    return _small(value)


def describe_tool_call(tool: str, tool_input: Any) -> str:
    """One line a person (and the extractor) can read: "Bash: pytest -q", "Edit: src/app.py"."""
    if isinstance(tool_input, dict):
        for key in _DESCRIBE_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return f"{tool}: {value}"
    return f"{tool}: {_text(tool_input)}"


def _transcript_message(entry: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """(role, message id, content) of a transcript line, or None for other lines.

    Claude Code lines: ``{"type": "assistant", "message": {"role", "id", "content"}}``;
    Codex rollout lines: ``{"type": "response_item", "payload": {"type": "message", ...}}``.
    Sub-agent (sidechain) and injected (meta) lines are not the conversation.
    """
    if entry.get("isSidechain") or entry.get("isMeta"):
        return None
    inner = entry.get("message")
    if not isinstance(inner, dict) and entry.get("type") == "response_item":
        inner = entry.get("payload")
    if not isinstance(inner, dict):
        return None
    role = inner.get("role") or entry.get("type")
    if not isinstance(role, str):
        return None
    return role, inner.get("id"), inner.get("content")


def _parts_text(content: Any, kinds: tuple[str, ...]) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in kinds]
    return "\n".join(t for t in texts if isinstance(t, str) and t)


def last_assistant_message(transcript_path: str | None) -> str:
    """The final assistant text of the current turn in a transcript (JSONL), read from its tail.

    Claude Code writes one line per content block, so a message's text parts may sit on
    several consecutive lines sharing one message id; they are joined in order. Tool-use
    parts are not text. A user prompt after the last assistant text means the turn's
    answer is not written yet: then nothing is returned rather than the previous answer.
    """
    if not transcript_path:
        return ""
    try:
        with open(Path(transcript_path).expanduser(), "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TRANSCRIPT_TAIL_BYTES))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    texts: list[str] = []
    message_id: Any = None
    for line in reversed(tail.splitlines()):
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        found = _transcript_message(entry) if isinstance(entry, dict) else None
        if found is None:
            continue
        role, ident, content = found
        if texts:  # collecting the rest of the same message
            if role != "assistant" or ident != message_id:
                break
            text = _parts_text(content, ("text", "output_text"))
            if text:
                texts.append(text)
            continue
        if role == "assistant":
            text = _parts_text(content, ("text", "output_text"))
            if text.strip():
                texts.append(text)
                message_id = ident
                if ident is None:
                    break  # no id: the line is the whole message
        elif role == "user" and _parts_text(content, ("text", "input_text")).strip():
            return ""  # a prompt after the last answer: this turn's answer is not written yet
    return "\n".join(reversed(texts))


CLAUDE_EVENTS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "prompt",
    "PreToolUse": "tool_call",
    "PostToolUse": "tool_result",
    "PostToolUseFailure": "tool_result",
    "Stop": "response",
    "SubagentStop": "response",
    "SessionEnd": "session_end",
    "PreCompact": "compact",
}
# Events agents send that carry nothing worth remembering: ignored without a log line.
IGNORED_EVENTS = frozenset(
    {"Notification", "PermissionRequest", "SubagentStart", "PostCompact", "StopFailure"}
)
# What a wrapper may send through ``lexmem-hook event``: seed 003's four and the lifecycle,
# and ``probe`` (``lexmem doctor``'s test event: the service records it, nothing else).
GENERIC_EVENT_TYPES = frozenset(
    {"prompt", "response", "tool_call", "tool_result", "session_start", "session_end", "probe"}
)
_GENERIC_ID_NAMESPACE = "5c1d0b3e-3f0e-4b5e-9a59-6c65786d656d"  # uuid5 namespace


def events_from_hook(payload: Mapping[str, Any], agent: str) -> list[dict[str, Any]]:
    """Claude Code (and Codex hook) payloads to inbox events."""
    name = payload.get("hook_event_name")
    event_type = CLAUDE_EVENTS.get(name) if isinstance(name, str) else None
    if event_type is None:
        return []
    session = _str(payload.get("session_id")) or f"{agent}-unknown"
    cwd = _str(payload.get("cwd"))
    meta: dict[str, Any] = {"hook_event_name": name}
    for key in _META_KEYS:
        if payload.get(key) is not None:
            meta[key] = _small(payload[key])
    content = ""
    if event_type == "prompt":
        content = _text(payload.get("prompt"))
    elif event_type in ("tool_call", "tool_result"):
        tool = str(payload.get("tool_name") or "tool")
        meta["tool_name"] = tool
        meta["tool_input"] = _tool_input(payload.get("tool_input"))
        if payload.get("tool_use_id") is not None:
            meta["tool_use_id"] = str(payload["tool_use_id"])
        if event_type == "tool_call":
            content = describe_tool_call(tool, payload.get("tool_input"))
        elif name == "PostToolUseFailure":
            # Claude Code reports failed tool calls here, not in PostToolUse.
            content = _text(payload.get("error")) or _text(payload.get("tool_response"))
            meta["is_error"] = True
            if payload.get("is_interrupt") is not None:
                meta["is_interrupt"] = bool(payload.get("is_interrupt"))
        else:
            response = payload.get("tool_response")
            content = _text(response)
            if isinstance(response, dict):
                for key in _STATUS_KEYS:
                    if key in response and isinstance(response[key], (int, bool)):
                        meta[key] = response[key]
    elif event_type == "response":
        meta["stop_hook_active"] = bool(payload.get("stop_hook_active"))
        content = _text(payload.get("last_assistant_message"))
        if name == "SubagentStop":
            # The main transcript's last answer is not the sub-agent's: read only its own.
            meta["subagent"] = True
            for key in ("agent_id", "agent_type"):
                if payload.get(key) is not None:
                    meta[key] = _small(payload[key])
            transcript = payload.get("agent_transcript_path")
        else:
            transcript = payload.get("transcript_path")
        if not content.strip():
            content = last_assistant_message(_str(transcript))
        if not content.strip():
            return []
    elif event_type == "compact" and payload.get("custom_instructions"):
        meta["custom_instructions"] = _small(payload["custom_instructions"])
    return [
        make_event(
            event_type,
            _clip(content, MAX_CONTENT_CHARS),
            session_id=session,
            agent=agent,
            cwd=cwd,
            metadata=meta,
        )
    ]


def events_from_codex_notify(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The older Codex ``notify`` program form: one agent-turn-complete object."""
    if payload.get("type") != "agent-turn-complete":
        return []
    session = _str(payload.get("thread-id")) or _str(payload.get("thread_id")) or "codex-unknown"
    cwd = _str(payload.get("cwd"))
    meta: dict[str, Any] = {"turn_id": _small(payload.get("turn-id")), "notify": True}
    if payload.get("client") is not None:
        meta["client"] = _small(payload["client"])
    inputs = payload.get("input-messages") or []
    prompt = "\n".join(_text(m) for m in inputs) if isinstance(inputs, list) else _text(inputs)
    answer = _text(payload.get("last-assistant-message"))
    out = []
    for event_type, text in (("prompt", prompt), ("response", answer)):
        if text.strip():
            out.append(make_event(event_type, _clip(text, MAX_CONTENT_CHARS), session_id=session,
                                  agent="codex", cwd=cwd, metadata=meta))  # fmt: skip
    return out


def events_from_generic(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Seed 003's event contract, as any wrapper would send it; :class:`BadEvent` if invalid.

    An ``event_id`` that is not a UUID (``"e1"``) becomes a UUID derived from it and the
    session, so a wrapper that replays an event still produces the same id; the original
    is kept as ``metadata.source_event_id``.
    """
    import uuid

    data = dict(payload)
    data.setdefault("v", EVENT_VERSION)
    data.setdefault("agent", "generic")
    data.setdefault("timestamp", now_iso())
    meta = data.setdefault("metadata", {})
    if isinstance(meta, dict):
        meta = data["metadata"] = dict(meta)
        data.setdefault("project", meta.get("project"))
        data.setdefault("cwd", meta.get("cwd"))
    event_id = data.get("event_id")
    if isinstance(event_id, str) and event_id.strip():
        try:
            # The canonical form: the inbox names files after it (lowercase, hyphenated).
            data["event_id"] = str(uuid.UUID(event_id))
        except ValueError:
            data["event_id"] = str(
                uuid.uuid5(
                    uuid.UUID(_GENERIC_ID_NAMESPACE), f"{data.get('session_id')}\0{event_id}"
                )
            )
            if isinstance(meta, dict):
                meta["source_event_id"] = _small(event_id)
    event = validate_event(data)
    if event["event_type"] not in GENERIC_EVENT_TYPES:
        raise BadEvent(
            f"event_type {event['event_type']!r} is not one an agent may send "
            f"(use {', '.join(sorted(GENERIC_EVENT_TYPES))})"
        )
    event["content"] = _clip(event["content"], MAX_CONTENT_CHARS)
    return [event]


def _events(adapter: str, payload: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The events a payload makes, and the problem to log when it makes none it should."""
    if adapter == "event":
        try:
            return events_from_generic(payload), None
        except BadEvent as exc:
            return [], f"event: invalid event, nothing captured: {exc.reason}"
    if adapter == "codex" and "hook_event_name" not in payload and "type" in payload:
        return events_from_codex_notify(payload), None  # other notify types carry no turn
    name = payload.get("hook_event_name")
    if isinstance(name, str) and name in IGNORED_EVENTS:
        return [], None
    if not (isinstance(name, str) and name in CLAUDE_EVENTS):
        return [], f"{adapter}: unknown hook_event_name {name!r}, nothing captured"
    return events_from_hook(payload, agent=adapter), None


# -- the command -------------------------------------------------------------------


class _Log:
    """One line per problem in logs/hook.log; the hook itself stays silent."""

    def __init__(self, paths: Paths | None) -> None:
        self.paths = paths
        self.lines = 0

    def write(self, message: str) -> None:
        if self.paths is None:
            return
        self.lines += 1
        try:
            from .redact import redact

            line = redact(message[:20_000]).text.replace("\n", " ").replace("\r", " ")[:2000]
            line = f"{now_iso()} {line}\n"
            folder = self.paths.logs
            with secure_umask():  # the data folder itself may be created here: owner-only
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                file = folder / "hook.log"
                if file.exists() and file.stat().st_size > LOG_MAX_BYTES:
                    os.replace(file, folder / "hook.log.1")
                fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with os.fdopen(fd, "ab") as fh:
                    fh.write(line.encode("utf-8", errors="backslashreplace"))
        except Exception:  # noqa: BLE001 - nowhere left to report to; the agent must still go on
            return


def _read_stdin(deadline: float) -> bytes | None:
    """All of stdin, or None when the writer keeps it open past ``deadline``.

    A terminal (a person trying the command) gives nothing rather than a wait.
    """
    stream = sys.stdin
    if stream is None:
        return b""
    try:
        if stream.isatty():
            return b""
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return b""
    if os.name != "posix":  # pragma: no cover - Windows pipes cannot be polled with select
        return stream.buffer.read(MAX_INPUT_BYTES + 1)
    import select

    chunks: list[bytes] = []
    size = 0
    while size <= MAX_INPUT_BYTES:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _payload(
    adapter: str,
    argv: Sequence[str],
    stdin: bytes | None,
    started: float,
    log: _Log,
    notes: list[str],
) -> dict[str, Any] | None:
    """The payload as a JSON object, or None (and one log line) when there is none."""
    if adapter == "codex" and len(argv) > 1:
        # notify: Codex appends the JSON as the last argument.
        raw: bytes | None = os.fsencode(argv[-1])
        source = "argument"
    else:
        raw = stdin if stdin is not None else _read_stdin(started + STDIN_BUDGET_SECONDS)
        source = "stdin"
    if raw is None:
        log.write(f"{adapter}: stdin still open after {STDIN_BUDGET_SECONDS:g}s, nothing captured")
        return None
    if len(raw) > MAX_INPUT_BYTES:
        log.write(f"{adapter}: payload larger than {MAX_INPUT_BYTES} bytes, nothing captured")
        return None
    if not raw.strip():
        log.write(f"{adapter}: empty payload on {source}, nothing captured")
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        notes.append(
            f"{adapter}: payload is not valid UTF-8 (byte {exc.start}); bad bytes replaced"
        )
    try:
        payload = json.loads(text.removeprefix("\ufeff"))
    except RecursionError:
        log.write(f"{adapter}: JSON payload nested too deeply, nothing captured")
        return None
    except ValueError as exc:
        log.write(f"{adapter}: malformed JSON payload ({exc}), nothing captured")
        return None
    if not isinstance(payload, dict):
        log.write(
            f"{adapter}: payload is a JSON {type(payload).__name__}, not an object; nothing captured"
        )
        return None
    return payload


def _where(adapter: str, payload: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The session's working folder and project (a wrapper may name its project)."""
    meta = payload.get("metadata") if adapter == "event" else None
    meta = meta if isinstance(meta, dict) else {}
    cwd = _str(payload.get("cwd")) or _str(meta.get("cwd"))
    named = (
        (_str(payload.get("project")) or _str(meta.get("project"))) if adapter == "event" else None
    )
    return cwd, named or project_root(cwd)


def run(argv: Sequence[str], stdin: bytes | None = None, out: Any = None) -> int:
    """The hook's work; returns the exit code (always 0) — separate from main() for tests."""
    started = time.monotonic()
    log = _Log(None)
    try:
        paths = resolve_paths()
        log = _Log(paths)
        _run(paths, argv, stdin, out if out is not None else sys.stdout, log, started)
    except Exception as exc:  # noqa: BLE001 - the agent must never see the hook fail
        log.write(f"hook failed: {type(exc).__name__}: {exc}")
    finally:
        elapsed = time.monotonic() - started
        if elapsed > SLOW_SECONDS and not log.lines:  # a problem already logged says why
            log.write(f"slow hook: {elapsed:.2f}s")
    return 0


def _run(
    paths: Paths, argv: Sequence[str], stdin: bytes | None, out: Any, log: _Log, started: float
) -> None:
    adapter = argv[0] if argv else ""
    if adapter in ("-h", "--help"):
        _emit(out, (__doc__ or "").split("\n\n")[1] + "\n")
        return
    if adapter not in ADAPTERS:
        log.write(f"unknown adapter {adapter!r} (use claude, codex or event), nothing captured")
        return
    notes: list[str] = []
    payload = _payload(adapter, argv, stdin, started, log, notes)
    if payload is None:
        return
    cwd, project = _where(adapter, payload)
    try:
        capture: CaptureRules | None = load_capture_rules(paths)
        settings_error = ""
    except Exception as exc:  # noqa: BLE001 - unreadable settings: we cannot know the opt-outs
        capture, settings_error = None, f"{type(exc).__name__}: {exc}"
    # Opt-out comes before anything is written, a log line included: an opted-out
    # repository leaves no trace at all.
    if _opted_out(cwd, project, capture or CaptureRules(), _payload_paths(adapter, payload, cwd)):
        return
    if capture is None:
        log.write(f"settings unreadable, nothing captured: {settings_error}")
        return
    events, problem = _events(adapter, payload)
    for note in [*notes, problem]:
        if note:
            log.write(note)
    if not events:
        return
    starting = events[0]["event_type"] == "session_start"
    if starting:
        _print_digest(paths, project, out, log)
    if not _allowed(cwd, project, capture) or capture_mode(project, capture) == "off":
        return
    if is_paused(capture):
        return
    inbox = Inbox(paths.inbox)
    for event in events:
        event["project"] = project
        try:
            _write(inbox, event)
        except OSError as exc:  # a full or read-only disk: the inbox holds no half event
            log.write(f"{adapter}: cannot write to the inbox ({exc.strerror or exc}); "
                      f"{event['event_type']} event not captured")  # fmt: skip
            return
    if starting and not service_running(paths):
        try:
            start_service(paths)
        except OSError as exc:
            log.write(f"could not start `lexmem serve`: {exc}")


def _flatten(value: Any, depth: int = 0) -> Any:
    """A metadata value with what nests deeper than two levels as clipped JSON text."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict) and depth < 2:
        return {str(k): _flatten(v, depth + 1) for k, v in value.items()}
    text = _json(value)
    return _clip(text, MAX_META_CHARS) if text is not None else "[not captured: nested too deeply]"


def _write(inbox: Inbox, event: dict[str, Any]) -> None:
    """Redact, then write one event."""
    from .redact import redact_obj

    try:
        clean, count = redact_obj(event)
    except RecursionError:
        meta = event.get("metadata")
        if isinstance(meta, dict):
            event["metadata"] = _flatten(meta)
        clean, count = redact_obj(event)
    if count and isinstance(clean.get("metadata"), dict):
        clean["metadata"]["redactions"] = count
    try:
        inbox.write(clean)
    except UnicodeEncodeError:
        # A lone surrogate ("\ud83d" from a cut emoji) is valid JSON but not UTF-8.
        inbox.write(_scrub(clean))


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _emit(out: Any, text: str) -> None:
    """Write to the agent: UTF-8 bytes whatever the locale says stdout's encoding is."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        buffer.write(text.encode("utf-8", errors="replace"))
        buffer.flush()
    else:
        out.write(text)
        out.flush()


def _print_digest(paths: Paths, project: str | None, out: Any, log: _Log) -> None:
    if not project:
        return
    # The project's own digest; in a folder with no memories yet, the general one
    # (memories kept with no project: the person's preferences and habits).
    text = ""
    for file in (digest_path(paths, project), digest_path(paths, None)):
        try:
            with open(file, "rb") as fh:
                text = fh.read(DIGEST_MAX_BYTES).decode("utf-8", errors="replace")
            break
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.write(f"digest unreadable: {exc}")
            return
    if not text.strip():
        return
    try:
        _emit(out, text if text.endswith("\n") else text + "\n")
    except (OSError, ValueError) as exc:  # the agent closed our stdout: capture still goes on
        log.write(f"could not print the digest: {type(exc).__name__}: {exc}")


def main() -> None:
    """Console entry point: ``lexmem-hook ADAPTER``. Always exits 0."""
    code = run(sys.argv[1:])
    try:  # noqa: SIM105 - not contextlib.suppress: importing contextlib costs every call
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed stdout is the agent's business
        pass
    os._exit(code)  # skip interpreter teardown: the agent is waiting
