"""A local team server in one command (lexmem.store.postgres.local): started on a Unix
socket in its own folder with pgvector in its ``lexmem`` database, found again when
already running, stopped with its data kept."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgfixture import pg_available

from lexmem.store.postgres.local import default_folder, start, stop


@pytest.fixture
def folder() -> Iterator[Path]:
    pg_available()
    # Not pytest's tmp_path: as root, pgserver opens every folder above its own.
    root = Path(tempfile.mkdtemp(prefix="lexmem-local-"))
    try:
        yield root / "server"
    finally:
        stop(root / "server")
        shutil.rmtree(root, ignore_errors=True)


def test_a_local_server_starts_with_pgvector_listens_on_its_socket_only_and_keeps_its_data(
    folder: Path,
) -> None:
    import psycopg

    url = start(folder)
    assert f"host={folder}" in url and "@/lexmem" in url
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (7)")
    assert start(folder) == url  # already running: the same server
    assert stop(folder) is True
    assert stop(folder) is False  # nothing running there any more
    with psycopg.connect(start(folder)) as conn:
        assert conn.execute("SELECT n FROM kept").fetchone() == (7,)


def test_the_default_folder_is_beside_the_data_folder_never_inside_it(tmp_path: Path) -> None:
    home = tmp_path / "lexmem"
    assert default_folder(home) == tmp_path / "lexmem-team-server"


def test_a_person_tries_team_memory_from_the_command_line(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lexmem team server start` prints a URL; `team admin` makes a team with a member;
    `team join` as that member works; `team server stop` stops it, and says so once."""
    from click.testing import CliRunner

    from lexmem.cli import cli

    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LEXMEM_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def lexmem(*args: str) -> str:
        out = runner.invoke(cli, list(args), catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return out.stdout

    url = lexmem("team", "server", "start", "--folder", str(folder)).strip()
    assert url.startswith("postgresql://") and str(folder) in url
    said = lexmem("team", "admin", url, "--team", "devs", "--share", "shop", "--member", "ann")
    assert "'shop'" in said and "ann" in said
    assert "as 'shop'" in lexmem("team", "join", url, "--user", "ann")
    assert "reachable" in lexmem("team", "status")
    assert lexmem("team", "server", "stop", "--folder", str(folder)).startswith("Stopped")
    assert lexmem("team", "server", "stop", "--folder", str(folder)).startswith("No team")
