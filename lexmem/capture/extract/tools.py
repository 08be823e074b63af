"""The window's events and what tool use says: a tolerant view of each event, the command
or edit a tool call is, whether a run passed, and what a failure names (the exception,
the failing test, the place)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lexmem.capture.extract.text import _clip
from lexmem.capture.extract.thresholds import MAX_RESULT_HEAD, MAX_RESULT_TAIL, MAX_TEXT

__all__ = ()  # nothing public: the underscored names are for this package's modules


# -------------------------------------------------------------------- events


@dataclass(slots=True)
class _Event:
    pos: int
    id: str
    type: str
    session: str
    ts: datetime | None
    project: str | None
    cwd: str | None
    agent: str
    content: str
    meta: Mapping[str, Any]
    speaker: str = ""  # who said a conversation turn, when the event says


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _event(raw: Mapping[str, Any], pos: int) -> _Event:
    """A tolerant view of one event: events come from other processes."""
    meta = raw.get("metadata")
    return _Event(
        pos=pos,
        id=str(raw.get("event_id") or f"#{pos}"),
        type=str(raw.get("event_type") or "").lower(),
        session=str(raw.get("session_id") or ""),
        ts=_parse_time(raw.get("timestamp")),
        project=str(raw["project"]) if raw.get("project") else None,
        cwd=str(raw["cwd"]) if raw.get("cwd") else None,
        agent=str(raw.get("agent") or "generic"),
        content=_as_text(raw.get("content")),
        meta=meta if isinstance(meta, Mapping) else {},
        speaker=str(raw.get("speaker") or ""),
    )


def _relative(path: str, *roots: str | None) -> str:
    for root in roots:
        if root and path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1 :]
    return path


# --------------------------------------------------------------------- tools

_SHELL_TOOLS = frozenset(
    {
        "bash", "shell", "local_shell", "exec_command", "run_terminal_cmd", "terminal",
        "run_command", "execute_command", "run_shell_command", "container.exec",
        "powershell", "sh", "zsh", "command",
    }
)  # fmt: skip
_EDIT_TOOLS = frozenset(
    {
        "edit", "multiedit", "write", "notebookedit", "apply_patch", "edit_file",
        "write_file", "create_file", "str_replace_editor", "str_replace_based_edit_tool",
        "replace_in_file", "patch", "insert", "search_replace",
    }
)  # fmt: skip
_READ_SUBCOMMANDS = frozenset({"view", "read", "list"})

# Shell commands that only look: they are neither workflow steps nor verifications.
_EXPLORE = re.compile(
    r"^(?:ls|ll|la|dir|cat|bat|head|tail|less|more|grep|egrep|rg|ag|ack|find|fd|tree|pwd|"
    r"echo|printf|which|whereis|type|file|stat|wc|du|df|env|printenv|whoami|date|id|jq|"
    r"awk|cut|sort|uniq|diff|open|xdg-open|code|vim?|nano|man|help|history|clear|cd|"
    r"sed\s+-n|git\s+(?:status|diff|log|show|branch|blame|remote|rev-parse|ls-files|"
    r"config\s+--get|stash\s+list|reflog|describe|shortlog)|"
    r"(?:python3?|node)\s+(?:-V|--version)|\S+\s+--(?:version|help))\b",
    re.IGNORECASE,
)
_STAGES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (stage, re.compile(rx, re.IGNORECASE))
    for stage, rx in (
        ("lint", r"\bpre-commit\b"),
        (
            "deploy",
            r"\b(?:deploy\w*|kubectl\s+apply|helm\s+(?:upgrade|install)|terraform\s+apply|"
            r"fly\s+deploy|vercel|netlify\s+deploy|serverless\s+deploy|sls\s+deploy|"
            r"eb\s+deploy|ship\s+to\s+prod\w*)\b",
        ),
        (
            "release",
            r"\b(?:npm\s+publish|pnpm\s+publish|yarn\s+publish|twine\s+upload|cargo\s+publish|"
            r"gh\s+release|poetry\s+publish|uv\s+publish|release|publish)\b",
        ),
        ("push", r"\bgit\s+push\b|\bpush\b"),
        ("merge", r"\bgit\s+merge\b|\bgh\s+pr\s+merge\b|^merge\b"),
        ("pr", r"\bgh\s+pr\s+create\b|\bpull\s+request\b|\bopen\s+(?:a\s+)?pr\b"),
        ("tag", r"\bgit\s+tag\b"),
        ("commit", r"\bgit\s+commit\b|\bcommit\b"),
        ("stage", r"\bgit\s+add\b|^stage\b"),
        ("typecheck", r"\b(?:mypy|pyright|tsc\s+--noemit|type[- ]?check\w*)\b"),
        (
            "lint",
            r"\b(?:ruff(?!\s+format)|flake8|pylint|eslint|golangci-lint|clippy|rubocop|"
            r"shellcheck|stylelint|lint\w*)\b",
        ),
        (
            "format",
            r"\b(?:ruff\s+format|black|isort|prettier|gofmt|cargo\s+fmt|rustfmt|format\w*)\b",
        ),
        (
            "test",
            r"\b(?:pytest|py\.test|unittest|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|"
            r"(?:go|cargo|dotnet|mvn|gradle|npm|pnpm|yarn|bun|deno|mix)\s+(?:run\s+)?test\w*|"
            r"make\s+(?:test|check)\w*|tests?)\b",
        ),
        ("migrate", r"\b(?:migrate|migrations?|alembic\s+upgrade|db:migrate)\b"),
        (
            "generate",
            r"\b(?:make\s+gen\w*|codegen|protoc|openapi-generator\w*|generate|regenerate)\b",
        ),
        (
            "install",
            r"\b(?:(?:pip3?|uv\s+pip|pipx|npm|pnpm|yarn|bun|brew|apt(?:-get)?|gem|cargo|go|"
            r"poetry|uv)\s+(?:install|add|ci|i|sync|get)|bundle\s+install|install\w*)\b",
        ),
        (
            "build",
            r"\b(?:build\w*|compile\w*|make|tsc|webpack|vite\s+build|mvn\s+package|"
            r"gradle\s+assemble)\b",
        ),
        (
            "run",
            r"^(?:python3?|node|deno|bun|ruby|go\s+run|cargo\s+run|\./|bash\s|sh\s|"
            r"docker(?:-compose|\s+compose)?\s+(?:up|run)|npm\s+(?:run\s+)?start|uvicorn|"
            r"flask|npx|uv\s+run|poetry\s+run)",
        ),
    )
)
_VERIFY_STAGES = frozenset({"test", "build", "lint", "typecheck", "run"})
_CHANGE_STAGES = frozenset({"install", "migrate", "generate", "format"})
# Codex runs ["bash", "-lc", "cargo test"]: the command is the last part.
_SHELL_WRAPPER = re.compile(r"^(?:/\S*/)?(?:bash|sh|zsh|pwsh|powershell)\s+-l?c\s+")
_ENV_PREFIX = re.compile(r"^(?:(?:sudo|time|nice|command)\s+|[A-Z_][A-Z0-9_]*=\S*\s+)+")
_COMMIT_MSG = re.compile(r"(\s-(?:m|am)|\s--message)\s+(?:\"[^\"]*\"|'[^']*'|\S+)")


def _split_command(command: str) -> list[str]:
    """``a && b; c | d`` -> ["a", "b", "c"] (a pipe's consumer is not a step)."""
    parts: list[str] = []
    for part in re.split(r"\s*(?:&&|\|\||;|\n)\s*", command[:2_000]):
        part = part.split(" | ", 1)[0].strip()
        part = _ENV_PREFIX.sub("", part)
        if part:
            parts.append(part)
    return parts[:12]


def _stage(command: str) -> str | None:
    """The workflow stage of one shell command or action description; None = explore."""
    text = command.strip()
    if not text or _EXPLORE.match(text):
        return None
    for stage, pattern in _STAGES:
        if pattern.search(text):
            return stage
    return "other"


def _display_command(command: str) -> str:
    first = command.strip().split("\n", 1)[0]
    if re.search(r"\bcommit\b", first):
        first = _COMMIT_MSG.sub(r'\1 "…"', first)  # the message is not part of the procedure
    return _clip(first, 80)


@dataclass(slots=True)
class _Action:
    """One tool use: a call, and its result once seen."""

    call: _Event
    kind: str  # "shell", "edit" or "other"
    command: str = ""
    files: tuple[str, ...] = ()
    new_text: str = ""
    stage: str | None = None  # of the command's main part; "edit" for edits
    key: str = ""  # what a later run must match to count as "the same check"
    result: _Event | None = None
    ok: bool | None = None


_INPUT_FIELD = re.compile(
    r'"(?P<key>file_path|path|notebook_path|command|cmd)"\s*:\s*(?P<value>"(?:[^"\\]|\\.){0,4000}")'
)


def _tool_input(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The tool's input; from a clipped JSON string, at least its path or command.

    Constraint: the hook keeps metadata small, so a large input (a Write of a long
    file) arrives as a JSON text cut short, which no longer parses.
    """
    value = meta.get("tool_input")
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str) or not value.startswith("{"):
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping):
        return parsed
    fields: dict[str, Any] = {}
    for m in _INPUT_FIELD.finditer(value[:MAX_TEXT]):
        try:
            fields.setdefault(m.group("key"), json.loads(m.group("value")))
        except ValueError:
            continue
    return fields


_PATCH_FILE = re.compile(r"\*\*\* (?:Update|Add|Delete) File:\s*(\S+)")
# Files a shell command writes: Codex patches and edits through the shell.
_SHELL_REDIRECT = re.compile(r"(?<![0-9&>])>>?\s*(?P<path>(?!/dev/)[\w.][\w./-]{0,200})")
_SHELL_INPLACE = re.compile(
    r"^(?:sed|perl)\s+(?:-\w+\s+)*-[a-z]*i[a-z]*\b.*?\s(?P<path>[\w./-]+)\s*$"
)


def _shell_writes(command: str) -> list[str]:
    """The files a shell command edits (apply_patch, redirection, sed -i), if any."""
    head = command[:MAX_TEXT]
    if "*** Begin Patch" in head or head.startswith("apply_patch"):
        return _PATCH_FILE.findall(head)
    first = head.split("\n", 1)[0]
    out: list[str] = []
    for part in _split_command(first):
        if re.match(r"^(?:cat|echo|printf|tee)\b", part):
            out.extend(m.group("path") for m in _SHELL_REDIRECT.finditer(part))
            if part.startswith("tee "):
                out.extend(w for w in part.split()[1:] if not w.startswith("-"))
        m = _SHELL_INPLACE.match(part)
        if m:
            out.append(m.group("path"))
    return out


def _make_action(e: _Event) -> _Action:
    tool = str(e.meta.get("tool_name") or "").strip()
    low = tool.lower()
    ti = _tool_input(e.meta)
    sub = str(ti.get("command") or "") if low == "str_replace_based_edit_tool" else ""
    # A call's content is the hook's one-line description ("Bash: pytest -q"): the last
    # resort for the command or path. A result's content is output, never that.
    described = ""
    if e.type == "tool_call" and tool and e.content.startswith(f"{tool}: "):
        described = e.content[len(tool) + 2 :].split("\n", 1)[0].strip()
    if low in _SHELL_TOOLS or (low not in _EDIT_TOOLS and "command" in ti and not tool):
        raw = ti.get("command") if "command" in ti else ti.get("cmd")
        if isinstance(raw, list):
            raw = " ".join(str(x) for x in raw)
        command = _SHELL_WRAPPER.sub("", str(raw or described).strip())
        if command[:1] in "'\"" and command[-1:] == command[:1]:
            command = command[1:-1]
        written = _shell_writes(command)
        if written:
            roots = (e.project, e.cwd)
            rel = tuple(dict.fromkeys(_relative(f, *roots) for f in written))
            return _Action(e, "edit", command=command, files=rel, stage="edit")
        parts = _split_command(command)
        stages = [s for s in (_stage(p) for p in parts) if s]
        main = next((s for s in stages if s in _VERIFY_STAGES), stages[-1] if stages else None)
        key = main if main in _VERIFY_STAGES and main != "run" else " ".join(command.split()[:2])
        return _Action(e, "shell", command=command, stage=main, key=key)
    if low in _EDIT_TOOLS and sub.lower() not in _READ_SUBCOMMANDS:
        files: list[str] = []
        for k in ("file_path", "path", "notebook_path", "filename", "target_file"):
            if isinstance(ti.get(k), str):
                files.append(ti[k])
                break
        else:
            if described and "*** " not in described:
                files.append(described)
        changes = ti.get("changes")
        if isinstance(changes, Mapping):
            files.extend(str(k) for k in changes)
        for k in ("input", "patch", "content", "command"):
            if isinstance(ti.get(k), str) and "*** " in ti[k]:
                files.extend(_PATCH_FILE.findall(ti[k][:MAX_TEXT]))
        new_parts = [str(ti.get(k) or "") for k in ("new_string", "content", "new_str")]
        edits = ti.get("edits")
        if isinstance(edits, list):
            new_parts.extend(
                str(x.get("new_string") or "") for x in edits if isinstance(x, Mapping)
            )
        roots = (e.project, e.cwd)
        rel = tuple(dict.fromkeys(_relative(f, *roots) for f in files if f))
        return _Action(e, "edit", files=rel, new_text="\n".join(new_parts)[:4_000], stage="edit")
    return _Action(e, "other")


_EXIT_IN_TEXT = re.compile(
    r"(?:exit(?:ed)?\s+(?:with\s+)?(?:non-zero\s+)?(?:code|status)(?:\s+code)?|exit_code\s*[=:]|"
    r"returned\s+non-zero\s+exit\s+status)\s*(\d{1,3})",
    re.IGNORECASE,
)
_FAIL_SIGNS = re.compile(
    r"Traceback \(most recent call last\)|^(?:E\s+)?[A-Za-z_][\w.]*(?:Error|Exception):|"
    r"^FAILED\b|^FAIL\b|\b\d+ failed\b|\bnpm ERR!|^error(?:\[E\d+\])?:|\berror TS\d+|"
    r"panicked at|BUILD FAILED|\bCommand failed\b|^fatal:|\bFAILURES?\b|--- FAIL:|"
    r"\bTests?:\s+\d+ failed|^\s*\d+ errors?\b|\bSyntaxError\b|\bFound [1-9]\d* errors?\b|"
    r"\btest result: FAILED\b",
    re.MULTILINE,
)
_PASS_SIGNS = re.compile(
    r"\b\d+ passed\b|^OK\b|\bAll (?:\d+ )?tests? passed\b|\bBuild succeeded\b|"
    r"\bSuccess(?:fully)?\b|\b0 (?:errors|failures|failed)\b|^ok\s+\S+|"
    r"\bFound 0 errors\b|\bAll checks passed\b|\bno issues found\b|\bSuccess: no issues\b",
    re.MULTILINE | re.IGNORECASE,
)


def _scan_region(text: str) -> str:
    if len(text) <= MAX_RESULT_HEAD + MAX_RESULT_TAIL:
        return text
    return text[:MAX_RESULT_HEAD] + "\n" + text[-MAX_RESULT_TAIL:]


def _outcome(result: _Event, action: _Action) -> bool | None:
    """Did the command succeed? Exit code first, then what its output says."""
    meta = result.meta
    if meta.get("interrupted") is True or meta.get("is_interrupt") is True:
        return None  # the user stopped it: neither a failure nor a pass
    code = meta.get("exit_code", meta.get("exitCode", meta.get("returncode")))
    if isinstance(code, bool):
        code = None
    if isinstance(code, int):
        return code == 0
    if meta.get("is_error") is True or meta.get("success") is False:
        return False
    text = _scan_region(result.content)
    m = _EXIT_IN_TEXT.search(text)
    if m:
        return m.group(1) == "0"
    if _FAIL_SIGNS.search(text):
        return False
    if meta.get("hook_event_name") == "PostToolUse":
        # Claude Code fires PostToolUse only for a tool call that succeeded (a failed one
        # fires PostToolUseFailure), so with no sign of failure this one passed.
        return True
    if action.stage in _VERIFY_STAGES and _PASS_SIGNS.search(text):
        return True
    return None


@dataclass(slots=True)
class _Failure:
    action: _Action
    summary: str  # "KeyError: 'customer_id'"
    name: str  # "KeyError"
    location: str  # "orders/service.py:42 (in total)" or a test id
    test: str  # the failing test, when the runner names it
    ids: list[int]


# A Python traceback frame, and pytest's short form of one ("shop/a.py:88: in total").
_FRAME = re.compile(
    r'File "(?P<path>[^"]{1,300})", line (?P<line>\d+), in (?P<func>[\w<>.]+)|'
    r"^(?P<path2>[\w./-]{1,300}\.py):(?P<line2>\d+): in (?P<func2>[\w<>.]+)"
)
_EXC_LINE = re.compile(
    r"^(?:E\s+)?(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt|Warning))"
    r"(?::\s*(?P<msg>.{0,200}))?$"
)
# tsc "src/a.ts(14,7): error TS2322: ...", gcc/rustc/eslint "src/a.c:3:5: error: ...".
_COMPILER_ERR = re.compile(
    r"^(?P<path>[\w./-]{1,200})(?:\((?P<line>\d+),\d+\)|:(?P<line2>\d+):\d+):?\s+"
    r"(?:(?:error|fatal error)\s*(?P<code>[A-Z]{1,4}\d{2,6})?:?|(?P<lint>[A-Z]{1,4}\d{2,6})\b)"
    r"\s+(?P<msg>.{1,200})$"
)
_PANIC = re.compile(r"panicked at (?P<path>[\w./-]{1,200}):(?P<line>\d+)(?::\d+)?:?\s*(?P<msg>.*)$")
_FAILED_TEST = re.compile(r"^FAILED\s+(?P<test>\S+)(?:\s+-\s+(?P<why>.{0,200}))?$")
_GENERIC_ERR = re.compile(
    r"^(?:error(?:\[E\d+\])?:|npm ERR!|fatal:|.*\berror TS\d+:|--- FAIL:|FAIL\s|.*panicked at)",
    re.IGNORECASE,
)


def _failure(action: _Action, result: _Event, pos: int) -> _Failure:
    """What broke: the exception (a traceback's last line), the failing test, the place."""
    text = _scan_region(result.content)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()][-400:]
    summary = name = location = test = ""
    roots = (result.project, result.cwd, action.call.project, action.call.cwd)
    for ln in lines:
        m = _FAILED_TEST.match(ln)
        if m:
            location = location or m.group("test")
            test = test or m.group("test")
            why = (m.group("why") or "").strip()
            if why and not summary:
                summary = why
                name = why.split(":", 1)[0].strip()
    frames: list[tuple[str, str, str]] = []
    for ln in lines:
        fm = _FRAME.search(ln)
        if fm:
            path = fm.group("path") or fm.group("path2")
            if "site-packages" not in path and "/lib/python" not in path:
                frames.append(
                    (
                        path,
                        fm.group("line") or fm.group("line2"),
                        fm.group("func") or fm.group("func2"),
                    )
                )
    # The deepest frame in the project's own code (not the test calling it) is where
    # the error was raised; the failing test is kept apart.
    code_frames = [f for f in frames if not re.search(r"(?:^|/)tests?/|(?:^|/)test_", f[0])]
    chosen = code_frames[-1] if code_frames else (frames[-1] if frames else None)
    if chosen is not None:
        test = location
        location = f"{_relative(chosen[0], *roots)}:{chosen[1]} (in {chosen[2]})"
    if not summary:
        for i, ln in enumerate(lines):
            m = _PANIC.search(ln[:300])
            if m:
                msg = m.group("msg").strip() or (lines[i + 1][:200] if i + 1 < len(lines) else "")
                name = "panic"
                summary = f"panic: {msg}" if msg else "panic"
                location = location or f"{_relative(m.group('path'), *roots)}:{m.group('line')}"
                break
    if not summary:
        for ln in lines:
            m = _COMPILER_ERR.match(ln[:300])
            if m:
                name = m.group("code") or m.group("lint") or "error"
                summary = f"{name}: {m.group('msg').strip()}"
                location = (
                    location
                    or f"{_relative(m.group('path'), *roots)}:{m.group('line') or m.group('line2')}"
                )
                break
    if not summary:
        for ln in reversed(lines):
            m = _EXC_LINE.match(ln[:300])
            if m:
                name = m.group("name")
                msg = (m.group("msg") or "").strip()
                summary = f"{name}: {msg}" if msg else name
                break
    if not summary:
        for ln in lines:
            if _GENERIC_ERR.match(ln[:300]):
                summary = ln[:200]
                break
    if not summary:
        counts = re.search(r"\b\d+ failed\b[^\n]{0,60}", text)
        summary = counts.group(0) if counts else ""
    return _Failure(action, _clip(summary, 200), name, location, test, [action.call.pos, pos])
