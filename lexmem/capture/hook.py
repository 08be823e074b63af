"""``lexmem-hook``: the command agents call on every hook event (standard library only).

    lexmem-hook claude            Claude Code hook payload on stdin
    lexmem-hook claude --no-digest  the same, printing no digest at SessionStart
    lexmem-hook ADAPTER --background  a call the agent does not wait for: handed whole
                                  to the running service (:mod:`lexmem.capture.entry`)
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

Its budget counts work, not time, so a busy machine gets the same result as an idle
one: stdin is read to its end (or to a whole JSON object, when the writer keeps the pipe
open), a transcript only when it is a regular file and only its tail, and every text is
redacted field by field, cut to what is kept before it is checked, up to
:data:`HOOK_WORK_CHARS` characters and the rules' own budget of candidates. A payload
that needs more, or a pipe left open mid-document, is handed whole to the service
(:func:`_hand_over`: a detached child gives it over the reader socket, in memory only),
which redacts it as the hook would; it is never dropped, and never written unchecked.

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

from lexmem.capture.inbox import (
    EVENT_VERSION,
    BadEvent,
    Inbox,
    make_event,
    new_event_id,
    now_iso,
    validate_event,
)
from lexmem.capture.payload import (
    ADAPTERS,
    HANDOFF_WAIT_SECONDS,
    MAX_INPUT_BYTES,
    STDIN_IDLE_SECONDS,
    read_pipe,
)
from lexmem.capture.policy import (
    allowed,
    capture_mode,
    is_paused,
    opted_out,
    project_root,
    tool_paths,
)
from lexmem.capture.stamps import process_started
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
    from lexmem.capture.redact import Redaction
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

# What one call may do itself: redact at most HOOK_WORK_CHARS characters (each field cut to
# what is kept first), each text within the rules' own budget of candidates. Work, not
# time: a busy machine gets the same result as an idle one. A payload that needs more
# (or one the rules find too dense) is handed whole to the service, never dropped.
HOOK_WORK_CHARS = 1_000_000
# A writer that holds the pipe open mid-document, silent STDIN_IDLE_SECONDS (see
# lexmem.capture.payload, with ADAPTERS, MAX_INPUT_BYTES and HANDOFF_WAIT_SECONDS): the rest
# is read by the child the payload is handed to (HANDOFF_IDLE_SECONDS more), not by the
# agent's hook.
HANDOFF_IDLE_SECONDS = 600.0
# A handed-over payload's child starts a service again every HANDOFF_RESTART_SECONDS
# while none answers, for HANDOFF_WAIT_SECONDS, before it captures the payload itself.
HANDOFF_RESTART_SECONDS = 30.0
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
# is redacted. The hook's redaction has a budget of work (characters checked, and the
# rules' candidates): past it nothing of the payload is written here, and the payload
# goes to the service whole, whose redaction has no budget.

_NESTED = "[not captured: nested too deeply]"
_TOO_DENSE = "too_dense_to_check"


class _TooLarge(BaseException):
    """Redaction would take more work than the hook's budget (:data:`HOOK_WORK_CHARS`, or
    the rules' own budget of candidates): the payload is handed to the service whole.

    A BaseException, as KeyboardInterrupt is: no ``except Exception`` on the way from the
    rules to :func:`_events` may swallow it.
    """


def _rules(text: str, budget: bool) -> Redaction:
    """:func:`~lexmem.capture.redact.redact` of ``text``; within the rules' work budget
    when ``budget`` (the hook's), where text too dense to check raises :class:`_TooLarge`."""
    from lexmem.capture.redact import redact

    if not budget:
        return redact(text)
    result = redact(text, budget=True)
    if _TOO_DENSE in result.kinds:
        raise _TooLarge
    return result


def _rules_obj(value: Any, budget: bool) -> tuple[Any, int]:
    """:func:`~lexmem.capture.redact.redact_obj`, as :func:`_rules` does :func:`redact`."""
    from lexmem.capture.redact import redact_obj

    if not budget:
        return redact_obj(value)
    done, count = redact_obj(value, budget=True)
    if count and _holds_too_dense(done):
        raise _TooLarge
    return done, count


def _holds_too_dense(value: Any) -> bool:
    if isinstance(value, str):
        return _TOO_DENSE in value
    if isinstance(value, dict):
        return any(_holds_too_dense(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_too_dense(v) for v in value)
    return False


def _note(text: str, more: int) -> str:
    # Said, never silent: the reader sees how much was left out.
    return f"{text}\n[… {more} more characters not captured]"


def _clip(text: str, limit: int) -> str:
    """Redacted text cut to ``limit`` characters."""
    return text if len(text) <= limit else _note(text[:limit], len(text) - limit)


class _Redactor:
    """Redacts what one event keeps and ``count``\\ s what it replaced. With a ``budget``
    (characters, the hook's: :data:`HOOK_WORK_CHARS`) it raises :class:`_TooLarge` once the
    texts it was given add up to more, or once the rules find a text too dense to check;
    without one (the service's), it redacts everything. Work, not time: the outcome is the
    same on a busy machine as on an idle one. ``kept`` holds the identifying fields already
    redacted."""

    __slots__ = ("budget", "count", "kept", "left")

    def __init__(self, budget: int | None = None) -> None:
        self.count = 0
        self.budget = budget is not None
        self.left = budget if budget is not None else 0
        self.kept: dict[str, Any] = {}

    def spend(self, chars: int) -> None:
        if self.budget:
            self.left -= chars
            if self.left < 0:
                raise _TooLarge

    def text(self, value: str, limit: int) -> str:
        """``value`` redacted and cut to ``limit`` characters."""
        checked = value[: limit + CLIP_MARGIN_CHARS]
        self.spend(len(checked))
        result = _rules(checked, self.budget)
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
                self.spend(len(name))
                clean_key = _rules(name, self.budget)
                self.count += clean_key.count
                nested[name] = (clean_key.text, self._walk(v, cell, leaf, depth + 1, name))
                order.append((name, True))
                continue
            if isinstance(v, str):
                limit = max(min(leaf, cell[0]), 0)
                cell[0] -= min(len(v), limit)
                limits[name] = (limit, len(v))
                v = v[: limit + CLIP_MARGIN_CHARS]
                self.spend(len(v))
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
            done, count = _rules_obj({key: scalars} if key is not None else scalars, self.budget)
            inner = next(iter(done.values())) if key is not None else done
            if not isinstance(inner, dict):
                return inner  # the rules replaced the mapping whole
            self.count += count
            if len(inner) == len(scalars):
                clean = dict(zip(scalars, inner.items(), strict=True))
            else:  # two keys redacted alike: one by one, so neither value is lost
                for name, v in scalars.items():
                    one, count = _rules_obj({name: v}, self.budget)
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


_PRINTED = "[REDACTED:cli_secret]"


def _prints_secret(tool_input: Any) -> bool:
    """Whether a shell tool call's command prints a secret (Claude Code's Bash gives
    ``command`` as a string, Codex's shell as an argv list)."""
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    # ["bash", "-lc", "printenv KEY"]: the script is one of the words, the words together
    # the command
    texts: list[Any] = [command]
    if isinstance(command, list):
        texts = [str(p) for p in command]
        texts.append(" ".join(texts))
    from lexmem.capture.redact import prints_secret

    return any(
        isinstance(text, str) and text.strip() and prints_secret(text[:MAX_CONTENT_CHARS])
        for text in texts
    )


def _withheld(value: Any) -> Any:
    """A tool's output with every text in it replaced: it is the secret a command printed.
    Numbers and flags (an exit code, ``interrupted``) stay."""
    if isinstance(value, str):
        return _PRINTED if value.strip() else value
    if isinstance(value, dict):
        return {k: _withheld(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_withheld(v) for v in value]
    return value


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
        # "echo $DB_PASSWORD": the command names the secret and its output is the value,
        # whatever it looks like; the agent keeps the two apart, so no rule reading the
        # output alone could tell. The output is withheld whole.
        printed = event_type == "tool_result" and _prints_secret(tool_input)
        if event_type == "tool_call":
            content = describe_tool_call(tool, tool_input, r)
        elif name == "PostToolUseFailure":
            # Claude Code reports failed tool calls here, not in PostToolUse.
            response = payload.get("tool_response")
            content = _text(r.obj(payload.get("error"), MAX_CONTENT_CHARS)) or _text(
                r.obj(_withheld(response) if printed else response, MAX_CONTENT_CHARS)
            )
            meta["is_error"] = True
            if payload.get("is_interrupt") is not None:
                meta["is_interrupt"] = bool(payload.get("is_interrupt"))
        else:
            # A structured response (Edit's structuredPatch, originalFile, filePath...)
            # is redacted field by field; only then is it text.
            response = payload.get("tool_response")
            content = _text(r.obj(_withheld(response) if printed else response, MAX_CONTENT_CHARS))
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
    budget: int | None = None,
    user: str | None = None,
) -> tuple[list[InboxEvent], str | None]:
    """The events a payload makes, redacted, and the problem to log when it makes none it
    should. ``budget``: the work the redaction may take (:class:`_Redactor`); past it
    :class:`_TooLarge` is raised, and nothing of the payload is written. ``user``: the
    person's name, the speaker of their prompts (None: their login name)."""
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

    r = _Redactor(budget)
    try:
        clean_project = r.ident("project", project)
        events = build(payload, r)
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


def _nth_id(first: str, n: int) -> str:
    """The id of a call's ``n``-th event (from 0): ``first`` itself, then ids derived from
    it, so the same call's events have the same ids wherever they are made."""
    if n == 0:
        return first
    import hashlib

    h = bytearray(hashlib.sha256(f"{first}/{n}".encode()).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50  # version 5 (a name-based id)
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _starting(adapter: str, payload: Mapping[str, Any]) -> bool:
    """Whether a payload opens a session (the hook then prints the digest)."""
    if adapter == "event":
        return payload.get("event_type") == "session_start"
    return payload.get("hook_event_name") == "SessionStart"


def capture(
    paths: Paths,
    adapter: str,
    payload: Mapping[str, Any],
    *,
    budget: int | None,
    event_id: str,
    timestamp: str,
    cwd: str | None = None,
    log: Any = None,
) -> list[str]:
    """Turn one agent payload into redacted inbox events; the ids written (none when the
    repository is opted out, capture is off or paused, or the payload makes no event).

    The one path from a payload to the inbox, for the hook and for the service
    (:mod:`lexmem.service.intake`), so both make the same events: opt-out first (nothing
    written, no log line), then the settings' capture mode, allowed paths and pause.
    ``event_id`` and ``timestamp`` are the call's (its first event's id, the others'
    derived from it; an ``event`` adapter's payload names its own): the same payload
    captured twice writes events with the same ids, which the service stores once.
    ``cwd``: the working folder when the payload names none. ``budget``: as for
    :class:`_Redactor`; :class:`_TooLarge` when it is spent, and then nothing is written.
    ``log``: where problems go (a :class:`_Log`; None: ``logs/hook.log``).
    """
    log = log if log is not None else _Log(paths)
    where, project = _where(adapter, payload, cwd)
    if where is not None and where == cwd and not _str(payload.get("cwd")):
        payload = {**payload, "cwd": where}  # the caller's folder is the event's
    try:
        rules: CaptureRules | None = load_capture_rules(paths)
        settings_error = ""
    except Exception as exc:  # noqa: BLE001 - unreadable settings: we cannot know the opt-outs
        rules, settings_error = None, f"{type(exc).__name__}: {exc}"
    # Opt-out comes before anything is written, a log line included: an opted-out
    # repository leaves no trace at all.
    if opted_out(where, project, rules or CaptureRules(), _payload_paths(adapter, payload, where)):
        return []
    if rules is None:
        log.write(f"settings unreadable, nothing captured: {settings_error}")
        return []
    events, problem = _events(adapter, payload, project, budget, rules.user_name or None)
    if problem:
        log.write(problem)
    if not events:
        return []
    if not allowed(where, project, rules) or capture_mode(project, rules) == "off":
        return []
    if is_paused(rules):
        return []
    for n, event in enumerate(events):
        if adapter != "event":
            event["event_id"] = _nth_id(event_id, n)
            event["timestamp"] = timestamp
    inbox = Inbox(paths.inbox)
    written: list[str] = []
    for event in events:
        try:
            _write(inbox, event)
        except OSError as exc:  # a full or read-only disk: the inbox holds no half event
            log.write(f"{adapter}: cannot write to the inbox ({exc.strerror or exc}); "
                      f"{event['event_type']} event not captured")  # fmt: skip
            break
        written.append(event["event_id"])
    return written


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
    within the rules' work budget, as events are."""
    try:
        line = _rules(message[: LOG_LINE_CHARS + 200], True).text
    except _TooLarge:
        line = message.split(":", 1)[0][:40] + ": [the rest was too dense to check for secrets]"
    return line.replace("\n", " ").replace("\r", " ")[:LOG_LINE_CHARS]


def _read_stdin() -> tuple[bytes, bool]:
    """What stdin holds, and whether it is all of it.

    Read to its end; a writer that keeps the pipe open after a whole JSON object has
    sent its payload (nothing more is waited for). Not all of it (False) only when the
    pipe stays open with an incomplete document and no new byte for
    :data:`STDIN_IDLE_SECONDS`: the reader of the rest is then :func:`_hand_over`'s child.
    Past :data:`MAX_INPUT_BYTES` nothing more is read: too large. A terminal (a person
    trying the command) gives nothing rather than a wait.
    """
    stream = sys.stdin
    if stream is None:
        return b"", True
    try:
        if stream.isatty():
            return b"", True
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return b"", True
    if os.name != "posix":  # pragma: no cover - Windows pipes cannot be polled with select
        return stream.buffer.read(MAX_INPUT_BYTES + 1), True
    return read_pipe(fd, b"", STDIN_IDLE_SECONDS)


def _parse(
    adapter: str, raw: bytes, source: str, log: Any, notes: list[str]
) -> dict[str, Any] | None:
    """A payload's bytes as a JSON object, or None (and one log line) when there is none."""
    if len(raw) > MAX_INPUT_BYTES:
        log.write(f"{adapter}: payload larger than {MAX_INPUT_BYTES} bytes (the most one event "
                  "is read from), nothing captured")  # fmt: skip
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


def _where(
    adapter: str, payload: Mapping[str, Any], cwd: str | None = None
) -> tuple[str | None, str | None]:
    """The session's working folder (``cwd`` when the payload names none) and project (a
    wrapper may name its project)."""
    meta = payload.get("metadata") if adapter == "event" else None
    meta = meta if isinstance(meta, dict) else {}
    where = _str(payload.get("cwd")) or _str(meta.get("cwd")) or _str(cwd)
    named = (
        (_str(payload.get("project")) or _str(meta.get("project"))) if adapter == "event" else None
    )
    return where, named or project_root(where)


def run(
    argv: Sequence[str], stdin: bytes | None = None, out: Any = None, *, whole: bool = True,
    event_id: str | None = None, timestamp: str | None = None,
) -> int:  # fmt: skip
    """The hook's work; returns the exit code (always 0) — separate from main() for tests.

    ``stdin``: the payload, read already (``whole``: all of it; else the rest is still on
    stdin); ``event_id``, ``timestamp``: the call's, when it has them already
    (:mod:`lexmem.capture.entry`)."""
    started = time.monotonic()
    log = _Log(None)
    try:
        paths = resolve_paths()
        log = _Log(paths)
        if argv and argv[0] == HANDOFF_FLAG:
            _handoff_child(paths, log, stdin)
        else:
            out = out if out is not None else sys.stdout
            _run(paths, argv, stdin, out, log, whole=whole, stamp=(event_id, timestamp))
    except (Exception, _TooLarge) as exc:  # noqa: BLE001 - the agent must never see the hook fail
        log.write(f"hook failed: {type(exc).__name__}: {exc}")
    finally:
        elapsed = time.monotonic() - started
        if elapsed > SLOW_SECONDS and not log.lines and not (argv and argv[0] == HANDOFF_FLAG):
            log.write(f"slow hook: {elapsed:.2f}s")  # a problem already logged says why
    return 0


def _run(
    paths: Paths, argv: Sequence[str], stdin: bytes | None, out: Any, log: _Log, *,
    whole: bool = True, stamp: tuple[str | None, str | None] = (None, None),
) -> None:  # fmt: skip
    adapter = argv[0] if argv else ""
    if adapter in ("-h", "--help"):
        _emit(out, (__doc__ or "").split("\n\n")[1] + "\n")
        return
    if adapter not in ADAPTERS:
        log.write(f"unknown adapter {adapter!r} (use claude, codex or event), nothing captured")
        return
    # The call's, wherever it is captured: when the agent started this process.
    event_id = stamp[0] or new_event_id()
    timestamp = stamp[1] or now_iso(process_started())
    if adapter == "codex" and len(argv) > 1 and not argv[-1].startswith("--"):
        # notify: Codex appends the JSON as the last argument.
        raw, whole, source = os.fsencode(argv[-1]), True, "argument"
    else:
        raw, whole = (stdin, whole) if stdin is not None else _read_stdin()
        source = "stdin"
    if not whole:
        # The writer holds the pipe open mid-document: the child reads the rest.
        _hand_over(paths, adapter, raw, event_id, timestamp, log, more=True)
        return
    notes: list[str] = []
    payload = _parse(adapter, raw, source, log, notes)
    if payload is None:
        return
    for note in notes:
        log.write(note)
    cwd, project = _where(adapter, payload)
    starting = _starting(adapter, payload)
    if starting and NO_DIGEST_FLAG not in argv[1:]:
        rules = _rules_or_none(paths)
        if rules is not None and not opted_out(cwd, project, rules,
                                               _payload_paths(adapter, payload, cwd)):  # fmt: skip
            _print_digest(paths, project, out, log)
    try:
        written = capture(paths, adapter, payload, budget=HOOK_WORK_CHARS, event_id=event_id,
                          timestamp=timestamp, log=log)  # fmt: skip
    except _TooLarge:
        # More to check than the hook's budget: the service checks it, the agent goes on.
        _hand_over(paths, adapter, raw, event_id, timestamp, log)
        return
    if starting and written:
        from lexmem.locks import service_running  # only SessionStart pays for the lock probe

        if not service_running(paths):
            try:
                start_service(paths)
            except OSError as exc:
                log.write(f"could not start `lexmem serve`: {exc}")


def _rules_or_none(paths: Paths) -> CaptureRules | None:
    try:
        return load_capture_rules(paths)
    except Exception:  # noqa: BLE001 - capture() says so in the log
        return None


# -- handing a payload to the service ----------------------------------------------
#
# What the hook cannot check within its work budget (or cannot read whole) is neither
# dropped nor written: a detached child (``lexmem-hook --handoff``) is given the bytes
# on a pipe, holds them in memory only, and sends them to the running service over its
# reader socket (``{"kind": "event"}``, :mod:`lexmem.service.intake`), which redacts them
# as the hook would and writes the events. The hook returns as soon as the child has the
# bytes. With no service, the child starts one and waits for its socket; a service that
# goes away mid-way is asked again (the call's event ids make a second delivery store
# nothing twice). When no service answers in HANDOFF_WAIT_SECONDS the child does the
# service's part itself (redacts in memory, writes the events); only if that fails too
# is the payload lost, with one log line saying so. Nothing unredacted touches the disk.

HANDOFF_FLAG = "--handoff"
# ``lexmem-hook claude --no-digest``: capture only. Claude Code's SessionStart command
# prints the digest with the shell when it can, and starts this in the background for
# the rest (lexmem.agents.integrations.session_start_command).
NO_DIGEST_FLAG = "--no-digest"


def _hand_over(paths: Paths, adapter: str, raw: bytes, event_id: str, timestamp: str,
               log: _Log, *, more: bool = False) -> None:  # fmt: skip
    """Give ``raw`` to a detached child that takes it to the service; ``more``: the child
    also reads the rest of this process's stdin (the writer still holds it open)."""
    import subprocess

    header: dict[str, Any] = {"adapter": adapter, "event_id": event_id, "timestamp": timestamp}
    if more:  # a number of its own: the child's stdin (0) is the pipe from here
        header["more_fd"] = os.dup(sys.stdin.fileno())
    frozen = getattr(sys, "frozen", False)  # a bundle: sys.executable is lexmem-hook itself
    cmd = [sys.executable, HANDOFF_FLAG] if frozen else [sys.executable, "-m", "lexmem.hook",
                                                         HANDOFF_FLAG]  # fmt: skip
    kwargs: dict[str, Any] = {
        "stdin": subprocess.PIPE,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "env": dict(os.environ, LEXMEM_HOME=str(paths.home)),
        "cwd": str(paths.home) if paths.home.is_dir() else "/",
        "close_fds": True,
    }
    if more:
        kwargs["pass_fds"] = (header["more_fd"],)
    if os.name == "nt":  # pragma: no cover - Windows only
        kwargs["creationflags"] = 0x00000008 | 0x00000200  # DETACHED_PROCESS | NEW_PROCESS_GROUP
    else:
        kwargs["start_new_session"] = True
    try:
        child = subprocess.Popen(cmd, **kwargs)
        assert child.stdin is not None
        with child.stdin as pipe:
            pipe.write(json.dumps(header).encode() + b"\n")
            pipe.write(raw)
    except (OSError, ValueError) as exc:
        log.write(f"{adapter}: could not hand the payload to the service ({exc}); "
                  "nothing captured")  # fmt: skip
        return
    why = (f"stdin idle for {STDIN_IDLE_SECONDS:g}s mid-document, the rest is read by the child"
           if more else "more to check than the hook does itself")  # fmt: skip
    log.write(f"{adapter}: payload handed to the service ({len(raw)} bytes): {why}")


def _handoff_child(paths: Paths, log: _Log, stdin: bytes | None = None) -> None:
    """``lexmem-hook --handoff``: read the header and the payload from stdin, and deliver."""
    data = stdin if stdin is not None else sys.stdin.buffer.read()
    line, _, raw = data.partition(b"\n")
    header = json.loads(line)
    adapter = str(header.get("adapter"))
    fd = header.get("more_fd")
    if isinstance(fd, int):  # the rest of the agent's stdin, still open
        try:
            raw, _whole = read_pipe(fd, raw, HANDOFF_IDLE_SECONDS)
        except OSError as exc:
            log.write(f"{adapter}: reading the rest of stdin failed ({exc}); kept what came")
        _close(fd)
    deliver(paths, adapter, raw, str(header["event_id"]), str(header["timestamp"]), log)


def _close(fd: int) -> None:
    try:  # noqa: SIM105 - not contextlib.suppress: importing contextlib costs every call
        os.close(fd)
    except OSError:
        pass


def deliver(paths: Paths, adapter: str, raw: bytes, event_id: str, timestamp: str,
            log: _Log) -> bool:  # fmt: skip
    """Send one payload to the service (starting it when none runs) until it says it has
    written its events; True once it has. After :data:`HANDOFF_WAIT_SECONDS` without an
    answer, the payload is captured here instead (no work budget: nobody waits)."""
    from lexmem import wire
    from lexmem.locks import service_running

    # What is no payload (a pipe that ended mid-document) says so here, as the service
    # would: there is nothing to hand over, and no service to start for it.
    notes: list[str] = []
    payload = _parse(adapter, raw, "stdin", log, notes)
    if payload is None:
        return False
    give_up = time.monotonic() + HANDOFF_WAIT_SECONDS
    started_at: float | None = None
    pause = 0.05
    said = ""
    while True:
        sock = wire.connect(paths, timeout=HANDOFF_WAIT_SECONDS)
        if sock is not None:
            reply = _send(sock, adapter, raw, event_id, timestamp)
            if isinstance(reply, dict) and reply.get("ok"):
                return True
            if isinstance(reply, dict) and reply.get("error"):
                said = str(reply["error"])  # an older service: no "event" requests
                break
        elif not service_running(paths) and (
            started_at is None or time.monotonic() - started_at > HANDOFF_RESTART_SECONDS
        ):
            started_at = time.monotonic()
            try:
                start_service(paths)
            except OSError as exc:
                said = f"could not start `lexmem serve`: {exc}"
        if time.monotonic() >= give_up:
            said = said or f"no service answered in {HANDOFF_WAIT_SECONDS:g}s"
            break
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
    # Nobody to give it to: capture it here, as the service would have.
    for note in notes:
        log.write(note)
    try:
        written = capture(paths, adapter, payload, budget=None, event_id=event_id,
                          timestamp=timestamp, log=log)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - the last resort: say so, once
        log.write(f"{adapter}: handed-over payload lost ({said}; then {type(exc).__name__}: "
                  f"{exc}); nothing of it was written")  # fmt: skip
        return False
    log.write(f"{adapter}: handed-over payload captured by the hook's child itself ({said}); "
              f"{len(written)} event(s)")  # fmt: skip
    return True


def _send(sock: Any, adapter: str, raw: bytes, event_id: str, timestamp: str) -> Any:
    """One delivery over the reader socket; the service's answer, or None (it went away)."""
    from lexmem import wire

    return wire.send_event(sock, adapter, raw, event_id, timestamp, HANDOFF_WAIT_SECONDS)


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
