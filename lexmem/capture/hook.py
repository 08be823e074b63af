"""``lexmem-hook``: the command agents call on every hook event (standard library only).

    lexmem-hook claude            Claude Code hook payload on stdin
    lexmem-hook codex [PAYLOAD]   Codex CLI hook payload on stdin, or the older
                                  ``notify`` form with one JSON argument
    lexmem-hook event             seed 003's generic event contract on stdin

It turns the payload into inbox events and returns. A conversation turn records who said
it (``speaker``): a prompt is the person's (``[capture] user_name``, else the login name),
a response the agent's ("Claude", "Codex"); a generic event keeps the speaker it names.
It never fails or stalls the agent: whatever goes wrong, it exits 0 and writes one line
to ``logs/hook.log``.
Before anything touches disk it honours opt-out (a ``.lexmem-optout`` file in the
repository or any parent, or the repository in the settings' opt-out list), the
capture mode and the allowed paths, and it redacts secrets. On SessionStart it
prints the project's context digest (unless the repository is opted out), and
starts ``lexmem serve`` when no service is running, so capture works without the
tray.

It has a hard budget (:data:`HOOK_BUDGET_SECONDS`): stdin is read until a deadline and
a byte cap, a transcript only when it is a regular file and only its tail, and every
text is redacted field by field, cut to what is kept before it is checked; what cannot
be checked in time is dropped, never written unchecked, and the event says so
(``metadata.dropped``, which the service puts in the audit log).

Constraint: this module and everything it imports are standard library only and
import in a few milliseconds (a test checks); the agent waits for it. What only
some events need (``subprocess``, ``hashlib``, ``select``, ``signal``, ``uuid``,
``datetime``, the lock probe, and the redaction rules, which an opted-out or ignored
event never reaches) is imported where it is used, and nothing here imports ``typing``,
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

from lexmem.capture.inbox import EVENT_VERSION, BadEvent, Inbox, make_event, now_iso, validate_event
from lexmem.capture.policy import (
    DROPPED,
    allowed,
    capture_mode,
    is_paused,
    opted_out,
    project_root,
    tool_paths,
)
from lexmem.config import (
    CaptureRules,
    Paths,
    digest_path,
    load_capture_rules,
    resolve_paths,
    secure_umask,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from lexmem.capture.inbox import InboxEvent
    from lexmem.settings import CaptureSettings

    # What the hook applies: the full settings' section, or the rules it reads itself.
    Capture = CaptureSettings | CaptureRules

__all__ = [
    "events_from_codex_notify",
    "events_from_generic",
    "events_from_hook",
    "last_assistant_message",
    "main",
    "run",
    "start_service",
]

ADAPTERS = ("claude", "codex", "event")
# What one call may take: reading, redacting, all of it (but the inbox's fsync) within
# HOOK_BUDGET_SECONDS of starting. What could not be redacted by then is dropped, and
# the event says so. An agent writes its payload at once and closes the pipe; one that
# does not (or never stops writing) must not hold the hook, and so itself, hostage.
HOOK_BUDGET_SECONDS = 0.8
STDIN_BUDGET_SECONDS = 0.5
LOG_BUDGET_SECONDS = 0.2
# Agents' payloads are kilobytes (Claude Code cuts tool output at 30,000 characters);
# the cap is there so that parsing what comes stays a fraction of the budget.
MAX_INPUT_BYTES = 16 * 1024 * 1024
# What one event keeps of a field: tool output can be megabytes; memories need the gist.
MAX_CONTENT_CHARS = 100_000
MAX_META_CHARS = 8_000
# A session id, a folder, a project; a mapping's key.
MAX_IDENT_CHARS = 4_096
MAX_KEY_CHARS = 1_000
MAX_FIELDS = 1_000  # of one mapping
LOG_LINE_CHARS = 2_000
# A field is redacted this far past its cut before it is cut, so a secret that straddles
# the cut is replaced whole instead of leaving a prefix no rule recognises any more.
CLIP_MARGIN_CHARS = 8_192
# Tool responses nest; nothing a person reads is deeper than this.
MAX_TEXT_DEPTH = 32
# The last answer is at a transcript's end: only this much of it is read.
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
# Who says an agent's responses (the ``speaker`` of its response events).
AGENT_NAMES = {"claude": "Claude", "codex": "Codex"}


def _payload_paths(adapter: str, payload: Mapping[str, Any], cwd: str | None) -> list[str]:
    """The paths a payload's tool call names (a wrapper's event keeps them in metadata)."""
    holder = payload.get("metadata") if adapter == "event" else payload
    return tool_paths(holder.get("tool_input"), cwd) if isinstance(holder, dict) else []


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


# -- redaction inside the budget ----------------------------------------------------
#
# Everything an event keeps from a payload or a transcript is redacted where it is
# taken, field by field, before it is joined into text or serialised: JSON text of a
# structure turns a newline into the two characters "\n", which glues a value to the
# next line's words and hides it from the rules. Each text is cut to what the event
# keeps (plus a margin, so a secret across the cut is still replaced whole) before it
# is redacted, and the whole redaction has a deadline: checked between fields, and
# enforced inside one slow call by an alarm. What cannot be checked in time is not
# written at all; the event says so (``metadata.dropped``).

_NESTED = "[not captured: nested too deeply]"


class _TooLarge(BaseException):
    """Redaction did not finish inside the hook's budget.

    A BaseException, as KeyboardInterrupt is: the budget's alarm raises it wherever the
    redaction rules happen to be, and no ``except Exception`` on the way may swallow it.
    """


def _expired(signum: int, frame: Any) -> None:
    raise _TooLarge


def _arm(seconds: float) -> Any:
    """An alarm that raises :class:`_TooLarge` in ``seconds``; what :func:`_disarm` needs.

    ``re`` matching is C code that the interpreter checks for signals between calls,
    so a rule that is slow on some text is cut short where it is. None where there is
    no alarm (Windows; a thread other than the main one): then the checks between
    fields are the budget.
    """
    try:
        import signal

        previous = signal.signal(signal.SIGALRM, _expired)
    except (ImportError, AttributeError, ValueError, OSError):
        return None
    # A timer someone else set (a test runner's) is put back afterwards, not lost.
    old = signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    return signal, previous, old, time.monotonic()


def _disarm(armed: Any) -> None:
    if armed is None:
        return
    signal, previous, (delay, interval), since = armed
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    if delay > 0:
        signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - since), 0.001),
                         interval)  # fmt: skip


def _note(text: str, more: int) -> str:
    # Said, never silent: the reader sees how much was left out.
    return f"{text}\n[… {more} more characters not captured]"


def _clip(text: str, limit: int) -> str:
    """Redacted text cut to ``limit`` characters."""
    return text if len(text) <= limit else _note(text[:limit], len(text) - limit)


class _Redactor:
    """Redacts what one event keeps, within ``deadline`` (``time.monotonic()``; None: no
    deadline) and ``count``\\ s what it replaced. ``kept`` holds the identifying fields
    already redacted, for the event that says its content was dropped."""

    __slots__ = ("count", "deadline", "kept")

    def __init__(self, deadline: float | None = None) -> None:
        self.count = 0
        self.deadline = deadline
        self.kept: dict[str, Any] = {}

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _TooLarge

    def text(self, value: str, limit: int) -> str:
        """``value`` redacted and cut to ``limit`` characters."""
        from lexmem.capture.redact import redact

        self.check()
        result = redact(value[: limit + CLIP_MARGIN_CHARS], budget=True)
        self.count += result.count
        if len(value) <= limit:
            return result.text
        return _note(result.text[:limit], len(value) - limit)

    def ident(self, name: str, value: Any) -> str | None:
        """An identifying string (session, folder, project) redacted, and kept in ``kept``."""
        if not (isinstance(value, str) and value):
            return None
        self.kept[name] = clean = self.text(value, MAX_IDENT_CHARS)
        return clean

    def obj(self, value: Any, limit: int, *, leaf: int | None = None, each: bool = False,
            key: str | None = None) -> Any:  # fmt: skip
        """A JSON value redacted field by field, as ``redact_obj`` would (a value under a
        secret-like key is replaced whole), keeping about ``limit`` characters of it and
        at most ``leaf`` of any one string; with ``each``, every entry of a mapping gets
        ``limit`` of its own. ``key``: the key it sits under, which the rules may weigh."""
        leaf = leaf or limit
        if each and isinstance(value, dict):
            return self._dict(value, None, leaf, 0, key, each=limit)
        return self._walk(value, [limit], leaf, 0, key)

    def _walk(self, value: Any, room: list[int], leaf: int, depth: int, key: str | None) -> Any:
        if isinstance(value, str):
            limit = max(min(leaf, room[0]), 0)
            room[0] -= min(len(value), limit) + 2
            return self.text(value, limit)
        if value is None or isinstance(value, (bool, int, float)):
            room[0] -= 8
            return value
        if depth >= MAX_TEXT_DEPTH:
            room[0] -= len(_NESTED)
            return _NESTED
        if isinstance(value, dict):
            return self._dict(value, room, leaf, depth, key)
        if isinstance(value, (list, tuple)):
            return self._list(value, room, leaf, depth)
        return self._walk(str(value), room, leaf, depth, key)

    def _dict(self, value: dict[Any, Any], room: list[int] | None, leaf: int, depth: int,
              key: str | None, each: int = 0) -> Any:  # fmt: skip
        from lexmem.capture.redact import redact, redact_obj

        order: list[tuple[str, bool]] = []  # (key, is a container)
        scalars: dict[str, Any] = {}
        limits: dict[str, tuple[int, int]] = {}  # a string's limit and original length
        nested: dict[str, tuple[str, Any]] = {}
        left = 0
        for k, v in value.items():
            cell = [each] if each else room
            assert cell is not None
            if cell[0] <= 0 or len(order) >= MAX_FIELDS:
                left = len(value) - len(order)
                break
            name = str(k)[:MAX_KEY_CHARS]
            cell[0] -= len(name) + 4
            if isinstance(v, (dict, list, tuple)) and depth + 1 < MAX_TEXT_DEPTH:
                self.check()
                clean_key = redact(name, budget=True)
                self.count += clean_key.count
                nested[name] = (clean_key.text, self._walk(v, cell, leaf, depth + 1, name))
                order.append((name, True))
                continue
            if isinstance(v, str):
                limit = max(min(leaf, cell[0]), 0)
                cell[0] -= min(len(v), limit)
                limits[name] = (limit, len(v))
                v = v[: limit + CLIP_MARGIN_CHARS]
            elif isinstance(v, (dict, list, tuple)):
                v = _NESTED
            elif not (v is None or isinstance(v, (bool, int, float))):
                v = str(v)[:leaf]
            scalars[name] = v
            order.append((name, False))
        clean: dict[str, tuple[Any, Any]] = {}
        if scalars:
            # One call for a mapping's scalars: the rules see each key with its value, and
            # under the key this mapping sits in (a "secrets" mapping is secret throughout).
            self.check()
            done, count = redact_obj({key: scalars} if key is not None else scalars, budget=True)
            inner = next(iter(done.values())) if key is not None else done
            if not isinstance(inner, dict):
                return inner  # the rules replaced the mapping whole
            self.count += count
            if len(inner) == len(scalars):
                clean = dict(zip(scalars, inner.items(), strict=True))
            else:  # two keys redacted alike: one by one, so neither value is lost
                for name, v in scalars.items():
                    self.check()
                    one, count = redact_obj({name: v}, budget=True)
                    self.count += count
                    clean[name] = next(iter(one.items()))
        out: dict[str, Any] = {}
        for name, container in order:
            if container:
                new_key, new_value = nested[name]
            else:
                new_key, new_value = clean[name]
                if name in limits and isinstance(new_value, str):
                    limit, length = limits[name]
                    if length > limit:
                        new_value = _note(new_value[:limit], length - limit)
            out[new_key] = new_value
        if left:
            out["…"] = f"{left} more fields not captured"
        return out

    def _list(self, value: list[Any] | tuple[Any, ...], room: list[int], leaf: int,
              depth: int) -> list[Any]:  # fmt: skip
        if len(value) > 1 and all(isinstance(v, str) and "\n" not in v for v in value):
            # Lines (a diff's, a file's): redacted as the text they are, in one call, so
            # a secret over several lines (a PEM block) is seen whole.
            size, taken = 0, 0
            for v in value:
                if size > room[0] + CLIP_MARGIN_CHARS:
                    break
                size += len(v) + 1
                taken += 1
            limit = max(room[0], 0)
            lines = self.text("\n".join(value[:taken]), limit).split("\n")
            room[0] -= min(size, limit) + 2 * taken
            if taken < len(value):
                lines.append(f"[… {len(value) - taken} more items not captured]")
            return lines
        out: list[Any] = []
        for i, v in enumerate(value):
            if room[0] <= 0:
                out.append(f"[… {len(value) - i} more items not captured]")
                break
            out.append(self._walk(v, room, leaf, depth + 1, None))
        return out


# -- payload to events ------------------------------------------------------------


def _json(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def _text(value: Any, depth: int = 0) -> str:
    """Readable text from a tool response or message content (str, list of parts, dict).

    Given what :class:`_Redactor` returned: a structure without a text field becomes
    JSON only once each of its fields is redacted.
    """
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


def describe_tool_call(tool: str, tool_input: Any, redactor: _Redactor | None = None) -> str:
    """One line a person (and the extractor) can read: "Bash: pytest -q", "Edit: src/app.py".

    ``tool`` is already redacted; ``tool_input`` is redacted here.
    """
    r = redactor if redactor is not None else _Redactor()
    if isinstance(tool_input, dict):
        for key in _DESCRIBE_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return _clip(f"{tool}: {r.text(value, MAX_CONTENT_CHARS)}", MAX_CONTENT_CHARS)
    return _clip(f"{tool}: {_text(r.obj(tool_input, MAX_CONTENT_CHARS))}", MAX_CONTENT_CHARS)


def _transcript_tail(path: str) -> str:
    """The last :data:`TRANSCRIPT_TAIL_BYTES` of a transcript, whole lines only; "" when
    ``path`` is not a regular file.

    Opened without blocking (a FIFO would wait for a writer for ever) and checked on the
    open descriptor, so what is read is what was checked: a FIFO, a device (``/dev/zero``
    never ends), a socket, a folder, or a link to one, is not read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(os.path.expanduser(path), flags | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        size = st.st_size
        start = max(0, size - TRANSCRIPT_TAIL_BYTES)
        os.lseek(fd, start, os.SEEK_SET)
        chunks: list[bytes] = []
        left = size - start  # a file still growing is read to the size it had
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if start > 0:  # the first line is cut: only whole lines are parsed
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
    return data.decode("utf-8", errors="replace")


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
    tail = _transcript_tail(transcript_path)
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
# Tools whose calls are the agent's own plumbing, not work: Claude Code waits for its MCP
# servers (WaitForMcpServers) and loads deferred tools' schemas (ToolSearch).
INTERNAL_TOOLS = frozenset({"WaitForMcpServers", "ToolSearch"})
# lexmem's own MCP tools as the agents name them: Claude Code and Codex both say
# ``mcp__<server>__<tool>``; the separators after the server's name vary between clients.
_OWN_TOOL_PREFIXES = ("mcp__lexmem__", "lexmem__", "lexmem.", "lexmem/")


def events_from_hook(
    payload: Mapping[str, Any],
    agent: str,
    redactor: _Redactor | None = None,
    *,
    user: str | None = None,
) -> list[InboxEvent]:
    """Claude Code (and Codex hook) payloads to inbox events, redacted. ``user``: the
    person's name, the speaker of their prompts (None: their login name)."""
    r = redactor if redactor is not None else _Redactor()
    name = payload.get("hook_event_name")
    event_type = CLAUDE_EVENTS.get(name) if isinstance(name, str) else None
    if event_type is None:
        return []
    if event_type in ("tool_call", "tool_result") and _not_work(payload.get("tool_name")):
        return []
    session = r.ident("session_id", payload.get("session_id")) or f"{agent}-unknown"
    cwd = r.ident("cwd", payload.get("cwd"))
    speaker = _speaker(event_type, agent, user, r)
    raw: dict[str, Any] = {key: payload[key] for key in _META_KEYS if payload.get(key) is not None}
    if event_type in ("tool_call", "tool_result"):
        raw["tool_name"] = str(payload.get("tool_name") or "tool")
        if payload.get("tool_use_id") is not None:
            raw["tool_use_id"] = str(payload["tool_use_id"])
    elif name == "SubagentStop":
        raw.update(
            (k, payload[k]) for k in ("agent_id", "agent_type") if payload.get(k) is not None
        )
    elif event_type == "compact" and payload.get("custom_instructions"):
        raw["custom_instructions"] = payload["custom_instructions"]
    meta: dict[str, Any] = {"hook_event_name": name}
    meta.update(r.obj(raw, MAX_META_CHARS, each=True, key="metadata"))
    content = ""
    if event_type == "prompt":
        content = _text(r.obj(payload.get("prompt"), MAX_CONTENT_CHARS))
    elif event_type in ("tool_call", "tool_result"):
        tool = str(meta.get("tool_name") or "tool")
        tool_input = payload.get("tool_input")
        # Edit, MultiEdit, Write, NotebookEdit: old_string, new_string, content, edits[]
        # are fields like any other, each redacted with its key.
        meta["tool_input"] = r.obj(tool_input, MAX_META_CHARS, each=True, key="tool_input")
        if event_type == "tool_call":
            content = describe_tool_call(tool, tool_input, r)
        elif name == "PostToolUseFailure":
            # Claude Code reports failed tool calls here, not in PostToolUse.
            content = _text(r.obj(payload.get("error"), MAX_CONTENT_CHARS)) or _text(
                r.obj(payload.get("tool_response"), MAX_CONTENT_CHARS)
            )
            meta["is_error"] = True
            if payload.get("is_interrupt") is not None:
                meta["is_interrupt"] = bool(payload.get("is_interrupt"))
        else:
            # A structured response (Edit's structuredPatch, originalFile, filePath...)
            # is redacted field by field; only then is it text.
            response = payload.get("tool_response")
            content = _text(r.obj(response, MAX_CONTENT_CHARS))
            if isinstance(response, dict):
                for key in _STATUS_KEYS:
                    if key in response and isinstance(response[key], (int, bool)):
                        meta[key] = response[key]
    elif event_type == "response":
        meta["stop_hook_active"] = bool(payload.get("stop_hook_active"))
        content = _text(r.obj(payload.get("last_assistant_message"), MAX_CONTENT_CHARS))
        if name == "SubagentStop":
            # The main transcript's last answer is not the sub-agent's: read only its own.
            meta["subagent"] = True
            transcript = payload.get("agent_transcript_path")
        else:
            transcript = payload.get("transcript_path")
        if not content.strip():
            content = r.text(last_assistant_message(_str(transcript)), MAX_CONTENT_CHARS)
        if not content.strip():
            return []
    return [
        make_event(
            event_type,
            _clip(content, MAX_CONTENT_CHARS),
            session_id=session,
            agent=agent,
            cwd=cwd,
            metadata=meta,
            speaker=speaker,
        )
    ]


def _not_work(tool: Any) -> bool:
    """A tool call that is not the person's work: lexmem's own MCP tools (recording a
    search of the memory as a memory would feed it its own output) and the agent's
    internal plumbing (:data:`INTERNAL_TOOLS`)."""
    if not isinstance(tool, str):
        return False
    return tool in INTERNAL_TOOLS or tool.lower().startswith(_OWN_TOOL_PREFIXES)


def _speaker(event_type: str, agent: str, user: str | None, r: _Redactor) -> str | None:
    """Who said a conversation turn, redacted: the person for a prompt, the agent by name
    for a response; None for any other event."""
    if event_type == "prompt":
        return r.ident("speaker", user or _login_name())
    if event_type == "response":
        return r.ident("speaker", AGENT_NAMES.get(agent, agent))
    return None


def _login_name() -> str:
    """The user's login name, found as ``getpass.getuser()`` finds it (the environment,
    then the password database), without importing ``getpass`` (it loads ``contextlib``
    and ``warnings``); "" when there is none."""
    for key in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        name = os.environ.get(key)
        if name:
            return name
    try:
        import pwd  # not on Windows, where USERNAME is set

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        return ""


def events_from_codex_notify(
    payload: Mapping[str, Any], redactor: _Redactor | None = None, *, user: str | None = None
) -> list[InboxEvent]:
    """The older Codex ``notify`` program form: one agent-turn-complete object. ``user``:
    as for :func:`events_from_hook`."""
    r = redactor if redactor is not None else _Redactor()
    if payload.get("type") != "agent-turn-complete":
        return []
    thread = _str(payload.get("thread-id")) or _str(payload.get("thread_id"))
    session = r.ident("session_id", thread) or "codex-unknown"
    cwd = r.ident("cwd", payload.get("cwd"))
    raw: dict[str, Any] = {"turn_id": payload.get("turn-id")}
    if payload.get("client") is not None:
        raw["client"] = payload["client"]
    meta = {**r.obj(raw, MAX_META_CHARS, each=True, key="metadata"), "notify": True}
    inputs = r.obj(payload.get("input-messages") or [], MAX_CONTENT_CHARS)
    prompt = "\n".join(_text(m) for m in inputs) if isinstance(inputs, list) else _text(inputs)
    answer = _text(r.obj(payload.get("last-assistant-message"), MAX_CONTENT_CHARS))
    out = []
    for event_type, text in (("prompt", prompt), ("response", answer)):
        if text.strip():
            out.append(make_event(event_type, _clip(text, MAX_CONTENT_CHARS), session_id=session,
                                  agent="codex", cwd=cwd, metadata=meta,
                                  speaker=_speaker(event_type, "codex", user, r)))  # fmt: skip
    return out


def events_from_generic(
    payload: Mapping[str, Any], redactor: _Redactor | None = None
) -> list[InboxEvent]:
    """Seed 003's event contract, as any wrapper would send it; :class:`BadEvent` if invalid.

    An ``event_id`` that is not a UUID (``"e1"``) becomes a UUID derived from it and the
    session, so a wrapper that replays an event still produces the same id; the original
    is kept as ``metadata.source_event_id``.
    """
    import uuid

    r = redactor if redactor is not None else _Redactor()
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
                meta["source_event_id"] = event_id
    event = validate_event(data)
    if event["event_type"] not in GENERIC_EVENT_TYPES:
        raise BadEvent(
            f"event_type {event['event_type']!r} is not one an agent may send "
            f"(use {', '.join(sorted(GENERIC_EVENT_TYPES))})"
        )
    # Checked by validate_event: a UUID, one of a few words, an ISO time. Safe to keep
    # as they are should the rest be dropped.
    for key in ("event_id", "event_type", "timestamp"):
        r.kept[key] = event[key]
    clean: dict[str, Any] = {key: event[key] for key in ("event_id", "event_type", "timestamp")}
    clean["session_id"] = r.ident("session_id", event["session_id"])
    clean["agent"] = r.ident("agent", event["agent"]) or "generic"
    clean["project"] = r.ident("project", event.get("project"))
    clean["cwd"] = r.ident("cwd", event.get("cwd"))
    if event.get("speaker") is not None:  # who said it, when the wrapper knows
        clean["speaker"] = r.ident("speaker", event["speaker"])
    clean["content"] = r.text(event["content"], MAX_CONTENT_CHARS)
    clean["metadata"] = r.obj(event["metadata"], MAX_META_CHARS, each=True, key="metadata")
    rest = {k: v for k, v in event.items() if k not in clean}  # "v", and what else was sent
    clean.update(r.obj(rest, MAX_META_CHARS, each=True))
    event_out: Any = clean  # an InboxEvent, and what else was sent
    return [event_out]


def _events(
    adapter: str,
    payload: Mapping[str, Any],
    project: str | None = None,
    deadline: float | None = None,
    user: str | None = None,
) -> tuple[list[InboxEvent], str | None]:
    """The events a payload makes, redacted by ``deadline``, and the problem to log when it
    makes none it should, or when what it holds could not be checked in time. ``user``:
    the person's name, the speaker of their prompts (None: their login name)."""
    name = payload.get("hook_event_name")
    if adapter == "event":
        build: Any = events_from_generic
    elif adapter == "codex" and "hook_event_name" not in payload and "type" in payload:

        def build(payload: Mapping[str, Any], r: _Redactor) -> list[InboxEvent]:
            return events_from_codex_notify(payload, r, user=user)  # other types carry no turn

    elif isinstance(name, str) and name in IGNORED_EVENTS:
        return [], None
    elif not (isinstance(name, str) and name in CLAUDE_EVENTS):
        return [], f"{adapter}: unknown hook_event_name {_shown(name)}, nothing captured"
    else:

        def build(payload: Mapping[str, Any], r: _Redactor) -> list[InboxEvent]:
            return events_from_hook(payload, adapter, r, user=user)

    r = _Redactor(deadline)
    armed = _arm(deadline - time.monotonic()) if deadline is not None else None
    try:
        try:
            clean_project = r.ident("project", project)
            events = build(payload, r)
        finally:
            _disarm(armed)
    except _TooLarge:
        event = _dropped(adapter, payload, r)
        what = event["event_type"] if event else "event"
        return ([event] if event else []), (
            f"{adapter}: {what} too large to check for secrets in "
            f"{HOOK_BUDGET_SECONDS:g}s; its content was dropped"
        )
    except BadEvent as exc:
        return [], f"event: invalid event, nothing captured: {exc.reason}"
    for event in events:
        event["project"] = clean_project
        if r.count:
            event["metadata"]["redactions"] = r.count
    return events, None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


def _dropped(adapter: str, payload: Mapping[str, Any], r: _Redactor) -> InboxEvent | None:
    """The event whose content could not be checked in time: only what is known safe (its
    kind, and the ids already redacted), and ``metadata.dropped``."""
    kept = r.kept
    meta: dict[str, Any] = {"dropped": DROPPED}
    name = payload.get("hook_event_name")
    if adapter == "event":
        event_type = kept.get("event_type")  # only once validated
        if event_type is None:
            return None
        agent = kept.get("agent") or "generic"
    elif isinstance(name, str) and name in CLAUDE_EVENTS:
        event_type, agent = CLAUDE_EVENTS[name], adapter
        meta["hook_event_name"] = name
    else:
        event_type, agent = "response", adapter
        meta["notify"] = True
    event = make_event(
        event_type,
        "",
        session_id=kept.get("session_id") or f"{agent}-unknown",
        agent=agent,
        cwd=kept.get("cwd"),
        metadata=meta,
        event_id=kept.get("event_id"),
        timestamp=kept.get("timestamp"),
        speaker=kept.get("speaker"),
    )
    event["project"] = kept.get("project")
    return event


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
            line = _log_line(message)
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


def _log_line(message: str) -> str:
    """A problem's one line, redacted: cut first (a line keeps 2,000 characters), and
    given :data:`LOG_BUDGET_SECONDS`, as events are given theirs."""
    from lexmem.capture.redact import redact

    armed = _arm(LOG_BUDGET_SECONDS)
    try:
        try:
            line = redact(message[: LOG_LINE_CHARS + 200], budget=True).text
        finally:
            _disarm(armed)
    except _TooLarge:
        line = message.split(":", 1)[0][:40] + ": [the rest was too large to check for secrets]"
    return line.replace("\n", " ").replace("\r", " ")[:LOG_LINE_CHARS]


def _read_stdin(deadline: float) -> bytes | None:
    """All of stdin, or None when the writer keeps it open past ``deadline``.

    Past :data:`MAX_INPUT_BYTES` the rest is read and let go (until its end or the
    deadline, so the agent's write does not fail), and what is returned is longer than
    the cap: too large. A terminal (a person trying the command) gives nothing rather
    than a wait.
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
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return b"".join(chunks) if size > MAX_INPUT_BYTES else None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        if size <= MAX_INPUT_BYTES:
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
    except (Exception, _TooLarge) as exc:  # noqa: BLE001 - the agent must never see the hook fail
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
    if opted_out(cwd, project, capture or CaptureRules(), _payload_paths(adapter, payload, cwd)):
        return
    if capture is None:
        log.write(f"settings unreadable, nothing captured: {settings_error}")
        return
    events, problem = _events(
        adapter, payload, project, started + HOOK_BUDGET_SECONDS, capture.user_name or None
    )
    for note in [*notes, problem]:
        if note:
            log.write(note)
    if not events:
        return
    starting = events[0]["event_type"] == "session_start"
    if starting:
        _print_digest(paths, project, out, log)
    if not allowed(cwd, project, capture) or capture_mode(project, capture) == "off":
        return
    if is_paused(capture):
        return
    inbox = Inbox(paths.inbox)
    for event in events:
        try:
            _write(inbox, event)
        except OSError as exc:  # a full or read-only disk: the inbox holds no half event
            log.write(f"{adapter}: cannot write to the inbox ({exc.strerror or exc}); "
                      f"{event['event_type']} event not captured")  # fmt: skip
            return
    if starting:
        from lexmem.locks import service_running  # only SessionStart pays for the lock probe

        if not service_running(paths):
            try:
                start_service(paths)
            except OSError as exc:
                log.write(f"could not start `lexmem serve`: {exc}")


def _write(inbox: Inbox, event: InboxEvent) -> None:
    """Write one event (every text in it is redacted already)."""
    try:
        inbox.write(event)
    except UnicodeEncodeError:
        # A lone surrogate ("\ud83d" from a cut emoji) is valid JSON but not UTF-8.
        inbox.write(_scrub(event))


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
