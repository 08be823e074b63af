"""The browser's tabs at scale: no per-row work on the UI thread (issue 18, defect 9).

Switching to Audit froze the UI for 1.3 s at 10,000 memories, Review and Sessions for
0.4 s: their tables sized every column to its contents, which asks every row for its
size each time rows arrive, and a first load inserted its rows one by one. These tests
say it without a clock: loading twice the rows asks the model about no more rows, and
arrives in one insertion; the store is read off the UI thread. ``bench/ui.py`` measures
the stall itself (``tab_switch_stall_ms``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from PySide6.QtWidgets import QHeaderView, QTableView, QWidget

from lexmem.api import AuditEntry, Lexmem, Session
from lexmem.models import Memory, MemorySource, MemoryType, utcnow
from ui.context import AppContext
from ui.panels import AuditPanel, ReviewPanel, SessionsPanel, _Panel

LONG = (
    "The billing service keeps its ledger in PostgreSQL 16 on the db-2 host; migrations run "
    "through alembic from services/billing/migrations and need the BILLING_DSN variable set."
)


def _history(lm: Lexmem, start: int, n: int) -> None:
    """``n`` more agent sessions, each with an audit entry, and ``n`` memories captured
    for review (one embedding shared: what is measured here never looks at vectors)."""
    now = utcnow()
    sessions = [
        Session(
            id=str(uuid.UUID(int=start + i + 1)),
            agent="claude",
            project=f"/home/dana/p{i % 7}",
            started_at=now - timedelta(minutes=start + i),
            last_event_at=now,
        )
        for i in range(n)
    ]
    lm.journal.save_sessions(sessions)
    lm.journal.audit([
        AuditEntry(
            id=f"audit-{start + i}", timestamp=s.started_at, session_id=s.id,
            candidate_id=f"c-{start + i}", decision="skipped", reason="too short to stand on its own",
            confidence=0.4, rule="decision", kind="decision", title=LONG[:80], project=s.project,
            text=f"{i} {LONG}",
        )
        for i, s in enumerate(sessions)
    ])  # fmt: skip
    vector = lm.embedder.embed([LONG])[0]
    lm.store.store_many([
        Memory(
            content=f"{LONG} ({start + i})", type=MemoryType.SEMANTIC, project="shop",
            source=MemorySource.CONVERSATION, embedding=list(vector),
        )
        for i in range(n)
    ])  # fmt: skip


def _tables(panel: QWidget) -> list[QTableView]:
    return panel.findChildren(QTableView)


def _rows_asked(
    qtbot: Any, ctx: AppContext, make: Callable[[AppContext], _Panel], rows: int
) -> tuple[int, int]:
    """Open a panel at the browser's size on the store as it is: (how many of its rows
    the UI thread asked its models about, rowsInserted signals), until it has shown its
    rows.

    Rows, not cells: each paint asks the rows on screen again, and how many paints a
    busy machine runs while the test waits is not the panel's doing (a run under load
    asked 4,263 cells at 300 rows against 2,842 at 150, the same rows painted more
    often). Sizing columns to their contents asks every row, on screen or not."""
    panel = make(ctx)
    qtbot.addWidget(panel)
    panel.resize(1280, 800)
    asked: set[int] = set()
    inserted = [0]
    for view in _tables(panel):
        model: Any = view.model()
        cell = model._cell

        def counted(item: Any, *args: Any, cell: Any = cell) -> Any:
            asked.add(id(item))  # the model holds its rows: an id stays theirs
            return cell(item, *args)

        model._cell = counted
        model.rowsInserted.connect(lambda *_: inserted.__setitem__(0, inserted[0] + 1))
    with qtbot.waitSignal(panel.refreshed, timeout=30_000):
        panel.show()
        panel.refresh()
    qtbot.waitUntil(lambda: ctx.runner.pending == 0, timeout=30_000)
    assert panel.view.model().rowCount() >= rows  # type: ignore[attr-defined]
    qtbot.wait(50)  # the paint after the rows arrived
    panel.grab()
    panel.close()
    return len(asked), inserted[0]


@pytest.mark.parametrize("make", [ReviewPanel, AuditPanel, SessionsPanel])
def test_twice_the_rows_cost_the_ui_thread_no_more(
    qtbot: Any, ctx: AppContext, make: Callable[[AppContext], _Panel]
) -> None:
    _history(ctx.lm, 0, 150)
    small, small_inserts = _rows_asked(qtbot, ctx, make, 150)
    _history(ctx.lm, 150, 150)
    big, big_inserts = _rows_asked(qtbot, ctx, make, 300)
    # Only what is on screen is asked about: the same rows at 300 as at 150, and far
    # fewer than 150 (a window 800 pixels high shows a few dozen).
    assert big <= small + 5 and small < 100, (small, big)
    assert small_inserts <= 2 and big_inserts <= 2  # one insertion for a first load


def test_no_table_sizes_its_columns_to_their_contents(qtbot: Any, ctx: AppContext) -> None:
    for make in (ReviewPanel, AuditPanel, SessionsPanel):
        panel = make(ctx)
        qtbot.addWidget(panel)
        for view in _tables(panel):
            header = view.horizontalHeader()
            modes = [header.sectionResizeMode(i) for i in range(header.count())]
            assert QHeaderView.ResizeMode.ResizeToContents not in modes, (make, modes)
            assert modes.count(QHeaderView.ResizeMode.Stretch) == 1  # one takes the rest


def test_panels_read_the_store_off_the_ui_thread(
    qtbot: Any, ctx: AppContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(ctx.lm, 0, 20)
    lm = ctx.lm
    threads: list[str] = []
    for name in ("review_queue", "memories_for", "audit_entries", "sessions", "session_topics"):
        real = getattr(lm, name)

        def spy(*args: Any, real: Any = real, **kw: Any) -> Any:
            threads.append(threading.current_thread().name)
            return real(*args, **kw)

        monkeypatch.setattr(lm, name, spy)
    for make in (ReviewPanel, AuditPanel, SessionsPanel):
        panel = make(ctx)
        qtbot.addWidget(panel)
        with qtbot.waitSignal(panel.refreshed, timeout=30_000):
            panel.refresh()
    assert threads and all(t.startswith("lexmem-read") for t in threads), threads
