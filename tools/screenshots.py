"""Render the app's windows to PNG, in the light and the dark theme.

    python tools/screenshots.py [--out DIR]      (``make screenshots`` / ``./dev screenshots``)

It fills a temporary data folder with realistic memories through lexmem's own paths
(explicit remembers, agent sessions captured by the real service, a supersede, links,
reinforcement), opens the real app on it (offscreen unless a display is asked for),
and saves: the tray menu, quick-remember, the browser with a memory's detail, the
review, audit, sessions and insights tabs, every settings tab, the licence window and
the upgrade prompt.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NOTES = [
    ("The billing service uses PostgreSQL 16 with logical replication to the warehouse", "shop"),
    ("Run `make check` before pushing: it runs ruff, mypy and the fast tests", "shop"),
    ("Mara's eyes are green; her brother Tom has the grey ones", "novel"),
    ("Chapter titles stay under five words", "novel"),
    ("Deploys go out on Tuesdays after the standup, never on Fridays", "shop"),
    ("The staging database listens on port 5433", "shop"),
    ("User prefers dark mode in every editor", None),
    ("Release checklist: bump the version, tag, build the wheel, upload, announce", "shop"),
]

SESSIONS = [
    ("shop", "We decided to use Redis 7 for the job queue instead of RabbitMQ."),
    ("shop", "Never commit directly to main; open a pull request instead."),
    ("novel", "I prefer British spelling in the manuscript, always."),
    ("shop", "ok thanks"),
]


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def populate(home: Path) -> None:
    """Memories, sessions and audit entries, written as lexmem writes them."""
    from lexmem.api import Lexmem
    from lexmem.capture.inbox import Inbox, make_event
    from lexmem.service.ops import review
    from lexmem.service.writer import CaptureService

    lm = Lexmem.open(home)
    root = home.parent / "repos"
    # Agents name a project by its repository root, as the hook does.
    ids = [
        lm.remember(text, project=str(root / project) if project else None).memories[0].id
        for text, project in NOTES
    ]
    lm.pin(ids[0])
    lm.pin(ids[3])
    for _ in range(3):
        lm.reinforce(ids[1], 0.15)
    lm.link(ids[0], ids[5], "relates_to")
    lm.supersede(ids[5], with_text="The staging database listens on port 6543 since the move")
    lm.settings.capture.mode = "full"
    inbox = Inbox(lm.paths.inbox)
    for i, (project, text) in enumerate(SESSIONS):
        repo = root / project
        (repo / ".git").mkdir(parents=True, exist_ok=True)
        sid = f"demo-session-{i}"
        for kind, body in (("session_start", ""), ("prompt", text), ("response", "Noted."),
                           ("session_end", "")):  # fmt: skip
            inbox.write(make_event(kind, body, session_id=sid, agent="claude-code",
                                   project=str(repo)))  # fmt: skip
    with CaptureService(lm) as service:
        service.drain()
    queue = lm.review_queue()
    if len(queue) > 2:
        review(lm, queue[-1:], "accepted")
    lm.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/screenshots"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication, QMenu, QMessageBox, QWidget

    qt = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(qt, QApplication)

    with tempfile.TemporaryDirectory(prefix="lexmem-shots-") as tmp:
        home = Path(tmp) / "lexmem"
        os.environ["LEXMEM_HOME"] = str(home)
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        log("filling a demo data folder …")
        populate(home)

        from lexmem.api import Lexmem
        from lexmem.licence import CAPTURE
        from ui.app import App
        from ui.theme import apply_theme

        lm = Lexmem.open(home)
        app = App(lm, tray=False)  # the capture service runs, as in the real app
        app.start(show_window=True)
        window = app.window
        window.resize(1280, 800)
        page = window.memories

        def settle(until: Callable[[], bool] = lambda: True, ms: int = 15_000) -> None:
            """Run the loop until ``until()`` holds and nothing is running in the background."""
            loop = QEventLoop()
            waited = 0
            while waited < ms and not (until() and app.ctx.runner.pending == 0):
                QTimer.singleShot(50, loop.quit)
                loop.exec()
                waited += 50
            for _ in range(5):  # let queued repaints land
                QTimer.singleShot(20, loop.quit)
                loop.exec()

        def save(widget: QWidget, name: str, theme: str) -> None:
            path = args.out / f"{name}-{theme}.png"
            widget.grab().save(str(path))
            log(f"  {path}")

        for theme in ("light", "dark"):
            apply_theme(qt, theme)
            log(f"{theme} theme:")

            menu = QMenu()
            app.menu.fill(menu)
            menu.adjustSize()
            save(menu, "tray-menu", theme)

            window.show_tab("memories")
            settle(lambda: page.model.rowCount() > 0)
            first = lm.list_ids()[0]
            page.select(first)
            settle()
            save(window, "browser", theme)

            page.set_query("which database does billing use")
            settle(lambda: page.model.rowCount() > 0)
            save(window, "browser-search", theme)
            page.set_query("")

            for tab in ("review", "audit", "sessions", "insights"):
                window.show_tab(tab)
                settle()
                if tab == "sessions":
                    sessions = window.sessions.sessions()
                    if sessions:
                        busiest = max(sessions, key=lambda s: s.memory_count)
                        window.sessions.open_session(busiest.id)
                        settle()
                save(window, tab, theme)

            app.quick_remember()
            quick = app._quick
            quick.text.setPlainText("Always run the database migrations before the deploy")
            settle()
            save(quick, "quick-remember", theme)
            quick.hide()

            app.open_settings()
            dialog = app._settings
            settle()
            for i in range(dialog.tabs.count()):
                dialog.tabs.setCurrentIndex(i)
                settle()
                name = dialog.tabs.tabText(i).lower().replace(" ", "-").replace("&", "")
                save(dialog, f"settings-{i}-{name}", theme)
            dialog.hide()

            app.open_licence()
            licence = app._licence_dialog
            settle(lambda: app._licence_dialog.status is not None)
            save(licence, "licence", theme)
            licence.close()

            app.menu.licence_required.emit(
                CAPTURE,
                "Capture mode Full is saved and starts as soon as a Writer Pro key is active. "
                "Until then lexmem keeps only what you ask it to remember.",
            )
            settle()
            prompt = window.findChild(QMessageBox, "upgradePrompt")
            save(prompt, "upgrade-prompt", theme)
            prompt.close()
            settle()

        app.stop()
        lm.close()
    log(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
