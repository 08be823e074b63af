"""Team mode, nothing lost and nothing leaked: the address libpq really connects to is
judged before any connection, the person whose edit lost a conflict is told, a machine
without a keyring can still join, a wrong password says so, forgetting a team memory says
what the server keeps, and an opted-out project's lag is not reported as lag.

Run as a person would: the command line through click's runner, the real writer, a real
PostgreSQL (the tests' server, and one of its own that asks for passwords).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import shared_model
from pgfixture import pg_available
from test_team_sync import team_url

from lexmem.config import Paths
from lexmem.embedder import Embedder

__all__ = ["team_url"]  # the fixture, imported for the tests here

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
