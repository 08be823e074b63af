"""Workflow patterns: steps from observed tool use or reported actions, grouped within
the pattern window and written as "To <goal>: 1) ... 2) ... 3) ..."."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lexmem.capture.extract.candidates import ExtractOptions
from lexmem.capture.extract.text import _KNOWN_PROGRAMS, _bound_text, _clip
from lexmem.capture.extract.thresholds import (
    C_WORKFLOW,
    C_WORKFLOW_REPEATED,
    C_WORKFLOW_REPORTED,
    C_WORKFLOW_SPECIFIC,
    TITLE_LIMIT,
    WORKFLOW_MIN_NAMED_SHARE,
    WORKFLOW_MIN_REPEATS,
    WORKFLOW_MIN_STAGES,
    WORKFLOW_REPEAT_STAGES,
)
from lexmem.capture.extract.tools import (
    _Action,
    _display_command,
    _event,
    _make_action,
    _parse_time,
    _split_command,
    _stage,
)

__all__ = ()  # nothing public: the underscored names are for this package's modules


# -------------------------------------------------------------- stage names

_STEP_PHRASE = {
    "test": "run the tests",
    "lint": "run the linter",
    "format": "format the code",
    "typecheck": "type-check",
    "build": "build",
    "install": "install the dependencies",
    "migrate": "run the migrations",
    "generate": "regenerate the generated code",
    "stage": "stage the changes",
    "commit": "commit",
    "push": "push",
    "merge": "merge",
    "pr": "open a pull request",
    "tag": "tag the release",
    "release": "publish the release",
    "deploy": "deploy",
    "run": "run it",
    "edit": "edit the code",
}
_GOAL = {
    "deploy": "deploy",
    "release": "publish a release",
    "push": "ship a change",
    "merge": "merge a change",
    "pr": "open a pull request",
    "tag": "tag a release",
    "commit": "commit a change",
    "build": "build the project",
    "test": "check a change",
    "lint": "check a change",
    "typecheck": "check a change",
    "format": "check a change",
    "migrate": "update the database schema",
    "generate": "regenerate code",
    "run": "run the project",
    "install": "set up the project",
    "edit": "make a change",
}


# ------------------------------------------------------------------ workflow


@dataclass(slots=True)
class _Step:
    stage: str
    shown: str  # the command, the description, or the files edited
    pos: int | None
    ts: datetime | None
    ok: bool | None = None
    command: bool = True  # shown is a command, not a description


def _steps_of_action(a: _Action) -> list[_Step]:
    if a.kind == "edit":
        return [_Step("edit", ", ".join(a.files[:3]), a.call.pos, a.call.ts)]
    if a.kind != "shell":
        return []
    out: list[_Step] = []
    for part in _split_command(a.command):
        stage = _stage(part)
        if stage is not None:
            out.append(_Step(stage, _display_command(part), a.call.pos, a.call.ts, a.ok))
    return out


def _time_groups(steps: list[_Step], minutes: int) -> list[list[_Step]]:
    """Consecutive steps whose span stays within the pattern window."""
    window = timedelta(minutes=minutes)
    groups: list[list[_Step]] = []
    for step in steps:
        if groups:
            start = groups[-1][0].ts
            if start is None or step.ts is None or _delta(start, step.ts) <= window:
                groups[-1].append(step)
                continue
        groups.append([step])
    return groups


def _delta(a: datetime, b: datetime) -> timedelta:
    try:
        return abs(b - a)
    except TypeError:  # naive against aware: compare wall clocks
        return abs(b.replace(tzinfo=None) - a.replace(tzinfo=None))


# Project-specific entry points (a make target, a script) make a procedure worth more
# than the generic "npm test, npm run build" every project has.
_SPECIFIC_COMMAND = re.compile(
    r"^(?:make\s+\w|\./|scripts?/|bin/|just\s|task\s|(?:npm|pnpm|yarn)\s+run\s+"
    r"(?!(?:build|test|lint|dev|start|format|typecheck)\b))"
)


def _workflow(
    steps: list[_Step], opts: ExtractOptions, *, reported: bool, project: str | None
) -> tuple[str, str, float, dict[str, Any]] | None:
    """ "To <goal>: 1) ... 2) ... 3) ..." from steps, or None when they form no procedure."""
    if not steps:
        return None
    known = [s for s in steps if s.stage != "other"]
    named_share = len(known) / len(steps)
    if len(known) < opts.min_actions_for_pattern or named_share < WORKFLOW_MIN_NAMED_SHARE:
        return None  # too few, or mostly actions we cannot name: not a procedure
    # Keep each stage's last occurrence: after "test, edit, test" the procedure is
    # "edit, test". A failed step that was later repeated successfully disappears too.
    last: dict[str, int] = {}
    for i, s in enumerate(known):
        last[s.stage] = i
    ordered = [s for i, s in enumerate(known) if last[s.stage] == i]
    # "git add" then "git commit" is one step.
    ordered = [
        s
        for i, s in enumerate(ordered)
        if not (s.stage == "stage" and any(t.stage == "commit" for t in ordered[i + 1 :]))
    ]
    stages = [s.stage for s in ordered]
    lifecycle = set(stages) - {"edit", "run", "other"}
    if len(set(stages)) < min(WORKFLOW_MIN_STAGES, opts.min_actions_for_pattern) or not lifecycle:
        return None
    goal = _GOAL.get(stages[-1], "make a change")
    where = ""
    if project:
        where = f" in {project.rstrip('/').rsplit('/', 1)[-1]}"
    rendered = []
    for i, s in enumerate(ordered, 1):
        phrase = _STEP_PHRASE.get(s.stage, "run")
        if s.stage == "edit":
            shown = f"edit the code ({s.shown})" if s.shown else "edit the code"
        elif reported and s.shown and not s.command:
            shown = s.shown  # the user's own words for the step ("run tests")
        elif s.shown and s.shown.lower() != phrase and s.shown.lower() not in phrase:
            looks_like_command = bool(re.match(r"^[\w./-]+(?:\s|$)", s.shown)) and (
                not reported or " " not in s.shown or s.shown.split()[0] in _KNOWN_PROGRAMS
            )
            shown = f"{phrase} (`{s.shown}`)" if looks_like_command else f"{phrase} ({s.shown})"
        else:
            shown = phrase
        rendered.append(f"{i}) {shown}")
    text = f"To {goal}{where}: " + " ".join(rendered) + "."
    # Repetition: the last three stages seen twice in the window.
    full = [s.stage for s in known]
    collapsed = [st for i, st in enumerate(full) if i == 0 or full[i - 1] != st]
    tri = tuple(stages[-WORKFLOW_REPEAT_STAGES:])
    repeats = sum(
        1 for i in range(len(collapsed) - len(tri) + 1) if tuple(collapsed[i : i + len(tri)]) == tri
    )
    if reported:
        conf = C_WORKFLOW_REPORTED
    elif repeats >= WORKFLOW_MIN_REPEATS:
        conf = C_WORKFLOW_REPEATED
    elif any(_SPECIFIC_COMMAND.match(s.shown) for s in ordered):
        conf = C_WORKFLOW_SPECIFIC
    else:
        conf = C_WORKFLOW
    title = _clip(f"Workflow: {goal} ({' → '.join(stages)})", TITLE_LIMIT)
    meta: dict[str, Any] = {
        "stages": stages,
        "commands": [s.shown for s in ordered if s.stage != "edit"],
        "files": sorted(
            {f for s in ordered if s.stage == "edit" for f in s.shown.split(", ") if f}
        ),
        "repeats": repeats,
    }
    return _bound_text(text), title, conf, meta


def _steps_of_reported(action: Mapping[str, Any], pos: int) -> list[_Step]:
    """Steps from a seed-000 ``UserAction`` (``action_type``, ``description``, ...)."""
    if "event_type" in action:
        e = _event(action, pos)
        a = _make_action(e)
        return _steps_of_action(a)
    kind = str(action.get("action_type") or action.get("ActionType") or action.get("type") or "")
    desc = str(action.get("description") or action.get("Description") or "")
    meta = action.get("metadata") or action.get("Metadata") or {}
    command = str(meta.get("command") or "") if isinstance(meta, Mapping) else ""
    ts = _parse_time(action.get("timestamp") or action.get("Timestamp"))
    if kind.lower() in ("edit", "file_edit", "save", "write"):
        return [_Step("edit", desc, pos, ts, command=False)]
    if command:
        return [
            _Step(st, _display_command(p), pos, ts)
            for p in _split_command(command)
            if (st := _stage(p)) is not None
        ]
    stage = _stage(desc) if desc else None
    if stage is None or stage == "other":
        stage = _stage(kind) if kind else stage
    if stage is None:
        return []
    return [_Step(stage, _clip(desc, 80), pos, ts, command=False)]
