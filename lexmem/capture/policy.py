"""Where, and whether, to capture: opt-out, pause, capture mode, the project a folder
belongs to, and what a save refuses (standard library only).

The hook asks this before anything touches disk; the service asks it again at drain time
(a repository may have been opted out since an event was queued), and so do the facade's
saves. It lives apart from the hook so that neither the service nor the facade depends on
the hook command, and it imports only the standard library and :mod:`lexmem.config`: the
hook pays for every import here on every agent event.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from lexmem.config import CaptureRules, Paths, load_capture_rules
from lexmem.errors import InvalidInputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any

    from lexmem.settings import CaptureSettings

    # What the hook applies: the full settings' section, or the rules it reads itself.
    Capture = CaptureSettings | CaptureRules

__all__ = [
    "DROPPED",
    "OPTOUT_MARKER",
    "allowed",
    "capture_mode",
    "is_opted_out",
    "is_paused",
    "opted_out",
    "opted_out_event",
    "optout_rules",
    "project_opted_out",
    "project_root",
    "refuse_opted_out",
    "scrub",
    "tool_paths",
]

OPTOUT_MARKER = ".lexmem-optout"
# What an event says (``metadata.dropped``) of text the hook could not redact in its budget.
DROPPED = "too large to check"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


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


def opted_out(
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
    return opted_out(cwd, project, capture, tool_paths(meta.get("tool_input"), cwd))


def project_opted_out(project: str | None, capture: Capture) -> bool:
    """A memory's project (a repository root or a name) is opted out."""
    return bool(project) and opted_out(None, project, capture)


def optout_rules(paths: Paths, capture: Capture | None = None) -> CaptureRules:
    """The opt-outs as they stand now, for a long-lived process: the settings file, which
    another process (``lexmem optout add``, the tray) may have changed since this one
    read it, and ``capture``, this process's own settings. An unreadable file raises
    :class:`~lexmem.errors.ConfigError`: then the opt-outs cannot be known."""
    rules = load_capture_rules(paths)
    if capture is not None:
        rules.optout = [*rules.optout, *(p for p in capture.optout if p not in rules.optout)]
    return rules


def allowed(cwd: str | None, project: str | None, capture: Capture) -> bool:
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


def scrub(text: str) -> str:
    """Text a user asked to keep, with secrets and <private> spans removed.

    Constraint: secrets never reach disk, whatever path a text takes in.
    """
    from lexmem.capture.redact import redact

    return redact(text).text.strip()


def refuse_opted_out(
    paths: Paths, capture: CaptureSettings | None, project: str | None, *, cwd: str | None = None
) -> None:
    """Raise :class:`InvalidInputError` (one line, exit code 2) when a save would go into an
    opted-out repository, or comes from one (``cwd``): checked before anything is written.

    ``project`` may be a repository root, a name in the opt-out list, or a folder given
    relative to the current one (``--project .``).
    """
    rules = optout_rules(paths, capture)
    why = f"(in the settings or by a {OPTOUT_MARKER} file), so lexmem keeps nothing of it"
    if project_opted_out(project, rules) or (
        project and Path(project).expanduser().is_dir() and is_opted_out(project, rules)
    ):
        raise InvalidInputError(f"not saved: {project} is opted out {why}")
    if cwd and is_opted_out(cwd, rules):
        raise InvalidInputError(f"not saved: this runs in {cwd}, which is opted out {why}")
