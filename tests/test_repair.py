"""Damage and repair: ``lexmem doctor`` finds a truncated or overwritten table version,
``lexmem doctor --repair`` goes back to the last good one.

Real LanceDB in the test's data folder, real commits through the core; the damage is
done to the files themselves, as a crash or a failing disk would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import lexmem.store.lance as store_mod
from lexmem.api import Lexmem
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.locks import FileLock
from lexmem.store.repair import check_tables, repair_store

NEWEST = 2**64 - 1  # LanceDB names version N's manifest 2**64 - 1 - N: the newest sorts first


def memories_dir(home: Path) -> Path:
    name = json.loads((home / "store" / "meta.json").read_text())["memories_table"]
    return home / "store" / f"{name}.lance"


def newest_manifest(table_dir: Path) -> Path:
    return min((table_dir / "_versions").glob("*.manifest"), key=lambda p: int(p.stem))


def state(lm: Lexmem) -> dict[str, Any]:
    """What the store holds: every memory's fields, links and confidence points."""
    lm.refresh()
    return {
        "memories": {m.id: m.to_dict() for batch in lm.store.iter_all() for m in batch},
        "links": sorted((lk.id, lk.from_id, lk.to_id, lk.link_type) for lk in lm.store.all_links()),
        "confidence": sorted((p.id, p.memory_id, p.confidence) for p in lm.store.all_confidence()),
    }


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def overwrite(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes((b"\x8b\x00garbage" * (size // 9 + 1))[:size])


@pytest.fixture
def history(data_home: Path, embedder: Embedder) -> tuple[dict[str, Any], set[Path]]:
    """Three memories linked in a chain, committed one by one; then a fourth memory and its
    link. Returns what the store held before the fourth (the last good state) and the
    memories table's data files from before it."""
    with Lexmem.open(data_home, embedder=embedder) as lm:
        ids = [lm.remember(text).memories[0].id for text in (
            "The billing service uses PostgreSQL 16.",
            "Deploys go out on Thursdays after the stand-up.",
            "The catalogue is cached in Redis for ten minutes.",
        )]  # fmt: skip
        lm.link(ids[1], ids[0], "relates_to")
        good = state(lm)
        files = set((memories_dir(data_home) / "data").iterdir())
        last = lm.remember("Load tests showed 40k messages per second on NATS.").memories[0].id
        lm.link(last, ids[2], "relates_to")
        assert len(state(lm)["memories"]) == 4
    return good, files


def damage_newest_data_file(home: Path, before: set[Path]) -> None:
    (written,) = set((memories_dir(home) / "data").iterdir()) - before
    truncate(written)


DAMAGE: dict[str, Callable[[Path, set[Path]], None]] = {
    "truncated manifest": lambda home, _: truncate(newest_manifest(memories_dir(home))),
    "overwritten manifest": lambda home, _: overwrite(newest_manifest(memories_dir(home))),
    "truncated data file": damage_newest_data_file,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_doctor_finds_the_damage_and_repair_goes_back_to_the_last_good_version(
    data_home: Path, embedder: Embedder, history: tuple[dict[str, Any], set[Path]], damage: str
) -> None:
    good, files = history
    paths = Paths(data_home)
    manifest = newest_manifest(memories_dir(data_home))
    DAMAGE[damage](data_home, files)
    damaged_bytes = manifest.read_bytes()

    found = check_tables(paths)
    assert found.state == "fail"
    assert memories_dir(data_home).name.removesuffix(".lance") in found.detail
    assert "run `lexmem doctor --repair`" in found.detail and "\n" not in found.detail

    repaired = repair_store(paths)
    assert repaired[0].state == "warn", repaired
    assert (
        "went back to version" in repaired[0].detail and "lost the 1 commit" in repaired[0].detail
    )
    assert all("\n" not in c.detail for c in repaired)
    if "manifest" in damage:  # moved aside, never deleted
        kept = list(data_home.glob(f"repair-*/store/*.lance/_versions/{manifest.name}"))
        assert [p.read_bytes() for p in kept] == [damaged_bytes]
        assert str(kept[0].parents[3]) in repaired[0].detail

    assert check_tables(paths).state == "ok"
    with Lexmem.open(data_home, embedder=embedder) as lm:
        assert state(lm) == good  # the fourth memory's link and confidence went with it
        lm.remember("Writing works again after the repair.")  # and the store takes commits
    assert check_tables(paths).state == "ok"
    assert [c.state for c in repair_store(paths)] == ["ok"]  # a second run finds nothing


def test_a_damaged_older_version_is_set_aside_and_nothing_is_lost(
    data_home: Path, embedder: Embedder, history: tuple[dict[str, Any], set[Path]]
) -> None:
    paths = Paths(data_home)
    versions = sorted(
        (memories_dir(data_home) / "_versions").glob("*.manifest"), key=lambda p: int(p.stem)
    )
    older = versions[3]  # neither the newest nor the first
    truncate(older)
    with Lexmem.open(data_home, embedder=embedder) as lm:
        whole = state(lm)
    assert check_tables(paths).state == "fail"
    (repaired,) = repair_store(paths)
    assert repaired.state == "warn" and "nothing lost" in repaired.detail
    assert list(data_home.glob(f"repair-*/store/*.lance/_versions/{older.name}"))
    with Lexmem.open(data_home, embedder=embedder) as lm:
        assert state(lm) == whole
    assert check_tables(paths).state == "ok"


def test_repair_goes_back_past_a_compaction(
    data_home: Path, embedder: Embedder, history: tuple[dict[str, Any], set[Path]]
) -> None:
    """Compaction rewrites every row into a new file that all later versions share: when
    that file is damaged, only the versions kept from before it can help."""
    with Lexmem.open(data_home, embedder=embedder) as lm:
        lm.optimize()
        whole = state(lm)
    newest = max((memories_dir(data_home) / "data").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    truncate(newest)
    paths = Paths(data_home)
    assert check_tables(paths).state == "fail"
    repaired = repair_store(paths)
    assert repaired[0].state == "warn" and "went back to version" in repaired[0].detail
    with Lexmem.open(data_home, embedder=embedder) as lm:
        assert state(lm) == whole  # the versions before compaction held the same rows


def test_repair_refuses_while_the_service_runs(
    data_home: Path, history: tuple[dict[str, Any], set[Path]], service_up: FileLock
) -> None:
    truncate(newest_manifest(memories_dir(data_home)))
    (refused,) = repair_store(Paths(data_home))
    assert refused.state == "fail" and "quit lexmem or stop `lexmem serve` first" in refused.detail
    assert not list(data_home.glob("repair-*"))
    assert check_tables(Paths(data_home)).state == "fail"  # nothing was touched


def test_lexmem_doctor_reports_and_repairs(
    data_home: Path, history: tuple[dict[str, Any], set[Path]]
) -> None:
    truncate(newest_manifest(memories_dir(data_home)))
    runner = CliRunner()
    checked = runner.invoke(cli, ["doctor", "--json"])
    assert checked.exit_code == 1
    store = {c["name"]: c for c in json.loads(checked.stdout)}["store"]
    assert store["state"] == "fail" and "lexmem doctor --repair" in store["detail"]
    fixed = runner.invoke(cli, ["doctor", "--repair"])
    lines = fixed.stdout.splitlines()
    assert any(
        line.startswith("warn  repair") and "went back to version" in line for line in lines
    ), fixed.stdout
    (after,) = [line for line in lines if line.startswith("ok    store")]
    assert "3 memories" in after and "tables read in full" in after, fixed.stdout


def test_clean_up_keeps_the_newest_versions_however_old(
    lm: Lexmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(store_mod.KEEP_VERSIONS + 4):
        lm.remember(f"Commit number {n} of a store left idle afterwards.")
    table = lm.store.table()
    versions = table.list_versions()
    assert store_mod._retention(table) == store_mod.KEEP_VERSIONS_FOR  # all young: the window

    later = datetime.now() + timedelta(hours=3)  # the store sat idle for three hours

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Clock:
            return cls.fromtimestamp(later.timestamp(), tz)

    monkeypatch.setattr(store_mod, "datetime", Clock)
    keep = store_mod._retention(table)
    assert keep > store_mod.KEEP_VERSIONS_FOR
    kth_newest = versions[-store_mod.KEEP_VERSIONS]["timestamp"]
    assert later - keep <= kth_newest  # clean-up spares it and every newer version
    assert later - keep > kth_newest - timedelta(minutes=2)  # and not the whole history


def test_lancedb_names_manifests_as_this_file_assumes(lm: Lexmem) -> None:
    """The repair reads version numbers from manifest names; LanceDB's scheme must hold."""
    lm.remember("One commit more than the table's creation.")
    names = {int(p.stem) for p in (memories_dir(lm.paths.home) / "_versions").glob("*.manifest")}
    assert {NEWEST - v["version"] for v in lm.store.table().list_versions()} == names
