"""One small function per user action (STYLE.md 3).

Each operation runs its write on the runner's write thread through the inbox (the
in-process service is the single writer), records how to undo it, and on the UI
thread announces what changed with one :attr:`Hub.changed` emission. Widgets call
these and never touch the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lexmem.api import remember_through_inbox
from lexmem.models import Changes, Memory, MemoryStatus, MemoryType

from .context import AppContext, UiChanges, UndoEntry

__all__ = [
    "archive",
    "capture_anyway",
    "edit",
    "forget",
    "link",
    "pin",
    "remember",
    "restore",
    "review",
    "set_type",
    "supersede",
    "undo",
]

Done = Callable[[Changes], None] | None
Failed = Callable[[BaseException], None] | None


def _run(
    ctx: AppContext,
    work: Callable[[], tuple[Changes, UndoEntry | None]],
    *,
    flags: dict[str, bool] | None = None,
    on_done: Done = None,
    on_error: Failed = None,
    keeps_undo: bool = False,
) -> None:
    """Run ``work`` on the write thread; then record its undo and emit what changed."""
    flags = {"review": True, **(flags or {})}

    def done(result: tuple[Changes, UndoEntry | None]) -> None:
        changes, entry = result
        if not keeps_undo:
            ctx.set_undo(entry)
        ctx.emit(UiChanges.of(changes, **flags))
        if on_done is not None:
            on_done(changes)

    def failed(exc: BaseException) -> None:
        ctx.hub.error.emit(str(exc))
        if on_error is not None:
            on_error(exc)

    ctx.runner.run(work, on_done=done, on_error=failed, write=True)


def _merge(items: Sequence[Changes]) -> Changes:
    out = Changes()
    for c in items:
        out = out.merge(c)
    return out


def _plural(n: int, what: str) -> str:
    return f"{what}" if n == 1 else f"{n} {what}s"


def _memories(ctx: AppContext, ids: Sequence[str]) -> list[Memory]:
    ctx.lm.refresh()
    return ctx.lm.memories_for([ctx.lm.resolve(i) for i in ids])


# -- remembering ----------------------------------------------------------------------


def remember(
    ctx: AppContext,
    text: str,
    *,
    mtype: str | None = None,
    project: str | None = None,
    pin: bool = False,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    """Quick remember: an explicit memory, through the inbox like every write."""

    def work() -> tuple[Changes, UndoEntry | None]:
        got = remember_through_inbox(
            ctx.lm, text, mtype=mtype or None, project=project or None, pin=pin, agent="app",
            wait=15.0, notify=ctx.wake,
        )  # fmt: skip
        ids = tuple(m.id for m in got.memories)
        if got.queued:
            return Changes(counts=True), None
        entry = UndoEntry(
            "Undo remember", lambda: _merge([ctx.writer.forget(i) for i in ids])
        )  # fmt: skip
        return Changes(created=ids, counts=True), entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def capture_anyway(
    ctx: AppContext,
    text: str,
    *,
    mtype: str | None = None,
    project: str | None = None,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    """A candidate the policy skipped, kept because the person says so ("remember this")."""
    remember(ctx, text, mtype=mtype, project=project, on_done=on_done, on_error=on_error)


# -- changing memories ---------------------------------------------------------------------


def pin(
    ctx: AppContext,
    ids: Sequence[str],
    pinned: bool = True,
    *,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    def work() -> tuple[Changes, UndoEntry | None]:
        before = {m.id: m.pinned for m in _memories(ctx, ids)}
        changes = _merge([ctx.writer.pin(i, pinned) for i in before])
        label = ("Undo pin " if pinned else "Undo unpin ") + _plural(len(before), "memory")
        entry = UndoEntry(
            label, lambda: _merge([ctx.writer.pin(i, was) for i, was in before.items()])
        )  # fmt: skip
        return changes, entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def archive(
    ctx: AppContext, ids: Sequence[str], *, on_done: Done = None, on_error: Failed = None
) -> None:
    def work() -> tuple[Changes, UndoEntry | None]:
        active = [m.id for m in _memories(ctx, ids) if m.status == MemoryStatus.ACTIVE]
        changes = _merge([ctx.writer.archive(i) for i in active])
        entry = UndoEntry(
            "Undo archive " + _plural(len(active), "memory"),
            lambda: _merge([ctx.writer.restore(i) for i in active]),
        )
        return changes, entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def restore(
    ctx: AppContext, ids: Sequence[str], *, on_done: Done = None, on_error: Failed = None
) -> None:
    def work() -> tuple[Changes, UndoEntry | None]:
        before = [m for m in _memories(ctx, ids) if m.status != MemoryStatus.ACTIVE]
        changes = _merge([ctx.writer.restore(m.id) for m in before])

        def back() -> Changes:
            out = []
            for m in before:
                if m.status == MemoryStatus.SUPERSEDED and m.superseded_by:
                    out.append(ctx.writer.supersede(m.id, by=m.superseded_by)[0])
                else:
                    out.append(ctx.writer.archive(m.id))
            return _merge(out)

        return changes, UndoEntry("Undo restore " + _plural(len(before), "memory"), back)

    _run(ctx, work, on_done=on_done, on_error=on_error)


def forget(
    ctx: AppContext, ids: Sequence[str], *, on_done: Done = None, on_error: Failed = None
) -> None:
    """Hard delete. Not undoable: forgetting keeps no copy anywhere (the dialog says so)."""

    def work() -> tuple[Changes, UndoEntry | None]:
        resolved = [ctx.lm.resolve(i) for i in ids]
        return _merge([ctx.writer.forget(i) for i in resolved]), None

    _run(ctx, work, on_done=on_done, on_error=on_error)


def edit(
    ctx: AppContext,
    memory_id: str,
    *,
    content: str | None = None,
    title: str | None = None,
    mtype: MemoryType | str | None = None,
    project: str | None = None,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    def work() -> tuple[Changes, UndoEntry | None]:
        (old,) = _memories(ctx, [memory_id])
        fields: dict[str, Any] = {}
        back: dict[str, Any] = {}
        for name, value, previous in (
            ("content", content, old.content), ("title", title, old.title),
            ("type", mtype, old.type), ("project", project, old.project),
        ):  # fmt: skip
            if value is not None and str(value) != str(previous or ""):
                fields[name] = str(value)
                back[name] = str(previous) if previous is not None else ""
        if not fields:
            return Changes(), None
        changes = ctx.writer.edit(old.id, **fields)
        entry = UndoEntry("Undo edit", lambda: ctx.writer.edit(old.id, **back))
        return changes, entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def set_type(
    ctx: AppContext,
    ids: Sequence[str],
    mtype: MemoryType | str,
    *,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    def work() -> tuple[Changes, UndoEntry | None]:
        before = {m.id: str(m.type) for m in _memories(ctx, ids)}
        changes = _merge([ctx.writer.edit(i, type=str(mtype)) for i in before])
        entry = UndoEntry(
            "Undo change of type",
            lambda: _merge([ctx.writer.edit(i, type=t) for i, t in before.items()]),
        )
        return changes, entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def supersede(
    ctx: AppContext,
    old: str,
    *,
    by: str | None = None,
    with_text: str | None = None,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    """Replace ``old`` by an existing memory (``by``) or by a new version (``with_text``)."""

    def work() -> tuple[Changes, UndoEntry | None]:
        old_id = ctx.lm.resolve(old)
        changes, new_id = ctx.writer.supersede(old_id, by=by, with_text=with_text)
        drop = new_id if with_text is not None else None
        entry = UndoEntry("Undo supersede", lambda: ctx.writer.unsupersede(old_id, drop))
        return changes, entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def link(
    ctx: AppContext,
    a: str,
    b: str,
    link_type: str,
    *,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    def work() -> tuple[Changes, UndoEntry | None]:
        a_id, b_id = ctx.lm.resolve(a), ctx.lm.resolve(b)
        existed = any(
            lk.to_id == b_id and lk.link_type == link_type for lk in ctx.lm.detail(a_id).links_from
        )
        changes = ctx.writer.link(a_id, b_id, link_type)
        entry = None if existed else UndoEntry(
            "Undo link", lambda: ctx.writer.unlink(a_id, b_id, link_type)
        )  # fmt: skip
        return Changes(updated=(a_id, b_id), links=True).merge(changes), entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def review(
    ctx: AppContext,
    ids: Sequence[str],
    decision: str,
    *,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    """Accept (keep) or reject (erase, and never capture the same again). A reject cannot
    be undone: the memory's text is gone from disk."""

    def work() -> tuple[Changes, UndoEntry | None]:
        changes = ctx.writer.review(ids, decision)
        if decision == "rejected":
            return changes, None
        ids_ = list(changes.updated)
        word = "accept" if decision == "accepted" else "reject"
        entry = UndoEntry(
            f"Undo {word} " + _plural(len(ids_), "memory"),
            lambda: ctx.writer.review(ids_, "pending"),
        )
        return changes, entry

    _run(ctx, work, on_done=on_done, on_error=on_error)


def undo(ctx: AppContext, *, on_done: Done = None, on_error: Failed = None) -> bool:
    """Undo the last action; False when there is nothing to undo."""
    entry = ctx.undo_entry
    if entry is None:
        return False
    ctx.set_undo(None)

    def work() -> tuple[Changes, UndoEntry | None]:
        return entry.undo(), None

    _run(ctx, work, flags=entry.flags or None, on_done=on_done, on_error=on_error, keeps_undo=True)
    return True
