"""Searching from the Memories page: what is listed, the words marked, the Memory column.

Real core, real model, real runner threads, offscreen Qt; the store is
tests/search_corpus.py (47 memories in three projects, four captured sessions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem
from search_corpus import ANSWER, QUESTION, populate

import ui.table
from lexmem.models import Memory
from ui.browser import MemoriesPage
from ui.context import AppContext
from ui.table import MATCH_LIGHT, MATCH_ROLE, MemoryTableModel, MemoryTableView

WAIT = 30_000  # generous: a loaded 2-core machine; the waits end as soon as it is true
LONG_TITLE = (
    "Checkout totals are rounded per line, not per order, so that the invoices match the ledger"
)


def _settle(qtbot: Any, page: MemoriesPage) -> None:
    qtbot.waitUntil(lambda: not page.busy and page.ctx.runner.pending == 0, timeout=WAIT)


def _page(qtbot: Any, ctx: AppContext, width: int, height: int) -> MemoriesPage:
    page = MemoriesPage(ctx)
    qtbot.addWidget(page)
    page.resize(width, height)
    page.show()
    _settle(qtbot, page)
    return page


def _row_texts(page: MemoriesPage) -> list[str]:
    return [
        str(page.model.data(page.model.index(r, 0), Qt.ItemDataRole.DisplayRole))
        for r in range(page.model.rowCount())
    ]


def _marked(image: QImage, rect: QRect) -> int:
    """Pixels of the light theme's match marker (over white or the alternate row)."""
    n = 0
    for y in range(rect.top(), rect.bottom()):
        for x in range(rect.left(), rect.right()):
            c = image.pixelColor(x, y)
            n += c.red() > 230 and 200 < c.green() < 245 and c.blue() < 170
    return n


def test_a_question_lists_the_answer_first_and_marks_the_words_it_matched(
    qtbot: Any, ctx: AppContext
) -> None:
    ids = populate(ctx.lm)
    page = _page(qtbot, ctx, 1280, 800)
    assert page.model.rowCount() == 47

    page.set_query(QUESTION)
    _settle(qtbot, page)
    texts = _row_texts(page)
    # Not half the store: what shares the question's words or its meaning.
    assert 1 <= len(texts) <= 8, texts
    assert page.count_label.text() == f"{len(texts)} match{'es' if len(texts) > 1 else ''}"
    assert page.model.ids[0] == ids["answer"] and texts[0] == ANSWER
    assert ids["handoff"] in page.model.ids[1:]
    assert not any("British spelling" in t or "Django" in t for t in texts)

    # The title cell knows where the question's words are: "shop", "uses" (stemmed).
    spans = page.model.data(page.model.index(0, 0), MATCH_ROLE)
    assert [ANSWER[a:b] for a, b in spans] == ["shop", "uses"]
    # ... and the view paints a marker behind them, in the row's title cell only.
    page.view.clearSelection()
    image = page.view.viewport().grab().toImage()
    assert _marked(image, page.view.visualRect(page.model.index(0, 0))) > 30
    for column in range(1, page.model.columnCount()):
        assert _marked(image, page.view.visualRect(page.model.index(0, column))) == 0
    assert MATCH_LIGHT.alpha() < 255  # translucent: the selection shows through

    # The detail panel marks the same words in the memory's text.
    page.select(ids["answer"])
    qtbot.waitUntil(
        lambda: page.detail.data is not None and page.detail.data.detail.memory.id == ids["answer"],
        timeout=WAIT,
    )
    editor = page.detail.editor
    marked = [editor.toPlainText()[s.cursor.selectionStart() : s.cursor.selectionEnd()]
              for s in editor.extraSelections()]  # fmt: skip
    assert marked and {w.lower() for w in marked} <= {"shop", "uses", "database"}, marked

    # Without a search nothing is marked.
    page.set_query("")
    _settle(qtbot, page)
    assert page.model.rowCount() == 47
    assert page.model.data(page.model.index(0, 0), MATCH_ROLE) == []
    assert editor.extraSelections() == []


def test_the_memory_column_takes_the_width_the_others_leave(qtbot: Any, ctx: AppContext) -> None:
    ctx.lm.remember("Round per line.", title=LONG_TITLE, project="shop")
    page = _page(qtbot, ctx, 1600, 900)
    view = page.view
    qtbot.waitUntil(lambda: page.model.is_loaded(0), timeout=WAIT)
    width = view.columnWidth(0)
    others = [view.columnWidth(i) for i in range(1, page.model.columnCount())]
    assert width >= 0.5 * view.viewport().width(), (width, others)
    assert width > 3 * max(others)
    # A 90-character title is shown whole at 1600 px.
    opt = QStyleOptionViewItem()
    view.itemDelegateForColumn(0).initStyleOption(opt, page.model.index(0, 0))
    text = str(page.model.data(page.model.index(0, 0)))
    assert text == LONG_TITLE and len(text) == 90
    room = width - 2 * (view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin) + 1)
    assert opt.fontMetrics.horizontalAdvance(text) <= room  # type: ignore[attr-defined]
    # The whole title in the tooltip too, even when the column must elide it.
    tip = str(page.model.data(page.model.index(0, 0), Qt.ItemDataRole.ToolTipRole))
    assert tip.startswith(LONG_TITLE) and "Round per line." in tip

    # Wider still: the Memory column takes all of it; the other columns keep their width.
    page.resize(1900, 900)
    qtbot.waitUntil(lambda: view.columnWidth(0) > width + 200, timeout=WAIT)
    assert [view.columnWidth(i) for i in range(1, page.model.columnCount())] == others
    assert QColor(MATCH_LIGHT).isValid()


def test_marking_10000_results_reads_only_the_rows_painted(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Constraint: the marks are found when a row is painted, never for the whole list."""
    found: list[str] = []
    real = ui.table.match_spans

    def spans(text: str, query: str) -> list[tuple[int, int]]:
        found.append(text)
        return real(text, query)

    def read(fn: Callable[[], Any], done: Any, failed: Any) -> None:
        done(fn())  # synchronous: invented rows, no store

    def fetch(part: Sequence[str]) -> list[Memory]:
        return [Memory(content=f"The shop's database number {i}", id=i) for i in part]

    monkeypatch.setattr(ui.table, "match_spans", spans)
    model = MemoryTableModel(read, fetch)
    view = MemoryTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    view.resize(900, 600)
    view.show()
    ids = [str(i) for i in range(10_000)]
    model.set_ids(ids, query="which database does the shop use")
    qtbot.waitUntil(lambda: model.is_loaded(0) and bool(found), timeout=WAIT)
    view.viewport().grab()
    shown = view.rowAt(view.viewport().height() - 1) - view.rowAt(0) + 1
    assert 0 < len(set(found)) <= shown + 2 * ui.table.MARGIN
    assert model.data(model.index(0, 0), MATCH_ROLE) == [(4, 8), (11, 19)]
