"""The memory operations the writer applies for other processes (``memory_op`` inbox
events: pin, archive, forget, supersede, review, ...), and the reads review needs.

The facade's edits in a process that is not the writer travel as these operations
through the inbox (:class:`lexmem.service.client.InboxWriter`); the writer applies them
here, in order with everything else it writes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lexmem.capture.inbox import derived_id
from lexmem.errors import (
    InvalidInputError,
)
from lexmem.models import (
    Changes,
    fingerprint,
)
from lexmem.store.journal import under
from lexmem.store.protocol import MemoryFilter

if TYPE_CHECKING:
    from lexmem.api import Lexmem

__all__ = [
    "OPS",
    "REVIEW_DECISIONS",
    "apply_op",
    "memories_under",
    "particulars_key",
    "particulars_of",
    "purge_project",
    "review",
    "unsupersede",
]

log = logging.getLogger("lexmem.capture")


OPS = (
    "pin", "archive", "restore", "forget", "supersede", "edit", "link", "decay", "reinforce",
    "review", "unsupersede", "unlink", "purge_project",
)  # fmt: skip


def apply_op(lm: Lexmem, op: str, kwargs: dict[str, Any], event_id: str) -> dict[str, Any]:
    """Run one memory operation on the core; returns what changed, JSON-ready."""
    from lexmem.models import MemoryType

    if op not in OPS:
        raise InvalidInputError(f"unknown memory operation {op!r}")
    if op == "supersede":
        changes, new_id = lm.supersede(
            kwargs["old"], by=kwargs.get("by"), with_text=kwargs.get("with_text"),
            new_memory_id=derived_id("op", event_id, "memory"), own=bool(kwargs.get("own")),
        )  # fmt: skip
        return {"changes": changes.to_dict(), "new_id": new_id}
    if op == "decay":
        changes, n = lm.decay(kwargs.get("factor"))
        return {"changes": changes.to_dict(), "count": n}
    if op == "forget":
        # Lexmem.forget erases: the review record, audit texts, older versions, digests.
        return {"changes": lm.forget(**kwargs).to_dict()}
    if op == "purge_project":
        return {"changes": purge_project(lm, str(kwargs["root"])).to_dict()}
    if op == "review":
        return {
            "changes": review(
                lm, list(kwargs.get("ids") or []), str(kwargs.get("decision"))
            ).to_dict()
        }
    if op == "unsupersede":
        return {"changes": unsupersede(lm, kwargs["old"], kwargs.get("drop")).to_dict()}
    if op == "edit" and kwargs.get("type"):
        kwargs = dict(kwargs, type=MemoryType(kwargs["type"]))
    changes = getattr(lm, op)(**kwargs)
    return {"changes": changes.to_dict()}


REVIEW_DECISIONS = ("accepted", "rejected", "pending")


def review(lm: Lexmem, ids: Sequence[str], decision: str) -> Changes:
    """Accept (keep) or reject reviewed memories. Reject deletes the memory and erases
    its text from disk (:meth:`Lexmem.erase_memories`); what stays is what refuses the
    same candidate again, none of it text: the fingerprint (a sha256), the embedding and
    a hash of its particulars. ``pending`` takes a review back: an accepted memory is
    queued again; a rejected one is gone, so the same candidate may be captured again."""
    if decision not in REVIEW_DECISIONS:
        raise InvalidInputError(
            f"a review decision is accepted, rejected or pending, not {decision!r}"
        )
    resolved = [lm.resolve(i) for i in ids]
    journal = lm.journal
    if decision == "pending":
        rejected = {r["memory_id"] for r in journal.rejected()}
        for mid in resolved:
            # Rejected before rejection erased: archived, and brought back.
            if mid in rejected and lm.store.get_optional(mid, with_embedding=False):
                lm.store.restore(mid)
        journal.forget_review(resolved)
        return Changes(updated=tuple(resolved), counts=True)
    memories = lm.store.get_many(resolved, with_embedding=decision == "rejected")
    rows = []
    for m in memories:
        rows.append({
            "memory_id": m.id, "decision": decision, "project": m.project,
            "fingerprint": fingerprint(m.title, m.content, m.project, m.type),
            "embedding": m.embedding if decision == "rejected" else None,
            "particulars": particulars_key(m.content),
        })  # fmt: skip
    journal.record_reviews(rows)
    if decision == "rejected":
        gone = lm.erase_memories([m.id for m in memories], keep_review=True)
        return Changes(deleted=tuple(gone), links=True, counts=True)
    return Changes(updated=tuple(m.id for m in memories))


def memories_under(lm: Lexmem, root: str) -> int:
    """How many memories (of any status) the repository ``root`` has: its project or one
    inside it (what an opt-out's purge would erase)."""
    root = root.rstrip("/\\") or root
    return sum(
        lm.store.count(MemoryFilter(project=p, status=None))
        for p in lm.projects()
        if under(p, root)
    )


def purge_project(lm: Lexmem, root: str) -> Changes:
    """Erase everything captured from the repository at ``root`` (opt-out's ``--purge``):
    every memory whose project is the root or inside it, its sessions, their buffered
    events, the audit's texts of those projects and their digests, by the same erasure
    as forget (:meth:`Lexmem.erase_memories`)."""
    root = root.strip()
    if not root:
        raise InvalidInputError("purge needs the repository's folder")
    root = root.rstrip("/\\") or root
    projects = [p for p in lm.projects() if under(p, root)]
    ids = lm.store.ids_in_projects(projects)
    journal = lm.journal
    journal.ensure()
    with lm.store.writing():
        journal.purge_sessions(root)
        named = {root, *projects, *journal.audit_projects_under(root)}
        gone = lm.erase_memories(ids, projects=sorted(named))
    log.info("[MEM:STORE] Purged %d memories of an opted-out repository", len(gone))
    return Changes(deleted=tuple(gone), links=True, counts=True)


def unsupersede(lm: Lexmem, old: str, drop: str | None = None) -> Changes:
    """Undo a supersede: ``old`` is active again; ``drop`` (the replacement it wrote) is forgotten."""
    old_id = lm.resolve(old)
    lm.store.restore(old_id)
    deleted: tuple[str, ...] = ()
    if drop and lm.erase_memories([drop]):
        deleted = (drop,)
    return Changes(updated=(old_id,), deleted=deleted, links=True, counts=True)


# What review records of a rejected memory, and what dedupe compares: kept here, below the
# writer, because both the writer's pipeline and review's operations use them.
_PARTICULAR = re.compile(r"\d+(?:[.:]\d+)*|`[^`]+`|\b[\w.-]*[_./][\w./-]+\b")


def particulars_of(text: str) -> frozenset[str]:
    """Numbers, versions, paths and code spans: what must match for two texts to be one fact."""
    return frozenset(t.lower().strip("`.") for t in _PARTICULAR.findall(text))


def particulars_key(text: str) -> str:
    """A digest of a text's particulars: compared without keeping the text itself."""
    import hashlib

    return hashlib.sha256("\n".join(sorted(particulars_of(text))).encode()).hexdigest()[:32]
