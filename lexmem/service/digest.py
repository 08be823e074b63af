"""Context digests: per project, the memories an agent should see when a session starts.

The service rewrites a project's digest after changes (:class:`DigestKeeper`), so the
SessionStart hook only reads a small file: no model, no database, a few milliseconds.
A digest is Markdown a person and an agent both read at a glance::

    # lexmem · shop
    Memories for this project, most useful first. [id] opens one: `lexmem show ID`, or search_memory.

    ## Pinned
    - [3f2a9c1e] To deploy, first run 'npm build', then 'npm deploy'
    ## Facts and decisions
    - [0b7d4411] The project uses PostgreSQL for data storage

Pinned memories come first, then the rest by usefulness (salience, how recently they
were used or reinforced, how often), grouped by type; repeats are left out (the same
fingerprint, the same text, or one chunk per document); the whole stays within
``[context] digest_bytes`` (6 KB by default: Claude Code shows injected context past
~10 KB as a preview only). Memories with no project are the person's general ones
(preferences, habits): they appear in every project's digest, a little behind that
project's own.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexmem.base import atomic_write
from lexmem.capture.policy import optout_rules, project_opted_out
from lexmem.config import DIGEST_LINKS, digest_link, digest_path, secure_umask
from lexmem.models import MemoryType, utcnow

if TYPE_CHECKING:
    from lexmem.api import Lexmem
    from lexmem.store.protocol import DigestColumns

__all__ = [
    "DEFAULT_DIGEST_BYTES",
    "DigestKeeper",
    "DigestLine",
    "opted_out_projects",
    "rank_for_digest",
    "render_digest",
    "write_digest",
]

log = logging.getLogger("lexmem.digest")

DEFAULT_DIGEST_BYTES = 6144
MIN_DIGEST_BYTES = 512
POOL = 150  # the best this many by the cheap columns are read in full and deduplicated
LINE_CHARS = 280  # a memory longer than this shows its first words and "…"
GENERAL_WEIGHT = 0.8  # a memory with no project ranks a little behind the project's own
RECENCY_HALF_LIFE_DAYS = 14.0
SECTIONS = (
    ("pinned", "Pinned"),
    (MemoryType.SEMANTIC.value, "Facts and decisions"),
    (MemoryType.PROCEDURAL.value, "Procedures"),
    (MemoryType.EPISODIC.value, "Recent events"),
)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class DigestLine:
    """One memory as the digest shows it."""

    id: str
    section: str  # "pinned" or a memory type
    text: str
    score: float

    def render(self) -> str:
        return f"- [{self.id[:8]}] {self.text}\n"


def _or(values: Any, fallback: Any) -> Any:
    """Microseconds since the epoch (numpy, NaN where unset), the unset from ``fallback``."""
    import numpy as np

    return np.where(np.isnan(values), fallback, values)


def _scores(cols: DigestColumns, project: str | None, now: datetime) -> Any:
    """Usefulness of every row at once: salience, then how recently it was used or
    reinforced, then how often. Vectorised: a project may hold 100,000 memories, and
    the service renders a digest after every batch it takes in (per row in Python this
    took ~0.8 s at 50,000 memories)."""
    import numpy as np

    created = _or(cols.created_us, int(now.timestamp() * 1e6))
    reinforced = _or(cols.last_reinforced_us, created)
    access = cols.access_count
    accessed = np.where(access > 0, _or(cols.last_accessed_us, created), created)
    latest = np.maximum(np.maximum(created, reinforced), accessed)
    days = np.maximum(0.0, (now.timestamp() * 1e6 - latest) / 86_400e6)
    recency = 0.5 ** (days / RECENCY_HALF_LIFE_DAYS)
    use = np.minimum(1.0, np.log1p(access) / math.log(10))
    score = 0.5 * cols.salience + 0.3 * recency + 0.2 * use
    if project is not None:
        score = np.where(cols.general, score * GENERAL_WEIGHT, score)
    return score


def _one_line(text: str) -> str:
    line = _SPACE.sub(" ", text).strip()
    if len(line) <= LINE_CHARS:
        return line
    cut = line[: LINE_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > LINE_CHARS // 2 else cut).rstrip(" ,;:.-") + "…"


def rank_for_digest(
    lm: Lexmem, project: str | None, *, now: datetime | None = None
) -> list[DigestLine]:
    """The digest's candidates, best first, repeats removed (no size cap applied yet).

    An opted-out project has none: its memories stay the person's (the CLI and the
    browser show them until purged) but are never handed to an agent.
    """
    if project is not None and project_opted_out(
        project, optout_rules(lm.paths, lm.settings.capture)
    ):
        return []
    now = now or utcnow()
    cols = lm.store.digest_columns(project)
    if len(cols) == 0:
        return []
    import numpy as np

    scores = _scores(cols, project, now)
    # Only the best few can reach the digest: rank those in Python, where the id breaks
    # ties (pinned first, then by score) so equal inputs give equal digests.
    order = np.lexsort((-scores, ~cols.pinned))[: POOL * 4]
    rows: list[dict[str, Any]] = [
        {"id": mid, "pinned": bool(pinned), "fingerprint": fp, "source_document": doc,
         "_score": float(score)}
        for (mid, fp, doc), pinned, score in zip(
            cols.keys(order), cols.pinned[order], scores[order], strict=True
        )
    ]  # fmt: skip
    rows.sort(key=lambda r: (not r["pinned"], -r["_score"], r["id"]))
    seen_fp: set[str] = set()
    seen_doc: set[str] = set()
    pool: list[dict[str, Any]] = []
    for row in rows:
        fp, doc = row.get("fingerprint") or "", row.get("source_document") or ""
        if (fp and fp in seen_fp) or (doc and doc in seen_doc):
            continue
        seen_fp.add(fp)
        if doc:
            seen_doc.add(doc)  # one chunk of a long document is enough to point at it
        pool.append(row)
        if len(pool) >= POOL:
            break
    memories = {m.id: m for m in lm.store.get_many([r["id"] for r in pool])}
    lines: list[DigestLine] = []
    seen_text: set[str] = set()
    for row in pool:
        m = memories.get(row["id"])
        if m is None:
            continue
        text = _one_line(m.content) or _one_line(m.title)
        key = text.casefold()
        if not text or key in seen_text:
            continue
        seen_text.add(key)
        section = "pinned" if m.pinned else str(m.type)
        lines.append(DigestLine(m.id, section, text, row["_score"]))
    return lines


def opted_out_projects(lm: Lexmem) -> tuple[str, ...]:
    """The projects memories name that are opted out now (by the settings or a marker
    file, a worktree's main repository included): what readers serving agents leave out."""
    rules = optout_rules(lm.paths, lm.settings.capture)
    return tuple(p for p in lm.projects() if project_opted_out(p, rules))


def _project_name(project: str) -> str:
    name = Path(project).name if os.sep in project or "/" in project else project
    return name or project


def render_digest(
    lm: Lexmem,
    project: str | None,
    *,
    max_bytes: int | None = None,
    now: datetime | None = None,
) -> str:
    """The project's digest as Markdown within ``max_bytes`` (UTF-8); "" with no memories.

    ``max_bytes`` defaults to ``[context] digest_bytes``.
    """
    cap = max_bytes if max_bytes is not None else lm.settings.context.digest_bytes
    cap = max(MIN_DIGEST_BYTES, int(cap or DEFAULT_DIGEST_BYTES))
    lines = rank_for_digest(lm, project, now=now)
    if not lines:
        return ""
    title = _project_name(project) if project else "general"
    whose = "this project" if project else "every project"
    head = (
        f"# lexmem · {title}\n"
        f"Memories for {whose}, most useful first. [id] opens one: "
        "`lexmem show ID`, or the search_memory tool.\n"
    )
    used = len(head.encode("utf-8"))
    chosen: dict[str, list[DigestLine]] = {key: [] for key, _ in SECTIONS}
    headings = {key: f"\n## {name}\n" for key, name in SECTIONS}
    for line in lines:
        section = line.section if line.section in chosen else MemoryType.SEMANTIC.value
        cost = len(line.render().encode("utf-8"))
        if not chosen[section]:
            cost += len(headings[section].encode("utf-8"))
        if used + cost > cap:
            continue  # a shorter memory further down may still fit
        chosen[section].append(line)
        used += cost
    if not any(chosen.values()):
        return ""
    parts = [head]
    for key, _ in SECTIONS:
        if chosen[key]:
            parts.append(headings[key])
            parts.extend(line.render() for line in chosen[key])
    return "".join(parts)


def write_digest(lm: Lexmem, project: str | None) -> Path | None:
    """Render ``project``'s digest and replace its file atomically (owner-only).

    ``None`` is the general digest (memories with no project): the hook shows it in a
    folder that has no memories of its own yet.

    Returns the file, or ``None`` when the project has nothing to show (its old file,
    if any, is removed so a session does not start with memories since forgotten).
    """
    path = digest_path(lm.paths, project)
    text = render_digest(lm, project)
    if not text:
        path.unlink(missing_ok=True)
        _unlink(lm.paths.digests, digest_link(lm.paths, project))
        return None
    with secure_umask():
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
    _link(path, digest_link(lm.paths, project))
    return path


def _link(target: Path, link: Path | None) -> None:
    """Link a project folder's digest from the digests' index by folder (relative, so a
    restored or moved data folder keeps it); never raises: without the link the
    SessionStart command asks ``lexmem-hook``, which reads the digest itself."""
    if link is None:
        return
    try:
        relative = os.path.relpath(target, link.parent)
        if os.path.islink(link) and os.readlink(link) == relative:
            return
        with secure_umask():
            link.parent.mkdir(parents=True, exist_ok=True)
        spare = link.with_name(f".{link.name}.{os.getpid()}")
        spare.unlink(missing_ok=True)
        os.symlink(relative, spare)
        os.replace(spare, link)
    except OSError as exc:
        log.warning("[MEM:DIGEST] could not link %s: %s", link, exc)


def _unlink(digests: Path, link: Path | None) -> None:
    """Remove a project folder's link and the folders left empty above it (the index
    names the folder: an opted-out or forgotten repository leaves no name behind)."""
    if link is None:
        return
    try:
        link.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("[MEM:DIGEST] could not remove %s: %s", link, exc)
        return
    _drop_empty(digests / DIGEST_LINKS, link.parent)


def _drop_empty(top: Path, folder: Path) -> None:
    while folder != top and top in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (another project below it), or gone
        folder = folder.parent


class DigestKeeper:
    """Keeps the digests current for the service: changes mark projects stale, and
    :meth:`flush` rewrites those, at most once every ``interval`` seconds unless forced.

    A change to a memory with no project, or one whose project is unknown (a pin or an
    edit by id), marks every project: general memories appear in all digests.
    """

    def __init__(self, lm: Lexmem, *, interval: float = 1.0) -> None:
        self.lm = lm
        self.interval = interval
        self._stale: set[str] = set()
        self._all = False
        self._last = -1e9
        self.written = 0  # digests written since start (for tests and the log)

    @property
    def pending(self) -> bool:
        return self._all or bool(self._stale)

    def mark(self, projects: Iterable[str | None]) -> None:
        for p in projects:
            if p is None:
                self._all = True
            else:
                self._stale.add(p)

    def mark_all(self) -> None:
        self._all = True

    def flush(self, *, force: bool = False) -> int:
        """Rewrite the stale digests; returns how many were written. Never raises: a
        digest that cannot be written is logged and tried again at the next flush."""
        if not self.pending or (not force and time.monotonic() - self._last < self.interval):
            return 0
        self._last = time.monotonic()
        every = self._all
        try:
            projects: list[str | None] = (
                [None, *self.lm.projects()] if every else [*sorted(self._stale)]
            )
        except Exception:  # a digest must never stop capture; retried later
            log.exception("[MEM:DIGEST] could not list the projects")
            return 0
        self._all, self._stale = False, set()
        written = 0
        for project in projects:
            try:
                if write_digest(self.lm, project) is not None:
                    written += 1
            except Exception:  # as above: log, keep it stale, go on
                log.exception("[MEM:DIGEST] could not write the digest of %s", project)
                self.mark([project])
        if every:
            self._prune(projects)
        self.written += written
        if written:
            log.info("[MEM:DIGEST] Rewrote %d context digests", written)
        return written

    def _prune(self, projects: Sequence[str | None]) -> None:
        """Remove digests of projects that no longer have memories."""
        keep = {digest_path(self.lm.paths, p).name for p in projects}
        folder = self.lm.paths.digests
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return
        for name in names:
            if name.endswith(".md") and name not in keep:
                (folder / name).unlink(missing_ok=True)
        self._prune_links(folder / DIGEST_LINKS)

    @staticmethod
    def _prune_links(top: Path) -> None:
        """Remove the index's links to digests that are gone, and folders left empty."""
        for root, _dirs, files in os.walk(top, topdown=False):
            here = Path(root)
            for name in files:
                link = here / name
                if os.path.islink(link) and not link.exists():
                    link.unlink(missing_ok=True)
            if here != top:
                _drop_empty(top, here)
