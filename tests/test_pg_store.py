"""The PostgreSQL backend's own promises, on a real server (``tests/pgfixture.py``): what
the conformance suite (``tests/test_store.py``) cannot say for every backend. A vector
query whose filter keeps few rows, forgetting that leaves no byte in the database's
files, a server that goes away, bulk import without the vector index, re-embedding that
switches at once, and tables in the local store's Arrow layout."""

from __future__ import annotations

import json
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import shared_model
from pgfixture import PgServer
from psycopg import sql
from store_backends import use_postgres

from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.errors import InvalidInputError, StoreDamagedError, StoreError, StoreIOError
from lexmem.models import Memory, MemoryLink, MemorySource, utcnow
from lexmem.store.postgres.store import PostgresStore
from lexmem.store.protocol import MemoryFilter
from lexmem.store.schema import (
    confidence_schema,
    links_schema,
    memory_schema,
    memory_to_row,
    table_schema,
)

DIM = 384
SPACE = "tests|384"


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs


def memories(vecs: np.ndarray, **fields: Any) -> list[Memory]:
    return [
        Memory(content=f"row {i}", embedding=[float(x) for x in v], **fields)
        for i, v in enumerate(vecs)
    ]


def open_store(home: Path, url: str, space: str = SPACE) -> PostgresStore:
    return PostgresStore(Paths(home), dim=DIM, space_id=space, url=url).open()


@pytest.fixture
def store(tmp_path: Path, pg_database: str) -> Iterator[PostgresStore]:
    s = open_store(tmp_path / "home", pg_database)
    yield s
    s.close()


def as_arrow(items: list[Memory]) -> pa.Table:
    return pa.Table.from_pylist([memory_to_row(m) for m in items], schema=memory_schema(DIM))


def no_links() -> pa.Table:
    return links_schema().empty_table()


def no_points() -> pa.Table:
    return confidence_schema().empty_table()


# --- vector queries -------------------------------------------------------------------


def test_a_filter_that_keeps_few_rows_still_gets_k_nearest(store: PostgresStore) -> None:
    """pgvector 0.6.2's HNSW scan yields at most ef_search rows and filters after the
    scan: a filter that keeps 1 % of 2,000 rows left a plain index scan with one or two.
    ``nearest`` gives the exact k nearest of the rows the filter admits."""
    vecs = unit_vectors(2000, seed=3)
    rare = set(range(0, 2000, 100))  # 20 rows
    items = [
        Memory(
            content=f"row {i}",
            embedding=[float(x) for x in v],
            source=MemorySource.CORRECTION if i in rare else MemorySource.EXPLICIT,
        )
        for i, v in enumerate(vecs)
    ]
    store.import_rows(as_arrow(items), no_links(), no_points())
    query = unit_vectors(1, seed=99)[0]
    flt = MemoryFilter(source=MemorySource.CORRECTION)
    # A planner that takes the index for the filtered query (as it does when its
    # estimates are off): every session of this database avoids sorting from now on.
    with store.db.tx() as cur:
        cur.execute("SELECT current_database()")
        (name,) = cur.fetchone() or ("",)
    with psycopg.connect(store.url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} SET enable_sort = off").format(sql.Identifier(name))
        )
    store.close()
    store = open_store(store.paths.home, store.url)

    # What a plain query through the index gives: fewer than k (the reason for the care).
    with store.db.tx() as cur:
        cur.execute(
            "SELECT id FROM lexmem.memories WHERE status = 'active' AND source = 'correction' "
            "ORDER BY embedding <=> %s::vector LIMIT 10",
            ("[" + ",".join(map(repr, query.tolist())) + "]",),
        )
        assert len(cur.fetchall()) < 10

    hits = store.nearest([float(x) for x in query], flt, 10)
    similarity = vecs @ query
    exact = sorted(rare, key=lambda i: -similarity[i])[:10]
    assert [h.id for h in hits] == [items[i].id for i in exact]
    assert [h.similarity for h in hits] == pytest.approx([similarity[i] for i in exact], abs=1e-5)
    # Deeper than HNSW's default ef_search (40), unfiltered.
    assert len(store.nearest([float(x) for x in query], MemoryFilter(), 100)) == 100
    store.close()


# --- forgetting -------------------------------------------------------------------------


def database_files(store: PostgresStore) -> list[Path]:
    """Every file of the store's database in the server's data folder (tables, TOAST,
    indexes, the system catalogs' own), after a checkpoint wrote out what was in memory."""
    with store.db.connection() as conn:
        conn.autocommit = True
        try:
            conn.execute("CHECKPOINT")
            data = conn.execute("SHOW data_directory").fetchone()
            oid = conn.execute(
                "SELECT oid FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        finally:
            conn.autocommit = False
    assert data and oid
    folder = Path(str(data[0])) / "base" / str(oid[0])
    return sorted(p for p in folder.iterdir() if p.is_file())


def holding(files: list[Path], needle: bytes) -> list[str]:
    return [p.name for p in files if needle in p.read_bytes()]


def test_forgetting_leaves_no_byte_of_the_text_in_the_database_files(
    store: PostgresStore,
) -> None:
    """The rows go with their links, confidence history, TOAST and index entries, and
    the neighbour's context that quoted them; the rewrite leaves none of their bytes in
    any file of the database (the write-ahead log is another matter: docs/team.md)."""
    rng = np.random.default_rng(5)
    secret = "quokkasecretword"
    # Incompressible and long: stored out of line, in the TOAST table.
    long_text = secret + " " + rng.bytes(6000).hex()
    vec = [float(x) for x in unit_vectors(1, seed=1)[0]]
    base = utcnow() - timedelta(hours=1)
    said = {"source": MemorySource.CONVERSATION, "session_id": "s1"}
    before = Memory(content="Which broker for billing?", embedding=vec, created_at=base, **said)
    short = Memory(
        content=f"The {secret} is kept here",
        embedding=vec,
        project=f"/w/{secret}-project",
        created_at=base + timedelta(minutes=1),
        **said,
    )
    long = Memory(content=long_text, embedding=vec, title=f"{secret} title")
    keep = Memory(content="Deploys go out on Thursdays", embedding=vec)
    store.store_many([before, short, long, keep])
    store.store_link(MemoryLink(short.id, long.id, f"{secret}_link"))
    store.record_confidence(long.id, 0.4)
    store.optimize()  # the planner's statistics sample values too
    needle = secret.encode()
    assert holding(database_files(store), needle)  # the scan sees the text while it is there
    context = {r["id"]: r["context"] for r in store.arrow_table("memories").to_pylist()}
    assert secret in context[before.id]

    assert store.delete_many([short.id, long.id]) == sorted([short.id, long.id])

    assert holding(database_files(store), needle) == []
    assert store.count() == 2 and store.get(keep.id).content == keep.content
    context = {r["id"]: r["context"] for r in store.arrow_table("memories").to_pylist()}
    assert context[before.id] is None  # its only neighbour is forgotten


def test_deleting_without_erase_leaves_the_rewrite_to_the_caller(store: PostgresStore) -> None:
    vec = [float(x) for x in unit_vectors(1, seed=2)[0]]
    m = Memory(content="wombatsecretword stays in the pages", embedding=vec)
    store.store(m)
    assert store.delete_many([m.id], erase=False) == [m.id]
    assert holding(database_files(store), b"wombatsecretword")  # dead, not yet rewritten
    store.erase()
    assert holding(database_files(store), b"wombatsecretword") == []


# --- a server that goes away, a damaged schema ---------------------------------------------


@pytest.fixture
def own_server() -> Iterator[Any]:
    """A PostgreSQL of this test's own, to stop under a store (the run's server stays)."""
    import pgserver

    root = Path(tempfile.mkdtemp(prefix="lexmem-pg-gone-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        handle = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        yield handle
    finally:
        handle.cleanup()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_a_server_that_goes_away_is_a_one_line_store_io_error(
    tmp_path: Path, own_server: Any, embedder: Embedder
) -> None:
    url = str(own_server.get_uri())
    store = open_store(tmp_path / "home", url)
    try:
        store.store(Memory(content="before", embedding=[0.05] * DIM))
        own_server.cleanup()  # the server stops

        with pytest.raises(StoreIOError) as err:
            store.count()
        assert "\n" not in str(err.value) and "cannot be reached" in str(err.value)
        assert isinstance(err.value.__cause__, psycopg.Error)
    finally:
        store.close()

    with pytest.raises(StoreIOError) as err:
        open_store(tmp_path / "other", url)
    assert "\n" not in str(err.value)

    home = tmp_path / "cli"
    use_postgres(home, url)
    with shared_model(embedder):
        result = CliRunner().invoke(cli, ["--home", str(home), "list"])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("lexmem: error: the store could not be read or written (")
    assert "Traceback" not in result.output


def test_a_missing_table_is_a_damaged_store_in_one_line(
    tmp_path: Path, pg_database: str, embedder: Embedder
) -> None:
    store = open_store(tmp_path / "home", pg_database)
    try:
        with store.db.tx() as cur:
            cur.execute("DROP TABLE lexmem.memory_links")
        with pytest.raises(StoreDamagedError) as err:
            store.all_links()
        assert "\n" not in str(err.value) and "memory_links" in str(err.value)
    finally:
        store.close()


# --- bulk import, re-embedding, Arrow ---------------------------------------------------


def test_import_rows_keeps_every_row_as_exported_and_builds_the_index_after(
    tmp_path: Path, store: PostgresStore, pg_server: PgServer
) -> None:
    vecs = unit_vectors(300, seed=11)
    items = memories(vecs, metadata={"k": "v", "n": 1})
    items[0] = items[0].replace(source=MemorySource.CONVERSATION, session_id="s")
    items[1] = items[1].replace(source=MemorySource.CONVERSATION, session_id="s")
    store.store_many(items)
    store.store_link(MemoryLink(items[0].id, items[1].id, "relates_to", 0.3))
    exported = {
        n: store.arrow_table(n, [f.name for f in s])
        for n, s in (("memories", memory_schema(DIM)), ("links", links_schema()),
                     ("confidence", confidence_schema()))
    }  # fmt: skip

    with pg_server.new_database() as url:
        other = open_store(tmp_path / "other", url)
        try:
            counts = other.import_rows(
                exported["memories"], exported["links"], exported["confidence"]
            )
            assert counts == (300, 1, 300)
            for name, table in exported.items():
                again = other.arrow_table(name, table.column_names)
                assert again.sort_by("id").equals(table.sort_by("id")), name
            # The derived context is rebuilt; the vector index is back.
            assert other.arrow_table("memories", ["id", "context"]).sort_by(
                "id"
            ) == store.arrow_table("memories", ["id", "context"]).sort_by("id")
            with other.db.tx() as cur:
                cur.execute("SELECT to_regclass('lexmem.memories_embedding_idx') IS NOT NULL")
                assert cur.fetchone() == (True,)

            # All or nothing: an id already there, or a link to no memory, adds nothing.
            fresh = memories(unit_vectors(250, seed=12))
            with pytest.raises(InvalidInputError, match="already exist"):
                other.import_rows(as_arrow([*fresh, items[5]]), no_links(), no_points())
            dangling = pa.Table.from_pylist(
                [{"id": "l1", "from_id": fresh[0].id, "to_id": "nowhere", "link_type": "x",
                  "strength": 0.5, "created_at": utcnow()}],
                schema=links_schema(),
            )  # fmt: skip
            with pytest.raises(InvalidInputError):
                other.import_rows(as_arrow(fresh), dangling, no_points())
            assert other.count() == 300 and other.existing_ids([fresh[0].id]) == set()
            with other.db.tx() as cur:
                cur.execute("SELECT to_regclass('lexmem.memories_embedding_idx') IS NOT NULL")
                assert cur.fetchone() == (True,)
        finally:
            other.close()


def test_reembed_switches_every_vector_at_once_and_records_the_space(
    tmp_path: Path, pg_database: str
) -> None:
    old = open_store(tmp_path / "home", pg_database)
    items = memories(unit_vectors(20, seed=21))
    old.store_many(items)  # stays open: another process's view

    store = open_store(tmp_path / "home", pg_database, space="another model|384")
    try:
        assert store.needs_reembed and store.stored_space == SPACE

        def new_vector(text: str) -> list[float]:
            return [float(x) for x in unit_vectors(1, seed=len(text) + 1000)[0]]

        calls = 0

        def failing(texts: list[str]) -> list[list[float]]:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RuntimeError("the model went away")
            return [new_vector(t) for t in texts]

        with pytest.raises(RuntimeError):
            store.reembed(failing, batch=8)
        assert store.needs_reembed
        assert store.get(items[0].id).embedding == items[0].embedding  # the old ones stay

        done = store.reembed(lambda texts: [new_vector(t) for t in texts], batch=8)
        assert done == 20 and not store.needs_reembed
        assert store.get(items[3].id).embedding == new_vector(items[3].content)
        hits = store.nearest(new_vector(items[3].content), MemoryFilter(), 1)
        assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    finally:
        store.close()
    again = open_store(tmp_path / "home", pg_database, space="another model|384")
    try:
        assert again.stored_space == "another model|384" and not again.needs_reembed
    finally:
        again.close()
    try:
        assert not old.needs_reembed  # what it saw when it opened
        old.refresh()
        assert old.stored_space == "another model|384" and old.needs_reembed
    finally:
        old.close()


def test_arrow_tables_have_the_local_stores_columns(store: PostgresStore) -> None:
    a, b = memories(unit_vectors(2, seed=31), metadata={"b": 1, "a": [1, 2]})
    store.store_many([a, b])
    store.store_link(MemoryLink(a.id, b.id, "depends_on"))
    assert store.arrow_table("memories").schema == table_schema(DIM)
    assert store.arrow_table("links").schema == links_schema()
    assert store.arrow_table("confidence").schema == confidence_schema()
    row = store.arrow_table("memories").to_pylist()[0]
    assert row["metadata"] == json.dumps({"a": [1, 2], "b": 1}, sort_keys=True)
    assert store.arrow_table("memories", ["vector"]).column("vector")[0].as_py() == pytest.approx(
        a.embedding if row["id"] == a.id else b.embedding
    )
    with pytest.raises(InvalidInputError, match="no column"):
        store.arrow_table("memories", ["nope"])
    assert {"memories", "links", "confidence", "audit"} <= set(store.list_tables())
    assert store.versions_on_disk() == 1 and store.has_vector_index()
    assert not store.needs_vector_index()


def test_times_read_back_in_utc_and_a_time_without_a_zone_is_taken_as_utc(
    store: PostgresStore,
) -> None:
    from datetime import UTC, datetime

    naive = datetime(2024, 1, 2, 3, 4, 5, 6)
    m = Memory(content="x", embedding=[0.1] * DIM, created_at=naive)
    store.store(m)
    got = store.get(m.id)
    assert got.created_at == naive.replace(tzinfo=UTC) and got.created_at.tzinfo is UTC
    assert got.last_accessed_at == m.last_accessed_at and got.last_accessed_at.tzinfo is UTC
    assert store.arrow_table("memories", ["created_at"]).schema[0].type.tz == "UTC"


def test_reembed_into_a_model_of_another_dimension(tmp_path: Path, pg_database: str) -> None:
    old = open_store(tmp_path / "home", pg_database)
    items = memories(unit_vectors(5, seed=41))
    old.store_many(items)
    old.close()
    small = PostgresStore(Paths(tmp_path / "home"), dim=8, space_id="small|8", url=pg_database)
    small.open()
    try:
        assert small.needs_reembed
        assert small.reembed(lambda texts: [[1.0] + [0.0] * 7 for _ in texts]) == 5
        assert not small.needs_reembed
        assert small.get(items[0].id).embedding == [1.0] + [0.0] * 7
        small.store(Memory(content="new", embedding=[0.0, 1.0] + [0.0] * 6))
        assert [h.content for h in small.nearest([0.0, 1.0] + [0.0] * 6, MemoryFilter(), 1)] == [
            "new"
        ]
    finally:
        small.close()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_the_lens_reads_and_a_lance_export_round_trips_through_the_team_database(
    tmp_path: Path, pg_server: PgServer, embedder: Embedder, fmt: str
) -> None:
    """The DuckDB lens and export read the team database's tables as the local store's;
    a local store's export imports into the team database and back, every row alike."""
    from lexmem.api import Lexmem
    from lexmem.store.lens import export_store, import_store, stats

    local = Lexmem.open(tmp_path / "local", embedder=embedder)
    try:
        a = local.remember("The billing service uses PostgreSQL 16.").memories[0]
        b = local.remember("Deploys go out on Thursdays.").memories[0]
        local.store.store_link(MemoryLink(a.id, b.id, "relates_to", 0.7))
        local.store.record_confidence(a.id, 0.25)
        export_store(local.store, tmp_path / "out", fmt)
        expected = {n: local.store.arrow_table(n) for n in ("memories", "links", "confidence")}
    finally:
        local.close()

    with pg_server.new_database() as url:
        team = open_store(tmp_path / "team", url, space=embedder.space_id)
        try:
            counts = import_store(team, tmp_path / "out")
            assert counts == {"memories": 2, "links": 1, "confidence": 3, "needs_reembed": 0,
                              "skipped_memories": 0, "skipped_links": 0, "skipped_confidence": 0}  # fmt: skip
            for name, table in expected.items():
                columns = [c for c in table.column_names if c != "context"]
                again = team.arrow_table(name, columns).sort_by("id")
                assert again.equals(table.select(columns).sort_by("id")), name
            figures = stats(team)
            assert figures["memories"] == 2 and figures["links"] == 1
            assert figures["confidence_points"] == 3 and figures["vector_index"] is True
            export_store(team, tmp_path / "again", fmt)
        finally:
            team.close()
    back = Lexmem.open(tmp_path / "back", embedder=embedder)
    try:
        import_store(back.store, tmp_path / "again")
        for name, table in expected.items():
            assert back.store.arrow_table(name).sort_by("id").equals(table.sort_by("id")), name
    finally:
        back.close()


def test_a_role_that_cannot_rewrite_the_tables_fails_the_erasure_loudly(
    tmp_path: Path, store: PostgresStore
) -> None:
    """VACUUM does not refuse a table a role does not own: it warns and skips it. The
    erasure says so instead of passing with the text still in the files."""
    vec = [float(x) for x in unit_vectors(1, seed=51)[0]]
    m = Memory(content="numbatsecretword", embedding=vec)
    role = f"lexmem_clerk_{m.id[:8]}"
    with psycopg.connect(store.url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA lexmem TO {}").format(sql.Identifier(role)))
        for kind in ("TABLES", "SEQUENCES", "FUNCTIONS"):  # row-level security's functions
            admin.execute(
                sql.SQL(f"GRANT ALL ON ALL {kind} IN SCHEMA lexmem TO {{}}").format(
                    sql.Identifier(role)
                )
            )
    clerk = open_store(tmp_path / "clerk", psycopg.conninfo.make_conninfo(store.url, user=role))
    try:
        # Its own memory: row-level security shows a role the rows it owns.
        clerk.store(m)
        with pytest.raises(StoreError, match="did not rewrite a table") as err:
            clerk.delete(m.id)
        assert "\n" not in str(err.value)
        assert clerk.get_optional(m.id) is None  # the rows went; their bytes wait for a rewrite
        assert holding(database_files(store), b"numbatsecretword")
    finally:
        clerk.close()
        with psycopg.connect(store.url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_an_import_with_metadata_that_is_not_json_adds_nothing(store: PostgresStore) -> None:
    items = memories(unit_vectors(2, seed=61))
    table = as_arrow(items)
    metadata = pa.array(['{"ok": 1}', "{not json"], type=pa.string())
    table = table.set_column(table.schema.get_field_index("metadata"), "metadata", metadata)
    with pytest.raises(InvalidInputError, match="not JSON"):
        store.import_rows(table, no_links(), no_points())
    assert store.count() == 0


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://localhost:55432/team?hostaddr=192.0.2.2",
        "host=localhost hostaddr=192.0.2.2 dbname=lexmem",
        "postgresql://db.example.com/lexmem?sslmode=require",
    ],
)
def test_a_store_on_another_machine_without_checked_tls_is_refused_before_connecting(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lexmem.errors import ConfigError

    def no_connection(*args: Any, **kw: Any) -> Any:
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(psycopg, "connect", no_connection)
    monkeypatch.setattr(psycopg.Connection, "connect", no_connection)
    with pytest.raises(ConfigError, match="without checked TLS"):
        PostgresStore(Paths(tmp_path), dim=DIM, space_id="s", url=url).open()
