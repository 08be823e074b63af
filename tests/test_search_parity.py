"""Search on the PostgreSQL backend ranks the same data as the local store does, within a
stated tolerance: the same memories, in a lance core and in a team database, asked the
same questions, give the same top 10.

The corpus: ``tests/search_corpus.py`` (notes in three projects and four captured agent
sessions with their handoffs) plus 300 generated memories (bench/_common.py's seeded
``MemoryCorpus``: developer and writer notes of 40-odd kinds, half of them conversation
turns in sessions of six, so the session context is in play). The questions: the
corpus' own question, the generator's questions about 60 of its memories, and a few
written here.

The keyword scorers are two implementations of the same fielded BM25 (LanceDB's index,
and SQL over PostgreSQL's ``tsvector``, lexmem.store.postgres.search) with different
stemmers' corners and stop-word lists, and the vector legs compute the same cosines in
float32 and float64, so the rankings are near, not equal: a near-tie can swap, and a
memory at the edge of a leg's pool can change the fused scores of the others a little.
Measured on this corpus (five runs): hybrid same top 1 0.973, top-10 overlap 0.94-0.95;
keyword leg alone 1.000 / 0.989; vector leg alone 1.000 / 1.000; hybrid under a project
filter 0.959 / 1.000. The bounds sit a little under.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import keyring
import pytest
from conftest import MemoryKeyring
from search_corpus import QUESTION, populate
from store_backends import open_core, use_postgres

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.encoder import EncodingRequest
from lexmem.models import MemoryContext, MemorySource, utcnow
from lexmem.store.protocol import MemoryFilter


def _bench_common() -> Any:
    """bench/_common.py's corpus generator, loaded by its path: putting bench/ on sys.path
    would let bench/ui.py stand in for the ui package in every later test."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "bench" / "_common.py"
    spec = importlib.util.spec_from_file_location("lexmem_bench_common", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


MemoryCorpus = _bench_common().MemoryCorpus

GENERATED = 300
SESSION_LENGTH = 6
QUESTIONS = 60
WRITTEN = (
    "how do we deploy the shop",
    "chapter titles missing from the EPUB",
    "backups",
    "Redis cache",
    "what does Mara do",
    "DNS",
    "word count of each chapter",
    "cookie banner hides the checkout button",
    "payments webhook secret",
    "database migrations fail on a fresh database",
    "home server RAM",
    "who owns the storefront design",
)
# The bounds, a little under what was measured (module docstring).
HYBRID_TOP1 = 0.90
HYBRID_OVERLAP = 0.90
LEG_TOP1 = 0.95
LEG_OVERLAP = 0.95


@dataclass
class Cores:
    lance: Lexmem
    postgres: Lexmem  # on the team database
    questions: list[str]
    rows: int


def _generate(lm: Lexmem) -> None:
    """The generated memories, half of them conversation turns in sessions."""
    corpus = MemoryCorpus(seed=19)
    requests = []
    for i in range(GENERATED):
        row = corpus.row(i)
        if (i // SESSION_LENGTH) % 2:
            ctx = MemoryContext(
                source=MemorySource.CONVERSATION,
                session_id=f"parity-{i // SESSION_LENGTH}",
                project=row.project or None,
            )
        else:
            ctx = MemoryContext(source=MemorySource(row.source), project=row.project or None)
        requests.append(EncodingRequest(row.text, context=ctx))
    memories = lm.encoder.encode_batch(requests)
    # A session's turns one second apart, in order: their context is their neighbours.
    start = utcnow() - timedelta(days=3)
    for n, m in enumerate(memories):
        m.created_at = m.last_accessed_at = start + timedelta(seconds=n)
    lm.store.store_many(memories)


def _questions() -> list[str]:
    corpus = MemoryCorpus(seed=19)
    rows = [corpus.row(i) for i in range(GENERATED)]
    return [QUESTION, *WRITTEN, *(q.text for q in corpus.queries(rows, GENERATED, QUESTIONS))]


@contextmanager
def team_core(lm: Lexmem, url: str, home: Path, embedder: Embedder) -> Iterator[Lexmem]:
    """A core on the team database at ``url`` holding ``lm``'s memories, every field as
    it is, written through the postgres backend's own ``store_many`` (which derives
    each conversation memory's context from its session, as the local store did)."""
    use_postgres(home, url)
    with open_core(home, embedder, "postgres") as team:
        memories = [m for batch in lm.store.iter_all(with_embedding=True) for m in batch]
        team.store.store_many(memories)
        yield team


@contextmanager
def _isolated(home: Path) -> Iterator[None]:
    """What conftest's per-test isolation gives, for the whole module: its own HOME,
    data folder and in-memory keyring (a module's fixture is made before any test's)."""
    user = home / "userhome"
    user.mkdir()
    before = keyring.get_keyring()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(user))
        mp.setenv("LEXMEM_HOME", str(home / "lexmem"))
        for name, sub in (("DATA", "share"), ("CONFIG", None), ("STATE", "state")):
            folder = user / ".config" if sub is None else user / ".local" / sub
            mp.setenv(f"XDG_{name}_HOME", str(folder))
        mp.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
        keyring.set_keyring(MemoryKeyring())
        try:
            yield
        finally:
            keyring.set_keyring(before)


@pytest.fixture(scope="module")
def cores(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, pg_server: Any
) -> Iterator[Cores]:
    home = tmp_path_factory.mktemp("parity")
    with _isolated(home), open_core(home / "lexmem", embedder, "lance") as lm, \
            pg_server.new_database() as url:  # fmt: skip
        populate(lm)
        _generate(lm)
        with team_core(lm, url, home / "team", embedder) as team:
            yield Cores(lm, team, _questions(), lm.store.count())


def top(core: Lexmem, query: str, mode: str, flt: MemoryFilter | None, now: Any) -> list[str]:
    res = core.searcher.search(query, flt, limit=10, mode=mode, record_access=False, now=now)
    return [h.memory.id for h in res.hits]


def agreement(cores: Cores, mode: str, flt: MemoryFilter | None = None) -> tuple[float, float]:
    """The share of questions whose best hit is the same on both backends, and the mean
    share of the local top 10 that the team database's top 10 holds too."""
    now = utcnow()  # both rank at the same instant: recency is part of the score
    same_first, overlaps = 0, []
    for q in cores.questions:
        a, b = top(cores.lance, q, mode, flt, now), top(cores.postgres, q, mode, flt, now)
        same_first += a[:1] == b[:1]
        overlaps.append(len(set(a) & set(b)) / max(len(a), len(b)) if a or b else 1.0)
    first, overlap = same_first / len(cores.questions), sum(overlaps) / len(overlaps)
    print(f"{mode} {flt}: same top 1 {first:.3f}, top-10 overlap {overlap:.3f}")  # with -s
    return first, overlap


def test_the_corpus_is_a_few_hundred_memories_in_both(cores: Cores) -> None:
    from lexmem.store.postgres.search import PostgresSearcher

    assert isinstance(cores.postgres.searcher, PostgresSearcher)
    assert cores.rows >= 340 and len(cores.questions) >= 70
    assert cores.postgres.store.count() == cores.rows
    with_context = cores.lance.store.arrow_table("memories", ["id", "context"]).to_pylist()
    expected = {r["id"]: r["context"] for r in with_context}
    team = cores.postgres.store.arrow_table("memories", ["id", "context"]).to_pylist()
    assert {r["id"]: r["context"] for r in team} == expected
    assert sum(1 for c in expected.values() if c) > 100


def test_hybrid_search_ranks_alike_on_both_backends(cores: Cores) -> None:
    first, overlap = agreement(cores, "hybrid")
    assert first >= HYBRID_TOP1 and overlap >= HYBRID_OVERLAP, (first, overlap)


@pytest.mark.parametrize("mode", ["bm25", "vector"])
def test_each_leg_ranks_alike_on_both_backends(cores: Cores, mode: str) -> None:
    first, overlap = agreement(cores, mode)
    assert first >= LEG_TOP1 and overlap >= LEG_OVERLAP, (mode, first, overlap)


def test_a_filtered_search_ranks_alike_and_keeps_to_the_filter(cores: Cores) -> None:
    flt = MemoryFilter(project="novel")
    first, overlap = agreement(cores, "hybrid", flt)
    assert first >= HYBRID_TOP1 and overlap >= HYBRID_OVERLAP, (first, overlap)
    hits = cores.postgres.searcher.search("chapters", flt, limit=50, record_access=False).hits
    assert hits and {h.memory.project for h in hits} == {"novel"}


def test_scoring_only_the_heaviest_matches_keeps_the_keyword_top_ten(
    cores: Cores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword leg scores exactly only the matches with the most weight of the
    query's words when there are many; a pool far smaller than the corpus' matches
    still gives the same top 10 (the corpus is small, so the pool is made small)."""
    import lexmem.store.postgres.search as module

    now = utcnow()
    full = [top(cores.postgres, q, "bm25", None, now) for q in cores.questions]
    monkeypatch.setattr(module, "_SCORED_MIN", 20)
    monkeypatch.setattr(module, "_SCORED_PER_HIT", 1)  # 40 of a leg 40 deep
    cut = [top(cores.postgres, q, "bm25", None, now) for q in cores.questions]
    same_first = sum(a[:1] == b[:1] for a, b in zip(full, cut, strict=True)) / len(full)
    overlap = sum(
        len(set(a) & set(b)) / max(len(a), len(b), 1) for a, b in zip(full, cut, strict=True)
    ) / len(full)
    print(f"bm25 scored pool of 40: same top 1 {same_first:.3f}, top-10 overlap {overlap:.3f}")
    assert same_first >= 0.95 and overlap >= 0.95, (same_first, overlap)
