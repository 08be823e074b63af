"""The app's operations: real core, real runner threads, real Qt signals (offscreen)."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lexmem.models import MemoryStatus
from ui import ops
from ui.context import AppContext, UiChanges
from ui.runner import Runner


def _wait(qtbot: Any, ctx: AppContext, start: Any) -> list[UiChanges]:
    """Run an operation and wait for its one ``changed`` emission."""
    seen: list[UiChanges] = []
    ctx.hub.changed.connect(seen.append)
    with qtbot.waitSignal(ctx.hub.changed, timeout=30_000):
        start()
    ctx.hub.changed.disconnect(seen.append)
    return seen


def _remember(qtbot: Any, ctx: AppContext, text: str, **kw: Any) -> str:
    (c,) = _wait(qtbot, ctx, lambda: ops.remember(ctx, text, **kw))
    assert c.memories.created
    return c.memories.created[0]


def test_runner_calls_back_on_the_ui_thread(qtbot: Any) -> None:
    runner = Runner()
    ui_thread = threading.get_ident()
    seen: dict[str, int] = {}
    done = threading.Event()

    def work() -> int:
        seen["worker"] = threading.get_ident()
        return 41

    def on_done(value: int) -> None:
        seen["callback"] = threading.get_ident()
        seen["value"] = value + 1
        done.set()

    runner.run(work, on_done=on_done)
    qtbot.waitUntil(done.is_set, timeout=5000)
    assert seen["worker"] != ui_thread
    assert seen["callback"] == ui_thread
    assert seen["value"] == 42 and runner.pending == 0
    runner.shutdown()


def test_runner_reports_failures(qtbot: Any) -> None:
    runner = Runner()
    errors: list[BaseException] = []
    runner.failed.connect(errors.append)

    def boom() -> None:
        raise ValueError("bad input: nothing to do")

    runner.run(boom)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert str(errors[0]) == "bad input: nothing to do"
    runner.shutdown()


def test_remember_pin_undo(qtbot: Any, ctx: AppContext) -> None:
    labels: list[str] = []
    ctx.hub.undo_changed.connect(labels.append)
    mid = _remember(qtbot, ctx, "The staging database runs on port 5433", pin=False)
    assert ctx.lm.get(mid).content.startswith("The staging database")
    _wait(qtbot, ctx, lambda: ops.pin(ctx, [mid]))
    assert ctx.lm.get(mid).pinned
    assert labels[-1] == "Undo pin memory"
    _wait(qtbot, ctx, lambda: ops.undo(ctx))
    assert not ctx.lm.get(mid).pinned
    assert labels[-1] == "Undo remember"  # one step back at a time
    _wait(qtbot, ctx, lambda: ops.undo(ctx))
    assert ctx.lm.store.get_optional(mid) is None
    assert labels[-1] == ""
    assert ops.undo(ctx) is False


def test_archive_restore_edit_type_forget(qtbot: Any, ctx: AppContext) -> None:
    a = _remember(qtbot, ctx, "Deploys go out on Tuesdays after the standup")
    b = _remember(qtbot, ctx, "Run the linter with ruff before each commit")
    _wait(qtbot, ctx, lambda: ops.archive(ctx, [a, b]))
    assert {ctx.lm.get(i).status for i in (a, b)} == {MemoryStatus.ARCHIVED}
    assert ctx.undo_entry is not None and ctx.undo_entry.label == "Undo archive 2 memories"
    _wait(qtbot, ctx, lambda: ops.undo(ctx))
    assert {ctx.lm.get(i).status for i in (a, b)} == {MemoryStatus.ACTIVE}

    _wait(qtbot, ctx, lambda: ops.edit(ctx, a, content="Deploys go out on Wednesdays"))
    assert ctx.lm.get(a).content == "Deploys go out on Wednesdays"
    _wait(qtbot, ctx, lambda: ops.undo(ctx))
    assert ctx.lm.get(a).content == "Deploys go out on Tuesdays after the standup"

    _wait(qtbot, ctx, lambda: ops.set_type(ctx, [b], "semantic"))
    assert str(ctx.lm.get(b).type) == "semantic"

    (c,) = _wait(qtbot, ctx, lambda: ops.forget(ctx, [b]))
    assert b in c.memories.deleted
    assert ctx.undo_entry is None  # forgetting keeps no copy to undo with
    with pytest.raises(Exception, match="no memory"):
        ctx.lm.get(b)


def test_supersede_with_new_version_and_undo(qtbot: Any, ctx: AppContext) -> None:
    old = _remember(qtbot, ctx, "The API rate limit is 100 requests per minute")
    (c,) = _wait(
        qtbot, ctx, lambda: ops.supersede(ctx, old, with_text="The API rate limit is 500 rpm")
    )
    new = next(i for i in c.memories.created)
    assert ctx.lm.get(old).status == MemoryStatus.SUPERSEDED
    assert ctx.lm.get(old).superseded_by == new
    _wait(qtbot, ctx, lambda: ops.undo(ctx))
    assert ctx.lm.get(old).status == MemoryStatus.ACTIVE
    with pytest.raises(Exception, match="no memory"):
        ctx.lm.get(new)


def test_a_new_version_in_the_persons_own_words_is_not_queued_for_review(
    qtbot: Any, ctx: AppContext
) -> None:
    """Superseding a captured memory with text the person typed keeps that text without
    review (issue 18, defect 3); the captured original was in the queue."""
    from lexmem.models import MemoryContext, MemorySource

    captured = (
        ctx.lm.remember(
            "The API rate limit is 100 requests per minute",
            context=MemoryContext(source=MemorySource.CORRECTION),
        )
        .memories[0]
        .id
    )
    assert captured in ctx.lm.review_queue()
    (c,) = _wait(
        qtbot, ctx, lambda: ops.supersede(ctx, captured, with_text="The API rate limit is 500 rpm")
    )
    new = next(i for i in c.memories.created)
    assert ctx.lm.get(new).content == "The API rate limit is 500 rpm"
    assert new not in ctx.lm.review_queue()
    assert ctx.lm.review_queue() == []  # the original is superseded: not waiting either


def test_failed_operation_says_why(qtbot: Any, ctx: AppContext) -> None:
    errors: list[str] = []
    ctx.hub.error.connect(errors.append)
    ops.pin(ctx, ["does-not-exist"])
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert "does-not-exist" in errors[0] and "\n" not in errors[0]


def test_settings_change_applies_at_once_and_is_no_memory(qtbot: Any, ctx: AppContext) -> None:
    """lexmem's own settings are not the agents' business: switching the theme to dark
    and back made two "User prefers ... mode" memories in every digest (issue 18,
    defect 2)."""
    from lexmem.capture.inbox import Inbox
    from lexmem.service.writer import CaptureService
    from lexmem.settings import load_settings

    shared = ctx.lm.settings.capture
    diffs: list[Any] = []
    ctx.update_settings(lambda s: setattr(s.capture, "mode", "full"), diffs.append)
    qtbot.waitUntil(lambda: bool(diffs), timeout=10_000)
    assert diffs[0] == [("capture.mode", "assist", "full")]
    assert shared.mode == "full"  # the same object the service reads
    assert load_settings(ctx.paths).capture.mode == "full"
    for theme in ("dark", "light"):
        ctx.update_settings(lambda s, t=theme: setattr(s.ui, "theme", t), diffs.append)
    qtbot.waitUntil(lambda: len(diffs) == 3, timeout=10_000)
    assert load_settings(ctx.paths).ui.theme == "light"
    assert Inbox(ctx.paths.inbox).pending() == []
    with CaptureService(ctx.lm) as service:
        service.drain()
    assert ctx.lm.store.count() == 0


def test_review_reject_erases_and_is_not_undoable(qtbot: Any, ctx: AppContext) -> None:
    from lexmem.capture.inbox import Inbox, make_event
    from lexmem.service.writer import CaptureService

    ctx.lm.settings.capture.mode = "full"
    inbox = Inbox(ctx.paths.inbox)
    for event_type, text in (
        ("prompt", "We decided to use PostgreSQL 16 for the billing service."),
        ("response", "Noted."), ("session_end", ""),
    ):  # fmt: skip
        inbox.write(make_event(event_type, text, session_id="s1", agent="claude"))
    with CaptureService(ctx.lm) as service:
        service.drain()
    queue = ctx.lm.review_queue()
    assert len(queue) == 1
    (c,) = _wait(qtbot, ctx, lambda: ops.review(ctx, queue, "rejected"))
    assert c.review and c.memories.deleted == tuple(queue)
    assert ctx.lm.review_queue() == []
    assert ctx.lm.store.get_optional(queue[0]) is None
    assert ctx.undo_entry is None  # erased: nothing is left to bring back


def test_the_settings_windows_operations_refuse_what_cannot_be_used_before_saving(
    qtbot: Any, ctx: AppContext, tmp_path: Path
) -> None:
    from lexmem.errors import InvalidInputError
    from lexmem.settings import load_settings

    saved: list[Any] = []
    ops.edit_folders(ctx, "optout", [str(tmp_path / "private")], True, on_done=saved.append)
    qtbot.waitUntil(lambda: bool(saved), timeout=10_000)
    assert load_settings(ctx.paths).capture.optout == [str((tmp_path / "private").resolve())]
    with pytest.raises(InvalidInputError, match="already in the list"):
        ops.edit_folders(ctx, "optout", [str(tmp_path / "private")], True)
    with pytest.raises(InvalidInputError, match="not an absolute folder path"):
        ops.edit_folders(ctx, "allow_paths", ["relative/path"], True)
    with pytest.raises(ValueError, match="not a folder list"):
        ops.edit_folders(ctx, "projects", [str(tmp_path)], True)
    with pytest.raises(InvalidInputError, match="capture mode must be one of"):
        ops.set_project_mode(ctx, str(tmp_path), "sometimes")
    with pytest.raises(InvalidInputError, match="is not a folder"):
        ops.watch_folder(ctx, str(tmp_path / "missing"), on_done=print, on_refused=print)
    assert ctx.runner.pending == 0  # nothing refused was sent to be saved

    saved.clear()
    ops.set_paused(ctx, timedelta(hours=1), on_done=saved.append)
    qtbot.waitUntil(lambda: bool(saved), timeout=10_000)
    assert saved[0][0][0] == "capture.paused_until" and ctx.settings.capture.paused_until > "2000"
    saved.clear()
    ops.set_paused(ctx, None, on_done=saved.append)
    qtbot.waitUntil(lambda: bool(saved), timeout=10_000)
    assert load_settings(ctx.paths).capture.paused_until == ""
