"""The memory browser's Memories page: real core, real model, real runner threads.

Everything is waited for with ``qtbot.waitUntil``/``waitSignal`` (no sleeps, no clock);
the 100,000-memory store is built once for the module, straight into the table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QTableView

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.models import Memory, MemoryStatus
from ui import ops
from ui.browser import LinkDialog, MemoriesPage, SupersedeDialog, memory_markdown
from ui.context import AppContext, UiChanges
from ui.table import COLUMNS, MARGIN, PLACEHOLDER, MemoryTableModel, plan_ids

WAIT = 30_000  # generous: a loaded 2-core machine; the waits end as soon as it is true


def _settle(qtbot: Any, page: MemoriesPage) -> None:
    """Wait until the page reads nothing and has nothing due (queries, rows, detail)."""
    qtbot.waitUntil(lambda: not page.busy and page.ctx.runner.pending == 0, timeout=WAIT)


@pytest.fixture
def page(qtbot: Any, ctx: AppContext) -> Iterator[MemoriesPage]:
    p = MemoriesPage(ctx)
    qtbot.addWidget(p)
    p.resize(1100, 700)
    p.show()
    _settle(qtbot, p)
    yield p
    # pytest-qt has closed the page by now; let reads it started finish before ctx closes.
    qtbot.waitUntil(lambda: ctx.runner.pending == 0, timeout=WAIT)


def _wait_changed(qtbot: Any, page: MemoriesPage, start: Callable[[], Any]) -> UiChanges:
    """Start a write once the page is quiet, and wait for its one change signal.

    Constraint: ``MemoryStore._writing`` iterates its table-handle dict while a reader
    thread may add to it ("dictionary changed size during iteration"); until the store
    guards that, writes here never overlap the page's own reads.
    """
    _settle(qtbot, page)
    seen: list[UiChanges] = []
    errors: list[str] = []
    page.ctx.hub.changed.connect(seen.append)
    page.ctx.hub.error.connect(errors.append)
    try:
        with qtbot.waitSignal(page.ctx.hub.changed, timeout=WAIT):
            start()
    finally:
        page.ctx.hub.changed.disconnect(seen.append)
        page.ctx.hub.error.disconnect(errors.append)
    assert not errors, errors
    return seen[0]


def _remember(qtbot: Any, page: MemoriesPage, text: str, **kw: Any) -> str:
    c = _wait_changed(qtbot, page, lambda: ops.remember(page.ctx, text, **kw))
    return c.memories.created[0]


def _shown(qtbot: Any, page: MemoriesPage, *ids: str) -> None:
    qtbot.waitUntil(lambda: all(page.model.row_of(i) is not None for i in ids), timeout=WAIT)
    _settle(qtbot, page)


def _select(qtbot: Any, page: MemoriesPage, *ids: str) -> None:
    _shown(qtbot, page, *ids)
    sel = page.view.selectionModel()
    sel.clearSelection()
    flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
    for i in ids:
        row = page.model.row_of(i)
        assert row is not None
        sel.select(page.model.index(row, 0), flags)
    first = page.model.row_of(ids[0])
    assert first is not None
    sel.setCurrentIndex(page.model.index(first, 0), QItemSelectionModel.SelectionFlag.NoUpdate)
    # Actions need the rows read (archive vs restore, pin vs unpin).
    qtbot.waitUntil(lambda: all(page.model.memory(i) is not None for i in ids), timeout=WAIT)
    assert page.selected_ids() == sorted(ids, key=lambda i: page.model.row_of(i) or 0)


def _title_at(page: MemoriesPage, row: int) -> Any:
    return page.model.data(page.model.index(row, 0))


# -- search ------------------------------------------------------------------------------


def test_quick_remember_is_found_by_typing(qtbot: Any, ctx: AppContext, page: MemoriesPage) -> None:
    other = _remember(qtbot, page, "Run the linter with ruff before each commit")
    mid = _remember(qtbot, page, "The staging database runs on port 5433")
    _shown(qtbot, page, mid, other)  # the capture's change re-queried the ids
    assert page.count_label.text() == "2 memories"

    qtbot.keyClicks(page.search_box, "staging database port")
    qtbot.waitUntil(lambda: page.model.id_at(0) == mid, timeout=WAIT)
    _settle(qtbot, page)
    assert "match" in page.count_label.text()
    qtbot.waitUntil(lambda: _title_at(page, 0) != PLACEHOLDER, timeout=WAIT)
    assert _title_at(page, 0) == "The staging database runs on port 5433"
    assert page.current_sort() == "relevance"
    # Constraint: the UI never writes through a search (the service is the one writer).
    assert ctx.lm.get(mid).access_count == 0


def test_a_newer_query_wins_over_an_older_one(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    deploy = _remember(qtbot, page, "Deploys go out on Tuesdays after the standup")
    lint = _remember(qtbot, page, "Run the linter with ruff before each commit")
    _shown(qtbot, page, deploy, lint)
    answers: list[int] = []
    page.results_changed.connect(answers.append)
    page.set_query("deploys tuesday standup")
    page.set_query("ruff linter commit")  # while the first still runs
    _settle(qtbot, page)
    assert page.model.id_at(0) == lint
    assert page.search_box.text() == "ruff linter commit"
    assert len(answers) == 1  # the older answer was dropped, not shown then replaced


def test_filters_narrow_the_results(qtbot: Any, ctx: AppContext, page: MemoriesPage) -> None:
    a = _remember(qtbot, page, "The billing service uses PostgreSQL 16", project="billing")
    b = _remember(qtbot, page, "To release, tag then run make publish", mtype="procedural")
    c = _remember(qtbot, page, "Alice prefers short pull requests", pin=True, project="team")
    _shown(qtbot, page, a, b, c)

    page.type_filter.setCurrentIndex(page.type_filter.findData("procedural"))
    qtbot.waitUntil(lambda: page.model.ids == [b], timeout=WAIT)
    page.type_filter.setCurrentIndex(0)
    qtbot.waitUntil(lambda: len(page.model.ids) == 3, timeout=WAIT)

    page.pinned_filter.setCurrentIndex(page.pinned_filter.findData(True))
    qtbot.waitUntil(lambda: page.model.ids == [c], timeout=WAIT)
    page.pinned_filter.setCurrentIndex(0)

    qtbot.waitUntil(lambda: page.project_filter.findText("billing") >= 0, timeout=WAIT)
    page.project_filter.setCurrentText("billing")
    qtbot.waitUntil(lambda: page.model.ids == [a], timeout=WAIT)
    page.project_filter.setCurrentText("")
    qtbot.waitUntil(lambda: len(page.model.ids) == 3, timeout=WAIT)

    # A search under a filter: only the filter's memories can match.
    page.source_filter.setCurrentIndex(page.source_filter.findData("explicit"))
    page.set_query("pull requests")
    qtbot.waitUntil(lambda: page.model.id_at(0) == c, timeout=WAIT)
    page.set_query("")

    today = page.date_from.date().currentDate()
    page.date_from.setDate(today.addDays(1))
    qtbot.waitUntil(lambda: page.model.ids == [] and not page.busy, timeout=WAIT)
    page.date_from.setDate(today)
    qtbot.waitUntil(lambda: len(page.model.ids) == 3, timeout=WAIT)
    page.date_to.setDate(today.addDays(-1))
    qtbot.waitUntil(lambda: page.model.ids == [] and not page.busy, timeout=WAIT)

    page.reset_filters()
    qtbot.waitUntil(lambda: len(page.model.ids) == 3, timeout=WAIT)
    assert page.current_filter().status == MemoryStatus.ACTIVE


# -- actions -----------------------------------------------------------------------------


def test_pin_archive_restore_and_undo_through_actions(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    a = _remember(qtbot, page, "Deploys go out on Tuesdays after the standup")
    b = _remember(qtbot, page, "Run the linter with ruff before each commit")
    _select(qtbot, page, a)
    assert page.act_pin.text() == "Pin" and page.act_pin.isEnabled()
    _wait_changed(qtbot, page, page.act_pin.trigger)
    assert ctx.lm.get(a).pinned
    qtbot.waitUntil(lambda: page.act_pin.text() == "Unpin", timeout=WAIT)  # the row re-read
    assert page.act_undo.text() == "Undo pin memory" and page.act_undo.isEnabled()
    _wait_changed(qtbot, page, page.act_undo.trigger)
    assert not ctx.lm.get(a).pinned
    assert page.act_undo.text() == "Undo remember"  # the action before, next in line

    # Two at once: archived memories leave the "active" list.
    _select(qtbot, page, a, b)
    _wait_changed(qtbot, page, page.act_archive.trigger)
    assert {ctx.lm.get(i).status for i in (a, b)} == {MemoryStatus.ARCHIVED}
    qtbot.waitUntil(lambda: page.model.ids == [], timeout=WAIT)

    page.status_filter.setCurrentIndex(page.status_filter.findData("archived"))
    _select(qtbot, page, b)
    assert page.act_restore.isEnabled() and not page.act_archive.isEnabled()
    _wait_changed(qtbot, page, page.act_restore.trigger)
    assert ctx.lm.get(b).status == MemoryStatus.ACTIVE
    qtbot.waitUntil(lambda: page.model.ids == [a], timeout=WAIT)
    assert "Restored 1 memory" in page.status_label.text()


def test_keyboard_shortcut_pins_the_selection(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    a = _remember(qtbot, page, "The staging database runs on port 5433")
    _select(qtbot, page, a)
    page.activateWindow()
    page.view.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is page.view, timeout=WAIT)
    _wait_changed(
        qtbot,
        page,
        lambda: qtbot.keyClick(page.view, Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier),
    )
    assert ctx.lm.get(a).pinned


def test_supersede_with_a_new_version_and_by_an_existing_memory(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    old = _remember(qtbot, page, "The API rate limit is 100 requests per minute")
    _select(qtbot, page, old)
    page.act_supersede.trigger()
    dlg = page.dialog
    assert isinstance(dlg, SupersedeDialog)
    assert not dlg.ok.isEnabled()  # the unchanged text is no new version
    dlg.text.setPlainText("The API rate limit is 500 requests per minute")
    assert dlg.ok.isEnabled()
    c = _wait_changed(qtbot, page, dlg.ok.click)
    new = c.memories.created[0]
    assert ctx.lm.get(old).status == MemoryStatus.SUPERSEDED
    assert ctx.lm.get(old).superseded_by == new
    qtbot.waitUntil(lambda: page.model.ids == [new], timeout=WAIT)
    assert page.dialog is None

    # Undo brings the old one back and drops the new version.
    _wait_changed(qtbot, page, page.act_undo.trigger)
    qtbot.waitUntil(lambda: page.model.ids == [old], timeout=WAIT)

    other = _remember(qtbot, page, "Rate limits: 500 requests a minute since the May upgrade")
    _select(qtbot, page, old)
    page.act_supersede.trigger()
    dlg = page.dialog
    assert isinstance(dlg, SupersedeDialog)
    dlg.tabs.setCurrentWidget(dlg.picker)
    with qtbot.waitSignal(dlg.picker.results_ready, timeout=WAIT):
        dlg.picker.set_query("May upgrade rate limits")
    assert dlg.picker.picked == other and dlg.choice() == (other, None)
    _wait_changed(qtbot, page, dlg.ok.click)
    assert ctx.lm.get(old).superseded_by == other


def test_edit_in_the_detail_panel_then_forget(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    a = _remember(qtbot, page, "Deploys go out on Tuesdays after the standup")
    b = _remember(qtbot, page, "Run the linter with ruff before each commit")
    _select(qtbot, page, a)
    page.act_edit.trigger()
    qtbot.waitUntil(lambda: page.detail.memory_id == a and page.detail.data is not None)
    assert not page.detail.save_button.isEnabled()
    page.detail.editor.setPlainText("Deploys go out on Wednesdays after the standup")
    assert page.detail.save_button.isEnabled()
    _wait_changed(qtbot, page, page.detail.save_button.click)
    assert ctx.lm.get(a).content == "Deploys go out on Wednesdays after the standup"
    qtbot.waitUntil(lambda: "Wednesdays" in str(_title_at(page, page.model.row_of(a) or 0)))
    assert not page.detail.is_dirty()

    combo = page.detail.type_combo
    target = next(t for t in ("semantic", "procedural") if t != str(ctx.lm.get(a).type))

    def choose() -> None:  # as a person picking from the combo: current index, then activated
        combo.setCurrentIndex(combo.findData(target))
        combo.activated.emit(combo.currentIndex())

    _wait_changed(qtbot, page, choose)
    assert str(ctx.lm.get(a).type) == target

    _select(qtbot, page, a, b)
    page.act_forget.trigger()
    qtbot.waitUntil(lambda: isinstance(page.dialog, QMessageBox))  # asked once read off the loop
    box = page.dialog
    assert isinstance(box, QMessageBox)
    assert "cannot be undone" in box.text()
    forget = next(btn for btn in box.buttons() if btn.text() == "Forget")
    c = _wait_changed(qtbot, page, forget.click)
    assert set(c.memories.deleted) == {a, b}
    qtbot.waitUntil(lambda: page.model.ids == [], timeout=WAIT)
    # Both gone from the list: the detail panel shows nothing rather than a memory that
    # is no longer there (issue 18, defect 4).
    qtbot.waitUntil(
        lambda: (
            page.detail.memory_id is None and page.detail.stack.currentWidget() is page.detail.empty
        )
    )


def test_copy_as_markdown(qtbot: Any, ctx: AppContext, page: MemoriesPage) -> None:
    a = _remember(qtbot, page, "The staging database runs on port 5433", project="infra")
    b = _remember(qtbot, page, "Run the linter with ruff before each commit")
    _select(qtbot, page, a, b)
    QApplication.clipboard().clear()
    page.act_copy.trigger()
    qtbot.waitUntil(lambda: a in QApplication.clipboard().text(), timeout=WAIT)
    text = QApplication.clipboard().text()
    assert "### The staging database runs on port 5433" in text
    assert "project: infra" in text and b in text
    assert memory_markdown(ctx.lm.get(b)) in text


def test_detail_shows_links_chain_and_audit(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    a = _remember(qtbot, page, "The deploy script needs the staging database")
    b = _remember(qtbot, page, "The staging database runs on port 5433")
    _select(qtbot, page, a)
    page.act_link.trigger()
    dlg = page.dialog
    assert isinstance(dlg, LinkDialog)
    with qtbot.waitSignal(dlg.picker.results_ready, timeout=WAIT):
        dlg.picker.set_query("staging database port")
    assert dlg.picker.picked == b
    dlg.link_type.setCurrentText("depends_on")
    _wait_changed(qtbot, page, dlg.ok.click)
    new_b = _wait_changed(
        qtbot, page, lambda: ops.supersede(ctx, b, with_text="The staging database runs on 6543")
    ).memories.created[0]
    _settle(qtbot, page)
    assert page.model.row_of(b) is None  # superseded: out of the "active" list

    page.select(a)
    qtbot.waitUntil(
        lambda: page.detail.data is not None and bool(page.detail.data.detail.links_from)
    )
    data = page.detail.data
    assert data is not None
    assert [(lk.to_id, lk.link_type) for lk in data.detail.links_from] == [(b, "depends_on")]
    assert "depends_on" in page.detail.links_label.text()
    assert "The staging database runs on port 5433" in page.detail.links_label.text()
    assert [e.decision for e in data.audit] == ["saved"]
    assert "saved" in page.detail.audit_label.text()

    # Clicking the link shows the linked memory, though it is superseded (filtered out).
    page.detail.links_label.linkActivated.emit(b)
    qtbot.waitUntil(lambda: page.model.row_of(b) is not None and page.selected_ids() == [b])
    assert page.current_filter().status is None  # widened to every status to show it
    qtbot.waitUntil(lambda: page.detail.data is not None and page.detail.data.detail.memory.id == b)
    data = page.detail.data
    assert [m.id for m in data.detail.newer] == [new_b]
    assert "Replaced by" in page.detail.chain_label.text()
    assert {(lk.from_id, lk.link_type) for lk in data.detail.links_to} == {
        (a, "depends_on"),
        (new_b, "supersedes"),
    }


def test_a_capture_keeps_the_selection_without_a_reset(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    a = _remember(qtbot, page, "Deploys go out on Tuesdays after the standup")
    _select(qtbot, page, a)
    resets: list[int] = []
    page.model.modelReset.connect(lambda: resets.append(1))
    new = _remember(qtbot, page, "Run the linter with ruff before each commit")
    qtbot.waitUntil(lambda: page.model.ids == [new, a], timeout=WAIT)
    assert page.selected_ids() == [a]
    assert resets == []


# -- the model -------------------------------------------------------------------------------


def _fake_model(qtbot: Any, ids: list[str]) -> tuple[MemoryTableModel, QTableView]:
    """A model over invented rows: the fetch and the "read" are synchronous here."""

    def read(fn: Callable[[], Any], done: Any, failed: Any) -> None:
        done(fn())

    model = MemoryTableModel(read, lambda part: [Memory(content=f"row {i}", id=i) for i in part])
    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    model.set_ids(ids)
    return model, view


def test_model_applies_a_new_id_list_as_moves_not_a_reset(qtbot: Any) -> None:
    model, view = _fake_model(qtbot, ["a", "b", "c", "d", "e"])
    resets: list[int] = []
    model.modelReset.connect(lambda: resets.append(1))
    sel = view.selectionModel()
    flags = (
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
    )
    sel.select(model.index(2, 0), flags)  # "c"

    def selected() -> list[str]:
        return [model.id_at(i.row()) or "" for i in sel.selectedRows()]

    model.set_ids(["new", "a", "b", "c", "d", "e"])  # a capture on top
    assert selected() == ["c"] and model.row_of("c") == 3
    model.set_ids(["e", "d", "c", "b", "a"])  # another order, one gone
    assert selected() == ["c"] and model.ids == ["e", "d", "c", "b", "a"]
    model.set_ids(["x", "e", "c", "y", "a"])  # removals and insertions together
    assert selected() == ["c"] and model.ids == ["x", "e", "c", "y", "a"]
    assert resets == []

    # A plan made off the UI thread against a list that changed meanwhile is not used.
    plan = plan_ids(model.snapshot(), ["z", "x", "e", "c", "y", "a"])
    assert plan.inserted == [(0, 0)] and plan.removed == [] and plan.kept is None
    model.set_ids(["c", "a"])
    model.set_ids(plan.ids, plan=plan)
    assert model.ids == ["z", "x", "e", "c", "y", "a"] and selected() == ["c"]


def test_model_shows_a_placeholder_then_the_row(qtbot: Any) -> None:
    calls: list[Callable[[], Any]] = []
    dones: list[Any] = []

    def read(fn: Callable[[], Any], done: Any, failed: Any) -> None:
        calls.append(fn)
        dones.append(done)

    model = MemoryTableModel(read, lambda part: [Memory(content=f"row {i}", id=i) for i in part])
    model.set_ids(["a", "b"])
    assert model.data(model.index(1, 0)) == PLACEHOLDER
    qtbot.waitUntil(lambda: bool(calls))  # the batch starts on the next loop turn
    changed: list[int] = []
    model.dataChanged.connect(lambda tl, br, roles=(): changed.append(tl.row()))
    dones[0](calls[0]())
    assert model.data(model.index(1, 0)) == "row b"
    assert changed and model.fetch_calls == 1 and model.fetched_rows == 2
    model.mark_stale(["b"])  # a change: the old row stays on screen until re-read
    assert model.data(model.index(1, 0)) == "row b"


# -- 100,000 memories ------------------------------------------------------------------------


N_BIG = 100_000


def _fill(lm: Lexmem, n: int) -> None:
    """Store ``n`` memories in one commit, built column-wise (about two seconds).

    Fine for a browsing test: the vectors are zero (no search by meaning is made), and
    every other column is what the store's schema asks for.
    """
    import numpy as np
    import pyarrow as pa

    from lexmem.store.schema import memory_schema

    schema = memory_schema(lm.store.dim)
    start = np.datetime64("2024-01-01T00:00:00", "us")
    stamps = pa.array(start + np.arange(n).astype("timedelta64[s]")).cast(
        pa.timestamp("us", tz="UTC")
    )
    types = ("semantic", "episodic", "procedural")
    columns = {
        "id": pa.array([str(uuid.UUID(int=i + 1)) for i in range(n)]),
        "type": pa.array([types[i % 3] for i in range(n)]),
        "title": pa.array([f"Memory {i}" for i in range(n)]),
        "content": pa.array([f"Memory {i} about topic {i % 97}" for i in range(n)]),
        "vector": pa.FixedSizeListArray.from_arrays(
            pa.array(np.zeros(n * lm.store.dim, dtype=np.float32)), lm.store.dim
        ),
        "created_at": stamps,
        "last_accessed_at": stamps,
        "salience": pa.array((np.arange(n) * 7919 % 1000) / 1000.0),
        "pinned": pa.array(np.arange(n) % 500 == 0),
        "status": pa.array(["active"] * n),
        "source": pa.array(["explicit"] * n),
        "project": pa.array([f"project-{i % 5}" for i in range(n)]),
    }
    arrays = [columns.get(f.name, pa.nulls(n, f.type)) for f in schema]
    with lm.store.writing():
        lm.store.table().add(pa.Table.from_arrays(arrays, schema=schema))


@pytest.fixture(scope="module")
def big_lm(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Lexmem]:
    home: Path = tmp_path_factory.mktemp("big") / "lexmem"
    core = Lexmem.open(home, embedder=embedder)
    _fill(core, N_BIG)
    yield core
    core.close()


def test_scrolling_100k_memories_reads_only_the_visible_rows(qtbot: Any, big_lm: Lexmem) -> None:
    ctx = AppContext(big_lm)
    try:
        page = MemoriesPage(ctx)
        qtbot.addWidget(page)
        page.resize(1100, 700)
        with qtbot.waitSignal(page.first_paint_done, timeout=WAIT):
            page.show()
        assert page.model.rowCount() == N_BIG
        assert page.count_label.text() == "100,000 memories"
        view, model = page.view, page.model

        def visible_loaded() -> bool:
            top = view.rowAt(0)
            bottom = view.rowAt(view.viewport().height() - 1)
            bottom = model.rowCount() - 1 if bottom < 0 else bottom
            return top >= 0 and all(model.is_loaded(r) for r in range(top, bottom + 1))

        qtbot.waitUntil(visible_loaded, timeout=WAIT)
        rows_per_screen = view.viewport().height() // view.verticalHeader().defaultSectionSize() + 1
        before_rows, before_calls = model.fetched_rows, model.fetch_calls
        assert before_rows <= rows_per_screen + 2 * MARGIN

        view.scrollToBottom()
        qtbot.waitUntil(lambda: model.is_loaded(N_BIG - 1) and visible_loaded(), timeout=WAIT)
        read = model.fetched_rows - before_rows
        assert read <= rows_per_screen + 2 * MARGIN, (read, rows_per_screen)
        assert model.fetch_calls - before_calls <= 3
        oldest = model.memory(model.id_at(N_BIG - 1) or "")
        assert oldest is not None and oldest.title == "Memory 0"  # newest first: 0 is last

        # Sorting 100,000 by salience: one id query, the rows re-read for what shows.
        page.sort_combo.setCurrentIndex(page.sort_combo.findData("salience"))
        _settle(qtbot, page)
        view.scrollToTop()
        qtbot.waitUntil(lambda: model.is_loaded(0), timeout=WAIT)
        top = model.memory(model.id_at(0) or "")
        assert top is not None and top.salience == pytest.approx(0.999)
        assert model.fetched_rows < 5 * (rows_per_screen + 2 * MARGIN)
    finally:
        ctx.close()


def test_the_detail_follows_what_is_left_after_an_archive(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    """Archive the memory shown: it leaves the active list, and the detail panel leaves
    it too, never showing a memory that is not in the list (issue 18, defect 4)."""
    a = _remember(qtbot, page, "Deploys go out on Tuesdays after the standup")
    b = _remember(qtbot, page, "Run the linter with ruff before each commit")
    _select(qtbot, page, a)
    page.detail.show_memory(a)
    qtbot.waitUntil(lambda: page.detail.memory_id == a and page.detail.data is not None)
    _wait_changed(qtbot, page, page.act_archive.trigger)
    qtbot.waitUntil(lambda: page.model.ids == [b], timeout=WAIT)
    _settle(qtbot, page)
    shown = page.detail.memory_id
    assert shown is None or (shown in page.model.ids and page.selected_ids() == [shown])
    # The last one archived too: nothing is listed, and nothing is shown.
    _select(qtbot, page, b)
    _wait_changed(qtbot, page, page.act_archive.trigger)
    qtbot.waitUntil(lambda: page.model.ids == [], timeout=WAIT)
    _settle(qtbot, page)
    assert page.detail.memory_id is None


def test_the_detail_starts_at_the_top_and_f2_shows_the_editor(
    qtbot: Any, ctx: AppContext, page: MemoriesPage
) -> None:
    """A newly shown memory starts at its top, not at the last one's scroll position;
    F2's caret lands in an editor on screen (issue 18, defect 4)."""
    long_text = " ".join(
        f"Step {i}: run the migration for shard {i} and check it." for i in range(80)
    )
    a = _remember(qtbot, page, long_text)
    b = _remember(qtbot, page, "Run the linter with ruff before each commit")
    page.resize(900, 360)  # a short panel: the long memory scrolls

    def showing(mid: str) -> bool:
        data = page.detail.data
        return page.detail.memory_id == mid and data is not None and data.detail.memory.id == mid

    # As a person does: select a row, and the detail panel follows the current row.
    _select(qtbot, page, a)
    qtbot.waitUntil(lambda: showing(a), timeout=WAIT)
    bar = page.detail.scroll_area.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=WAIT)
    bar.setValue(bar.maximum())
    _select(qtbot, page, b)
    qtbot.waitUntil(lambda: showing(b), timeout=WAIT)
    assert bar.value() == 0

    bar.setValue(bar.maximum())
    page.detail.focus_editor()
    editor = page.detail.editor
    viewport = page.detail.scroll_area.viewport()
    top_left = editor.mapTo(viewport, editor.rect().topLeft())
    assert 0 <= top_left.y() < viewport.height()  # the editor's top is on screen


def test_two_projects_that_share_a_name_are_told_apart(qtbot: Any, page: MemoriesPage) -> None:
    """Issue 18, defect 7: "shop" typed by hand and the repository ``~/work/shop`` both
    showed as "shop". Each project now has one label, the same in the table and the
    project filter, and picking a label filters to that project alone."""
    repo = str(Path.home() / "work" / "shop")
    named = _remember(qtbot, page, "The shop's invoices are numbered per year", project="shop")
    captured = _remember(qtbot, page, "The shop deploys on Tuesdays", project=repo)
    _shown(qtbot, page, named, captured)
    column = next(i for i, c in enumerate(COLUMNS) if c.key == "project")

    def shown(mid: str) -> str:
        row = page.model.row_of(mid)
        assert row is not None
        return str(page.model.index(row, column).data())

    qtbot.waitUntil(lambda: shown(captured) == "shop (~/work)", timeout=WAIT)
    assert shown(named) == "shop"
    box = page.project_filter
    assert sorted(box.itemText(i) for i in range(box.count())) == ["shop", "shop (~/work)"]
    box.setEditText("shop (~/work)")
    assert page.current_filter().project == repo
    box.setEditText("shop")
    assert page.current_filter().project == "shop"


def test_the_sort_says_what_order_the_list_is_in(qtbot: Any, page: MemoriesPage) -> None:
    """Issue 18: "Relevance" showed while the list, with nothing searched, was newest
    first. The choice stays; its name says what it does until a search gives it a meaning."""
    assert page.sort_combo.currentData() == "relevance"
    assert page.sort_combo.currentText() == "Relevance (newest)"
    assert page.current_sort() == "created"
    # ...whole: the box leaves the text its room beside the arrow, the sheet's padding too.
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    from ui.theme import apply_theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, "light")  # the sheet that pads a combo box's text
    try:
        box = page.sort_combo
        qtbot.waitUntil(lambda: box.width() >= box.minimumWidth(), timeout=WAIT)
        opt = QStyleOptionComboBox()
        box.initStyleOption(opt)
        field = box.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, box
        )
        room = field.width() - 2 * 3  # the sheet's padding
        assert box.fontMetrics().horizontalAdvance("Relevance (newest)") <= room
    finally:
        app.setStyleSheet("")
        app.setPalette(app.style().standardPalette())
    page.set_query("database")
    _settle(qtbot, page)
    assert page.sort_combo.currentText() == "Relevance"
    page.set_query("")
    _settle(qtbot, page)
    assert page.sort_combo.currentText() == "Relevance (newest)"
