"""One small function per user action (STYLE.md 3).

Each operation runs its write on the runner's write thread through the inbox (the
in-process service is the single writer), records how to undo it, and on the UI
thread announces what changed with one :attr:`Hub.changed` emission. Widgets call
these and never touch the store.

The settings window's actions are here too: a settings edit goes through
:meth:`AppContext.update_settings` (saved, applied to the object the in-process service
reads, announced); a value that cannot be used raises :class:`InvalidInputError` at once,
before anything runs, and the window shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lexmem.api import (
    CAPTURE,
    CAPTURE_MODES,
    Moved,
    Settings,
    keyring_available,
    llm_api_key_stored,
    remember_through_inbox,
    set_llm_api_key,
)
from lexmem.api import (
    move_data_folder as move_folder,
)
from lexmem.errors import InvalidInputError
from lexmem.models import Changes, Memory, MemoryStatus, MemoryType

from .context import AppContext, UiChanges, UndoEntry

__all__ = [
    "FOLDER_LISTS",
    "add_project_mode",
    "archive",
    "capture_anyway",
    "edit",
    "edit_and_accept",
    "edit_folders",
    "export",
    "forget",
    "keyring_state",
    "link",
    "move_data_folder",
    "pin",
    "reject",
    "remember",
    "restore",
    "review",
    "set_paused",
    "set_project_mode",
    "set_setting",
    "set_type",
    "store_api_key",
    "supersede",
    "undo",
    "watch_folder",
]

Done = Callable[[Changes], None] | None
Failed = Callable[[BaseException], None] | None
#: Called with what a settings edit changed: ("section.key", old, new) for each setting.
Saved = Callable[[list[tuple[str, Any, Any]]], None] | None

#: The ``[capture]`` lists of folders the settings window edits.
FOLDER_LISTS = ("optout", "allow_paths", "watch")


def _run(
    ctx: AppContext,
    work: Callable[[], tuple[Changes, UndoEntry | None]],
    *,
    label: str | None,
    flags: dict[str, bool] | None = None,
    on_done: Done = None,
    on_error: Failed = None,
    keep_undo: bool = False,
) -> None:
    """Run ``work`` on the write thread, then emit what changed.

    The action goes on the undo stack now, in the order the person asked for it, as
    ``label`` (None: it cannot be undone, and nothing before it can either); ``work``
    returns how to undo it, filled in on the write thread, so an undo asked for while the
    write still runs waits behind it and undoes exactly this. ``keep_undo``: the stack is
    not this write's business (an undo, a held reject's erase).
    """
    flags = {"review": True, **(flags or {})}
    slot: UndoEntry | None = None
    if not keep_undo:
        if label is None:
            ctx.clear_undo()
        else:
            slot = ctx.push_undo(UndoEntry(label))

    def job() -> tuple[Changes, UndoEntry | None]:
        changes, entry = work()
        if slot is not None and entry is not None:  # read by an undo, later on this thread
            slot.undo, slot.flags, slot.ids = entry.undo, entry.flags, entry.ids
        return changes, entry

    def done(result: tuple[Changes, UndoEntry | None]) -> None:
        changes, entry = result
        if slot is not None:
            if entry is None:
                ctx.drop_undo(slot)
            elif entry.label != slot.label:
                ctx.relabel_undo(slot, entry.label)
        ctx.emit(UiChanges.of(changes, **flags))
        if on_done is not None:
            on_done(changes)

    def failed(exc: BaseException) -> None:
        if slot is not None:
            ctx.drop_undo(slot)
        ctx.hub.error.emit(str(exc))
        if on_error is not None:
            on_error(exc)

    ctx.runner.run(job, on_done=done, on_error=failed, write=True)


def _merge(items: Sequence[Changes]) -> Changes:
    out = Changes()
    for c in items:
        out = out.merge(c)
    return out


_PLURALS = {"memory": "memories"}


def _plural(n: int, what: str) -> str:
    """``memory`` for one, ``3 memories`` for more (the Edit menu's Undo labels)."""
    return what if n == 1 else f"{n} {_PLURALS.get(what, what + 's')}"


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

    _run(ctx, work, label="Undo remember", on_done=on_done, on_error=on_error)


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

    word = "Undo pin " if pinned else "Undo unpin "
    _run(ctx, work, label=word + _plural(len(ids), "memory"), on_done=on_done, on_error=on_error)


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

    label = "Undo archive " + _plural(len(ids), "memory")
    _run(ctx, work, label=label, on_done=on_done, on_error=on_error)


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

    label = "Undo restore " + _plural(len(ids), "memory")
    _run(ctx, work, label=label, on_done=on_done, on_error=on_error)


def forget(
    ctx: AppContext, ids: Sequence[str], *, on_done: Done = None, on_error: Failed = None
) -> None:
    """Hard delete. Not undoable: forgetting keeps no copy anywhere (the dialog says so)."""

    def work() -> tuple[Changes, UndoEntry | None]:
        resolved = [ctx.lm.resolve(i) for i in ids]
        return _merge([ctx.writer.forget(i) for i in resolved]), None

    _run(ctx, work, label=None, on_done=on_done, on_error=on_error)


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

    _run(ctx, work, label="Undo edit", on_done=on_done, on_error=on_error)


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

    _run(ctx, work, label="Undo change of type", on_done=on_done, on_error=on_error)


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
        # A new version typed here is the person's own: kept without review.
        changes, new_id = ctx.writer.supersede(old_id, by=by, with_text=with_text, own=True)
        drop = new_id if with_text is not None else None
        entry = UndoEntry("Undo supersede", lambda: ctx.writer.unsupersede(old_id, drop))
        return changes, entry

    _run(ctx, work, label="Undo supersede", on_done=on_done, on_error=on_error)


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

    _run(ctx, work, label="Undo link", on_done=on_done, on_error=on_error)


def review(
    ctx: AppContext,
    ids: Sequence[str],
    decision: str,
    *,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    """Accept (keep), or reject at once: erased, and never captured the same again, which
    nothing can undo (the memory's text is gone from disk). The review panel rejects
    through :func:`reject`, which holds the erase while Ctrl+Z can still bring it back."""
    _review(ctx, ids, decision, on_done=on_done, on_error=on_error)


def _review(
    ctx: AppContext,
    ids: Sequence[str],
    decision: str,
    *,
    on_done: Done = None,
    on_error: Failed = None,
    keep_undo: bool = False,
) -> None:
    word = "accept" if decision == "accepted" else "reject"
    label = None if decision == "rejected" else f"Undo {word} " + _plural(len(ids), "memory")

    def work() -> tuple[Changes, UndoEntry | None]:
        changes = ctx.writer.review(ids, decision)
        if decision == "rejected":
            return changes, None
        ids_ = list(changes.updated)
        entry = UndoEntry(
            f"Undo {word} " + _plural(len(ids_), "memory"),
            lambda: ctx.writer.review(ids_, "pending"),
            ids=tuple(ids_),
        )
        return changes, entry

    _run(ctx, work, label=label, on_done=on_done, on_error=on_error, keep_undo=keep_undo)


def reject(
    ctx: AppContext,
    ids: Sequence[str],
    *,
    on_erased: Done = None,
    on_error: Failed = None,
) -> UndoEntry:
    """Reject memories waiting for review, undoably: nothing is written now. The erase
    (as :func:`review` rejects: the text gone from disk, and capture never keeps the same
    again) runs when the undo window closes, :attr:`AppContext.undo_window_ms` later, or
    sooner when the browser closes or the app quits; until then Ctrl+Z gives the memories
    back exactly as they were, still waiting. The caller hides them meanwhile
    (:meth:`AppContext.held_ids`)."""
    todo = tuple(dict.fromkeys(ids))

    def erase() -> None:
        _review(ctx, todo, "rejected", on_done=on_erased, on_error=on_error, keep_undo=True)

    return ctx.hold(todo, "Undo reject " + _plural(len(todo), "memory"), erase).entry


def edit_and_accept(
    ctx: AppContext,
    memory_id: str,
    *,
    content: str,
    mtype: MemoryType | str | None = None,
    on_done: Done = None,
    on_error: Failed = None,
) -> None:
    """Correct a memory waiting for review, then accept it: one action, one undo (back to
    the text it had, waiting again). A failed edit accepts nothing; a failed accept puts
    the text back."""

    def work() -> tuple[Changes, UndoEntry | None]:
        (old,) = _memories(ctx, [memory_id])
        fields: dict[str, Any] = {}
        back: dict[str, Any] = {}
        for name, value, previous in (("content", content, old.content), ("type", mtype, old.type)):
            if value is not None and str(value) != str(previous or ""):
                fields[name] = str(value)
                back[name] = str(previous) if previous is not None else ""
        changes = ctx.writer.edit(old.id, **fields) if fields else Changes()
        try:
            changes = changes.merge(ctx.writer.review([old.id], "accepted"))
        except Exception:
            if back:  # one action: a failed accept leaves the text as it was too
                ctx.writer.edit(old.id, **back)
            raise

        def undo() -> Changes:
            out = ctx.writer.review([old.id], "pending")
            return out.merge(ctx.writer.edit(old.id, **back)) if back else out

        return changes, UndoEntry("Undo edit and accept", undo, ids=(old.id,))

    _run(ctx, work, label="Undo edit and accept", on_done=on_done, on_error=on_error)


def undo(ctx: AppContext, *, on_done: Done = None, on_error: Failed = None) -> bool:
    """Undo the last action; False when there is nothing to undo.

    The last action is the top of the undo stack, whatever it touched: a held reject
    comes back at once; a write's undo runs after that write (still running or not).
    """
    entry = ctx.pop_undo()
    if entry is None:
        return False
    if entry.revert is not None:
        entry.revert()
        if on_done is not None:
            on_done(Changes(updated=entry.ids))
        return True

    def work() -> tuple[Changes, UndoEntry | None]:
        # The action's own write ran first (one write thread, in order): ``entry.undo`` is
        # set, unless the action failed or changed nothing.
        if entry.undo is None:
            raise InvalidInputError("nothing to undo: the last action changed nothing")
        return entry.undo(), None

    def done(changes: Changes) -> None:
        if entry.ids:
            ctx.hub.restored.emit(entry.ids)
        if on_done is not None:
            on_done(changes)

    flags = entry.flags or None
    _run(ctx, work, label=None, flags=flags, on_done=done, on_error=on_error, keep_undo=True)
    return True


# -- settings ------------------------------------------------------------------------------


def _folder(path: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_absolute():
        raise InvalidInputError(f"{path!r} is not an absolute folder path")
    return folder.resolve()


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_setting(
    ctx: AppContext, section: str, key: str, value: Any, *, on_done: Saved = None
) -> None:
    """Change one setting, ``[section] key``: saved, applied at once, announced."""
    ctx.update_settings(lambda s: setattr(getattr(s, section), key, value), on_done=on_done)


def set_paused(ctx: AppContext, duration: timedelta | None, *, on_done: Saved = None) -> None:
    """Pause automatic capture for ``duration``, or resume it (None)."""
    until = _stamp(datetime.now(UTC) + duration) if duration else ""
    set_setting(ctx, "capture", "paused_until", until, on_done=on_done)


def set_project_mode(
    ctx: AppContext, project: str, mode: str | None, *, on_done: Saved = None
) -> None:
    """Give ``project`` its own capture mode, or remove its override (None)."""
    if mode is not None and mode not in CAPTURE_MODES:
        raise InvalidInputError(
            f"capture mode must be one of {', '.join(CAPTURE_MODES)}, not {mode!r}"
        )

    def mutate(s: Settings) -> None:
        modes = dict(s.capture.project_modes)
        if mode is None:
            modes.pop(project, None)
        else:
            modes[project] = mode
        s.capture.project_modes = modes

    ctx.update_settings(mutate, on_done=on_done)


def add_project_mode(ctx: AppContext, path: str, *, on_done: Saved = None) -> None:
    """A project folder with its own capture mode, "off" to begin with."""
    folder = _folder(path)
    if str(folder) in ctx.settings.capture.project_modes:
        raise InvalidInputError(f"{folder} already has its own mode")
    set_project_mode(ctx, str(folder), "off", on_done=on_done)


def edit_folders(
    ctx: AppContext, key: str, paths: Sequence[str], add: bool, *, on_done: Saved = None
) -> None:
    """Add or remove folders in a ``[capture]`` list: optout, allow_paths or watch."""
    if key not in FOLDER_LISTS:
        raise ValueError(f"not a folder list: {key}")
    # Removal takes the stored strings as they are: a folder that has since moved or
    # vanished must still be removable.
    folders = [str(_folder(p)) for p in paths] if add else list(paths)
    if add:
        current = getattr(ctx.settings.capture, key)
        known = [f for f in folders if f in current]
        if known:
            raise InvalidInputError(f"{known[0]} is already in the list")

    def mutate(s: Settings) -> None:
        current = [f for f in getattr(s.capture, key) if f not in folders]
        setattr(s.capture, key, sorted(current + folders) if add else current)

    ctx.update_settings(mutate, on_done=on_done)


def watch_folder(
    ctx: AppContext,
    path: str,
    *,
    on_done: Callable[[Path], None],
    on_refused: Callable[[Path], None],
    on_error: Failed = None,
) -> None:
    """Watch the folder of notes at ``path``, if the tier includes automatic capture:
    ``on_done(folder)`` once it is saved (its first scan is the caller's), else
    ``on_refused(folder)`` and nothing is added."""
    folder = _folder(path)
    if not folder.is_dir():
        raise InvalidInputError(f"{folder} is not a folder")
    if str(folder) in ctx.settings.capture.watch:
        raise InvalidInputError(f"{folder} is already watched")
    lm = ctx.lm

    def gated(enabled: bool) -> None:
        if not enabled:  # watched Markdown folders are automatic capture: add nothing
            on_refused(folder)
            return

        def mutate(s: Settings) -> None:
            s.capture.watch = sorted([*s.capture.watch, str(folder)])

        ctx.update_settings(mutate, on_done=lambda _diff: on_done(folder))

    # The gate is asked off the UI thread: the status may read the keyring and a file.
    ctx.read(lambda: lm.licence.is_enabled(CAPTURE), on_done=gated, on_error=on_error)


def keyring_state(
    ctx: AppContext,
    *,
    on_done: Callable[[tuple[bool, str, bool]], None],
    on_error: Failed = None,
) -> None:
    """Whether the OS keyring can keep the LLM's API key, the backend (or why not), and
    whether a key is kept there now."""

    def probe() -> tuple[bool, str, bool]:
        ok, why = keyring_available()
        stored = ok and llm_api_key_stored()
        return ok, why, stored

    ctx.read(probe, on_done=on_done, on_error=on_error)


def store_api_key(
    ctx: AppContext,
    key: str,
    *,
    on_done: Callable[[None], None] | None = None,
    on_error: Failed = None,
) -> None:
    """Keep the LLM's API key in the OS keyring (an empty key removes it); never in the
    settings file."""
    ctx.read(lambda: set_llm_api_key(key), on_done=on_done, on_error=on_error)


def export(
    ctx: AppContext,
    out: Path,
    fmt: str = "jsonl",
    *,
    on_done: Callable[[dict[str, int]], None] | None = None,
    on_error: Failed = None,
) -> None:
    """Export every memory, link and confidence point to a new (or empty) folder."""
    lm = ctx.lm
    ctx.read(lambda: lm.export(out, fmt), on_done=on_done, on_error=on_error)


def move_data_folder(
    ctx: AppContext,
    target: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_done: Callable[[Moved], None] | None = None,
    on_error: Failed = None,
) -> None:
    """Move the data folder to ``target``: copy, verify, repoint, remove the old one."""
    paths = ctx.paths
    # On the write thread: the app's own writes wait until the folder has moved.
    ctx.runner.run(
        lambda: move_folder(paths, target, progress=progress),
        on_done=on_done, on_error=on_error, write=True,
    )  # fmt: skip
