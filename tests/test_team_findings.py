"""Team mode, nothing lost and nothing leaked: the address libpq really connects to is
judged before any connection, the person whose edit lost a conflict is told, a machine
without a keyring can still join, a wrong password says so, forgetting a team memory says
what the server keeps, and an opted-out project's lag is not reported as lag.

Run as a person would: the command line through click's runner, the real writer, a real
PostgreSQL (the tests' server, and one of its own that asks for passwords).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from conftest import shared_model
from keyring.backend import KeyringBackend
from keyring.errors import NoKeyringError
from pgfixture import pg_available
from test_team_sync import TEAM, Client, clients, server_module, team_url

from lexmem.api import Lexmem
from lexmem.config import Paths
from lexmem.embedder import Embedder

__all__ = ["clients", "team_url"]  # the fixtures, imported for the tests here

REMOTE = "192.0.2.2"  # TEST-NET-1: never reachable; the check must refuse it first


def run(embedder: Embedder, *args: str, stdin: str | None = None) -> tuple[int, str]:
    from click.testing import CliRunner

    from lexmem.cli import cli

    with shared_model(embedder):
        result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.output


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any connection attempt is recorded and refused (none may reach the network)."""
    pg_available()
    import psycopg

    tried: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        tried.append(str(args[1] if len(args) > 1 else args[0] if args else kwargs))
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(refuse))
    monkeypatch.setattr(psycopg, "connect", refuse)
    return tried


# -- 1. the address libpq will use ------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "env", "service"),
    [
        (f"postgresql://localhost:55432/team?hostaddr={REMOTE}", {}, None),
        ("postgresql:///team", {"PGHOST": REMOTE}, None),
        ("postgresql://localhost/team", {"PGHOSTADDR": REMOTE}, None),
        ("postgresql:///team?service=shop", {}, f"[shop]\nhost={REMOTE}\n"),
        ("postgresql:///team", {"PGSERVICE": "shop"}, f"[shop]\nhostaddr={REMOTE}\n"),
        (f"postgresql://localhost,{REMOTE}/team", {}, None),
        (f"host=/tmp,{REMOTE} dbname=team", {}, None),
    ],
)
def test_join_refuses_a_remote_address_libpq_would_use_without_tls_before_connecting(
    tmp_path: Path,
    embedder: Embedder,
    data_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_connection: list[str],
    url: str,
    env: dict[str, str],
    service: str | None,
) -> None:
    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if service is not None:
        file = tmp_path / "pg_service.conf"
        file.write_text(service)
        monkeypatch.setenv("PGSERVICEFILE", str(file))
    code, out = run(embedder, "team", "join", url, "--project", str(repo))
    assert code == 2, out
    assert out.count("\n") == 1 and out.startswith("lexmem: error:"), out
    assert "another machine" in out and "sslmode=verify-full" in out
    assert no_connection == []
    from lexmem.settings import load_settings

    assert not load_settings(Paths(data_home)).team.url


def test_the_writer_refuses_a_remote_address_from_the_environment_too(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, no_connection: list[str]
) -> None:
    """Settings that passed on one machine, PGHOST set later: the sync refuses, one line."""
    from lexmem.settings import TeamSettings
    from lexmem.team.sync import open_server

    monkeypatch.setenv("PGHOST", REMOTE)
    settings = TeamSettings(url="postgresql:///team", user="ann", projects={"/w": "w"})
    with pytest.raises(Exception) as refused:
        open_server(settings, dim=384, space=embedder.space_id)
    assert f"another machine ({REMOTE})" in str(refused.value) and no_connection == []


def test_local_addresses_and_checked_tls_pass_the_check() -> None:
    pg_available()
    from lexmem.store.postgres.address import tls_problem

    assert tls_problem("postgresql:///team?host=/tmp/x", {"PGHOST": REMOTE}) is None
    assert tls_problem("postgresql://localhost,[::1]/team", {}) is None
    assert tls_problem("postgresql://db.example.com/team?hostaddr=127.0.0.1", {}) is None
    assert tls_problem(f"postgresql://{REMOTE}/team?sslmode=verify-full", {}) is None
    assert tls_problem(f"postgresql://{REMOTE}/team", {"PGSSLMODE": "verify-full"}) is None
    assert tls_problem(f"postgresql://{REMOTE}/team?sslmode=require", {}) is not None


# -- a server that asks for passwords -----------------------------------------------------------


@pytest.fixture(scope="module")
def password_server() -> Iterator[str]:
    """A PostgreSQL of its own whose socket asks every role but the superuser for its
    password (SCRAM), with lexmem's schema and a team ``devs`` sharing ``shop`` whose
    member ``ann`` has the password ``right-pass``: the team database's URL (no user)."""
    pg_available()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    import psycopg

    root = Path(tempfile.mkdtemp(prefix="lexmem-pgpw-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            handle = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pgserver could not start a second PostgreSQL ({exc})")
    try:
        (root / "pgdata" / "pg_hba.conf").write_text(
            "local all postgres trust\nlocal all all scram-sha-256\n"
        )
        admin_url = str(handle.get_uri("postgres"))
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
            admin.execute("CREATE DATABASE team")
        url = str(handle.get_uri("team"))
        module = server_module()
        with module.TeamServer(url, dim=384, space="") as owner:
            owner.create_team("devs")
            owner.share_project("devs", TEAM)
            owner.add_member("devs", "ann", password="right-pass")
        host = psycopg.conninfo.conninfo_to_dict(url)["host"]
        yield f"postgresql:///team?host={host}"
    finally:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)


class NoKeyring(KeyringBackend):
    """A machine without an OS keyring: every operation raises NoKeyringError."""

    priority = 1  # type: ignore[assignment]

    def get_password(self, service: str, username: str) -> str | None:
        raise NoKeyringError("no backend")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise NoKeyringError("no backend")

    def delete_password(self, service: str, username: str) -> None:
        raise NoKeyringError("no backend")


@pytest.fixture
def no_keyring() -> Iterator[None]:
    before = keyring.get_keyring()
    keyring.set_keyring(NoKeyring())
    yield
    keyring.set_keyring(before)


# -- 4. a wrong password ----------------------------------------------------------------------


def test_a_wrong_password_says_the_server_refused_it_in_one_line(
    tmp_path: Path, embedder: Embedder, data_home: Path, password_server: str
) -> None:
    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)
    code, out = run(embedder, "team", "join", password_server, "--project", str(repo),
                    "--user", "ann", "--password-stdin", stdin="wrong-pass\n")  # fmt: skip
    assert out == "lexmem: error: the server refused the password for ann\n", out
    assert code == 2
    code, out = run(embedder, "team", "join", password_server, "--project", str(repo),
                    "--user", "ann")  # fmt: skip
    assert code == 2 and out.count("\n") == 1, out
    assert "asked for ann's password" in out, out
    code, out = run(embedder, "team", "join", password_server, "--project", str(repo),
                    "--user", "ann", "--password-stdin", stdin="right-pass\n")  # fmt: skip
    assert code == 0, out


# -- 3. no keyring, no team? ------------------------------------------------------------------


def test_without_a_keyring_a_private_password_file_joins_and_the_writer_logs_in(
    tmp_path: Path, embedder: Embedder, data_home: Path, password_server: str, no_keyring: None
) -> None:
    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)
    # --password-stdin cannot keep it: one line that says what to do instead.
    code, out = run(embedder, "team", "join", password_server, "--project", str(repo),
                    "--user", "ann", "--password-stdin", stdin="right-pass\n")  # fmt: skip
    assert code != 0 and out.count("\n") == 1, out
    assert "no OS keyring" in out and "~/.pgpass" in out and "right-pass" not in out

    # libpq's password file in the home folder: refused while others may read it.
    pgpass = Path.home() / ".pgpass"
    pgpass.write_text("*:*:team:ann:right-pass\n")
    pgpass.chmod(0o644)
    code, out = run(embedder, "team", "join", password_server, "--project", str(repo),
                    "--user", "ann")  # fmt: skip
    assert code == 2 and out.count("\n") == 1, out
    assert f"the password file {pgpass} is open to other users" in out and "chmod 600" in out
    pgpass.chmod(0o600)
    code, out = run(embedder, "team", "join", password_server, "--project", str(repo),
                    "--user", "ann")  # fmt: skip
    assert code == 0, out

    # The writer logs in with it: a memory goes to the server.
    with shared_model(embedder):
        lm = Lexmem.open(data_home)
        lm.remember("The shop's backups run at 02:00.", project=str(repo))
        lm.close()
    code, out = run(embedder, "team", "sync", "--json")
    assert code == 0 and json.loads(out)["pushed"] == 1, out
    code, out = run(embedder, "team", "status", "--json")
    assert code == 0 and json.loads(out)["reachable"] is True, out


def test_a_passfile_named_in_the_address_is_used_and_checked(
    tmp_path: Path, embedder: Embedder, password_server: str, no_keyring: None
) -> None:
    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)
    secret = tmp_path / "team.pgpass"
    secret.write_text("*:*:*:ann:right-pass\n")
    secret.chmod(0o640)
    url = f"{password_server}&passfile={secret}"
    code, out = run(embedder, "team", "join", url, "--project", str(repo), "--user", "ann")
    assert code == 2 and f"{secret} is open to other users" in out, out
    secret.chmod(0o600)
    code, out = run(embedder, "team", "join", url, "--project", str(repo), "--user", "ann")
    assert code == 0, out


# -- 2. the person whose edit lost a conflict -------------------------------------------------


def test_the_member_whose_edit_lost_a_conflict_is_told(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    a, b = clients
    with shared_model(embedder):
        mid = a.lm.remember("The shop deploys at 10:00.", project=str(a.repo)).memories[0].id
    a.sync()
    b.sync()
    a.writer().edit(mid, content="The shop deploys at 11:00.")
    time.sleep(0.05)  # bob's edit is the later one: it wins at the same version
    b.writer().edit(mid, content="The shop deploys at 12:00.")
    a.sync()  # ann's version goes in first ...
    b.sync()  # ... bob's replaces it
    a.sync()  # ann pulls bob's text
    a.lm.refresh()
    assert a.lm.get(mid).content == "The shop deploys at 12:00."

    code, out = run(embedder, "--home", str(a.home), "team", "status", "--json")
    status = json.loads(out)
    assert code == 0 and status["conflicts"] >= 1
    assert [(x["id"], x["winner"]) for x in status["lost"]] == [(mid, "bob")]
    code, out = run(embedder, "--home", str(a.home), "team", "status")
    assert code == 0 and "lost         1 of your edit" in out and mid[:8] in out, out
    assert "lost a conflict to bob's" in out
    code, out = run(embedder, "--home", str(a.home), "show", mid)
    assert code == 0 and "team       your edit (version " in out, out
    assert "lost a conflict to bob's" in out and "in the team's history" in out
    code, out = run(embedder, "--home", str(a.home), "show", mid, "--json")
    assert json.loads(out)["team_lost"]["winner"] == "bob"

    # The winner is not told it lost; the tray's line tells the loser.
    assert b.lm.team_status(reach=False)["lost"] == []
    code, out = run(embedder, "--home", str(b.home), "show", mid)
    assert code == 0 and "lost a conflict" not in out
    from ui.app import team_text

    assert "1 of your edits lost a conflict" in team_text(a.lm.team_status(reach=False))

    # Ann edits again and her version goes in: the loss is behind her.
    a.writer().edit(mid, content="The shop deploys at 11:30.")
    a.sync()
    assert a.lm.team_status(reach=False)["lost"] == []


def test_an_edit_refused_on_arrival_is_told_with_the_winner_and_a_forget_clears_it(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    a, b = clients
    with shared_model(embedder):
        mid = a.lm.remember("The shop's standup is at 9:00.", project=str(a.repo)).memories[0].id
    a.sync()
    b.sync()
    a.writer().edit(mid, content="The shop's standup is at 9:15.")
    time.sleep(0.05)
    b.writer().edit(mid, content="The shop's standup is at 9:30.")
    b.sync()  # bob's later edit is there first: ann's loses as it arrives
    report = a.sync()
    assert report["lost"] == 1 and report["conflicts"] == 1
    assert [(x["id"], x["winner"]) for x in a.lm.team_status(reach=False)["lost"]] == [(mid, "bob")]
    b.writer().forget(mid)  # forgotten on the team: nothing left to tell of
    b.sync()
    a.sync()
    assert a.lm.team_status(reach=False)["lost"] == []


# -- 5. forgetting a team memory --------------------------------------------------------------


def test_forgetting_a_team_memory_says_what_the_server_keeps(
    clients: tuple[Client, Client], embedder: Embedder, tmp_path: Path
) -> None:
    a, _ = clients
    with shared_model(embedder):
        shared = a.lm.remember("The shop's admin door code is 4711.", project=str(a.repo))
        alone = a.lm.remember("A note of no project's.", project=str(tmp_path / "solo"))
    a.sync()
    a.service.release()  # the command line is the writer for its forget
    try:
        code, out = run(embedder, "--home", str(a.home), "forget", shared.memories[0].id, "--yes")
        assert code == 0 and "erased from the data folder" in out, out
        assert "team's server" in out and "VACUUM FULL" in out and out.count("\n") == 1
        code, out = run(embedder, "--home", str(a.home), "forget", alone.memories[0].id, "--yes")
        assert code == 0 and "VACUUM FULL" not in out, out
    finally:
        a.service.acquire()


# -- 6. an opted-out project's lag ------------------------------------------------------------


def test_an_opted_out_project_is_not_reported_as_lag(
    clients: tuple[Client, Client], embedder: Embedder
) -> None:
    from lexmem.settings import load_settings, save_settings

    a, b = clients
    settings = load_settings(a.lm.paths)
    settings.capture.optout = [str(a.repo)]
    save_settings(a.lm.paths, settings)
    a.lm.settings.capture.optout = [str(a.repo)]
    with shared_model(embedder):
        for i in range(3):
            b.lm.remember(f"Bob's shop note number {i}.", project=str(b.repo))
    b.sync()
    a.sync()  # pulls nothing into the opted-out repository: its cursor stays
    code, out = run(embedder, "--home", str(a.home), "team", "status", "--json")
    status = json.loads(out)
    assert code == 0 and status["reachable"] is True, out
    assert status["lag_revisions"] == 0 and status["opted_out"] == [str(a.repo)]
    code, out = run(embedder, "--home", str(a.home), "team", "status")
    assert "lag          0 revisions" in out and "opted out: not synced" in out, out
