"""The browser's other tabs: review, audit log, sessions and insights.

Every panel follows the same few rules (STYLE.md 2-6):

- reads run through :meth:`AppContext.read`, off the UI thread, and a result that a
  newer request has overtaken is dropped rather than drawn;
- changes go through :mod:`ui.ops` only; widgets never touch the store;
- :attr:`Hub.changed` names what changed, and a panel reloads only when that touches
  it. A hidden panel notes it is stale and reloads when shown (the review panel
  always reloads: its count feeds the tray badge);
- tables keep their rows and update them in place (rows that left removed, new ones
  inserted), so a capture arriving does not reset the selection or the scroll.

Each panel has ``refresh()`` and a ``refreshed`` signal, emitted once new data is on
screen (the lead's tab titles and the tests wait on it).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from functools import cache
from typing import Any, Generic, TypeVar

from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QAction,
    QColor,
    QFont,
    QIcon,
    QKeySequence,
    QPainter,
    QPixmap,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from lexmem.api import AuditEntry, MemoryFilter, Session, project_labels, project_name
from lexmem.models import Changes, Memory, MemorySource, MemoryStatus, MemoryType

from . import ops
from .charts import HorizontalBarChart, Series, StackedBarChart
from .context import AppContext, UiChanges, UndoEntry
from .detail import AGENT_NAMES
from .theme import TYPE_COLOURS, series_colour

__all__ = ["AuditPanel", "InsightsPanel", "ReviewPanel", "SessionsPanel"]

T = TypeVar("T")
Role = Qt.ItemDataRole
Index = QModelIndex | QPersistentModelIndex

# Colours for audit decisions and session states: mid tones that read on light and dark.
_DECISION_COLOURS = {
    "saved": "#12b886", "skipped": "#f59f00", "reinforced": "#4c6ef5",
    "failed": "#e64980", "quarantined": "#e64980", "applied": "#868e96",
}  # fmt: skip
_STATUS_COLOURS = {"active": "#12b886", "completed": "#4c6ef5", "abandoned": "#f59f00"}


# -- small helpers ---------------------------------------------------------------------


def _local(dt: datetime) -> datetime:
    """A stored (UTC) time on the person's clock."""
    return dt.astimezone()


def _when(dt: datetime | None) -> str:
    return _local(dt).strftime("%Y-%m-%d %H:%M") if dt else ""


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return "<1 min"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} days"


def _one_line(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


#: Markdown's markup at a line's start: headings, quotes, list bullets.
_MD_LINE = re.compile(r"^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+(?:\[[ xX]\]\s+)?)", re.MULTILINE)


def _read_as_text(text: str) -> str:
    """A watched note's Markdown as a person reads it in one line: "Work journal: Redis
    queue. …" rather than "# Work journal ## Redis queue …" (headings end with a colon)."""
    lines = []
    for line in text.splitlines():
        bare = _MD_LINE.sub("", line).replace("**", "").replace("__", "").strip()
        if bare and re.match(r"^\s{0,3}#{1,6}\s", line) and not bare.endswith((":", ".")):
            bare += ":"
        lines.append(bare)
    return "\n".join(lines)


def _wrapped(text: str, width: int = 90, lines: int = 24) -> str:
    """A plain-text tooltip: Qt wraps only rich text, so wrap here (and cap the height)."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out.extend(textwrap.wrap(para, width) or [""])
    return "\n".join(out[:lines] + (["…"] if len(out) > lines else []))


# Widest usual values, to size columns by (measured in the table's font).
_WHEN_SAMPLE = "2026-12-31 23:59"
_PROJECT_SAMPLE = "payments-service"
_SHORT_ID = 8  # a session id's first characters: enough to tell sessions apart


def _words(name: str) -> str:
    return name.replace("_", " ")


@cache
def _dot(colour: str) -> QIcon:
    """A small filled circle: the type or status colour beside its name."""
    pm = QPixmap(12, 12)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(colour))
    p.drawEllipse(2, 2, 8, 8)
    p.end()
    return QIcon(pm)


def _label(text: str, role: str = "") -> QLabel:
    label = QLabel(text)
    if role:
        label.setProperty("role", role)  # the theme's style sheet styles heading/muted
    return label


def _fit(box: QComboBox) -> QComboBox:
    """Room for the widest item. Constraint: the theme's sheet pads a combo box's text, and
    the size Qt works out from the items leaves that padding out ("Last 30 day")."""
    box.setMinimumWidth(box.sizeHint().width() + _COMBO_PADDING)
    return box


_COMBO_PADDING = 10  # the sheet's 3 px either side, and a little air


def _empty_label(text: str) -> QLabel:
    label = _label(text, "muted")
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    return label


_DOT_ROOM = 20  # a column whose cells start with a coloured dot: its icon and gap
_CELL_ROOM = 22  # the item's padding (the sheet below) and the frame around the text


def _table(
    model: QAbstractTableModel, stretch: int, samples: Sequence[str], *, dotted: Iterable[int] = ()
) -> QTableView:
    """A read-only table whose ``stretch`` column takes the width the others leave.

    Constraint: no column is sized to its contents. ResizeToContents asks every row for
    its size hint each time rows arrive (a second per thousand rows on the UI thread);
    each column instead gets the width of ``samples[col]``, its widest usual value, or of
    its header, measured in the table's font; the person can still drag it wider.
    """
    view = QTableView()
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.setShowGrid(False)
    view.setTextElideMode(Qt.TextElideMode.ElideRight)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 10)
    view.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
    header = view.horizontalHeader()
    header.setHighlightSections(False)
    header.setStretchLastSection(False)
    header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    fm, hfm, dots = view.fontMetrics(), header.fontMetrics(), set(dotted)
    for col, sample in enumerate(samples):
        if col == stretch:
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Stretch)
            continue
        header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
        title = str(model.headerData(col, Qt.Orientation.Horizontal))
        width = fm.horizontalAdvance(sample) + (_DOT_ROOM if col in dots else 0)
        view.setColumnWidth(col, max(width, hfm.horizontalAdvance(title)) + _CELL_ROOM)
    view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    # Room between columns (the theme's sheet sets none).
    view.setStyleSheet("QTableView::item { padding: 0px 10px 0px 4px; }")
    return view


class _Rows(QAbstractTableModel, Generic[T]):
    """A small keyed table model: rows are values, ``cell`` says what each shows.

    :meth:`set_rows` updates in place (removals, then insertions, then a data refresh)
    rather than resetting, so selection and scroll survive a reload; only a changed
    order (which these panels rarely see) resets.
    """

    def __init__(
        self,
        headers: Sequence[str],
        key: Callable[[T], str],
        cell: Callable[[T, int, int], Any],
    ) -> None:
        super().__init__()
        self._headers = list(headers)
        self._key = key
        self._cell = cell
        self._rows: list[T] = []
        self._where: dict[str, int] | None = None  # key -> row, built when first asked

    # Qt's interface ---------------------------------------------------------------

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._headers)

    def data(self, index: Index, role: int = Role.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        return self._cell(self._rows[index.row()], index.column(), role)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Role.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Role.DisplayRole:
            return self._headers[section]
        return None

    # rows -------------------------------------------------------------------------

    def rows(self) -> list[T]:
        return list(self._rows)

    def row(self, i: int) -> T:
        return self._rows[i]

    def keys(self) -> list[str]:
        return [self._key(r) for r in self._rows]

    def find(self, key: str) -> int:
        if self._where is None:
            self._where = {self._key(r): i for i, r in enumerate(self._rows)}
        return self._where.get(key, -1)

    def set_rows(self, rows: Iterable[T]) -> None:
        """Rows that left go and new ones come in runs (one notification per run, not
        per row: a first load of a thousand rows is one insertion)."""
        new = list(rows)
        new_keys = [self._key(r) for r in new]
        wanted = set(new_keys)
        root = QModelIndex()
        self._where = None
        i = len(self._rows) - 1
        while i >= 0:
            if self._key(self._rows[i]) in wanted:
                i -= 1
                continue
            first = i
            while first > 0 and self._key(self._rows[first - 1]) not in wanted:
                first -= 1
            self.beginRemoveRows(root, first, i)
            del self._rows[first : i + 1]
            self.endRemoveRows()
            self._where = None
            i = first - 1
        kept = [self._key(r) for r in self._rows]
        present = set(kept)
        if [k for k in new_keys if k in present] != kept:
            self.beginResetModel()
            self._rows = new
            self._where = None
            self.endResetModel()
            return
        i = 0
        while i < len(new):
            if i < len(self._rows) and self._key(self._rows[i]) == new_keys[i]:
                i += 1
                continue
            end = i
            while end < len(new) and new_keys[end] not in present:
                end += 1
            self.beginInsertRows(root, i, end - 1)
            self._rows[i:i] = new[i:end]
            self.endInsertRows()
            self._where = None
            i = end
        self._rows = new  # the same keys in the same order; values may be newer
        self._where = None
        if new:
            last = self.index(len(new) - 1, len(self._headers) - 1)
            self.dataChanged.emit(self.index(0, 0), last)


def _selected_rows(view: QTableView) -> list[int]:
    model = view.selectionModel()
    return sorted({i.row() for i in model.selectedRows()}) if model else []


def _select_row(view: QTableView, row: int) -> None:
    model = view.model()
    sel = view.selectionModel()
    if model is None or sel is None or not 0 <= row < model.rowCount():
        return
    flags = (
        QItemSelectionModel.SelectionFlag.ClearAndSelect
        | QItemSelectionModel.SelectionFlag.Rows
        | QItemSelectionModel.SelectionFlag.Current
    )
    sel.setCurrentIndex(model.index(row, 0), flags)


# -- the shared panel behaviour -------------------------------------------------------------


class _Panel(QWidget):
    """Stale-result dropping, deferred reloads while hidden, one place errors surface."""

    refreshed = Signal()

    #: Whether a change shows in this panel (each panel says which flags matter).
    concerns: Callable[[UiChanges], bool]
    #: Reload the panel's content (each panel its own, off the UI thread).
    _load: Callable[[], None]

    def __init__(self, ctx: AppContext, parent: QWidget | None = None, *, eager: bool) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._eager = eager  # reload even while hidden
        self._dirty = True
        self._generation: dict[str, int] = {}
        self.status = _label("", "muted")
        self.status.setWordWrap(True)
        self.status.hide()
        # What the last action did, kept across the reload it causes for a while.
        self._notice = ""
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.timeout.connect(lambda: self.report(""))
        ctx.hub.changed.connect(self._on_changed)

    def refresh(self) -> None:
        """Reload now, whether shown or not."""
        self._dirty = False
        self._load()

    def report(self, text: str, *, error: bool = False) -> None:
        """One line under the panel: what an action did here. It stays through the
        reloads the action causes, and goes after :data:`NOTICE_MS`."""
        self._notice = text
        if text:
            self._notice_timer.start(NOTICE_MS)
        self._say(text)

    def _on_changed(self, changes: UiChanges) -> None:
        if not self.concerns(changes):
            return
        if self._eager or self.isVisible():
            self.refresh()
        else:
            self._dirty = True

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._dirty:
            self.refresh()

    def _read(self, channel: str, fn: Callable[[], Any], apply: Callable[[Any], None]) -> None:
        """Read off the UI thread; only the newest request of ``channel`` is drawn."""
        generation = self._generation.get(channel, 0) + 1
        self._generation[channel] = generation

        def current() -> bool:
            # Constraint: a result may land after the widget was closed and deleted.
            return isValid(self) and self._generation.get(channel) == generation

        def done(result: Any) -> None:
            if current():
                self._say(self._notice)
                apply(result)

        def failed(exc: BaseException) -> None:
            if current():
                self._say(f"Could not load: {exc}")
                self.ctx.hub.error.emit(str(exc))

        self.ctx.read(fn, on_done=done, on_error=failed)

    def _say(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))


NOTICE_MS = 8_000  # how long what an action did stays under its panel


def _how_many(n: int) -> str:
    return "1 memory" if n == 1 else f"{n} memories"


def _undo_key() -> str:
    """Undo's shortcut as this system writes it (Ctrl+Z, ⌘Z)."""
    return QKeySequence(QKeySequence.StandardKey.Undo).toString(
        QKeySequence.SequenceFormat.NativeText
    )


def _seconds(ctx: AppContext) -> int:
    return round(ctx.undo_window_ms / 1000)


# -- review ---------------------------------------------------------------------------------


class _EditDialog(QDialog):
    """Edit a captured memory's text (and type) before accepting it."""

    def __init__(self, memory: Memory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.memory_id = memory.id
        self.setWindowTitle("Edit, then accept")
        self.content_edit = QPlainTextEdit(memory.content)
        self.content_edit.setMinimumSize(460, 160)
        self.type_box = QComboBox()
        for t in MemoryType:
            self.type_box.addItem(_dot(TYPE_COLOURS.get(t.value, "#868e96")), t.value, t.value)
        self.type_box.setCurrentIndex(max(0, self.type_box.findData(str(memory.type))))
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Save and accept")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.content_edit.textChanged.connect(
            lambda: ok.setEnabled(bool(self.content_edit.toPlainText().strip()))
        )
        form = QFormLayout(self)
        form.addRow("Memory", self.content_edit)
        form.addRow("Type", self.type_box)
        form.addRow(buttons)

    def content(self) -> str:
        return self.content_edit.toPlainText().strip()

    def mtype(self) -> str:
        return str(self.type_box.currentData())


class ReviewPanel(_Panel):
    """Memories captured automatically and not reviewed yet, newest first.

    Accept keeps a memory; reject erases it (as Forget does) and teaches capture not
    to keep the same again; edit-then-accept corrects it first; pin keeps it at the top of its
    project's digest. Every action works on the selection (or one row from the
    context menu); "Accept all"/"Reject all" act on the whole queue, and "Reject all"
    asks first, naming how many. The Edit menu's actions act on this selection while
    the tab is on screen (it is a :class:`ui.browser.MemoryTarget`).

    The panel opens with its first row selected, and a decision selects the next one, so
    A and R decide one memory after another. A reject leaves the queue at once but is
    erased only when its undo window closes (:func:`ui.ops.reject`): the line under the
    table counts down, and Ctrl+Z (the Edit menu's Undo, which always undoes the last
    action) brings the memory back, selected, still waiting.
    """

    #: The number of memories waiting, each time it is known (tray badge, tab title).
    count_changed = Signal(int)
    #: The selection, or what is known of its rows, changed (the Edit menu follows it).
    selection_changed = Signal()
    #: The Edit action's text on this tab: editing here accepts too.
    edit_label = "Edit, then accept…"

    COLUMNS = ("Content", "Type", "Source", "Project", "Confidence", "Created")
    SHOWN = 500  # rows fetched; the count covers the whole queue
    EMPTY = "Nothing to review — automatically captured memories appear here"

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent, eager=True)
        self._labels: dict[str, str] = {}  # project key -> its label (lexmem.projects)
        self._queue: list[str] = []
        self._count: int | None = None
        self._pending: set[str] = set()  # sent to review: hidden until the write settles
        self._reveal: set[str] = set()  # brought back by an undo: selected once reloaded
        self._want_focus = False  # shown, and the table not focused yet
        self._watched_windows: list[QWidget] = []
        self._loaded = False
        # The last reject made here while its undo window is open, and how it is named.
        self._held_entry: UndoEntry | None = None
        self._held_what = ""
        self._countdown = QTimer(self)
        self._countdown.setInterval(1000)
        self._countdown.timeout.connect(self._tick)
        ctx.hub.restored.connect(self._on_restored)
        self.editor: _EditDialog | None = None
        self.dialog: QMessageBox | None = None  # the open "Reject all?" question
        bold = QFont()
        bold.setBold(True)
        self._bold = bold

        self.model: _Rows[Memory] = _Rows(self.COLUMNS, lambda m: m.id, self._cell)
        self.view = _table(
            self.model, 0, ("", "procedural", "search confirmation", _PROJECT_SAMPLE, "0.00",
                            _WHEN_SAMPLE), dotted=[1],
        )  # fmt: skip
        self.view.doubleClicked.connect(lambda _i: self.edit_selected())
        self.view.customContextMenuRequested.connect(self._menu)

        self.heading = _label("To review", "heading")
        self.summary = _label("", "muted")
        self.accept_button = QPushButton("Accept")
        self.edit_button = QPushButton("Edit…")
        self.reject_button = QPushButton("Reject")
        self.pin_button = QPushButton("Pin")
        self.accept_all_button = QPushButton("Accept all")
        self.reject_all_button = QPushButton("Reject all")
        self.accept_button.setToolTip("Keep the selected memories (A)")
        self.edit_button.setToolTip("Correct the memory, then keep it (E)")
        self.reject_button.setToolTip(
            "Erase the selected memories; capture will not keep the same again (R). "
            f"{_undo_key()} brings them back for {_seconds(ctx)} s"
        )
        self.pin_button.setToolTip("Pin: first in its project's digest, never decays (P)")
        self.accept_button.clicked.connect(self.accept_selected)
        self.edit_button.clicked.connect(self.edit_selected)
        self.reject_button.clicked.connect(self.reject_selected)
        self.pin_button.clicked.connect(self.pin_selected)
        self.accept_all_button.clicked.connect(self.accept_all)
        self.reject_all_button.clicked.connect(self.reject_all)
        for text, key, slot in (
            ("Accept", "A", self.accept_selected), ("Edit, then accept", "E", self.edit_selected),
            ("Reject", "R", self.reject_selected), ("Pin", "P", self.pin_selected),
        ):  # fmt: skip
            action = QAction(text, self.view)
            action.setShortcut(QKeySequence(key))
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            action.triggered.connect(slot)
            self.view.addAction(action)

        self.empty = _empty_label(self.EMPTY)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.view)

        top = QHBoxLayout()
        top.addWidget(self.heading)
        top.addWidget(self.summary, 1)
        bar = QHBoxLayout()
        for b in (self.accept_button, self.edit_button, self.reject_button, self.pin_button):
            bar.addWidget(b)
        bar.addStretch(1)
        bar.addWidget(self.accept_all_button)
        bar.addWidget(self.reject_all_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.status)

        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self._update_buttons()
        self.refresh()

    # -- what the lead and tests read ------------------------------------------------------

    @property
    def count(self) -> int | None:
        """Memories waiting for review (``None`` until first loaded)."""
        return self._count

    def ids(self) -> list[str]:
        """The ids shown, newest first."""
        return self.model.keys()

    def selected_ids(self) -> list[str]:
        return [self.model.row(r).id for r in _selected_rows(self.view)]

    # -- as a target of the Edit menu's actions (ui.browser.MemoryTarget) --------------

    def selected_memory_ids(self) -> list[str]:
        hidden = self._hidden()
        return [i for i in self.selected_ids() if i not in hidden]

    def selection_sample(self) -> tuple[int, list[Memory]]:
        rows = [self.model.row(r) for r in _selected_rows(self.view)]
        hidden = self._hidden()
        rows = [m for m in rows if m.id not in hidden]
        return len(rows), rows

    def cached_memory(self, memory_id: str) -> Memory | None:
        row = self.model.find(memory_id)
        return self.model.row(row) if row >= 0 else None

    def edit_selection(self) -> None:
        self.edit_selected()

    def select(self, ids: Iterable[str]) -> None:
        """Select these rows (the rest are deselected); the first is the current row."""
        sel = self.view.selectionModel()
        sel.clearSelection()
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        rows = [r for r in (self.model.find(mid) for mid in ids) if r >= 0]
        for row in rows:
            sel.select(self.model.index(row, 0), flags)
        if rows:
            sel.setCurrentIndex(
                self.model.index(min(rows), 0), QItemSelectionModel.SelectionFlag.NoUpdate
            )

    # -- loading ----------------------------------------------------------------------------

    def concerns(self, changes: UiChanges) -> bool:
        return changes.review or bool(changes.memories)

    def _load(self) -> None:
        lm = self.ctx.lm

        def fetch() -> tuple[list[str], list[Memory], dict[str, str]]:
            ids = lm.review_queue()
            return ids, lm.memories_for(ids[: self.SHOWN]), project_labels(lm.projects())

        self._read("queue", fetch, self._apply)

    def _hidden(self) -> set[str]:
        """Decided and not to be shown: sent to review, or rejected and held for undo."""
        return self._pending | self.ctx.held_ids()

    def _apply(self, result: tuple[list[str], list[Memory], dict[str, str]]) -> None:
        self._queue, memories, self._labels = result
        hidden = self._hidden()
        had_rows = self.model.rowCount() > 0
        self.model.set_rows(m for m in memories if m.id not in hidden)
        reveal = [m.id for m in self.model.rows() if m.id in self._reveal]
        if reveal:  # an undo brought these back: they are what the person looks at
            self._reveal.difference_update(reveal)
            self.select(reveal)
            self.view.scrollTo(self.model.index(self.model.find(reveal[0]), 0))
        elif not _selected_rows(self.view) and (not self._loaded or not had_rows):
            _select_row(self.view, 0)  # ready for A and R at once
        self._loaded = True
        self._counted()
        self.refreshed.emit()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.model.rowCount() and not _selected_rows(self.view):
            _select_row(self.view, 0)
        # Opened (its tab clicked, the tray's "Review" chosen): the keys work at once.
        # Constraint: a window still becoming active gives the focus to its first widget
        # when it gets there, after this; the focus is taken again then.
        self._want_focus = True
        window = self.window()
        if window is not self and window not in self._watched_windows:
            self._watched_windows.append(window)
            window.installEventFilter(self)
        QTimer.singleShot(0, self._take_focus)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.WindowActivate and self._want_focus:
            QTimer.singleShot(0, self._take_focus)
        return False

    def _take_focus(self) -> None:
        if not isValid(self) or not self.isVisible():
            return
        if self.window().isActiveWindow():
            self._want_focus = False
        focus = QApplication.focusWidget()
        if focus is None or not self.isAncestorOf(focus):
            self.view.setFocus(Qt.FocusReason.OtherFocusReason)

    def _counted(self) -> None:
        """The count as the person sees it: what is waiting, less what was just decided."""
        hidden = self._hidden()
        self._count = sum(1 for i in self._queue if i not in hidden)
        n = self._count
        if n == 0:
            self.summary.setText("")
        elif n > self.model.rowCount():
            self.summary.setText(f"{n} memories waiting (the newest {self.model.rowCount()} shown)")
        else:
            self.summary.setText("1 memory waiting" if n == 1 else f"{n} memories waiting")
        self.stack.setCurrentWidget(self.view if self.model.rowCount() else self.empty)
        self._update_buttons()
        self.count_changed.emit(n)

    def _cell(self, m: Memory, col: int, role: int) -> Any:
        if role == Role.DisplayRole:
            values = (
                _one_line(_read_as_text(m.content)), str(m.type), _words(str(m.source)),
                self._labels.get(m.project or "") or project_name(m.project),
                f"{m.confidence:.2f}", _when(m.created_at),
            )  # fmt: skip
            return values[col]
        if role == Role.ToolTipRole:
            if col == 0:
                return _wrapped(m.content) + ("\n\n(pinned)" if m.pinned else "")
            if col == 3:
                return m.project or "no project"
            if col == 5:
                return _local(m.created_at).isoformat(timespec="seconds")
            return None
        if role == Role.DecorationRole and col == 1:
            return _dot(TYPE_COLOURS.get(str(m.type), "#868e96"))
        if role == Role.FontRole and col == 0 and m.pinned:
            return self._bold
        if role == Role.TextAlignmentRole and col == 4:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    # -- actions ----------------------------------------------------------------------------

    def accept(self, ids: Sequence[str]) -> None:
        self._decide(ids, "accepted")

    def reject(self, ids: Sequence[str]) -> None:
        self._decide(ids, "rejected")

    def accept_selected(self) -> None:
        self.accept(self.selected_ids())

    def reject_selected(self) -> None:
        self.reject(self.selected_ids())

    def accept_all(self) -> None:
        hidden = self._hidden()
        self.accept([i for i in self._queue if i not in hidden])

    def reject_all(self) -> None:
        """Ask, naming how many, then reject every memory waiting (those asked about:
        one captured while the question is open is not rejected unasked)."""
        hidden = self._hidden()
        ids = [i for i in self._queue if i not in hidden]
        if not ids:
            return
        n = len(ids)
        what = "the memory" if n == 1 else f"all {n} memories"
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Reject all",
            f"Reject {what} waiting for review?\n\n"
            "Rejected memories are deleted, and capture will not keep the same again. "
            f"{_undo_key()} brings them back for the next {_seconds(self.ctx)} s.",
            QMessageBox.StandardButton.Cancel,
            self,
        )
        yes = box.addButton(f"Reject {n}", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setEscapeButton(QMessageBox.StandardButton.Cancel)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def finished(_result: int) -> None:
            if self.dialog is box:
                self.dialog = None
            if box.clickedButton() is yes:
                self.reject(ids)

        box.finished.connect(finished)
        self.dialog = box
        box.open()  # window-modal, and the event loop keeps running

    def pin_selected(self) -> None:
        rows = [self.model.row(r) for r in _selected_rows(self.view)]
        if rows:
            ops.pin(self.ctx, [m.id for m in rows], not all(m.pinned for m in rows))

    def edit_selected(self) -> _EditDialog | None:
        """Open the editor on the current row; saving it edits, then accepts."""
        rows = _selected_rows(self.view)
        current = self.view.currentIndex()
        row = current.row() if current.isValid() and current.row() in rows else None
        if row is None:
            row = rows[0] if rows else None
        if row is None:
            return None
        memory = self.model.row(row)
        if memory.id in self._hidden():
            return None
        dialog = _EditDialog(memory, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(
            lambda: self.edit_and_accept(dialog.memory_id, dialog.content(), dialog.mtype())
        )
        self.editor = dialog
        dialog.open()  # window-modal, and the event loop keeps running
        return dialog

    def edit_and_accept(self, memory_id: str, content: str, mtype: str | None = None) -> None:
        """Change the memory, then accept it (one action, one undo); a failed edit
        accepts nothing."""
        ids = [memory_id]
        self._pending.update(ids)
        self._hide(ids)
        ops.edit_and_accept(
            self.ctx, memory_id, content=content, mtype=mtype,
            on_done=lambda _c: self._settle(ids), on_error=lambda _e: self._settle(ids, True),
        )  # fmt: skip

    def _decide(self, ids: Sequence[str], decision: str) -> None:
        if decision == "rejected":
            self._reject(ids)
            return
        hidden = self._hidden()
        todo = [i for i in dict.fromkeys(ids) if i not in hidden]
        if not todo:
            return
        self._pending.update(todo)
        self._hide(todo)
        said = f"Accepted {_how_many(len(todo))}: kept."

        def done(_changes: Changes) -> None:
            self._settle(todo)
            if isValid(self) and not self._countdown.isActive():  # a reject's countdown first
                self.report(said)

        def failed(exc: BaseException) -> None:
            self._settle(todo, True)
            if isValid(self):
                self.report(f"Nothing was {decision}: {exc}", error=True)

        ops.review(self.ctx, todo, decision, on_done=done, on_error=failed)

    def _reject(self, ids: Sequence[str]) -> None:
        """Out of the queue now; erased when the undo window closes (:func:`ops.reject`)."""
        hidden = self._hidden()
        todo = [i for i in dict.fromkeys(ids) if i not in hidden]
        if not todo:
            return
        what = self._name(todo)
        entry: UndoEntry | None = None

        def erased(_changes: Changes) -> None:
            if isValid(self) and self._held_entry is entry:
                self._held_entry = None
                self.report(f"Rejected {what}: erased, and capture will not keep the same again.")

        def failed(exc: BaseException) -> None:
            if isValid(self):
                if self._held_entry is entry:
                    self._held_entry = None
                self.report(f"Nothing was rejected: {exc}", error=True)
                self.refresh()  # still in the store: back in the queue

        entry = ops.reject(self.ctx, todo, on_erased=erased, on_error=failed)
        verb = "is" if len(todo) == 1 else "are"
        entry.said = f"{what[:1].upper()}{what[1:]} {verb} back, waiting for review."
        self._hide(todo)
        self._held_entry, self._held_what = entry, what
        self._tick()
        self._countdown.start()

    def _name(self, ids: Sequence[str]) -> str:
        """One memory by its title, quoted; several by how many."""
        row = self.model.find(ids[0]) if len(ids) == 1 else -1
        if row < 0:
            return _how_many(len(ids))
        m = self.model.row(row)
        return f"“{_one_line(_read_as_text(m.title or m.content), 60)}”"

    def _tick(self) -> None:
        """The line under the table while the last reject can be undone: how long for."""
        entry = self._held_entry
        left = self.ctx.held_left_ms(entry) if entry is not None else None
        if left is None:  # being erased (said once done) or undone (said then)
            self._countdown.stop()
            return
        seconds = max(1, round(left / 1000))
        self._notice = f"Rejected {self._held_what} — {_undo_key()} to undo ({seconds} s)"
        self._notice_timer.stop()
        self._say(self._notice)

    def _on_restored(self, ids: tuple[str, ...]) -> None:
        """An undo brings these back: select them once the reload shows them."""
        entry = self._held_entry
        if entry is not None and entry.ids == tuple(ids):
            self._held_entry = None
            self._countdown.stop()
            self.report(entry.said)
        self._reveal.update(ids)

    def _hide(self, ids: Sequence[str]) -> None:
        """Take rows out at once (the caller has marked them pending or held); the reload
        after the write confirms it.

        Constraint: a reload already under way still holds these rows; ``_pending`` (and
        the context's held rejects) keep them hidden until the write has settled.
        """
        selected = _selected_rows(self.view)
        before = self.model.rows()
        hidden = self._hidden()
        self.model.set_rows(m for m in before if m.id not in hidden)
        if selected and not _selected_rows(self.view):
            # Keyboard triage (A, A, R, ...): the memory after the decided ones is next,
            # or, after the last, the one before them.
            after = [m.id for m in before[selected[-1] + 1 :] if m.id not in hidden]
            earlier = [m.id for m in before[: selected[0]] if m.id not in hidden]
            nearest = after[:1] or earlier[-1:]
            if nearest:
                _select_row(self.view, self.model.find(nearest[0]))
        self._counted()

    def _settle(self, ids: Sequence[str], failed: bool = False) -> None:
        if not isValid(self):
            return
        self._pending.difference_update(ids)
        if failed:  # nothing changed: bring the rows back
            self.refresh()

    def _update_buttons(self) -> None:
        rows = [self.model.row(r) for r in _selected_rows(self.view)]
        for b in (self.accept_button, self.reject_button, self.pin_button):
            b.setEnabled(bool(rows))
        self.edit_button.setEnabled(bool(rows))
        self.pin_button.setText("Unpin" if rows and all(m.pinned for m in rows) else "Pin")
        waiting = bool(self._count)
        self.accept_all_button.setEnabled(waiting)
        self.reject_all_button.setEnabled(waiting)
        self.selection_changed.emit()

    def _menu(self, pos: QPoint) -> None:
        index = self.view.indexAt(pos)
        if not index.isValid():
            return
        if index.row() not in _selected_rows(self.view):
            _select_row(self.view, index.row())
        menu = QMenu(self)
        menu.addAction("Accept", self.accept_selected)
        menu.addAction("Edit, then accept…", self.edit_selected)
        menu.addAction("Reject", self.reject_selected)
        menu.addSeparator()
        menu.addAction(self.pin_button.text(), self.pin_selected)
        menu.popup(self.view.viewport().mapToGlobal(pos))


# -- audit ------------------------------------------------------------------------------------


class AuditPanel(_Panel):
    """Every candidate capture saved or skipped, and why (seed 003's audit log).

    A skipped candidate whose text was kept can be remembered anyway. The app's own
    operations (pin, edit…) are audited too; they show under "Operations", not "All".
    """

    DECISIONS = (
        ("All candidates", ""), ("Saved", "saved"), ("Skipped", "skipped"),
        ("Reinforced", "reinforced"), ("Quarantined", "quarantined"), ("Failed", "failed"),
        ("Operations", "applied"),
    )  # fmt: skip
    COLUMNS = ("Time", "Decision", "Reason", "Rule", "Confidence", "Session", "Text")
    LIMIT = 1000

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent, eager=False)
        self._entries: list[AuditEntry] = []
        self._remembered: set[str] = set()  # entry ids remembered from this panel

        self.model: _Rows[AuditEntry] = _Rows(self.COLUMNS, lambda e: e.id, self._cell)
        # The text takes what the others leave; a session shows by its first characters.
        self.view = _table(
            self.model, 6, (_WHEN_SAMPLE, "quarantined", "confidence 0.42 below the assist "
                            "threshold 0.60", "procedure-reported", "0.00", "8" * _SHORT_ID, ""),
        )  # fmt: skip
        self.view.customContextMenuRequested.connect(self._menu)

        self.decision_box = QComboBox()
        for text, value in self.DECISIONS:
            self.decision_box.addItem(text, value)
        _fit(self.decision_box)
        self.decision_box.currentIndexChanged.connect(lambda _i: self.refresh())
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by text, reason, rule, project or session…")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(lambda _t: self._show())
        self.remember_button = QPushButton("Remember this")
        self.remember_button.setToolTip("Keep a skipped candidate as an explicit memory")
        self.remember_button.clicked.connect(self.remember_selected)

        self.heading = _label("Audit log", "heading")
        self.summary = _label("", "muted")
        self.empty = _empty_label("")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.view)

        top = QHBoxLayout()
        top.addWidget(self.heading)
        top.addWidget(self.summary, 1)
        bar = QHBoxLayout()
        bar.addWidget(self.decision_box)
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.remember_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.status)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self._update_buttons()

    # -- what the lead and tests read ------------------------------------------------------

    @property
    def decision(self) -> str:
        return str(self.decision_box.currentData())

    def set_decision(self, decision: str) -> None:
        """Show one decision ("" for all candidates); reloads."""
        i = self.decision_box.findData(decision)
        if i < 0:
            raise ValueError(f"no audit decision {decision!r}")
        self.decision_box.setCurrentIndex(i)

    def set_text_filter(self, text: str) -> None:
        self.filter_edit.setText(text)

    def entries(self) -> list[AuditEntry]:
        """The entries shown, newest first."""
        return self.model.rows()

    def select(self, entry_id: str) -> None:
        _select_row(self.view, self.model.find(entry_id))

    def selected_entries(self) -> list[AuditEntry]:
        return [self.model.row(r) for r in _selected_rows(self.view)]

    # -- loading ----------------------------------------------------------------------------

    def concerns(self, changes: UiChanges) -> bool:
        return changes.audit or changes.review or bool(changes.memories)

    def _load(self) -> None:
        lm, decision, limit = self.ctx.lm, self.decision, self.LIMIT

        def fetch() -> list[AuditEntry]:
            if decision:
                return lm.audit_entries(decision=decision, limit=limit)
            entries = lm.audit_entries(limit=limit * 2)
            return [e for e in entries if e.kind != "memory_op"][:limit]

        self._read("audit", fetch, self._apply)

    def _apply(self, entries: list[AuditEntry]) -> None:
        self._entries = entries
        self._show()
        self.refreshed.emit()

    def _show(self) -> None:
        """Apply the text filter (client-side: the rows are already here)."""
        needle = self.filter_edit.text().strip().lower()
        shown = [e for e in self._entries if not needle or needle in self._haystack(e)]
        self.model.set_rows(shown)
        n, total = len(shown), len(self._entries)
        if not total:
            self.empty.setText(
                "No candidates yet — what capture saves or skips appears here"
                if not self.decision
                else "No entries with this decision"
            )
        elif not n:
            self.empty.setText("Nothing matches the filter")
        self.summary.setText(f"{n} of {total}" if needle else (f"{total} entries" if total else ""))
        self.stack.setCurrentWidget(self.view if n else self.empty)
        self._update_buttons()

    @staticmethod
    def _haystack(e: AuditEntry) -> str:
        parts = (e.decision, e.reason, e.rule, e.kind, e.title, e.text or "", e.project or "",
                 e.session_id or "")  # fmt: skip
        return "\n".join(parts).lower()

    def _cell(self, e: AuditEntry, col: int, role: int) -> Any:
        decision = e.decision + (" · remembered" if e.id in self._remembered else "")
        if role == Role.DisplayRole:
            text = _one_line(e.text) if e.text else _one_line(e.title)
            values = (
                _when(e.timestamp), decision, e.reason, e.rule, f"{e.confidence:.2f}",
                (e.session_id or "")[:_SHORT_ID], text,
            )  # fmt: skip
            return values[col]
        if role == Role.ToolTipRole:
            if col == 1:
                return decision
            if col == 2:
                return _wrapped(e.reason)
            if col == 3:
                return f"Rule {e.rule}" + (f"\nKind: {_words(e.kind)}" if e.kind else "")
            if col == 5:
                if not e.session_id:
                    return "No session"
                return f"Session {e.session_id}" + (f"\nProject {e.project}" if e.project else "")
            if col == 6:
                if e.text:
                    return _wrapped(e.text)
                return (_wrapped(e.title) + "\n\n" if e.title else "") + "(the text was not kept)"
            return None
        if role == Role.ForegroundRole:
            if col == 1:
                return QColor(_DECISION_COLOURS.get(e.decision, "#868e96"))
            if col == 6 and not e.text:
                return self.palette().placeholderText()
        if role == Role.TextAlignmentRole and col == 4:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    # -- actions ----------------------------------------------------------------------------

    def _can_remember(self, e: AuditEntry) -> bool:
        return e.decision == "skipped" and bool(e.text) and e.id not in self._remembered

    def remember_selected(self) -> None:
        """Keep the selected skipped candidates (those whose text was kept) as memories."""
        for e in self.selected_entries():
            if not self._can_remember(e) or e.text is None:
                continue
            self._remembered.add(e.id)
            entry_id = e.id

            def failed(_exc: BaseException, entry_id: str = entry_id) -> None:
                if isValid(self):
                    self._remembered.discard(entry_id)
                    self._show()

            def done(_c: Changes, title: str = e.title) -> None:
                if isValid(self):
                    self.report(f"Remembered: {_one_line(title, 80)}")

            ops.capture_anyway(self.ctx, e.text, project=e.project, on_done=done, on_error=failed)
        self._show()

    def _update_buttons(self) -> None:
        self.remember_button.setEnabled(any(self._can_remember(e) for e in self.selected_entries()))

    def _menu(self, pos: QPoint) -> None:
        index = self.view.indexAt(pos)
        if not index.isValid():
            return
        if index.row() not in _selected_rows(self.view):
            _select_row(self.view, index.row())
        menu = QMenu(self)
        action = menu.addAction("Remember this", self.remember_selected)
        action.setEnabled(self.remember_button.isEnabled())
        menu.popup(self.view.viewport().mapToGlobal(pos))


# -- sessions -----------------------------------------------------------------------------------


class SessionsPanel(_Panel):
    """Agent sessions, and the memories of the one opened, in the order they came.

    Open a session with a double-click, Enter or "Open"; activating a memory of its
    timeline emits :attr:`open_memory` (the lead shows it in the browser).
    """

    #: A memory id the person activated in the timeline.
    open_memory = Signal(str)
    #: The opened session's timeline is on screen (its id).
    timeline_loaded = Signal(str)
    #: The timeline's selection, or its rows, changed (the Edit menu follows it).
    selection_changed = Signal()

    COLUMNS = ("Status", "Started", "Project", "Topic", "Agent", "Duration", "Memories")
    TIMELINE = ("Time", "Type", "Content")
    LIMIT = 500

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent, eager=False)
        self._labels: dict[str, str] = {}  # project key -> its label (lexmem.projects)
        self._open: Session | None = None
        self._open_id: str | None = None

        self._topics: dict[str, str] = {}  # session id -> its first candidate's title
        self.model: _Rows[Session] = _Rows(self.COLUMNS, lambda s: s.id, self._cell)
        self.view = _table(
            self.model, 3, ("completed", _WHEN_SAMPLE, _PROJECT_SAMPLE, "", "Claude Code",
                            "23 h 59 min", "Memories"), dotted=[0],
        )  # fmt: skip
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.activated.connect(lambda i: self.open_session(self.model.row(i.row()).id))

        self.timeline: _Rows[Memory] = _Rows(self.TIMELINE, lambda m: m.id, self._timeline_cell)
        self.timeline_view = _table(self.timeline, 2, ("12-31 23:59", "procedural", ""), dotted=[1])
        self.timeline_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.timeline_view.activated.connect(
            lambda i: self.open_memory.emit(self.timeline.row(i.row()).id)
        )
        self.timeline_view.setToolTip("Double-click or press Enter to show a memory")

        self.heading = _label("Sessions", "heading")
        self.summary = _label("", "muted")
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Show the memories of the selected session, in order")
        self.open_button.clicked.connect(self.open_selected)
        self.empty = _empty_label(
            "No agent sessions yet — they appear once an agent's hooks report to lexmem"
        )
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.view)

        self.timeline_title = _label("Timeline", "heading")
        self.timeline_hint = _empty_label("Open a session to see its memories in order")
        self.timeline_stack = QStackedWidget()
        self.timeline_stack.addWidget(self.timeline_hint)
        self.timeline_stack.addWidget(self.timeline_view)
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 6, 0, 0)
        lower_layout.addWidget(self.timeline_title)
        lower_layout.addWidget(self.timeline_stack, 1)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.stack)
        split.addWidget(lower)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        top = QHBoxLayout()
        top.addWidget(self.heading)
        top.addWidget(self.summary, 1)
        top.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        layout.addWidget(self.status)
        self.view.selectionModel().selectionChanged.connect(
            lambda *_: self.open_button.setEnabled(bool(_selected_rows(self.view)))
        )
        self.open_button.setEnabled(False)
        self.timeline_view.selectionModel().selectionChanged.connect(
            lambda *_: self.selection_changed.emit()
        )

    # -- what the lead and tests read ------------------------------------------------------

    def sessions(self) -> list[Session]:
        return self.model.rows()

    @property
    def current_session(self) -> str | None:
        """The session whose timeline is open."""
        return self._open_id

    def timeline_ids(self) -> list[str]:
        """The open session's memories, oldest first."""
        return self.timeline.keys()

    def select(self, session_id: str) -> None:
        _select_row(self.view, self.model.find(session_id))

    # -- as a target of the Edit menu's actions: the timeline's memories -----------------

    def selected_memory_ids(self) -> list[str]:
        return [self.timeline.row(r).id for r in _selected_rows(self.timeline_view)]

    def selection_sample(self) -> tuple[int, list[Memory]]:
        rows = [self.timeline.row(r) for r in _selected_rows(self.timeline_view)]
        return len(rows), rows

    def cached_memory(self, memory_id: str) -> Memory | None:
        row = self.timeline.find(memory_id)
        return self.timeline.row(row) if row >= 0 else None

    def select_memory(self, memory_id: str) -> None:
        """Select a memory of the open session's timeline."""
        _select_row(self.timeline_view, self.timeline.find(memory_id))

    # -- loading ----------------------------------------------------------------------------

    def concerns(self, changes: UiChanges) -> bool:
        return changes.sessions or bool(changes.memories)

    def topic(self, session_id: str) -> str:
        """What the session was about, as the list shows it ("" when capture took nothing)."""
        return self._topics.get(session_id, "")

    def _load(self) -> None:
        lm, limit = self.ctx.lm, self.LIMIT

        def fetch() -> tuple[list[Session], dict[str, str], dict[str, str]]:
            sessions = lm.sessions(limit=limit)
            topics = lm.session_topics([s.id for s in sessions])
            return sessions, topics, project_labels(lm.projects())

        self._read("sessions", fetch, self._apply)
        if self._open_id is not None:
            self._load_timeline(self._open_id)

    def _apply(self, result: tuple[list[Session], dict[str, str], dict[str, str]]) -> None:
        sessions, self._topics, self._labels = result
        self.model.set_rows(sessions)
        self.stack.setCurrentWidget(self.view if sessions else self.empty)
        active = sum(1 for s in sessions if s.status == "active")
        n = len(sessions)
        self.summary.setText(
            "" if not n else f"{n} session{'s' if n != 1 else ''}, {active} active"
        )
        if self._open_id is not None:
            self._open = next((s for s in sessions if s.id == self._open_id), self._open)
            self._title_timeline()
        self.refreshed.emit()

    def open_selected(self) -> None:
        rows = _selected_rows(self.view)
        if rows:
            self.open_session(self.model.row(rows[0]).id)

    def open_session(self, session_id: str) -> None:
        """Show this session's memories in the order they were made."""
        self._open_id = session_id
        row = self.model.find(session_id)
        self._open = self.model.row(row) if row >= 0 else None
        if row >= 0 and row not in _selected_rows(self.view):
            _select_row(self.view, row)
        self._title_timeline()
        self._load_timeline(session_id)

    def _load_timeline(self, session_id: str) -> None:
        lm = self.ctx.lm

        def fetch() -> tuple[str, list[Memory]]:
            # Every status: an archived or superseded memory is still part of the story.
            flt = MemoryFilter(session_id=session_id, status=None)
            memories = lm.list_memories(flt, sort="created", limit=None)  # newest first
            return session_id, sorted(memories, key=lambda m: (m.created_at, m.id))

        self._read("timeline", fetch, self._apply_timeline)

    def _apply_timeline(self, result: tuple[str, list[Memory]]) -> None:
        session_id, memories = result
        self.timeline.set_rows(memories)
        if memories:
            self.timeline_stack.setCurrentWidget(self.timeline_view)
        else:
            self.timeline_hint.setText("No memories from this session")
            self.timeline_stack.setCurrentWidget(self.timeline_hint)
        self.selection_changed.emit()
        self.timeline_loaded.emit(session_id)

    def _title_timeline(self) -> None:
        s = self._open
        if s is None:
            self.timeline_title.setText(f"Timeline · {self._open_id}")
            return
        where = (
            f" · {self._labels.get(s.project, '') or project_name(s.project)}" if s.project else ""
        )
        self.timeline_title.setText(
            f"Timeline · {AGENT_NAMES.get(s.agent, s.agent or 'agent')}{where} · {_when(s.started_at)}"
        )

    def _cell(self, s: Session, col: int, role: int) -> Any:
        if role == Role.DisplayRole:
            end = s.ended_at or s.last_event_at
            values = (
                s.status, _when(s.started_at),
                self._labels.get(s.project or "") or project_name(s.project),
                self._topic_text(s), AGENT_NAMES.get(s.agent, s.agent),
                _duration((end - s.started_at).total_seconds()), str(s.memory_count),
            )  # fmt: skip
            return values[col]
        if role == Role.ToolTipRole:
            if col == 0:
                return f"Session {s.id}\n{s.event_count} events"
            if col == 2:
                return s.project or "no project"
            if col == 3:
                topic = self._topics.get(s.id)
                if not topic:
                    return "Capture took nothing from this session"
                return _wrapped(topic) + "\n\n(the first thing capture took from the session)"
            if col == 5:
                return f"Last event {_when(s.last_event_at)}"
            return None
        if role == Role.DecorationRole and col == 0:
            return _dot(_STATUS_COLOURS.get(s.status, "#868e96"))
        if role == Role.ForegroundRole and col == 3 and not self._topics.get(s.id):
            return self.palette().placeholderText()
        if role == Role.TextAlignmentRole and col == 6:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _topic_text(self, s: Session) -> str:
        topic = self._topics.get(s.id)
        if topic:
            return _one_line(topic)
        return "nothing captured yet" if s.status == "active" else "nothing captured"

    def _timeline_cell(self, m: Memory, col: int, role: int) -> Any:
        if role == Role.DisplayRole:
            local = _local(m.created_at)
            values = (local.strftime("%H:%M:%S"), str(m.type), _one_line(_read_as_text(m.content)))
            if col == 0 and local.date() != date.today():
                return local.strftime("%m-%d %H:%M")
            return values[col]
        if role == Role.ToolTipRole:
            if col == 0:
                return _local(m.created_at).isoformat(timespec="seconds")
            if col == 2:
                status = "" if m.status == MemoryStatus.ACTIVE else f"\n\n({m.status})"
                return _wrapped(m.content) + status
            return None
        if role == Role.DecorationRole and col == 1:
            return _dot(TYPE_COLOURS.get(str(m.type), "#868e96"))
        if role == Role.ForegroundRole and m.status != MemoryStatus.ACTIVE:
            return self.palette().placeholderText()
        return None


# -- insights ----------------------------------------------------------------------------------

# Stable colours per source (not by rank, so a source keeps its colour as counts change).
# The common ones get the most distinct series colours; the rare ones neutral tones.
_SOURCE_COLOURS: dict[str, QColor | int] = {
    MemorySource.EXPLICIT: 0, MemorySource.HOOK_EVENT: 1, MemorySource.AGENT_RESPONSE: 2,
    MemorySource.CORRECTION: 3, MemorySource.CONVERSATION: 4, MemorySource.MARKDOWN_CHUNK: 5,
    MemorySource.WORKFLOW: 6, MemorySource.CONFIGURATION: QColor("#868e96"),
    MemorySource.SEARCH_CONFIRMATION: QColor("#495057"),
}  # fmt: skip


def _source_colour(name: str) -> QColor:
    found = _SOURCE_COLOURS.get(name, QColor("#adb5bd"))
    return series_colour(found) if isinstance(found, int) else QColor(found)


def _type_colour(name: str, i: int) -> QColor:
    return QColor(TYPE_COLOURS[name]) if name in TYPE_COLOURS else series_colour(i + 3)


class InsightsPanel(_Panel):
    """Charts of what the last days brought: memories per day by type and by source,
    the busiest projects, and why capture skipped candidates (:func:`lexmem.store.lens.insights`)."""

    PERIODS = (7, 30, 90)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None, *, days: int = 30) -> None:
        super().__init__(ctx, parent, eager=False)
        self._data: dict[str, Any] | None = None
        self.heading = _label("Insights", "heading")
        self.summary = _label("", "muted")
        self.period_box = QComboBox()
        for n in self.PERIODS:
            self.period_box.addItem(f"Last {n} days", n)
        self.period_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.period_box.setCurrentIndex(max(0, self.period_box.findData(days)))
        _fit(self.period_box)
        self.period_box.currentIndexChanged.connect(lambda _i: self.refresh())

        self.by_type_chart = StackedBarChart("Memories per day, by type")
        self.by_source_chart = StackedBarChart("Memories per day, by source")
        self.projects_chart = HorizontalBarChart(
            "Top projects (active memories)", colour=series_colour(4)
        )
        self.skips_chart = HorizontalBarChart(
            "Why candidates were skipped", empty_text="Nothing skipped", colour=series_colour(3)
        )

        grid_host = QWidget()
        grid = QGridLayout(grid_host)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(10)
        grid.addWidget(self.by_type_chart, 0, 0)
        grid.addWidget(self.by_source_chart, 0, 1)
        grid.addWidget(self.projects_chart, 1, 0)
        grid.addWidget(self.skips_chart, 1, 1)
        for i in range(2):
            grid.setColumnStretch(i, 1)
            grid.setRowStretch(i, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(grid_host)

        top = QHBoxLayout()
        top.addWidget(self.heading)
        top.addWidget(self.summary, 1)
        top.addWidget(self.period_box)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.status)

    @property
    def days(self) -> int:
        return int(self.period_box.currentData())

    def set_days(self, days: int) -> None:
        """Show the last 7, 30 or 90 days; reloads."""
        i = self.period_box.findData(days)
        if i < 0:
            raise ValueError(f"days must be one of {self.PERIODS}, not {days}")
        self.period_box.setCurrentIndex(i)

    @property
    def data(self) -> dict[str, Any] | None:
        """The figures on screen (``lens.insights``'s dict), once loaded."""
        return self._data

    def concerns(self, changes: UiChanges) -> bool:
        return changes.audit or changes.review or bool(changes.memories)

    def _load(self) -> None:
        lm, days = self.ctx.lm, self.days
        self._read("insights", lambda: lm.insights(days=days), self._apply)

    def _apply(self, data: dict[str, Any]) -> None:
        self._data = data
        dates = [date.fromisoformat(d) for d in data["dates"]]
        labels = [f"{d.strftime('%b')} {d.day}" for d in dates]
        tips = [d.strftime("%a %d %b %Y") for d in dates]
        self.by_type_chart.set_data(
            labels,
            [Series(t, v, _type_colour(t, i)) for i, (t, v) in enumerate(data["by_type"].items())],
            tooltips=tips,
        )
        self.by_source_chart.set_data(
            labels,
            [Series(_words(s), v, _source_colour(s)) for s, v in data["by_source"].items()],
            tooltips=tips,
        )
        projects = data["top_projects"]
        # One label per project, as the browser gives them: "shop" and "shop (~/work)"
        # are two bars, not one name twice.
        names = project_labels(p for p, _ in projects if p != "(none)")
        self.projects_chart.set_data(
            [(names.get(p, p) if p != "(none)" else "no project", n) for p, n in projects],
            tooltips=[p for p, _ in projects],
        )
        reasons = data["skip_reasons"]
        self.skips_chart.set_data([(r[:1].upper() + r[1:] or "(no reason)", n) for r, n in reasons])
        self.summary.setText(self._summary(data))
        self.refreshed.emit()

    @staticmethod
    def _summary(data: dict[str, Any]) -> str:
        total, days = int(data["total"]), int(data["days"])
        decisions: dict[str, int] = data["decisions"]
        if not total and not decisions:
            return "No memories yet"
        text = f"{total} memor{'y' if total == 1 else 'ies'} in the last {days} days"
        if decisions:
            n = sum(decisions.values())
            parts = ", ".join(f"{v} {k}" for k, v in decisions.items())
            text += f" · {n} candidate{'s' if n != 1 else ''}: {parts}"
        return text
