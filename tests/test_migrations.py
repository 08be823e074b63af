"""Data that survives upgrades: a data folder written by lexmem's earliest layout
(``tests/data/layout_v1/``, made by ``tests/data/make_layout_v1.py``) opened by this one.

The folder is copied to the test's own data folder and opened for real: real LanceDB,
the real model, the real CLI. What it held is read straight from its tables before the
migration, and must be there, value for value, after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lancedb
import pytest
from click.testing import CliRunner
from conftest import shared_model

from lexmem import config, settings
from lexmem.api import Lexmem
from lexmem.cli import cli
from lexmem.embedder import Embedder
from lexmem.errors import ConfigError, StoreError
from lexmem.models import ConfidencePoint, MemoryLink
from lexmem.store import migrations
from lexmem.store.journal import Journal
from lexmem.store.lance import _session_contexts
from lexmem.store.migrations import Step
from lexmem.store.schema import STORE_SCHEMA_VERSION, memory_from_row

FIXTURE = Path(__file__).resolve().parent / "data" / "layout_v1"
TABLES = ("memories_v1", "links", "confidence", "sessions", "audit", "processed")


@pytest.fixture
def old_home(data_home: Path) -> Path:
    """The layout-1 folder, copied as a user's data folder would be (owner-only modes:
    git keeps neither, and lexmem would rightly complain)."""
    shutil.copytree(FIXTURE, data_home)
    for root, _dirs, files in os.walk(data_home):
        os.chmod(root, 0o700)
        for name in files:
            os.chmod(Path(root) / name, 0o600)
    return data_home


def raw_rows(home: Path, table: str) -> list[dict[str, Any]]:
    """A table's rows as the storage engine holds them, sorted by their first column."""
    t = lancedb.connect(str(home / "store")).open_table(table)
    rows: list[dict[str, Any]] = t.search().limit(None).to_list()
    key = t.schema.names[0]
    return sorted(rows, key=lambda r: r[key])


def file_hashes(home: Path) -> dict[str, str]:
    """Every file of the store and the settings, by path: what "untouched" means."""
    out = {}
    for path in sorted([*home.joinpath("store").rglob("*"), home / "settings.toml"]):
        if path.is_file():
            out[str(path.relative_to(home))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def meta(home: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "store" / "meta.json").read_text())
    return data


@pytest.fixture
def shared_cli(embedder: Embedder) -> Iterator[None]:
    """The CLI in-process, with the test run's loaded model (each command would load
    its own: ~0.5 s)."""
    with shared_model(embedder):
        yield


def test_the_fixture_is_the_old_layout() -> None:
    """What the rest of this file relies on: the committed folder really is layout 1."""
    assert meta(FIXTURE)["schema_version"] == 1 < STORE_SCHEMA_VERSION
    assert (
        "context"
        not in lancedb.connect(str(FIXTURE / "store")).open_table("memories_v1").schema.names
    )
    assert "schema_version" not in (FIXTURE / "settings.toml").read_text()
    assert all(len(raw_rows(FIXTURE, t)) >= 2 for t in TABLES)


def test_an_old_folder_opens_with_every_row_intact(old_home: Path, embedder: Embedder) -> None:
    before = {t: raw_rows(old_home, t) for t in TABLES}
    with Lexmem.open(old_home, embedder=embedder) as lm:
        assert meta(old_home)["schema_version"] == STORE_SCHEMA_VERSION
        assert not (old_home / "migrations").exists()  # the snapshot went with success

        memories = before["memories_v1"]
        assert lm.store.count() == len(memories) == 9
        for row in memories:
            assert lm.store.get(row["id"]) == memory_from_row(row)

        assert sorted(lm.store.all_links(), key=lambda lk: lk.id) == [
            MemoryLink(
                r["from_id"], r["to_id"], r["link_type"], r["strength"], r["id"], r["created_at"]
            )
            for r in before["links"]
        ]
        assert sorted(lm.store.all_confidence(), key=lambda p: p.id) == [
            ConfidencePoint(r["memory_id"], r["confidence"], r["recorded_at"], r["id"])
            for r in before["confidence"]
        ]

        journal = Journal(lm.store)
        sessions = {s.id: s for s in journal.sessions(limit=100)}
        assert sorted(sessions) == [r["id"] for r in before["sessions"]]
        for r in before["sessions"]:
            s = sessions[r["id"]]
            assert (s.agent, s.project, s.started_at, s.last_event_at, s.ended_at, s.status,
                    s.memory_count, s.event_count) == (
                r["agent"], r["project"], r["started_at"], r["last_event_at"], r["ended_at"],
                r["status"], r["memory_count"], r["event_count"])  # fmt: skip
        audit = {e.id: e for e in journal.audit_entries(limit=1000)}
        assert sorted(audit) == [r["id"] for r in before["audit"]]
        for r in before["audit"]:
            e = audit[r["id"]]
            assert (e.timestamp, e.session_id, e.candidate_id, e.decision, e.reason, e.confidence,
                    e.rule, e.kind, e.memory_id, e.title, e.project, e.text) == (
                r["timestamp"], r["session_id"], r["candidate_id"], r["decision"], r["reason"],
                r["confidence"], r["rule"], r["kind"], r["memory_id"], r["title"], r["project"],
                r["text"])  # fmt: skip
            assert e.metadata == (json.loads(r["metadata"]) if r["metadata"] else {})
        processed = [r["event_id"] for r in before["processed"]]
        assert journal.seen(processed) == set(processed)

        # The new column: filled from the sessions, as the store keeps it, and indexed.
        stored = lm.store.table().search().select(["id", "context"]).limit(None).to_list()
        expected = _session_contexts(memories)
        assert {r["id"]: r["context"] for r in stored} == expected
        assert sum(v is not None for v in expected.values()) >= 2  # the three-turn session
        assert any(i.columns == ["context"] for i in lm.store.table().list_indices())

        # The old settings layout, migrated with the store: same values, current layout.
        assert lm.settings.search.default_limit == 7
        assert lm.settings.capture.mode == "full"
        assert lm.settings.capture.optout == ["/home/dev/secret-repo"]
        assert lm.settings.embedding.model == "lexmem/all-MiniLM-L6-v2-int8"
    reread = settings.load_settings(config.Paths(old_home))
    assert reread.schema_version == config.SCHEMA_VERSION
    assert f"schema_version = {config.SCHEMA_VERSION}" in (old_home / "settings.toml").read_text()
    assert (reread.search.default_limit, reread.capture.mode) == (7, "full")


def test_the_cli_lists_searches_and_counts_a_migrated_folder(
    old_home: Path, shared_cli: None
) -> None:
    def run(*args: str) -> Any:
        result = CliRunner().invoke(cli, ["--home", str(old_home), *args, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    listed = run("list", "--status", "any")
    assert len(listed) == 9
    assert {m["id"] for m in listed} == {r["id"] for r in raw_rows(FIXTURE, "memories_v1")}
    hits = run("search", "which message broker did we pick for billing events")
    assert hits["hits"][0]["id"] in {f"{n:08d}-0000-4000-8000-{n:012d}" for n in (2, 3)}
    stats = run("stats")
    assert stats["memories"] == 9 and stats["links"] == 3 and stats["confidence_points"] == 12
    assert stats["by_status"] == {"active": 7, "superseded": 1, "archived": 1}
    assert meta(old_home)["schema_version"] == STORE_SCHEMA_VERSION


def _half_done_then_fail(store: Any) -> None:
    """The real first half of the step (a new column and its values), then a failure."""
    store.table().add_columns({"context": "CAST(NULL AS STRING)"})
    store.rebuild_context()
    raise RuntimeError("disk full")


def _disk_full(*args: Any, **kw: Any) -> None:
    raise ConfigError("cannot write settings (No space left on device)")


@pytest.mark.parametrize("failing", ["store step", "settings step"])
def test_a_failing_migration_leaves_every_file_as_it_was(
    old_home: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    before = file_hashes(old_home)
    if failing == "store step":
        half_done = Step("add the session context column", _half_done_then_fail)
        monkeypatch.setitem(migrations.STORE_STEPS, 1, half_done)
        step = "store 1 -> 2 (add the session context column)"
    else:  # the store's steps all succeed first: the settings' failure undoes them too
        monkeypatch.setattr(settings, "save_settings", _disk_full)
        step = "settings 0 -> 1 (move the top-level model into [embedding])"
    with pytest.raises(StoreError) as err:
        Lexmem.open(old_home, embedder=embedder)
    message = str(err.value)
    assert "\n" not in message
    assert f"failed at step '{step}'" in message
    snapshot = Path(message.rsplit("is in ", 1)[1].rstrip(")"))
    assert snapshot.parent == old_home / "migrations" and snapshot.is_dir()
    assert file_hashes(old_home) == before  # byte for byte, and nothing added to the store
    assert (snapshot / "settings.toml").read_bytes() == (old_home / "settings.toml").read_bytes()

    monkeypatch.undo()  # the next lexmem (or this one, fixed) migrates it after all
    with Lexmem.open(old_home, embedder=embedder) as lm:
        assert lm.store.count() == 9
    assert meta(old_home)["schema_version"] == STORE_SCHEMA_VERSION


def test_opening_twice_at_once_migrates_once(
    old_home: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[int] = []
    real = migrations.STORE_STEPS[1]

    def counted(store: Any) -> None:
        runs.append(1)
        real.run(store)

    monkeypatch.setitem(migrations.STORE_STEPS, 1, Step(real.name, counted))
    opened: list[Lexmem] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(Lexmem.open(old_home, embedder=embedder))
        except Exception as exc:  # noqa: BLE001 - the assertion below shows any of them
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(opened) == 2
    versions = {t: opened[0].store.table(t).version for t in ("memories", "links")}
    for lm in opened:
        lm.close()
    with Lexmem.open(old_home, embedder=embedder) as again:  # and a third time, later
        assert {t: again.store.table(t).version for t in versions} == versions
    assert runs == [1]


def test_a_folder_from_a_newer_lexmem_is_refused_untouched(
    old_home: Path, embedder: Embedder
) -> None:
    newer = dict(meta(old_home), schema_version=STORE_SCHEMA_VERSION + 1)
    (old_home / "store" / "meta.json").write_text(json.dumps(newer))
    before = file_hashes(old_home)
    with pytest.raises(StoreError, match="written by a newer lexmem") as err:
        Lexmem.open(old_home, embedder=embedder)
    assert "\n" not in str(err.value) and "meta.json" in str(err.value)
    assert file_hashes(old_home) == before
    assert not (old_home / "migrations").exists()

    (old_home / "settings.toml").write_text(f"schema_version = {config.SCHEMA_VERSION + 1}\n")
    with pytest.raises(ConfigError, match="newer lexmem"):
        Lexmem.open(old_home, embedder=embedder)
