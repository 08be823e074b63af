"""The browser window's actions act on what the person sees: the selection of the tab on
screen, never the one a hidden tab still holds.

A real window (every tab), real core and model, real runner threads, offscreen Qt. Each
test leaves memory A selected on the Memories tab, then works on another tab: whatever
the Edit menu, a shortcut or a button does must land on that tab's selection (B), and a
tab with nothing selected must do nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.models import Memory, MemoryStatus
from lexmem.service.writer import CaptureService
from ui.app import CaptureMenu, MainWindow
from ui.browser import MemoriesPage, forget_question
from ui.context import AppContext, UiChanges

WAIT = 30_000  # generous: a loaded 2-core machine; the waits end as soon as it is true
A_TEXT = "The staging database runs on port 5433"
PG = "We decided to use PostgreSQL 16 for the billing service."
MAIN = "Never commit directly to main; open a pull request instead."


def _say(lm: Lexmem, sid: str, *texts: str) -> None:
    """One short agent session in which the person says ``texts``; the service drains it."""
    inbox = Inbox(lm.paths.inbox)
    for text in texts:
        inbox.write(make_event("prompt", text, session_id=sid, agent="claude"))
        inbox.write(make_event("response", "Noted.", session_id=sid, agent="claude"))
    inbox.write(make_event("session_end", "", session_id=sid, agent="claude"))
    with CaptureService(lm) as service:
        service.drain()


@pytest.fixture
def ab(ctx: AppContext) -> tuple[str, str]:
    """A: an explicit memory (Memories tab only). B: captured in session s1, waiting for review."""
    ctx.lm.settings.capture.mode = "full"
    a = ctx.lm.remember(A_TEXT).memories[0].id
    _say(ctx.lm, "s1", PG)
    (b,) = ctx.lm.review_queue()
    return a, b


@pytest.fixture
def window(qtbot: Any, ctx: AppContext, ab: tuple[str, str]) -> Iterator[MainWindow]:
    menu = CaptureMenu(ctx)
    w = MainWindow(ctx, menu, has_tray=False)
    qtbot.addWidget(w)
    w.show()
    _quiet(qtbot, w)
    yield w
    # pytest-qt closes the window; let the reads it started finish before ctx closes.
    qtbot.waitUntil(lambda: ctx.runner.pending == 0, timeout=WAIT)


def _quiet(qtbot: Any, w: MainWindow) -> None:
    """Nothing being read or due: a write then never overlaps a read (see test_ui_browser)."""
    qtbot.waitUntil(lambda: not w.memories.busy and w.ctx.runner.pending == 0, timeout=WAIT)


def _wait_changed(qtbot: Any, w: MainWindow, start: Callable[[], Any]) -> UiChanges:
    _quiet(qtbot, w)
    seen: list[UiChanges] = []
    errors: list[str] = []
    w.ctx.hub.changed.connect(seen.append)
    w.ctx.hub.error.connect(errors.append)
    try:
        with qtbot.waitSignal(w.ctx.hub.changed, timeout=WAIT):
            start()
    finally:
        w.ctx.hub.changed.disconnect(seen.append)
        w.ctx.hub.error.disconnect(errors.append)
    assert not errors, errors
    return seen[0]


def _edit(w: MainWindow, text: str) -> QAction:
    """An item of the window's Edit menu, as the person sees it."""
    (edit,) = [a for a in w.menuBar().actions() if a.text() == "&Edit"]
    menu = edit.menu()
    assert menu is not None
    (action,) = [a for a in menu.actions() if a.text() == text]
    return action


def _select_on_memories(qtbot: Any, w: MainWindow, *ids: str) -> None:
    page: MemoriesPage = w.memories
    w.show_tab("memories")
    qtbot.waitUntil(lambda: all(page.model.row_of(i) is not None for i in ids), timeout=WAIT)
    sel = page.view.selectionModel()
    sel.clearSelection()
    flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
    for i in ids:
        sel.select(page.model.index(page.model.row_of(i) or 0, 0), flags)
    qtbot.waitUntil(lambda: all(page.model.memory(i) is not None for i in ids), timeout=WAIT)
    assert sorted(page.selected_ids()) == sorted(ids)
    _quiet(qtbot, w)


def _select_on_review(qtbot: Any, w: MainWindow, *ids: str) -> None:
    w.show_tab("review")
    qtbot.waitUntil(lambda: all(i in w.review.ids() for i in ids), timeout=WAIT)
    w.review.select(ids)
    assert sorted(w.review.selected_ids()) == sorted(ids)


def _focus(qtbot: Any, w: MainWindow, widget: QWidget) -> None:
    w.activateWindow()
    widget.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is widget, timeout=WAIT)


def _forget_box(qtbot: Any, w: MainWindow) -> QMessageBox:
    qtbot.waitUntil(lambda: w.memories.selection_actions.dialog is not None, timeout=WAIT)
    box = w.memories.selection_actions.dialog
    assert isinstance(box, QMessageBox)
    return box


def _quoted(m: Memory) -> str:
    """How a confirmation names a memory (its title, quoted; these titles are short)."""
    assert len(m.title) < 80
    return f"“{m.title}”"


# -- forget ------------------------------------------------------------------------------


def test_forget_from_the_menu_on_review_names_and_forgets_the_review_selection(
    qtbot: Any, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, b = ab
    lm = window.ctx.lm
    title_a, title_b = _quoted(lm.get(a)), _quoted(lm.get(b))
    _select_on_memories(qtbot, window, a)
    _select_on_review(qtbot, window, b)

    forget = _edit(window, "Forget…")
    assert forget.isEnabled()
    forget.trigger()
    box = _forget_box(qtbot, window)
    assert box.text().startswith(f"Forget {title_b}?")
    assert title_a not in box.text()
    assert "cannot be undone" in box.text()
    assert "Backups made before now still hold it" in box.text()
    assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)

    (yes,) = [btn for btn in box.buttons() if btn.text() == "Forget"]
    c = _wait_changed(qtbot, window, yes.click)
    assert c.memories.deleted == (b,)
    assert [m.id for m in lm.memories_for([a, b])] == [a]  # B gone, A untouched
    qtbot.waitUntil(lambda: window.review.ids() == [], timeout=WAIT)


def test_forget_cancelled_changes_nothing_and_names_several(
    qtbot: Any, ctx: AppContext, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, b = ab
    _say(ctx.lm, "s2", MAIN)
    ctx.emit(UiChanges(review=True))  # the service ran outside the app: say so
    c = next(i for i in ctx.lm.review_queue() if i != b)
    _select_on_memories(qtbot, window, a)
    _select_on_review(qtbot, window, b, c)

    _edit(window, "Forget…").trigger()
    box = _forget_box(qtbot, window)
    assert box.text().startswith("Forget 2 memories: ")
    assert _quoted(ctx.lm.get(b)) in box.text() and _quoted(ctx.lm.get(c)) in box.text()
    assert _quoted(ctx.lm.get(a)) not in box.text()
    assert "Backups made before now still hold them" in box.text()
    box.button(QMessageBox.StandardButton.Cancel).click()
    _quiet(qtbot, window)
    assert {m.id for m in ctx.lm.memories_for([a, b, c])} == {a, b, c}
    assert window.memories.selection_actions.dialog is None


def test_forget_question_names_a_few_then_counts_the_rest() -> None:
    memories = {m.id: m for m in (Memory(content=f"memory {i}", title=t, id=f"id{i}")
                                  for i, t in enumerate("abcdefghijkl"))}  # fmt: skip
    ids = list(memories)
    assert forget_question(ids[:1], memories).startswith("Forget “a”?\n")
    assert forget_question(ids[:3], memories).startswith("Forget 3 memories: “a”, “b”, “c”?\n")
    many = forget_question(ids, memories)
    assert many.startswith("Forget 12 memories: “a”, “b”, “c”, “d”, “e” and 7 more?\n")
    assert "“f”" not in many
    assert "cannot be undone" in many and "Backups made before now still hold them" in many
    # A long title is cut; one not read yet (or gone) is named by its short id.
    long = Memory(content="x", title="word " * 40, id="long")
    assert "…”" in forget_question(["long"], {"long": long}).splitlines()[0]
    assert forget_question(["0123456789abcdef"], {}).startswith("Forget “01234567”?")


# -- pin and archive: the menu and the shortcuts ---------------------------------------------


def test_pin_and_archive_from_the_menu_act_on_the_review_selection(
    qtbot: Any, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, b = ab
    lm = window.ctx.lm
    _select_on_memories(qtbot, window, a)
    _select_on_review(qtbot, window, b)

    pin = _edit(window, "Pin")
    assert pin.isEnabled()
    _wait_changed(qtbot, window, pin.trigger)
    assert lm.get(b).pinned and not lm.get(a).pinned
    qtbot.waitUntil(lambda: pin.text() == "Unpin", timeout=WAIT)  # B's row re-read

    archive = _edit(window, "Archive")
    _wait_changed(qtbot, window, archive.trigger)
    assert lm.get(b).status == MemoryStatus.ARCHIVED
    assert lm.get(a).status == MemoryStatus.ACTIVE


def test_shortcuts_on_the_review_tab_act_on_its_selection(
    qtbot: Any, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, b = ab
    lm = window.ctx.lm
    _select_on_memories(qtbot, window, a)
    _select_on_review(qtbot, window, b)
    view = window.review.view
    _focus(qtbot, window, view)

    ctrl = Qt.KeyboardModifier.ControlModifier
    _wait_changed(qtbot, window, lambda: qtbot.keyClick(view, Qt.Key.Key_P, ctrl))
    assert lm.get(b).pinned and not lm.get(a).pinned

    qtbot.keyClick(view, Qt.Key.Key_Delete, Qt.KeyboardModifier.ShiftModifier)
    box = _forget_box(qtbot, window)
    assert box.text().startswith(f"Forget {_quoted(lm.get(b))}?")
    box.button(QMessageBox.StandardButton.Cancel).click()
    _quiet(qtbot, window)

    _focus(qtbot, window, view)
    _wait_changed(qtbot, window, lambda: qtbot.keyClick(view, Qt.Key.Key_Delete))
    assert lm.get(b).status == MemoryStatus.ARCHIVED
    assert lm.get(a).status == MemoryStatus.ACTIVE and not lm.get(a).pinned


def test_the_timeline_of_the_sessions_tab_is_its_selection(
    qtbot: Any, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, b = ab
    lm = window.ctx.lm
    _select_on_memories(qtbot, window, a)
    window.show_tab("sessions")
    sessions = window.sessions
    qtbot.waitUntil(lambda: [s.id for s in sessions.sessions()] == ["s1"], timeout=WAIT)
    assert not _edit(window, "Pin").isEnabled()  # a session is no memory
    with qtbot.waitSignal(sessions.timeline_loaded, timeout=WAIT):
        sessions.open_session("s1")
    assert sessions.timeline_ids() == [b]
    sessions.select_memory(b)

    pin = _edit(window, "Pin")
    assert pin.isEnabled()
    _wait_changed(qtbot, window, pin.trigger)
    assert lm.get(b).pinned and not lm.get(a).pinned


# -- nothing selected on the tab on screen ---------------------------------------------------


def test_nothing_selected_on_the_tab_on_screen_does_nothing(
    qtbot: Any, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, b = ab
    lm = window.ctx.lm
    _select_on_memories(qtbot, window, a)
    names = ("Pin", "Archive", "Forget…", "Copy as Markdown", "Supersede…", "Link…")
    assert all(_edit(window, n).isEnabled() for n in names)
    assert _edit(window, "Edit").isEnabled()

    window.show_tab("review")
    qtbot.waitUntil(lambda: window.review.ids() == [b], timeout=WAIT)
    assert window.review.selected_ids() == [b]  # opens ready for A and R
    window.review.select([])
    for name in names:
        assert not _edit(window, name).isEnabled(), name
    assert not _edit(window, "Edit, then accept…").isEnabled()  # the review's own editor
    _edit(window, "Forget…").trigger()  # disabled: ignored
    view = window.review.view
    _focus(qtbot, window, view)
    for key, mod in ((Qt.Key.Key_Delete, Qt.KeyboardModifier.NoModifier),
                     (Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier),
                     (Qt.Key.Key_Delete, Qt.KeyboardModifier.ShiftModifier)):  # fmt: skip
        qtbot.keyClick(view, key, mod)
    _quiet(qtbot, window)
    assert window.memories.selection_actions.dialog is None
    assert window.ctx.undo_entry is None  # no write was made
    assert lm.get(a).status == MemoryStatus.ACTIVE and not lm.get(a).pinned

    # The audit log's rows are capture decisions, not memories: nothing to act on there.
    window.show_tab("audit")
    qtbot.waitUntil(lambda: bool(window.audit.entries()), timeout=WAIT)
    window.audit.select(window.audit.entries()[0].id)
    assert not any(_edit(window, n).isEnabled() for n in names)

    # Back on Memories, A's selection is there again, and so are the actions.
    window.show_tab("memories")
    assert window.memories.selected_ids() == [a]
    assert _edit(window, "Forget…").isEnabled() and _edit(window, "Edit").isEnabled()


# -- reject all ------------------------------------------------------------------------------


def test_reject_all_asks_first_naming_how_many(
    qtbot: Any, ctx: AppContext, window: MainWindow, ab: tuple[str, str]
) -> None:
    a, _b = ab
    _say(ctx.lm, "s2", MAIN)
    ctx.emit(UiChanges(review=True))
    queue = ctx.lm.review_queue()
    assert len(queue) == 2
    review = window.review
    window.show_tab("review")
    qtbot.waitUntil(lambda: review.count == 2, timeout=WAIT)

    review.reject_all_button.click()
    box = review.dialog
    assert isinstance(box, QMessageBox)
    assert box.text().startswith("Reject all 2 memories waiting for review?")
    assert "deleted" in box.text() and "not keep the same again" in box.text()
    assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
    box.button(QMessageBox.StandardButton.Cancel).click()
    _quiet(qtbot, window)
    assert ctx.lm.review_queue() == queue and review.count == 2
    assert ctx.undo_entry is None and review.dialog is None

    review.reject_all_button.click()
    box = review.dialog
    assert isinstance(box, QMessageBox)
    (yes,) = [btn for btn in box.buttons() if btn.text() == "Reject 2"]
    yes.click()
    assert review.count == 0  # out of the queue at once; erased when Ctrl+Z cannot undo it
    _wait_changed(qtbot, window, ctx.release_held)
    qtbot.waitUntil(lambda: ctx.lm.review_queue() == [], timeout=WAIT)
    assert ctx.lm.get(a).status == MemoryStatus.ACTIVE  # not in the queue: untouched


def test_forgetting_a_memory_the_team_shares_says_what_the_server_keeps() -> None:
    memories = {"a": Memory(id="a", content="a", title="a")}
    assert "VACUUM FULL" not in forget_question(["a"], memories)
    shared = forget_question(["a"], memories, shared=True)
    assert "Shared with your team" in shared and "VACUUM FULL" in shared
