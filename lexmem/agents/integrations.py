"""Setting lexmem up in Claude Code and Codex, taking it out again, and what doctor reports.

Where each agent keeps what lexmem adds (checked against the agents' documentation):

- Claude Code hooks: ``.claude/settings.json`` in the project, ``~/.claude/settings.json``
  for the user (code.claude.com/docs/en/hooks: "Configuration"). MCP servers:
  ``.mcp.json`` at the project root, ``mcpServers`` at the top of ``~/.claude.json`` for
  the user (code.claude.com/docs/en/mcp: "MCP installation scopes").
- Codex: hooks in ``$CODEX_HOME/hooks.json`` (``~/.codex`` by default), the same
  event → matcher group → handler shape as Claude Code's (developers.openai.com/codex/hooks:
  "Where Codex looks for hooks"); the MCP server as ``[mcp_servers.lexmem]`` in
  ``config.toml`` (developers.openai.com/codex/config-reference); where the user turned
  hooks off (``[features] hooks = false``, or the older ``codex_hooks``), the ``notify``
  program instead, which reports each finished turn.

Every edit keeps what is already there: other hooks on the same events, other servers,
unknown keys and their order. JSON is re-serialised in the file's own indentation, so a
file written by the agent (or by ``json.dumps(indent=2)``) comes back byte for byte
apart from lexmem's entries; TOML is edited as text (lexmem's own table or line is
inserted or cut) and the result is parsed with :mod:`tomllib` to check that it means
exactly what was intended. Install backs a file up beside itself (``NAME.lexmem-backup``)
before it changes it; every file is written atomically (temporary file and rename) with its
mode kept. Uninstall removes those backups, and the files and folders install created
once they are empty again, so the files end as they were before install.
lexmem's entries are recognised by their command (``lexmem-hook …``, ``lexmem mcp``),
so uninstalling removes exactly them, whatever path they were installed with.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shlex
import shutil
import stat
import sys
import time
import tomllib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lexmem.agents import hookcall
from lexmem.base import atomic_write
from lexmem.capture.entry import BACKGROUND_FLAG
from lexmem.capture.policy import capture_mode, is_paused, project_root
from lexmem.config import (
    CREATED_RECORD,
    DIGEST_LINK_NAME,
    DIGEST_LINKS,
    Paths,
    load_capture_rules,
)
from lexmem.errors import InvalidInputError, LexmemError
from lexmem.locks import service_running

__all__ = [
    "AGENTS",
    "ENV_VARS",
    "Change",
    "Finding",
    "Plan",
    "apply_plan",
    "check_hook",
    "claude_version",
    "executable",
    "installed",
    "plan",
    "service_state",
]

AGENTS = ("claude", "codex")
SCOPES = ("user", "project")
BACKUP_SUFFIX = ".lexmem-backup"
# Files lexmem created (so uninstalling removes them rather than leave an empty one).
# The hook returns in tens of milliseconds: what is over its work budget it hands to a
# detached child (lexmem.capture.hook.HOOK_WORK_CHARS) instead of checking it while the
# agent waits; 10 s leaves room on a busy machine without letting a stuck hook hold the
# agent for the agents' default of 60-600 s.
HOOK_TIMEOUT = 10
# Codex caps its SessionEnd hook at 3 s and warns at every start about a longer one.
CODEX_SESSION_END_TIMEOUT = 3
# Tool events fire many times a turn: the tool-name matcher matches every tool.
_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
# Claude Code runs these without waiting: lexmem only records them, and they are the
# events that fire after every tool call, where waiting would slow the agent most.
_ASYNC_EVENTS = frozenset({"PostToolUse", "PostToolUseFailure"})
# Claude Code calls an MCP tool for a hook (``"type": "mcp_tool"``) since 2.1.118: no
# process per event. It cannot at SessionStart (no MCP client yet: the digest and the
# service's start stay the command's) nor at SessionEnd (its servers are gone by then).
MCP_TOOL_HOOKS_SINCE = (2, 1, 118)
MCP_TOOL_EVENTS = frozenset(
    {"UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop",
     "SubagentStop", "PreCompact"}
)  # fmt: skip
# An async SessionEnd command gets its payload in 2.1.332; 2.1.197 starts it with none.
ASYNC_SESSION_END_SINCE = (2, 1, 332)
HOOK_TOOL = hookcall.HOOK_TOOL
HOOK_TOOL_NAME = f"mcp__lexmem__{HOOK_TOOL}"  # as Claude Code names it (and its rules)
# Per event, the payload fields beyond the common ones that lexmem records.
_EVENT_FIELDS = {
    "UserPromptSubmit": ("prompt",),
    "PreToolUse": ("tool_name", "tool_input", "tool_use_id"),
    "PostToolUse": ("tool_name", "tool_input", "tool_response", "tool_use_id"),
    "PostToolUseFailure": ("tool_name", "tool_input", "tool_use_id", "error", "is_interrupt"),
    "Stop": ("last_assistant_message", "stop_hook_active"),
    "SubagentStop": ("last_assistant_message", "stop_hook_active", "agent_id", "agent_type",
                     "agent_transcript_path"),
    "PreCompact": ("trigger", "custom_instructions"),
}  # fmt: skip
CLAUDE_HOOK_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
    "Stop", "SubagentStop", "PreCompact", "SessionEnd",
)  # fmt: skip
# Codex's events that `lexmem-hook codex` turns into inbox events (it has no
# PostToolUseFailure: a failed tool call arrives as PostToolUse).
CODEX_HOOK_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SubagentStop",
    "PreCompact", "SessionEnd",
)  # fmt: skip
# The environment lexmem reads to find its data folder, the location pointer, the trial
# record and the licence, and its debug switch. Codex starts an MCP server with only a few
# variables (HOME, PATH, LANG, SHELL, TERM, ...) plus those its ``env_vars`` names, so
# without these a `LEXMEM_HOME` set for Codex would send its `lexmem mcp` to another folder.
ENV_VARS = (
    "LEXMEM_HOME", "LEXMEM_LICENCE", "LEXMEM_LICENCE_FILE", "LEXMEM_DEBUG",
    "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME",
)  # fmt: skip
_MARK = "# lexmem: added by `lexmem install codex`; `lexmem uninstall codex` removes it"


# -- what install writes --------------------------------------------------------------


def executable(name: str) -> str:
    """How an agent should call ``name``: the bare name when PATH finds this installation's
    copy, else its absolute path beside this interpreter (a virtualenv the agent's shell
    never activated), so the agent finds the same lexmem that installed it."""
    exe = name + (".exe" if os.name == "nt" else "")
    # Not resolved: a virtualenv's python is a symlink to the base interpreter, while its
    # scripts live beside the link.
    beside = Path(sys.executable).absolute().parent / exe
    on_path = shutil.which(name)
    if beside.exists():
        if on_path and Path(on_path).resolve() == beside.resolve():
            return name
        return str(beside)
    if on_path:
        return name
    raise InvalidInputError(
        f"cannot find the `{name}` command beside {sys.executable} or on PATH; reinstall lexmem"
    )


def _hook_command(adapter: str) -> str:
    return f"{shlex.quote(executable('lexmem-hook'))} {adapter}"


# The first words of Claude Code's SessionStart command (``:`` is the shell's command
# that does nothing): how install, uninstall and doctor know it for lexmem's.
SESSION_START_MARK = ": lexmem-session-start;"
# The first words of a command that records its event in the background.
BACKGROUND_MARK = ": lexmem-background;"


def session_start_command(home: Path) -> str:
    """Claude Code's SessionStart command: the digest printed by the shell, with no
    Python process for the agent to wait on, where it can be; ``lexmem-hook claude``
    where it cannot.

    Claude Code runs a command hook with ``/bin/sh -c`` in the session's folder. The
    shell prints the project's digest (the service links it from ``digests/at/<folder>/
    digest.md``, :func:`lexmem.config.digest_link`) when the folder is its own project,
    the way :func:`lexmem.capture.policy.project_root` sees it (a repository's root, with
    a ``.git`` folder, or a folder with no repository around it), no ``.lexmem-optout``
    marker lies in it or above, and the settings have not changed since the digest was
    written (an opt-out added to them). Then it starts ``lexmem-hook claude --no-digest``
    in the background, which records the event at once (stamped with the time the agent
    started it; the session's first, it must not come after a short session's end) and
    starts the service; the agent goes on at once. Anything else (a subfolder, a
    worktree, an opted-out repository, no digest yet, settings newer than the digest)
    runs ``lexmem-hook claude`` as before, which decides it all in Python.

    ``home``: the data folder install writes for; ``LEXMEM_HOME`` in the agent's
    environment wins, as it does for ``lexmem-hook``. POSIX shells only (dash, bash,
    zsh: builtins, ``cat``).
    """
    hook = _hook_command("claude")
    default = shlex.quote(str(home.absolute()))
    return (
        f'{SESSION_START_MARK} h=$LEXMEM_HOME; [ -n "$h" ] || h={default}; '
        f'f="$h/digests/{DIGEST_LINKS}$PWD/{DIGEST_LINK_NAME}"; p=$PWD; d=$PWD; '
        # Up from the folder: a marker anywhere, or a repository above it, decides for Python.
        'while [ -n "$d" ] && [ ! -e "$d/.lexmem-optout" ] '
        '&& { [ "$d" = "$p" ] || [ ! -e "$d/.git" ]; }; do d=${d%/*}; done; '
        'if [ -z "$d" ] && [ ! -e /.lexmem-optout ] && { [ -d "$p/.git" ] || [ ! -e "$p/.git" ]; } '
        '&& [ -r "$f" ] && [ ! "$f" -ot "$h/settings.toml" ]; then '
        f'exec 3<&0; {hook} --no-digest {BACKGROUND_FLAG} <&3 >/dev/null 2>&1 3<&- & cat "$f"; '
        f"else exec {hook}; fi"
    )


def background_command(adapter: str) -> str:
    """``lexmem-hook ADAPTER`` started in the background with the event's payload, its
    output to ``/dev/null``: the agent waits for the shell only (a few milliseconds, as
    for a command that does nothing). For an event whose hook prints nothing the agent
    reads, where the agent has no ``async`` that passes the payload (Claude Code's
    SessionEnd before 2.1.332). It starts at once: Claude Code may end what its hooks
    left running when it exits, so the hook must be under way by then. The event is
    stamped with the moment the agent started the process, so it keeps its place among
    the session's events."""
    return (
        f"{BACKGROUND_MARK} exec 3<&0; {_hook_command(adapter)} {BACKGROUND_FLAG} "
        "<&3 >/dev/null 2>&1 3<&- &"
    )


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``(2, 1, 197)`` from ``claude --version``'s "2.1.197 (Claude Code)"; None if none."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(p) for p in found.groups()) if found else None


def claude_version() -> tuple[int, ...] | None:
    """The installed Claude Code's version (``claude --version``); None when there is no
    ``claude`` on PATH or it does not say."""
    import subprocess

    exe = shutil.which("claude")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=30, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(done.stdout) if done.returncode == 0 else None


def _hook_handler(
    agent: str, event: str, version: tuple[int, ...] | None, home: Path | None = None
) -> dict[str, Any]:
    """lexmem's handler for ``event``: a call of lexmem's MCP tool where the agent runs
    one (no process), the command otherwise (see docs/agents.md). ``home``: the data
    folder, for Claude Code's SessionStart command (:func:`session_start_command`; the
    plain hook command without it, or on Windows)."""
    mcp = agent == "claude" and version is not None and version >= MCP_TOOL_HOOKS_SINCE
    if mcp and event in MCP_TOOL_EVENTS:
        return {"type": "mcp_tool", "server": "lexmem", "tool": HOOK_TOOL,
                "input": _hook_input(event), "timeout": HOOK_TIMEOUT}  # fmt: skip
    command = _hook_command(agent)
    native_async = version is not None and version >= ASYNC_SESSION_END_SINCE
    if agent == "claude" and home is not None and os.name != "nt":  # a POSIX shell runs it
        if event == "SessionStart":
            command = session_start_command(home)
        elif event == "SessionEnd" and not native_async:
            command = background_command(agent)  # an async one gets no payload before 2.1.332
    handler: dict[str, Any] = {"type": "command", "command": command}
    if agent == "codex" and event == "SessionEnd":
        handler["timeout"] = CODEX_SESSION_END_TIMEOUT
    else:
        handler["timeout"] = HOOK_TIMEOUT
    if agent == "claude" and (event in _ASYNC_EVENTS or (event == "SessionEnd" and native_async)):
        handler["async"] = True
        if command == _hook_command(agent):  # nobody waits: the warm service takes it whole
            handler["command"] = f"{command} {BACKGROUND_FLAG}"
    return handler


def _hook_input(event: str) -> dict[str, str]:
    """The payload's fields the tool takes, each as Claude Code fills it in (a field the
    event lacks comes as "")."""
    fields = ["hook_event_name", "session_id", "cwd", "transcript_path", "permission_mode"]
    fields += list(_EVENT_FIELDS.get(event, ()))
    return {f: "${" + f + "}" for f in fields}


def _hook_groups(
    agent: str, version: tuple[int, ...] | None = None, home: Path | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(event, matcher group) for every event lexmem's hook handles for ``agent``
    (``version``: Claude Code's, which decides the kind of handler; ``home``: the data
    folder, see :func:`_hook_handler`)."""
    groups = []
    for event in CLAUDE_HOOK_EVENTS if agent == "claude" else CODEX_HOOK_EVENTS:
        handler = _hook_handler(agent, event, version, home)
        group: dict[str, Any] = {}
        # Claude Code matches "*" as every tool; Codex reads the matcher as a regular
        # expression (where "*" is invalid) and matches everything when it is left out.
        if agent == "claude" and event in _TOOL_EVENTS:
            group["matcher"] = "*"
        group["hooks"] = [handler]
        groups.append((event, group))
    return groups


def _mcp_entry(agent: str, current: Any = None) -> dict[str, Any]:
    """lexmem's MCP server entry for ``agent``, given the entry there now (``current``)."""
    command = executable("lexmem")
    if agent == "claude":
        entry: dict[str, Any] = {"type": "stdio", "command": command, "args": ["mcp"]}
        # The user's own choice stays theirs: only an entry without the key gets it.
        if not (isinstance(current, dict) and "alwaysLoad" in current):
            entry["alwaysLoad"] = True
        return entry
    theirs = current.get("env_vars") if isinstance(current, dict) else None
    extra = (
        [v for v in theirs if isinstance(v, str) and v not in ENV_VARS]
        if isinstance(theirs, list)
        else []
    )
    # Codex runs no tool hooks (0.169, 0.171): the hooks' tool is not for its model.
    return {"command": command, "args": ["mcp"], "env_vars": [*ENV_VARS, *extra],
            "disabled_tools": [HOOK_TOOL]}  # fmt: skip


def _is_lexmem_hook(command: Any) -> bool:
    if not isinstance(command, str):
        return False
    if command.startswith((SESSION_START_MARK, BACKGROUND_MARK)):
        return True
    try:
        parts = shlex.split(command)
    except ValueError:
        return False
    return bool(parts) and Path(parts[0]).name in ("lexmem-hook", "lexmem-hook.exe")


def _is_ours(handler: Any) -> bool:
    """lexmem's hook handler: its command, or a call of its MCP server's hook tool."""
    if not isinstance(handler, dict):
        return False
    if handler.get("type") == "mcp_tool":
        return handler.get("server") == "lexmem" and handler.get("tool") == HOOK_TOOL
    return _is_lexmem_hook(handler.get("command"))


def _is_lexmem_server(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    return Path(entry["command"]).name in ("lexmem", "lexmem.exe") and entry.get("args") == ["mcp"]


# -- editing JSON ---------------------------------------------------------------------------


def _json_load(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "nothing was changed"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidInputError(
            f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed"
        )
    return data


def _json_dump(data: dict[str, Any], original: str | None) -> str:
    """``data`` in the original file's indentation (two spaces for a new file)."""
    indent: str | int | None = 2
    separators: tuple[str, str] | None = None
    newline = True
    if original and original.strip():
        newline = original.endswith("\n")
        lines = original.strip().splitlines()
        if len(lines) == 1:
            indent = None
            if not re.search(r"[,:] ", original):  # written compact: {"a":1,"b":2}
                separators = (",", ":")
        else:
            found = re.match(r"[ \t]+", lines[1])
            indent = found.group(0) if found else 0
    text = json.dumps(data, indent=indent, separators=separators, ensure_ascii=False)
    return text + "\n" if newline else text


def _section(data: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise InvalidInputError(
            f"{path}: {key!r} is a JSON {type(value).__name__}, not an "
            f"{'object' if kind is dict else 'array'}; nothing was changed"
        )
    return value


def _add_hooks(
    data: dict[str, Any], agent: str, path: Path, version: tuple[int, ...] | None = None,
    home: Path | None = None,
) -> None:  # fmt: skip
    hooks = _section(data, "hooks", dict, path)
    if hooks is None:
        hooks = data["hooks"] = {}
    for event, group in _hook_groups(agent, version, home):
        groups = _section(hooks, event, list, path)
        if groups is None:
            groups = hooks[event] = []
        handler = group["hooks"][0]
        found = False
        for g in groups:
            handlers = g.get("hooks") if isinstance(g, dict) else None
            if not isinstance(handlers, list):
                continue
            for i, h in enumerate(handlers):
                if _is_ours(h):
                    # An older entry (pasted from the README, or another install path) is
                    # brought up to date where it stands; the user's matcher stays theirs.
                    if h != handler:
                        handlers[i] = copy.deepcopy(handler)
                    found = True
                    break
            if found:
                break
        if not found:
            groups.append(copy.deepcopy(group))


def _remove_hooks(data: dict[str, Any]) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return
    removed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for g in groups:
            handlers = g.get("hooks") if isinstance(g, dict) else None
            if isinstance(handlers, list):
                kept = [h for h in handlers if not _is_ours(h)]
                if len(kept) != len(handlers):
                    removed = True
                    if not kept:
                        continue  # the group held only lexmem's hook
                    g = {k: (kept if k == "hooks" else v) for k, v in g.items()}
            kept_groups.append(g)
        if len(kept_groups) != len(groups) or kept_groups != groups:
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    if removed and not hooks:
        del data["hooks"]


def _add_deny(data: dict[str, Any], path: Path) -> None:
    """Keep the hooks' tool from the model: a ``permissions.deny`` rule for it. Claude Code
    then leaves it out of the tools it offers, while its mcp_tool hooks still call it."""
    perms = _section(data, "permissions", dict, path)
    if perms is None:
        perms = data["permissions"] = {}
    deny = _section(perms, "deny", list, path)
    if deny is None:
        deny = perms["deny"] = []
    if HOOK_TOOL_NAME not in deny:
        deny.append(HOOK_TOOL_NAME)


def _remove_deny(data: dict[str, Any], before: dict[str, Any] | None = None) -> None:
    """Take lexmem's deny rule out, and the ``deny`` list and ``permissions`` object install
    created for it (``before``: the file as install's backup kept it, which says whether
    the user had an empty list there)."""
    perms = data.get("permissions")
    deny = perms.get("deny") if isinstance(perms, dict) else None
    if not isinstance(perms, dict) or not isinstance(deny, list) or HOOK_TOOL_NAME not in deny:
        return
    deny[:] = [rule for rule in deny if rule != HOOK_TOOL_NAME]
    had = before.get("permissions") if isinstance(before, dict) else None
    if not deny and not (isinstance(had, dict) and had.get("deny") == []):
        del perms["deny"]
        if not perms and not (isinstance(had, dict) and had == {}):
            del data["permissions"]


def _uninstall_claude_settings(data: dict[str, Any], backup: Path) -> None:
    _remove_hooks(data)
    try:
        before = json.loads(backup.read_text(encoding="utf-8")) if backup.is_file() else None
    except (OSError, ValueError):
        before = None
    _remove_deny(data, before if isinstance(before, dict) else None)


def _add_server(data: dict[str, Any], agent: str, path: Path, notes: list[str]) -> None:
    servers = _section(data, "mcpServers", dict, path)
    if servers is None:
        servers = data["mcpServers"] = {}
    current = servers.get("lexmem")
    if current is not None and not _is_lexmem_server(current):
        notes.append(f"{path}: an MCP server named 'lexmem' runs something else; left as it is")
        return
    entry = _mcp_entry(agent, current)
    if current is None:
        servers["lexmem"] = entry
    elif {k: current.get(k) for k in entry} != entry:
        current.update(entry)  # the user's extra keys (env, …) stay


def _remove_server(data: dict[str, Any]) -> None:
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and _is_lexmem_server(servers.get("lexmem")):
        del servers["lexmem"]
        if not servers:
            del data["mcpServers"]


# -- editing TOML as text ------------------------------------------------------------------

_HEADER = re.compile(r"^[ \t]*\[")
_OUR_TABLE = re.compile(
    r"""^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*("lexmem"|'lexmem'|lexmem)[ \t]*[\].]"""
)
_NOTIFY = re.compile(r"^[ \t]*notify[ \t]*=")


def _toml_load(path: Path, text: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{path} is not valid TOML ({exc}); nothing was changed") from exc


def _toml_str(value: str) -> str:
    # A JSON string without ASCII escaping is a valid TOML basic string: both escape
    # only quotes, backslashes and control characters, in the same notation.
    return json.dumps(value, ensure_ascii=False)


def _toml_array(values: list[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def _append_block(text: str, block: str) -> str:
    if not text:
        return block
    return text + ("\n" if text.endswith("\n") else "\n\n") + block


def _cut_lines(text: str, start: int, end: int) -> str:
    """``text`` without lines [start, end), lexmem's marker line just above them, and the
    blank line install put between its block and the user's text (before a block it
    appended, after a line it put at the top)."""
    lines = text.splitlines(keepends=True)
    if start > 0 and lines[start - 1].strip() == _MARK:
        start -= 1
    if end >= len(lines) and start > 0 and not lines[start - 1].strip():
        start -= 1
    elif start == 0 and end < len(lines) and not lines[end].strip():
        end += 1
    elif start > 0 and end < len(lines) and not lines[start - 1].strip() and not lines[end].strip():
        start -= 1  # between two blank lines (another table was appended after it): keep one
    return "".join(lines[:start] + lines[end:])


def _our_table_span(text: str) -> tuple[int, int] | None:
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if _OUR_TABLE.match(line):
            end = i + 1
            while end < len(lines) and not (
                _HEADER.match(lines[end]) and not _OUR_TABLE.match(lines[end])
            ):
                end += 1
            # Comments and blank lines that end the block belong to whatever comes next.
            while end > i + 1 and (
                not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")
            ):
                end -= 1
            return i, end
    return None


def _notify_span(text: str) -> tuple[int, int] | None:
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if _HEADER.match(line):
            return None  # notify is a top-level key: only before the first table
        if _NOTIFY.match(line) and line.rstrip().endswith("]"):
            return i, i + 1
    return None


def _without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``data`` without the dotted key (and a parent table it leaves empty)."""
    out = copy.deepcopy(data)
    node = out
    for k in keys[:-1]:
        node = node.get(k, {})
    node.pop(keys[-1], None)
    if len(keys) == 2 and out.get(keys[0]) == {}:
        out.pop(keys[0])
    return out


def _verify(path: Path, new_text: str, expected: dict[str, Any]) -> str:
    try:
        got = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(
            f"{path}: lexmem's edit would not be valid TOML here ({exc}); nothing was changed"
        ) from exc
    if got != expected:
        raise InvalidInputError(
            f"{path}: lexmem's edit would change more than its own entries (is mcp_servers "
            "written as an inline table?); nothing was changed"
        )
    return new_text


def _codex_hooks_off(config: dict[str, Any]) -> bool:
    features = config.get("features")
    if not isinstance(features, dict):
        return False
    return features.get("hooks") is False or features.get("codex_hooks") is False


# -- Codex's trust in hooks ------------------------------------------------------------------
#
# Codex runs a hook from hooks.json only once the user trusted it (the "Hooks need review"
# prompt, or /hooks), and records that in the user's config.toml as one table per handler:
# ``[hooks.state."<hooks.json path>:<event_snake_case>:<group>:<handler>"]`` holding
# ``trusted_hash = "sha256:…"`` (and ``enabled = false`` for one the user turned off).
# The hash is Codex's own digest of the handler; lexmem does not compute it, so "trusted"
# here means an entry with a hash for the handler at that place.

_STATE_KEY = re.compile(r"^(?P<source>.+):(?P<label>[a-z_]+):(?P<group>\d+):(?P<handler>\d+)$")
_STATE_HEADER = re.compile(
    r"""^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\.[ \t]*"""
    r"""(?P<key>"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)[ \t]*\][ \t]*(?:#.*)?$"""
)
_EMPTY_HEADERS = (
    re.compile(r"^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\][ \t]*(?:#.*)?$"),
    re.compile(r"^[ \t]*\[[ \t]*hooks[ \t]*\][ \t]*(?:#.*)?$"),
)
Position = tuple[str, int, int]  # (event label, group index, handler index)


def _event_label(event: str) -> str:
    """Codex's name for an event in a state key: SessionStart -> session_start."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def _lexmem_handlers(data: dict[str, Any]) -> dict[Position, Any]:
    """Where lexmem's handlers stand in a hooks.json, and what each is (its group's
    matcher and the handler): what Codex's trust in it is bound to."""
    found: dict[Position, Any] = {}
    hooks = data.get("hooks")
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for gi, g in enumerate(groups if isinstance(groups, list) else []):
            handlers = g.get("hooks") if isinstance(g, dict) else None
            for hi, h in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(h, dict) and _is_lexmem_hook(h.get("command")):
                    found[(_event_label(event), gi, hi)] = (g.get("matcher"), h)
    return found


def _same_file(source: str, path: Path) -> bool:
    if source == str(path):
        return True
    try:
        return os.path.realpath(source) == os.path.realpath(path)
    except (OSError, ValueError):
        return False


def _hook_states(config: dict[str, Any], hooks_file: Path) -> dict[Position, tuple[str, Any]]:
    """Codex's state entries for handlers of ``hooks_file``: position -> (key, entry)."""
    hooks = config.get("hooks")
    states = hooks.get("state") if isinstance(hooks, dict) else None
    out: dict[Position, tuple[str, Any]] = {}
    for key, entry in states.items() if isinstance(states, dict) else ():
        m = _STATE_KEY.match(key.strip())
        if m and _same_file(m["source"], hooks_file):
            out[(m["label"], int(m["group"]), int(m["handler"]))] = (key, entry)
    return out


def _untrusted(
    config: dict[str, Any], hooks_data: dict[str, Any], hooks_file: Path
) -> tuple[int, int, int]:
    """(lexmem's handlers in hooks.json, how many Codex has not trusted, how many the user
    turned off in Codex)."""
    mine = _lexmem_handlers(hooks_data)
    states = _hook_states(config, hooks_file)
    untrusted = disabled = 0
    for position in mine:
        entry = states.get(position, ("", None))[1]
        entry = entry if isinstance(entry, dict) else {}
        if entry.get("enabled") is False:
            disabled += 1
        elif not isinstance(entry.get("trusted_hash"), str) or not entry["trusted_hash"]:
            untrusted += 1
    return len(mine), untrusted, disabled


TRUST_HINT = (
    "open `codex` once and approve lexmem's hooks under 'Hooks need review' (or type /hooks)"
)


def _toml_key(text: str) -> str | None:
    try:
        value = tomllib.loads(f"k = {text}")["k"] if text[0] in "\"'" else text
    except tomllib.TOMLDecodeError:
        return None
    return value if isinstance(value, str) else None


def _cut_span(lines: list[str], start: int, end: int) -> list[str]:
    """``lines`` without [start, end) and the blank line that separated it from what came
    before, when what follows is a blank line or nothing."""
    if start > 0 and not lines[start - 1].strip() and (end >= len(lines) or not lines[end].strip()):
        start -= 1
    return lines[:start] + lines[end:]


def _table_end(lines: list[str], i: int) -> int:
    end = i + 1
    while end < len(lines) and not _HEADER.match(lines[end]):
        end += 1
    while end > i + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return end


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with an empty [hooks.state] and then an empty [hooks] left out."""
    out = copy.deepcopy(data)
    hooks = out.get("hooks")
    if isinstance(hooks, dict):
        if hooks.get("state") == {}:
            del hooks["state"]
        if not hooks:
            del out["hooks"]
    return out


def _drop_states(path: Path, text: str, keys: set[str]) -> str | None:
    """``text`` without Codex's state tables for ``keys`` (and the [hooks.state] or [hooks]
    header they leave empty); None when they are not written as tables lexmem can cut."""
    lines = text.splitlines(keepends=True)
    spans = []
    for i, line in enumerate(lines):
        m = _STATE_HEADER.match(line.rstrip("\r\n"))
        if m and _toml_key(m["key"]) in keys:
            spans.append((i, _table_end(lines, i)))
    for start, end in reversed(spans):
        lines = _cut_span(lines, start, end)
    expected = copy.deepcopy(tomllib.loads(text))
    for key in keys:
        expected.get("hooks", {}).get("state", {}).pop(key, None)
    expected = _plain(expected)
    if _plain(tomllib.loads("".join(lines))) != expected:
        return None
    if "hooks" not in expected:
        # Headers Codex may have written above its entries, now with nothing under them.
        for header in _EMPTY_HEADERS:
            for i, line in enumerate(lines):
                if header.match(line.rstrip("\r\n")) and _table_end(lines, i) == i + 1:
                    lines = _cut_span(lines, i, i + 1)
                    break
    out = "".join(lines)
    try:
        return out if _plain(tomllib.loads(out)) == expected else None
    except tomllib.TOMLDecodeError:
        return None


def _server_block(entry: dict[str, Any]) -> str:
    return (
        f"{_MARK}\n[mcp_servers.lexmem]\ncommand = {_toml_str(entry['command'])}\n"
        f"args = {_toml_array(entry['args'])}\nenv_vars = {_toml_array(entry['env_vars'])}\n"
        f"disabled_tools = {_toml_array(entry['disabled_tools'])}\n"
    )


def _codex_toml(path: Path, text: str | None, install: bool, notes: list[str]) -> str | None:
    """config.toml with lexmem's MCP table (and notify line, where hooks are off) added or
    removed; ``None`` when there is nothing to change."""
    original = text or ""
    data = _toml_load(path, original)
    out = original
    servers = data.get("mcp_servers")
    current = servers.get("lexmem") if isinstance(servers, dict) else None
    if current is not None and not _is_lexmem_server(current):
        if install:
            notes.append(f"{path}: [mcp_servers.lexmem] runs something else; left as it is")
    else:
        entry = _mcp_entry("codex", current) if install else {}
        if current is not None and (not install or {k: current.get(k) for k in entry} != entry):
            span = _our_table_span(out)
            if span is None:
                raise InvalidInputError(
                    f"{path}: cannot find the text of [mcp_servers.lexmem] (written inline?); "
                    "nothing was changed"
                )
            expected = _without(tomllib.loads(out), "mcp_servers", "lexmem")
            if install:
                # An older entry is brought up to date where it stands.
                expected.setdefault("mcp_servers", {})["lexmem"] = entry
                lines = out.splitlines(keepends=True)
                start, end = span
                if start > 0 and lines[start - 1].strip() == _MARK:
                    start -= 1
                out = "".join(lines[:start]) + _server_block(entry) + "".join(lines[end:])
                out = _verify(path, out, expected)
            else:
                out = _verify(path, _cut_lines(out, *span), expected)
            current = entry if install else None
        if install and current is None:
            expected = tomllib.loads(out)
            expected.setdefault("mcp_servers", {})["lexmem"] = entry
            out = _verify(path, _append_block(out, _server_block(entry)), expected)
    # notify: Codex's program for each finished turn; lexmem's only where hooks are off.
    notify = data.get("notify")
    ours = (
        isinstance(notify, list) and bool(notify) and _is_lexmem_hook(shlex.join(map(str, notify)))
    )
    if install and _codex_hooks_off(data):
        if notify is None:
            value = [executable("lexmem-hook"), "codex"]
            expected = tomllib.loads(out)
            expected["notify"] = value
            top = f"{_MARK}\nnotify = {_toml_array(value)}\n" + ("\n" if out else "")
            out = _verify(path, top + out, expected)
            notes.append(f"{path}: Codex hooks are off there, so lexmem captures through notify")
        elif not ours:
            shown = notify[0] if isinstance(notify, list) and notify else notify
            notes.append(
                f"{path}: Codex hooks are off and notify already runs {shown!r}; left as it is, "
                "so Codex sessions are not captured"
            )
    elif not install and ours:
        span = _notify_span(out)
        if span is not None:
            out = _verify(path, _cut_lines(out, *span), _without(tomllib.loads(out), "notify"))
    return out if out != original else None


# -- plans -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Change:
    """One file's text before and after (``None``: the file is absent)."""

    path: Path
    before: str | None
    after: str | None

    def diff(self) -> str:
        a = (self.before or "").splitlines(keepends=True)
        b = (self.after or "").splitlines(keepends=True)
        lines = difflib.unified_diff(
            a, b,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )  # fmt: skip
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)  # fmt: skip


@dataclass(slots=True)
class Plan:
    """What install or uninstall would change, and what it leaves alone (said in one line each)."""

    agent: str
    action: str
    scope: str
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Files that exist only because lexmem created them: removed when they empty again.
    created: set[str] = field(default_factory=set)

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)


def _user_home() -> Path:
    return Path(os.path.expanduser("~"))


def _codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else _user_home() / ".codex"


def _claude_files(scope: str, cwd: Path | None) -> tuple[Path, Path]:
    """(hooks file, MCP servers file) for a Claude Code scope."""
    if scope == "user":
        home = _user_home()
        return home / ".claude" / "settings.json", home / ".claude.json"
    root = Path(project_root(str(cwd or Path.cwd())) or Path.cwd())
    return root / ".claude" / "settings.json", root / ".mcp.json"


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text; nothing was changed") from exc
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror}; nothing was changed") from exc


def _created(paths: Paths) -> set[str]:
    try:
        data = json.loads((paths.home / CREATED_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return (
        {p for p in data.get("created", []) if isinstance(p, str)}
        if isinstance(data, dict)
        else set()
    )


def _json_change(
    path: Path, install: bool, edit: Callable[[dict[str, Any]], None], plan: Plan, created: set[str]
) -> None:
    before = _read(path)
    data = _json_load(path, before)
    original = copy.deepcopy(data)
    edit(data)
    if data == original:
        return
    if not install and not data and str(path) in created:
        plan.changes.append(Change(path, before, None))
        return
    plan.changes.append(Change(path, before, _json_dump(data, before)))


def plan(
    agent: str, action: str, *, scope: str = "user", cwd: Path | None = None, paths: Paths,
    version: tuple[int, ...] | Literal["detect"] | None = "detect",
) -> Plan:  # fmt: skip
    """What ``lexmem install|uninstall AGENT`` would change; reads files, writes nothing.

    ``version``: Claude Code's version, which decides how its hooks are written (found
    with ``claude --version`` unless given; None: unknown, today's command hooks).

    Raises :class:`InvalidInputError` (one line) for an unknown agent or scope, or a file
    it cannot safely edit (broken JSON or TOML, an unexpected shape).
    """
    if agent not in AGENTS:
        raise InvalidInputError(f"unknown agent {agent!r} (use {' or '.join(AGENTS)})")
    if action not in ("install", "uninstall"):
        raise InvalidInputError(f"unknown action {action!r}")
    if scope not in SCOPES:
        raise InvalidInputError(f"unknown scope {scope!r} (use user or project)")
    if agent == "codex" and scope != "user":
        raise InvalidInputError(
            "lexmem installs into Codex for the user only (~/.codex): a project's .codex "
            "layer loads only in trusted projects"
        )
    install = action == "install"
    result = Plan(agent, action, scope)
    created = _created(paths)
    if agent == "claude":
        hooks_file, mcp_file = _claude_files(scope, cwd)
        found = claude_version() if install and version == "detect" else version
        known = found if isinstance(found, tuple) else None
        backup = hooks_file.with_name(hooks_file.name + BACKUP_SUFFIX)

        def add(d: dict[str, Any]) -> None:
            _add_hooks(d, "claude", hooks_file, known, paths.home)
            _add_deny(d, hooks_file)  # whichever hooks call it, the model never should

        _json_change(
            hooks_file, install,
            add if install else (lambda d: _uninstall_claude_settings(d, backup)),
            result, created,
        )  # fmt: skip
        _json_change(
            mcp_file, install,
            (lambda d: _add_server(d, "claude", mcp_file, result.notes)) if install else _remove_server,
            result, created,
        )  # fmt: skip
        if not install:
            _drop_backups(result, [hooks_file, mcp_file])
        return result
    home = _codex_home()
    config_file, hooks_file = home / "config.toml", home / "hooks.json"
    config_text = _read(config_file)
    config = _toml_load(config_file, config_text)
    hooks_off = _codex_hooks_off(config)
    hooks_before = _json_load(hooks_file, _read(hooks_file))
    hooks_after = copy.deepcopy(hooks_before)
    if install and not hooks_off:
        _add_hooks(hooks_after, "codex", hooks_file)
        _json_change(
            hooks_file, True, lambda d: _add_hooks(d, "codex", hooks_file), result, created
        )
        inline = config.get("hooks")
        # [hooks.state] is where Codex keeps its trust in hooks, not a hook.
        if isinstance(inline, dict) and any(k != "state" for k in inline):
            result.notes.append(
                f"{config_file} also has inline [hooks]: Codex loads both and warns once at start"
            )
    elif not install:
        _remove_hooks(hooks_after)
        _json_change(hooks_file, False, _remove_hooks, result, created)
    after = _codex_toml(config_file, config_text, install, result.notes)
    # Codex's trust in a lexmem handler that is gone or changed no longer holds (Codex
    # asks again): its state entry goes, so that doctor does not call it trusted.
    was, now = _lexmem_handlers(hooks_before), _lexmem_handlers(hooks_after)
    stale = {
        key
        for position, (key, _) in _hook_states(config, hooks_file).items()
        if position in was and now.get(position) != was[position]
    }
    if stale:
        dropped = _drop_states(
            config_file, after if after is not None else config_text or "", stale
        )
        if dropped is None:
            result.notes.append(
                f"{config_file}: Codex's trust entries for lexmem's hooks ([hooks.state]) are "
                "not written as tables lexmem can cut; left as they are"
            )
        else:
            after = dropped
    if after is not None and after != config_text:
        if not install and not after.strip() and str(config_file) in created:
            result.changes.append(Change(config_file, config_text, None))
        else:
            result.changes.append(Change(config_file, config_text, after))
    if install and not hooks_off and now:
        trusted_in = _toml_load(config_file, after) if after is not None else config
        total, untrusted, _ = _untrusted(trusted_in, hooks_after, hooks_file)
        if untrusted:
            result.notes.append(
                f"Codex runs none of lexmem's hooks it has not trusted ({untrusted} of {total} "
                f"not yet): {TRUST_HINT}"
            )
    if not install:
        _drop_backups(result, [hooks_file, config_file])
    return result


def _drop_backups(result: Plan, files: list[Path]) -> None:
    """Uninstalling also removes the backups install made (``NAME.lexmem-backup``)."""
    for f in files:
        backup = f.with_name(f.name + BACKUP_SUFFIX)
        if backup.is_file():
            try:
                before = _read(backup)
            except InvalidInputError:
                before = ""
            result.changes.append(Change(backup, before, None))


# -- writing -----------------------------------------------------------------------------------


def _backup(target: Path) -> Path:
    backup = target.with_name(target.name + BACKUP_SUFFIX)
    shutil.copy2(target, backup)  # keeps the mode: ~/.claude.json may hold tokens
    return backup


def apply_plan(result: Plan, paths: Paths) -> list[str]:
    """Write a plan's changes; returns one line per file said to the user."""
    lines = []
    created = _created(paths)
    # Install backs each file up before changing it; uninstall leaves no backup behind (it
    # removes install's, and its own edit takes out only what install put in).
    keep_backup = result.action == "install"
    for change in result.changes:
        # A settings file kept in a dotfiles repository is often a symlink: write through it.
        target = Path(os.path.realpath(change.path))
        existed = target.exists()
        backup = _backup(target) if keep_backup and existed else None
        note = f" (backup: {backup.name})" if backup else ""
        if change.after is None:
            target.unlink(missing_ok=True)
            created.discard(str(change.path))
            lines.append(f"removed {change.path}{note}")
            lines.extend(_remove_folders(target.parent, created))
            continue
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            # New files: a project's files are shared (committed); the user's are theirs alone.
            mode = 0o644 if result.scope == "project" else 0o600
            created.add(str(change.path))
        missing = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        created.update(str(d) for d in missing)  # removed again when they empty
        atomic_write(target, change.after, mode=mode)
        lines.append(f"{'wrote' if existed else 'created'} {change.path}{note}")
    if created != _created(paths):
        _save_created(paths, created)
    return lines


def _remove_folders(folder: Path, created: set[str]) -> list[str]:
    """Remove ``folder`` and the folders above it that install created, while they are empty."""
    lines = []
    for d in (folder, *folder.parents):
        if str(d) not in created:
            break
        try:
            d.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            break  # not empty: it holds something else now
        created.discard(str(d))
        lines.append(f"removed {d}{os.sep}")
    return lines


def _save_created(paths: Paths, created: set[str]) -> None:
    """Rewrite the record's list of what install created, keeping its other keys."""
    record = paths.home / CREATED_RECORD
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data = {**(data if isinstance(data, dict) else {}), "created": sorted(created)}
    paths.ensure()
    atomic_write(record, json.dumps(data, indent=2) + "\n")


# -- what is installed where (doctor) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """One doctor line: a name, ok/warn/fail, and what it found."""

    name: str
    state: str
    detail: str


def _json_quiet(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _hook_events(data: dict[str, Any]) -> set[str]:
    hooks = data.get("hooks")
    found = set()
    if isinstance(hooks, dict):
        for event, groups in hooks.items():
            for g in groups if isinstance(groups, list) else []:
                handlers = g.get("hooks") if isinstance(g, dict) else None
                if isinstance(handlers, list) and any(_is_ours(h) for h in handlers):
                    found.add(event)
    return found


def _hooks_word(found: set[str], expected: tuple[str, ...]) -> str:
    if not found:
        return "hooks no"
    missing = [e for e in expected if e not in found]
    return "hooks yes" if not missing else f"hooks partly (missing {', '.join(missing)})"


def _tilde(path: Path) -> str:
    home = str(_user_home())
    text = str(path)
    return "~" + text[len(home) :] if text.startswith(home + os.sep) else text


def installed(cwd: Path | None = None) -> list[Finding]:
    """Where lexmem is set up: Claude Code (user, this project) and Codex, one line each."""
    out = []
    for scope in SCOPES:
        hooks_file, mcp_file = _claude_files(scope, cwd)
        hooks_data, mcp_data = _json_quiet(hooks_file), _json_quiet(mcp_file)
        if hooks_data is None or mcp_data is None:
            bad = hooks_file if hooks_data is None else mcp_file
            out.append(
                Finding(f"claude {scope}", "fail", f"{_tilde(bad)} is not a readable JSON object")
            )
            continue
        events = _hook_events(hooks_data)
        servers = mcp_data.get("mcpServers")
        mcp = isinstance(servers, dict) and _is_lexmem_server(servers.get("lexmem"))
        detail = (f"{_hooks_word(events, CLAUDE_HOOK_EVENTS)} ({_tilde(hooks_file)}), "
                  f"MCP {'yes' if mcp else 'no'} ({_tilde(mcp_file)})")  # fmt: skip
        complete = set(CLAUDE_HOOK_EVENTS) <= events and mcp
        state = "ok" if complete or (not events and not mcp) else "warn"
        if not events and not mcp:
            detail = f"not installed (`lexmem install claude{' --project' if scope == 'project' else ''}`)"
        out.append(Finding(f"claude {scope}", state, detail))
    home = _codex_home()
    config_file, hooks_file = home / "config.toml", home / "hooks.json"
    try:
        config = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        config = {}
    except (OSError, ValueError):
        out.append(Finding("codex", "fail", f"{_tilde(config_file)} is not readable TOML"))
        return out
    hooks_data = _json_quiet(hooks_file)
    events = _hook_events(hooks_data or {})
    servers = config.get("mcp_servers")
    mcp = isinstance(servers, dict) and _is_lexmem_server(servers.get("lexmem"))
    notify = config.get("notify")
    by_notify = (
        isinstance(notify, list) and bool(notify) and _is_lexmem_hook(shlex.join(map(str, notify)))
    )
    if not events and not mcp and not by_notify:
        out.append(Finding("codex", "ok", "not installed (`lexmem install codex`)"))
        return out
    capture = (f"{_hooks_word(events, CODEX_HOOK_EVENTS)} ({_tilde(hooks_file)})" if events or not by_notify
               else f"notify yes ({_tilde(config_file)})")  # fmt: skip
    state = "ok" if (set(CODEX_HOOK_EVENTS) <= events or by_notify) and mcp else "warn"
    if events and _codex_hooks_off(config):
        state, capture = "warn", capture + ", but hooks are turned off in config.toml"
    elif events:
        total, untrusted, disabled = _untrusted(config, hooks_data or {}, hooks_file)
        if untrusted:
            state = "warn"
            capture += f", but Codex has not trusted {untrusted} of {total} yet: {TRUST_HINT}"
        elif disabled:
            state = "warn"
            capture += f", but {disabled} of {total} are turned off in Codex's /hooks"
    found = f"{capture}, MCP {'yes' if mcp else 'no'} ({_tilde(config_file)})"
    if mcp:
        passed = servers["lexmem"].get("env_vars") if isinstance(servers, dict) else None
        if not (isinstance(passed, list) and set(ENV_VARS) <= set(passed)):
            state = "warn"
            found += (", but its server does not get LEXMEM_HOME and lexmem's other variables "
                      "from Codex (run `lexmem install codex` again)")  # fmt: skip
    out.append(Finding("codex", state, found))
    return out


def service_state(paths: Paths) -> Finding:
    """Whether the capture service runs for this data folder (and its pid, from the lock file)."""
    if not service_running(paths):
        return Finding(
            "service", "ok", "not running (the next SessionStart hook starts it, or `lexmem serve`)"
        )
    try:
        pid = paths.service_lock.read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    return Finding("service", "ok", f"running (pid {pid})" if pid.isdigit() else "running")


# -- does the hook run? -----------------------------------------------------------------------------


def _hook_argv() -> tuple[list[str], str]:
    """The real ``lexmem-hook`` command, and a note when only the module could be found."""
    try:
        return [executable("lexmem-hook")], ""
    except InvalidInputError:
        code = "import lexmem.capture.hook as h; h.main()"
        return [sys.executable, "-c", code], " (lexmem-hook is not installed; ran the module)"


def _poll(done: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def check_hook(paths: Paths, open_core: Callable[[], Any], wait: float = 5.0) -> Finding:
    """Feed one test event through the real ``lexmem-hook event`` and find it processed.

    The test event is a ``probe``: the hook handles it like any agent event (opt-out,
    capture mode, redaction, the inbox), and the service records it as processed and
    does nothing else, so it leaves no session, memory or audit line behind.
    """
    try:
        rules = load_capture_rules(paths)
    except LexmemError as exc:
        return Finding("hook", "fail", f"settings unreadable: {exc}")
    session = f"lexmem-doctor-{uuid.uuid4()}"
    event_id = str(uuid.uuid4())
    meta: dict[str, Any] = {"doctor": True}
    if rules.allow_paths:
        meta["cwd"] = rules.allow_paths[0]  # outside the allowed paths the hook writes nothing
    payload = {"session_id": session, "event_id": event_id, "event_type": "probe",
               "content": "", "metadata": meta}  # fmt: skip
    argv, how = _hook_argv()
    env = dict(os.environ, LEXMEM_HOME=str(paths.home))
    log = paths.logs / "hook.log"
    log_size = log.stat().st_size if log.exists() else 0
    import subprocess

    started = time.monotonic()
    try:
        done = subprocess.run(
            [*argv, "event"], input=json.dumps(payload).encode(), env=env, cwd=str(paths.home),
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding("hook", "fail", f"`{argv[0]} event` did not run: {exc}")
    took = time.monotonic() - started
    if done.returncode != 0:
        return Finding("hook", "fail", f"`lexmem-hook event` exited {done.returncode}{how}")
    written = any(event_id in p.name for p in _pending(paths))
    if not written:
        problem = _new_log_line(log, log_size)
        if problem:
            return Finding("hook", "fail", f"the hook ran but wrote nothing: {problem}")
        project = meta.get("cwd")
        if is_paused(rules) or capture_mode(project, rules) == "off":
            return Finding(
                "hook",
                "warn",
                f"the hook runs ({took:.2f}s){how}; capture is off or paused, so it wrote nothing",
            )
        return Finding("hook", "fail", f"the hook ran but wrote no event{how}")
    processed = _processed(paths, open_core, event_id, wait)
    if processed is None:
        return Finding(
            "hook",
            "warn",
            f"the hook runs ({took:.2f}s){how}; the service has not taken its event in within {wait:g}s",
        )
    return Finding(
        "hook", "ok", f"a test event went through `lexmem-hook` ({took:.2f}s) into the store{how}"
    )


def _pending(paths: Paths) -> list[Path]:
    from lexmem.capture.inbox import Inbox

    return Inbox(paths.inbox).pending()


def _new_log_line(log: Path, offset: int) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            lines = fh.read().decode("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].split(" ", 1)[-1] if lines else ""


def _processed(
    paths: Paths, open_core: Callable[[], Any], event_id: str, wait: float
) -> bool | None:
    """True once the service recorded the event as processed; None if not in time."""
    lm = open_core()
    try:
        return _processed_by(lm, lm.journal, paths, event_id, wait)
    finally:
        lm.close()


def _processed_by(lm: Any, journal: Any, paths: Paths, event_id: str, wait: float) -> bool | None:
    from lexmem.service.client import drain_if_no_service

    # No service: this process drains as `lexmem ingest` does (the inbox's other waiting
    # events included: they were waiting for exactly this).
    drain_if_no_service(lm)
    if not _poll(lambda: bool(journal.seen([event_id])), wait):
        return None
    return True
