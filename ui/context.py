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

from PySide6.QtCore import QObject, Signal

from lexmem.api import InboxWriter, Settings
from lexmem.models import Changes

from .runner import Runner

if TYPE_CHECKING:
    from lexmem.api import CaptureService, Lexmem

__all__ = ["AppContext", "Hub", "UiChanges", "UndoEntry", "settings_diff"]

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


@dataclass(slots=True)
class UndoEntry:
    """The inverse of the last action: a label for the menu and a write that undoes it."""

    label: str
    undo: Callable[[], Changes]
    flags: dict[str, bool] = field(default_factory=dict)


class Hub(QObject):
    """The app-wide signals (always emitted on the UI thread)."""

    changed = Signal(object)  # UiChanges
    notify = Signal(str, str)  # title, message: a tray message where there is a tray
    show_requested = Signal()  # a second launch asked to see the browser
    undo_changed = Signal(str)  # the label of what undo would undo ("" = nothing)
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
        self._undo: UndoEntry | None = None
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

    @property
    def undo_entry(self) -> UndoEntry | None:
        return self._undo

    def set_undo(self, entry: UndoEntry | None) -> None:
        self._undo = entry
        self.hub.undo_changed.emit(entry.label if entry else "")

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
        self.runner.shutdown(wait=True)


def _assign(target: Any, source: Any) -> None:
    for name in source.__dataclass_fields__:
        setattr(target, name, getattr(source, name))
