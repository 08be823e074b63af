"""The DuckDB lens: statistics, and export → import reproducing every row exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet  # noqa: F401 - registers pa.parquet
import pytest

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.errors import ImportFormatError, InvalidInputError
from lexmem.models import MemoryType
from lexmem.service.client import drain_if_no_service


@pytest.fixture
def populated(lm: Lexmem) -> Lexmem:
    a = lm.remember(
        "The project uses PostgreSQL for data storage", project="shop", pin=True
    ).memories[0]
    b = lm.remember("Last week we debugged the authentication module", project="shop").memories[0]
    c = lm.remember("To deploy, first run 'npm build', then 'npm deploy'").memories[0]
    lm.remember(
        " ".join(f"Paragraph {i} of a long design note, with details." for i in range(200)),
        project="docs",
    )
    lm.link(a.id, b.id, "relates_to", 0.7)
    lm.store.record_confidence(b.id, 0.65)
    lm.store.record_confidence(b.id, 0.9)
    lm.supersede(c.id, with_text="To deploy, run 'make release'")
    lm.archive(b.id)
    lm.search("database")
    drain_if_no_service(lm)  # the writer applies the search's access records
    lm.refresh()
    return lm


def snapshot(
    lm: Lexmem,
) -> tuple[list[dict[str, object]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    mems = sorted(
        (m.to_dict(with_embedding=True) for batch in lm.store.iter_all() for m in batch),
        key=lambda d: str(d["id"]),
    )
    links = sorted(
        (lk.id, lk.from_id, lk.to_id, lk.link_type, lk.strength, lk.created_at)
        for lk in lm.store.all_links()
    )
    conf = sorted(
        (p.id, p.memory_id, p.confidence, p.recorded_at) for p in lm.store.all_confidence()
    )
    return mems, links, conf


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_export_then_import_into_an_empty_folder_reproduces_everything_exactly(
    populated: Lexmem, tmp_path: Path, embedder: Embedder, fmt: str
) -> None:
    out = tmp_path / f"export-{fmt}"
    counts = populated.export(out, fmt)
    assert counts["memories"] >= 5 and counts["links"] >= 2 and counts["confidence"] >= 7
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", f"memories.{fmt}", f"links.{fmt}", f"confidence.{fmt}"]
    )
    fresh = Lexmem.open(tmp_path / "fresh", embedder=embedder)
    imported = fresh.import_(out)
    assert imported == {
        "memories": counts["memories"],
        "links": counts["links"],
        "confidence": counts["confidence"],
        "skipped_memories": 0,
        "skipped_links": 0,
        "skipped_confidence": 0,
    }
    assert snapshot(fresh) == snapshot(populated)
    # The imported store is fully usable: search and full-text work on it.
    assert (
        fresh.search("which database", record_access=False)
        .hits[0]
        .memory.content.startswith("The project uses")
    )
    fresh.close()


def test_export_refuses_a_non_empty_target_and_leaves_nothing_half_written(
    populated: Lexmem, tmp_path: Path
) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInputError, match="not an empty folder"):
        populated.export(target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    with pytest.raises(InvalidInputError, match="format"):
        populated.export(tmp_path / "x", "xml")
    assert not any(p.name.startswith(".x.") for p in tmp_path.iterdir())


def test_import_rejects_bad_folders_with_one_line_reasons(
    lm: Lexmem, populated: Lexmem, tmp_path: Path
) -> None:
    with pytest.raises(ImportFormatError, match="no manifest"):
        lm.import_(tmp_path)
    out = tmp_path / "exp"
    populated.export(out, "jsonl")
    (out / "memories.jsonl").write_text('{"id": 1, "garbage": true\n')
    other = Lexmem.open(tmp_path / "other", embedder=lm.embedder)
    with pytest.raises(ImportFormatError) as err:
        other.import_(out)
    assert "\n" not in str(err.value)
    assert other.count() == 0  # nothing half-imported


def test_importing_the_same_export_twice_is_refused(
    populated: Lexmem, tmp_path: Path, embedder: Embedder
) -> None:
    out = tmp_path / "exp"
    populated.export(out, "parquet")
    fresh = Lexmem.open(tmp_path / "fresh", embedder=embedder)
    fresh.import_(out)
    n = fresh.count()
    with pytest.raises(InvalidInputError, match="already exist"):
        fresh.import_(out)
    assert fresh.count() == n


def test_stats_through_duckdb(populated: Lexmem) -> None:
    s = populated.stats()
    assert s["memories"] == populated.count()
    assert s["by_status"]["archived"] == 1 and s["by_status"]["superseded"] == 1
    assert s["pinned"] == 1
    assert s["links_by_type"]["relates_to"] == 1 and s["links_by_type"]["supersedes"] == 1
    assert s["top_projects"]["docs"] >= 2
    assert set(s["by_type"]) <= {t.value for t in MemoryType}
    assert s["disk_bytes"] > 0 and s["accesses"] >= 1
    assert s["oldest"] <= s["newest"]


def test_an_import_failing_part_way_leaves_the_store_as_it_was(
    populated: Lexmem, tmp_path: Path, embedder: Embedder
) -> None:
    import pyarrow as pa

    out = tmp_path / "exp"
    populated.export(out, "parquet")
    fresh = Lexmem.open(tmp_path / "fresh", embedder=embedder)
    fresh.remember("Already here before the import")
    before = snapshot(fresh)
    mem = pa.parquet.read_table(out / "memories.parquet")
    broken_links = pa.table(
        {"id": ["x"], "nonsense": [1]}
    )  # cannot be cast: fails after memories went in
    seen: list[tuple[int, int]] = []
    with pytest.raises(Exception):  # noqa: B017 - whatever arrow raises, the store must roll back
        fresh.store.import_rows(
            mem, broken_links, pa.table({}), progress=lambda d, t: seen.append((d, t)), batch=2
        )
    assert seen and seen[-1][0] == mem.num_rows  # the memories had been added in batches
    assert snapshot(fresh) == before
    assert fresh.search("import", record_access=False).hits[0].memory.content.startswith("Already")
