"""What every window and panel of the app shares: the core, the runner, one signal.

:class:`AppContext` is built once by the composition root (:mod:`ui.app`) and passed
to each widget. Widgets never touch the store: they call an operation in
:mod:`ui.ops` (writes) or :meth:`AppContext.read` (reads), and redraw what
:attr:`Hub.changed` says changed (STYLE.md 2-3).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal

from lexmem.api import InboxWriter, Settings
from lexmem.models import Changes

from .runner import Runner

if TYPE_CHECKING:
    from lexmem.api import CaptureService, Lexmem

__all__ = ["UNDO_WINDOW_MS", "AppContext", "Held", "Hub", "UiChanges", "UndoEntry", "settings_diff"]

log = logging.getLogger("lexmem.ui")


@dataclass(frozen=True, slots=True)
class UiChanges:
    """What an operation or a capture changed; each panel redraws only its part."""

    memories: Changes = field(default_factory=Changes)
    review: bool = False  # the review queue (its count in the tray too)
    audit: bool = False
    sessions: bool = False
    settings: bool = False
    state: bool = False  # capture state: mode, pause, service health

    @classmethod
    def of(cls, changes: Changes, **flags: bool) -> UiChanges:
        return cls(memories=changes, **flags)

    @property
    def touched(self) -> set[str]:
        m = self.memories
        return {*m.created, *m.updated, *m.deleted}


@dataclass(slots=True, eq=False)
class UndoEntry:
    """The inverse of one action: a label for the menu and a write that undoes it.

    An entry goes on the undo stack when the action is asked for, before its write runs;
    the write fills in :attr:`undo` on the write thread, where an undo asked for meanwhile
    runs after it (one write at a time, in order). ``revert`` undoes an action that
    wrote nothing yet (a held reject) at once, on the UI thread. ``ids``: the memories the
    undo brings back, which the review selects again.
    """

    label: str
    undo: Callable[[], Changes] | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    ids: tuple[str, ...] = ()
    revert: Callable[[], None] | None = None
    said: str = ""  # what the panel says once undone ("" = "Undid …", from the label)


#: How long a reject waits before its erase, while Ctrl+Z can still bring the memory back.
UNDO_WINDOW_MS = 30_000
#: Undo goes back this many actions at most.
UNDO_DEPTH = 100


@dataclass(slots=True, eq=False)
class Held:
    """A reject whose erase waits for its undo window to close (:meth:`AppContext.hold`)."""

    ids: tuple[str, ...]
    entry: UndoEntry
    timer: QTimer
    erase: Callable[[], None]


class Hub(QObject):
    """The app-wide signals (always emitted on the UI thread)."""

    changed = Signal(object)  # UiChanges
    notify = Signal(str, str)  # title, message: a tray message where there is a tray
    show_requested = Signal()  # a second launch asked to see the browser
    undo_changed = Signal(str)  # the label of what undo would undo ("" = nothing)
    restored = Signal(object)  # tuple of memory ids an undo brought back (before `changed`)
    error = Signal(str)  # one line for the status bar


def settings_diff(old: Settings, new: Settings) -> list[tuple[str, Any, Any]]:
    """The settings that differ, as ("section.key", old, new)."""
    out = []
    a, b = old.to_dict(), new.to_dict()
    for section, values in b.items():
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            before = a.get(section, {}).get(key)
            if before != value:
                out.append((f"{section}.{key}", before, value))
    return out


class AppContext:
    """The core opened on one data folder, as the app uses it."""

    def __init__(
        self, lm: Lexmem, *, service: CaptureService | None = None, runner: Runner | None = None
    ) -> None:
        self.lm = lm
        self.paths = lm.paths
        self.service = service
        self.runner = runner or Runner()
        self.hub = Hub()
        self.writer = InboxWriter(lm, agent="app", notify=self.wake)
        self._undo: list[UndoEntry] = []  # the last action last
        self._held: list[Held] = []
        #: How long a reject is held before its erase (ms); tests shorten it.
        self.undo_window_ms = UNDO_WINDOW_MS
        self.runner.failed.connect(lambda exc: self.hub.error.emit(str(exc)))

    # -- plumbing -----------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.lm.settings

    def wake(self) -> None:
        """Tell the in-process service that an event waits (no-op without one)."""
        if self.service is not None:
            self.service.wake()

    def read(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Run a read (search, list, statistics) off the UI thread."""
        self.runner.run(fn, on_done=on_done, on_error=on_error)

    def emit(self, changes: UiChanges) -> None:
        self.hub.changed.emit(changes)

    # -- undo ---------------------------------------------------------------------
    #
    # A stack of the actions done, in the order they were asked for. Ctrl+Z takes the top
    # one: the last action, whichever item it touched and however long its write runs.

    @property
    def undo_entry(self) -> UndoEntry | None:
        """What Ctrl+Z would undo: the last action (None when there is nothing)."""
        return self._undo[-1] if self._undo else None

    def push_undo(self, entry: UndoEntry) -> UndoEntry:
        self._undo.append(entry)
        del self._undo[:-UNDO_DEPTH]
        self._undo_moved()
        return entry

    def pop_undo(self) -> UndoEntry | None:
        entry = self._undo.pop() if self._undo else None
        self._undo_moved()
        return entry

    def drop_undo(self, entry: UndoEntry) -> None:
        """The action failed, or changed nothing: there is nothing of it to undo."""
        if entry in self._undo:
            self._undo.remove(entry)
            self._undo_moved()

    def expire_undo(self, entry: UndoEntry) -> None:
        """The action cannot be undone any more (its erase ran): it leaves the stack, and
        what was done before it goes too, so that Ctrl+Z never reaches past it to an
        older action on another memory."""
        if entry in self._undo:
            del self._undo[: self._undo.index(entry) + 1]
            self._undo_moved()

    def clear_undo(self) -> None:
        """An action that cannot be undone (forget): nothing before it can be either."""
        if self._undo:
            self._undo.clear()
            self._undo_moved()

    def relabel_undo(self, entry: UndoEntry, label: str) -> None:
        entry.label = label
        if self.undo_entry is entry:
            self._undo_moved()

    def _undo_moved(self) -> None:
        top = self.undo_entry
        self.hub.undo_changed.emit(top.label if top else "")

    # -- rejects held for their undo window -----------------------------------------------

    def hold(self, ids: tuple[str, ...], label: str, erase: Callable[[], None]) -> Held:
        """Hold a reject: nothing is written now; ``erase`` runs when the undo window
        closes (:attr:`undo_window_ms` later, or :meth:`release_held` first). Until then
        the entry on the undo stack gives the memories back as they were."""
        timer = QTimer(self.hub)
        timer.setSingleShot(True)
        entry = UndoEntry(label, ids=ids)
        held = Held(ids, entry, timer, erase)
        entry.revert = lambda: self._unhold(held)
        timer.timeout.connect(lambda: self._release(held))
        self._held.append(held)
        self.push_undo(entry)
        timer.start(self.undo_window_ms)
        # Out of every list now (the review queue, the browser's memories and searches).
        self.emit(UiChanges(memories=Changes(counts=True)))
        return held

    def held_ids(self) -> set[str]:
        """The memories rejected and not erased yet: no longer waiting for review."""
        return {i for h in self._held for i in h.ids}

    @property
    def held(self) -> list[Held]:
        return list(self._held)

    def held_left_ms(self, entry: UndoEntry) -> int | None:
        """How long the reject ``entry`` stays undoable (None: erased, or undone)."""
        held = next((h for h in self._held if h.entry is entry), None)
        return None if held is None else max(0, held.timer.remainingTime())

    def release_held(self) -> None:
        """Close every undo window now (the browser closes, the app quits): the held
        rejects' erases go to the write thread."""
        for held in list(self._held):
            self._release(held)

    def _release(self, held: Held) -> None:
        if held not in self._held:
            return
        held.timer.stop()
        held.timer.deleteLater()
        self._held.remove(held)
        self.expire_undo(held.entry)
        held.erase()

    def _unhold(self, held: Held) -> None:
        if held not in self._held:
            return
        held.timer.stop()
        held.timer.deleteLater()
        self._held.remove(held)
        self.hub.restored.emit(held.ids)
        self.emit(UiChanges(memories=Changes(updated=held.ids), review=True))

    # -- settings -------------------------------------------------------------------

    def update_settings(
        self,
        mutate: Callable[[Settings], None],
        on_done: Callable[[list[tuple[str, Any, Any]]], None] | None = None,
    ) -> None:
        """Change settings: applied at once (the in-process service shares the object)
        and saved for the hook and other processes. lexmem's own settings are not the
        agents' business: no memory is made of them (seed 000's configuration-change
        capture is for the preferences of the tools a person works in)."""

        def work() -> list[tuple[str, Any, Any]]:
            before = copy.deepcopy(self.lm.settings)
            after = copy.deepcopy(before)
            mutate(after)
            diff = settings_diff(before, after)
            if not diff:
                return []
            self.lm.save_settings(after)
            current = self.lm.settings
            for section in after.to_dict():
                if section != "schema_version":  # same objects: the service sees new values
                    _assign(getattr(current, section), getattr(after, section))
            self.wake()
            return diff

        def done(diff: list[tuple[str, Any, Any]]) -> None:
            if diff:
                self.emit(UiChanges(settings=True, state=True))
            if on_done is not None:
                on_done(diff)

        self.runner.run(work, on_done=done, write=True)

    def close(self) -> None:
        """Held rejects are erased, then every write finishes (none is dropped)."""
        self.release_held()
        self.runner.shutdown(wait=True)


def _assign(target: Any, source: Any) -> None:
    for name in source.__dataclass_fields__:
        setattr(target, name, getattr(source, name))
