"""One name per project, wherever lexmem shows or takes one.

A memory's project is a key: a repository root's absolute path (what agent sessions and
the Markdown watcher record) or a name a person typed ("novel"). People see names, not
paths: a repository shows as its folder name, and only where two projects would look the
same does a label say which is which. What a person types is read back the same way, so
"shop" means the repository ``~/work/shop`` once lexmem knows it, not a second project
that merely looks like it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePath

__all__ = [
    "home_short",
    "is_path",
    "project_choices",
    "project_label",
    "project_labels",
    "project_name",
    "resolve_project",
]


def is_path(project: str) -> bool:
    """A repository root (an absolute path), rather than a typed name."""
    return project.startswith(("/", "~")) or PurePath(project).is_absolute() or "\\" in project


def project_name(project: str | None) -> str:
    """The name a project goes by: a repository's folder name, a typed name as it is."""
    if not project:
        return ""
    if not is_path(project):
        return project
    return PurePath(project.rstrip("/\\").replace("\\", "/")).name or project


def home_short(path: str) -> str:
    """``path`` from the home folder ("~/work/shop"), as a person writes it."""
    home = str(Path.home())
    return "~" + path[len(home) :] if path == home or path.startswith(home + "/") else path


def project_label(project: str | None, known: Iterable[str] = ()) -> str:
    """:func:`project_name`, told apart from the ``known`` projects that share it."""
    if not project:
        return ""
    return project_labels([project, *known]).get(project, project_name(project))


def project_labels(projects: Iterable[str]) -> dict[str, str]:
    """Each project's label: its name, and where two share a name, a repository says
    its folder ("shop (~/work)") while a typed name stays as typed."""
    keys = [p for p in dict.fromkeys(projects) if p]
    counts = Counter(project_name(p) for p in keys)
    labels: dict[str, str] = {}
    for key in keys:
        name = project_name(key)
        if counts[name] > 1 and is_path(key):
            parent = str(PurePath(key.rstrip("/\\").replace("\\", "/")).parent)
            labels[key] = f"{name} ({home_short(parent)})"
        else:
            labels[key] = name
    return labels


def project_choices(projects: Iterable[str]) -> list[tuple[str, str]]:
    """(key, label) pairs as a list offers them: in the order a person looks for a name."""
    return sorted(project_labels(projects).items(), key=lambda kv: (kv[1].casefold(), kv[0]))


def resolve_project(typed: str | None, known: Iterable[str]) -> str | None:
    """The project key a person meant by ``typed``: a known key as it is, a label or name
    that names exactly one known project, a path (``~`` expanded); otherwise the text as a
    new named project. Empty text is no project."""
    text = (typed or "").strip()
    if not text:
        return None
    keys = [k for k in dict.fromkeys(known) if k]
    if text in keys:
        return text
    if text.startswith("~"):
        text = os.path.expanduser(text)
    if is_path(text):
        return str(Path(text).absolute()).rstrip("/") or "/"
    labels = project_labels(keys)
    by_label = [k for k, label in labels.items() if label == text]
    if len(by_label) == 1:
        return by_label[0]
    named = [k for k in keys if project_name(k) == text]
    repos = [k for k in named if is_path(k)]
    # "shop" typed while a repository named shop is known: that repository, unless the
    # name is ambiguous (two repositories called shop), where the typed name stays its own.
    if len(repos) == 1:
        return repos[0]
    return text
