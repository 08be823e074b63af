"""The choke point: every change to a memory of a joined project enters the outbox.

:class:`SharingStore` stands where the facade keeps its store (``Lexmem.store``) when
the data folder has a team. Every operation passes through to the real store; those that
change what the team shares (store, edit, pin and unpin, archive and restore,
supersede, confidence, links, forget, import) then put each touched memory's latest state
in the outbox, after the store committed it. Everything a writer does to a memory goes
through the facade's store, so nothing escapes it; and what reaches it was redacted
before it was stored (the capture pipeline and ``remember`` scrub first), so the
outbox never holds a secret the store would not.

Local signals stay local: access counts, reinforcement and decay rank one person's
searches and are not pushed. Changes applied from a pull are written inside
:meth:`SharingStore.quiet` and never go back out (no echo).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lexmem.capture.policy import optout_rules, project_opted_out
from lexmem.store.schema import memory_to_row
from lexmem.team.outbox import Entry, Outbox, TeamState

if TYPE_CHECKING:
    from lexmem.config import Paths
    from lexmem.models import ConfidencePoint, Memory, MemoryLink
    from lexmem.settings import CaptureSettings
    from lexmem.store.protocol import MemoryBackend

__all__ = ["SharingStore", "link_dict", "team_row"]

log = logging.getLogger("lexmem.team")

# From this many memories at once, their links and confidence come from one read of each
# table rather than a query per memory.
_BATCH_READ = 20


def link_dict(link: MemoryLink) -> dict[str, Any]:
    return {
        "id": link.id, "from_id": link.from_id, "to_id": link.to_id,
        "link_type": link.link_type, "strength": float(link.strength),
        "created_at": link.created_at,
    }  # fmt: skip


def team_row(memory: Memory, team_project: str) -> dict[str, Any]:
    """The memory as the team keeps it: lexmem's row, its vector as floats, the team's
    name for its project."""
    row = memory_to_row(memory)
    vector = row.get("vector")
    row["vector"] = None if vector is None else [float(x) for x in vector]
    row["project"] = team_project
    return row


class SharingStore:
    """The store, with the outbox fed from its writes (see the module's docstring)."""

    def __init__(
        self,
        inner: MemoryBackend,
        paths: Paths,
        projects: Mapping[str, str],
        capture: CaptureSettings | None = None,
    ) -> None:
        self.inner = inner
        self.paths = paths
        self.projects = dict(projects)
        self.capture = capture
        self.outbox = Outbox(paths)
        self.state = TeamState(paths)
        self._local = threading.local()
        # Told after each change queued (the service pushes at once).
        self.on_queued: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- what is shared -------------------------------------------------------------------

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Writes in the block are not queued (they came from the team)."""
        before = getattr(self._local, "quiet", False)
        self._local.quiet = True
        try:
            yield
        finally:
            self._local.quiet = before

    def _quiet(self) -> bool:
        return bool(getattr(self._local, "quiet", False)) or not self.projects

    def team_project(self, project: str | None, rules: Any = None) -> str | None:
        """The team's name for a local project, or None when it is not shared (not
        joined, or opted out: an opted-out repository is never shared)."""
        if not project:
            return None
        team = self.projects.get(project)
        if team is None:
            return None
        if rules is None:
            rules = optout_rules(self.paths, self.capture)
        if project_opted_out(project, rules):
            return None
        return team

    def _next_version(self, memory_id: str) -> int:
        pending = self.outbox.get(memory_id)
        known = self.state.version(memory_id)
        return max(known, pending.version if pending else 0) + 1

    def share(self, ids: Sequence[str]) -> int:
        """Queue the current state of these memories (a deletion for one that left the
        team); returns how many were queued."""
        ids = list(dict.fromkeys(i for i in ids if i))
        if not ids or self._quiet():
            return 0
        rules = optout_rules(self.paths, self.capture)
        found = {m.id: m for m in self.inner.get_many(ids, with_embedding=True)}
        queued = 0
        shared: list[tuple[str, Memory, str]] = []
        for mid in ids:
            memory = found.get(mid)
            if memory is None:
                continue
            team = self.team_project(memory.project, rules)
            if team is None:
                was = self.state.project_of(mid)
                if was:  # moved out of a shared project: the team forgets it
                    self._put_deletion(mid, was)
                    queued += 1
                continue
            shared.append((mid, memory, team))
        known = self.state.versions([mid for mid, _, _ in shared])
        links, points = self._around([mid for mid, _, _ in shared])
        for mid, memory, team in shared:
            pending = self.outbox.get(mid)
            entry = Entry(
                memory_id=mid,
                version=max(known.get(mid, 0), pending.version if pending else 0) + 1,
                project=team,
                row=team_row(memory, team),
                links=[link_dict(lk) for lk in links(mid)],
                confidence=[
                    {"id": p.id, "memory_id": p.memory_id, "confidence": float(p.confidence),
                     "recorded_at": p.recorded_at}
                    for p in points(mid)
                ],
            )  # fmt: skip
            self.outbox.put(entry)
            queued += 1
        if queued and self.on_queued is not None:
            self.on_queued()
        return queued

    def _around(
        self, ids: Sequence[str]
    ) -> tuple[Callable[[str], list[MemoryLink]], Callable[[str], list[ConfidencePoint]]]:
        """Each memory's links out and confidence points: one query per memory for a few,
        the two tables read once for a batch (a capture's, an import's)."""
        if len(ids) < _BATCH_READ:
            return self.inner.get_links_from, self.inner.confidence_history
        wanted = set(ids)
        links: dict[str, list[MemoryLink]] = {}
        for lk in self.inner.all_links():
            if lk.from_id in wanted:
                links.setdefault(lk.from_id, []).append(lk)
        points: dict[str, list[ConfidencePoint]] = {}
        for p in self.inner.all_confidence():
            if p.memory_id in wanted:
                points.setdefault(p.memory_id, []).append(p)
        for series in points.values():
            series.sort(key=lambda p: p.recorded_at)
        return (lambda mid: links.get(mid, [])), (lambda mid: points.get(mid, []))

    def _put_deletion(self, memory_id: str, team_project: str) -> None:
        self.outbox.put(Entry(memory_id, self._next_version(memory_id), team_project, deleted=True))

    def _shared_projects_of(self, ids: Sequence[str]) -> dict[str, str]:
        """Each id's team project, for memories about to be deleted: the joined project
        it is in, else the one it was last shared in."""
        out: dict[str, str] = {}
        if self._quiet():
            return out
        for m in self.inner.get_many(list(ids), with_embedding=False):
            team = self.projects.get(m.project or "")
            if team:
                out[m.id] = team
        for mid in ids:
            if mid not in out:
                was = self.state.project_of(mid)
                if was:
                    out[mid] = was
        return out

    # -- the writes that change what is shared -------------------------------------------

    def store(self, memory: Memory) -> Memory:
        out = self.inner.store(memory)
        self.share([out.id])
        return out

    def store_many(self, memories: Sequence[Memory]) -> list[Memory]:
        out = self.inner.store_many(memories)
        self.share([m.id for m in out])
        return out

    def edit(self, memory_id: str, **fields: Any) -> Memory:
        out = self.inner.edit(memory_id, **fields)
        self.share([memory_id])
        return out

    def record_confidence(self, memory_id: str, confidence: float) -> None:
        self.inner.record_confidence(memory_id, confidence)
        self.share([memory_id])

    def set_pinned(self, memory_id: str, pinned: bool) -> None:
        self.inner.set_pinned(memory_id, pinned)
        self.share([memory_id])

    def archive(self, memory_id: str) -> None:
        self.inner.archive(memory_id)
        self.share([memory_id])

    def restore(self, memory_id: str) -> None:
        self.inner.restore(memory_id)
        self.share([memory_id])

    def supersede(self, memory_id: str, replacement_id: str) -> None:
        self.inner.supersede(memory_id, replacement_id)
        self.share([memory_id, replacement_id])

    def delete(self, memory_id: str) -> None:
        teams = self._shared_projects_of([memory_id])
        self.inner.delete(memory_id)
        self._deleted([memory_id], teams)

    def delete_many(self, memory_ids: Sequence[str], *, erase: bool = True) -> list[str]:
        teams = self._shared_projects_of(memory_ids)
        pointing = [i for mid in teams for i in self.inner.ids_superseded_by(mid)]
        gone = self.inner.delete_many(memory_ids, erase=erase)
        self._deleted(gone, teams)
        # The memories they replaced lost their pointer: the team hears that too.
        self.share([i for i in pointing if i not in set(gone)])
        return gone

    def _deleted(self, ids: Sequence[str], teams: Mapping[str, str]) -> None:
        queued = 0
        for mid in ids:
            team = teams.get(mid)
            if team:
                self._put_deletion(mid, team)
                queued += 1
        if queued and self.on_queued is not None:
            self.on_queued()

    def store_link(self, link: MemoryLink) -> MemoryLink:
        out = self.inner.store_link(link)
        self.share([link.from_id])
        return out

    def delete_link(self, from_id: str, to_id: str, link_type: str) -> int:
        n = self.inner.delete_link(from_id, to_id, link_type)
        if n:
            self.share([from_id])
        return n

    def import_rows(
        self,
        memories: Any,
        links: Any,
        confidence: Any,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 2000,
    ) -> tuple[int, int, int]:
        out = self.inner.import_rows(memories, links, confidence, progress, batch)
        ids = [str(i) for i in memories.column("id").to_pylist()] if len(memories) else []
        for i in range(0, len(ids), 500):
            self.share(ids[i : i + 500])
        return out
