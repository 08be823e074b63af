"""The desktop app: tray launch and idle memory, browser first paint and loop stalls.

    python bench/ui.py [--out DIR] [--quick] [--size N] [--tray-only]

For a small store (the baseline, 1,000 memories) and a large one (100,000; 10,000
with ``--quick``) it measures, on the offscreen platform, in one process:

- first paint: from building the Memories page to the table painting its first rows;
- search as you type: a person types a question at ~8 keys a second while a 5 ms probe
  timer runs on the UI loop; the worst gap between probe ticks beyond their interval
  is the loop's worst stall (what a person would feel as a freeze), with p99 and the
  time from the last key to the results on screen.

The large store is grown like ``bench/store_search.py`` grows it: real embeddings of
realistic memories, then variants with calibrated noise. The summary compares the
large store with the small one.

Tab switches (``tab_switch_stall_ms``, target 100 ms): on a store of 10,000 memories
(the large one with ``--quick``, else one grown for it) with a journal added (an agent
session per 25 memories, an audit entry per memory and one per second memory, 8,000
memories waiting for review), the real browser window (:class:`ui.app.MainWindow`, no
tray, no service) at 1280x800 in a process of its own; a 10 ms probe timer measures the
UI thread's worst stall from switching to each tab (review, audit, sessions, insights,
then memories) until its reads have arrived and it has painted. The median of three
processes, per tab too, and the worst stall while the window opens.

Quit (``quit_to_exit_s``, target 2 s): the app started as ``lexmem app --show`` on a data
folder of 300 memories (under Xvfb with trayer, else offscreen without a tray), quit 4 s
later as tray ▸ Quit does; the time from Quit to the process gone, the worst of three
runs. A process still there 30 s after Quit is reported as not exited, then killed.

The tray (on a real X screen with a system tray: ``Xvfb`` and ``trayer``; skipped, with
the reason, when either is missing) is measured against a bare PySide6 tray (an icon
and a one-item menu), both started as processes the same way, alternately:

- launch to tray icon: from starting the process to the loop being free again after
  ``QSystemTrayIcon.show()`` (a small driver wraps ``show`` to write the time);
- idle memory: resident memory (RSS) after a capture has loaded the embedding model and
  the model has been idle for longer than ``[embedding] idle_unload_minutes`` (set short
  for the run), against the bare tray's after the same wait; the peak while the model
  was loaded is reported beside it, and the idle memory again after an agent's MCP
  session (``lexmem mcp``: one search), which brings the MCP SDK in. Every figure is
  the app's process and the processes below it (the model's own). The app runs on a
  data folder of a few hundred memories.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import (  # noqa: E402 - after the path set-up
    BenchError,
    MemoryCorpus,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "ui"
QUESTION = "which database does the billing service use for its ledger"
KEY_INTERVAL_MS = 120  # a steady typist, ~8 keys a second
PROBE_MS = 5


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def pump(until: Callable[[], bool], timeout_s: float = 120.0) -> bool:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    deadline = time.perf_counter() + timeout_s
    while not until():
        if time.perf_counter() > deadline:
            return False
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 10)
        time.sleep(0.001)
    return True


def settle(seconds: float) -> None:
    """Run the loop for ``seconds``."""
    end = time.perf_counter() + seconds
    pump(lambda: time.perf_counter() >= end)


def grow_store(home: Path, size: int, embedder: Any, seed: int) -> Any:
    import numpy as np
    from store_search import Growth, grow

    from lexmem.api import Lexmem

    lm = Lexmem.open(home, embedder=embedder)
    corpus = MemoryCorpus(seed)
    n_real = min(size, 1000)
    g = Growth(
        rows=[corpus.row(i) for i in range(n_real)],
        vectors=np.zeros((size, embedder.dim), dtype=np.float32),
        n_real=n_real, min_real=min(size, 500), real_budget_s=40.0,
        noise_rng=np.random.default_rng(seed + 1),
    )  # fmt: skip
    t0 = time.perf_counter()
    grow(lm, corpus, g, size, 1000)
    log(f"  grown to {size:,} in {time.perf_counter() - t0:.1f} s; optimizing")
    lm.optimize()
    return lm


# The journal a store of this size has after months of agent sessions: what the Review,
# Audit and Sessions tabs read (``grow_store`` writes memories only).
SESSION_MEMORIES = 25  # memories per agent session, about
_RULES = ("decision", "preference", "procedure-reported", "bug-fix", "handoff", "convention")


def add_history(lm: Any, seed: int, sessions: int | None = None) -> dict[str, int]:
    """Agent sessions, and an audit entry per memory (saved) and per second memory
    (skipped, with the reasons capture gives), spread over the last 60 days: realistic
    ids (UUIDs), projects, long texts. Returns the counts written."""
    import random
    import uuid
    from datetime import timedelta

    from lexmem.api import AuditEntry, Session
    from lexmem.models import utcnow

    r = random.Random(f"{seed}:history")
    memories = lm.list_memories(None, sort="created", limit=None)
    n_sessions = sessions or max(4, len(memories) // SESSION_MEMORIES)
    now = utcnow()
    projects = sorted({m.project for m in memories if m.project}) or ["shop"]
    made: list[Session] = []
    for i in range(n_sessions):
        start = now - timedelta(days=60 * (n_sessions - i) / n_sessions, minutes=r.randrange(600))
        project = projects[i % len(projects)]
        if i % 3 == 0:  # a repository root, as the hook reports it
            project = f"/home/dana/work/{project}"
        ended = i < n_sessions - 3
        made.append(Session(
            id=str(uuid.UUID(int=r.getrandbits(128), version=4)), agent="claude",
            project=project if i % 11 else None, started_at=start,
            last_event_at=start + timedelta(minutes=r.randrange(2, 300)),
            ended_at=start + timedelta(minutes=300) if ended else None,
            status="completed" if ended else "active",
            memory_count=SESSION_MEMORIES, event_count=r.randrange(20, 400),
        ))  # fmt: skip
    entries: list[AuditEntry] = []
    for j, m in enumerate(memories):
        s = made[j % n_sessions]
        when = s.started_at + timedelta(seconds=j % 3600)
        rule = _RULES[j % len(_RULES)]
        conf = round(0.55 + 0.4 * r.random(), 2)
        entries.append(AuditEntry(
            id=f"audit-{uuid.UUID(int=r.getrandbits(128))}", timestamp=when, session_id=s.id,
            candidate_id=f"cand-{j}", decision="saved", reason=f"{rule} at confidence {conf:.2f}",
            confidence=conf, rule=rule, kind=rule, memory_id=m.id, title=m.content[:80],
            project=s.project, text=m.content,
        ))  # fmt: skip
        if j % 2:
            low = round(0.2 + 0.3 * r.random(), 2)
            reason = (
                f"confidence {low:.2f} below the assist threshold 0.60"
                if j % 4 == 1 else "too short to stand on its own"
            )  # fmt: skip
            entries.append(AuditEntry(
                id=f"audit-{uuid.UUID(int=r.getrandbits(128))}", timestamp=when, session_id=s.id,
                candidate_id=f"cand-{j}-skip", decision="skipped", reason=reason, confidence=low,
                rule=rule, kind=rule, title=f"Maybe: {m.content[:60]}", project=s.project,
                text=f"Maybe {m.content[:200]}",
            ))  # fmt: skip
    journal = lm.journal
    journal.save_sessions(made)
    for k in range(0, len(entries), 5000):
        journal.audit(entries[k : k + 5000])
    return {"sessions": len(made), "audit_entries": len(entries)}


def measure(lm: Any, label: str) -> dict[str, Any]:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ui.browser import MemoriesPage
    from ui.context import AppContext

    app = QApplication.instance()
    assert app is not None
    ctx = AppContext(lm)
    # first paint: construction to the first painted rows
    painted: list[float] = []
    t0 = time.perf_counter()
    page = MemoriesPage(ctx)
    page.first_paint_done.connect(lambda: painted.append(time.perf_counter()))
    page.resize(1280, 800)
    page.show()
    if not pump(lambda: bool(painted)):
        raise BenchError(f"{label}: the table never painted its first rows")
    first_paint_ms = (painted[0] - t0) * 1000
    pump(lambda: ctx.runner.pending == 0)

    # search as you type, with a probe timer measuring the loop's stalls
    gaps: list[float] = []
    last = [time.perf_counter()]

    def probe() -> None:
        now = time.perf_counter()
        gaps.append(max(0.0, (now - last[0]) * 1000 - PROBE_MS))
        last[0] = now

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)
    results: list[float] = []
    page.results_changed.connect(lambda _n: results.append(time.perf_counter()))
    last[0] = time.perf_counter()
    timer.start()
    box = page.search_box
    typed_at = 0.0
    for ch in QUESTION:
        box.setText(box.text() + ch)  # what a key press does to the line edit
        typed_at = time.perf_counter()
        end = typed_at + KEY_INTERVAL_MS / 1000
        pump(lambda end=end: time.perf_counter() >= end)  # type: ignore[misc]
    results.clear()
    if not pump(lambda: bool(results) and ctx.runner.pending == 0):
        raise BenchError(f"{label}: the search results never arrived")
    settle_ms = (results[-1] - typed_at) * 1000
    timer.stop()
    hits = page.model.rowCount()
    page.close()
    ctx.close()
    stall = percentiles(gaps)
    log(f"  {label}: first paint {first_paint_ms:.0f} ms, worst stall {stall['max_ms']:.1f} ms, "
        f"results {settle_ms:.0f} ms after the last key")  # fmt: skip
    return {
        "memories": lm.count(),
        "first_paint_ms": round(first_paint_ms, 1),
        "typing": {
            "query": QUESTION,
            "keys": len(QUESTION),
            "key_interval_ms": KEY_INTERVAL_MS,
            "probe_interval_ms": PROBE_MS,
            "loop_stall_ms": stall,
            "worst_stall_ms": stall.get("max_ms", 0.0),
            "results_after_last_key_ms": round(settle_ms, 1),
            "hits_shown": hits,
        },
    }


TAB_SWITCH_SIZE = 10_000  # the store the tab switches are measured on
TAB_PROBE_MS = 10
TAB_RUNS = 3  # fresh processes; the figures are their medians
TAB_SETTLE_S = 0.5  # after the tab's reads have arrived: their paint, and anything late


def measure_tabs(lm: Any) -> dict[str, Any]:
    """The worst stall of the UI thread on switching to each tab of the real browser
    window (an :class:`ui.app.App` without tray or service), from the switch until the
    tab's reads have arrived and it has painted: a 10 ms probe timer's longest gap beyond
    its interval. Also the worst stall while the window opens (its first loads), and the
    longest pause of Python's garbage collector in each (a full collection over the
    app's ~150,000 objects takes 100-250 ms on a shared 2-core machine, whichever thread
    runs it: a stall of its own, not of the tab's work)."""
    import gc

    from PySide6.QtCore import QTimer

    from ui.app import App, MainWindow

    gaps: list[float] = []
    last = [time.perf_counter()]
    collecting = [0.0]
    gc_ms: list[float] = []

    def probe() -> None:
        now = time.perf_counter()
        gaps.append(max(0.0, (now - last[0]) * 1000 - TAB_PROBE_MS))
        last[0] = now

    def collected(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[0] = time.perf_counter()
        else:
            gc_ms.append((time.perf_counter() - collecting[0]) * 1000)

    gc.callbacks.append(collected)

    timer = QTimer()
    timer.setInterval(TAB_PROBE_MS)
    timer.timeout.connect(probe)
    last[0] = time.perf_counter()
    timer.start()
    app = App(lm, tray=False, service=False)
    window = app.window
    window.resize(1280, 800)
    app.start(show_window=True)
    runner = app.ctx.runner
    if not pump(lambda: runner.pending == 0 and window.review.count is not None):
        raise BenchError("the browser's first loads never finished")
    settle(1.0)
    opening = max(gaps, default=0.0)
    opening_gc = max(gc_ms, default=0.0)
    tabs: dict[str, float] = {}
    tabs_gc: dict[str, float] = {}
    order = [*MainWindow.TABS[1:], MainWindow.TABS[0]]  # the browser opens on the first
    for name in order:
        gaps.clear()
        gc_ms.clear()
        last[0] = time.perf_counter()
        window.show_tab(name)
        settle(0.05)
        if not pump(lambda: runner.pending == 0):
            raise BenchError(f"the {name} tab's reads never finished")
        settle(TAB_SETTLE_S)
        tabs[name] = round(max(gaps, default=0.0), 1)
        tabs_gc[name] = round(max(gc_ms, default=0.0), 1)
    timer.stop()
    gc.callbacks.remove(collected)
    app.stop()
    window.close()
    window.deleteLater()
    worst = max(tabs.values())
    log(f"  tab switches: worst stall {worst:.0f} ms "
        f"({', '.join(f'{k} {v:.0f}' for k, v in tabs.items())}); opening {opening:.0f} ms; "
        f"longest GC pause {max([opening_gc, *tabs_gc.values()]):.0f} ms")  # fmt: skip
    return {
        "probe_interval_ms": TAB_PROBE_MS,
        "tab_switch_stall_ms": worst,
        "per_tab_ms": tabs,
        "opening_stall_ms": round(opening, 1),
        "longest_gc_pause_ms": {"opening": round(opening_gc, 1), **tabs_gc},
        "rows": {
            "review_queue": window.review.count, "audit_shown": len(window.audit.entries()),
            "sessions_shown": len(window.sessions.sessions()),
        },
    }  # fmt: skip


# -- the tray: launch to icon, and idle memory ----------------------------------------

# Each child wraps QSystemTrayIcon.show so that, once the loop is free after the icon is
# shown, it writes the wall-clock time to $LEXMEM_BENCH_MARK.
_MARK = """
import os, sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QSystemTrayIcon
_show = QSystemTrayIcon.show
def _marked(self):
    _show(self)
    def mark():
        with open(os.environ["LEXMEM_BENCH_MARK"], "w") as fh:
            fh.write(repr(time.time()))
    QTimer.singleShot(0, mark)
QSystemTrayIcon.show = _marked
"""
BARE_TRAY = (
    _MARK
    + """
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import QApplication, QMenu
app = QApplication(sys.argv[:1])
app.setQuitOnLastWindowClosed(False)
pixmap = QPixmap(22, 22)
pixmap.fill(QColor("steelblue"))
tray = QSystemTrayIcon(QIcon(pixmap))
menu = QMenu()
menu.addAction("Quit").triggered.connect(app.quit)
tray.setContextMenu(menu)
tray.show()
sys.exit(app.exec())
"""
)
LEXMEM_TRAY = (
    _MARK
    + """
from ui.launch import main
main(["app", "--tray"])
"""
)
# The app with its browser open, quit as tray ▸ Quit does once it has settled; the child
# writes the wall-clock time of the Quit to $LEXMEM_BENCH_MARK.
QUIT_APP = """
import os, time
from PySide6.QtCore import QTimer
import ui.app
_start = ui.app.App.start
def _start_then_quit(self, *, show_window=None):
    _start(self, show_window=show_window)
    def quit_now():
        with open(os.environ["LEXMEM_BENCH_MARK"], "w") as fh:
            fh.write(repr(time.time()))
        self.menu.quit_action.trigger()
    QTimer.singleShot(int(os.environ["LEXMEM_BENCH_QUIT_AFTER_MS"]), quit_now)
ui.app.App.start = _start_then_quit
from ui.launch import main
main(["app", "--show"])
"""
QUIT_AFTER_MS = 4000  # the browser's first loads done, the service started
QUIT_TIMEOUT_S = 30.0  # not exited by then: reported as such, then killed
QUIT_RUNS = 3
IDLE_UNLOAD_S = 3.0  # [embedding] idle_unload_minutes for the run: 0.05
IDLE_WAIT_S = IDLE_UNLOAD_S + 7.0  # the unload, and the allocator handing memory back
TRAY_RUNS = 5


def rss_mb(pid: int) -> float:
    """The resident memory of a process and of every process below it (the model's
    process, a helper recording the MCP manifest): what the app costs the machine."""
    total = 0.0
    for one in [pid, *descendants(pid)]:
        try:
            lines = Path(f"/proc/{one}/status").read_text().splitlines()
        except OSError:
            if one == pid:
                raise BenchError(f"no process {pid}") from None
            continue  # a child that ended meanwhile
        total += next((int(x.split()[1]) for x in lines if x.startswith("VmRSS:")), 0) / 1024
    return total


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


class XScreen:
    """Xvfb with trayer on it: a real X screen with a system tray, stopped by process id."""

    def __init__(self, display: str = ":77") -> None:
        self.display = display
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> XScreen:
        quiet = subprocess.DEVNULL
        xvfb = ["Xvfb", self.display, "-screen", "0", "1280x800x24"]
        self.procs.append(subprocess.Popen(xvfb, stdout=quiet, stderr=quiet))
        time.sleep(1.0)
        env = {**os.environ, "DISPLAY": self.display}
        trayer = ["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel",
                  "--width", "120", "--height", "28", "--SetDockType", "true"]  # fmt: skip
        self.procs.append(subprocess.Popen(trayer, env=env, stdout=quiet, stderr=quiet))
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def launch(code: str, env: dict[str, str], mark: Path) -> tuple[subprocess.Popen[bytes], float]:
    """Start ``code`` in a fresh interpreter; (the process, seconds until its icon showed)."""
    mark.unlink(missing_ok=True)
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**env, "LEXMEM_BENCH_MARK": str(mark)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_mark(proc, mark, "a tray process", "its icon")
    return proc, float(mark.read_text()) - t0


def wait_mark(proc: subprocess.Popen[bytes], mark: Path, who: str, what: str) -> None:
    """Wait (120 s at most) until ``proc`` writes ``mark``: it reached ``what``."""
    deadline = time.perf_counter() + 120
    while not mark.exists() or not mark.read_text():
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise BenchError(f"{who} exited ({proc.returncode}) before {what}: {err}")
        if time.perf_counter() > deadline:
            stop(proc)
            raise BenchError(f"{who} never reached {what} within 120 s")
        time.sleep(0.005)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure_quit(env: dict[str, str], mark: Path, platform: str) -> dict[str, Any]:
    """From tray ▸ Quit (the browser open) to the process gone, on a fresh process each run."""
    env = {**env, "LEXMEM_BENCH_QUIT_AFTER_MS": str(QUIT_AFTER_MS)}
    seconds: list[float | None] = []
    for run in range(QUIT_RUNS):
        mark.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", QUIT_APP], env={**env, "LEXMEM_BENCH_MARK": str(mark)},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_mark(proc, mark, "the app", "its Quit")
        quit_at = float(mark.read_text())
        try:
            proc.wait(QUIT_TIMEOUT_S)
            seconds.append(time.time() - quit_at)
        except subprocess.TimeoutExpired:
            seconds.append(None)
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        took = seconds[-1]
        log(f"  quit run {run + 1}: " + (f"exited {took:.2f} s after Quit" if took is not None
            else f"not exited {QUIT_TIMEOUT_S:.0f} s after Quit (killed)"))  # fmt: skip
    exited = [s for s in seconds if s is not None]
    return {
        "platform": platform,
        "runs": QUIT_RUNS,
        "quit_after_ms": QUIT_AFTER_MS,
        "timeout_s": QUIT_TIMEOUT_S,
        "quit_to_exit_s": round(max(exited), 2) if len(exited) == len(seconds) else None,
        "all_s": [round(s, 2) if s is not None else None for s in seconds],
        "not_exited": len(seconds) - len(exited),
    }


class PeakRss:
    """The highest RSS of a process, sampled every 50 ms on a thread while in the block."""

    def __init__(self, pid: int) -> None:
        import threading

        self.pid = pid
        self.mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            self.mb = max(self.mb, rss_mb(self.pid))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def settled_rss(pid: int, seconds: float = 2.0) -> float:
    """The median of a few RSS samples over ``seconds``."""
    samples = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        samples.append(rss_mb(pid))
        time.sleep(0.2)
    return round(statistics.median(samples), 1)


def prepare_home(home: Path, embedder: Any, seed: int) -> None:
    """A data folder of 300 memories, with a short idle time for the model (when this
    version of lexmem has the setting)."""
    import dataclasses

    from lexmem.config import Paths
    from lexmem.settings import EmbeddingSettings, load_settings, save_settings

    grow_store(home, 300, embedder, seed).close()
    if "idle_unload_minutes" in {f.name for f in dataclasses.fields(EmbeddingSettings)}:
        paths = Paths(home)
        settings = load_settings(paths)
        settings.embedding.idle_unload_minutes = IDLE_UNLOAD_S / 60  # type: ignore[attr-defined]
        save_settings(paths, settings)


def capture_one(env: dict[str, str]) -> None:
    """Remember one thing through the running app's service (which embeds it)."""
    cli = Path(sys.executable).with_name("lexmem")
    proc = subprocess.run(
        [str(cli), "remember", "The billing ledger lives in PostgreSQL 16 on the db-2 host."],
        env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise BenchError(f"lexmem remember failed: {proc.stderr.decode(errors='replace')[-500:]}")


def mcp_search(env: dict[str, str]) -> None:
    """One agent's MCP session through ``lexmem mcp`` (the relay to the running app):
    the opening, one ``search_memory`` call, the end of input."""
    import json

    cli = Path(sys.executable).with_name("lexmem")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "search_memory", "arguments": {"query": "billing ledger"}}},
    ]  # fmt: skip
    proc = subprocess.Popen(
        [str(cli), "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" in message:
            line = proc.stdout.readline()
            if b'"result"' not in line:
                stop(proc)
                raise BenchError(f"lexmem mcp answered {line[:300]!r}")
    proc.stdin.close()
    proc.wait(60)


def measure_tray(tmp: Path, embedder: Any, seed: int) -> dict[str, Any]:
    missing = [tool for tool in ("Xvfb", "trayer") if shutil.which(tool) is None]
    if missing:
        return {"skipped": f"{' and '.join(missing)} not found (apt install xvfb trayer)"}
    home = tmp / "tray-home"
    log("building the tray's data folder (300 memories)")
    prepare_home(home, embedder, seed)
    mark = tmp / "tray.mark"
    with XScreen() as screen:
        env = {k: v for k, v in os.environ.items() if k != "QT_QPA_PLATFORM"}
        env.update(DISPLAY=screen.display, LEXMEM_HOME=str(home), QT_QPA_PLATFORM="xcb")
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
        bare_s: list[float] = []
        app_s: list[float] = []
        rss: dict[str, Any] = {}
        for run in range(TRAY_RUNS):
            proc, seconds = launch(BARE_TRAY, env, mark)
            bare_s.append(seconds)
            if run == 0:
                time.sleep(IDLE_WAIT_S)
                rss["bare_idle_mb"] = settled_rss(proc.pid)
            stop(proc)
            proc, seconds = launch(LEXMEM_TRAY, env, mark)
            app_s.append(seconds)
            if run == 0:
                rss["at_icon_mb"] = round(rss_mb(proc.pid), 1)
                time.sleep(3.0)  # the store opens and the service starts behind the icon
                with PeakRss(proc.pid) as peak:
                    capture_one(env)  # the model loads, embeds, and idles out meanwhile
                    time.sleep(IDLE_WAIT_S)
                rss["peak_with_model_mb"] = round(peak.mb, 1)
                rss["idle_mb"] = settled_rss(proc.pid)
                # An agent's MCP session brings the MCP SDK into the service for good.
                mcp_search(env)
                time.sleep(IDLE_WAIT_S)
                rss["idle_after_mcp_mb"] = settled_rss(proc.pid)
            stop(proc)
            log(f"  run {run + 1}: bare tray {bare_s[-1] * 1000:.0f} ms, "
                f"lexmem {app_s[-1] * 1000:.0f} ms to the icon")  # fmt: skip
        quitting = measure_quit(env, mark, "xcb on Xvfb with a system tray (trayer)")
    bare_ms = statistics.median(bare_s) * 1000
    app_ms = statistics.median(app_s) * 1000
    log(f"  tray: icon after {app_ms:.0f} ms (bare {bare_ms:.0f} ms); idle RSS "
        f"{rss['idle_mb']:.0f} MB, {rss['idle_after_mcp_mb']:.0f} MB after an MCP session "
        f"(bare {rss['bare_idle_mb']:.0f} MB)")  # fmt: skip
    return {
        "runs": TRAY_RUNS,
        "launch_to_icon_ms": round(app_ms, 1),
        "bare_launch_to_icon_ms": round(bare_ms, 1),
        "launch_ratio": round(app_ms / bare_ms, 2),
        "launch_to_icon_all_ms": [round(x * 1000, 1) for x in app_s],
        "bare_launch_to_icon_all_ms": [round(x * 1000, 1) for x in bare_s],
        "idle_unload_s": IDLE_UNLOAD_S,
        "idle_wait_s": IDLE_WAIT_S,
        "rss": rss,
        "quit": quitting,
    }


def measure_quit_offscreen(tmp: Path, embedder: Any, seed: int) -> dict[str, Any]:
    """Quit to exit without an X screen: the offscreen platform, no tray."""
    home = tmp / "quit-home"
    log("building the data folder for Quit (300 memories), offscreen")
    prepare_home(home, embedder, seed)
    env = {**os.environ, "LEXMEM_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    return measure_quit(env, tmp / "quit.mark", "offscreen, no tray")


# The tab switches run in a process of their own, as the app does: in this one, the
# growing's leftovers would lengthen every pause of the garbage collector.
TABS_CHILD = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("bench_ui", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
from PySide6.QtWidgets import QApplication
from lexmem.api import Lexmem
from ui.theme import apply_theme
qt = QApplication(sys.argv[:1])
apply_theme(qt, "light")
lm = Lexmem.open(Path(sys.argv[2]))
print(json.dumps(bench.measure_tabs(lm)))
lm.close()
"""


def measure_tab_switches(home: Path, lm: Any | None, embedder: Any, seed: int) -> dict[str, Any]:
    """Tab switches on the store of :data:`TAB_SWITCH_SIZE` memories at ``home`` (``lm``
    open on it, or one grown for it there) with its journal: sessions and an audit log."""
    import json

    own = lm is None
    if lm is None:
        log(f"building a store of {TAB_SWITCH_SIZE:,} memories for the tab switches")
        lm = grow_store(home, TAB_SWITCH_SIZE, embedder, seed)
    try:
        log("  adding sessions and an audit log")
        history = add_history(lm, seed)
        memories = lm.count()
    finally:
        if own:
            lm.close()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    runs = []
    for _ in range(TAB_RUNS):
        proc = subprocess.run(
            [sys.executable, "-c", TABS_CHILD, str(Path(__file__).resolve()), str(home)],
            env=env, stdout=subprocess.PIPE, timeout=600, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise BenchError(f"the tab switches' process failed ({proc.returncode})")
        runs.append(json.loads(proc.stdout.decode().strip().splitlines()[-1]))
    tabs = list(runs[0]["per_tab_ms"])
    return {
        "memories": memories, **history, "runs": runs,
        # The median run's figures: one run on a shared 2-core machine is noisy.
        "tab_switch_stall_ms": statistics.median(r["tab_switch_stall_ms"] for r in runs),
        "worst_of_runs_ms": max(r["tab_switch_stall_ms"] for r in runs),
        "per_tab_ms": {t: statistics.median(r["per_tab_ms"][t] for r in runs) for t in tabs},
        "opening_stall_ms": statistics.median(r["opening_stall_ms"] for r in runs),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write DIR/ui.json")
    p.add_argument("--quick", action="store_true", help="10,000 memories instead of 100,000")
    p.add_argument("--size", type=int, help="the large store's size")
    p.add_argument("--tray-only", action="store_true", help="measure the tray alone")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    size = a.size or (10_000 if a.quick else 100_000)
    baseline_size = min(1000, size)
    runs: dict[str, Any] = {}
    tabs: dict[str, Any] | None = None
    try:
        from PySide6.QtWidgets import QApplication

        from lexmem.embedder import Embedder
        from lexmem.settings import EmbeddingSettings
        from ui.theme import apply_theme

        qt = QApplication.instance() or QApplication(sys.argv[:1])
        assert isinstance(qt, QApplication)
        apply_theme(qt, "light")
        with bench_tempdir() as tmp:
            embedder = Embedder(EmbeddingSettings(), tmp / "models")
            embedder.load()
            tray = measure_tray(tmp, embedder, a.seed)
            quitting = tray.get("quit") or measure_quit_offscreen(tmp, embedder, a.seed)
            for n in () if a.tray_only else (baseline_size, size):
                log(f"building a store of {n:,} memories")
                lm = grow_store(tmp / f"store-{n}", n, embedder, a.seed)
                runs[str(n)] = measure(lm, f"{n:,} memories")
                if n == TAB_SWITCH_SIZE:
                    tabs = measure_tab_switches(tmp / f"store-{n}", lm, embedder, a.seed)
                lm.close()
            if not a.tray_only and tabs is None:
                tabs = measure_tab_switches(tmp / "store-tabs", None, embedder, a.seed)
    except BenchError as exc:
        print(f"bench/ui.py: {exc}", file=sys.stderr)
        return 1
    result: dict[str, Any] = {
        "benchmark": NAME,
        "machine": machine_info(),
        "runs": runs,
        "tab_switches": tabs,
        "tab_switch_stall_ms": tabs["tab_switch_stall_ms"] if tabs else None,
        "quit": quitting,
        "quit_to_exit_s": quitting["quit_to_exit_s"],
        "tray": tray,
        "targets": {
            "first_paint_ms": 1000, "worst_stall_ms": 50,
            "launch_ratio_to_bare_tray": 2.0, "idle_rss_mb": 250,
            "tab_switch_stall_ms": 100, "quit_to_exit_s": 2.0,
        },
    }  # fmt: skip
    figures: list[tuple[str, float, str, str, float]] = []
    lines: list[str] = []
    if "skipped" not in tray:
        figures += [
            ("launch to tray icon", tray["launch_to_icon_ms"], "ms",
             "a bare PySide6 tray", tray["bare_launch_to_icon_ms"]),
            ("idle RSS, the model unloaded", tray["rss"]["idle_mb"], "MB",
             "a bare PySide6 tray", tray["rss"]["bare_idle_mb"]),
            ("idle RSS after an agent's MCP session", tray["rss"]["idle_after_mcp_mb"], "MB",
             "a bare PySide6 tray", tray["rss"]["bare_idle_mb"]),
        ]  # fmt: skip
        lines.append(
            f"tray icon after {tray['launch_to_icon_ms']:.0f} ms "
            f"({tray['bare_launch_to_icon_ms']:.0f} ms bare, x{tray['launch_ratio']:.2f}); idle "
            f"RSS {tray['rss']['idle_mb']:.0f} MB, {tray['rss']['idle_after_mcp_mb']:.0f} MB "
            f"after an MCP session ({tray['rss']['bare_idle_mb']:.0f} MB bare)"
        )
    else:
        lines.append(f"tray skipped: {tray['skipped']}")
    if runs:
        big, small = runs[str(size)], runs[str(baseline_size)]
        figures += [
            (f"browser first paint at {size:,} memories", big["first_paint_ms"], "ms",
             f"first paint at {baseline_size:,}", small["first_paint_ms"]),
            (f"worst loop stall while typing at {size:,}", big["typing"]["worst_stall_ms"], "ms",
             "target (a frame and a half at 30 fps)", 50.0),
        ]  # fmt: skip
        lines.append(
            f"first paint {big['first_paint_ms']:.0f} ms at {size:,} memories "
            f"({small['first_paint_ms']:.0f} ms at {baseline_size:,}); worst loop stall while "
            f"typing {big['typing']['worst_stall_ms']:.1f} ms "
            f"({small['typing']['worst_stall_ms']:.1f} ms at {baseline_size:,})"
        )
    if tabs is not None:
        per_tab = ", ".join(f"{k} {v:.0f}" for k, v in tabs["per_tab_ms"].items())
        figures.append((
            f"worst UI stall on a tab switch at {TAB_SWITCH_SIZE:,} memories",
            tabs["tab_switch_stall_ms"], "ms", "target", 100.0,
        ))  # fmt: skip
        lines.append(
            f"worst stall on a tab switch {tabs['tab_switch_stall_ms']:.0f} ms at "
            f"{TAB_SWITCH_SIZE:,} memories, median of {TAB_RUNS} runs ({per_tab}; "
            f"{tabs['worst_of_runs_ms']:.0f} ms in the worst run)"
        )
    if quitting["quit_to_exit_s"] is not None:
        figures.append((
            "tray Quit to process exit, the browser open", quitting["quit_to_exit_s"], "s",
            "target", 2.0,
        ))  # fmt: skip
        lines.append(
            f"Quit to exit {quitting['quit_to_exit_s']:.2f} s at worst ({quitting['platform']})"
        )
    else:
        lines.append(
            f"Quit: the process did not exit within {quitting['timeout_s']:.0f} s in "
            f"{quitting['not_exited']} of {quitting['runs']} runs ({quitting['platform']})"
        )
    if not figures:
        print("bench/ui.py: nothing measured (the tray was skipped and --tray-only given)",
              file=sys.stderr)  # fmt: skip
        return 1
    result["summary"] = make_summary(*figures[-2 if runs else 0])
    result["figures"] = make_figures(*figures)
    write_result(NAME, result, a.out)
    print("ui: " + "; ".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
