"""The memory browser's main page: the "Memories" tab.

A search box (hybrid search as you type, debounced), filters (type, status, source,
project, pinned, created from/to), the results table (:mod:`ui.table`: ids only,
rows read lazily) and the detail panel (:mod:`ui.detail`).

The actions on a selection (:class:`SelectionActions`: the Edit menu, this page's
toolbar and context menu, the shortcuts) act on the selection of the panel on screen
(this page, the review queue, a session's timeline), each panel keeping its own;
each calls one operation in :mod:`ui.ops`. Forget names what it deletes before it
deletes it.

Constraints:

- Nothing here blocks the event loop: ids, searches and rows are read with
  ``ctx.read``; writes go through :mod:`ui.ops` (the write thread and the inbox).
- Searches from the UI never write: ``record_access=False`` (the in-process service
  is the single writer).
- A newer query wins: every query carries a sequence number and an older answer is
  dropped; at most one query runs at a time and the latest waiting one follows it.
- A change refreshes only what it touched: touched rows are re-read in place, and a
  re-queried id list is applied as row insertions/removals, never a reset, so the
  selection survives captures arriving while the person works.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from PySide6.QtCore import (
    QDate,
    QEvent,
    QItemSelectionModel,
    QObject,
    QPoint,
    Qt,
    QTimer,
    Signal,
    SignalInstance,
)
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QMouseEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QDateEdit,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import (
    MemoryFilter,
    SearchHit,
    listed,
    project_choices,
    project_labels,
    resolve_project,
)
from lexmem.models import Memory, MemorySource, MemoryStatus, MemoryType

from . import ops
from .context import AppContext, UiChanges
from .detail import MemoryDetailPanel
from .table import (
    SORTABLE_COLUMNS,
    IdPlan,
    MemoryTableModel,
    MemoryTableView,
    alive,
    plan_ids,
    submit_read,
    type_icon,
)

__all__ = [
    "LINK_TYPES",
    "SEARCH_LIMIT",
    "SORTS",
    "EditsMemory",
    "LinkDialog",
    "MemoriesPage",
    "MemoryPicker",
    "MemoryTarget",
    "Panel",
    "SelectionActions",
    "SupersedeDialog",
    "forget_question",
    "memory_markdown",
]

#: The detail panel's width at most when the page first shows (the person may drag it).
DETAIL_WIDTH = 440
#: Hits a search shows (the searcher's ceiling is 1,000; 200 keeps a keystroke cheap).
SEARCH_LIMIT = 200
DEBOUNCE_MS = 200
#: Sort keys the page offers; "relevance" is the search's own order.
SORTS = (
    ("relevance", "Relevance"),
    ("salience", "Salience"),
    ("created", "Newest"),
    ("accessed", "Last accessed"),
)
LINK_TYPES = ("relates_to", "depends_on", "supports", "contradicts", "elaborates", "example_of")
_ANY_DATE = QDate(2000, 1, 1)  # the minimum of a date filter, shown as "any"


def memory_markdown(m: Memory) -> str:
    """A memory as a readable Markdown block (Copy as Markdown)."""
    facts = [f"type: {m.type}"]
    if m.project:
        facts.append(f"project: {m.project}")
    if m.pinned:
        facts.append("pinned")
    if m.status != MemoryStatus.ACTIVE:
        facts.append(f"status: {m.status}")
    facts.append(f"id: `{m.id}`")
    return f"### {m.title or m.id}\n\n{m.content.strip()}\n\n_{' · '.join(facts)}_\n"


def _combo(items: Sequence[tuple[str, object]], tooltip: str, *, widest: str = "") -> QComboBox:
    """``widest``: a longer text an item takes later (the sort's "Relevance (newest)")."""
    box = QComboBox()
    for label, data in items:
        box.addItem(label, data)
    box.setToolTip(tooltip)
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    # Constraint: the theme's sheet pads a combo box's text by 3 px a side, which the width
    # Qt works out from the items leaves out: the longest text lost its last letters.
    texts = [label for label, _ in items] + ([widest] if widest else [])
    text_width = max(box.fontMetrics().horizontalAdvance(t) for t in texts)
    box.setMinimumWidth(max(box.sizeHint().width(), text_width + 40) + 10)
    return box


class _DateFilter(QDateEdit):
    """A date bound that may be "any" (its minimum); its calendar then opens on today."""

    def mousePressEvent(self, event: QMouseEvent) -> None:
        super().mousePressEvent(event)  # opens the popup, on the month of the date shown
        calendar = self.calendarWidget()
        if self.date() == self.minimumDate() and calendar is not None:
            today = QDate.currentDate()
            calendar.setCurrentPage(today.year(), today.month())


def _date_edit(tooltip: str) -> QDateEdit:
    edit = _DateFilter()
    edit.setCalendarPopup(True)
    edit.setDisplayFormat("yyyy-MM-dd")
    edit.setMinimumDate(_ANY_DATE)
    edit.setSpecialValueText("any")  # shown at the minimum: no bound
    edit.setDate(_ANY_DATE)
    edit.setToolTip(tooltip)
    return edit


def _day_start(d: QDate) -> datetime:
    """A local calendar day's start, in UTC (the store compares UTC timestamps)."""
    return datetime(d.year(), d.month(), d.day()).astimezone().astimezone(UTC)


# -- picking a memory (supersede by, link to) ----------------------------------------------


class MemoryPicker(QWidget):
    """Pick one memory by searching for it (never writes: no access recorded)."""

    #: The picked id changed ("" = none).
    picked_changed = Signal(str)
    #: A list of results is on screen (after each search).
    results_ready = Signal(int)

    def __init__(
        self, ctx: AppContext, exclude: Sequence[str] = (), parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._exclude = set(exclude)
        self._seq = 0
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search for the memory…")
        self.search.setClearButtonEnabled(True)
        lay.addWidget(self.search)
        self.results = QListWidget()
        self.results.setAlternatingRowColors(True)
        lay.addWidget(self.results)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.refresh)
        self.search.textChanged.connect(self._timer.start)
        self.results.currentItemChanged.connect(lambda *_: self.picked_changed.emit(self.picked))
        self.refresh()

    @property
    def picked(self) -> str:
        item = self.results.currentItem()
        return str(item.data(Qt.ItemDataRole.UserRole)) if item is not None else ""

    def set_query(self, text: str) -> None:
        self.search.setText(text)
        self._timer.stop()
        self.refresh()

    def refresh(self) -> None:
        self._seq += 1
        seq, text, lm = self._seq, self.search.text().strip(), self.ctx.lm
        limit = 20 + len(self._exclude)

        def work() -> list[Memory]:
            if text:
                result = lm.search(text, MemoryFilter(), limit=limit, record_access=False)
                return [h.memory for h in result.hits]
            return lm.list_memories(MemoryFilter(), sort="created", limit=limit)

        submit_read(
            self.ctx.read, work, lambda ms: self._show(seq, ms), lambda e: self._failed(seq, e)
        )

    def _failed(self, seq: int, exc: BaseException) -> None:
        if alive(self) and seq == self._seq:
            self.results.clear()
            self.results.addItem(f"Search failed: {exc}")

    def _show(self, seq: int, memories: list[Memory]) -> None:
        if not alive(self) or seq != self._seq:
            return  # closed meanwhile, or an older search
        self.results.clear()
        for m in memories:
            if m.id in self._exclude:
                continue
            project = f" · {m.project}" if m.project else ""
            item = QListWidgetItem(type_icon(str(m.type)), f"{m.title}{project} · {m.id[:8]}")
            item.setData(Qt.ItemDataRole.UserRole, m.id)
            item.setToolTip(m.content[:400])
            self.results.addItem(item)
        if self.results.count():
            self.results.setCurrentRow(0)
        self.picked_changed.emit(self.picked)
        self.results_ready.emit(self.results.count())


class SupersedeDialog(QDialog):
    """Replace a memory: by a new version written here, or by an existing memory."""

    def __init__(self, ctx: AppContext, old: Memory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.old = old
        self.setWindowTitle("Supersede memory")
        self.resize(560, 420)
        lay = QVBoxLayout(self)
        intro = QLabel(f"Replace “{old.title}”. The old version stays, marked superseded.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.tabs = QTabWidget()
        self.text = QPlainTextEdit(old.content)
        self.tabs.addTab(self.text, "Write a new version")
        self.picker = MemoryPicker(ctx, exclude=[old.id])
        self.tabs.addTab(self.picker, "Replace by an existing memory")
        lay.addWidget(self.tabs)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Supersede")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.text.textChanged.connect(self._check)
        self.tabs.currentChanged.connect(self._check)
        self.picker.picked_changed.connect(self._check)
        self._check()

    def choice(self) -> tuple[str | None, str | None]:
        """``(by, with_text)``: exactly one is set."""
        if self.tabs.currentWidget() is self.picker:
            return self.picker.picked or None, None
        return None, self.text.toPlainText().strip() or None

    def _check(self) -> None:
        by, text = self.choice()
        ok = bool(by) or bool(text and text != self.old.content.strip())
        self.ok.setEnabled(ok)


class LinkDialog(QDialog):
    """Link a memory to another one, picked by search, with a link type."""

    def __init__(self, ctx: AppContext, source: Memory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source = source
        self.setWindowTitle("Link memory")
        self.resize(520, 420)
        lay = QVBoxLayout(self)
        form = QFormLayout()
        form.addRow("From", QLabel(source.title))
        self.link_type = QComboBox()
        self.link_type.setEditable(True)  # any type; the core normalises its spelling
        self.link_type.addItems(LINK_TYPES)
        form.addRow("Link type", self.link_type)
        lay.addLayout(form)
        self.picker = MemoryPicker(ctx, exclude=[source.id])
        lay.addWidget(self.picker)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Link")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.picker.picked_changed.connect(lambda _: self._check())
        self.link_type.editTextChanged.connect(lambda _: self._check())
        self._check()

    def choice(self) -> tuple[str, str] | None:
        """``(target id, link type)``, or None while either is missing."""
        target, kind = self.picker.picked, self.link_type.currentText().strip()
        return (target, kind) if target and kind else None

    def _check(self) -> None:
        self.ok.setEnabled(self.choice() is not None)


# -- the actions on a selection ----------------------------------------------------------

#: How many memories a forget confirmation names before "and N more".
NAMED = 5


@runtime_checkable
class Panel(Protocol):
    """A tab of the browser: it can be read again and can say one line to the person."""

    def refresh(self) -> None: ...

    def report(self, text: str, *, error: bool = False) -> None: ...


@runtime_checkable
class MemoryTarget(Panel, Protocol):
    """A panel whose selection is of memories (Memories, Review, a session's timeline).

    Each has its own selection; :class:`SelectionActions` acts on the one of the panel
    on screen, never on a hidden one. ``selection_changed`` is emitted whenever what is
    selected, or what is known of it (pinned, status), changes.
    """

    @property
    def selection_changed(self) -> SignalInstance: ...

    def selected_memory_ids(self) -> list[str]: ...

    def selection_sample(self) -> tuple[int, list[Memory]]:
        """How many memories are selected, and those of them already read (a sample:
        a selection of 100,000 is not read to enable a menu item)."""
        ...

    def cached_memory(self, memory_id: str) -> Memory | None: ...


@runtime_checkable
class EditsMemory(Protocol):
    """A memory panel with its own editor (Memories: the detail panel; Review: edit,
    then accept). ``edit_label`` is the Edit action's text there."""

    edit_label: str

    def edit_selection(self) -> None: ...


def _title(m: Memory | None, memory_id: str, limit: int = 80) -> str:
    """A memory as a confirmation names it: its title on one line, quoted, cut short."""
    text = " ".join(((m.title or m.content) if m is not None else "").split()) or memory_id[:8]
    return f"“{text if len(text) <= limit else text[: limit - 1] + '…'}”"


def forget_question(ids: Sequence[str], known: dict[str, Memory], shared: bool = False) -> str:
    """What Forget asks: the memory by name, or the count and the first few names; for a
    memory the team shares, what the team's server still holds."""
    names = [_title(known.get(i), i) for i in ids[:NAMED]]
    n = len(ids)
    if n == 1:
        question = f"Forget {names[0]}?"
        what = "It is deleted with its links and history"
        held = "it"
    else:
        more = f" and {n - NAMED} more" if n > NAMED else ""
        question = f"Forget {n} memories: {', '.join(names)}{more}?"
        what = "They are deleted with their links and history"
        held = "them"
    told = (
        f"{question}\n\n{what}; this cannot be undone.\nBackups made before now still hold {held}."
    )
    if shared:
        from lexmem.team.membership import SERVER_KEEPS

        told += f"\n\nShared with your team. {SERVER_KEEPS}"
    return told


def _any_shared(lm: Any, ids: Sequence[str]) -> bool:
    """Whether any of ``ids`` is a memory the team shares (read off the UI thread)."""
    if not lm.shared_projects():
        return False
    return any(lm.is_shared(m) for m in lm.memories_for(list(ids)))


class SelectionActions(QObject):
    """The browser's actions on a selection: pin, archive, restore, supersede, edit,
    change type, link, copy, forget (plus undo and refresh).

    One set of actions serves the Edit menu, the Memories toolbar and context menu,
    and the shortcuts. Each acts on the selection of the panel on screen: with
    :meth:`follow`, the current tab of the window; alone, the Memories page. An action
    that has nothing to act on in that panel is disabled, so a hidden tab's
    selection is never reached.
    """

    def __init__(self, ctx: AppContext, home: MemoriesPage) -> None:
        super().__init__(home)
        self.ctx = ctx
        self._home = home
        self._tabs: QTabWidget | None = None
        self._watched: list[QWidget] = []
        self._dialog: QWidget | None = None
        self._make()
        self._watch(home)
        ctx.hub.undo_changed.connect(self._undo_changed)
        self._undo_changed(ctx.undo_entry.label if ctx.undo_entry else "")
        self.update()

    # -- where the actions act ---------------------------------------------------------

    def follow(self, tabs: QTabWidget) -> None:
        """Act on the current tab of ``tabs`` (the window's panels) from now on."""
        self._tabs = tabs
        for i in range(tabs.count()):
            widget = tabs.widget(i)
            if widget is not None:
                self._watch(widget)
        # And while the focus is on the tab bar (a click on a tab puts it there): the
        # actions act on the panel on screen all the same.
        for a in self._shortcut_actions:
            tabs.addAction(a)
        tabs.currentChanged.connect(self._tab_changed)
        self.update()

    def panel(self) -> QWidget | None:
        """The panel on screen: the current tab, or the Memories page alone."""
        return self._tabs.currentWidget() if self._tabs is not None else self._home

    def target(self) -> MemoryTarget | None:
        """The panel on screen when its selection is of memories."""
        panel = self.panel()
        return panel if isinstance(panel, MemoryTarget) else None

    @property
    def dialog(self) -> QWidget | None:
        """The dialog an action opened and that is still open (tests drive it)."""
        return self._dialog

    def menu_actions(self) -> list[QAction]:
        """The Edit menu's items, separators included."""
        return list(self._menu_actions)

    def _watch(self, widget: QWidget) -> None:
        if widget in self._watched:
            return
        self._watched.append(widget)
        # The shortcuts work while the focus is inside a panel; only the panel on
        # screen can hold the focus, and each action reads the panel on screen.
        for a in self._shortcut_actions:
            widget.addAction(a)
        if isinstance(widget, MemoryTarget):
            widget.selection_changed.connect(self.update)

    def _tab_changed(self, _index: int) -> None:
        self.update()

    # -- the actions -------------------------------------------------------------------

    def _action(
        self, text: str, slot: Callable[[], None], shortcut: QKeySequence | str | None, tip: str
    ) -> QAction:
        a = QAction(text, self)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        a.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        a.setToolTip(f"{tip} ({a.shortcut().toString()})" if shortcut is not None else tip)
        a.setStatusTip(tip)
        a.triggered.connect(lambda _=False: slot())
        return a

    def _make(self) -> None:
        key = QKeySequence.StandardKey
        self.pin = self._action("Pin", self.toggle_pin, "Ctrl+P", "Pin or unpin the selection")
        self.archive = self._action(
            "Archive", self.archive_selected, "Delete", "Archive: leaves searches, can be restored"
        )
        self.restore = self._action(
            "Restore", self.restore_selected, "Ctrl+Shift+R", "Make archived or superseded active"
        )
        self.supersede = self._action(
            "Supersede…", self.supersede_selected, "Ctrl+Shift+S", "Replace by a newer version"
        )
        self.edit = self._action("Edit", self.edit_selected, "F2", "Edit the content")
        self.link = self._action("Link…", self.link_selected, "Ctrl+L", "Link to another memory")
        self.forget = self._action(
            "Forget…", self.forget_selected, "Shift+Delete", "Delete for good (cannot be undone)"
        )
        self.copy = self._action(
            "Copy as Markdown", self.copy_markdown, "Ctrl+Shift+C", "Copy as Markdown"
        )
        self.undo = self._action(
            "Undo", self.undo_last, QKeySequence(key.Undo), "Undo the last action"
        )
        self.refresh = self._action("Refresh", self.refresh_panel, "F5", "Read everything again")
        self.type_menu = QMenu("Change type", self._home)
        self.type_actions: dict[str, QAction] = {}
        for t in MemoryType:
            a = self.type_menu.addAction(type_icon(t.value), t.value)
            a.triggered.connect(lambda _=False, v=t.value: self.set_type_selected(v))
            self.type_actions[t.value] = a
        self.change_type = self.type_menu.menuAction()
        self.change_type.setToolTip("Change the type of the selection")
        self._shortcut_actions = [
            self.pin, self.archive, self.restore, self.supersede, self.edit, self.link,
            self.forget, self.copy, self.undo, self.refresh,
        ]  # fmt: skip
        sep1, sep2, sep3 = (QAction(self) for _ in range(3))
        for sep in (sep1, sep2, sep3):
            sep.setSeparator(True)
        self._menu_actions = [
            self.undo, sep1,
            self.pin, self.archive, self.restore, self.supersede,
            self.edit, self.change_type, self.link, sep2,
            self.copy, self.forget, sep3, self.refresh,
        ]  # fmt: skip

    def update(self) -> None:
        """Enable what the panel on screen's selection allows; name Pin/Unpin and Edit."""
        target = self.target()
        n, known = target.selection_sample() if target is not None else (0, [])
        statuses = {m.status for m in known}
        unknown = len(known) < n
        for a in (self.pin, self.forget, self.copy, self.change_type):
            a.setEnabled(n > 0)
        self.archive.setEnabled(n > 0 and (unknown or MemoryStatus.ACTIVE in statuses))
        self.restore.setEnabled(n > 0 and (unknown or bool(statuses - {MemoryStatus.ACTIVE})))
        for a in (self.supersede, self.link):
            a.setEnabled(n == 1)
        editor = target if isinstance(target, EditsMemory) else None
        self.edit.setText(editor.edit_label if editor is not None else "Edit")
        self.edit.setEnabled(n == 1 and editor is not None)
        unpin = bool(known) and not unknown and all(m.pinned for m in known)
        self.pin.setText("Unpin" if unpin else "Pin")
        self.refresh.setEnabled(isinstance(self.panel(), Panel))

    def _undo_changed(self, label: str) -> None:
        self.undo.setText(label or "Undo")
        self.undo.setEnabled(bool(label))

    # -- what each does ------------------------------------------------------------------

    def _selection(self) -> tuple[MemoryTarget, list[str]] | None:
        """The panel on screen and its selected memories (read now, at the trigger)."""
        target = self.target()
        if target is None:
            return None
        ids = target.selected_memory_ids()
        return (target, ids) if ids else None

    def _say(self, target: Panel) -> Callable[[str], None]:
        """Report to the panel the action came from (it may have closed since)."""

        def say(text: str) -> None:
            if isinstance(target, QWidget) and alive(target):
                target.report(text)

        return say

    def toggle_pin(self) -> None:
        got = self._selection()
        if got is None:
            return
        target, ids = got
        unpin = all((m := target.cached_memory(i)) is not None and m.pinned for i in ids)
        say = self._say(target)
        word = "Unpinned " if unpin else "Pinned "
        ops.pin(self.ctx, ids, not unpin, on_done=lambda c: say(word + _count(len(ids))))

    def archive_selected(self) -> None:
        got = self._selection()
        if got is not None:
            target, ids = got
            say = self._say(target)
            ops.archive(self.ctx, ids, on_done=lambda c: say(f"Archived {_count(len(c.updated))}"))

    def restore_selected(self) -> None:
        got = self._selection()
        if got is not None:
            target, ids = got
            say = self._say(target)
            ops.restore(self.ctx, ids, on_done=lambda c: say(f"Restored {_count(len(c.updated))}"))

    def set_type_selected(self, mtype: str) -> None:
        got = self._selection()
        if got is not None:
            target, ids = got
            say = self._say(target)
            ops.set_type(self.ctx, ids, mtype, on_done=lambda c: say(f"Now {mtype}"))

    def edit_selected(self) -> None:
        target = self.target()
        if isinstance(target, EditsMemory) and len(target.selected_memory_ids()) == 1:
            target.edit_selection()

    def supersede_selected(self) -> None:
        """Open the supersede dialog for the selected memory."""
        self._with_memories(self._open_supersede, one=True)

    def link_selected(self) -> None:
        """Open the link dialog for the selected memory."""
        self._with_memories(self._open_link, one=True)

    def forget_selected(self) -> None:
        """Ask, naming what goes, then delete the selected memories for good."""
        self._with_memories(self._ask_forget)

    def copy_markdown(self) -> None:
        """Copy the selected memories to the clipboard as Markdown."""
        got = self._selection()
        if got is None:
            return
        target, ids = got
        lm, say = self.ctx.lm, self._say(target)

        def done(memories: list[Memory]) -> None:
            QApplication.clipboard().setText("\n".join(memory_markdown(m) for m in memories))
            say(f"Copied {_count(len(memories))} as Markdown")

        submit_read(self.ctx.read, lambda: lm.memories_for(ids), done, self._failed(target))

    def undo_last(self) -> None:
        panel = self.panel()
        target = panel if isinstance(panel, Panel) else self._home
        say = self._say(target)
        entry = self.ctx.undo_entry
        said = (entry.said if entry else "") or self.undo.text().replace("Undo", "Undid", 1)
        if not ops.undo(self.ctx, on_done=lambda c: say(said)):
            say("Nothing to undo")

    def refresh_panel(self) -> None:
        panel = self.panel()
        if isinstance(panel, Panel):
            panel.refresh()

    # -- helpers -------------------------------------------------------------------------

    def _failed(self, target: Panel) -> Callable[[BaseException], None]:
        def failed(exc: BaseException) -> None:
            if isinstance(target, QWidget) and alive(target):
                target.report(str(exc), error=True)

        return failed

    def _with_memories(
        self,
        then: Callable[[MemoryTarget, list[str], dict[str, Memory]], None],
        *,
        one: bool = False,
    ) -> None:
        """Call ``then`` with the selection and its first few memories (for names),
        reading those not in the panel's cache first."""
        got = self._selection()
        if got is None or (one and len(got[1]) != 1):
            return
        target, ids = got
        named = ids[:NAMED]
        known = {i: m for i in named if (m := target.cached_memory(i)) is not None}
        if len(known) == len(named):
            then(target, ids, known)
            return
        lm = self.ctx.lm

        def done(memories: list[Memory]) -> None:
            if isinstance(target, QWidget) and alive(target):
                then(target, ids, {**known, **{m.id: m for m in memories}})

        submit_read(self.ctx.read, lambda: lm.memories_for(named), done, self._failed(target))

    def _ask_forget(self, target: MemoryTarget, ids: list[str], known: dict[str, Memory]) -> None:
        lm = self.ctx.lm

        def asked(shared: bool) -> None:
            if not isinstance(target, QWidget) or alive(target):
                self._ask_forget_shared(target, ids, known, shared)

        submit_read(self.ctx.read, lambda: _any_shared(lm, ids), asked, self._failed(target))

    def _ask_forget_shared(
        self, target: MemoryTarget, ids: list[str], known: dict[str, Memory], shared: bool
    ) -> None:
        parent = target if isinstance(target, QWidget) else self._home
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Forget memories" if len(ids) > 1 else "Forget memory",
            forget_question(ids, known, shared),
            QMessageBox.StandardButton.Cancel,
            parent,
        )
        yes = box.addButton("Forget", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setEscapeButton(QMessageBox.StandardButton.Cancel)
        say = self._say(target)

        def finished() -> None:
            if box.clickedButton() is yes:
                ops.forget(self.ctx, ids, on_done=lambda c: say(f"Forgot {_count(len(ids))}"))

        self._open(box, finished, on_finished=True)

    def _open_supersede(
        self, target: MemoryTarget, ids: list[str], known: dict[str, Memory]
    ) -> None:
        old = known[ids[0]]
        parent = target if isinstance(target, QWidget) else self._home
        dlg = SupersedeDialog(self.ctx, old, parent)
        say = self._say(target)

        def accepted() -> None:
            by, text = dlg.choice()
            ops.supersede(
                self.ctx, old.id, by=by, with_text=None if by else text,
                on_done=lambda c: say("Superseded; undo puts it back"),
            )  # fmt: skip

        self._open(dlg, accepted)

    def _open_link(self, target: MemoryTarget, ids: list[str], known: dict[str, Memory]) -> None:
        source = known[ids[0]]
        parent = target if isinstance(target, QWidget) else self._home
        dlg = LinkDialog(self.ctx, source, parent)
        say = self._say(target)

        def accepted() -> None:
            choice = dlg.choice()
            if choice is not None:
                other, kind = choice
                ops.link(self.ctx, source.id, other, kind, on_done=lambda c: say("Linked"))

        self._open(dlg, accepted)

    def _open(self, dlg: QDialog, then: Callable[[], None], *, on_finished: bool = False) -> None:
        """Open a dialog window-modally without a nested event loop (``open``, not ``exec``)."""
        self._dialog = dlg
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def closed() -> None:
            if self._dialog is dlg:
                self._dialog = None

        if on_finished:
            dlg.finished.connect(lambda _: then())
        else:
            dlg.accepted.connect(then)
        dlg.finished.connect(lambda _: closed())
        dlg.open()


# -- the page ------------------------------------------------------------------------


class MemoriesPage(QWidget):
    """Search, filter, browse and change memories."""

    #: The first time the table painted rows with their data (first-paint benchmark).
    first_paint_done = Signal()
    #: A query's ids are in the table: how many.
    results_changed = Signal(int)
    #: The selection, or what is known of its rows, changed (the actions follow it).
    selection_changed = Signal()
    #: The Edit action's text on this page (the detail panel is its editor).
    edit_label = "Edit"

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._seq = 0
        self._query_running = False
        self._query_waiting = False
        self._pending_select: str | None = None
        self._widened = False
        self._sized = False

        self.model = MemoryTableModel(ctx.read, ctx.lm.memories_for, self)
        self.view = MemoryTableView(self)
        self.view.setModel(self.model)
        self.detail = MemoryDetailPanel(ctx, self)

        # -- search row
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search memories (words or meaning)…")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.installEventFilter(self)
        self.sort_combo = _combo(
            [(label, key) for key, label in SORTS],
            "Sort order (relevance needs a search; without one, newest first)",
            widest="Relevance (newest)",
        )
        self.count_label = QLabel()
        self.count_label.setProperty("role", "muted")
        top = QHBoxLayout()
        top.addWidget(self.search_box, 1)
        top.addWidget(QLabel("Sort"))
        top.addWidget(self.sort_combo)
        top.addWidget(self.count_label)

        # -- filter row
        self.type_filter = _combo(
            [("Any type", None), *((t.value, t.value) for t in MemoryType)], "Memory type"
        )
        self.status_filter = _combo(
            [("Active", MemoryStatus.ACTIVE.value), ("Archived", MemoryStatus.ARCHIVED.value),
             ("Superseded", MemoryStatus.SUPERSEDED.value), ("Any status", None)],
            "Status (archived and superseded memories leave searches)",
        )  # fmt: skip
        self.source_filter = _combo(
            [("Any source", None), *((s.value.replace("_", " "), s.value) for s in MemorySource)],
            "Where the memory came from",
        )
        self._projects: list[str] = []  # the known projects' keys, once listed
        self.project_filter = QComboBox()
        self.project_filter.setEditable(True)
        self.project_filter.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.project_filter.setMinimumContentsLength(12)
        line = self.project_filter.lineEdit()
        if line is not None:
            line.setPlaceholderText("Any project")
        self.project_filter.setToolTip("Only memories of this project (type or pick one)")
        self.pinned_filter = _combo(
            [("Pinned or not", None), ("Pinned", True), ("Not pinned", False)], "Pinned state"
        )
        self.date_from = _date_edit("Created on or after this day")
        self.date_to = _date_edit("Created on or before this day")
        self.reset_button = QPushButton("Reset")
        self.reset_button.setToolTip("Clear the search and every filter")
        self.reset_button.clicked.connect(self.reset_filters)
        filters = QHBoxLayout()
        for w in (self.type_filter, self.status_filter, self.source_filter, self.project_filter,
                  self.pinned_filter):  # fmt: skip
            filters.addWidget(w)
        filters.addWidget(QLabel("From"))
        filters.addWidget(self.date_from)
        filters.addWidget(QLabel("to"))
        filters.addWidget(self.date_to)
        filters.addWidget(self.reset_button)
        filters.addStretch(1)

        # -- actions, toolbar, status
        self.selection_actions = actions = SelectionActions(ctx, self)
        self.act_pin, self.act_archive, self.act_restore = (
            actions.pin,
            actions.archive,
            actions.restore,
        )
        self.act_supersede, self.act_edit, self.act_link = (
            actions.supersede,
            actions.edit,
            actions.link,
        )
        self.act_forget, self.act_copy, self.act_undo = actions.forget, actions.copy, actions.undo
        self.act_refresh, self.act_type = actions.refresh, actions.change_type
        self.toolbar = QToolBar()
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for a in (self.act_pin, self.act_archive, self.act_restore, self.act_supersede,
                  self.act_edit, self.act_type, self.act_link, self.act_copy, self.act_forget,
                  None, self.act_undo):  # fmt: skip
            if a is None:
                self.toolbar.addSeparator()
            else:
                self.toolbar.addAction(a)
        self.status_label = QLabel()
        self.status_label.setWordWrap(False)
        self._status_timer = QTimer(self)
        self._status_timer.setSingleShot(True)
        self._status_timer.timeout.connect(lambda: self.status_label.setText(""))

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.view)
        self.splitter.addWidget(self.detail)
        # A wider window widens the table (its Memory column), not the detail panel.
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 0)
        self.splitter.setChildrenCollapsible(False)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addLayout(filters)
        lay.addWidget(self.toolbar)
        lay.addWidget(self.splitter, 1)
        lay.addWidget(self.status_label)

        # -- timers and wiring
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._requery)
        # Captures may arrive in bursts: one id query per burst.
        self._changes_timer = QTimer(self)
        self._changes_timer.setSingleShot(True)
        self._changes_timer.setInterval(120)
        self._changes_timer.timeout.connect(lambda: self._requery(quiet=True))
        self._detail_timer = QTimer(self)
        self._detail_timer.setSingleShot(True)
        self._detail_timer.setInterval(60)  # holding an arrow key reads one detail, not fifty
        self._detail_timer.timeout.connect(self._show_current)

        self.search_box.textChanged.connect(lambda _: self._debounce.start())
        self.search_box.returnPressed.connect(self._search_now)
        self.project_filter.currentTextChanged.connect(lambda _: self._debounce.start())
        for box in (self.type_filter, self.status_filter, self.source_filter, self.pinned_filter,
                    self.sort_combo):  # fmt: skip
            box.currentIndexChanged.connect(lambda _: self._requery())
        for edit in (self.date_from, self.date_to):
            edit.dateChanged.connect(lambda _: self._requery())
        hh = self.view.horizontalHeader()
        hh.sectionClicked.connect(self._header_clicked)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.view.first_rows_painted.connect(self.first_paint_done)
        self.view.doubleClicked.connect(lambda _: self.detail.focus_editor())
        sel = self.view.selectionModel()
        sel.selectionChanged.connect(lambda *_: self.selection_changed.emit())
        sel.currentRowChanged.connect(lambda *_: self._detail_timer.start())
        self.model.rows_arrived.connect(self.selection_changed)
        self.model.fetch_failed.connect(self.show_error)
        self.detail.memory_activated.connect(self.select)
        ctx.hub.changed.connect(self._on_changed)
        ctx.hub.error.connect(self.show_error)

        self._update_sort_indicator()
        self.selection_changed.emit()
        self._load_projects()
        self._requery()

    # -- public API ------------------------------------------------------------------

    def focus_search(self) -> None:
        """Put the cursor in the search box, its text selected."""
        self.search_box.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search_box.selectAll()

    def set_query(self, text: str) -> None:
        """Search for ``text`` now (no debounce)."""
        self.search_box.setText(text)
        self._search_now()

    def select(self, memory_id: str) -> None:
        """Show a memory: select its row, or widen the filters until it is listed."""
        self._pending_select = None
        self.detail.show_memory(memory_id)
        row = self.model.row_of(memory_id)
        if row is not None:
            self._select_row(row)
            return
        self._pending_select, self._widened = memory_id, False
        if not self._query_running:
            self._widen()

    def actions(self) -> list[QAction]:  # type: ignore[override]
        """The browser's selection actions, for the main window's Edit menu (separators
        included). Once the window calls ``selection_actions.follow(tabs)`` they act on
        the tab on screen; alone, on this page."""
        return self.selection_actions.menu_actions()

    def selected_ids(self) -> list[str]:
        """The selected memories' ids, in row order."""
        out = []
        for r in self._selected_rows():
            mid = self.model.id_at(r)
            if mid is not None:
                out.append(mid)
        return out

    def current_filter(self) -> MemoryFilter:
        """The filter the controls describe."""
        mtype = self.type_filter.currentData()
        status = self.status_filter.currentData()
        source = self.source_filter.currentData()
        project = resolve_project(self.project_filter.currentText(), self._projects)
        after = before = None
        if self.date_from.date() > _ANY_DATE:
            after = _day_start(self.date_from.date())
        if self.date_to.date() > _ANY_DATE:
            before = _day_start(self.date_to.date()) + timedelta(days=1)  # the whole day
        return MemoryFilter(
            project=project or None,
            type=MemoryType(mtype) if mtype else None,
            status=MemoryStatus(status) if status else None,
            source=MemorySource(source) if source else None,
            pinned=self.pinned_filter.currentData(),
            created_after=after,
            created_before=before,
        )

    def current_sort(self) -> str:
        """The sort in effect: relevance needs a query; without one, newest first."""
        key = str(self.sort_combo.currentData())
        if key == "relevance" and not self.search_box.text().strip():
            return "created"
        return key

    def reset_filters(self) -> None:
        """Clear the search and every filter (one query, not one per control)."""
        self._set_controls(query="", status=MemoryStatus.ACTIVE.value)
        self._requery()

    @property
    def busy(self) -> bool:
        """Something is being read or about to be: a query (or a keystroke's debounce,
        a change's re-query), rows, or the detail of the current memory."""
        return (
            self._query_running
            or self._query_waiting
            or self._debounce.isActive()
            or self._changes_timer.isActive()
            or self._detail_timer.isActive()
            or self.model.busy
        )

    @property
    def dialog(self) -> QWidget | None:
        """The dialog an action opened and that is still open (tests drive it)."""
        return self.selection_actions.dialog

    # -- as a target of the selection actions (MemoryTarget) ----------------------------

    def selected_memory_ids(self) -> list[str]:
        return self.selected_ids()

    def selection_sample(self) -> tuple[int, list[Memory]]:
        # Runs after every batch of rows: with all 100,000 selected, look at a sample.
        n, rows = 0, list[int]()
        selection = self.view.selectionModel().selection()
        for i in range(selection.count()):
            rng = selection.at(i)
            n += rng.bottom() - rng.top() + 1
            rows.extend(range(rng.top(), min(rng.bottom() + 1, rng.top() + 500 - len(rows))))
        cached = [self.model.memory(self.model.id_at(r) or "") for r in rows[:500]]
        return n, [m for m in cached if m is not None]

    def cached_memory(self, memory_id: str) -> Memory | None:
        return self.model.memory(memory_id)

    def edit_selection(self) -> None:
        ids = self.selected_ids()
        if len(ids) == 1:
            self.detail.show_memory(ids[0])
            self.detail.focus_editor()

    def report(self, text: str, *, error: bool = False) -> None:
        self._status(text, error=error)

    def show_error(self, text: str) -> None:
        self._status(text, error=True)

    # -- querying ----------------------------------------------------------------------

    def _search_now(self) -> None:
        self._debounce.stop()
        self._requery()

    def _requery(self, *, quiet: bool = False) -> None:
        """Ask for the ids the search box and filters describe (newest request wins)."""
        self._debounce.stop()
        self._seq += 1
        if self._query_running:
            self._query_waiting = True  # run once the current one returns
            return
        seq, query = self._seq, self.search_box.text().strip()
        flt, sort, lm = self.current_filter(), self.current_sort(), self.ctx.lm
        self._query_running = True
        self._update_sort_indicator()
        if not quiet:
            self.count_label.setText("Searching…" if query else "Loading…")
        base = self.model.snapshot()  # the diff against it is planned off the UI thread
        # Rejected in Review and waiting for their erase (Ctrl+Z can still bring them
        # back): not shown here either.
        held = frozenset(self.ctx.held_ids())

        def work() -> tuple[list[SearchHit] | None, IdPlan]:
            if query:
                found = lm.search(query, flt, limit=SEARCH_LIMIT, record_access=False)
                # A person scrolls this list: what the search found worth showing, not
                # every memory sharing one word with a question (see lexmem.api.listed).
                hits = _sorted_hits(listed(found.hits, query), sort)
                hits = [h for h in hits if h.memory.id not in held]
                return hits, plan_ids(base, [h.memory.id for h in hits])
            ids = lm.list_ids(flt, sort=sort)
            return None, plan_ids(base, [i for i in ids if i not in held] if held else ids)

        if not submit_read(
            self.ctx.read,
            work,
            lambda result: self._arrived(seq, *result, query=query),
            lambda exc: self._query_failed(seq, exc),
        ):
            self._query_running = False

    def _finish_query(self) -> bool:
        """A query returned; True when a newer one waited (this answer is then stale)."""
        self._query_running = False
        if self._query_waiting:
            self._query_waiting = False
            self._requery(quiet=True)
            return True
        return False

    def _query_failed(self, seq: int, exc: BaseException) -> None:
        if not alive(self) or self._finish_query() or seq != self._seq:
            return
        self.count_label.setText("")
        self.show_error(str(exc))

    def _arrived(
        self, seq: int, hits: list[SearchHit] | None, plan: IdPlan, *, query: str = ""
    ) -> None:
        """A query's answer: ``hits`` for a search (None for a plain list), the plan
        that turns the table's ids into the answer's, and the words searched."""
        if not alive(self) or self._finish_query() or seq != self._seq:
            return  # stale: an older keystroke's answer
        if hits is not None:
            self.model.set_ids(
                plan.ids,
                memories=[h.memory for h in hits],
                scores={h.memory.id: h.score for h in hits},
                plan=plan,
                query=query,
            )
            self.detail.set_query(query)
            n = len(hits)
            more = " (the best)" if n >= SEARCH_LIMIT else ""
            self.count_label.setText(f"{n:,} match{'es' if n != 1 else ''}{more}")
        else:
            self.model.set_ids(plan.ids, plan=plan)
            self.detail.set_query("")
            n = len(plan.ids)
            self.count_label.setText(f"{n:,} memor{'ies' if n != 1 else 'y'}")
        self._after_ids()
        self.results_changed.emit(n)

    def _after_ids(self) -> None:
        pending = self._pending_select
        if pending is not None:
            row = self.model.row_of(pending)
            if row is not None:
                self._pending_select = None
                self._select_row(row)
            elif not self._widened:
                self._widen()
            else:
                self._pending_select = None
                self._status(f"Memory {pending[:8]} is not in the store.", error=True)
        else:
            self._keep_detail_in_step()
        self.selection_changed.emit()

    def _keep_detail_in_step(self) -> None:
        """The detail panel shows the selected memory or nothing: after the list changed
        under it (an archive, a restore, a forget), a memory that left the list gives way
        to the row now current, and one still listed is selected again."""
        shown = self.detail.memory_id
        sel = self.view.selectionModel()
        if shown is None or sel.hasSelection():
            return
        row = self.model.row_of(shown)
        if row is None:
            current = sel.currentIndex()
            row = current.row() if current.isValid() else None
        if row is None:
            self.detail.show_memory(None)
        else:
            self._select_row(row)

    def _widen(self) -> None:
        """The memory to show is filtered out: list every memory, of any status."""
        self._widened = True
        self._set_controls(query="", status=None)
        self._status("Search and filters cleared to show that memory")
        self._requery()

    def _set_controls(self, *, query: str, status: str | None) -> None:
        widgets = (
            self.search_box, self.type_filter, self.status_filter, self.source_filter,
            self.project_filter, self.pinned_filter, self.date_from, self.date_to,
        )  # fmt: skip
        for w in widgets:
            w.blockSignals(True)
        try:
            self.search_box.setText(query)
            self.type_filter.setCurrentIndex(0)
            self.status_filter.setCurrentIndex(self.status_filter.findData(status))
            self.source_filter.setCurrentIndex(0)
            self.project_filter.setCurrentIndex(-1)
            self.project_filter.setEditText("")
            self.pinned_filter.setCurrentIndex(0)
            self.date_from.setDate(_ANY_DATE)
            self.date_to.setDate(_ANY_DATE)
        finally:
            for w in widgets:
                w.blockSignals(False)
        self._debounce.stop()

    def _load_projects(self) -> None:
        lm = self.ctx.lm

        def work() -> tuple[list[str], dict[str, str]]:
            return lm.projects(), lm.shared_projects()

        # A missing project list only leaves the combo without suggestions.
        submit_read(self.ctx.read, work, self._show_projects, lambda exc: None)

    def _show_projects(self, found: tuple[list[str], dict[str, str]]) -> None:
        if not alive(self):
            return
        projects, shared = found
        box = self.project_filter
        text = box.currentText()
        self._projects = projects
        self.model.set_project_labels(project_labels(projects))
        self.model.set_shared(shared)
        box.blockSignals(True)
        try:
            box.clear()
            # The names the table shows; each item's tooltip is the project it stands for.
            for key, label in project_choices(projects):
                box.addItem(label, key)
                box.setItemData(box.count() - 1, key, Qt.ItemDataRole.ToolTipRole)
            box.setCurrentIndex(-1)
            box.setEditText(text)
        finally:
            box.blockSignals(False)

    # -- changes -------------------------------------------------------------------------

    def _on_changed(self, changes: UiChanges) -> None:
        m = changes.memories
        if m.updated:
            self.model.mark_stale(m.updated)  # re-read in place, old row shown meanwhile
        if m.created or m.deleted or m.updated or m.counts:
            # Membership or order may have changed (a new capture, an archived row under
            # the "active" filter, a new salience): re-query ids, applied as a diff.
            self._changes_timer.start()
        if m.created or m.deleted:
            self._load_projects()

    # -- selection -------------------------------------------------------------------------

    def _selected_rows(self) -> list[int]:
        rows: set[int] = set()
        selection = self.view.selectionModel().selection()
        for i in range(selection.count()):
            rng = selection.at(i)
            rows.update(range(rng.top(), rng.bottom() + 1))
        return sorted(rows)

    def _select_row(self, row: int) -> None:
        index = self.model.index(row, 0)
        flags = (
            QItemSelectionModel.SelectionFlag.ClearAndSelect
            | QItemSelectionModel.SelectionFlag.Rows
        )
        self.view.selectionModel().setCurrentIndex(index, flags)
        self.view.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)
        self._detail_timer.stop()
        self._show_current()

    def _show_current(self) -> None:
        index = self.view.selectionModel().currentIndex()
        mid = self.model.id_at(index.row()) if index.isValid() else None
        if mid is not None:
            self.detail.show_memory(mid)

    def refresh(self) -> None:
        """Read the ids and every shown row again."""
        self.model.invalidate()
        self._load_projects()
        self.detail.reload()
        self._requery()

    # -- small things ------------------------------------------------------------------

    def _status(self, text: str, *, error: bool = False) -> None:
        if not alive(self):
            return  # an operation finished after the page closed (the app quitting)
        self.status_label.setText(text)
        self.status_label.setProperty("role", "" if error else "muted")
        # An error in red, readable on both themes; information in the muted colour.
        self.status_label.setStyleSheet("color: #e03131;" if error else "")
        self.status_label.style().unpolish(self.status_label)
        self.status_label.style().polish(self.status_label)
        self._status_timer.start(15_000 if error else 6_000)

    def _header_clicked(self, section: int) -> None:
        key = SORTABLE_COLUMNS.get(section)
        if key is not None:
            self.sort_combo.setCurrentIndex(self.sort_combo.findData(key))
        # The header flips its own indicator on a click; put back the sort in effect.
        QTimer.singleShot(0, self._update_sort_indicator)

    def _update_sort_indicator(self) -> None:
        sort = self.current_sort()
        # Relevance needs a query: without one the list is newest first, and says so.
        i = self.sort_combo.findData("relevance")
        searching = bool(self.search_box.text().strip())
        self.sort_combo.setItemText(i, "Relevance" if searching else "Relevance (newest)")
        self.sort_combo.setItemData(
            i,
            "The search's own order" if searching else "Newest first until you search",
            Qt.ItemDataRole.ToolTipRole,
        )
        hh = self.view.horizontalHeader()
        section = next((i for i, k in SORTABLE_COLUMNS.items() if k == sort), -1)
        hh.setSortIndicator(section, Qt.SortOrder.DescendingOrder)

    def _context_menu(self, pos: QPoint) -> None:
        if not self.view.indexAt(pos).isValid():
            return
        menu = QMenu(self)
        for a in (self.act_pin, self.act_archive, self.act_restore, self.act_supersede,
                  self.act_edit, self.act_type, self.act_link, None, self.act_copy,
                  self.act_forget, None, self.act_undo):  # fmt: skip
            if a is None:
                menu.addSeparator()
            else:
                menu.addAction(a)
        menu.popup(self.view.viewport().mapToGlobal(pos))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._sized:  # the first time only: later the person's split stands
            self._sized = True
            width = max(self.splitter.width(), 600)
            detail = min(DETAIL_WIDTH, int(width * 0.36))
            self.splitter.setSizes([width - detail, detail])

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # Down from the search box goes to the results, as in a launcher.
        if watched is self.search_box and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            if event.key() == Qt.Key.Key_Down and self.model.rowCount():
                self.view.setFocus(Qt.FocusReason.OtherFocusReason)
                if not self.view.selectionModel().hasSelection():
                    self._select_row(0)
                return True
        return super().eventFilter(watched, event)


def _sorted_hits(hits: list[SearchHit], sort: str) -> list[SearchHit]:
    """A search's hits in its own order (relevance) or by one of the store's sorts."""
    keys: dict[str, Callable[[SearchHit], Any]] = {
        "salience": lambda h: h.memory.salience,
        "created": lambda h: h.memory.created_at,
        "accessed": lambda h: h.memory.last_accessed_at,
    }
    key = keys.get(sort)
    return sorted(hits, key=key, reverse=True) if key is not None else list(hits)


def _count(n: int) -> str:
    return "1 memory" if n == 1 else f"{n} memories"
