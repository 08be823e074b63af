"""The browser's review, audit, sessions and insights tabs: real core, real runner, offscreen Qt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.models import MemoryContext, MemorySource, MemoryStatus
from lexmem.service.writer import CaptureService
from lexmem.store.journal import Journal
from lexmem.store.lance import MemoryFilter
from ui.context import AppContext, UiChanges
from ui.panels import AuditPanel, InsightsPanel, ReviewPanel, SessionsPanel
from ui.theme import TYPE_COLOURS

PG = "We decided to use PostgreSQL 16 for the billing service."
MAIN = "Never commit directly to main; open a pull request instead."


def _say(lm: Lexmem, sid: str, *texts: str, project: str | None = None) -> None:
    """One short agent session in which the person says ``texts``; the service drains it."""
    inbox = Inbox(lm.paths.inbox)
    for text in texts:
        inbox.write(make_event("prompt", text, session_id=sid, agent="claude", project=project))
        inbox.write(
            make_event("response", "Noted.", session_id=sid, agent="claude", project=project)
        )
    inbox.write(make_event("session_end", "", session_id=sid, agent="claude", project=project))
    with CaptureService(lm) as service:
        service.drain()


def _idle(ctx: AppContext) -> bool:
    return ctx.runner.pending == 0


def _close_undo_windows(ctx: AppContext) -> None:
    """A reject is erased when its undo window closes: its timer times out now, as 30 s
    later it would."""
    for held in ctx.held:
        held.timer.start(0)


def _queued(ctx: AppContext) -> tuple[str, str]:
    """Two captured memories waiting for review: (the PostgreSQL one, the main-branch one)."""
    ctx.lm.settings.capture.mode = "full"
    _say(ctx.lm, "s1", PG)
    _say(ctx.lm, "s2", MAIN)
    queue = ctx.lm.review_queue()
    assert len(queue) == 2
    pg = next(i for i in queue if "PostgreSQL" in ctx.lm.get(i).content)
    return pg, next(i for i in queue if i != pg)


def test_review_accept_removes_from_the_queue_and_the_count_follows(
    qtbot: Any, ctx: AppContext
) -> None:
    pg, main = _queued(ctx)
    panel = ReviewPanel(ctx)  # loads at once: its count feeds the tray badge
    qtbot.addWidget(panel)
    counts: list[int] = []
    panel.count_changed.connect(counts.append)
    qtbot.waitUntil(lambda: panel.count == 2, timeout=10_000)
    assert counts == [2] and panel.ids() == [main, pg]  # newest first
    assert panel.model.rowCount() == 2 and panel.stack.currentWidget() is panel.view

    panel.select([main])
    assert panel.selected_ids() == [main] and panel.accept_button.isEnabled()
    panel.accept_selected()
    assert counts[-1] == 1 and panel.ids() == [pg]  # out of the list at once
    qtbot.waitUntil(lambda: _idle(ctx) and counts[-1] == 1 and len(counts) >= 3, timeout=30_000)
    assert ctx.lm.review_queue() == [pg]
    assert ctx.lm.get(main).status == MemoryStatus.ACTIVE
    assert panel.ids() == [pg] and ctx.undo_entry is not None


def test_bulk_reject_erases_and_teaches_capture(qtbot: Any, ctx: AppContext) -> None:
    pg, main = _queued(ctx)
    panel = ReviewPanel(ctx)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: panel.count == 2, timeout=10_000)
    panel.select([pg, main])
    panel.reject_selected()
    assert panel.count == 0  # out of the queue at once, erased once Ctrl+Z cannot undo it
    assert ctx.lm.review_queue() == [main, pg]
    _close_undo_windows(ctx)
    qtbot.waitUntil(lambda: _idle(ctx) and not ctx.held, timeout=30_000)
    assert [ctx.lm.store.get_optional(i) for i in (pg, main)] == [None, None]
    assert panel.stack.currentWidget() is panel.empty
    assert panel.empty.text().startswith("Nothing to review")
    assert not panel.reject_all_button.isEnabled()

    # The same candidate said again in a new session is not captured.
    _say(ctx.lm, "s3", "We decided to use PostgreSQL 16 for the billing service!")
    assert ctx.lm.review_queue() == []
    reasons = [e.reason for e in Journal(ctx.lm.store).audit_entries(decision="skipped")]
    assert "rejected in review before" in reasons


def test_edit_then_accept_changes_the_memory_and_accepts_it(qtbot: Any, ctx: AppContext) -> None:
    pg, main = _queued(ctx)
    panel = ReviewPanel(ctx)
    qtbot.addWidget(panel)
    qtbot.waitUntil(lambda: panel.count == 2, timeout=10_000)
    panel.select([pg])
    dialog = panel.edit_selected()
    assert dialog is not None and dialog.content() == ctx.lm.get(pg).content
    dialog.content_edit.setPlainText("We use PostgreSQL 17 for the billing service.")
    dialog.accept()
    qtbot.waitUntil(
        lambda: _idle(ctx) and panel.count == 1 and "17" in ctx.lm.get(pg).content, timeout=30_000
    )
    assert ctx.lm.get(pg).content == "We use PostgreSQL 17 for the billing service."
    assert ctx.lm.get(pg).status == MemoryStatus.ACTIVE
    assert ctx.lm.review_queue() == [main] and panel.ids() == [main]
    assert pg in Journal(ctx.lm.store).reviewed_ids()


def test_audit_filters_and_remembers_a_skipped_candidate(qtbot: Any, ctx: AppContext) -> None:
    _say(ctx.lm, "s1", PG, project="shop")  # assist mode: the decision saved, the handoff skipped
    panel = AuditPanel(ctx)
    qtbot.addWidget(panel)
    ctx.emit(UiChanges(audit=True))  # hidden: noted, not loaded
    assert _idle(ctx) and panel.entries() == []
    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.show()
    assert {e.decision for e in panel.entries()} == {"saved", "skipped"}

    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.set_decision("skipped")
    skipped = panel.entries()
    assert skipped and {e.decision for e in skipped} == {"skipped"}
    panel.set_text_filter("no such words anywhere")
    assert panel.entries() == [] and panel.empty.text() == "Nothing matches the filter"
    panel.set_text_filter("THRESHOLD")  # case-insensitive, over reason, rule, text…
    assert panel.entries() == skipped

    entry = next(e for e in skipped if e.text)
    panel.select(entry.id)
    assert panel.remember_button.isEnabled()
    panel.remember_selected()
    assert not panel.remember_button.isEnabled()  # not twice
    explicit = MemoryFilter(source=MemorySource.EXPLICIT)
    qtbot.waitUntil(lambda: _idle(ctx) and ctx.lm.count(explicit) == 1, timeout=30_000)
    (memory,) = ctx.lm.list_memories(explicit)
    assert memory.content == entry.text and memory.project == "shop"
    assert panel.status.text().startswith("Remembered")
    assert "remembered" in panel.model.data(panel.model.index(0, 1))


def test_sessions_list_counts_and_the_timeline_in_order(qtbot: Any, ctx: AppContext) -> None:
    _say(ctx.lm, "s1", PG)
    _say(ctx.lm, "s2", MAIN)
    (captured,) = [m.id for m in ctx.lm.list_memories(MemoryFilter(session_id="s1"))]
    later = [
        ctx.lm.remember(text, context=MemoryContext(session_id="s1")).memories[0].id
        for text in (
            "Then we added an index on invoices.customer_id",
            "Finally we ran the backfill",
        )
    ]
    ctx.lm.archive(later[1])  # archived memories stay in the story

    panel = SessionsPanel(ctx)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.refresh()
    assert {s.id: s.memory_count for s in panel.sessions()} == {"s1": 1, "s2": 1}
    assert {s.agent for s in panel.sessions()} == {"claude"}

    panel.select("s1")
    with qtbot.waitSignal(panel.timeline_loaded, timeout=10_000) as opened:
        QTest.keyClick(panel.view, Qt.Key.Key_Return)
    assert opened.args == ["s1"] and panel.current_session == "s1"
    assert panel.timeline_ids() == [captured, *later]
    assert "Claude Code" in panel.timeline_title.text()  # the agent by its name
    agent_column = panel.COLUMNS.index("Agent")
    assert panel.model.index(0, agent_column).data() == "Claude Code"

    panel.timeline_view.setCurrentIndex(panel.timeline.index(1, 0))
    with qtbot.waitSignal(panel.open_memory, timeout=5_000) as activated:
        QTest.keyClick(panel.timeline_view, Qt.Key.Key_Return)
    assert activated.args == [later[0]]


def _has_colour(image: Any, colour: QColor) -> bool:
    for y in range(0, image.height(), 2):
        for x in range(0, image.width(), 2):
            if image.pixelColor(x, y) == colour:
                return True
    return False


def test_insights_draw_the_figures_and_drop_stale_reads(qtbot: Any, ctx: AppContext) -> None:
    ctx.lm.remember("The API rate limit is 500 requests per minute", project="shop")
    ctx.lm.remember("To release, run make release then tag the commit", project="shop")
    _say(ctx.lm, "s1", PG)  # assist mode: one saved, one skipped
    panel = InsightsPanel(ctx, days=7)
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    seen: list[int] = []
    panel.refreshed.connect(lambda: seen.append(1))
    panel.refresh()
    panel.refresh()  # overtakes the first: only one result is drawn
    qtbot.waitUntil(lambda: _idle(ctx) and bool(seen), timeout=10_000)
    assert seen == [1]

    data = panel.data
    assert data is not None and data["days"] == 7 and data["total"] == 3
    assert data["top_projects"][0] == ("shop", 2)
    assert panel.projects_chart.items[0] == ("shop", 2)
    assert [s.name for s in panel.by_source_chart.series] == ["explicit", "conversation"]
    assert sum(panel.by_type_chart.totals()) == 3 and not panel.by_type_chart.is_empty()
    assert not panel.skips_chart.is_empty()
    assert "3 memories in the last 7 days" in panel.summary.text()

    image = panel.by_type_chart.grab().toImage()
    assert _has_colour(image, QColor(TYPE_COLOURS["semantic"]))


def test_insights_empty_state(qtbot: Any, ctx: AppContext) -> None:
    panel = InsightsPanel(ctx)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.show()
    assert panel.summary.text() == "No memories yet"
    assert panel.by_type_chart.is_empty() and panel.projects_chart.is_empty()


def test_keyboard_triage_moves_on_to_the_next_memory(qtbot: Any, ctx: AppContext) -> None:
    """A, then A or R again, decides one memory after another: a decision leaves the
    next row selected (issue 18, defect 5)."""
    ctx.lm.settings.capture.mode = "full"
    _say(ctx.lm, "s1", PG)
    _say(ctx.lm, "s2", MAIN)
    _say(ctx.lm, "s3", "We decided to deploy the shop with make ship on Fridays.")
    panel = ReviewPanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.count == 3, timeout=10_000)
    first, second, third = panel.ids()
    panel.select([first])
    panel.view.setFocus()
    QTest.keyClick(panel.view, Qt.Key.Key_A)
    assert panel.ids() == [second, third] and panel.selected_ids() == [second]
    QTest.keyClick(panel.view, Qt.Key.Key_R)
    assert panel.ids() == [third] and panel.selected_ids() == [third]
    _close_undo_windows(ctx)
    qtbot.waitUntil(lambda: _idle(ctx) and panel.count == 1 and not ctx.held, timeout=30_000)
    assert ctx.lm.get(first).status == MemoryStatus.ACTIVE
    assert ctx.lm.store.get_optional(second) is None
    assert ctx.lm.review_queue() == [third]
    # The last one decided: nothing left to select, and nothing breaks.
    panel.select([third])
    QTest.keyClick(panel.view, Qt.Key.Key_A)
    assert panel.ids() == [] and panel.selected_ids() == []


def test_reject_all_says_what_it_did_on_the_tab(qtbot: Any, ctx: AppContext) -> None:
    """Reject all asks, then says on the tab what it did (issue 18, defect 6)."""
    from PySide6.QtWidgets import QMessageBox

    _queued(ctx)
    panel = ReviewPanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitUntil(lambda: panel.count == 2, timeout=10_000)
    panel.reject_all()
    box = panel.dialog
    assert isinstance(box, QMessageBox)
    yes = next(b for b in box.buttons() if b.text() == "Reject 2")
    yes.click()
    assert panel.count == 0 and panel.status.isVisible()
    assert panel.status.text() == "Rejected 2 memories — Ctrl+Z to undo (30 s)"
    _close_undo_windows(ctx)
    qtbot.waitUntil(lambda: _idle(ctx) and ctx.lm.review_queue() == [], timeout=30_000)
    assert panel.status.text() == (
        "Rejected 2 memories: erased, and capture will not keep the same again."
    )


@pytest.mark.parametrize("count", [1, 8, 10, 99, 8_003])
def test_the_tray_badge_says_a_count_that_fits_it(qtbot: Any, count: int) -> None:
    """8,003 to review showed a clipped "9" on the tray's badge (issue 18, defect 8):
    what the badge says fits its circle at every icon size."""
    from PySide6.QtGui import QFontMetricsF

    from ui.theme import badge_font, badge_text

    text = badge_text(count)
    assert text == (str(count) if count < 10 else "9+")
    for size in (22, 24, 32, 48, 64):
        width = size * 0.46  # the badge's circle in tray_icon
        font = badge_font(text, width)
        assert QFontMetricsF(font).horizontalAdvance(text) <= width, (count, size)


def test_the_audit_text_takes_the_width_and_a_session_shows_short(
    qtbot: Any, ctx: AppContext
) -> None:
    """The Audit tab gave the session UUID a wide column and the text ~70 px, then pushed
    the text off-screen (issue 18, defect 8): the text takes what the other columns leave,
    a session shows by its first characters (the whole id in the tooltip), and every
    column is on screen at the browser's size."""
    from lexmem.api import AuditEntry
    from lexmem.models import utcnow

    sid = "0f9c2b7e-5d41-4c8a-9e3b-2a6f1d8c7b90"
    reason = "confidence 0.42 below the assist threshold 0.60"
    ctx.lm.journal.audit([
        AuditEntry(
            id=f"a{i}", timestamp=utcnow(), session_id=sid, candidate_id=f"c{i}",
            decision="skipped", reason=reason, confidence=0.42, rule="procedure-reported",
            kind="procedure", title="Deploy", project="/home/dana/work/payments-service",
            text=f"{i}: to deploy the payments service, run make ship from the repository root "
                 "after the migrations have been applied on the staging database. " * 3,
        )
        for i in range(40)
    ])  # fmt: skip
    panel = AuditPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1280, 800)
    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.show()
    qtbot.wait(20)
    view, model = panel.view, panel.model
    header = view.horizontalHeader()
    columns = {name: i for i, name in enumerate(panel.COLUMNS)}
    text, session = columns["Text"], columns["Session"]
    assert header.length() <= view.viewport().width()  # nothing off-screen
    assert view.columnWidth(text) >= 0.25 * view.viewport().width()
    assert view.columnWidth(text) > 2 * view.columnWidth(session)
    assert model.data(model.index(0, session)) == sid[:8]
    assert sid in model.data(model.index(0, session), Qt.ItemDataRole.ToolTipRole)
    fm = view.fontMetrics()
    assert view.columnWidth(columns["Reason"]) > fm.horizontalAdvance(reason)  # readable
    assert view.columnWidth(columns["Rule"]) > fm.horizontalAdvance("procedure-reported")


def test_sessions_of_one_project_are_told_apart_by_their_topic(qtbot: Any, ctx: AppContext) -> None:
    """Two sessions of one project looked the same in the Sessions tab (issue 18, defect 8):
    each shows what capture first took from it (lexmem keeps no prompts, only memories and
    the audit of candidates)."""
    _say(ctx.lm, "s1", PG, project="/home/dana/work/shop")
    _say(ctx.lm, "s2", MAIN, project="/home/dana/work/shop")
    _say(ctx.lm, "s3", "ok", project="/home/dana/work/shop")  # nothing worth a candidate
    panel = SessionsPanel(ctx)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.refresh()
    topic = panel.COLUMNS.index("Topic")
    shown = {
        s.id: panel.model.data(panel.model.index(i, topic)) for i, s in enumerate(panel.sessions())
    }
    assert "PostgreSQL" in shown["s1"] and "main" in shown["s2"]
    assert shown["s3"] == "nothing captured"
    assert panel.topic("s1") and panel.topic("s3") == ""


@pytest.mark.parametrize("points", [9, 11, 13])
def test_chart_labels_are_drawn_whole(
    qtbot: Any, points: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Insights cut "no project" to "no proj…" (issue 18, defect 8): a bar's label is drawn
    whole unless the card is too narrow to keep room for the bars beside it."""
    from PySide6.QtGui import QFont, QPainter

    from ui.charts import HorizontalBarChart

    drawn: list[str] = []
    real = QPainter.drawText

    def spy(self: QPainter, *args: Any) -> Any:
        drawn.extend(a for a in args if isinstance(a, str))
        return real(self, *args)

    monkeypatch.setattr(QPainter, "drawText", spy)
    reason = "Confidence below the assist threshold"
    labels = ["no project", "payments-service", "shop", reason]
    for width in (300, 420, 640) if points <= 11 else (420, 640):
        chart = HorizontalBarChart("Top projects")
        qtbot.addWidget(chart)
        font = QFont(chart.font())
        font.setPointSize(points)
        chart.setFont(font)
        chart.set_data([(label, 40 - i) for i, label in enumerate(labels)])
        chart.resize(width, 260)
        drawn.clear()
        chart.grab()
        for label in ("no project", "payments-service") if width < 640 else labels:
            if width >= 640 and label == reason and points > 11:
                continue  # a long reason at a large font: elided, the tooltip has it
            assert label in drawn, (width, points, drawn)


def test_the_period_box_shows_its_whole_text(qtbot: Any, ctx: AppContext) -> None:
    """Insights' period box read "Last 30 day": the theme's sheet pads a combo box's text
    and the width Qt gave it left the padding out. Room for the text, the padding and
    the arrow, in both boxes with a choice."""
    from PySide6.QtWidgets import QApplication

    from ui.theme import apply_theme

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    style, palette, sheet = app.style().name(), app.palette(), app.styleSheet()
    apply_theme(app, "dark")
    try:
        insights, audit = InsightsPanel(ctx), AuditPanel(ctx)
        for panel in (insights, audit):
            qtbot.addWidget(panel)
            panel.resize(1280, 800)
            panel.show()
        for box in (insights.period_box, audit.decision_box):
            widest = max(
                box.fontMetrics().horizontalAdvance(box.itemText(i)) for i in range(box.count())
            )
            assert box.width() >= widest + 30, (box.currentText(), box.width(), widest)
    finally:  # the other tests run unthemed
        app.setStyleSheet(sheet)
        app.setPalette(palette)
        app.setStyle(style)


def test_insights_keep_two_projects_of_one_name_apart(qtbot: Any, ctx: AppContext) -> None:
    """Issue 18, defect 7: "shop" and the repository ~/work/shop merged into one name in
    Insights' project chart (two bars both called "shop")."""
    repo = str(Path.home() / "work" / "shop")
    ctx.lm.remember("The shop's invoices are numbered per year", project="shop")
    ctx.lm.remember("The shop deploys on Tuesdays", project=repo)
    ctx.lm.remember("The shop's staging database listens on 5433", project=repo)
    panel = InsightsPanel(ctx, days=7)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.refreshed, timeout=10_000):
        panel.refresh()
    assert panel.projects_chart.items == [("shop (~/work)", 2), ("shop", 1)]


def test_review_shows_a_watched_notes_markdown_as_text(qtbot: Any, ctx: AppContext) -> None:
    """Issue 18: a watched note waited in Review as "# Work journal ## Redis queue …"."""
    note = "# Work journal\n## Redis queue\n- **Use** Redis 7 for the job queue\n- [x] load test"
    (m,) = ctx.lm.remember(note, project="notes").memories
    panel = ReviewPanel(ctx)
    qtbot.addWidget(panel)
    shown = panel._cell(m, 0, Qt.ItemDataRole.DisplayRole)
    assert shown == "Work journal: Redis queue: Use Redis 7 for the job queue load test"
    assert "#" not in shown and "**" not in shown
