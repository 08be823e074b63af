"""Forget means gone from disk: forget, review's reject, retention expiry and the opt-out
purge leave no byte of a memory's text in any file of the data folder, and drained event
text leaves the buffer's every version (issue 15, part 3).

Every test plants unique markers and proves their absence with :mod:`diskscan`: raw
bytes of every file, every Lance version read back, every data file decoded (deleted
rows included) and every index file decoded (full-text tokens included).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from conftest import shared_model
from diskscan import assert_nowhere, find_markers

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.models import MemorySource, MemoryStatus, utcnow
from lexmem.service.ops import apply_op, review
from lexmem.service.writer import CaptureService
from lexmem.settings import load_settings
from lexmem.store.journal import Journal
from lexmem.store.lance import MemoryFilter


def _say(service: CaptureService, sid: str, text: str, *, project: str | None = None) -> None:
    """One short agent session in which the person says ``text``."""
    inbox = Inbox(service.lm.paths.inbox)
    for event_type, body in (("prompt", text), ("response", "Noted."), ("session_end", "")):
        inbox.write(
            make_event(
                event_type, body, session_id=sid, agent="claude", project=project, cwd=project
            )
        )
    service.drain()


def _conversation(lm: Lexmem, sid: str, texts: list[str], project: str | None = None) -> list[str]:
    """Memories of one conversation session, in order (each is the next one's context)."""
    from lexmem.models import MemoryContext

    ids = []
    for text in texts:
        ctx = MemoryContext(source=MemorySource.CONVERSATION, session_id=sid, project=project)
        ids.append(lm.remember(text, context=ctx).memories[0].id)
    return ids


def test_forget_erases_the_text_everywhere(service: CaptureService) -> None:
    lm = service.lm
    home = lm.paths.home
    service.settings.mode = "full"
    # A captured memory (its events went through the buffer, its title into the audit)...
    _say(service, "s1", "We decided to use zqxmarker1a as the billing queue, not RabbitMQ.")
    (captured,) = [m.id for m in lm.store.list_memories() if "zqxmarker1a" in m.content]
    # ...and a conversation whose middle memory is its neighbours' context.
    first, middle, last = _conversation(
        lm, "conv", ["Deploys go out on Tuesdays.", "The staging password rotates, see zqxmarker2b.",
                     "Release notes live in the wiki."], project="/work/shop",
    )  # fmt: skip
    lm.edit(middle, content="The staging key rotates monthly, see zqxmarker2b and zqxmarker3c.")
    assert find_markers(home, ["zqxmarker1a", "zqxmarker2b", "zqxmarker3c"])  # the scan sees them
    lm.store.optimize()  # the FTS index and the compacted files hold them too

    apply_op(lm, "forget", {"ident": captured}, "op-1")
    apply_op(lm, "forget", {"ident": middle}, "op-2")

    assert_nowhere(home, ["zqxmarker1a", "zqxmarker2b", "zqxmarker3c"])
    # The rest is intact and still found, by words and by meaning.
    assert {m.id for m in lm.store.list_memories(MemoryFilter(status=None))} >= {first, last}
    assert lm.store.get(first).content == "Deploys go out on Tuesdays."
    assert [h.memory.id for h in lm.search("Tuesdays deploys", mode="bm25").hits][:1] == [first]
    # The audit keeps that something was saved and forgotten, with id, time and reason.
    saved = [e for e in lm.audit_entries(decision="saved") if e.memory_id == captured]
    assert saved and saved[0].title == "" and saved[0].text is None and saved[0].reason


def test_drained_events_leave_no_text_in_the_buffer(service: CaptureService) -> None:
    lm = service.lm
    service.settings.mode = "full"
    # Said in a session whose window closes: its events are buffered, then released.
    _say(service, "s1", "Just thinking aloud about zqxmarker4d today, nothing to keep.")
    _say(service, "s2", "We decided zqxmarker5e is the name of the staging cluster.")
    buffer = lm.paths.store / "buffer.lance"
    assert Journal(lm.store).counts()["buffer"] == 0
    found = [f for f in find_markers(lm.paths.home, ["zqxmarker4d", "zqxmarker5e"])
             if f.startswith(str(buffer.relative_to(lm.paths.home)))]  # fmt: skip
    assert found == []
    assert len(lm.store.table("buffer").list_versions()) == 1


def test_review_reject_erases_and_still_refuses_the_same_again(service: CaptureService) -> None:
    lm = service.lm
    service.settings.mode = "full"
    _say(service, "s1", "We decided to use zqxmarker6f 16 for the billing service.")
    (rejected,) = lm.review_queue()
    changes = review(lm, [rejected], "rejected")
    assert changes.deleted == (rejected,)
    assert lm.store.get_optional(rejected) is None
    assert_nowhere(lm.paths.home, ["zqxmarker6f"])
    # What stays refuses the same candidate again: no text, yet it works.
    (row,) = Journal(lm.store).rejected()
    assert set(row) >= {"fingerprint", "embedding", "particulars"}
    assert len(row["fingerprint"]) == 64 and len(row["particulars"]) == 32
    _say(service, "s2", "We decided to use zqxmarker6f 16 for the billing service!")
    assert lm.review_queue() == []
    refused = [
        e for e in lm.audit_entries(decision="skipped") if e.reason == "rejected in review before"
    ]
    assert refused and refused[0].title == ""  # the refusal names no text either


def test_retention_expiry_erases(service: CaptureService) -> None:
    lm = service.lm
    lm.settings.store.retention_days = 30
    old = lm.remember("The old VPN endpoint was zqxmarker7g.").memories[0].id
    keep = lm.remember("The new VPN endpoint is vpn2.example.").memories[0].id
    lm.archive(old)
    assert service.forget_expired(utcnow() + timedelta(days=31)) == 1
    assert lm.store.get_optional(old) is None and lm.store.get(keep).status == MemoryStatus.ACTIVE
    assert_nowhere(lm.paths.home, ["zqxmarker7g"])


def test_purge_project_erases_everything_of_the_repository(service: CaptureService) -> None:
    lm = service.lm
    service.settings.mode = "full"
    repo, other = "/work/secretrepo", "/work/shop"
    _say(service, "r1", "We decided zqxmarker8h signs every release of this repo.", project=repo)
    lm.remember("The sub-package uses zqxmarker9i for its cache.", project=f"{repo}/pkg")
    lm.remember("The shop uses zqxmarker0j for payments.", project=other)
    # A session still open: its events wait in the buffer.
    Inbox(lm.paths.inbox).write(make_event(
        "prompt", "Also remember zqxmarker1k please", session_id="r2", agent="claude",
        project=repo, cwd=repo,
    ))  # fmt: skip
    service.drain()
    assert Journal(lm.store).counts()["buffer"] >= 1
    service.digests.flush(force=True)
    assert any(p.read_text().count("zqxmarker") for p in lm.paths.digests.glob("*.md"))

    changes = apply_op(lm, "purge_project", {"root": repo}, "op-purge")["changes"]
    assert len(changes["deleted"]) == 2

    assert_nowhere(lm.paths.home, ["zqxmarker8h", "zqxmarker9i", "zqxmarker1k"])
    assert lm.projects() == [other]
    assert lm.get(lm.store.ids_in_projects([other])[0]).content.endswith("payments.")
    assert all(s.project != repo for s in lm.sessions())
    assert Journal(lm.store).buffered("r2") == []
    assert find_markers(lm.paths.home, ["zqxmarker0j"])  # the other project is untouched


def test_a_reader_searching_while_forget_erases_recovers(
    data_home: Path, embedder: Embedder
) -> None:
    """A second core on the same folder stands for another process (its own LanceDB
    connection and table handles, which hold the version it read last)."""
    writer = Lexmem.open(data_home, embedder=embedder)
    reader = Lexmem.open(data_home, embedder=embedder)
    ids = [writer.remember(f"Fact {i}: the cache key prefix is zqxmarker{i}l.").memories[0].id
           for i in range(6)]  # fmt: skip
    reader.search("cache key prefix", mode="bm25")
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                reader.search("cache key prefix", mode="bm25", record_access=False)
                reader.store.list_memories(limit=5)
            except Exception as exc:  # noqa: BLE001 - the assertion below shows any of them
                errors.append(exc)
                return

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for mid in ids[:4]:
            writer.forget(mid)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert errors == []
    reader.store.refresh()
    assert {h.memory.id for h in reader.search("cache key prefix", mode="bm25").hits} == set(
        ids[4:]
    )
    assert_nowhere(data_home, [f"zqxmarker{i}l" for i in range(4)])
    writer.close()
    reader.close()


def test_cli_forget_and_optout_purge_say_backups_keep_it(
    data_home: Path, embedder: Embedder, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    with shared_model(embedder):
        lm = Lexmem.open(data_home, embedder=embedder)
        gone = lm.remember("The build cache lives in zqxmarker2m.").memories[0].id
        lm.remember("The repo deploys with zqxmarker3n.", project=str(repo.resolve()))
        lm.close()
        forgot = CliRunner().invoke(cli, ["forget", gone, "--yes"], catch_exceptions=False)
        assert forgot.exit_code == 0, forgot.output
        assert "Backups made before now still hold it" in forgot.stdout
        purged = CliRunner().invoke(
            cli, ["optout", "add", str(repo), "--purge"], catch_exceptions=False
        )
        assert purged.exit_code == 0, purged.output
        assert "Erased 1 memory captured from" in purged.stdout
        assert "Backups made before now still hold them" in purged.stdout
    assert_nowhere(data_home, ["zqxmarker2m", "zqxmarker3n"])
    assert str(repo.resolve()) in load_settings(Paths(data_home)).capture.optout
