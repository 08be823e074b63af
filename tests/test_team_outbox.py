"""Team mode on the client without a server: the [team] settings, the outbox fed at the
store's choke point (what is queued, what never is), and the CLI's one-line refusals."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import shared_model
from test_service import SECRETS, Agent

from lexmem.api import Lexmem
from lexmem.cli import cli
from lexmem.config import Paths, team_url_problem
from lexmem.embedder import Embedder
from lexmem.errors import ConfigError, InvalidInputError
from lexmem.models import MemoryContext, MemorySource
from lexmem.service.client import remember_through_inbox
from lexmem.service.writer import CaptureService
from lexmem.settings import load_settings, save_settings
from lexmem.team.outbox import Outbox, TeamState
from lexmem.team.recorder import SharingStore

# A server on this machine's Unix socket: no TLS needed, and nothing listens there (the
# outbox is fed without a connection).
SOCKET_URL = "postgresql:///lexmem?host=/tmp/lexmem-no-server-here"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def team_lm(data_home: Path, embedder: Embedder, repo: Path) -> Iterator[Lexmem]:
    """A core whose data folder shares the repository ``shop`` with a team."""
    paths = Paths(data_home)
    paths.ensure()
    settings = load_settings(paths)
    settings.team.url = SOCKET_URL
    settings.team.projects = {str(repo): "shop"}
    save_settings(paths, settings)
    core = Lexmem.open(data_home, embedder=embedder)
    yield core
    core.close()


def outbox_files(home: Path) -> list[Path]:
    return sorted((home / "team" / "outbox").glob("*.json"))


def outbox_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in outbox_files(home))


# -- the address ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://ann:hunter2@db.example.com/team?sslmode=verify-full", "password"),
        ("postgresql://db.example.com/team?sslmode=verify-full&password=hunter2", "password"),
        ("host=db.example.com dbname=team password=hunter2 sslmode=verify-full", "password"),
        ("postgresql://db.example.com/team", "TLS"),
        ("postgresql://db.example.com/team?sslmode=require", "TLS"),
        ("postgresql://db.example.com/team?sslmode=prefer", "TLS"),
        ("host=db.example.com dbname=team", "TLS"),
        ("mysql://db.example.com/team", "postgresql://"),
        ("postgresql://db.example.com/team?sslmode=verify-full", None),
        ("postgresql://db.example.com/team?sslmode=require&sslrootcert=/etc/ca.pem", None),
        ("postgresql://localhost/team", None),
        ("postgresql://127.0.0.1:5433/team", None),
        ("postgresql://[::1]/team", None),
        ("postgresql:///team?host=/run/postgresql", None),
        ("host=/run/postgresql dbname=team", None),
        # libpq connects to hostaddr, whatever host says
        ("postgresql://localhost:55432/team?hostaddr=192.0.2.2", "TLS"),
        ("host=localhost hostaddr=192.0.2.2 dbname=team", "TLS"),
        ("host=localhost hostaddr=127.0.0.1 dbname=team", None),
        ("", None),
    ],
)
def test_the_team_address_needs_checked_tls_off_this_machine_and_never_a_password(
    url: str, problem: str | None
) -> None:
    found = team_url_problem(url)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and "\n" not in found
        assert "hunter2" not in found


def test_a_settings_file_with_a_team_password_is_refused_untouched(data_home: Path) -> None:
    paths = Paths(data_home)
    paths.ensure()
    text = '[team]\nurl = "postgresql://ann:hunter2@localhost/team"\n'
    paths.settings.write_text(text)
    with pytest.raises(ConfigError, match=r"team\.url must not carry a password"):
        load_settings(paths)
    assert paths.settings.read_text() == text
    paths.settings.write_text("[team]\npoll_seconds = 0\n")
    with pytest.raises(ConfigError, match="poll_seconds must be between"):
        load_settings(paths)


def test_saving_a_team_address_with_a_password_is_refused(data_home: Path) -> None:
    paths = Paths(data_home)
    paths.ensure()
    settings = load_settings(paths)
    settings.team.url = "postgresql://ann:hunter2@localhost/team"
    with pytest.raises(ConfigError, match="password"):
        save_settings(paths, settings)
    assert not paths.settings.exists() or "hunter2" not in paths.settings.read_text()


# -- the outbox -----------------------------------------------------------------------------


def test_changes_to_a_shared_memory_coalesce_into_one_private_file(
    team_lm: Lexmem, data_home: Path, repo: Path
) -> None:
    assert isinstance(team_lm.store, SharingStore)
    mid = (
        team_lm.remember("We deploy the shop from the main branch.", project=str(repo))
        .memories[0]
        .id
    )
    team_lm.remember("A general note that belongs to no project.")
    team_lm.remember("The other repository uses tabs.", project="/elsewhere/other")
    files = outbox_files(data_home)
    assert [f.name for f in files] == [f"{mid}.json"]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700
    first = json.loads(files[0].read_text())
    assert (first["version"], first["project"], first["deleted"]) == (1, "shop", False)
    assert first["row"]["project"] == "shop" and len(first["row"]["vector"]) == 384
    team_lm.pin(mid)
    team_lm.archive(mid)
    team_lm.edit(mid, content="We deploy the shop from the release branch.")
    files = outbox_files(data_home)
    assert len(files) == 1
    latest = json.loads(files[0].read_text())
    assert latest["version"] == 4  # every change is a version; the file holds the last
    assert latest["row"]["pinned"] is True and latest["row"]["status"] == "archived"
    assert "release branch" in latest["row"]["content"]
    assert team_lm.is_shared(team_lm.get(mid))
    assert team_lm.team_status(reach=False)["outbox"] == 1


def test_supersede_and_links_queue_both_memories(
    team_lm: Lexmem, data_home: Path, repo: Path
) -> None:
    old = team_lm.remember("The shop's API listens on port 8080.", project=str(repo)).memories[0].id
    Outbox(Paths(data_home)).drop(old)
    _, new = team_lm.supersede(old, with_text="The shop's API listens on port 9090.")
    assert {f.stem for f in outbox_files(data_home)} == {old, new}
    row = json.loads((data_home / "team" / "outbox" / f"{old}.json").read_text())["row"]
    assert row["status"] == "superseded" and row["superseded_by"] == new
    links = json.loads((data_home / "team" / "outbox" / f"{new}.json").read_text())["links"]
    assert [(lk["to_id"], lk["link_type"]) for lk in links] == [(old, "supersedes")]


def test_forgetting_queues_a_deletion_that_holds_no_text(
    team_lm: Lexmem, data_home: Path, repo: Path
) -> None:
    marker = "QUOKKA-PIPELINE-7731"
    mid = team_lm.remember(f"The {marker} runs nightly.", project=str(repo)).memories[0].id
    assert marker.encode() in outbox_bytes(data_home)
    team_lm.forget(mid)
    entries = Outbox(Paths(data_home)).entries()
    assert [(e.memory_id, e.deleted, e.row, e.version) for e in entries] == [(mid, True, None, 2)]
    assert marker.encode() not in outbox_bytes(data_home)
    assert marker.encode() not in (data_home / "team" / "state.db").read_bytes()


def test_what_came_from_the_team_is_never_queued_back(
    team_lm: Lexmem, data_home: Path, repo: Path
) -> None:
    store = team_lm.store
    assert isinstance(store, SharingStore)
    mem = team_lm.encoder.encode_classified(
        "Pulled: the shop uses Postgres 16.",
        team_lm.classify("Pulled: the shop uses Postgres 16."),
        MemoryContext(source=MemorySource.EXPLICIT, project=str(repo)),
    )
    with store.quiet():
        store.store_many(mem)
        store.set_pinned(mem[0].id, True)
    assert outbox_files(data_home) == []


def test_an_opted_out_repository_is_never_queued_nor_joined(
    team_lm: Lexmem, data_home: Path, repo: Path
) -> None:
    settings = load_settings(team_lm.paths)
    settings.capture.optout = [str(repo)]
    save_settings(team_lm.paths, settings)
    team_lm.settings.capture.optout = [str(repo)]
    store = team_lm.store
    assert isinstance(store, SharingStore)
    mem = team_lm.encoder.encode_classified(
        "Opted out: the shop's secret roadmap.",
        team_lm.classify("Opted out: the shop's secret roadmap."),
        MemoryContext(source=MemorySource.EXPLICIT, project=str(repo)),
    )
    store.store_many(mem)  # what a capture in flight would write
    store.set_pinned(mem[0].id, True)
    assert outbox_files(data_home) == []
    with pytest.raises(InvalidInputError, match="opted out"):
        team_lm.team_join(SOCKET_URL, project=str(repo), team_name="shop2")


def test_a_secret_in_a_capture_or_a_remember_never_reaches_the_outbox(
    data_home: Path, embedder: Embedder, repo: Path
) -> None:
    paths = Paths(data_home)
    paths.ensure()
    settings = load_settings(paths)
    settings.team.url = SOCKET_URL
    settings.team.projects = {str(repo): "shop"}
    save_settings(paths, settings)
    core = Lexmem.open(data_home, embedder=embedder)
    service = CaptureService(core)
    service.acquire()
    try:
        a = Agent(repo)  # a debugging session whose prompt, output and reply hold secrets
        a.prompt(
            f"The login test is failing with token {SECRETS[0]}, can you fix it? "
            "Let's go with JWT access tokens instead of sessions."
        )
        a.bash(
            "pytest -q tests/test_api.py",
            f"FAILED tests/test_api.py::test_login - KeyError: 'token' {SECRETS[1]}\n1 failed",
            failed=True,
        )
        a.edit("src/api.py", "payload['token']", "payload['access_token']")
        a.bash("pytest -q tests/test_api.py", "12 passed in 0.51s")
        a.reply(
            "The login test failed because the token key was renamed to access_token; I "
            f"updated src/api.py to read access_token (the key {SECRETS[2]} was unused)."
        )
        a.end()
        assert service.drain().saved >= 2
    finally:
        service.release()
    with shared_model(embedder):
        done = remember_through_inbox(
            core, f"The staging key is {SECRETS[2]}; staging deploys at noon.", project=str(repo)
        )
    assert done.memories
    entries = Outbox(paths).entries()
    assert len(entries) >= 3  # the capture's memories and the remembered one
    assert all(e.project == "shop" for e in entries)
    data = outbox_bytes(data_home)
    assert b"[REDACTED:" in data and b"access_token" in data
    for secret in SECRETS:
        assert secret.encode() not in data
    core.close()


# -- the command line -------------------------------------------------------------------------


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.output


def test_join_refuses_a_password_in_the_address_in_one_line_and_keeps_nothing(
    data_home: Path, embedder: Embedder, repo: Path
) -> None:
    with shared_model(embedder):
        code, out = run("team", "join", "postgresql://ann:hunter2@localhost/team",
                        "--project", str(repo))  # fmt: skip
    assert code == 2
    assert out.count("\n") == 1 and "must not carry a password" in out
    assert "hunter2" not in out
    settings = Paths(data_home).settings
    assert not settings.exists() or "hunter2" not in settings.read_text()


def test_join_refuses_a_remote_server_without_checked_tls(
    data_home: Path, embedder: Embedder, repo: Path
) -> None:
    with shared_model(embedder):
        code, out = run("team", "join", "postgresql://db.example.com/team", "--project", str(repo))
    assert code == 2 and out.count("\n") == 1 and "sslmode=verify-full" in out


def test_status_and_leave_outside_a_team(data_home: Path, embedder: Embedder) -> None:
    with shared_model(embedder):
        code, out = run("team", "status")
        assert code == 0 and "in no team" in out
        code, out = run("team", "status", "--json")
        assert code == 0 and json.loads(out)["joined"] is False
        code, out = run("team", "leave")
        assert code == 2 and out.count("\n") == 1 and "in no team" in out
        code, out = run("team", "sync")
        assert code == 2 and "in no team" in out


def test_state_keeps_versions_and_cursors_only_raised(data_home: Path) -> None:
    state = TeamState(Paths(data_home))
    state.set_versions({"m1": (3, "shop")})
    state.set_versions({"m1": (2, "shop")})
    assert state.version("m1") == 3 and state.project_of("m1") == "shop"
    state.set_cursor("shop", 10)
    state.set_cursor("shop", 4)
    assert state.cursor("shop") == 10
    assert stat.S_IMODE(state.path.stat().st_mode) == 0o600
