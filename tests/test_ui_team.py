"""Team memory on the desktop: the browser marks what a team sees (the table's project
column and the detail panel) and the tray's status says where sync stands. A real core,
a real team database (PostgreSQL with pgvector, tests/pgfixture.py) and real widgets."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from lexmem.api import Lexmem
from ui.app import App, team_text
from ui.browser import MemoriesPage
from ui.context import AppContext
from ui.table import COLUMNS

WAIT = 30_000


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "work" / "shop"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def team_url(pg_database: str, lm: Lexmem) -> str:
    """A team database whose team "devs" shares "shop", with ann a member."""
    from lexmem.store.postgres.team import TeamServer

    with TeamServer(pg_database, dim=lm.embedder.dim, space=lm.embedder.space_id) as server:
        server.create_team("devs")
        server.share_project("devs", "shop")
        server.add_member("devs", "ann")
    return pg_database


def join(lm: Lexmem, url: str, repo: Path) -> None:
    lm.team_join(url, project=str(repo), team_name="shop", user="ann", cwd=str(repo))


def test_team_sync_in_a_few_words() -> None:
    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert team_text(None) == ""
    assert team_text({"joined": False}) == ""
    joined = {"joined": True, "outbox": 0, "last_sync": None, "last_error": None}
    assert team_text(joined) == "Team: not synced yet"
    assert team_text({**joined, "outbox": 3}) == "Team: 3 waiting to sync"
    recent = (now - timedelta(seconds=5)).isoformat()
    assert team_text({**joined, "last_sync": recent}, now) == "Team: synced"
    older = (now - timedelta(minutes=7)).isoformat()
    assert team_text({**joined, "last_sync": older}, now) == "Team: synced 7 min ago"
    failing = {**joined, "outbox": 2, "last_error": "the server cannot be reached\nmore"}
    assert team_text(failing) == "Team: not syncing (the server cannot be reached)"


def _project_cell(page: MemoriesPage, memory_id: str, role: int) -> Any:
    column = next(i for i, c in enumerate(COLUMNS) if c.key == "project")
    row = page.model.row_of(memory_id)
    assert row is not None
    return page.model.data(page.model.index(row, column), role)


@pytest.fixture
def page(qtbot: Any, ctx: AppContext) -> Iterator[MemoriesPage]:
    p = MemoriesPage(ctx)
    qtbot.addWidget(p)
    p.resize(1100, 700)
    p.show()
    yield p
    qtbot.waitUntil(lambda: ctx.runner.pending == 0, timeout=WAIT)


def test_a_shared_project_is_marked_in_the_table_and_the_detail_panel(
    qtbot: Any, lm: Lexmem, ctx: AppContext, page: MemoriesPage, repo: Path, team_url: str
) -> None:
    shared = (
        lm.remember("The shop deploys from the release branch", project=str(repo)).memories[0].id
    )
    private = (
        lm.remember("My own note on the novel's second chapter", project="novel").memories[0].id
    )
    join(lm, team_url, repo)
    page.refresh()
    qtbot.waitUntil(lambda: page.model.shared_as(str(repo)) == "shop", timeout=WAIT)
    qtbot.waitUntil(
        lambda: all(page.model.memory(i) is not None for i in (shared, private)), timeout=WAIT
    )
    assert _project_cell(page, shared, Qt.ItemDataRole.DecorationRole) is not None
    assert _project_cell(page, private, Qt.ItemDataRole.DecorationRole) is None
    tip = _project_cell(page, shared, Qt.ItemDataRole.ToolTipRole)
    assert "Shared with the team as “shop”" in tip
    assert "Shared with" not in _project_cell(page, private, Qt.ItemDataRole.ToolTipRole)

    detail = page.detail
    detail.show_memory(shared)
    qtbot.waitUntil(lambda: detail.data is not None and detail.data.detail.memory.id == shared)
    team_row = list(detail._fields).index("team")
    assert detail._fields["team"].text() == "Shared with the team as “shop”"
    assert detail.form.isRowVisible(team_row)
    detail.show_memory(private)
    qtbot.waitUntil(lambda: detail.data is not None and detail.data.detail.memory.id == private)
    assert not detail.form.isRowVisible(team_row)


def test_the_status_says_where_team_sync_stands(
    qtbot: Any, lm: Lexmem, repo: Path, team_url: str
) -> None:
    app = App(lm, tray=False)
    app.start(show_window=False)
    try:
        qtbot.waitUntil(lambda: app.service_state == "running", timeout=WAIT)
        assert "Team" not in app.status_text()  # nothing shared: nothing said
        join(lm, team_url, repo)
        lm.remember("The shop's staging database is shop_staging", project=str(repo))
        app.load_team()
        qtbot.waitUntil(lambda: "Team: " in app.status_text(), timeout=WAIT)
        # The writer pushes what was remembered; the status follows without a click.
        qtbot.waitUntil(
            lambda: (app.load_team(), "Team: synced" in app.status_text())[1], timeout=WAIT
        )
        assert "Team: synced" in app.window.state_label.text()
    finally:
        app.stop()
