"""Two clients, one real team server: capture on one, search on the other; edits, pins,
archives, supersedes and forgets propagate; concurrent edits converge with the loser in
the server's history; a client killed mid-push loses and duplicates nothing; pulled
memories are searched offline.

Each client is a data folder of its own with the real writer (``CaptureService``), the
real LanceDB store and the real model; the server is the tests' PostgreSQL with pgvector
(``pg_database``), each client connecting as a member role of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_model
from pgfixture import pg_available
from test_service import Agent

from lexmem.api import Lexmem, remember_through_inbox
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.errors import LexmemError
from lexmem.service.writer import CaptureService
from lexmem.store.protocol import MemoryFilter
from lexmem.team.outbox import Outbox, TeamState

ROOT = Path(__file__).resolve().parents[1]
TEAM = "shop"


def server_module() -> Any:
    pg_available()  # skips without the team extra, fails under CI
    import lexmem.store.postgres.team as module

    return module


@pytest.fixture
def team_url(pg_database: str, embedder: Embedder) -> str:
    """The team's database: migrated, with a team that shares the project ``shop``."""
    module = server_module()
    server = module.TeamServer(pg_database, dim=384, space=embedder.space_id).open()
    try:
        server.create_team("devs")
        server.share_project("devs", TEAM)
        for person in ("ann", "bob"):  # a plain LOGIN role each, row-level security in force
            server.add_member("devs", person)
    finally:
        server.close()
    return pg_database


@dataclass
class Client:
    """One person's lexmem: a data folder, its core, its writer (running or not)."""

    home: Path
    repo: Path
    lm: Lexmem
    service: CaptureService
    stop: threading.Event | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.service.run, args=(self.stop,),
                                       kwargs={"poll": 0.5}, daemon=True)  # fmt: skip
        self.thread.start()

    def halt(self) -> None:
        if self.stop is not None and self.thread is not None:
            self.stop.set()
            self.service.wake()
            self.thread.join(timeout=30)
            self.stop = self.thread = None

    def sync(self) -> dict[str, Any]:
        return self.service.maintenance("team_sync", {})

    def writer(self) -> Lexmem:
        """What writes: the core itself, in the writer's process (the loop is not running)."""
        return self.lm

    def find(self, query: str) -> list[str]:
        self.lm.refresh()
        return [h.memory.content for h in self.lm.search(query, record_access=False).hits]

    def shared(self) -> list[Any]:
        self.lm.refresh()
        return self.lm.list_memories(MemoryFilter(project=str(self.repo), status=None), limit=None)


def make_client(root: Path, name: str, url: str, embedder: Embedder) -> Client:
    home, repo = root / f"{name}-data", root / f"{name}-work" / "shop"
    (repo / ".git").mkdir(parents=True)
    lm = Lexmem.open(home, embedder=embedder)
    lm.team_join(url, project=str(repo), team_name=TEAM, user=name)
    lm.close()
    lm = Lexmem.open(home, embedder=embedder)  # as a new process would: [team] read at open
    service = CaptureService(lm)
    service.acquire()
    return Client(home, repo, lm, service)


def close(client: Client) -> None:
    client.halt()
    client.service.release()
    client.lm.close()


@pytest.fixture
def clients(tmp_path: Path, team_url: str, embedder: Embedder) -> Iterator[tuple[Client, Client]]:
    a = make_client(tmp_path, "ann", team_url, embedder)
    b = make_client(tmp_path, "bob", team_url, embedder)
    try:
        yield a, b
    finally:
        close(a)
        close(b)


def wait_until(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    """Poll ``check`` until it returns something true (a hard timeout far above normal)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


# -- capture on one, search on the other -----------------------------------------------------


def test_a_memory_remembered_on_one_client_is_searchable_on_the_other(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    a, b = clients
    a.start()
    b.start()
    t0 = time.monotonic()
    with shared_model(embedder):
        done = remember_through_inbox(
            a.lm, "The shop's payments service retries webhooks three times.",
            project=str(a.repo), notify=a.service.wake,
        )  # fmt: skip
    assert done.memories
    wait_until(lambda: any("webhooks" in c for c in b.find("how often are webhooks retried")),
               what="the memory on the other client")  # fmt: skip
    elapsed = time.monotonic() - t0
    pulled = b.lm.get(done.memories[0].id)  # the same id, under bob's own project
    assert pulled.project == str(b.repo) and pulled.created_at == done.memories[0].created_at
    assert b.lm.is_shared(pulled)
    assert Outbox(Paths(b.home)).size() == 0  # nothing pulled goes back out
    wait_until(lambda: Outbox(Paths(a.home)).size() == 0, what="ann's outbox to empty")
    status = a.lm.team_status()
    assert status["reachable"] and status["outbox"] == 0 and status["last_sync"]
    print(f"capture-to-searchable {elapsed:.2f} s")


def test_a_captured_session_on_one_client_is_searchable_on_the_other(
    clients: tuple[Client, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = clients
    b.start()
    monkeypatch.setenv("LEXMEM_HOME", str(a.home))  # the hook writes to ann's inbox
    agent = Agent(a.repo)
    agent.prompt("The login test is failing, can you fix it? "
                 "Let's go with JWT access tokens instead of sessions.")  # fmt: skip
    agent.bash("pytest -q tests/test_api.py",
               "FAILED tests/test_api.py::test_login - KeyError: 'token'\n1 failed", failed=True)  # fmt: skip
    agent.edit("src/api.py", "payload['token']", "payload['access_token']")
    agent.bash("pytest -q tests/test_api.py", "12 passed in 0.51s")
    agent.reply("The login test failed because the token key was renamed to access_token; "
                "I updated src/api.py to read access_token. All tests pass now.")  # fmt: skip
    agent.end()
    a.start()  # the writer drains the hook's events and pushes what it captured
    wait_until(lambda: any("access_token" in c for c in b.find("why did the login test fail")),
               what="the captured fix on the other client")  # fmt: skip


# -- what propagates --------------------------------------------------------------------------


def test_edit_pin_archive_supersede_and_forget_propagate(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    a, b = clients
    with shared_model(embedder):
        first = a.lm.remember("The shop builds with make release.", project=str(a.repo))
        second = a.lm.remember("The shop's staging runs on Fridays.", project=str(a.repo))
        third = a.lm.remember("The shop's API listens on port 8080.", project=str(a.repo))
    one, two, three = (r.memories[0].id for r in (first, second, third))
    a.sync()
    b.sync()
    assert {m.id for m in b.shared()} == {one, two, three}

    w = a.writer()
    w.edit(one, content="The shop builds with make dist.")
    w.pin(one)
    w.archive(two)
    _, newer = w.supersede(three, with_text="The shop's API listens on port 9090.")
    a.sync()
    b.sync()
    got = {m.id: m for m in b.shared()}
    assert got[one].content == "The shop builds with make dist." and got[one].pinned
    assert str(got[two].status) == "archived"
    assert str(got[three].status) == "superseded" and got[three].superseded_by == newer
    assert got[newer].content == "The shop's API listens on port 9090."
    assert "make dist" in " ".join(b.find("how does the shop build"))

    # Back the other way: bob restores, unpins; ann sees it.
    bw = b.writer()
    bw.restore(two)
    bw.pin(one, pinned=False)
    b.sync()
    a.sync()
    mine = {m.id: m for m in a.shared()}
    assert str(mine[two].status) == "active" and not mine[one].pinned

    marker = "The shop's staging runs on Fridays."
    w.forget(two)
    entry = Outbox(Paths(a.home)).get(two)
    assert entry is not None and entry.deleted and entry.row is None
    a.sync()
    b.sync()
    assert b.lm.store.get_optional(two) is None
    assert marker not in " ".join(b.find("when does staging run"))
    assert TeamState(Paths(b.home)).version(two) >= 2


def test_concurrent_edits_converge_and_the_loser_is_kept_in_history(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    a, b = clients
    with shared_model(embedder):
        mid = a.lm.remember("The shop deploys at 10:00.", project=str(a.repo)).memories[0].id
    a.sync()
    b.sync()
    a.writer().edit(mid, content="The shop deploys at 11:00.")
    time.sleep(0.05)  # bob's edit is the later one
    b.writer().edit(mid, content="The shop deploys at 12:00.")
    a.sync()  # ann's version reaches the server first
    b.sync()  # bob's is the same version: the later edit wins
    a.sync()
    a.lm.refresh()
    b.lm.refresh()
    assert a.lm.get(mid).content == b.lm.get(mid).content == "The shop deploys at 12:00."
    assert (
        b.lm.team_status(reach=False)["conflicts"] + a.lm.team_status(reach=False)["conflicts"] >= 1
    )
    module = server_module()
    server = module.TeamServer(a.lm.settings.team.url, dim=384, space=embedder.space_id).open()
    try:
        lost = server.history(mid)
    finally:
        server.close()
    assert any("11:00" in str(h) for h in lost)


def test_pulled_memories_are_searched_offline_with_the_server_gone(
    clients: tuple[Client, Client], embedder: Embedder, pg_server: Any, team_url: str
) -> None:
    import psycopg
    from psycopg import sql

    a, b = clients
    with shared_model(embedder):
        a.lm.remember("The shop's invoices are numbered per year.", project=str(a.repo))
    a.sync()
    b.sync()
    name = psycopg.conninfo.conninfo_to_dict(team_url)["dbname"]
    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                      (name,))  # fmt: skip
        admin.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
            sql.Identifier(name), sql.Identifier(name + "_gone")))  # fmt: skip
    try:
        assert any("invoices" in c for c in b.find("how are invoices numbered"))
        with pytest.raises(LexmemError) as failed:
            b.sync()
        assert "\n" not in str(failed.value)
        status = b.lm.team_status()
        assert status["reachable"] is False and status["last_error"]
        with shared_model(embedder):
            b.lm.remember("Offline: the shop closes early on Fridays.", project=str(b.repo))
        assert Outbox(Paths(b.home)).size() == 1  # waits for the server
        b.service.release()  # the command line is the writer for its sync
        try:
            for command in (["team", "sync"], ["team", "status"]):
                done = subprocess.run(
                    [sys.executable, "-m", "lexmem", "--home", str(b.home), *command],
                    env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT),
                    capture_output=True, text=True, timeout=120, check=False,
                )  # fmt: skip
                said = done.stderr if command[1] == "sync" else done.stdout
                assert "cannot be reached" in said, (command, done.stdout, done.stderr)
                assert done.stderr.count("\n") <= 1, done.stderr  # one line, no driver noise
        finally:
            b.service.acquire()
    finally:
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                sql.Identifier(name + "_gone"), sql.Identifier(name)))  # fmt: skip
    b.sync()
    a.sync()
    assert any("closes early" in c for c in a.find("when does the shop close"))


# -- a client killed mid-push -----------------------------------------------------------------

_PUSHER = textwrap.dedent(
    """
    import os, signal, sys
    import lexmem.store.postgres.team as team
    from lexmem.api import Lexmem

    home, mode = sys.argv[1], sys.argv[2]
    if mode == "after-commit":
        real = team.TeamServer.push
        def push(self, changes):
            outcome = real(self, changes)  # the server committed the batch ...
            os.kill(os.getpid(), signal.SIGKILL)  # ... and the client dies before the outbox knows
        team.TeamServer.push = push
    if mode == "during":
        import time
        real = team.TeamServer.push
        def push(self, changes):
            open(os.path.join(home, "pushing"), "w").close()
            while not os.path.exists(os.path.join(home, "go")):  # the test locks the table
                time.sleep(0.02)
            return real(self, changes)
        team.TeamServer.push = push
    lm = Lexmem.open(home)
    print(lm.team_sync(), flush=True)
    lm.close()
    """
)


def _pusher(home: Path, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LEXMEM_HOME=str(home))
    return subprocess.Popen(
        [sys.executable, "-c", _PUSHER, str(home), mode], env=env, cwd=str(ROOT),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.slow
def test_a_client_killed_mid_push_loses_and_duplicates_nothing(
    tmp_path: Path, team_url: str, embedder: Embedder
) -> None:
    import psycopg

    a = make_client(tmp_path, "ann", team_url, embedder)
    b = make_client(tmp_path, "bob", team_url, embedder)
    try:
        texts = [f"Shop fact number {i}: the batch job {i} runs at {i % 24}:00." for i in range(60)]
        with shared_model(embedder):
            ids = [a.lm.remember(t, project=str(a.repo)).memories[0].id for t in texts]
        a.service.release()  # the pushing process becomes the writer
        outbox = Outbox(Paths(a.home))
        assert outbox.size() == len(ids)

        # 1. Killed while the server holds its batch in an open transaction.
        proc = _pusher(a.home, "during")
        wait_until(lambda: (a.home / "pushing").exists() or proc.poll() is not None,
                   timeout=120, what="the push to start")  # fmt: skip
        assert proc.poll() is None, proc.communicate()
        with psycopg.connect(team_url) as blocker, psycopg.connect(team_url) as watch:
            blocker.execute("LOCK TABLE lexmem.memories IN ACCESS EXCLUSIVE MODE")
            (a.home / "go").touch()
            wait_until(lambda: watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'").fetchone()[0] > 0,  # type: ignore[index]
                timeout=60, what="the push to wait inside its transaction")  # fmt: skip
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            blocker.rollback()
        assert outbox.size() == len(ids)  # nothing confirmed, nothing gone

        # 2. Killed after the server committed, before the outbox heard of it.
        proc = _pusher(a.home, "after-commit")
        proc.wait(timeout=120)
        assert proc.returncode == -signal.SIGKILL, proc.communicate()
        assert outbox.size() == len(ids)  # not confirmed here: pushed again below

        # 3. Restarted: the same changes again, which the server takes as repeats.
        proc = _pusher(a.home, "normal")
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert outbox.size() == 0

        a.service.acquire()
        b.sync()
        got = [m.id for m in b.shared()]
        assert sorted(got) == sorted(ids)  # nothing lost, nothing twice
        with psycopg.connect(team_url) as conn:
            rows = conn.execute(
                "SELECT count(*), count(DISTINCT id) FROM lexmem.memories"
            ).fetchone()
        assert rows == (len(ids), len(ids))
    finally:
        close(a)
        close(b)


# -- the command line against the server ------------------------------------------------------


def test_the_team_commands_join_report_sync_and_leave_in_one_line_each(
    tmp_path: Path, team_url: str, embedder: Embedder, data_home: Path, memory_keyring: Any
) -> None:
    import json

    from click.testing import CliRunner

    from lexmem.cli import cli

    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)

    def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
        with shared_model(embedder):
            result = CliRunner().invoke(cli, list(args), input=stdin)
        return result.exit_code, result.output

    # The server down (nothing listens on that socket): one line, nothing kept.
    code, out = run("team", "join", "postgresql:///nothere?host=/tmp/lexmem-no-server",
                    "--project", str(repo))  # fmt: skip
    assert code != 0 and out.count("\n") == 1 and out.startswith("lexmem: error:")
    assert not load_team(data_home).url
    code, out = run("team", "join", "postgresql:///nothere?host=/tmp/lexmem-no-server",
                    "--project", str(repo), "--password-stdin", stdin="never-kept\n")  # fmt: skip
    assert code != 0 and "never-kept" not in memory_keyring.secrets.values()

    # Not a member of a team that shares the project.
    code, out = run("team", "join", team_url, "--project", str(repo), "--as", "blog",
                    "--user", "ann")  # fmt: skip
    assert code == 2 and out.count("\n") == 1 and "not a member" in out

    code, out = run("team", "join", team_url, "--project", str(repo), "--user", "ann",
                    "--password-stdin", stdin="s3cret-pass\n")  # fmt: skip
    assert code == 0, out
    assert "'shop'" in out and "s3cret" not in out
    team = load_team(data_home)
    assert team.projects == {str(repo): "shop"} and team.user == "ann"
    assert "s3cret" not in Paths(data_home).settings.read_text()
    assert "s3cret-pass" in memory_keyring.secrets.values()  # the keyring keeps it

    with shared_model(embedder):
        lm = Lexmem.open(data_home)
        lm.remember("The shop's cron runs hourly.", project=str(repo))
        lm.close()
    code, out = run("team", "status", "--json")
    status = json.loads(out)
    assert code == 0 and status["outbox"] == 1 and status["reachable"] is True
    assert status["lag_revisions"] == 0 and "s3cret" not in out
    code, out = run("team", "sync")
    assert code == 0 and out.startswith("Pushed 1,")
    code, out = run("team", "status")
    assert code == 0 and "0 waiting" in out and "last sync    never" not in out

    code, out = run("team", "leave", "--project", str(repo))
    assert code == 0 and "Stopped sharing" in out
    assert not load_team(data_home).url
    assert "s3cret-pass" not in memory_keyring.secrets.values()


def load_team(home: Path) -> Any:
    from lexmem.settings import load_settings

    return load_settings(Paths(home)).team


def test_joining_shares_what_the_project_already_had(
    tmp_path: Path, team_url: str, embedder: Embedder
) -> None:
    repo = tmp_path / "early" / "shop"
    (repo / ".git").mkdir(parents=True)
    home = tmp_path / "early-data"
    with shared_model(embedder):
        lm = Lexmem.open(home, embedder=embedder)
        before = lm.remember("Before joining: the shop's logs rotate daily.", project=str(repo))
        lm.remember("Another project's note stays here.", project=str(tmp_path / "other"))
        lm.team_join(team_url, project=str(repo), user="ann")
        lm.close()
    a = Client(home, repo, Lexmem.open(home, embedder=embedder), None)  # type: ignore[arg-type]
    a.service = CaptureService(a.lm)
    a.service.acquire()
    b = make_client(tmp_path, "bob", team_url, embedder)
    try:
        assert a.sync()["pushed"] == 1  # the project's memory, not the other one
        b.sync()
        assert [m.id for m in b.shared()] == [before.memories[0].id]
    finally:
        close(a)
        close(b)


def test_opting_out_with_purge_holds_on_the_server_and_pulls_nothing_back(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    from lexmem.service.ops import purge_project
    from lexmem.settings import load_settings, save_settings

    a, b = clients
    with shared_model(embedder):
        mid = (
            a.lm.remember("The shop's vendor list is private.", project=str(a.repo)).memories[0].id
        )
    a.sync()
    b.sync()
    assert [m.id for m in b.shared()] == [mid]
    settings = load_settings(a.lm.paths)
    settings.capture.optout = [str(a.repo)]
    save_settings(a.lm.paths, settings)
    a.lm.settings.capture.optout = [str(a.repo)]
    purge_project(a.lm, str(a.repo))  # `lexmem optout add --purge`
    entry = Outbox(Paths(a.home)).get(mid)
    assert entry is not None and entry.deleted and entry.row is None
    a.sync()
    b.sync()
    assert b.shared() == []  # the purge reached the team
    with shared_model(embedder):
        b.lm.remember("Bob's later note about the shop.", project=str(b.repo))
    b.sync()
    a.sync()
    assert a.shared() == []  # nothing of the team lands in the opted-out repository
