"""The tray app as a whole: real core, the capture service on its thread, real hook runs.

The offscreen platform has no system tray, so the app runs as it does on such desktops:
the browser is the main window and the tray's actions are in its menu bar.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox
from lexmem.locks import FileLock
from lexmem.service.writer import CaptureService
from ui.app import PAUSE_FOREVER, App
from ui.context import UiChanges
from ui.start import main

HOOK = str(Path(sys.executable).with_name("lexmem-hook"))


def hook(repo: Path, session: str, event: str, **fields: Any) -> None:
    payload = {"session_id": session, "cwd": str(repo), "hook_event_name": event, **fields}
    proc = subprocess.run(
        [HOOK, "claude"], input=json.dumps(payload).encode(), capture_output=True,
        env=os.environ.copy(), timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0


def agent_session(repo: Path, text: str) -> str:
    sid = str(uuid.uuid4())
    hook(repo, sid, "SessionStart", source="startup")
    hook(repo, sid, "UserPromptSubmit", prompt=text)
    hook(repo, sid, "Stop", stop_hook_active=False, last_assistant_message="Noted.")
    hook(repo, sid, "SessionEnd", reason="exit")
    return sid


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def answer(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Answers the opt-out's question with the button named by ``answer[0]`` and records
    each question asked after it. Why faked: ``QMessageBox.exec`` runs a modal loop that
    waits for a person; the box itself, its text and its buttons stay real."""
    from PySide6.QtWidgets import QMessageBox

    said = ["Keep"]

    def exec_(box: QMessageBox) -> int:
        said.append(box.text())
        (button,) = [b for b in box.buttons() if b.text().replace("&", "") == said[0]]
        button.click()
        return 0

    monkeypatch.setattr(QMessageBox, "exec", exec_)
    return said


@pytest.fixture
def app(qtbot: Any, lm: Lexmem) -> Iterator[App]:
    a = App(lm, tray=False)
    a.start(show_window=True)
    qtbot.waitUntil(lambda: a.service_state == "running", timeout=30_000)
    yield a
    a.stop()


@contextmanager
def writer_held(app: App) -> Iterator[None]:
    """The app's in-process writer held between two passes of its loop (as a maintenance
    job holds it), so that a scan of the data folder does not race the writer's erasure
    of the drained event buffer and its clean-up of old table versions."""
    service = CaptureService.in_process(app.lm.paths)
    assert service is not None
    with service._exclusive:
        yield


def test_without_a_tray_the_browser_is_the_main_window(app: App) -> None:
    assert app.tray is None and app.window.isVisible()
    titles = [a.text() for a in app.window.menuBar().actions()]
    assert titles[0] == "&lexmem"
    items = [a.text() for a in app.window.menuBar().actions()[0].menu().actions()]
    for wanted in ("Quick remember…", "Open memory browser", "Review queue (0)", "Capture mode",
                   "Pause capture for 1 hour", "Repositories", "Settings…", "Quit lexmem"):  # fmt: skip
        assert wanted in items
    assert app.tray_state() == "capturing"


def test_unchecking_a_repository_opts_it_out_for_the_hook_at_once(
    qtbot: Any, app: App, repo: Path, answer: list[str]
) -> None:
    app.lm.settings.capture.mode = "full"
    agent_session(repo, "We decided to use PostgreSQL 16 for the billing service.")
    app.ctx.wake()
    inbox = Inbox(app.lm.paths.inbox)
    qtbot.waitUntil(lambda: app.lm.count() == 1 and not inbox.pending(), timeout=30_000)
    qtbot.waitUntil(lambda: str(repo) in app.menu.repositories, timeout=30_000)

    app.menu._fill_repositories()  # what showing the submenu does
    (toggle,) = [a for a in app.menu.repos_menu.actions() if a.isCheckable()]
    assert toggle.isChecked()
    toggle.trigger()  # a click on the menu item
    qtbot.waitUntil(lambda: str(repo) in app.lm.settings.capture.optout, timeout=10_000)
    assert answer[1:] and "Also erase the memory already captured" in answer[1]  # kept

    before = app.lm.count()
    marker = "OPTED-OUT-MARKER-77"
    hook(repo, str(uuid.uuid4()), "UserPromptSubmit", prompt=f"Remember that {marker} matters")
    assert inbox.pending() == []  # the hook wrote nothing: no trace at all
    assert app.lm.count() == before
    for path in app.lm.paths.home.rglob("*"):
        if path.is_file():
            assert marker.encode() not in path.read_bytes()

    app.menu._fill_repositories()
    (toggle,) = [a for a in app.menu.repos_menu.actions() if a.isCheckable()]
    assert not toggle.isChecked()
    toggle.trigger()
    qtbot.waitUntil(lambda: app.lm.settings.capture.optout == [], timeout=10_000)


def test_unchecking_a_repository_with_memories_asks_and_erase_erases_them(
    qtbot: Any, app: App, repo: Path, answer: list[str]
) -> None:
    from diskscan import assert_nowhere, find_markers

    app.lm.settings.capture.mode = "full"
    agent_session(repo, "We decided to use zqxmarker4p for the billing service.")
    app.ctx.wake()
    qtbot.waitUntil(lambda: app.lm.count() == 1, timeout=30_000)
    qtbot.waitUntil(lambda: str(repo) in app.menu.repositories, timeout=30_000)
    with writer_held(app):
        assert find_markers(app.lm.paths.home, ["zqxmarker4p"])

    # Cancel: nothing changes, nothing is erased.
    answer[0] = "Cancel"
    app.menu.set_repository(str(repo), False)
    qtbot.waitUntil(lambda: len(answer) == 2, timeout=10_000)
    assert answer[1] == (
        f"Also erase the memory already captured from {repo}? This cannot be undone; "
        "backups made before now still hold them."
    )
    qtbot.waitUntil(lambda: not app.ctx.runner.pending, timeout=10_000)
    assert app.lm.settings.capture.optout == [] and app.lm.count() == 1

    # Erase: opted out, and the memory erased off the UI thread.
    answer[0] = "Erase"
    app.menu.set_repository(str(repo), False)
    qtbot.waitUntil(lambda: len(answer) == 3, timeout=10_000)
    qtbot.waitUntil(lambda: app.lm.count() == 0 and not app.ctx.runner.pending, timeout=60_000)
    assert str(repo) in app.lm.settings.capture.optout
    with writer_held(app):
        assert_nowhere(app.lm.paths.home, ["zqxmarker4p"])


def test_pause_and_mode_show_in_the_tray_state(qtbot: Any, app: App) -> None:
    with qtbot.waitSignal(app.ctx.hub.changed, timeout=10_000):
        app.menu.pause_action.trigger()
    assert app.lm.settings.capture.paused_until == PAUSE_FOREVER
    assert app.tray_state() == "paused" and app.menu.resume_action.isVisible()
    assert "paused" in app.window.state_label.text().lower()
    with qtbot.waitSignal(app.ctx.hub.changed, timeout=10_000):
        app.menu.resume_action.trigger()
    assert app.tray_state() == "capturing"
    with qtbot.waitSignal(app.ctx.hub.changed, timeout=10_000):
        app.menu.mode_actions["off"].trigger()
    assert app.lm.settings.capture.mode == "off" and app.tray_state() == "off"


def test_review_count_follows_captures_and_reviews(qtbot: Any, app: App, repo: Path) -> None:
    app.lm.settings.capture.mode = "full"
    agent_session(repo, "We decided to use PostgreSQL 16 for the billing service.")
    app.ctx.wake()
    qtbot.waitUntil(lambda: app.menu.review_count == 1, timeout=30_000)
    assert app.menu.review_action.text() == "Review queue (1)"
    assert "1 to review" in app.status_text()
    from ui import ops

    ops.review(app.ctx, app.lm.review_queue(), "accepted")
    qtbot.waitUntil(lambda: app.menu.review_count == 0, timeout=30_000)


def test_a_quarantined_event_raises_a_notification(qtbot: Any, app: App) -> None:
    seen: list[tuple[str, str]] = []
    app.ctx.hub.notify.connect(lambda t, m: seen.append((t, m)))
    bad = app.lm.paths.inbox / "0000-bad.json"
    bad.write_bytes(b"{not json")
    app.ctx.wake()
    qtbot.waitUntil(lambda: bool(seen), timeout=30_000)
    assert "quarantined" in seen[0][1]


def test_a_second_launch_raises_the_running_browser(qtbot: Any, app: App) -> None:
    app.window.hide()
    lock = FileLock(app.lm.paths.home / "app.lock", timeout=0)
    lock.acquire()  # the running app's lock (the fixture's App is started without main())
    try:
        assert main(home=str(app.lm.paths.home)) == 0  # returns at once
    finally:
        lock.release()
    app.ctx.wake()
    qtbot.waitUntil(app.window.isVisible, timeout=30_000)


def test_long_work_never_blocks_the_event_loop(qtbot: Any, app: App) -> None:
    """The read waits until the UI loop has ticked five times: were the loop blocked
    while it ran, the timer could not fire and the read would never finish."""
    ticks = 0
    ticked = threading.Event()
    threads: set[int] = set()

    def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks >= 5:
            ticked.set()

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(tick)
    timer.start()

    def long_read() -> int:
        threads.add(threading.get_ident())
        app.lm.search("which database does the billing service use", record_access=False)
        app.lm.embedder.embed([f"memory number {i} about a topic" for i in range(200)])
        assert ticked.wait(30), "the UI loop did not run while the read was working"
        return ticks

    done: list[int] = []
    app.ctx.read(long_read, done.append)
    qtbot.waitUntil(lambda: bool(done), timeout=60_000)
    timer.stop()
    assert done[0] >= 5 and threading.get_ident() not in threads


def test_changes_from_the_service_reach_the_panels(qtbot: Any, app: App) -> None:
    seen: list[UiChanges] = []
    app.ctx.hub.changed.connect(seen.append)
    from ui import ops

    ops.remember(app.ctx, "The release train leaves every second Thursday")
    qtbot.waitUntil(lambda: any(c.memories.created for c in seen), timeout=30_000)
    created = next(c for c in seen if c.memories.created).memories.created
    assert app.lm.get(created[0]).content == "The release train leaves every second Thursday"


def test_the_tray_icon_shows_before_the_store_opens_and_the_loop_runs_meanwhile(
    qtbot: Any, data_home: Path
) -> None:
    """A fresh data folder's store is created under the store's write lock; the test holds
    that lock (as another process creating the store would), so opening the store really
    waits. The icon, its "starting" menu and the event loop must not."""
    from lexmem.config import Paths
    from ui.start import STARTING_TEXT, Starting

    paths = Paths(data_home)
    paths.ensure()
    write_lock = FileLock(paths.write_lock, timeout=0)
    write_lock.acquire()
    seen: dict[str, Any] = {}
    ticks = [0]

    def tick() -> None:
        ticks[0] += 1

    ticker = QTimer()
    ticker.setInterval(20)
    ticker.timeout.connect(tick)

    def on_starting(starting: Starting) -> None:
        assert starting.icon is not None and starting.menu is not None
        seen["visible"] = starting.icon.isVisible()
        seen["menu"] = [(a.text(), a.isEnabled()) for a in starting.menu.actions() if a.text()]
        seen["icon"] = starting.icon
        ticker.start()

        def later() -> None:
            # The loop has ticked while the store waited for its lock: nothing blocked it.
            seen["ticks_while_held"] = ticks[0]
            seen["opened_while_held"] = starting.result is not None
            write_lock.release()
            seen["released"] = True

        QTimer.singleShot(1500, later)

    def on_started(app: App) -> None:
        seen["same_icon"] = app.tray is seen["icon"]
        assert app.tray is not None and app.tray.contextMenu() is not None
        seen["full_menu"] = [a.text() for a in app.tray.contextMenu().actions()]
        seen["model_loaded"] = app.lm.embedder.loaded
        seen["frozen"] = gc.get_freeze_count()  # the built app is out of the GC's scans

        def wait_running() -> None:
            if app.service_state == "running":
                seen["service"] = "running"
                app.quit()
            else:
                QTimer.singleShot(50, wait_running)

        wait_running()

    guard = QTimer()  # a hard stop far above the normal ~3 s
    guard.setSingleShot(True)
    guard.timeout.connect(app_quit_anyway)
    guard.start(120_000)
    try:
        code = main(home=str(data_home), tray=True, on_starting=on_starting, on_started=on_started)
    finally:
        guard.stop()
        ticker.stop()
        gc.unfreeze()  # the test process goes on: its later garbage must stay collectable
        if not seen.get("released"):
            write_lock.release()
    assert code == 0
    assert seen["visible"]
    assert seen["menu"] == [(STARTING_TEXT, False), ("Quit lexmem", True)]
    assert seen["ticks_while_held"] >= 10 and not seen["opened_while_held"]
    assert seen["same_icon"] and "Quick remember…" in seen["full_menu"]
    assert seen["service"] == "running"
    assert not seen["model_loaded"]  # loaded when a capture or a search first needs it
    assert seen["frozen"] > 10_000


def app_quit_anyway() -> None:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is not None:
        app.quit()


def test_a_fresh_process_opens_the_core_behind_the_icon_and_runs_the_service(
    data_home: Path,
) -> None:
    """In a fresh interpreter LanceDB is first imported on the starting thread while the
    Qt loop runs (in this test process it was imported long before): the core must still
    open and the writer run."""
    code = """
import sys
from PySide6.QtCore import QTimer
from ui.start import main

def started(app):
    def check():
        if app.service_state == "running":
            print("running", flush=True)
            app.quit()
        else:
            QTimer.singleShot(50, check)
    check()

sys.exit(main(home=sys.argv[1], tray=True, on_started=started))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code, str(data_home)], capture_output=True, text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "running" in proc.stdout, proc.stderr[-2000:]


def test_the_tray_apps_service_answers_readers_on_its_socket(data_home: Path) -> None:
    """`lexmem app` runs the writer, and with it the reader socket: a CLI read and an MCP
    session from other processes are answered by the app's warm core."""
    import json
    import signal
    import time

    from faultkit import environment, lexmem_command

    env = {**environment(data_home), "QT_QPA_PLATFORM": "offscreen", "COLUMNS": "120"}
    subprocess.run([*lexmem_command(), "remember", "The shop's database is PostgreSQL 16"],
                   env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    app = subprocess.Popen([*lexmem_command(), "app", "--tray"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (data_home / "reader.sock").exists():
            assert app.poll() is None, app.stderr.read().decode()[-2000:] if app.stderr else ""
            assert time.monotonic() < deadline, "the app's service has no reader socket"
            time.sleep(0.1)
        probe = (
            "import sys\nsys.argv = ['lexmem', 'search', 'database']\n"
            "from ui.front import main\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('LOADED', 'lancedb' in sys.modules, code, file=sys.stderr)\n"
        )
        read = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
        assert "PostgreSQL" in read.stdout and "LOADED False 0" in read.stderr, read.stderr
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "search_memory", "arguments": {"query": "database"}}}  # fmt: skip
        mcp = subprocess.Popen([*lexmem_command(), "mcp"], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
        assert mcp.stdin is not None and mcp.stdout is not None
        for message in (init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
            mcp.stdin.write((json.dumps(message) + "\n").encode())
        mcp.stdin.flush()
        replies = [json.loads(mcp.stdout.readline()) for _ in range(2)]
        mcp.stdin.close()
        assert mcp.wait(30) == 0
        assert "PostgreSQL" in replies[1]["result"]["content"][0]["text"]
    finally:
        app.send_signal(signal.SIGTERM)
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait(30)


def test_ctrl_z_on_the_review_tab_undoes_the_last_decision(
    qtbot: Any, app: App, repo: Path
) -> None:
    """The Edit menu offers Undo on every tab; its shortcut works on the Review tab too
    (issue 18, defect 5)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    app.lm.settings.capture.mode = "full"
    agent_session(repo, "We decided to use PostgreSQL 16 for the billing service.")
    app.ctx.wake()
    qtbot.waitUntil(lambda: app.menu.review_count == 1, timeout=30_000)
    app.window.show_tab("review")
    review = app.window.review
    qtbot.waitUntil(lambda: review.count == 1, timeout=10_000)
    (memory_id,) = review.ids()
    review.select([memory_id])
    review.view.setFocus()
    QTest.keyClick(review.view, Qt.Key.Key_A)
    qtbot.waitUntil(
        lambda: app.ctx.runner.pending == 0 and app.lm.review_queue() == [], timeout=30_000
    )
    # The person clicks the Review tab itself: the focus is on the tab bar, in the
    # window but outside the panel.
    bar = app.window.tabs.tabBar()
    bar.setFocus()
    assert bar.hasFocus() or not app.window.isActiveWindow()
    QTest.keyClick(bar, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: app.lm.review_queue() == [memory_id], timeout=30_000)


def _shown_title(title: str, display_name: str) -> str:
    """The title an X11 or Wayland window manager shows: Qt appends the application's
    display name unless the title already ends with it (QPlatformWindow::formatWindowTitle)."""
    return title if title.endswith(display_name) else f"{title} \u2014 {display_name}"


def test_the_browsers_title_names_lexmem_once(app: App) -> None:
    """ui.start names the app "lexmem", which Qt adds to every window's title on Linux:
    the browser read "lexmem — memory browser — lexmem" (issue 18, defect 8)."""
    shown = _shown_title(app.window.windowTitle(), "lexmem")
    assert shown.count("lexmem") == 1, shown


def test_quick_remember_says_what_it_kept(qtbot: Any, app: App) -> None:
    """The box closes on a save; the app says so, quoting the text (issue 18, defect 6)."""
    app.quick_remember()
    box = app._quick
    assert box is not None
    box.text.setPlainText("The staging database runs on port 5433")
    box.save()
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=30_000)
    shown = app.window.statusBar().currentMessage()
    assert shown == "Remembered: The staging database runs on port 5433"


def test_one_project_goes_by_one_name(qtbot: Any, app: App, repo: Path) -> None:
    """Issue 18, defect 7: Quick remember listed absolute paths under a blank first entry,
    Repositories showed ``~/…`` paths, and "shop" typed by hand became a second project
    beside the repository ``…/shop`` that looks the same in the table."""
    agent_session(repo, "We decided to use PostgreSQL 16 for the billing service.")
    app.ctx.wake()
    qtbot.waitUntil(lambda: str(repo) in app.lm.projects(), timeout=30_000)

    app.quick_remember()
    box = app._quick
    assert box is not None
    qtbot.waitUntil(lambda: box.project.count() > 0, timeout=10_000)
    items = [box.project.itemText(i) for i in range(box.project.count())]
    assert items == ["shop"]  # no blank entry, no path
    assert box.project.currentText() == ""  # "no project" until one is picked or typed

    box.text.setPlainText("The shop's invoices are numbered per calendar year")
    box.project.setEditText("shop")  # typed by hand, as a person names the repository
    box.save()
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=30_000)
    hits = app.lm.search("invoices numbered per calendar year", limit=1).hits
    assert hits and hits[0].memory.project == str(repo)
    assert app.lm.projects() == [str(repo)]  # still one project

    app.menu.load_repositories()
    qtbot.waitUntil(lambda: app.menu.repositories == [str(repo)], timeout=10_000)
    app.menu.repos_menu.aboutToShow.emit()
    names = [a.text() for a in app.menu.repos_menu.actions()]
    assert names == ["shop"]


def test_quick_remember_has_no_black_corners(qtbot: Any, app: App) -> None:
    """Issue 18, defect 8: a translucent, rounded box shows black corners where no
    compositor runs. Every pixel of the box is painted: no transparent corner."""
    app.quick_remember()
    box = app._quick
    assert box is not None
    qtbot.waitExposed(box)
    image = box.grab().toImage()
    corners = [(0, 0), (image.width() - 1, 0), (0, image.height() - 1),
               (image.width() - 1, image.height() - 1)]  # fmt: skip
    assert all(image.pixelColor(x, y).alpha() == 255 for x, y in corners)
    box.reject()


def test_the_detail_panel_speaks_words_not_ids(qtbot: Any, app: App, repo: Path) -> None:
    """Issue 18, defect 8: the detail panel showed raw JSON metadata, rule ids and the
    session's UUID, and a chart of a single point."""
    sid = agent_session(repo, "We decided to use PostgreSQL 16 for the billing service.")
    app.ctx.wake()
    qtbot.waitUntil(lambda: len(app.lm.review_queue()) == 1, timeout=30_000)
    (memory_id,) = app.lm.review_queue()
    app.window.show_memory(memory_id)
    detail = app.window.memories.detail
    qtbot.waitUntil(
        lambda: detail.data is not None and detail.data.detail.memory.id == memory_id,
        timeout=10_000,
    )
    fields = {key: label.text() for key, label in detail._fields.items()}
    assert fields["session"].startswith("Claude Code in shop, "), fields["session"]
    assert sid not in fields["session"] and sid[:8] not in fields["session"]
    assert fields["learned"] == "captured as a decision during the session", fields["learned"]
    assert "{" not in fields["metadata"] and '"' not in fields["metadata"], fields["metadata"]
    assert "Captured as: " in fields["metadata"]
    assert fields["classified"] == "given when it was stored"  # not "explicit"
    assert "_" not in fields["metadata"].replace("<br>", "")
    audit = detail.audit_label.text()
    assert "saved" in audit and "rule" not in audit, audit
    for entry in detail.data.audit if detail.data else []:
        if entry.rule:
            assert entry.rule not in audit
    # One confidence value: said in words, no chart of a lone dot.
    assert not detail.chart.isVisible()
    assert "unchanged since" in detail.salience_label.text()


def test_where_a_memory_came_from_is_said_in_words() -> None:
    """Memories remembered by hand carry lexmem's own session names and a supersede's
    learning context names the older id: the panel says them in words (issue 18)."""
    from ui.detail import _learned, session_text

    assert session_text(None, "tray-explicit") == "Quick remember"
    assert session_text(None, "cli-explicit") == "the lexmem command"
    assert session_text(None, "app") == "lexmem's desktop app"
    assert session_text(None, "mcp-ops") == "an MCP client"
    assert session_text(None, "0f1e2d3c-aaaa-bbbb-cccc-000011112222") == "session 0f1e2d3c"
    assert session_text(None, "") == ""
    learned = _learned("supersedes 0f1e2d3c-aaaa-bbbb-cccc-000011112222")
    assert learned == "a new version of an older memory (see Versions)"
    assert _learned("captured by decision-decided from session 0f1e2d3c") == (
        "captured during the session"
    )


def test_the_repositories_menu_names_projects_as_the_browser_does(
    qtbot: Any, app: App, repo: Path
) -> None:
    """A named project "shop" beside the repository …/shop: the menu says which is which
    the way the browser and the Sessions tab do, not "shop" for the repository."""
    app.lm.remember("The shop's invoices are numbered per year", project="shop")
    agent_session(repo, "We decided to use PostgreSQL 16 for the billing service.")
    app.ctx.wake()
    qtbot.waitUntil(lambda: str(repo) in app.lm.projects(), timeout=30_000)
    app.menu.load_repositories()
    qtbot.waitUntil(lambda: app.menu.repositories == [str(repo)], timeout=10_000)
    app.menu.repos_menu.aboutToShow.emit()
    (name,) = [a.text() for a in app.menu.repos_menu.actions()]
    from lexmem.api import project_labels

    assert name.startswith("shop ("), name

    assert name == project_labels(app.lm.projects())[str(repo)]
