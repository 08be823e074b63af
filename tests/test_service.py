"""The capture path end to end: the real hook command → inbox → the real service → the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.models import MemorySource, MemoryStatus, utcnow
from lexmem.service.events import MemoryCaptured
from lexmem.service.writer import CaptureService, ServiceBusyError
from lexmem.settings import CaptureSettings, Settings, save_settings
from lexmem.store.journal import Journal
from lexmem.store.lance import MemoryFilter

HOOK = str(Path(sys.executable).with_name("lexmem-hook"))

SECRETS = [
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    return root


class Agent:
    """Plays a Claude Code session: every hook payload goes through the real `lexmem-hook`."""

    def __init__(self, repo: Path, session: str | None = None, adapter: str = "claude") -> None:
        self.repo = repo
        self.session = session or str(uuid.uuid4())
        self.adapter = adapter

    def send(self, event: str, **fields: Any) -> None:
        payload = {
            "session_id": self.session, "transcript_path": None, "cwd": str(self.repo),
            "permission_mode": "default", "hook_event_name": event, **fields,
        }  # fmt: skip
        proc = subprocess.run(
            [HOOK, self.adapter], input=json.dumps(payload).encode(), capture_output=True,
            env=os.environ.copy(), timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0

    def prompt(self, text: str) -> None:
        self.send("UserPromptSubmit", prompt=text)

    def reply(self, text: str) -> None:
        self.send("Stop", stop_hook_active=False, last_assistant_message=text)

    def bash(self, command: str, output: str, failed: bool = False) -> None:
        tid = str(uuid.uuid4())
        self.send("PreToolUse", tool_name="Bash", tool_input={"command": command}, tool_use_id=tid)
        if failed:
            self.send("PostToolUseFailure", tool_name="Bash", tool_input={"command": command},
                      tool_use_id=tid, error=output)  # fmt: skip
        else:
            self.send("PostToolUse", tool_name="Bash", tool_input={"command": command}, tool_use_id=tid,
                      tool_response={"stdout": output, "stderr": "", "interrupted": False})  # fmt: skip

    def edit(self, path: str, old: str, new: str) -> None:
        tid = str(uuid.uuid4())
        args = {"file_path": str(self.repo / path), "old_string": old, "new_string": new}
        self.send("PreToolUse", tool_name="Edit", tool_input=args, tool_use_id=tid)
        self.send("PostToolUse", tool_name="Edit", tool_input=args, tool_use_id=tid,
                  tool_response={"filePath": str(self.repo / path), "success": True})  # fmt: skip

    def end(self) -> None:
        self.send("SessionEnd", reason="exit")


def contents(svc: CaptureService) -> list[str]:
    return [m.content for m in svc.lm.list_memories(limit=None)]


def test_a_debugging_session_yields_its_fix_decision_and_preference(
    service: CaptureService, repo: Path
) -> None:
    a = Agent(repo)
    a.send("SessionStart", source="startup", model="claude-sonnet")
    a.prompt(
        "The login test is failing, can you fix it? Let's go with JWT access tokens instead of sessions."
    )
    a.bash(
        "pytest -q tests/test_api.py",
        "FAILED tests/test_api.py::test_login - KeyError: 'token'\n1 failed",
        failed=True,
    )
    a.edit("src/api.py", "payload['token']", "payload['access_token']")
    a.bash("pytest -q tests/test_api.py", "12 passed in 0.51s")
    a.reply("The login test failed because the token key was renamed to access_token; "
            "I updated src/api.py to read access_token. All tests pass now.")  # fmt: skip
    a.prompt("Thanks! From now on always use pnpm instead of npm in this repo.")
    a.reply("Got it, I'll use pnpm from now on.")
    a.end()
    report = service.drain()
    assert report.events >= 10 and report.saved >= 3 and report.sessions_closed == 1
    lm = service.lm
    # The fix ranks first or second: the session's handoff summary ("Goal: the login test
    # is failing …") answers the same question by both legs, a near tie.
    hits = lm.search("why did the login test fail", record_access=False).hits[:2]
    fix = next(h.memory for h in hits if not h.memory.content.startswith("Goal:"))
    assert "access_token" in fix.content and "KeyError" in fix.content
    pref = lm.search("which package manager should I use", record_access=False).hits[0].memory
    assert "pnpm" in pref.content
    assert all(m.project == str(repo) for m in lm.list_memories(limit=None))
    session = service.journal.session(a.session)
    assert (
        session is not None
        and session.status == "completed"
        and session.memory_count == report.saved
    )
    assert all(
        e.decision in ("saved", "skipped", "reinforced") for e in service.journal.audit_entries()
    )


def test_chit_chat_is_not_stored(service: CaptureService, repo: Path) -> None:
    a = Agent(repo)
    for text in ("hi", "thanks!", "lgtm", "ok great", "can you explain that again?"):
        a.prompt(text)
        a.reply("Sure! Happy to help.")
    a.bash("ls", "README.md\nsrc\ntests")
    a.end()
    report = service.drain()
    assert report.events > 0
    assert service.lm.count() == 0


def test_a_secret_in_any_field_reaches_no_file(
    service: CaptureService, repo: Path, data_home: Path
) -> None:
    a = Agent(repo)
    a.prompt(f"Remember that the deploy token is {SECRETS[0]} and we always deploy from main.")
    a.bash(f"aws configure set aws_access_key_id {SECRETS[1]}", f"configured key {SECRETS[1]}")
    a.reply(f"I set OPENAI_API_KEY={SECRETS[2]} in your shell; always deploy from main.")
    a.end()
    service.drain()
    service.lm.store.optimize()
    for path in data_home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in SECRETS:
                assert secret.encode() not in data, f"{secret[:6]}… found in {path}"


def test_an_opted_out_repository_leaves_no_trace(
    service: CaptureService, repo: Path, data_home: Path
) -> None:
    (repo / ".lexmem-optout").write_text("")
    a = Agent(repo)
    marker = "ZEBRAFISH-MARKER-42"
    a.prompt(f"Remember that {marker} is our codename; always use it.")
    a.bash(f"echo {marker}", marker)
    a.reply(f"Noted: {marker}.")
    a.end()
    report = service.drain()
    assert report.events == 0
    for path in data_home.rglob("*"):
        if path.is_file():
            assert marker.encode() not in path.read_bytes()
            assert str(repo).encode() not in path.read_bytes()


def test_the_same_fact_in_three_sessions_is_one_active_memory(
    service: CaptureService, repo: Path
) -> None:
    for _ in range(3):
        a = Agent(repo)
        a.prompt("Remember that the staging database runs on port 5433.")
        a.reply("Noted.")
        a.end()
        service.drain()
    active = service.lm.list_memories(limit=None)
    assert len([m for m in active if "5433" in m.content]) == 1
    assert any(e.decision == "reinforced" for e in service.journal.audit_entries())
    assert active[0].last_reinforced_at is not None


def test_duplicate_and_bad_event_files(
    service: CaptureService, repo: Path, data_home: Path
) -> None:
    inbox = Inbox(data_home / "inbox")
    event = make_event(
        "explicit", "The release train leaves every Thursday", session_id="cli", project=str(repo)
    )
    path = inbox.write(event)
    copy = path.with_name(f"{int(path.name[:20]) + 1:020d}-{event['event_id']}.json")
    copy.write_bytes(path.read_bytes())
    bad = inbox.folder / f"{utcnow().timestamp() * 1e9:020.0f}-{uuid.uuid4()}.json"
    bad.write_text('{"event_id": "x", "secret": "' + SECRETS[0] + '"')
    report = service.drain()
    assert (report.events, report.duplicates, report.quarantined, report.saved) == (1, 1, 1, 1)
    assert inbox.pending() == []
    [q] = inbox.quarantined()
    assert SECRETS[0].encode() not in q.read_bytes()
    assert "not valid JSON" in json.loads(q.read_text())["reason"]
    assert service.journal.audit_entries(decision="quarantined")[0].reason.startswith(
        "not valid JSON"
    )
    # The same event again, much later: still processed once (idempotent by event id).
    inbox.write(event)
    assert service.drain().duplicates == 1
    assert service.lm.count() == 1


def test_a_crash_between_commit_and_cleanup_loses_and_duplicates_nothing(
    service: CaptureService, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = Agent(repo)
    a.prompt("Remember that invoices are generated on the first day of each month.")
    a.reply("Noted.")
    a.prompt("From now on always run `make lint` before committing.")
    a.reply("Will do.")

    def crash(self: Inbox, path: Path) -> None:
        raise KeyboardInterrupt("killed")  # as if the process died right after the journal commit

    monkeypatch.setattr(Inbox, "remove", crash)
    with pytest.raises(KeyboardInterrupt):
        service.drain()
    monkeypatch.undo()
    report = service.drain()  # the restarted service sees the same files again
    assert report.duplicates == 4
    again = service.drain()
    assert again.events == 0
    texts = contents(service)
    assert len(texts) == len(set(texts)) >= 2


def test_sessions_start_end_idempotently_and_idle_ones_are_abandoned(
    service: CaptureService, repo: Path
) -> None:
    a = Agent(repo)
    a.send("SessionStart", source="startup", model="m")
    a.prompt("We decided to keep the monolith for now.")
    a.end()
    a.end()
    service.drain()
    s = service.journal.session(a.session)
    assert s is not None and s.status == "completed" and s.ended_at is not None
    assert service.journal.current_session() is None
    b = Agent(repo)
    b.prompt("Remember that the CDN purges take five minutes.")
    service.drain()
    current = service.journal.current_session()
    assert current is not None and current.id == b.session
    assert service.journal.session(b.session).status == "active"  # type: ignore[union-attr]
    report = service.abandon_idle(now=utcnow() + timedelta(hours=3))
    assert service.journal.session(b.session).status == "abandoned"  # type: ignore[union-attr]
    assert report.saved >= 1 and "CDN" in " ".join(contents(service))


def test_explicit_config_confirmation_and_correction_events(
    service: CaptureService, data_home: Path
) -> None:
    inbox = Inbox(data_home / "inbox")
    seen: list[MemoryCaptured] = []
    service.bus.subscribe(seen.append)
    inbox.write(make_event("explicit", "Chapter titles stay under five words", agent="cli",
                           metadata={"pin": True, "type": "semantic"}))  # fmt: skip
    inbox.write(
        make_event(
            "config_change",
            "",
            agent="tray",
            metadata={"key": "theme", "old": "light", "new": "dark"},
        )
    )
    service.drain()
    texts = contents(service)
    assert "Chapter titles stay under five words" in texts
    assert any("User prefers dark mode" in t for t in texts)
    pinned = service.lm.list_memories(MemoryFilter(pinned=True))
    assert [m.content for m in pinned] == ["Chapter titles stay under five words"]
    assert {e.source for e in seen} >= {MemorySource.EXPLICIT, MemorySource.CONFIGURATION}
    before = pinned[0].salience
    inbox.write(make_event("search_confirmation", "", agent="mcp",
                           metadata={"memory_id": pinned[0].id, "query": "chapter titles"}))  # fmt: skip
    assert service.drain().reinforced == 1
    assert service.lm.get(pinned[0].id).salience > before
    inbox.write(make_event("correction", "", agent="tray", metadata={
        "original": "Mara's eyes are blue", "corrected": "Mara's eyes are green", "context": "chapter 2"}))  # fmt: skip
    service.drain()
    assert any("green" in t and "blue" in t for t in contents(service))


def test_capture_mode_off_skips_with_an_audit_entry(service: CaptureService, repo: Path) -> None:
    service.settings.project_modes = {str(repo): "off"}
    inbox = Inbox(service.lm.paths.inbox)
    inbox.write(make_event("config_change", "", agent="tray", project=str(repo),
                           metadata={"key": "font", "old": "small", "new": "large"}))  # fmt: skip
    a = Agent(repo)
    a.prompt("Remember that the cache TTL is ten minutes.")
    a.reply("ok")
    service.drain()
    assert service.lm.count() == 0  # automatic capture, configuration changes included, is off here
    skipped = service.journal.audit_entries(decision="skipped")
    assert skipped and all(
        e.reason == "capture is off for this project" and e.text is None for e in skipped
    )


def test_only_one_service_per_data_folder(
    service: CaptureService, data_home: Path, embedder: Embedder
) -> None:
    other = CaptureService(Lexmem.open(data_home, embedder=embedder))
    with pytest.raises(ServiceBusyError):
        other.acquire()


def test_superseded_and_archived_memories_are_not_reinforced_as_duplicates(
    service: CaptureService, repo: Path
) -> None:
    a = Agent(repo)
    a.prompt("Remember that the API base URL is api.shop.test.")
    a.reply("ok")
    service.drain()
    [m] = service.lm.list_memories(limit=None)
    service.lm.archive(m.id)
    b = Agent(repo)
    b.prompt("Remember that the API base URL is api.shop.test.")
    b.reply("ok")
    service.drain()
    assert service.lm.count(MemoryFilter(status=MemoryStatus.ACTIVE)) == 1
    assert Journal(service.lm.store).counts()["buffer"] == 0


def test_a_workflow_carried_out_becomes_a_procedure(service: CaptureService, repo: Path) -> None:
    """Seed 000 CaptureWorkflowPattern: >= 3 actions within 30 minutes.

    A workflow seen once is a medium-confidence candidate: full mode keeps it, assist
    mode (only high-confidence durable facts) audits it as skipped.
    """
    service.settings.mode = "full"
    a = Agent(repo)
    a.prompt("Ship the hotfix please.")
    a.bash("pnpm test", "Tests: 48 passed, 48 total")
    a.bash("pnpm run build", "build complete in 4.2s")
    a.bash("git push origin main", "To github.com:acme/shop.git\n   1a2b3c4..5d6e7f8  main -> main")
    a.reply("Tests pass, the build is done and the hotfix is pushed to main.")
    a.end()
    service.drain()
    hits = service.lm.search("how do we ship a release", record_access=False).hits
    procedures = [h.memory for h in hits if h.memory.type == "procedural"]
    assert (
        procedures and "pnpm test" in procedures[0].content and "git push" in procedures[0].content
    )


def test_stats_report_capture_figures(service: CaptureService, repo: Path) -> None:
    a = Agent(repo)
    a.prompt("Remember that feature flags live in LaunchDarkly.")
    a.reply("Noted.")
    a.prompt("thanks")
    a.end()
    service.drain()
    cap = service.lm.stats()["capture"]
    assert cap["candidates_by_decision"]["saved"] >= 1
    assert cap["sessions_by_status"] == {"completed": 1}
    assert sum(cap["confidence_histogram"].values()) == sum(cap["candidates_by_decision"].values())


def test_killing_the_service_mid_batch_loses_and_duplicates_nothing(
    data_home: Path, embedder: Embedder
) -> None:
    """A real `lexmem serve` process, killed with SIGKILL while it drains, then restarted."""
    import signal
    import time

    lm = Lexmem.open(data_home, embedder=embedder)
    inbox = Inbox(lm.paths.inbox)
    texts = [
        f"Service {i} of the fleet listens on port {9000 + i} in the staging cluster."
        for i in range(600)
    ]
    ids = [inbox.write(make_event("explicit", t, session_id="bulk", agent="cli")) for t in texts]
    assert len(ids) == 600
    env = dict(os.environ, LEXMEM_HOME=str(data_home))
    exe = str(Path(sys.executable).with_name("lexmem"))
    kills = 0
    # Start the service and kill it at moments spread over its start-up and its drains.
    for delay in (2.0, 3.0, 3.5, 4.0, 5.0):
        if not inbox.pending():
            break
        proc = subprocess.Popen(
            [exe, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            kills += 1
    assert kills >= 1
    restarted = subprocess.run(
        [exe, "ingest", "--json"], env=env, capture_output=True, text=True, check=False
    )
    assert restarted.returncode == 0, restarted.stderr
    lm.store.refresh()
    stored = sorted(m.content for m in lm.list_memories(limit=None))
    assert stored == sorted(texts)
    assert inbox.pending() == [] and inbox.quarantined() == []
    lm.close()


def test_remember_goes_through_the_inbox_to_the_running_service(service: CaptureService) -> None:
    """The single writer: a CLI "remember" is an inbox event the running service stores."""
    import threading

    from lexmem.service.client import remember_through_inbox

    stop = threading.Event()
    runner = threading.Thread(target=service.run, args=(stop,), kwargs={"poll": 0.1}, daemon=True)
    runner.start()
    try:
        other = Lexmem.open(service.lm.paths.home, embedder=service.lm.embedder)  # another client
        done = remember_through_inbox(
            other,
            f"The admin password is Tr0ub4dor&3 and the token {SECRETS[0]}",
            project="ops",
            pin=True,
        )
        assert not done.queued and len(done.memories) == 1
        m = done.memories[0]
        assert m.pinned and m.project == "ops" and m.source == MemorySource.EXPLICIT
        assert (
            "Tr0ub4dor" not in m.content
            and SECRETS[0] not in m.content
            and "[REDACTED:" in m.content
        )
    finally:
        stop.set()
        service.wake()
        runner.join(30)


def test_near_duplicates_reinforce_but_a_changed_particular_is_a_new_fact(
    service: CaptureService,
) -> None:
    inbox = Inbox(service.lm.paths.inbox)
    service.settings.mode = "full"
    say = [
        "Remember that the staging database runs on port 5433.",
        "Keep in mind the staging DB listens on port 5433.",  # the same fact, other words
        "Remember that the staging database runs on port 5434.",  # a different fact
    ]
    for i, text in enumerate(say):
        sid = f"s{i}"
        inbox.write(make_event("prompt", text, session_id=sid, agent="claude"))
        inbox.write(make_event("response", "Noted.", session_id=sid, agent="claude"))
        service.drain()
    ports = sorted(m.content for m in service.lm.list_memories(limit=None))
    assert len(ports) == 2 and any("5433" in p for p in ports) and any("5434" in p for p in ports)
    assert len(service.journal.audit_entries(decision="reinforced")) == 1


def test_a_codex_session_and_a_correction_are_found_by_search(
    service: CaptureService, repo: Path
) -> None:
    """Codex hooks (turn_id, model; no transcript) and the older notify form, then a correction."""
    codex = Agent(repo, adapter="codex")
    codex.send("UserPromptSubmit", turn_id="t1", model="gpt-5-codex",
               prompt="Let's go with Redis for the job queue instead of RabbitMQ.")  # fmt: skip
    codex.send("Stop", turn_id="t1", model="gpt-5-codex", stop_hook_active=False,
               last_assistant_message="Agreed: Redis it is, RabbitMQ is out.")  # fmt: skip
    notify = {
        "type": "agent-turn-complete", "thread-id": codex.session, "turn-id": "t2", "cwd": str(repo),
        "input-messages": ["no, that's wrong: the API uses API keys, not OAuth"],
        "last-assistant-message": "You're right, the API authenticates with API keys.",
    }  # fmt: skip
    proc = subprocess.run([HOOK, "codex", json.dumps(notify)], capture_output=True, env=os.environ.copy(),
                          timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0
    service.drain()
    lm = service.lm
    decision = lm.search("which job queue do we use", record_access=False).hits[0].memory
    assert "Redis" in decision.content
    correction = lm.search("how does the API authenticate", record_access=False).hits[0].memory
    assert "API keys" in correction.content and correction.source == MemorySource.CORRECTION
    assert correction.salience > 0.5  # corrections are reinforced


def test_memory_operations_go_through_the_single_writer(service: CaptureService) -> None:
    """pin, edit, supersede, link, forget…: inbox events applied by the running service."""
    import threading

    from lexmem.errors import LexmemError
    from lexmem.service.client import InboxWriter

    lm = service.lm
    a = lm.remember("The build server is jenkins-1").memories[0]
    b = lm.remember("Deploys go out on Tuesdays").memories[0]
    stop = threading.Event()
    runner = threading.Thread(target=service.run, args=(stop,), kwargs={"poll": 0.1}, daemon=True)
    runner.start()
    try:
        client = Lexmem.open(lm.paths.home, embedder=lm.embedder)
        w = InboxWriter(client)
        assert w.pin(a.id).updated == (a.id,)
        w.edit(b.id, content=f"Deploys go out on Wednesdays; token {SECRETS[0]}")
        changes, new_id = w.supersede(a.id, with_text="The build server is jenkins-2")
        assert changes.created == (new_id,)
        w.link(new_id, b.id, "relates_to", 0.7)
        _, n = w.decay(0.5)
        assert n >= 1
        with pytest.raises(LexmemError) as err:
            w.forget("00000000-0000-0000-0000-000000000000")
        assert err.value.exit_code == 3
    finally:
        stop.set()
        service.wake()
        runner.join(30)
    lm.store.refresh()
    assert lm.get(a.id).pinned and lm.get(a.id).superseded_by == new_id
    assert "Wednesdays" in lm.get(b.id).content and SECRETS[0] not in lm.get(b.id).content
    assert [lk.to_id for lk in lm.store.get_links_from(new_id) if lk.link_type == "relates_to"] == [
        b.id
    ]
    for path in lm.paths.home.rglob("*"):
        if path.is_file():
            assert SECRETS[0].encode() not in path.read_bytes()


def test_background_maintenance_builds_the_vector_index_when_due(service: CaptureService) -> None:
    import numpy as np

    from lexmem.models import Memory

    service.lm.store.settings.vector_index_min_rows = 300
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((320, 384)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    service.lm.store.store_many(
        [Memory(content=f"row {i}", embedding=[float(x) for x in v]) for i, v in enumerate(vecs)]
    )
    assert service.lm.store.needs_vector_index()
    service.maintain()
    assert service.lm.store.has_vector_index() and not service.lm.store.needs_vector_index()


def _say(service: CaptureService, sid: str, text: str) -> None:
    """One short agent session in which the person says ``text``."""
    inbox = Inbox(service.lm.paths.inbox)
    inbox.write(make_event("prompt", text, session_id=sid, agent="claude"))
    inbox.write(make_event("response", "Noted.", session_id=sid, agent="claude"))
    inbox.write(make_event("session_end", "", session_id=sid, agent="claude"))
    service.drain()


def test_review_accept_reject_and_taking_it_back(service: CaptureService) -> None:
    from lexmem.service.ops import review

    service.settings.mode = "full"
    _say(service, "s1", "We decided to use PostgreSQL 16 for the billing service.")
    _say(service, "s2", "Never commit directly to main; open a pull request instead.")
    service.lm.remember("An explicit memory is never in the review queue")
    queue = service.lm.review_queue()
    assert len(queue) == 2
    pg = next(i for i in queue if "PostgreSQL" in service.lm.get(i).content)
    main = next(i for i in queue if i != pg)
    assert queue[0] == main  # newest first

    assert review(service.lm, [main], "accepted").updated == (main,)
    assert service.lm.review_queue() == [pg]
    assert review(service.lm, [pg], "rejected").deleted == (pg,)
    assert service.lm.store.get_optional(pg) is None  # rejected means erased
    assert service.lm.review_queue() == []

    # Rejection teaches capture: the same decision said again is skipped, with a reason...
    _say(service, "s3", "We decided to use PostgreSQL 16 for the billing service!")
    reasons = [e.reason for e in service.journal.audit_entries(decision="skipped")]
    assert "rejected in review before" in reasons
    assert service.lm.review_queue() == []
    # ...but a changed particular is a new fact, captured and queued.
    _say(service, "s4", "We decided to use PostgreSQL 17 for the billing service.")
    (new,) = service.lm.review_queue()
    assert "PostgreSQL 17" in service.lm.get(new).content

    # Taking a rejection back forgets the refusal: the same candidate is captured again.
    review(service.lm, [pg], "pending")
    _say(service, "s5", "We decided to use PostgreSQL 16 for the billing service.")
    assert len(service.lm.review_queue()) == 2 and new in service.lm.review_queue()
    with pytest.raises(Exception, match="accepted, rejected or pending"):
        review(service.lm, [pg], "maybe")


def test_the_service_redacts_the_project_and_working_folder_an_event_names(
    service: CaptureService, data_home: Path
) -> None:
    # Any program that can write the inbox is a producer: a project name carrying a key
    # (written straight into the inbox, unredacted) must not reach the store.
    project = f"shop-{SECRETS[0]}"
    Inbox(data_home / "inbox").write(
        make_event(
            "explicit", "The shop deploys from main", agent="cli",
            project=project, cwd=f"/work/{project}",
        )
    )  # fmt: skip
    service.drain()
    stored = service.lm.list_memories(MemoryFilter())
    assert [m.content for m in stored] == ["The shop deploys from main"]
    assert SECRETS[0] not in (stored[0].project or "") and "[REDACTED:" in (stored[0].project or "")
    service.lm.store.optimize()
    for path in (data_home / "store").rglob("*"):
        if path.is_file():
            assert SECRETS[0].encode() not in path.read_bytes(), path


def test_what_the_cli_and_mcp_enqueue_reaches_the_inbox_redacted(
    service: CaptureService, data_home: Path
) -> None:
    from lexmem.service.client import enqueue

    # MCP's confirm_memory sends the agent's query; a project name comes from the CLI.
    event = make_event(
        "search_confirmation", "", agent="mcp", project=f"shop-{SECRETS[1]}",
        metadata={"memory_id": "m1", "query": f"deploy token {SECRETS[0]}"},
    )  # fmt: skip
    enqueue(service.lm, event)
    files = list((data_home / "inbox").glob("*.json"))
    assert len(files) == 1  # the running service (the fixture) has not drained it yet
    written = files[0].read_text("utf-8")
    assert SECRETS[0] not in written and SECRETS[1] not in written
    assert "deploy token [REDACTED:" in written
    assert event["metadata"]["query"].endswith(SECRETS[0])  # the caller's event is untouched


def test_a_memory_keeps_who_said_it_and_a_search_naming_them_ranks_it_first(
    service: CaptureService, data_home: Path, tmp_path: Path
) -> None:
    """The hook records each turn's speaker (the person's configured name), the writer keeps
    it on a memory drawn from that person's turns, and a query naming the speaker ranks
    their memory first among memories that are otherwise the same (two repositories, so
    neither is a duplicate of the other)."""
    said = "Never deploy the billing service on a Friday afternoon."
    sessions: dict[str, str] = {}
    for name in ("Alice", "Bob"):
        repo = tmp_path / f"{name.lower()}-repo"
        (repo / ".git").mkdir(parents=True)
        save_settings(Paths(data_home), Settings(capture=CaptureSettings(user_name=name)))
        a = Agent(repo)
        a.prompt(said)
        a.reply("Understood.")
        a.end()
        sessions[a.session] = name
    service.drain()
    lm = service.lm
    memories = lm.list_memories(limit=None)
    assert sorted((sessions[m.session_id], m.content) for m in memories) == [
        ("Alice", said),
        ("Bob", said),
    ]
    for m in memories:
        assert m.metadata["speaker"] == sessions[m.session_id]
    for name in ("Alice", "Bob"):  # each order, so the tie is not broken by recency
        hits = lm.search(
            f"What did {name} say about deploying the billing service?", record_access=False
        ).hits
        assert [sessions[h.memory.session_id] for h in hits[:2]] == [
            name,
            "Bob" if name == "Alice" else "Alice",
        ]


def test_a_session_end_for_a_session_never_seen_leaves_nothing(
    service: CaptureService, repo: Path
) -> None:
    # `claude mcp list` fires SessionEnd alone, with no SessionStart and nothing else.
    ghost = Agent(repo)
    ghost.end()
    inbox = Inbox(service.lm.paths.inbox)
    (pending,) = inbox.pending()
    ids, kept = [json.loads(pending.read_text())["event_id"]], pending.read_bytes()
    report = service.drain()
    assert report.events == 1 and report.saved == 0 and report.sessions_closed == 0
    assert service.journal.session(ghost.session) is None
    assert service.journal.sessions() == []
    assert service.journal.seen(ids) == set(ids)  # processed: not taken in again
    assert inbox.pending() == [] and service.journal.buffered(ghost.session) == []
    assert service.journal.audit_entries() == []
    assert service.lm.list_memories(limit=None) == []
    # Taken in, then a crash before its file was removed: read again, it still ends nothing.
    pending.write_bytes(kept)
    again = service.drain()
    assert again.duplicates == 1 and again.sessions_closed == 0
    assert service.journal.sessions() == [] and service.journal.audit_entries() == []
    # A real session that starts and ends within one batch is still a session.
    real = Agent(repo)
    real.send("SessionStart", source="startup", model="m")
    real.end()
    service.drain()
    s = service.journal.session(real.session)
    assert s is not None and s.status == "completed"


def test_the_service_unloads_an_idle_model_and_loads_it_again_for_the_next_capture(
    data_home: Path,
) -> None:
    """What `lexmem serve` runs: the writer on a core with its own embedder, which drops
    the model after ``[embedding] idle_unload_minutes`` (here half a second)."""
    import time

    from lexmem.settings import EmbeddingSettings

    settings = Settings(embedding=EmbeddingSettings(idle_unload_minutes=0.5 / 60))
    lm = Lexmem.open(data_home, settings=settings)
    svc = CaptureService(lm)
    svc.acquire()
    try:
        inbox = Inbox(lm.paths.inbox)
        inbox.write(make_event("explicit", "The ledger lives in PostgreSQL 16", agent="cli"))
        assert svc.drain().saved == 1 and lm.embedder.loads == 1
        deadline = time.monotonic() + 60
        while lm.embedder.loaded and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lm.embedder.loaded
        inbox.write(make_event("explicit", "Deploys go out on Thursdays", agent="cli"))
        assert svc.drain().saved == 1 and lm.embedder.loads == 2
        first = lm.search("which database holds the ledger", record_access=False).hits[0]
        assert first.memory.content == "The ledger lives in PostgreSQL 16"
    finally:
        svc.release()
        lm.close()


def test_agent_events_settle_while_the_agent_works_and_a_persons_own_go_in_at_once(
    service: CaptureService, repo: Path
) -> None:
    """The running loop leaves an agent's events in the inbox while they keep coming (so
    its work does not compete with the agent's), takes them in once none has come for
    ``[capture] settle_seconds``, and takes in what a person gives at once, whatever
    waits beside it."""
    import threading
    import time

    from lexmem.service.client import remember_through_inbox

    service.settings.settle_seconds = 0.8
    inbox = Inbox(service.lm.paths.inbox)
    stop = threading.Event()
    runner = threading.Thread(target=service.run, args=(stop,), kwargs={"poll": 0.05}, daemon=True)
    runner.start()
    try:
        session = str(uuid.uuid4())
        for n in range(6):  # an agent at work: an event every 0.2 s
            inbox.write(make_event("prompt", f"We deploy the shop with make ship, step {n}",
                                   session_id=session, agent="claude", cwd=str(repo)))  # fmt: skip
            service.wake()
            time.sleep(0.2)
            assert len(inbox.pending()) == n + 1  # none taken in while they keep coming
        other = Lexmem.open(service.lm.paths.home, embedder=service.lm.embedder)
        done = remember_through_inbox(other, "The staging host is stage-3", project="ops")
        assert not done.queued and len(done.memories) == 1  # a person's: at once
        deadline = time.monotonic() + 30
        while inbox.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inbox.pending() == []  # the agent's, once they settled
    finally:
        stop.set()
        service.wake()
        runner.join(30)


def test_an_agents_events_do_not_wait_past_the_settling_limit(service: CaptureService) -> None:

    from lexmem.service import writer

    inbox = Inbox(service.lm.paths.inbox)
    service.settings.settle_seconds = 1000.0  # beyond the cap
    inbox.write(make_event("prompt", "a prompt", session_id="s", agent="claude"))
    assert 0 < service.settling() <= writer.SETTLE_MAX_S
    service.settings.settle_seconds = 0.0
    assert service.settling() == 0
    service.settings.settle_seconds = 5.0
    inbox.write(make_event("probe", "doctor's probe"))  # anything not an agent's: at once
    assert service.settling() == 0
