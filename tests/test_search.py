"""Hybrid search against the real store and the real model, on each storage backend
(``tests/store_backends.py``): the fusion is one, the keyword and vector legs are each
backend's own queries."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from store_backends import open_core

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.errors import InvalidInputError
from lexmem.models import MemoryContext, MemorySource, MemoryType, utcnow
from lexmem.store.fusion import Fusion, fuse
from lexmem.store.protocol import MemoryFilter
from lexmem.store.search import _Candidate

FACTS = [
    ("The project uses PostgreSQL 16 for data storage", "shop"),
    ("Payments go through Stripe; webhooks land on /hooks/stripe", "shop"),
    ("To deploy, run `make release` then `kubectl rollout status deploy/web`", "shop"),
    ("Last Tuesday the checkout page crashed because the Redis cache filled up", "shop"),
    ("The user prefers dark mode and a 14pt monospace font", None),
    ("Chapter three of the novel is told from Mara's point of view", "novel"),
    ("Always write commit messages in the imperative mood", None),
    ("The CI pipeline runs on GitHub Actions with a macOS and a Linux job", "shop"),
]


@pytest.fixture
def lm(data_home: Path, embedder: Embedder, backend: str) -> Iterator[Lexmem]:
    """A real lexmem core on a fresh data folder, once per storage backend."""
    with open_core(data_home, embedder, backend) as core:
        yield core


@pytest.fixture
def filled(lm: Lexmem) -> dict[str, str]:
    ids = {}
    for text, project in FACTS:
        ids[text] = lm.remember(text, project=project).memories[0].id
    return ids


def top(lm: Lexmem, query: str, **kw: object) -> list[str]:
    return [h.memory.content for h in lm.search(query, **kw).hits]  # type: ignore[arg-type]


def test_paraphrased_question_finds_the_fact_by_meaning(lm: Lexmem, filled: dict[str, str]) -> None:
    assert top(lm, "which database do we store data in")[0] == FACTS[0][0]
    assert top(lm, "how do I ship a new version to production")[0] == FACTS[2][0]
    assert top(lm, "what colour scheme does the user like")[0] == FACTS[4][0]


def test_exact_keywords_find_the_fact(lm: Lexmem, filled: dict[str, str]) -> None:
    assert top(lm, "Stripe webhooks", mode="bm25")[0] == FACTS[1][0]
    assert top(lm, "Redis", mode="hybrid")[0] == FACTS[3][0]


def test_each_leg_alone_and_explanations(lm: Lexmem, filled: dict[str, str]) -> None:
    res = lm.search("kubectl rollout", mode="hybrid")
    best = res.hits[0]
    assert best.memory.content == FACTS[2][0]
    assert best.bm25_rank == 1 and best.vector_rank is not None
    assert "keywords #1" in best.why() and "meaning #" in best.why()
    assert {"bm25", "embed", "vector"} <= set(res.timings_ms)
    vec_only = lm.search("kubectl rollout", mode="vector")
    assert all(h.bm25_rank is None for h in vec_only.hits)
    bm25_only = lm.search("kubectl rollout", mode="bm25")
    assert all(h.vector_rank is None for h in bm25_only.hits)
    assert "embed" not in bm25_only.timings_ms
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)


def test_filters_by_project_type_source_and_time(lm: Lexmem, filled: dict[str, str]) -> None:
    novel = lm.search("point of view", MemoryFilter(project="novel")).hits
    assert [h.memory.project for h in novel] == ["novel"]
    procedural = lm.search("deploy", MemoryFilter(type=MemoryType.PROCEDURAL)).hits
    assert procedural and all(h.memory.type == MemoryType.PROCEDURAL for h in procedural)
    none = lm.search("deploy", MemoryFilter(source=MemorySource.CORRECTION)).hits
    assert none == []
    future = lm.search("database", MemoryFilter(created_after=utcnow() + timedelta(days=1))).hits
    assert future == []


def test_pinned_and_salient_memories_edge_ahead_of_equals(lm: Lexmem) -> None:
    a = lm.remember("The staging server is called blue").memories[0]
    b = lm.remember("The staging server is called green").memories[0]
    first = lm.search("staging server name", mode="bm25").hits
    loser = first[-1].memory.id
    lm.pin(loser)
    again = lm.search("staging server name", mode="bm25").hits
    assert again[0].memory.id == loser and again[0].pinned
    assert {a.id, b.id} == {h.memory.id for h in again}


def test_search_records_access_on_hits(lm: Lexmem, filled: dict[str, str], backend: str) -> None:
    from lexmem.service.client import drain_if_no_service

    version = lm.store.table().version if backend == "lance" else None  # type: ignore[attr-defined]
    hits = lm.search("Stripe", limit=1).hits
    mid = hits[0].memory.id
    # Queued for the writer, not committed by the search.
    if backend == "lance":
        assert lm.store.table().version == version  # type: ignore[attr-defined]
    assert lm.get(mid).access_count == 0
    lm.search("Stripe", limit=1)
    lm.search("Stripe", limit=1, record_access=False)
    drain_if_no_service(lm)  # the writer's batch: both searches, merged
    lm.refresh()
    assert lm.get(mid).access_count == 2
    assert not list(lm.paths.access.glob("*.json"))


def test_bad_queries_get_clear_errors(lm: Lexmem) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        lm.search("   ")
    with pytest.raises(InvalidInputError, match="mode"):
        lm.search("x", mode="magic")
    with pytest.raises(InvalidInputError, match="limit"):
        lm.search("x", limit=0)


def test_query_syntax_characters_are_just_text(lm: Lexmem, filled: dict[str, str]) -> None:
    for q in ['"unbalanced', "a:b OR (c", "*", "' OR 1=1 --", "Stripe AND NOT", "日本語"]:
        lm.search(q)  # no exception; results may be empty


def test_empty_store_returns_nothing(lm: Lexmem) -> None:
    assert lm.search("anything").hits == []


def test_a_pinned_but_unrelated_memory_never_outranks_a_relevant_one(lm: Lexmem) -> None:
    relevant = lm.remember("The project uses PostgreSQL for data storage").memories[0]
    lm.remember("To deploy, first run 'npm build', then 'npm deploy'", pin=True)
    lm.remember("The user prefers dark mode")
    hits = lm.search("postgres").hits
    assert hits[0].memory.id == relevant.id
    assert all(h.score < hits[0].score for h in hits[1:])


def test_memories_sharing_neither_words_nor_meaning_are_not_returned(lm: Lexmem) -> None:
    lm.remember("The project uses PostgreSQL for data storage")
    assert lm.search("banana bread recipe with walnuts").hits == []


# --- session context, z-score fusion, session boost ------------------------------------

SESSION = [  # one captured agent session, in order
    "Which message broker should the billing service use?",
    "We settled on NATS JetStream after the load test last week.",
    "The load test ran on three c5.large nodes.",
]
OTHER = [
    "The user prefers dark mode and a 14pt monospace font",
    "Chapter three of the novel is told from Mara's point of view",
    "Always write commit messages in the imperative mood",
    "The CI pipeline runs on GitHub Actions with a macOS and a Linux job",
]


def _session(lm: Lexmem) -> list[str]:
    ids = []
    for text in SESSION:
        ctx = MemoryContext(source=MemorySource.CONVERSATION, session_id="s-billing")
        ids.append(lm.remember(text, context=ctx).memories[0].id)
    for n, text in enumerate(OTHER):
        ctx = MemoryContext(source=MemorySource.CONVERSATION, session_id=f"s-other-{n}")
        lm.remember(text, context=ctx)
    return ids


def _rank(lm: Lexmem, query: str, memory_id: str) -> int | None:
    hits = lm.search(query, limit=20, record_access=False).hits
    return next((i for i, h in enumerate(hits) if h.memory.id == memory_id), None)


def test_a_memory_is_found_through_its_session_neighbour(lm: Lexmem) -> None:
    question, answer, _ = _session(lm)
    query = "billing service message broker"  # the answer names neither
    hits = lm.search(query, record_access=False).hits
    found = next(h for h in hits if h.memory.id == answer)
    assert found.neighbour_keywords > 0
    assert "session neighbours" in found.why()
    assert hits[0].memory.id in (question, answer)
    # Without the context field, only the session read can reach the answer.
    fusion = dataclasses.replace(lm.searcher.fusion, context=0.0)
    lm.searcher.fusion = fusion
    assert next(h for h in lm.search(query).hits if h.memory.id == answer).bm25_rank is None
    with_context = _rank(lm, query, answer)
    lm.searcher.fusion = dataclasses.replace(fusion, session_context=False)
    without = _rank(lm, query, answer)
    assert with_context is not None and (without is None or with_context < without)


def test_the_keyword_leg_also_matches_the_previous_memorys_words(lm: Lexmem) -> None:
    question, answer, after = _session(lm)
    res = lm.search("billing service message broker", mode="bm25", record_access=False)
    ranks = {h.memory.id: h.bm25_rank for h in res.hits}
    # The answer names neither word but follows the question; the memory after the
    # answer is two steps away, past the one-memory context field.
    assert ranks[question] == 1 and ranks[answer] == 2
    assert after not in ranks
    own = next(h for h in res.hits if h.memory.id == question).bm25_score
    through_context = next(h for h in res.hits if h.memory.id == answer).bm25_score
    assert own is not None and through_context is not None and through_context < own


def test_memories_remembered_on_purpose_are_no_context_of_each_other(lm: Lexmem) -> None:
    # Every `lexmem remember` shares one bucket session: the one kept before is not the
    # context of the next, so it must not be found through it.
    ids = []
    for text in SESSION:
        ctx = MemoryContext(source=MemorySource.EXPLICIT, session_id="cli-explicit")
        ids.append(lm.remember(text, context=ctx).memories[0].id)
    _, answer, _ = ids
    hits = lm.search("billing service message broker", record_access=False).hits
    assert all(h.neighbour_keywords == 0 for h in hits)
    assert answer not in [
        h.memory.id
        for h in hits
        if h.bm25_rank is None
        and h.similarity is not None
        and h.similarity < lm.settings.search.min_similarity
    ]


def test_single_leg_modes_read_no_session_context(lm: Lexmem) -> None:
    _session(lm)
    for mode in ("bm25", "vector"):
        res = lm.search("billing service message broker", mode=mode, record_access=False)
        assert "context" not in res.timings_ms
        assert all(h.neighbour_keywords == 0 for h in res.hits)
    assert "context" in lm.search("billing broker", record_access=False).timings_ms


def _candidates(bm25: list[float], cosines: list[float], sessions: list[str]) -> list[Any]:
    return [
        _Candidate(f"m{i}", {"word_count": 10}, bm25_rank=i + 1, bm25_score=b,
                   vector_rank=i + 1, similarity=v, session_key=s)
        for i, (b, v, s) in enumerate(zip(bm25, cosines, sessions, strict=True))
    ]  # fmt: skip


def test_z_score_fusion_ignores_each_signals_scale() -> None:
    bm25 = [9.0, 1.0, 6.0, 0.5]
    cos = [0.25, 0.62, 0.58, 0.20]
    sessions = ["a", "b", "c", "d"]
    fused = fuse(_candidates(bm25, cos, sessions), "q", Fusion())
    scaled = fuse(_candidates([10 * b for b in bm25], cos, sessions), "q", Fusion())
    assert fused == pytest.approx(scaled)
    # Strong on both signals beats a standout on one; relevance spans 0..1.
    assert fused.index(max(fused)) == 2 and min(fused) == 0.0 and max(fused) == 1.0


def test_session_boost_lifts_a_memory_whose_session_holds_the_best_match() -> None:
    bm25, cos = [2.0, 2.0, 9.0, 0.5], [0.4, 0.4, 0.7, 0.1]
    cands = _candidates(bm25, cos, ["a", "b", "a", "c"])  # m0 shares m2's session
    boosted = fuse(cands, "q", Fusion())
    assert boosted[0] > boosted[1]
    plain = fuse(cands, "q", Fusion(session=0.0))
    assert plain[0] == pytest.approx(plain[1])


def test_a_query_naming_the_speaker_prefers_what_they_said() -> None:
    cands = _candidates([2.0, 2.0, 1.0], [0.4, 0.4, 0.3], ["a", "b", "c"])
    cands[1].row["metadata"] = json.dumps({"speaker": "Caroline"}, sort_keys=True)
    fused = fuse(cands, "What did Caroline research?", Fusion())
    assert fused[1] > fused[0]


def test_the_local_searcher_fuses_with_the_shared_fusion(
    data_home: Path, embedder: Embedder
) -> None:
    """The LanceDB searcher's own entry points are the shared functions, with its weights."""
    with open_core(data_home, embedder, "lance") as core:
        cands = _candidates([2.0, 2.0, 9.0, 0.5], [0.4, 0.4, 0.7, 0.1], ["a", "b", "a", "c"])
        core.searcher.fusion = Fusion(session=0.0)  # type: ignore[attr-defined]
        assert core.searcher._fuse(cands, "q") == fuse(cands, "q", Fusion(session=0.0))  # type: ignore[attr-defined]
