"""The tests' PostgreSQL (``tests/pgfixture.py``): a Unix socket and no TCP address, a
fresh database per test, and without pgserver a skip that says why (a failure under CI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from pgfixture import PgServer

ROOT = Path(__file__).resolve().parent.parent


def test_the_server_listens_on_its_unix_socket_only(pg_server: PgServer, pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as c:
        assert c.execute("SHOW listen_addresses").fetchone() == ("",)
        (sockets,) = c.execute("SHOW unix_socket_directories").fetchone() or ("",)
        assert c.info.host == sockets
        assert Path(sockets).is_dir()
        assert c.execute("SELECT count(*) FROM pg_class WHERE relname = 'memories'").fetchone() == (
            0,
        )
        # pgvector ships with the server (the version docs/team.md was written against).
        row = c.execute("SELECT version FROM pg_available_extension_versions WHERE name = 'vector'")
        assert row.fetchall() == [("0.6.2",)]


def test_each_test_gets_a_database_of_its_own(pg_server: PgServer, pg_database: str) -> None:
    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        names = {r[0] for r in admin.execute("SELECT datname FROM pg_database").fetchall()}
    assert pg_database.split("?", maxsplit=1)[0].rsplit("/", 1)[1] in names
    with pg_server.new_database() as other:
        assert other != pg_database
        with psycopg.connect(other, autocommit=True) as c:
            c.execute("CREATE TABLE t (x integer)")
    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        left = {r[0] for r in admin.execute("SELECT datname FROM pg_database").fetchall()}
    assert left == names


@pytest.mark.parametrize("ci", [False, True])
def test_without_pgserver_the_tests_skip_and_say_why_but_fail_under_ci(
    ci: bool, tmp_path: Path
) -> None:
    blocked = tmp_path / "blocked" / "pgserver"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        'raise ImportError("no pgserver in this test", name="pgserver")\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(blocked.parent), str(ROOT)])
    if ci:
        env["CI"] = "true"
    out = subprocess.run(
        [
            sys.executable, "-m", "pytest", "tests/test_pg_migrations.py", "-q", "-rs",
            "-p", "no:cacheprovider", "-k", "empty_database",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if ci:
        assert out.returncode == 1, out.stdout[-3000:]
        assert "CI=true but no PostgreSQL for the tests" in out.stdout
    else:
        assert out.returncode == 0, out.stdout[-3000:]
        assert "1 skipped" in out.stdout
    assert "pgserver is not installed (pip install -e '.[team]')" in out.stdout
