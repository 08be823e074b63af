"""Review and forget that a slip cannot undo: a reject is held for its undo window, and
Ctrl+Z undoes exactly the last action, however long the writes before it still run.

A real browser window (every tab), real core and model, real runner threads, offscreen Qt.
Where a test needs "the previous operation is still running", it holds the app's one
write thread on a gate (a task of its own submitted first), so every write the keys
send queues behind it, exactly as a slow write would hold them; the gate opens in a
``finally``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.service.writer import CaptureService
from lexmem.store.journal import Journal
from ui import ops
from ui.app import App, CaptureMenu, MainWindow
from ui.context import AppContext

WAIT = 30_000  # generous: a loaded 2-core machine; the waits end as soon as it is true
#: An undo window no test outlives: a reject stays held until the test closes it.
NEVER_MS = 3_600_000
TEXTS = (
    "We decided to use PostgreSQL 16 for the billing service.",
    "Never commit directly to main; open a pull request instead.",
    "We decided to deploy the shop with make ship on Fridays.",
    "Always run the database migrations before the integration tests.",
)


def _say(lm: Lexmem, sid: str, *texts: str) -> None:
    """One short agent session in which the person says ``texts``; the service drains it."""
    inbox = Inbox(lm.paths.inbox)
    for text in texts:
        inbox.write(make_event("prompt", text, session_id=sid, agent="claude"))
        inbox.write(make_event("response", "Noted.", session_id=sid, agent="claude"))
    inbox.write(make_event("session_end", "", session_id=sid, agent="claude"))
    with CaptureService(lm) as service:
        service.drain()


def _queue(lm: Lexmem, n: int) -> list[str]:
    """``n`` captured memories waiting for review, newest first."""
    lm.settings.capture.mode = "full"
    for i, text in enumerate(TEXTS[:n]):
        _say(lm, f"s{i}", text)
    queue = lm.review_queue()
    assert len(queue) == n
    return queue


@pytest.fixture
def window(qtbot: Any, ctx: AppContext) -> Iterator[MainWindow]:
    """The browser, its undo window made longer than any test: each test closes it itself
    (by the timer's own timeout, the window closing or the app quitting), rather than
    waiting 30 s."""
    ctx.undo_window_ms = NEVER_MS
    w = MainWindow(ctx, CaptureMenu(ctx), has_tray=True)  # closing it hides it
    qtbot.addWidget(w)
    w.show()
    yield w
    qtbot.waitUntil(lambda: ctx.runner.pending == 0, timeout=WAIT)


@contextmanager
def writes_held(ctx: AppContext) -> Iterator[None]:
    """Hold the app's write thread: every write asked for meanwhile waits behind it."""
    gate, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        gate.wait(WAIT / 1000)

    ctx.runner.run(hold, write=True)
    started.wait(WAIT / 1000)
    try:
        yield
    finally:
        gate.set()


def _idle(ctx: AppContext) -> bool:
    return ctx.runner.pending == 0


def _open_review(qtbot: Any, w: MainWindow, n: int) -> None:
    """The memories were captured by a service of the test's own: the panel reads again."""
    w.review.refresh()
    w.show_tab("review")
    w.activateWindow()
    qtbot.waitUntil(lambda: w.review.count == n, timeout=WAIT)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.review.view, timeout=WAIT)


def _key(qtbot: Any, widget: QWidget, key: Qt.Key, ctrl: bool = False) -> None:
    mod = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
    qtbot.keyClick(widget, key, mod)


def _close_undo_windows(ctx: AppContext) -> None:
    """The held rejects' timers time out now: what 30 s would do."""
    for held in ctx.held:
        held.timer.start(0)


def test_a_a_r_then_ctrl_z_brings_back_the_rejected_memory_not_an_accepted_one(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    """The finding: in Review, A, A, R, then Ctrl+Z while the writes still ran put back
    the second accepted memory, and the rejected one was erased for good."""
    first, second, third, fourth = _queue(ctx.lm, 4)
    was = ctx.lm.get(third)
    named = f"“{was.title[:30]}"
    review = window.review
    _open_review(qtbot, window, 4)
    assert review.selected_ids() == [first]  # the keys work at once
    view = review.view
    with writes_held(ctx):
        _key(qtbot, view, Qt.Key.Key_A)
        assert review.selected_ids() == [second]
        _key(qtbot, view, Qt.Key.Key_A)
        assert review.selected_ids() == [third]
        _key(qtbot, view, Qt.Key.Key_R)
        assert review.ids() == [fourth] and review.count == 1
        assert review.status.text().startswith(f"Rejected {named}")
        assert "Ctrl+Z to undo (3600 s)" in review.status.text()
        _key(qtbot, view, Qt.Key.Key_Z, ctrl=True)
        # Undone at once, while both accepts are still waiting to be written; the next
        # Ctrl+Z would be the second accept's.
        assert ctx.held == [] and ctx.undo_entry is not None
        assert ctx.undo_entry.label == "Undo accept memory"
        qtbot.waitUntil(lambda: third in review.ids(), timeout=WAIT)  # selected, back
        assert review.selected_ids() == [third]
        assert review.status.text().startswith(named)
        assert review.status.text().endswith("is back, waiting for review.")
    qtbot.waitUntil(lambda: _idle(ctx) and review.count == 2, timeout=WAIT)
    assert ctx.lm.review_queue() == [third, fourth]
    assert review.ids() == [third, fourth]
    reviewed = Journal(ctx.lm.store).reviewed_ids()
    assert {first, second} <= reviewed and third not in reviewed
    now = ctx.lm.get(third)  # exactly as it was
    assert (now.content, now.title, now.type, now.status, now.pinned, now.confidence) == (
        was.content, was.title, was.type, was.status, was.pinned, was.confidence,
    )  # fmt: skip
    # The next Ctrl+Z undoes the action before: the second accept.
    _key(qtbot, view, Qt.Key.Key_Z, ctrl=True)
    qtbot.waitUntil(lambda: _idle(ctx) and review.ids() == [second, third, fourth], timeout=WAIT)
    assert review.selected_ids() == [second]
    assert ctx.lm.review_queue() == [second, third, fourth]


def test_a_a_settled_then_r_and_ctrl_z_leaves_the_accepts_alone(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    """The same keys with the accepts already written: Ctrl+Z is the reject's."""
    first, second, third = _queue(ctx.lm, 3)
    review = window.review
    _open_review(qtbot, window, 3)
    view = review.view
    _key(qtbot, view, Qt.Key.Key_A)
    _key(qtbot, view, Qt.Key.Key_A)
    qtbot.waitUntil(lambda: _idle(ctx) and ctx.lm.review_queue() == [third], timeout=WAIT)
    _key(qtbot, view, Qt.Key.Key_R)
    assert review.count == 0 and ctx.lm.review_queue() == [third]  # held, not erased
    _key(qtbot, view, Qt.Key.Key_Z, ctrl=True)
    qtbot.waitUntil(lambda: _idle(ctx) and review.ids() == [third], timeout=WAIT)
    assert ctx.lm.review_queue() == [third] and review.count == 1
    assert {first, second} <= Journal(ctx.lm.store).reviewed_ids()


def test_a_reject_is_erased_when_its_undo_window_closes(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    """Until the window closes the memory is in the store, untouched, out of the queue
    and its count; then it is erased as Forget erases, and capture keeps the refusal."""
    first, second = _queue(ctx.lm, 2)
    review = window.review
    _open_review(qtbot, window, 2)
    counts: list[int] = []
    review.count_changed.connect(counts.append)
    _key(qtbot, review.view, Qt.Key.Key_R)
    assert counts == [1] and review.ids() == [second]
    assert window.tabs.tabText(1) == "Review (1)"
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    title = ctx.lm.get(first).title
    assert ctx.lm.review_queue() == [first, second]  # the store has not been touched
    assert ctx.undo_entry is not None and ctx.undo_entry.label == "Undo reject memory"
    review.refresh()  # a reload (a capture arriving) does not bring it back
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    assert review.ids() == [second] and review.count == 1

    _close_undo_windows(ctx)
    qtbot.waitUntil(lambda: ctx.lm.store.get_optional(first) is None, timeout=WAIT)
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    assert ctx.lm.review_queue() == [second] and review.count == 1
    assert first in {r["memory_id"] for r in Journal(ctx.lm.store).rejected()}
    said = review.status.text()
    assert said.startswith(f"Rejected “{title[:40]}")
    assert said.endswith("”: erased, and capture will not keep the same again.")
    assert ctx.undo_entry is None  # nothing to undo past an erase
    assert not window.memories.selection_actions.undo.isEnabled()
    _key(qtbot, review.view, Qt.Key.Key_Z, ctrl=True)  # changes nothing
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    assert ctx.lm.review_queue() == [second] and review.status.text() == said


def test_closing_the_browser_erases_the_held_rejects(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    first, second = _queue(ctx.lm, 2)
    review = window.review
    _open_review(qtbot, window, 2)
    _key(qtbot, review.view, Qt.Key.Key_R)
    assert ctx.lm.store.get_optional(first) is not None
    window.close()  # with a tray: hidden, and the undo window closes with it
    assert not window.isVisible() and ctx.held == []
    qtbot.waitUntil(lambda: _idle(ctx) and ctx.lm.store.get_optional(first) is None, timeout=WAIT)
    assert ctx.lm.review_queue() == [second]


def test_quitting_erases_the_held_rejects_before_it_returns(qtbot: Any, lm: Lexmem) -> None:
    """The app's stop (what every quit ends in) erases what was rejected, and returns."""
    first, second = _queue(lm, 2)
    app = App(lm, tray=False)
    app.ctx.undo_window_ms = NEVER_MS
    stopped = False
    try:
        app.start(show_window=False)
        review = app.window.review
        qtbot.waitUntil(lambda: review.count == 2, timeout=WAIT)
        review.reject([first])
        assert review.count == 1 and app.menu.review_count == 1
        assert lm.store.get_optional(first) is not None
        app.stop()
        stopped = True
        assert lm.store.get_optional(first) is None  # erased before stop returned
        assert lm.review_queue() == [second]
    finally:
        if not stopped:
            app.stop()


def test_ctrl_z_undoes_each_action_in_turn_whatever_the_mix(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    """Pin, accept, edit-then-accept, reject, all while the writes wait; then Ctrl+Z four
    times: each undoes the action before, the Edit menu naming it first."""
    first, second, third, fourth = _queue(ctx.lm, 4)
    said = ctx.lm.get(third).content
    review = window.review
    _open_review(qtbot, window, 4)
    view = review.view
    labels: list[str] = []
    ctx.hub.undo_changed.connect(labels.append)
    with writes_held(ctx):
        _key(qtbot, view, Qt.Key.Key_P)  # pins the first, which stays selected
        _key(qtbot, view, Qt.Key.Key_Down)
        _key(qtbot, view, Qt.Key.Key_A)  # accepts the second
        assert review.selected_ids() == [third]
        review.edit_and_accept(third, "We deploy the shop with make ship on Thursdays.")
        assert review.selected_ids() == [fourth]
        _key(qtbot, view, Qt.Key.Key_R)
        assert labels[-4:] == [
            "Undo pin memory", "Undo accept memory", "Undo edit and accept", "Undo reject memory",
        ]  # fmt: skip
        for label in ("Undo edit and accept", "Undo accept memory", "Undo pin memory", ""):
            _key(qtbot, view, Qt.Key.Key_Z, ctrl=True)
            assert labels[-1] == label
    qtbot.waitUntil(lambda: _idle(ctx) and review.count == 4, timeout=WAIT)
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    assert ctx.lm.review_queue() == [first, second, third, fourth]
    assert not ctx.lm.get(first).pinned
    assert ctx.lm.get(third).content == said
    assert Journal(ctx.lm.store).reviewed_ids() == set()


def test_an_undo_asked_for_while_its_action_runs_waits_for_it(qtbot: Any, ctx: AppContext) -> None:
    (mid,) = _queue(ctx.lm, 1)
    with writes_held(ctx):
        ops.pin(ctx, [mid])
        assert ctx.undo_entry is not None and ctx.undo_entry.label == "Undo pin memory"
        assert ops.undo(ctx) is True  # the pin has not run yet: its undo queues behind it
        assert ctx.undo_entry is None
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    assert not ctx.lm.get(mid).pinned


def test_reject_all_is_undoable_the_same_way(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    queue = _queue(ctx.lm, 3)
    review = window.review
    _open_review(qtbot, window, 3)
    review.reject_all_button.click()
    box = review.dialog
    assert isinstance(box, QMessageBox)
    assert "Ctrl+Z brings them back for the next 3600 s" in box.text()
    (yes,) = [b for b in box.buttons() if b.text() == "Reject 3"]
    yes.click()
    assert review.count == 0 and review.ids() == []
    assert review.status.text() == "Rejected 3 memories — Ctrl+Z to undo (3600 s)"
    assert ctx.lm.review_queue() == queue
    assert ctx.undo_entry is not None and ctx.undo_entry.label == "Undo reject 3 memories"
    window.activateWindow()
    review.view.setFocus()
    _key(qtbot, review.view, Qt.Key.Key_Z, ctrl=True)
    qtbot.waitUntil(lambda: review.ids() == queue, timeout=WAIT)
    assert review.count == 3 and review.selected_ids() == queue
    assert review.status.text() == "3 memories are back, waiting for review."
    qtbot.waitUntil(lambda: _idle(ctx), timeout=WAIT)
    assert ctx.lm.review_queue() == queue and ctx.held == []


def test_a_held_reject_is_not_listed_on_the_memories_tab_until_undone(
    qtbot: Any, ctx: AppContext, window: MainWindow
) -> None:
    """While its erase waits, a rejected memory is not shown anywhere in the browser: not
    in the queue, nor in the Memories tab's list or its searches."""
    first, second = _queue(ctx.lm, 2)
    page = window.memories
    page.refresh()
    qtbot.waitUntil(lambda: page.model.row_of(first) is not None, timeout=WAIT)
    _open_review(qtbot, window, 2)
    _key(qtbot, window.review.view, Qt.Key.Key_R)
    qtbot.waitUntil(lambda: _idle(ctx) and page.model.row_of(first) is None, timeout=WAIT)
    assert page.model.row_of(second) is not None
    page.search_box.setText(ctx.lm.get(first).content)
    qtbot.waitUntil(lambda: _idle(ctx) and not page.busy, timeout=WAIT)
    assert page.model.row_of(first) is None
    page.search_box.setText("")
    _key(qtbot, window.review.view, Qt.Key.Key_Z, ctrl=True)
    qtbot.waitUntil(lambda: page.model.row_of(first) is not None, timeout=WAIT)


def test_the_undo_of_an_action_that_failed_undoes_nothing_else(qtbot: Any, ctx: AppContext) -> None:
    """Ctrl+Z pressed while a failing action still runs: it is that action's undo, which
    finds nothing to undo; the action before it is left alone."""
    (mid,) = _queue(ctx.lm, 1)
    errors: list[str] = []
    ctx.hub.error.connect(errors.append)
    with writes_held(ctx):
        ops.pin(ctx, [mid])
        ops.pin(ctx, ["no-such-memory"])
        assert ops.undo(ctx) is True
    qtbot.waitUntil(lambda: _idle(ctx) and len(errors) == 2, timeout=WAIT)
    assert ctx.lm.get(mid).pinned
    assert "nothing to undo" in errors[1]
    assert ctx.undo_entry is not None and ctx.undo_entry.label == "Undo pin memory"
