"""Joining a team, leaving it, and what the sync stands at (``lexmem team ...``).

A data folder belongs to at most one team server at a time (``[team] url``, never with
a password) and shares the projects named in ``[team] projects`` under the team's names
for them. The password, when the server asks for one, is in the OS keyring.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lexmem.capture.policy import optout_rules, project_opted_out, project_root
from lexmem.config import Paths, team_url_problem
from lexmem.errors import InvalidInputError, LexmemError
from lexmem.keystore import SecretStoreError, delete_secret, set_secret
from lexmem.settings import Settings, TeamSettings, load_settings, save_settings
from lexmem.team.outbox import Outbox, TeamState
from lexmem.team.sync import open_server, password_entry

__all__ = [
    "SERVER_KEEPS",
    "join",
    "leave",
    "local_project",
    "lost_edit",
    "lost_text",
    "safe_where",
    "status",
]


# Where a person forgets a memory the team shares: what the team's server still holds.
SERVER_KEEPS = (
    "Once the deletion reaches the team's server no one can read it there, but the "
    "server's files and write-ahead log hold its text until the database's owner runs "
    "VACUUM FULL."
)


def safe_where(url: str, user: str = "") -> str:
    """The server's address to show: no password (there is none in settings), the role."""
    from urllib.parse import urlsplit

    text = url.strip()
    if "://" not in text:
        return text
    parts = urlsplit(text)
    host = parts.hostname or ""
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    host = query.get("hostaddr") or query.get("host", host) or "localhost"  # where libpq goes
    role = user or parts.username or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{role + '@' if role else ''}{host}{port}{parts.path or '/'}"


def local_project(project: str | None, cwd: str | None = None) -> str:
    """The local project meant: the one given (a folder resolved to its repository root,
    or a name), else the repository the command runs in."""
    if project:
        candidate = Path(project).expanduser()
        if candidate.is_absolute() or candidate.exists():
            return project_root(str(candidate.resolve())) or str(candidate.resolve())
        return project.strip()
    here = cwd or os.getcwd()
    return project_root(here) or here


def join(
    paths: Paths,
    url: str,
    *,
    project: str | None = None,
    team_name: str | None = None,
    user: str = "",
    password: str | None = None,
    dim: int,
    space: str,
    cwd: str | None = None,
) -> dict[str, Any]:
    """Bind a local project to the team at ``url``: check the address, reach the server
    and its schema, then keep the settings (and the password in the keyring)."""
    url = url.strip()
    if not url:
        raise InvalidInputError("team join needs the team database's address")
    problem = team_url_problem(url)
    if problem:
        # Never echo the address: it may hold the password.
        raise InvalidInputError(problem.replace("team.url", "the address"))
    settings = load_settings(paths)
    if settings.team.url and settings.team.url != url:
        raise InvalidInputError(
            f"this data folder is in the team at {safe_where(settings.team.url, settings.team.user)}"
            "; `lexmem team leave` its projects first"
        )
    local = local_project(project, cwd)
    if project_opted_out(local, optout_rules(paths, settings.capture)):
        raise InvalidInputError(f"{local} is opted out: an opted-out repository is never shared")
    name = (team_name or Path(local).name or local).strip()
    if not name:
        raise InvalidInputError("the team project needs a name (--as NAME)")
    taken = {t: p for p, t in settings.team.projects.items() if p != local}
    if name in taken:
        raise InvalidInputError(f"the team project {name!r} is already joined as {taken[name]}")
    role = user or settings.team.user
    team = TeamSettings(url=url, user=role, projects=dict(settings.team.projects),
                        poll_seconds=settings.team.poll_seconds)  # fmt: skip
    if password is not None:
        try:
            set_secret(password_entry(url, role), password.strip())
        except SecretStoreError as exc:
            why = str(exc).removeprefix(f"keyring entry lexmem/{exc.name}: ")
            raise LexmemError(
                f"no OS keyring can keep the password ({why}): put it in a password file only"
                " you can read (~/.pgpass, or passfile=PATH in the address; docs/team.md) and"
                " join without --password-stdin"
            ) from exc
    try:
        server = open_server(team, dim=dim, space=space)
    except LexmemError:
        if password is not None and not settings.team.url:  # kept for nothing: taken back
            with contextlib.suppress(SecretStoreError):
                delete_secret(password_entry(url, role))
        raise
    try:
        where, role_seen = server.where, server.role
        allowed = getattr(server, "writable_projects", None)
        if allowed is not None and name not in allowed():
            raise InvalidInputError(
                f"{role_seen} is not a member of a team that shares the project {name!r}"
                " (ask the team's administrator to add you)"
            )
    finally:
        server.close()
    team.projects[local] = name
    settings.team = team
    save_settings(paths, settings)
    return {"project": local, "team_project": name, "server": where, "role": role_seen}


def leave(paths: Paths, project: str | None = None, cwd: str | None = None) -> dict[str, Any]:
    """Stop sharing a project (the memories pulled so far stay here); the last project
    left forgets the server and its password."""
    settings = load_settings(paths)
    if not settings.team.projects:
        raise InvalidInputError("this data folder is in no team")
    local = local_project(project, cwd)
    if local not in settings.team.projects:
        joined = ", ".join(sorted(settings.team.projects))
        raise InvalidInputError(f"{local} is not shared with the team (joined: {joined})")
    name = settings.team.projects.pop(local)
    dropped = Outbox(paths).clear_project(name)
    TeamState(paths).forget_project(name)
    url, user = settings.team.url, settings.team.user
    if not settings.team.projects:
        settings.team = replace(settings.team, url="", user="")
        with contextlib.suppress(SecretStoreError):  # nothing kept, or no keyring
            delete_secret(password_entry(url, user))
    save_settings(paths, settings)
    return {"project": local, "team_project": name, "unpushed_dropped": dropped}


def status(
    paths: Paths,
    settings: Settings,
    *,
    dim: int,
    space: str,
    reach: bool = True,
) -> dict[str, Any]:
    """Where the sync stands: the server (no password), lag in revisions and seconds,
    the outbox, the last sync, conflicts seen; ``reach`` asks the server its revision."""
    team = settings.team
    outbox, state = Outbox(paths), TeamState(paths)
    meta = state.meta() if state.path.exists() else {}
    entries = outbox.entries()
    oldest = min((_mtime(outbox, e.memory_id) for e in entries), default=None)
    rules = optout_rules(paths, settings.capture)
    out: dict[str, Any] = {
        "joined": bool(team.url and team.projects),
        "server": safe_where(team.url, team.user) if team.url else None,
        "projects": dict(team.projects),
        "outbox": len(entries),
        "last_sync": meta.get("last_sync") or None,
        "last_error": meta.get("last_error") or None,
        "conflicts": int(meta.get("conflicts") or 0),
        # This client's edits that lost a conflict (the team kept another's version).
        "lost": state.lost() if state.path.exists() else [],
        "opted_out": sorted(p for p in team.projects if project_opted_out(p, rules)),
        "lag_revisions": None,
        "lag_seconds": 0.0,
        "reachable": None,
    }
    if oldest is not None:
        out["lag_seconds"] = max(0.0, time.time() - oldest)
    if not out["joined"] or not reach:
        return out
    # An opted-out repository is never pulled into: the team's changes there are not lag.
    synced = [t for p, t in team.projects.items() if p not in out["opted_out"]]
    cursors = {t: state.cursor(t) for t in synced} if state.path.exists() else {}
    try:
        server = open_server(team, dim=dim, space=space)
        try:
            out["lag_revisions"] = sum(
                max(0, server.latest_revision([t]) - cursors.get(t, 0)) for t in synced
            )
            out["server"] = server.where
        finally:
            server.close()
        out["reachable"] = True
    except LexmemError as exc:
        out["reachable"] = False
        out["server_error"] = str(exc)
    if out["lag_revisions"] and out["last_sync"]:
        since = datetime.now(UTC) - datetime.fromisoformat(out["last_sync"])
        out["lag_seconds"] = max(out["lag_seconds"], since.total_seconds())
    return out


def lost_edit(paths: Paths, memory_id: str) -> dict[str, Any] | None:
    """This client's edit of ``memory_id`` that lost a conflict, or None (and None in a
    data folder with no team: nothing is created)."""
    state = TeamState(paths)
    if not state.path.exists():
        return None
    found = state.lost(memory_id)
    return found[0] if found else None


def lost_text(loss: Mapping[str, Any]) -> str:
    """One line for a lost edit: whose version the team kept, when, where yours is."""
    who = f"{loss['winner']}'s" if loss.get("winner") else "another member's"
    when = str(loss.get("at") or "").replace("T", " ").replace("+00:00", " UTC")
    return (
        f"your edit (version {loss['version']}) lost a conflict to {who} on {when}: the team"
        " kept theirs, yours is in the team's history"
    )


def _mtime(outbox: Outbox, memory_id: str) -> float:
    try:
        return outbox._path(memory_id).stat().st_mtime
    except OSError:
        return time.time()
