"""The browser's detail panel: one memory with everything around it.

Content and title are editable (Save runs :func:`ui.ops.edit`, Revert puts back what
is stored); the type combo runs :func:`ui.ops.set_type`. Below: salience and the
confidence trajectory as a small chart, provenance (source, session, events, source
document and chunk, learning context, metadata), links both ways and the supersede
chain (click one to show it), and the audit entries that name this memory.

Everything is read off the UI thread in one ``ctx.read``; a sequence number drops
the answer for a memory that is no longer the one shown.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, QPointF, QRectF, QSignalBlocker, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QKeySequence,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
    QShortcut,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import AuditEntry, Session, project_name
from lexmem.errors import NotFoundError
from lexmem.models import Memory, MemoryType
from ui.table import shared_text

from . import ops
from .context import AppContext, UiChanges
from .table import MATCH_DARK, MATCH_LIGHT, alive, match_spans, submit_read, type_icon
from .theme import series_colour

if TYPE_CHECKING:
    from lexmem.api import Lexmem, MemoryDetail

__all__ = ["ConfidenceChart", "DetailData", "MemoryDetailPanel", "load_detail"]


@dataclass(slots=True)
class DetailData:
    """What the panel shows, read in one go off the UI thread."""

    detail: MemoryDetail
    titles: dict[str, str] = field(default_factory=dict)  # linked memories' titles
    audit: list[AuditEntry] = field(default_factory=list)
    session: Session | None = None  # the agent session it came from, when recorded
    shared_as: str | None = None  # the team's name for its project, when a team sees it


def load_detail(lm: Lexmem, memory_id: str) -> DetailData:
    """Read a memory, its links (with the other ends' titles), chain and audit entries."""
    detail = lm.detail(memory_id)
    others = {lk.to_id for lk in detail.links_from} | {lk.from_id for lk in detail.links_to}
    titles = {m.id: m.title for m in lm.memories_for(sorted(others))}
    audit = lm.audit_entries(memory_id=detail.memory.id, limit=50)
    sid = detail.memory.session_id
    session = lm.session(sid) if sid else None
    m = detail.memory
    shared = lm.shared_projects().get(m.project or "") if lm.is_shared(m) else None
    return DetailData(detail, titles, audit, session, shared)


#: How an agent is named to a person.
AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex", "mcp": "an MCP client", "app": "lexmem"}

#: Metadata a person has no use for: bookkeeping of capture (shown elsewhere or nowhere).
_HIDDEN_META = {
    "event_ids", "reinforce", "rule_text", "synthesised_by", "word_count",
    "classification",  # the Classified row says how; its reason is the classifier's jargon
}  # fmt: skip

#: Metadata keys in words, where the key alone does not say it.
_META_LABELS = {
    "candidate_kind": "Captured as",
    "context": "Said in reply to",
    "setting": "Setting",
    "speaker": "Said by",
    "llm_notes": "Model's notes",
    "old": "Was",
    "new": "Became",
}


#: The sessions lexmem's own paths write under (service/client.py, service/pipeline.py).
_OWN_SESSIONS = {"app": "lexmem's desktop app", "cli": "the lexmem command", "mcp": "an MCP client"}


def session_text(session: Session | None, session_id: str) -> str:
    """In words: "Claude Code in shop, 2026-11-27 14:02", not the session's id."""
    if session is None:
        if not session_id:
            return ""
        # "app", "cli-explicit", "tray-explicit", "mcp-ops": where it came from, in words.
        origin = session_id.removesuffix("-explicit").removesuffix("-ops")
        if origin == "tray":
            return "Quick remember"
        if origin in _OWN_SESSIONS:
            return _OWN_SESSIONS[origin]
        return f"session {session_id[:8]}"
    agent = AGENT_NAMES.get(session.agent, session.agent or "an agent")
    where = f" in {project_name(session.project)}" if session.project else ""
    return f"{agent}{where}, {_when(session.started_at)}"


#: What memories captured before lexmem wrote this in words carry: a rule id and a UUID.
_OLD_LEARNED = re.compile(r"^captured by \S+ from session \S+$")


#: A new version's learning context names the old one's id (Versions links to it by title).
_SUPERSEDES = re.compile(r"^supersedes [0-9a-f-]{8,}$")

#: How the type was decided, in words.
CLASSIFIED = {
    "rule_based": "by lexmem's rules",
    "llm_based": "by the language model",
    "explicit": "given when it was stored",
}


def _learned(text: str) -> str:
    if _OLD_LEARNED.match(text):
        return "captured during the session"
    if _SUPERSEDES.match(text):
        return "a new version of an older memory (see Versions)"
    return text


def _plural_events(n: int) -> str:
    return "one agent event" if n == 1 else f"{n} agent events"


def _meta_value(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_meta_value(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{_words(str(k))} {_meta_value(v)}" for k, v in value.items())
    text = (
        str(value).replace("_", " ") if isinstance(value, str) and " " not in value else str(value)
    )
    return text if len(text) <= 300 else text[:299] + "…"


def _words(key: str) -> str:
    return key.replace("_", " ").strip()


def metadata_lines(metadata: dict[str, object]) -> list[tuple[str, str]]:
    """The metadata a person can read, as (label, text) pairs in a stable order."""
    out = []
    for key in sorted(metadata):
        value = metadata[key]
        if key in _HIDDEN_META or value in (None, "", [], {}):
            continue
        label = _META_LABELS.get(key, _words(key)[:1].upper() + _words(key)[1:])
        out.append((label, _meta_value(value)))
    return out


def _when(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M") if value is not None else ""


class ConfidenceChart(QWidget):
    """The confidence trajectory as a line, with the current salience as a dashed rule."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._points: list[tuple[datetime, float]] = []
        self._salience: float | None = None
        self.setMinimumHeight(84)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_data(self, points: Sequence[tuple[datetime, float]], salience: float | None) -> None:
        self._points = sorted(points)
        self._salience = salience
        self.update()

    @property
    def points(self) -> list[tuple[datetime, float]]:
        return list(self._points)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        text = pal.color(QPalette.ColorRole.WindowText)
        fm = self.fontMetrics()
        left, top, right = fm.horizontalAdvance("1.0") + 8, fm.height() + 4, 8
        bottom = fm.height() + 4
        plot = QRectF(left, top, self.width() - left - right, self.height() - top - bottom)
        if plot.width() < 20 or plot.height() < 10:
            return
        grid = QColor(muted)
        grid.setAlpha(90)
        p.setPen(QPen(grid, 1))
        for v in (0.0, 0.5, 1.0):
            y = plot.bottom() - v * plot.height()
            p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            p.setPen(muted)
            box = QRectF(0, y - fm.height() / 2, left - 4, fm.height())
            right_v = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
            p.drawText(box, right_v, f"{v:.1f}")
            p.setPen(QPen(grid, 1))
        line = series_colour(0)
        sal = series_colour(2)
        # Legend, top right: what the two marks mean.
        legend_x = plot.right()
        for label, colour, dashed in (("salience", sal, True), ("confidence", line, False)):
            w = fm.horizontalAdvance(label)
            legend_x -= w
            p.setPen(text)
            p.drawText(QPointF(legend_x, fm.ascent()), label)
            legend_x -= 22
            pen = QPen(colour, 2, Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            p.setPen(pen)
            y = fm.ascent() - fm.xHeight() / 2
            p.drawLine(QPointF(legend_x, y), QPointF(legend_x + 16, y))
            legend_x -= 12
        if self._salience is not None:
            y = plot.bottom() - max(0.0, min(1.0, self._salience)) * plot.height()
            p.setPen(QPen(sal, 1.5, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
        if not self._points:
            p.setPen(muted)
            p.drawText(plot, Qt.AlignmentFlag.AlignCenter, "no confidence history")
            return
        t0 = self._points[0][0].timestamp()
        span = max(self._points[-1][0].timestamp() - t0, 1.0)

        def at(i: int) -> QPointF:
            when, value = self._points[i]
            x = plot.left() + (
                (when.timestamp() - t0) / span * plot.width()
                if len(self._points) > 1
                else plot.width() / 2
            )
            return QPointF(x, plot.bottom() - max(0.0, min(1.0, value)) * plot.height())

        path = QPainterPath(at(0))
        for i in range(1, len(self._points)):
            path.lineTo(at(i))
        if len(self._points) == 1:  # one value: it has held since it was recorded
            path = QPainterPath(QPointF(plot.left(), at(0).y()))
            path.lineTo(QPointF(plot.right(), at(0).y()))
        p.setPen(QPen(line, 2))
        p.drawPath(path)
        p.setBrush(line)
        for i in range(len(self._points)):
            p.drawEllipse(at(i), 3, 3)
        p.setPen(muted)
        first, last = self._points[0][0], self._points[-1][0]
        baseline = self.height() - fm.descent() - 1
        p.drawText(QPointF(plot.left(), baseline), first.astimezone().strftime("%Y-%m-%d"))
        if last.astimezone().date() != first.astimezone().date():
            label = last.astimezone().strftime("%Y-%m-%d")
            p.drawText(QPointF(plot.right() - fm.horizontalAdvance(label), baseline), label)


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "heading")
    return label


def _rich(parent: QWidget | None = None) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(
        Qt.TextInteractionFlag.LinksAccessibleByMouse
        | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        | Qt.TextInteractionFlag.TextSelectableByMouse
    )
    label.setOpenExternalLinks(False)
    return label


def _muted_html(text: str) -> str:
    return f"<i>{html.escape(text)}</i>"


class MemoryDetailPanel(QWidget):
    """One memory in full; edits go through :mod:`ui.ops`."""

    #: A link or chain entry was clicked: show that memory.
    memory_activated = Signal(str)
    #: A memory's detail is on screen (after each load).
    loaded = Signal(str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._id: str | None = None
        self._memory: Memory | None = None
        self._data: DetailData | None = None
        self._seq = 0
        self._query = ""  # the search whose words are marked in the text
        self._base_content = ""
        self._base_title = ""
        # One journal for the panel's life: opening its tables the first time takes the
        # store's write lock, which a read on every click should not.

        self.stack = QStackedWidget(self)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.stack)

        self.empty = QLabel("Select a memory to see it here.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setProperty("role", "muted")
        self.empty.setWordWrap(True)
        self.stack.addWidget(self.empty)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        # The panel fits its width (labels wrap) rather than scrolling sideways.
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        scroll.setWidget(body)
        self.stack.addWidget(scroll)
        self.scroll_area = scroll
        lay = QVBoxLayout(body)
        lay.setContentsMargins(10, 8, 10, 10)
        lay.setSpacing(6)

        self.title_edit = QLineEdit()
        self.title_edit.setPlaceholderText("Title")
        font = self.title_edit.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        font.setBold(True)
        self.title_edit.setFont(font)
        self.title_edit.textEdited.connect(self._update_buttons)
        lay.addWidget(self.title_edit)

        meta = QHBoxLayout()
        self.type_combo = QComboBox()
        for t in MemoryType:
            self.type_combo.addItem(type_icon(t.value), t.value, t.value)
        self.type_combo.setToolTip("Change the memory's type")
        self.type_combo.activated.connect(self._type_chosen)  # user choices only, no echo
        meta.addWidget(self.type_combo)
        self.status_chip = QLabel()
        self.status_chip.setProperty("role", "chip")
        meta.addWidget(self.status_chip)
        self.pin_chip = QLabel("★ pinned")
        self.pin_chip.setProperty("role", "chip")
        meta.addWidget(self.pin_chip)
        meta.addStretch(1)
        lay.addLayout(meta)

        self.editor = QPlainTextEdit()
        self.editor.setPlaceholderText("Content")
        self.editor.setMinimumHeight(120)
        self.editor.textChanged.connect(self._update_buttons)
        self.editor.textChanged.connect(self._mark_matches)  # marks follow an edit
        lay.addWidget(self.editor, 2)
        buttons = QHBoxLayout()
        self.hint = QLabel("Ctrl+S saves")
        self.hint.setProperty("role", "muted")
        buttons.addWidget(self.hint)
        buttons.addStretch(1)
        self.revert_button = QPushButton("Revert")
        self.revert_button.setToolTip("Put back the stored text")
        self.revert_button.clicked.connect(self.revert)
        self.save_button = QPushButton("Save")
        self.save_button.setToolTip("Save the edited title and content (Ctrl+S)")
        self.save_button.clicked.connect(self.save)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.save_button)
        lay.addLayout(buttons)
        save = QShortcut(QKeySequence.StandardKey.Save, self)
        save.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        save.activated.connect(self.save)

        lay.addWidget(_heading("Salience and confidence"))
        self.salience_label = QLabel()
        self.salience_label.setWordWrap(True)
        lay.addWidget(self.salience_label)
        self.chart = ConfidenceChart()
        lay.addWidget(self.chart)

        lay.addWidget(_heading("Provenance"))
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        self.form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self._fields: dict[str, QLabel] = {}
        for key, label in (
            ("id", "Id"), ("source", "Source"), ("session", "Session"),
            ("conversation", "Conversation"),
            ("events", "Source events"), ("document", "Document"), ("learned", "Learned"),
            ("capture", "Capture mode"), ("classified", "Classified"), ("project", "Project"),
            ("team", "Team"),
            ("created", "Created"), ("updated", "Updated"), ("accessed", "Accessed"),
            ("metadata", "Metadata"),
        ):  # fmt: skip
            value = QLabel()
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
            # What a memory says is shown as it is; only the metadata list is formatted.
            value.setTextFormat(
                Qt.TextFormat.RichText if key == "metadata" else Qt.TextFormat.PlainText
            )
            self._fields[key] = value
            self.form.addRow(label, value)
        lay.addLayout(self.form)

        lay.addWidget(_heading("Links"))
        self.links_label = _rich()
        self.links_label.linkActivated.connect(self.memory_activated)
        lay.addWidget(self.links_label)
        lay.addWidget(_heading("Versions"))
        self.chain_label = _rich()
        self.chain_label.linkActivated.connect(self.memory_activated)
        lay.addWidget(self.chain_label)
        lay.addWidget(_heading("Audit"))
        self.audit_label = _rich()
        lay.addWidget(self.audit_label)
        lay.addStretch(1)

        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.error_label.setProperty("role", "muted")
        self.stack.addWidget(self.error_label)

        ctx.hub.changed.connect(self._on_changed)
        self._update_buttons()

    # -- public --------------------------------------------------------------------

    @property
    def memory_id(self) -> str | None:
        return self._id

    @property
    def data(self) -> DetailData | None:
        """What is on screen (None before the first load)."""
        return self._data

    def set_query(self, query: str) -> None:
        """Mark ``query``'s words in the memory's text, as the table marks its titles."""
        if query != self._query:
            self._query = query
            self._mark_matches()

    def _mark_matches(self) -> None:
        marks = []
        if self._query:
            dark = self.palette().color(QPalette.ColorRole.Base).lightness() < 128
            colour = MATCH_DARK if dark else MATCH_LIGHT
            doc = self.editor.document()
            for start, end in match_spans(self.editor.toPlainText(), self._query):
                mark = QTextEdit.ExtraSelection()
                cursor = QTextCursor(doc)
                cursor.setPosition(start)
                cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
                mark.cursor = cursor  # type: ignore[attr-defined]
                mark.format.setBackground(colour)  # type: ignore[attr-defined]
                marks.append(mark)
        self.editor.setExtraSelections(marks)

    def show_memory(self, memory_id: str | None) -> None:
        """Show ``memory_id`` (None: nothing). Unsaved edits of the one shown are saved
        first: switching rows must not lose what the person typed."""
        if memory_id == self._id:
            return
        if self.is_dirty():
            self.save()
        self._id = memory_id
        if memory_id is None:
            self._seq += 1
            self._data = self._memory = None
            self.stack.setCurrentWidget(self.empty)
            return
        self.reload()

    def reload(self) -> None:
        mid = self._id
        if mid is None:
            return
        self._seq += 1
        seq = self._seq
        lm = self.ctx.lm
        submit_read(
            self.ctx.read,
            lambda: load_detail(lm, mid),
            lambda data: self._show(seq, data),
            lambda exc: self._failed(seq, mid, exc),
        )

    def focus_editor(self) -> None:
        """The caret in the editor, with the editor scrolled into view (F2, a double
        click)."""
        self.editor.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.editor.ensureCursorVisible()
        body = self.scroll_area.widget()
        bar = self.scroll_area.verticalScrollBar()
        top = self.editor.mapTo(body, QPoint(0, 0)).y() if body is not None else 0
        if not bar.value() <= top < bar.value() + max(1, self.scroll_area.viewport().height() - 24):
            bar.setValue(max(0, top - 8))  # the editor's top, a little below the edge

    def is_dirty(self) -> bool:
        if self._memory is None:
            return False
        return (
            self.editor.toPlainText() != self._base_content
            or self.title_edit.text() != self._base_title
        )

    def save(self) -> None:
        """Save the edited title and content (one undoable edit)."""
        if self._memory is None or not self.is_dirty():
            return
        content = self.editor.toPlainText()
        title = self.title_edit.text()
        ops.edit(
            self.ctx,
            self._memory.id,
            content=content if content != self._base_content else None,
            title=title if title != self._base_title else None,
        )
        # Saved as far as the panel goes; the reload after the change shows what the
        # store kept (secrets scrubbed, a derived title).
        self._base_content, self._base_title = content, title
        self._update_buttons()

    def revert(self) -> None:
        if self._memory is None:
            return
        with QSignalBlocker(self.editor), QSignalBlocker(self.title_edit):
            self.editor.setPlainText(self._base_content)
            self.title_edit.setText(self._base_title)
        self._mark_matches()
        self._update_buttons()

    # -- loading -------------------------------------------------------------------

    def _on_changed(self, changes: UiChanges) -> None:
        if self._id is None:
            return
        m = changes.memories
        mine = self._id in changes.touched
        related = self._data is not None and bool(
            changes.touched & _related_ids(self._data)
        )  # fmt: skip
        if mine or related or m.links or changes.audit:
            self.reload()

    def _failed(self, seq: int, memory_id: str, exc: BaseException) -> None:
        if not alive(self) or seq != self._seq:
            return
        self._data = self._memory = None
        if isinstance(exc, NotFoundError):
            self.error_label.setText(f"Memory {memory_id[:8]} is gone: it was forgotten.")
        else:
            self.error_label.setText(f"Could not read memory {memory_id[:8]}: {exc}")
        self.stack.setCurrentWidget(self.error_label)

    def _show(self, seq: int, data: DetailData) -> None:
        if not alive(self) or seq != self._seq:
            return  # an older request: another memory is wanted now
        d = data.detail
        m = d.memory
        same = self._memory is not None and self._memory.id == m.id
        keep_edits = same and self.is_dirty()
        if not same:  # another memory: from its top, not where the last one was scrolled
            self.scroll_area.verticalScrollBar().setValue(0)
        self._data, self._memory = data, m
        with QSignalBlocker(self.editor), QSignalBlocker(self.title_edit):
            if not keep_edits:
                self.editor.setPlainText(m.content)
                self.title_edit.setText(m.title)
                self.title_edit.setCursorPosition(0)  # show a long title's beginning
                self.title_edit.setToolTip(m.title)  # and the whole of it on hover
        self._mark_matches()
        self._base_content, self._base_title = m.content, m.title
        with QSignalBlocker(self.type_combo):
            self.type_combo.setCurrentIndex(max(0, self.type_combo.findData(str(m.type))))
        self.status_chip.setText(str(m.status))
        self.pin_chip.setVisible(m.pinned)

        used = f"returned by searches {m.access_count}×" if m.access_count else "never searched"
        bits = [
            f"salience <b>{m.salience:.2f}</b>",
            f"importance {m.importance:.2f}",
            f"confidence {m.confidence:.2f}",
            used,
        ]
        points = [(p.recorded_at, p.confidence) for p in d.confidence]
        self.chart.set_data(points, m.salience)
        # One recorded value is no trajectory: a sentence says it, the chart waits for a
        # second value (a reinforcement, a correction, a review).
        changed = len({round(v, 3) for _, v in points}) > 1
        self.chart.setVisible(changed)
        if points and not changed:
            bits[2] = f"confidence {m.confidence:.2f}, unchanged since {_when(points[0][0])}"
        self.salience_label.setText(" · ".join(bits))

        events = m.metadata.get("event_ids") if isinstance(m.metadata, dict) else None
        document = m.source_document or (m.chunk.file_path if m.chunk else "")
        if m.chunk is not None:
            document = f"{document} — chunk {m.chunk.chunk_index + 1} of {m.chunk.total_chunks}"
        meta = metadata_lines(m.metadata) if isinstance(m.metadata, dict) else []
        meta_text = "<br>".join(
            f"{html.escape(label)}: {html.escape(text)}" for label, text in meta
        )  # fmt: skip
        values = {
            "id": m.id,
            "source": str(m.source).replace("_", " "),
            "session": session_text(data.session, m.session_id or ""),
            "conversation": m.conversation_id or "",
            "events": _plural_events(len(events)) if events else "",
            "document": document,
            "learned": _learned(m.learning_context or ""),
            "capture": m.capture_mode or "",
            "classified": CLASSIFIED.get(str(m.classification_method), "")
            or str(m.classification_method),
            "project": project_name(m.project),
            "team": shared_text(data.shared_as) if data.shared_as is not None else "",
            "created": _when(m.created_at),
            "updated": _when(m.updated_at),
            "accessed": _when(m.last_accessed_at) if m.access_count else "",
            "metadata": meta_text,
        }
        self._fields["project"].setToolTip(m.project or "")
        self._fields["session"].setToolTip(m.session_id or "")
        for row, (key, label) in enumerate(self._fields.items()):
            label.setText(values[key])
            # Only what this memory has: a hand-written note has no session or document.
            self.form.setRowVisible(row, bool(values[key]))

        self.links_label.setText(self._links_html(data))
        self.chain_label.setText(self._chain_html(d.newer, d.older))
        self.audit_label.setText(self._audit_html(data.audit))
        self.stack.setCurrentIndex(1)
        self._update_buttons()
        self.loaded.emit(m.id)

    def _link(self, memory_id: str, title: str) -> str:
        return f'<a href="{html.escape(memory_id)}">{html.escape(title or memory_id[:8])}</a>'

    def _links_html(self, data: DetailData) -> str:
        d = data.detail
        rows = []
        for lk in d.links_from:
            title = data.titles.get(lk.to_id, lk.to_id[:8])
            rows.append(f"→ {html.escape(lk.link_type)} {self._link(lk.to_id, title)}")
        for lk in d.links_to:
            title = data.titles.get(lk.from_id, lk.from_id[:8])
            rows.append(f"← {html.escape(lk.link_type)} from {self._link(lk.from_id, title)}")
        return "<br>".join(rows) if rows else _muted_html("No links.")

    def _chain_html(self, newer: list[Memory], older: list[Memory]) -> str:
        rows = []
        for m in newer:
            rows.append(f"Replaced by {self._link(m.id, m.title)} ({html.escape(str(m.status))})")
        for m in older:
            rows.append(f"Replaces {self._link(m.id, m.title)} ({html.escape(str(m.status))})")
        return "<br>".join(rows) if rows else _muted_html("The only version.")

    def _audit_html(self, entries: list[AuditEntry]) -> str:
        if not entries:
            return _muted_html("No audit entries.")
        rows = []
        for e in entries:
            # The reason in words; the rule's id is for the Audit tab, not for reading.
            why = e.reason or _words(e.kind)
            rows.append(
                f"{_when(e.timestamp)} &nbsp;<b>{html.escape(e.decision)}</b> {html.escape(why)}"
            )
        return "<br>".join(rows)

    # -- editing -------------------------------------------------------------------

    def _update_buttons(self) -> None:
        dirty = self.is_dirty()
        self.save_button.setEnabled(dirty)
        self.revert_button.setEnabled(dirty)
        self.hint.setVisible(dirty)

    def _type_chosen(self, index: int) -> None:
        if self._memory is None:
            return
        value = str(self.type_combo.itemData(index))
        if value != str(self._memory.type):
            ops.set_type(self.ctx, [self._memory.id], value)


def _related_ids(data: DetailData) -> set[str]:
    d = data.detail
    out = set(data.titles)
    out.update(m.id for m in d.newer)
    out.update(m.id for m in d.older)
    return out
