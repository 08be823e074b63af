"""The browser's results table: a model that holds ids and fetches rows lazily.

Anki's browser ``DataModel`` is the pattern (STYLE.md 5): the model keeps the ordered
list of memory ids and a small row cache. :meth:`MemoryTableModel.data` answers from
the cache; a row it does not have yet shows a placeholder and is queued, and queued
rows are read in one batch off the UI thread (``ctx.read``), then announced with
``dataChanged``. Only rows a view actually paints are ever read, so 100,000 memories
cost a list of 100,000 strings and a few dozen row reads.

A change never resets the model: :meth:`MemoryTableModel.mark_stale` keeps showing a
touched row until its new version arrives, and :meth:`MemoryTableModel.set_ids` turns
a new id list into row removals, moves and insertions, so the selection and the
scroll position survive a capture arriving in the background.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QRectF,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor, QIcon, QPainter, QPaintEvent, QPalette, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHeaderView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from lexmem.api import match_spans, project_name
from lexmem.models import Memory, MemoryStatus

from .theme import TYPE_COLOURS

__all__ = [
    "COLUMNS",
    "ID_ROLE",
    "MATCH_ROLE",
    "PLACEHOLDER",
    "SORTABLE_COLUMNS",
    "Column",
    "IdPlan",
    "IdSnapshot",
    "MatchDelegate",
    "MemoryTableModel",
    "MemoryTableView",
    "ReadFn",
    "alive",
    "match_spans",
    "plan_ids",
    "submit_read",
    "type_icon",
]

log = logging.getLogger("lexmem.ui")

#: What a row shows while its data is on the way.
PLACEHOLDER = "…"
#: The role under which every cell answers its memory's id.
ID_ROLE = int(Qt.ItemDataRole.UserRole) + 1
#: The role under which the title cell answers where the search's words are in its text:
#: (start, end) character spans, see :func:`match_spans` (empty without a search).
MATCH_ROLE = int(Qt.ItemDataRole.UserRole) + 2
PIN_MARK = "★"
PIN_COLOUR = "#f59f00"

# Rows read around the requested ones: a scroll by a line or a page then finds its
# rows already there. Small, because a test proves scrolling reads only about what shows.
MARGIN = 12
# At most this many rows per read; a view never shows more at once.
MAX_BATCH = 300
# Rows kept in memory. Scrolling through 100,000 memories must not keep 100,000 texts.
CACHE_SIZE = 3000

Index = QModelIndex | QPersistentModelIndex
#: ``ctx.read``: run a callable off the UI thread, call back on it.
ReadFn = Callable[
    [
        Callable[[], Any],
        Callable[[Any], None] | None,
        Callable[[BaseException], None] | None,
    ],
    None,
]
FetchFn = Callable[[Sequence[str]], list[Memory]]


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    tooltip: str
    width: int
    #: The store sort this column's header click asks for ("" = not sortable).
    sort: str = ""
    right: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("title", "Memory", "Title, or the first line of the content", 240),
    Column("type", "Type", "Semantic, episodic or procedural", 98),
    Column("project", "Project", "The repository or named project", 88),
    Column("salience", "Salience", "How much the memory matters now (0–1)", 62, "salience", True),
    Column("created", "Created", "When the memory was stored", 88, "created"),
    Column("accessed", "Accessed", "When a search last returned it", 88, "accessed"),
    Column("pinned", PIN_MARK, "Pinned memories survive decay", 26),
    Column("status", "Status", "Active, archived or superseded", 84),
)
#: Column index -> the sort key its header asks for.
SORTABLE_COLUMNS = {i: c.sort for i, c in enumerate(COLUMNS) if c.sort}


def _day(value: datetime | None) -> str:
    # The day only: the table stays narrow enough for the title; the tooltip has the time.
    return value.astimezone().strftime("%Y-%m-%d") if value is not None else ""


def submit_read(
    read: ReadFn,
    fn: Callable[[], Any],
    done: Callable[[Any], None] | None,
    failed: Callable[[BaseException], None] | None,
) -> bool:
    """Start a read; False when the runner is already shut down (the app quitting, a
    timer firing on the way out): then nobody is left to show the answer."""
    try:
        read(fn, done, failed)
    except RuntimeError:
        log.debug("read not started: the runner is shut down")
        return False
    return True


def alive(obj: object) -> bool:
    """Whether a Qt object still exists: a read may finish after its widget closed."""
    import shiboken6

    return bool(shiboken6.isValid(obj))


def _when(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M") if value is not None else ""


def _one_line(m: Memory) -> str:
    text = m.title or m.content
    return " ".join(text.split())


@cache
def type_icon(mtype: str) -> QIcon:
    """A coloured dot: the type's colour, whatever the theme's text colour."""
    pm = QPixmap(12, 12)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(TYPE_COLOURS.get(mtype, "#868e96")))
    p.drawEllipse(1, 1, 10, 10)
    p.end()
    return QIcon(pm)


#: The colour of the mark on memories a team sees.
SHARED_COLOUR = "#4c6ef5"


def shared_icon() -> QIcon:
    """Two figures side by side: the memory's project is shared with a team."""
    pm = QPixmap(14, 12)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(SHARED_COLOUR))
    for x in (1, 7):
        p.drawEllipse(x + 1, 1, 4, 4)  # a head
        p.drawRoundedRect(x, 6, 6, 5, 2, 2)  # shoulders
    p.end()
    return QIcon(pm)


def shared_text(team_project: str) -> str:
    """How a shared memory says so."""
    return f"Shared with the team as “{team_project}”"


@dataclass(frozen=True, slots=True)
class IdSnapshot:
    """A model's id list at one moment (``generation`` tells whether it still is)."""

    generation: int
    ids: Sequence[str]


@dataclass(frozen=True, slots=True)
class IdPlan:
    """How to turn one id list into another as row changes (see :func:`plan_ids`)."""

    generation: int
    ids: list[str]  # the new list, one row per id
    same: bool = False
    reset: bool = False  # scattered everywhere: cheaper as one reset
    removed: list[tuple[int, int]] = field(default_factory=list)  # runs of old rows
    kept: list[str] | None = None  # the remaining rows' new order, if it changed
    inserted: list[tuple[int, int]] = field(default_factory=list)  # runs of new rows


def plan_ids(old: IdSnapshot, ids: Sequence[str], *, max_runs: int = 64) -> IdPlan:
    """Plan the change from ``old`` to ``ids``. Pure and Qt-free: runs on a worker.

    Constraint: diffing 100,000 ids costs tens of milliseconds; done beside the id
    query, a capture arriving while someone scrolls costs the UI thread almost nothing.
    """
    new = list(dict.fromkeys(ids))  # a row per id, even if a caller repeats one
    if new == list(old.ids):
        return IdPlan(old.generation, new, same=True)
    new_set = set(new)
    old_set = set(old.ids)
    removed = [i for i, mid in enumerate(old.ids) if mid not in new_set]
    inserted = [i for i, mid in enumerate(new) if mid not in old_set]
    if old.ids and new and _runs(removed) + _runs(inserted) > max_runs:
        return IdPlan(old.generation, new, reset=True)
    kept = [mid for mid in new if mid in old_set]
    remaining = [mid for mid in old.ids if mid in new_set]
    return IdPlan(
        old.generation,
        new,
        removed=_ranges(removed),
        kept=kept if kept != remaining else None,
        inserted=_ranges(inserted),
    )


class MemoryTableModel(QAbstractTableModel):
    """Memory ids in order, their rows read lazily in batches off the UI thread.

    ``fetched_rows`` and ``fetch_calls`` count the rows read and the reads made,
    so a test (or a benchmark) can see that scrolling read only what was shown.
    """

    #: A batch of rows arrived (after its ``dataChanged``).
    rows_arrived = Signal()
    #: A batch failed to read: the error, for the status line.
    fetch_failed = Signal(str)

    def __init__(
        self,
        read: ReadFn,
        fetch: FetchFn,
        parent: QWidget | None = None,
        *,
        margin: int = MARGIN,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        super().__init__(parent)
        self._read = read
        self._fetch_fn = fetch
        self._margin = margin
        self._cache_size = cache_size
        self._ids: list[str] = []
        self._pos: dict[str, int] | None = None  # id -> row, built when first asked
        self._cache: OrderedDict[str, Memory] = OrderedDict()
        # id -> the epoch it was marked stale in: a read begun before that epoch is
        # older than the change and leaves the row stale.
        self._stale: dict[str, int] = {}
        self._epoch = 0
        self._missing: set[str] = set()  # listed, but gone by the time it was read
        self._scores: dict[str, float] = {}
        self._query = ""  # the search the ids answer, for highlighting its words
        # project key -> the label every view shows (lexmem.projects), once the page
        # has listed the projects; a project not in it shows its folder name.
        self._project_labels: dict[str, str] = {}
        # local project -> the team's name for it: its memories are marked as shared.
        self._shared: dict[str, str] = {}
        self._shared_icon: QIcon | None = None
        self._wanted: set[int] = set()
        self._in_flight = False
        self._generation = 0  # bumped whenever the id list changes
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)  # after the paint that asked, so one paint = one read
        self._timer.timeout.connect(self._fetch)
        self.fetched_rows = 0
        self.fetch_calls = 0

    def set_project_labels(self, labels: dict[str, str]) -> None:
        """Name projects as :func:`lexmem.api.project_labels` does, where two look alike."""
        if labels == self._project_labels:
            return
        self._project_labels = dict(labels)
        column = next(i for i, c in enumerate(COLUMNS) if c.key == "project")
        if self._ids:
            self.dataChanged.emit(
                self.index(0, column), self.index(len(self._ids) - 1, column),
                [Qt.ItemDataRole.DisplayRole],
            )  # fmt: skip

    def set_shared(self, shared: dict[str, str]) -> None:
        """The projects a team sees (local project -> the team's name for it)."""
        if shared == self._shared:
            return
        self._shared = dict(shared)
        column = next(i for i, c in enumerate(COLUMNS) if c.key == "project")
        if self._ids:
            self.dataChanged.emit(
                self.index(0, column), self.index(len(self._ids) - 1, column),
                [Qt.ItemDataRole.DecorationRole, Qt.ItemDataRole.ToolTipRole],
            )  # fmt: skip

    def shared_as(self, project: str | None) -> str | None:
        """The team's name for ``project`` when a team sees it, else None."""
        return self._shared.get(project or "")

    # -- the id list ---------------------------------------------------------------

    @property
    def ids(self) -> list[str]:
        """The ids in row order (a copy)."""
        return list(self._ids)

    def id_at(self, row: int) -> str | None:
        return self._ids[row] if 0 <= row < len(self._ids) else None

    def row_of(self, memory_id: str) -> int | None:
        return self._positions().get(memory_id)

    def memory(self, memory_id: str) -> Memory | None:
        """The cached row of a memory (None when it has not been read yet)."""
        return self._cache.get(memory_id)

    def score(self, memory_id: str) -> float | None:
        """The search score of a memory, when the ids came from a search."""
        return self._scores.get(memory_id)

    @property
    def query(self) -> str:
        """The search the ids answer ("" for a plain list)."""
        return self._query

    @property
    def busy(self) -> bool:
        """Rows are being read, or asked for and about to be."""
        return self._in_flight or self._timer.isActive()

    def is_loaded(self, row: int) -> bool:
        mid = self.id_at(row)
        return mid is not None and (mid in self._cache or mid in self._missing)

    def _positions(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = {mid: i for i, mid in enumerate(self._ids)}
        return self._pos

    def snapshot(self) -> IdSnapshot:
        """The current id list, to plan the next change against off the UI thread."""
        return IdSnapshot(self._generation, tuple(self._ids))

    def set_ids(
        self,
        ids: Sequence[str],
        *,
        memories: Iterable[Memory] = (),
        scores: dict[str, float] | None = None,
        plan: IdPlan | None = None,
        query: str = "",
    ) -> None:
        """Show ``ids`` in this order; ``memories`` already read (a search's hits) fill
        the cache so those rows need no second read; ``query`` is the search they
        answer, whose words the title column marks.

        Rows that stay keep their identity (selection, current row, scroll position):
        the change is announced as removals, one layout change if the order of the
        remaining rows changed, and insertions, never as a reset unless it is
        scattered across many places. ``plan`` (from :func:`plan_ids` on a
        :meth:`snapshot`, computed off the UI thread) saves diffing 100,000 ids here;
        it is used only if the list has not changed since its snapshot.
        """
        if plan is None or plan.generation != self._generation:
            plan = plan_ids(IdSnapshot(self._generation, self._ids), ids)
        fresh = list(memories)
        for m in fresh:
            self._put(m)
            self._stale.pop(m.id, None)
        self._scores = dict(scores or {})
        query_changed, self._query = query != self._query, query
        self._missing.clear()
        self._wanted.clear()  # row numbers of the old list; the repaint asks again
        self._generation += 1
        if not plan.same:
            self._apply(plan)
        if (fresh or query_changed) and self._ids:
            self._changed(0, len(self._ids) - 1)

    def _apply(self, plan: IdPlan) -> None:
        new = plan.ids
        if plan.reset:
            self.beginResetModel()
            self._ids, self._pos = list(new), None
            self.endResetModel()
            return
        # 1. removals, from the end so earlier row numbers stay valid
        for first, last in reversed(plan.removed):
            self.beginRemoveRows(QModelIndex(), first, last)
            del self._ids[first : last + 1]
            self._pos = None
            self.endRemoveRows()
        # 2. the rows that stayed, in their new order
        if plan.kept is not None:
            self.layoutAboutToBeChanged.emit()
            before = self._ids
            self._ids, self._pos = list(plan.kept), None
            pos = self._positions()
            for p in self.persistentIndexList():
                if 0 <= p.row() < len(before):
                    target = pos[before[p.row()]]
                    self.changePersistentIndex(p, self.index(target, p.column()))
            self.layoutChanged.emit()
        # 3. insertions: after each run the list's prefix equals the new list's
        for first, last in plan.inserted:
            self.beginInsertRows(QModelIndex(), first, last)
            self._ids[first:first] = new[first : last + 1]
            self._pos = None
            self.endInsertRows()

    # -- changes -------------------------------------------------------------------

    def mark_stale(self, ids: Iterable[str]) -> None:
        """These memories changed: read them again, showing the old row meanwhile."""
        pos = self._positions()
        rows = []
        self._epoch += 1
        for mid in ids:
            row = pos.get(mid)
            if row is None:
                continue
            self._stale[mid] = self._epoch
            self._missing.discard(mid)
            rows.append(row)
        if rows:
            self._changed(min(rows), max(rows))

    def invalidate(self) -> None:
        """Every row is stale (e.g. the theme changed or a bulk change happened)."""
        self._epoch += 1
        self._stale = dict.fromkeys(self._cache, self._epoch)
        if self._ids:
            self._changed(0, len(self._ids) - 1)

    def _changed(self, first: int, last: int) -> None:
        self.dataChanged.emit(self.index(first, 0), self.index(last, len(COLUMNS) - 1))

    # -- lazy reading --------------------------------------------------------------

    def _put(self, m: Memory) -> None:
        self._cache[m.id] = m
        self._cache.move_to_end(m.id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _needs(self, row: int) -> bool:
        mid = self._ids[row]
        return (mid not in self._cache or mid in self._stale) and mid not in self._missing

    def _want(self, row: int) -> None:
        self._wanted.add(row)
        if not self._in_flight and not self._timer.isActive():
            self._timer.start()

    def _fetch(self) -> None:
        """Read the rows views asked for (plus a small margin) in one batch."""
        if self._in_flight or not self._wanted:
            return
        n = len(self._ids)
        asked = sorted(r for r in self._wanted if r < n and self._needs(r))
        self._wanted.clear()
        if not asked:
            return
        pick = asked[:MAX_BATCH]
        chosen = set(pick)
        extra = [
            *range(max(0, pick[0] - self._margin), pick[0]),
            *range(pick[-1] + 1, min(n, pick[-1] + 1 + self._margin)),
        ]
        pick += [r for r in extra if r not in chosen and self._needs(r)]
        rows = sorted(pick)
        ids = [self._ids[r] for r in rows]
        self._in_flight = True
        generation, epoch = self._generation, self._epoch
        fetch = self._fetch_fn
        if not submit_read(
            self._read,
            lambda: fetch(ids),
            lambda got: self._arrived(ids, rows, generation, epoch, got),
            self._failed,
        ):
            self._in_flight = False

    def _arrived(
        self, ids: list[str], rows: list[int], generation: int, epoch: int, got: list[Memory]
    ) -> None:
        if not alive(self):
            return
        self._in_flight = False
        self.fetch_calls += 1
        self.fetched_rows += len(ids)
        found = {m.id: m for m in got}
        for mid in ids:
            m = found.get(mid)
            if m is None:
                self._missing.add(mid)  # forgotten meanwhile; the next id query drops it
                self._stale.pop(mid, None)
                continue
            self._put(m)
            if self._stale.get(mid, -1) <= epoch:
                self._stale.pop(mid, None)
        # Rows asked for while this read ran may have scrolled away: rather than read
        # them, repaint where they were; the view asks again for what it still shows.
        dropped, self._wanted = self._wanted, set()
        if not self._ids:
            return
        last = len(self._ids) - 1
        if generation == self._generation:
            self._changed(min(rows[0], last), min(rows[-1], last))
        else:
            self._changed(0, last)
        if dropped:
            self._changed(min(*dropped, last), min(max(dropped), last))
        self.rows_arrived.emit()

    def _failed(self, exc: BaseException) -> None:
        if not alive(self):
            return
        self._in_flight = False
        self._wanted.clear()
        self.fetch_failed.emit(str(exc))

    # -- QAbstractTableModel ---------------------------------------------------------

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._ids)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return (
            Qt.ItemFlag.ItemIsEnabled
            | Qt.ItemFlag.ItemIsSelectable
            | Qt.ItemFlag.ItemNeverHasChildren
        )

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        col = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return col.tooltip + (" (click to sort)" if col.sort else "")
        if role == Qt.ItemDataRole.TextAlignmentRole and col.right:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = index.row()
        if not index.isValid() or row >= len(self._ids):
            return None
        mid = self._ids[row]
        if role == ID_ROLE:
            return mid
        col = COLUMNS[index.column()]
        m = self._cache.get(mid)
        stale = m is None or mid in self._stale
        if role == Qt.ItemDataRole.DisplayRole and stale and mid not in self._missing:
            self._want(row)
        if m is None:
            if role == Qt.ItemDataRole.DisplayRole and col.key == "title":
                return "(forgotten)" if mid in self._missing else PLACEHOLDER
            if role == Qt.ItemDataRole.ForegroundRole:
                return _muted()
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            if col.key == "project":
                # A repository root shows as its folder name, told apart from one of the
                # same name (lexmem.projects); the row's tooltip has the full path.
                return self._project_labels.get(m.project or "") or project_name(m.project)
            return _display(m, col.key)
        if role == MATCH_ROLE:
            # Asked by the delegate for painted rows only: 10,000 rows cost nothing more.
            return (
                match_spans(_one_line(m), self._query) if col.key == "title" and self._query else []
            )
        if role == Qt.ItemDataRole.ForegroundRole:
            if col.key == "pinned":
                return QColor(PIN_COLOUR)
            if m.status != MemoryStatus.ACTIVE:
                return _muted()
            return None
        if role == Qt.ItemDataRole.DecorationRole and col.key == "type":
            return type_icon(str(m.type))
        if role == Qt.ItemDataRole.DecorationRole and col.key == "project":
            if self.shared_as(m.project) is None:
                return None
            if self._shared_icon is None:
                self._shared_icon = shared_icon()
            return self._shared_icon
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if col.right:
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if col.key == "pinned":
                return int(Qt.AlignmentFlag.AlignCenter)
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            tip = _tooltip(m, self._scores.get(mid))
            team = self.shared_as(m.project)
            return f"{tip}\n{shared_text(team)}" if team is not None else tip
        return None


def _display(m: Memory, key: str) -> str:
    if key == "title":
        return _one_line(m)
    if key == "type":
        return str(m.type)
    if key == "salience":
        return f"{m.salience:.2f}"
    if key == "created":
        return _day(m.created_at)
    if key == "accessed":
        # A memory no search has returned yet says so rather than repeating its creation.
        return _day(m.last_accessed_at) if m.access_count else "never"
    if key == "pinned":
        return PIN_MARK if m.pinned else ""
    if key == "status":
        return str(m.status)
    return ""


def _tooltip(m: Memory, score: float | None) -> str:
    text = m.content if len(m.content) <= 400 else m.content[:399] + "…"
    title = " ".join(m.title.split())
    if title and not " ".join(m.content.split()).startswith(title.rstrip("…")):
        text = f"{title}\n\n{text}"  # the whole title, which the column may elide
    facts = [f"created {_when(m.created_at)}"]
    if m.access_count:
        facts.append(f"last returned {_when(m.last_accessed_at)} ({m.access_count}×)")
    if score is not None:
        facts.append(f"search score {score:.3f}")
    where = f"project {m.project}\n" if m.project else ""
    return f"{text}\n\n{m.id}\n{where}" + " · ".join(facts)


def _muted() -> QColor:
    return QApplication.palette().color(QPalette.ColorRole.PlaceholderText)


def _ranges(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted row numbers as contiguous (first, last) runs."""
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


def _runs(rows: Sequence[int]) -> int:
    return sum(1 for i, r in enumerate(rows) if i == 0 or rows[i - 1] != r - 1)


#: Behind the search's words in the title column: a marker yellow on a light base, a
#: deeper amber on a dark one; translucent, so a selected row's colour shows through.
MATCH_LIGHT = QColor(255, 212, 59, 170)
MATCH_DARK = QColor(245, 159, 0, 120)


class MatchDelegate(QStyledItemDelegate):
    """Paints a cell as usual, with the search's words (``MATCH_ROLE``) marked.

    Constraint: a view calls ``paint`` for the rows on screen only, so with 10,000
    search results the marks cost what a screenful costs. The text is elided as the
    style elides it, and a mark never reaches past the ellipsis.
    """

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        spans = index.data(MATCH_ROLE)
        if not spans:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        widget = opt.widget  # type: ignore[attr-defined]
        style = widget.style() if widget is not None else QApplication.style()
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, widget)
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, widget) + 1
        rect = rect.adjusted(margin, 0, -margin, 0)
        text = opt.text  # type: ignore[attr-defined]
        opt.text = ""  # type: ignore[attr-defined]
        # Background, selection, focus and icon as the style draws them; the text below.
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        fm = opt.fontMetrics  # type: ignore[attr-defined]
        shown = fm.elidedText(text, opt.textElideMode, rect.width())  # type: ignore[attr-defined]
        visible = len(shown) if shown == text else max(0, len(shown) - 1)
        pal = opt.palette  # type: ignore[attr-defined]
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)  # type: ignore[attr-defined]
        group = (
            QPalette.ColorGroup.Normal
            if opt.state & QStyle.StateFlag.State_Enabled  # type: ignore[attr-defined]
            else QPalette.ColorGroup.Disabled
        )
        dark = pal.color(QPalette.ColorRole.Base).lightness() < 128
        painter.save()
        painter.setClipRect(rect)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(MATCH_DARK if dark else MATCH_LIGHT)
        top = rect.center().y() - fm.height() / 2
        for start, end in spans:
            end = min(end, visible)
            if start >= end:
                continue
            x = rect.left() + fm.horizontalAdvance(shown[:start])
            width = fm.horizontalAdvance(shown[start:end])
            painter.drawRoundedRect(QRectF(x - 1, top, width + 2, fm.height()), 2, 2)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        painter.setPen(pal.color(group, role))
        painter.setFont(opt.font)  # type: ignore[attr-defined]
        painter.drawText(rect, int(opt.displayAlignment), shown)  # type: ignore[attr-defined]
        painter.restore()


class MemoryTableView(QTableView):
    """The results table: whole-row selection, fixed row heights, no per-row sizing.

    Constraint: with 100,000 rows nothing may size rows or columns to their contents
    (that reads every row); heights are fixed and widths set once.
    """

    #: The first time the view painted rows whose data had arrived.
    first_rows_painted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._painted = False
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        self.setShowGrid(False)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.setCornerButtonEnabled(False)
        vh = self.verticalHeader()
        vh.setVisible(False)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(self.fontMetrics().height() + 10)
        hh = self.horizontalHeader()
        hh.setHighlightSections(False)
        hh.setSectionsClickable(True)
        hh.setSortIndicatorShown(True)
        hh.setStretchLastSection(False)
        hh.setMinimumSectionSize(24)
        hh.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.match_delegate = MatchDelegate(self)
        self.setItemDelegateForColumn(0, self.match_delegate)

    def setModel(self, model: Any) -> None:
        super().setModel(model)
        hh = self.horizontalHeader()
        for i, col in enumerate(COLUMNS):
            # The Memory column stretches over what the others leave: a wider window
            # shows more of each title.
            self.setColumnWidth(i, col.width)
            mode = QHeaderView.ResizeMode.Stretch if i == 0 else QHeaderView.ResizeMode.Interactive
            hh.setSectionResizeMode(i, mode)

    @property
    def painted(self) -> bool:
        return self._painted

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if self._painted:
            return
        model = self.model()
        if not isinstance(model, MemoryTableModel) or model.rowCount() == 0:
            return
        top = max(0, self.rowAt(0))
        if model.is_loaded(top):
            self._painted = True
            self.first_rows_painted.emit()
