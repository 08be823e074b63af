"""lens.insights: the figures behind the app's charts, checked against known inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lexmem.api import Lexmem
from lexmem.errors import InvalidInputError
from lexmem.models import Memory, MemorySource, MemoryStatus, MemoryType
from lexmem.store.journal import AuditEntry, Journal
from lexmem.store.lens import insights

# A fixed clock: no assertion depends on when the test runs.
NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)


def _memory(
    lm: Lexmem,
    text: str,
    *,
    days_ago: float,
    mtype: MemoryType = MemoryType.SEMANTIC,
    source: MemorySource = MemorySource.EXPLICIT,
    project: str | None = None,
    status: MemoryStatus = MemoryStatus.ACTIVE,
) -> Memory:
    # A unit vector is enough: insights reads no embedding, and the model is not needed.
    vector = [1.0] + [0.0] * (lm.store.dim - 1)
    return Memory(
        text, type=mtype, source=source, project=project, status=status, embedding=vector,
        created_at=NOW - timedelta(days=days_ago),
    )  # fmt: skip


def _audit(
    i: int, decision: str, reason: str, *, days_ago: float, kind: str = "fact"
) -> AuditEntry:
    return AuditEntry(
        id=f"a{i}", timestamp=NOW - timedelta(days=days_ago), session_id="s1", candidate_id=f"c{i}",
        decision=decision, reason=reason, confidence=0.5, rule="test", kind=kind,
    )  # fmt: skip


@pytest.fixture
def known(lm: Lexmem) -> Lexmem:
    lm.store.store_many(
        [
            _memory(lm, "today, semantic, shop", days_ago=0, project="shop"),
            _memory(lm, "today, procedural, shop", days_ago=0.1, mtype=MemoryType.PROCEDURAL,
                    source=MemorySource.WORKFLOW, project="shop"),
            _memory(lm, "yesterday, episodic, docs", days_ago=1, mtype=MemoryType.EPISODIC,
                    source=MemorySource.CONVERSATION, project="docs"),
            _memory(lm, "yesterday, archived", days_ago=1, source=MemorySource.CONVERSATION,
                    project="docs", status=MemoryStatus.ARCHIVED),
            _memory(lm, "six days ago, no project", days_ago=6),
            _memory(lm, "a week ago: outside a 7-day window", days_ago=7, project="old"),
            _memory(lm, "last year", days_ago=400, project="old"),
        ]
    )  # fmt: skip
    Journal(lm.store).audit(
        [
            _audit(1, "skipped", "confidence 0.42 below the assist threshold 0.70", days_ago=0),
            _audit(2, "skipped", "confidence 0.55 below the assist threshold 0.70", days_ago=2),
            _audit(3, "skipped", "too short to stand on its own", days_ago=1),
            _audit(4, "saved", "decision at confidence 0.90", days_ago=1),
            _audit(5, "skipped", "too short to stand on its own", days_ago=30),
            _audit(6, "applied", "pin", days_ago=0, kind="memory_op"),
        ]
    )
    return lm


def test_figures_per_day_type_source_project_and_reason(known: Lexmem) -> None:
    got = insights(known.store, days=7, now=NOW)
    assert got["days"] == 7
    assert got["dates"] == [f"2025-03-{d:02d}" for d in range(4, 11)]
    assert got["total"] == 5
    assert got["by_type"] == {
        "semantic": [1, 0, 0, 0, 0, 1, 1],  # archived still counts: it was created that day
        "episodic": [0, 0, 0, 0, 0, 1, 0],
        "procedural": [0, 0, 0, 0, 0, 0, 1],
    }
    assert got["by_source"] == {
        "conversation": [0, 0, 0, 0, 0, 2, 0],
        "explicit": [1, 0, 0, 0, 0, 0, 1],
        "workflow": [0, 0, 0, 0, 0, 0, 1],
    }
    assert got["top_projects"] == [("shop", 2), ("(none)", 1), ("docs", 1)]  # active only
    assert got["skip_reasons"] == [
        ("confidence below the assist threshold", 2),
        ("too short to stand on its own", 1),
    ]
    assert got["decisions"] == {"skipped": 3, "saved": 1}  # the app's own ops are not candidates


def test_days_follow_the_clock_offset_and_the_window(known: Lexmem) -> None:
    # 12:00 UTC minus 14 h is 22:00 the day before: today's memories fall on "yesterday".
    west = NOW.astimezone(timezone(timedelta(hours=-14)))
    got = insights(known.store, days=2, now=west)
    assert got["dates"] == ["2025-03-08", "2025-03-09"]
    assert got["by_type"]["semantic"] == [1, 1]
    wide = insights(known.store, days=365 * 2, now=NOW)
    assert wide["total"] == 7 and len(wide["dates"]) == 730
    assert wide["top_projects"][0] == ("old", 2)


def test_an_empty_store_and_bad_input(lm: Lexmem) -> None:
    got = insights(lm.store, days=3, now=NOW)
    assert got["total"] == 0 and got["by_type"] == {} and got["by_source"] == {}
    assert got["top_projects"] == [] and got["skip_reasons"] == [] and got["decisions"] == {}
    assert "audit" not in lm.store.list_tables()  # reading created no journal table
    with pytest.raises(InvalidInputError, match="at least 1"):
        insights(lm.store, days=0)
