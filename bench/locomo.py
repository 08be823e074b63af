"""LoCoMo retrieval benchmark: does lexmem's search find the dialogue turns a question needs?

LoCoMo (Maharana et al., 2024) holds long two-person conversations with questions
whose ``evidence`` names the turns (``dia_id``) that answer them. This script
measures evidence recall, the retrieval half of LoCoMo:

- one project per conversation (``project = sample_id``), all in one fresh temporary
  data folder; every dialogue turn becomes one memory whose text is
  ``(<session date_time>) <speaker>: <text>`` plus `` [shares <blip_caption>]`` when
  the turn carries an image caption; each LoCoMo session is a lexmem session
  (``session_id = <sample_id>:session_<n>``, ``conversation_id = sample_id``), the
  memory's ``created_at`` is the session's date plus one second per earlier turn (so
  a session's memories keep their order, as a captured agent session's do), and its
  ``dia_id``, session number, session date and speaker go into its metadata;
- every QA item is a query searched within its conversation's project with
  ``Lexmem.search(..., mode="hybrid", limit=50, record_access=False)``, and through
  lexmem's single legs (``mode="bm25"``, ``mode="vector"``);
- gold = the item's ``evidence`` dia_ids, normalised (split on ``;`` and spaces,
  ``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``), ids absent from the
  conversation dropped; a question left with none is skipped (and counted);
- metrics per category and over categories 1-4 (1 multi-hop, 2 temporal,
  3 open-domain, 4 single-hop; 5 adversarial reported apart): R@5, R@10 (share of
  the gold turns in the top k, averaged over questions), Hit@10, NDCG@10 (binary
  relevance), MRR (over the top 50), all as percentages; ingest wall time and
  per-query latency p50/p95.

Baselines, in the same run over the same memory texts and the same queries:
BM25 alone (k1 1.2, b 0.75, Lucene's idf, lower-cased ``[a-z0-9]+`` tokens, NLTK's
179 English stop words; statistics per conversation), dense alone (cosine between
the vectors lexmem stored for the turns and the query embedded by lexmem's own
:class:`~lexmem.embedder.Embedder`), and reciprocal-rank fusion of the two (k = 60).

Reference figures (all ten conversations, categories 1-4): BM25 R@10 58.9, NDCG@10
46.4; dense all-MiniLM-L6-v2 R@10 48.6; RRF R@10 58.4, Hit@10 65.3. On the five
conversations of ``locomo10-dev.json`` that BM25 scores R@10 60.2, Hit@10 66.1; the
baseline here gives 60.3 / 66.2 (scikit-learn's 318-word stop list would give
58.1 / 63.8, no stop words 56.4 / 62.1: the stop list is what moves it).

Then the weights: every combination of :data:`SELECTION_GRID` is searched again
(categories 1-4), and chosen by leaving one conversation out: each conversation is
scored with the combination that did best (R@10 + Hit@10) on the other four, which is
the held-out figure printed beside the in-sample one; Fusion's defaults must be the
combination best on all five, and the run says whether they are (``--no-selection``
skips this; it costs about a minute per combination).

Writes, with ``--out DIR``: ``DIR/locomo_metrics.json`` (every metric, per system
and category, and the timings), ``DIR/locomo_run.json`` (lexmem's hybrid ranking,
``{"<sample_id>#<i>": [dia_id, ... top 50]}``, ``i`` the question's 0-based position
in that conversation's qa list; every question with gold, category 5 too) and
``DIR/locomo.json`` (the same metrics with run_all's top-level ``"summary"``).
Prints that JSON, a table, and a one-line summary last.

:func:`evaluate` is importable (``bench/`` is not a package: put it on ``sys.path``)
to score any ranking file against the same gold::

    from locomo import evaluate, load_conversations, gold_of
    convs = load_conversations(path)
    gold, categories = gold_of(convs)
    evaluate(json.load(open("locomo_run.json")), gold, categories)
"""

from __future__ import annotations

import os

# The baselines' numpy work is small; multi-threaded BLAS only contends with the other
# processes on a busy 2-core machine. Set before numpy loads; the environment can override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # bench/ is not a package: imported from its folder
    BenchError,
    Stopwatch,
    bench_tempdir,
    load_average,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "locomo"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10-dev.json"
TOP = 50  # ranking depth kept per query (and lexmem's search limit)
BATCH = 256  # memories per encode_batch + store_many
QUICK_CONVERSATIONS = 2
WARMUP = 3  # unrecorded queries per lexmem mode before measuring

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
HEADLINE_CATEGORIES = (1, 2, 3, 4)
METRICS = ("r@5", "r@10", "hit@10", "ndcg@10", "mrr")
LEXMEM_MODES = ("hybrid", "bm25", "vector")
SYSTEMS = {
    "lexmem": "lexmem search, hybrid (as shipped)",
    "lexmem_bm25": "lexmem search, mode=bm25 (its keyword leg alone)",
    "lexmem_vector": "lexmem search, mode=vector (its vector leg alone)",
    "bm25": "BM25 baseline (k1 1.2, b 0.75, NLTK stop words, per conversation)",
    "dense": "dense baseline (cosine, lexmem's embedded model and stored vectors)",
    "rrf": "reciprocal-rank fusion of the BM25 and dense baselines (k 60)",
}
BM25_K1 = 1.2
BM25_B = 0.75
RRF_K = 60

# NLTK's English stop-word list (179 words), as LoCoMo's BM25 baselines commonly use.
_NLTK_STOP_WORDS = """i me my myself we our ours ourselves you you're you've you'll you'd your yours
    yourself yourselves he him his himself she she's her hers herself it it's its itself
    they them their theirs themselves what which who whom this that that'll these those
    am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through
    during before after above below to from up down in out on off over under again further
    then once here there when where why how all any both each few more most other some such
    no nor not only own same so than too very s t can will just don don't should should've
    now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn
    hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn
    needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
    wouldn't"""
STOP_WORDS = frozenset(_NLTK_STOP_WORDS.split())
_TOKEN = re.compile(r"[a-z0-9]+")
_DIA_ID = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


def log(message: str) -> None:
    print(f"[{NAME} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the data ------------------------------------------------------------------------


@dataclass(slots=True)
class Turn:
    dia_id: str  # as written in the conversation
    session: int
    date_time: str
    speaker: str
    text: str
    caption: str | None

    def memory_text(self) -> str:
        prefix = f"({self.date_time}) " if self.date_time else ""
        shares = f" [shares {self.caption}]" if self.caption else ""
        return f"{prefix}{self.speaker}: {self.text}{shares}"


@dataclass(slots=True)
class Question:
    key: str  # "<sample_id>#<i>", i: 0-based position in the conversation's qa list
    text: str
    category: int
    gold: list[str]  # dia_ids as written in the conversation, deduplicated


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]  # only those with gold left
    skipped: Counter[int] = field(default_factory=Counter)  # no gold left, by category
    dropped_evidence: list[str] = field(default_factory=list)  # ids not in the conversation


def normalise_dia_id(text: str) -> str | None:
    """``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``; None when it is not a dia_id."""
    text = text.strip()
    if text.startswith("D:"):
        text = "D" + text[2:]
    m = _DIA_ID.fullmatch(text)
    return f"D{int(m[1])}:{int(m[2])}" if m else None


def split_evidence(evidence: Iterable[Any]) -> list[str]:
    """Evidence items split on ``;`` and whitespace (one item may name several turns)."""
    return [part for item in evidence for part in re.split(r"[;\s]+", str(item)) if part]


def load_conversations(path: Path, limit: int | None = None) -> list[Conversation]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchError(f"cannot read {path} ({exc.strerror})") from exc
    except ValueError as exc:
        raise BenchError(f"{path} is not JSON ({exc})") from exc
    if not isinstance(raw, list) or not raw:
        raise BenchError(f"{path} holds no LoCoMo samples (expected a JSON list)")
    out = []
    for n, sample in enumerate(raw[:limit] if limit else raw):
        try:
            out.append(_conversation(sample))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BenchError(
                f"{path}: sample {n} is not a LoCoMo sample ({type(exc).__name__}: {exc})"
            ) from exc
    return out


def _conversation(sample: dict[str, Any]) -> Conversation:
    sid = str(sample["sample_id"])
    conv = sample["conversation"]
    sessions = sorted(
        (int(m[1]), key)
        for key, value in conv.items()
        if (m := _SESSION.fullmatch(key)) and isinstance(value, list)
    )
    turns = [
        Turn(
            dia_id=str(t["dia_id"]), session=n,
            date_time=str(conv.get(f"session_{n}_date_time") or ""),
            speaker=str(t["speaker"]), text=str(t["text"]),
            # LoCoMo marks a shared image by its BLIP caption (some turns have a
            # caption without img_url); the caption is what the turn "says".
            caption=str(t["blip_caption"]) if t.get("blip_caption") else None,
        )
        for n, key in sessions
        for t in conv[key]
    ]  # fmt: skip
    by_norm = {normalise_dia_id(t.dia_id) or t.dia_id: t.dia_id for t in turns}
    c = Conversation(sid, turns, [])
    for i, qa in enumerate(sample.get("qa", [])):
        gold: list[str] = []
        for part in split_evidence(qa.get("evidence") or []):
            dia = by_norm.get(normalise_dia_id(part) or part)
            if dia is None:
                c.dropped_evidence.append(part)
            elif dia not in gold:
                gold.append(dia)
        category = int(qa["category"])
        if not gold:
            c.skipped[category] += 1
            continue
        c.questions.append(Question(f"{sid}#{i}", str(qa["question"]), category, gold))
    return c


def session_time(date_time: str) -> datetime | None:
    """``1:56 pm on 8 May, 2023`` as a UTC datetime; None when it does not parse."""
    try:
        return datetime.strptime(date_time.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def turn_times(turns: Sequence[Turn]) -> list[datetime]:
    """When each turn was said: its session's date plus one second per earlier turn of
    the session. A session without a parseable date follows the one before it (a day
    later), so sessions stay in order too."""
    out: list[datetime] = []
    starts: dict[int, datetime] = {}
    position: Counter[int] = Counter()
    last = datetime(2000, 1, 1, tzinfo=UTC)
    for t in turns:
        if t.session not in starts:
            starts[t.session] = session_time(t.date_time) or last + timedelta(days=1)
            last = starts[t.session]
        out.append(starts[t.session] + timedelta(seconds=position[t.session]))
        position[t.session] += 1
    return out


def gold_of(conversations: Sequence[Conversation]) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The gold dia_ids and the category of every question with gold."""
    gold = {q.key: q.gold for c in conversations for q in c.questions}
    categories = {q.key: q.category for c in conversations for q in c.questions}
    return gold, categories


# --- the metrics ----------------------------------------------------------------------


def _dedupe(ranking: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in ranking if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


def question_scores(ranking: Sequence[str], gold: set[str]) -> dict[str, float]:
    """One question's R@5, R@10, Hit@10, NDCG@10 (binary) and reciprocal rank, in 0..1."""
    top10 = ranking[:10]
    found10 = sum(1 for x in top10 if x in gold)
    dcg = sum(1.0 / math.log2(i + 2) for i, x in enumerate(top10) if x in gold)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    first = next((i for i, x in enumerate(ranking) if x in gold), None)
    return {
        "r@5": sum(1 for x in ranking[:5] if x in gold) / len(gold),
        "r@10": found10 / len(gold),
        "hit@10": 1.0 if found10 else 0.0,
        "ndcg@10": dcg / idcg,
        "mrr": 0.0 if first is None else 1.0 / (first + 1),
    }


def _mean(rows: Sequence[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {m: round(100 * sum(r[m] for r in rows) / len(rows), 2) if rows else None
                           for m in METRICS}  # fmt: skip
    out["n"] = len(rows)
    return out


def evaluate(
    rankings: Mapping[str, Sequence[str]],
    gold: Mapping[str, Iterable[str]],
    categories: Mapping[str, int],
    headline: Sequence[int] = HEADLINE_CATEGORIES,
) -> dict[str, Any]:
    """Score rankings (question key -> ids, best first) against gold (key -> ids).

    Every question in ``gold`` with at least one gold id counts; one missing from
    ``rankings`` scores zero. Returns percentages (0-100): ``"overall"`` over the
    ``headline`` categories, ``"by_category"`` per category, and ``"missing"``
    (questions without a ranking).
    """
    scores: dict[str, dict[str, float]] = {}
    missing = 0
    for key, ids in gold.items():
        g = set(ids)
        if not g:
            continue
        if key not in rankings:
            missing += 1
        scores[key] = question_scores(_dedupe(rankings.get(key, ())), g)
    out = summarise(scores, categories, headline)
    out["overall"]["categories"] = list(headline)
    return {**out, "missing": missing}


def summarise(
    scores: Mapping[str, dict[str, float]],
    categories: Mapping[str, int],
    headline: Sequence[int] = HEADLINE_CATEGORIES,
) -> dict[str, Any]:
    """Per-question scores (key -> :func:`question_scores`) as percentages:
    ``"overall"`` over the ``headline`` categories, ``"by_category"`` per category."""
    rows: dict[int, list[dict[str, float]]] = {}
    for key, r in scores.items():
        rows.setdefault(int(categories[key]), []).append(r)
    return {
        "overall": _mean([r for c in headline for r in rows.get(c, [])]),
        "by_category": {
            str(c): {"name": CATEGORY_NAMES.get(c, str(c)), **_mean(rows[c])} for c in sorted(rows)
        },
    }


# --- choosing the fusion's weights: leave one conversation out ---------------------------

# The weights lexmem ships are picked from this grid by the procedure below, and only by
# it: every combination is searched, and the one with the best R@10 + Hit@10 (categories
# 1-4) over all five conversations is what Fusion's defaults must be. Held out, each
# conversation is scored with the combination picked on the other four; the gap between
# that and the in-sample figure is how much the choice flatters.
SELECTION_GRID: dict[str, tuple[float, ...]] = {
    "keyword": (0.8, 1.0),
    "meaning": (0.8, 1.0),
    "speaker": (0.2, 0.4),
}


def grid_configurations(
    grid: Mapping[str, Sequence[float]] = SELECTION_GRID,
) -> dict[str, dict[str, float]]:
    """Every combination of the grid's values, by a name that spells it out
    (``keyword=0.8,meaning=1,speaker=0.4``), in the grid's order."""
    import itertools

    names = list(grid)
    return {
        ",".join(f"{n}={v:g}" for n, v in zip(names, values, strict=True)): dict(zip(names, values, strict=True))
        for values in itertools.product(*(grid[n] for n in names))
    }  # fmt: skip


def _objective(scores: Sequence[dict[str, float]]) -> float:
    """What the selection maximises: mean R@10 plus mean Hit@10."""
    if not scores:
        return 0.0
    return sum(s["r@10"] + s["hit@10"] for s in scores) / len(scores)


def select_held_out(
    scores: Mapping[str, Mapping[str, dict[str, float]]],
    conversation_of: Mapping[str, str],
    categories: Mapping[str, int],
    headline: Sequence[int] = HEADLINE_CATEGORIES,
) -> dict[str, Any]:
    """Leave one conversation out over configurations.

    ``scores``: configuration name -> question key -> :func:`question_scores`;
    ``conversation_of``: question key -> its conversation. For each conversation, the
    configuration with the best :func:`_objective` over the other conversations'
    ``headline`` questions is picked (ties: the first in ``scores``' order) and scores
    that conversation's questions. Returns the held-out metrics (as :func:`_mean`,
    overall and by category), the pick per conversation, the pick over all of them and
    its in-sample metrics, and the gap (in-sample minus held out) per metric.
    """
    names = list(scores)
    if not names:
        raise BenchError("no configurations to choose from")
    counted = [k for k in conversation_of if categories.get(k) in headline]
    convs = sorted({conversation_of[k] for k in counted})

    def best(keys: Sequence[str]) -> str:
        return max(names, key=lambda n: (_objective([scores[n][k] for k in keys]), -names.index(n)))

    picks: dict[str, str] = {}
    held: dict[str, dict[str, float]] = {}
    for c in convs:
        train = [k for k in counted if conversation_of[k] != c]
        picks[c] = best(train) if train else names[0]
        held.update({k: scores[picks[c]][k] for k in counted if conversation_of[k] == c})
    chosen = best(counted)

    held_out = summarise(held, categories, headline)
    in_sample = summarise({k: scores[chosen][k] for k in counted}, categories, headline)
    gap = {
        m: round(in_sample["overall"][m] - held_out["overall"][m], 2)
        for m in METRICS
        if in_sample["overall"][m] is not None and held_out["overall"][m] is not None
    }
    return {
        "held_out": held_out,
        "picks": picks,
        "chosen": chosen,
        "in_sample": in_sample,
        "gap_in_sample_minus_held_out": gap,
    }


# --- the baselines -----------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOP_WORDS]


class BM25:
    """Okapi BM25 over one conversation's turns (Lucene's non-negative idf)."""

    def __init__(self, texts: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> None:
        import numpy as np

        docs = [tokenize(t) for t in texts]
        self.n = len(docs)
        lengths = np.asarray([len(d) for d in docs], dtype=np.float64)
        norm = k1 * (1.0 - b + b * lengths / max(lengths.mean(), 1e-9))
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, d in enumerate(docs):
            for term, tf in Counter(d).items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(i)
                tfs.append(tf)
        # Per term: the documents holding it and their precomputed BM25 weights.
        self.postings: dict[str, tuple[Any, Any]] = {}
        for term, (ids, tfs) in postings.items():
            idx = np.asarray(ids)
            freq = np.asarray(tfs, dtype=np.float64)
            df = len(ids)
            idf = math.log((self.n - df + 0.5) / (df + 0.5) + 1.0)
            self.postings[term] = (idx, idf * freq * (k1 + 1.0) / (freq + norm[idx]))

    def rank(self, query: str) -> list[int]:
        """Documents sharing at least one term with the query, best first."""
        import numpy as np

        scores = np.zeros(self.n)
        for term in set(tokenize(query)):
            hit = self.postings.get(term)
            if hit is not None:
                scores[hit[0]] += hit[1]
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order if scores[i] > 0]


def dense_rank(matrix: Any, vector: Any) -> list[int]:
    import numpy as np

    return [int(i) for i in np.argsort(-(matrix @ vector), kind="stable")]


def rrf(*rankings: Sequence[int], k: int = RRF_K) -> list[int]:
    """Plain reciprocal-rank fusion: sum of 1 / (k + rank) over the lists naming an item."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda i: (-scores[i], i))


# --- the run ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Options:
    data: Path
    conversations: int | None
    quick: bool
    out: Path | None
    tmp_dir: Path | None
    selection: bool = True


def parse_args(argv: Sequence[str] | None) -> Options:
    p = argparse.ArgumentParser(
        prog="locomo.py",
        description=(
            "LoCoMo evidence-recall benchmark: every dialogue turn a lexmem memory, every "
            "question a search; lexmem's hybrid search and its legs against BM25, dense and "
            "RRF baselines. Prints JSON, a table and a one-line summary."
        ),
    )
    p.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo JSON (default {DEFAULT_DATA})"
    )
    p.add_argument("--out", type=Path, help="write locomo.json, locomo_metrics.json, locomo_run.json here")  # fmt: skip
    p.add_argument("--quick", action="store_true", help=f"the first {QUICK_CONVERSATIONS} conversations only")  # fmt: skip
    p.add_argument("--conversations", type=int, metavar="N", help="the first N conversations only")
    p.add_argument("--tmp-dir", type=Path, help="where to build the store (default: system temp)")
    p.add_argument("--no-selection", action="store_true",
                   help="skip the weight grid and its leave-one-conversation-out figures")  # fmt: skip
    a = p.parse_args(argv)
    if a.conversations is not None and a.conversations < 1:
        p.error("--conversations must be at least 1")
    n = a.conversations or (QUICK_CONVERSATIONS if a.quick else None)
    return Options(a.data.expanduser(), n, a.quick, a.out, a.tmp_dir, not a.no_selection)


def ingest(
    lm: Any, conversations: Sequence[Conversation]
) -> tuple[dict[str, Any], dict[str, tuple[Any, list[str]]]]:
    """Every turn a memory, through lexmem's encoder and store, in batches.

    Returns the timings and, per sample_id, the vectors lexmem stored for its turns
    (in turn order) with the texts as stored, for the baselines.

    Calls used (public attributes of :class:`~lexmem.api.Lexmem`, the same path the
    capture service's batch writes take): ``lexmem.api.scrub`` on each text (what
    ``Lexmem.remember`` does first), ``lm.encoder.encode_batch`` (rule-based type
    classification, batched embedding), ``lm.store.store_many`` (one commit per batch),
    then ``lm.optimize()`` (folds the new rows into the full-text index, as
    ``lexmem optimize`` or the service's maintenance would). Not ``remember()``
    itself: it embeds one text per call, and its Core-tier storage check is moot in a
    fresh folder (trial). The type is left to lexmem's classifier (reported below).
    """
    import numpy as np

    from lexmem.capture.policy import scrub
    from lexmem.encoder import EncodingRequest
    from lexmem.models import MemoryContext, MemorySource

    encode, store, optimize, scrubbing = Stopwatch(), Stopwatch(), Stopwatch(), Stopwatch()
    embed_ms_before = sum(lm.encoder.latency_ms)  # the encoder's draft + embed time per batch
    types: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    scrubbed = 0
    per_conversation: dict[str, float] = {}
    stored: dict[str, tuple[Any, list[str]]] = {}
    t_all = time.perf_counter()
    for c in conversations:
        t0 = time.perf_counter()
        texts = []
        for t in c.turns:
            raw = t.memory_text()
            with scrubbing:
                clean = scrub(raw)
            scrubbed += clean != raw
            texts.append(clean)
        requests = [
            EncodingRequest(
                text,
                context=MemoryContext(
                    source=MemorySource.CONVERSATION, project=c.sample_id,
                    session_id=f"{c.sample_id}:session_{t.session}", conversation_id=c.sample_id,
                    metadata={"dia_id": t.dia_id, "session": t.session,
                              "session_date_time": t.date_time, "speaker": t.speaker},
                ),
            )
            for t, text in zip(c.turns, texts, strict=True)
        ]  # fmt: skip
        stamps = turn_times(c.turns)
        vectors = []
        for start in range(0, len(requests), BATCH):
            part = requests[start : start + BATCH]
            with encode:
                memories = lm.encoder.encode_batch(part)
            if len(memories) != len(part):  # a text over 2,000 characters became chunks
                raise BenchError(f"encode_batch returned {len(memories)} memories for {len(part)} turns")  # fmt: skip
            # Captured when it was said: the session's date, one second per turn, so the
            # session's memories keep their order (what lexmem's session context reads).
            for m, stamp in zip(memories, stamps[start : start + BATCH], strict=True):
                m.created_at = m.last_accessed_at = stamp
            with store:
                lm.store.store_many(memories)
            for m in memories:
                types[str(m.type)] += 1
                methods[str(m.classification_method)] += 1
                vectors.append(m.embedding)
        per_conversation[c.sample_id] = time.perf_counter() - t0
        stored[c.sample_id] = (np.asarray(vectors, dtype=np.float32), texts)
        log(
            f"  {c.sample_id}: {len(c.turns)} turns stored in {per_conversation[c.sample_id]:.1f} s"
        )
    with optimize:
        lm.optimize()
    total = time.perf_counter() - t_all
    embed_s = (sum(lm.encoder.latency_ms) - embed_ms_before) / 1000
    turns = sum(len(c.turns) for c in conversations)
    info = {
        "api": "lexmem.api.scrub, Lexmem.encoder.encode_batch(EncodingRequest(text, "
        "MemoryContext(source=conversation, project=sample_id, session_id=<sample_id>:session_<n>, "
        "conversation_id=sample_id, metadata={dia_id, session, session_date_time, speaker}))), "
        "created_at = session date + 1 s per turn, Lexmem.store.store_many per batch, then "
        "Lexmem.optimize()",
        "batch_size": BATCH,
        "memories": turns,
        "wall_s": round(total, 2),
        "scrub_s": round(scrubbing.seconds, 2),
        "encode_s": round(encode.seconds, 2),
        "encode_of_which_draft_and_embed_s": round(embed_s, 2),
        "encode_of_which_classify_s": round(encode.seconds - embed_s, 2),
        "store_many_s": round(store.seconds, 2),
        "optimize_s": round(optimize.seconds, 2),
        "memories_per_s": round(turns / total, 1) if total else None,
        "per_conversation_s": {k: round(v, 2) for k, v in per_conversation.items()},
        "types": dict(types),
        "classification_methods": dict(methods),
        "texts_changed_by_scrub": scrubbed,
    }
    return info, stored


def select_weights(
    lm: Any,
    conversations: Sequence[Conversation],
    shipped_rankings: Mapping[str, Sequence[str]],
    gold: Mapping[str, Sequence[str]],
    categories: Mapping[str, int],
) -> dict[str, Any]:
    """Search every question of categories 1-4 with each combination of
    :data:`SELECTION_GRID` (the shipped one's rankings are reused), and choose by leaving
    one conversation out (:func:`select_held_out`). Says whether Fusion's defaults are
    the combination chosen over all the conversations."""
    from dataclasses import replace

    from lexmem.store.lance import MemoryFilter

    base = lm.searcher.fusion
    configs = grid_configurations()
    shipped = next(
        (
            n
            for n, values in configs.items()
            if all(getattr(base, k) == v for k, v in values.items())
        ),
        None,
    )
    scores: dict[str, dict[str, dict[str, float]]] = {}
    in_sample: dict[str, dict[str, Any]] = {}
    conversation_of = {q.key: c.sample_id for c in conversations for q in c.questions}
    import lexmem.embedder

    # Not timed: the cache spares embedding each question once per combination.
    cache_size, lexmem.embedder.QUERY_CACHE_SIZE = lexmem.embedder.QUERY_CACHE_SIZE, 1024
    t0 = time.perf_counter()
    try:
        for name, values in configs.items():
            if name == shipped:
                ranked = {k: list(shipped_rankings[k]) for k in gold}
            else:
                log(f"  weights {name}: searching categories 1-4 again")
                lm.searcher.fusion = replace(base, **values)
                ranked = {}
                for c in conversations:
                    flt = MemoryFilter(project=c.sample_id)
                    for q in c.questions:
                        if q.category not in HEADLINE_CATEGORIES:
                            continue
                        found = lm.search(
                            q.text, flt, limit=TOP, mode="hybrid", record_access=False
                        )
                        ranked[q.key] = [str(h.memory.metadata.get("dia_id")) for h in found.hits]
            scores[name] = {k: question_scores(_dedupe(ranked.get(k, ())), set(gold[k]))
                            for k in gold if categories[k] in HEADLINE_CATEGORIES}  # fmt: skip
            in_sample[name] = _mean(list(scores[name].values()))
    finally:
        lm.searcher.fusion = base
        lexmem.embedder.QUERY_CACHE_SIZE = cache_size
    chosen = select_held_out(scores, conversation_of, categories)
    return {
        "grid": {k: list(v) for k, v in SELECTION_GRID.items()},
        "objective": "mean R@10 + mean Hit@10, categories 1-4",
        "procedure": "each conversation scored with the combination best on the other "
        "conversations; the shipped weights must be the combination best on all of them",
        "configurations_in_sample": in_sample,
        "shipped": shipped,
        "shipped_is_chosen": shipped == chosen["chosen"],
        **chosen,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def run(opts: Options, tmp: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    import lexmem.embedder
    from lexmem.api import Lexmem
    from lexmem.settings import Settings
    from lexmem.store.lance import MemoryFilter

    # Every timed search embeds its question afresh: the query-embedding cache would
    # answer the questions this bench asks in each mode, which a new question never is.
    lexmem.embedder.QUERY_CACHE_SIZE = 0
    started = time.perf_counter()
    cpu_started = os.times()
    log(f"reading {opts.data}")
    conversations = load_conversations(opts.data, opts.conversations)
    gold, categories = gold_of(conversations)
    n_questions = len(gold)
    log(
        f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
        f"{n_questions} questions with gold"
    )

    # Default settings, not the user's settings.toml: a fresh folder, the embedded model.
    lm = Lexmem.open(tmp / "lexmem", settings=Settings())
    rankings: dict[str, dict[str, list[str]]] = {s: {} for s in SYSTEMS}
    selection: dict[str, Any] | None = None
    latency: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    search_parts: dict[str, dict[str, list[float]]] = {m: {} for m in LEXMEM_MODES}
    lexmem_hits_short = dict.fromkeys(LEXMEM_MODES, 0)
    try:
        t0 = time.perf_counter()
        lm.embedder.load()
        model_load_s = time.perf_counter() - t0
        log(f"model loaded in {model_load_s:.1f} s; ingesting")
        ingest_info, stored = ingest(lm, conversations)
        log(f"ingest: {ingest_info['memories']} memories in {ingest_info['wall_s']:.1f} s")

        first = conversations[0]
        for q in first.questions[:WARMUP]:  # first searches open the index, start the pool
            for mode in LEXMEM_MODES:
                lm.search(q.text, MemoryFilter(project=first.sample_id), limit=TOP, mode=mode,
                          record_access=False)  # fmt: skip

        qi = 0
        for c in conversations:
            log(f"  searching {c.sample_id}: {len(c.questions)} questions")
            matrix, texts = stored[c.sample_id]
            dia = [t.dia_id for t in c.turns]
            t0 = time.perf_counter()
            bm25 = BM25(texts)
            bm25_build_ms = (time.perf_counter() - t0) * 1000
            flt = MemoryFilter(project=c.sample_id)
            for q in c.questions:
                # lexmem's modes in rotating order, so load from other processes hits all alike
                for j in range(len(LEXMEM_MODES)):
                    mode = LEXMEM_MODES[(qi + j) % len(LEXMEM_MODES)]
                    system = "lexmem" if mode == "hybrid" else f"lexmem_{mode}"
                    t0 = time.perf_counter()
                    found = lm.search(q.text, flt, limit=TOP, mode=mode, record_access=False)
                    latency[system].append((time.perf_counter() - t0) * 1000)
                    for part, ms in found.timings_ms.items():
                        search_parts[mode].setdefault(part, []).append(ms)
                    ids = [str(h.memory.metadata.get("dia_id")) for h in found.hits]
                    lexmem_hits_short[mode] += len(ids) < TOP
                    rankings[system][q.key] = ids
                qi += 1

                t0 = time.perf_counter()
                b = bm25.rank(q.text)
                latency["bm25"].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                d = dense_rank(matrix, lm.embedder.embed_one(q.text))
                latency["dense"].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                f = rrf(b, d)
                latency["rrf"].append((time.perf_counter() - t0) * 1000 + latency["bm25"][-1]
                                      + latency["dense"][-1])  # fmt: skip
                rankings["bm25"][q.key] = [dia[i] for i in b[:TOP]]
                rankings["dense"][q.key] = [dia[i] for i in d[:TOP]]
                rankings["rrf"][q.key] = [dia[i] for i in f[:TOP]]
            log(f"    BM25 index for {c.sample_id} built in {bm25_build_ms:.0f} ms")
        selection = (
            select_weights(lm, conversations, rankings["lexmem"], gold, categories)
            if opts.selection
            else None
        )
    finally:
        lm.close()

    metrics = {s: evaluate(rankings[s], gold, categories) for s in SYSTEMS}
    # Same vectors, same cosine: lexmem's vector leg and the dense baseline should agree.
    same_top10 = sum(
        rankings["lexmem_vector"][k][:10] == rankings["dense"][k][:10] for k in gold
    ) / max(1, len(gold))
    lat: dict[str, dict[str, Any]] = {s: percentiles(v) for s, v in latency.items()}
    for mode in LEXMEM_MODES:
        system = "lexmem" if mode == "hybrid" else f"lexmem_{mode}"
        lat[system]["parts_p50_ms"] = {
            k: percentiles(v)["p50_ms"] for k, v in search_parts[mode].items()
        }
        lat[system]["queries_with_fewer_than_50_hits"] = lexmem_hits_short[mode]
    lat["dense"]["note"] = "query embedding (embed_one) + numpy cosine over the conversation"
    lat["rrf"]["note"] = "BM25 + dense + fusion"

    head = metrics["lexmem"]["overall"]["r@10"]
    base = metrics["bm25"]["overall"]["r@10"]
    n_conv = len(conversations)
    ours, bm25 = metrics["lexmem"], metrics["bm25"]
    multi = (
        (ours["by_category"].get("1") or {}).get("r@10"),
        (bm25["by_category"].get("1") or {}).get("r@10"),
    )
    rows = [
        ("LoCoMo R@10, categories 1-4", head, "%", "BM25 R@10", base),
        ("LoCoMo Hit@10", ours["overall"]["hit@10"], "%", "BM25 Hit@10", bm25["overall"]["hit@10"]),
        ("LoCoMo NDCG@10", ours["overall"]["ndcg@10"], "%", "BM25 NDCG@10", bm25["overall"]["ndcg@10"]),
        ("LoCoMo R@10 vs RRF", head, "%", "RRF of BM25 and dense R@10", metrics["rrf"]["overall"]["r@10"]),
        ("LoCoMo query p50 (whole search)", lat["lexmem"]["p50_ms"], "ms",
         "dense baseline p50 (embedding + numpy)", lat["dense"]["p50_ms"]),
    ]  # fmt: skip
    if multi[0] is not None and multi[1] is not None:
        rows.insert(2, ("LoCoMo multi-hop R@10", multi[0], "%", "BM25 multi-hop R@10", multi[1]))
    if selection is not None:
        held = selection["held_out"]
        inside = selection["in_sample"]
        held_multi = (held["by_category"].get("1") or {}).get("r@10")
        inside_multi = (inside["by_category"].get("1") or {}).get("r@10")
        rows += [
            ("LoCoMo R@10 held out (weights chosen leaving one conversation out)",
             held["overall"]["r@10"], "%", "in-sample R@10 of the weights chosen on all", inside["overall"]["r@10"]),
            ("LoCoMo Hit@10 held out", held["overall"]["hit@10"], "%", "in-sample Hit@10",
             inside["overall"]["hit@10"]),
        ]  # fmt: skip
        if held_multi is not None and inside_multi is not None:
            rows.append(("LoCoMo multi-hop R@10 held out", held_multi, "%", "in-sample multi-hop R@10", inside_multi))  # fmt: skip
    result: dict[str, Any] = {
        "benchmark": NAME,
        "figures": make_figures(*rows),
        "summary": make_summary(
            f"LoCoMo R@10, categories 1-4 ({n_conv} conversations, lexmem hybrid)",
            head,
            "%",
            "BM25 R@10",
            base,
        ),
        "data": {
            "path": str(opts.data),
            "conversations": [c.sample_id for c in conversations],
            "turns": sum(len(c.turns) for c in conversations),
            "questions_with_gold": n_questions,
            "questions_by_category": dict(sorted(Counter(categories.values()).items())),
            "skipped_without_gold": {
                str(k): v
                for k, v in sorted(sum((c.skipped for c in conversations), Counter()).items())
            },
            "evidence_ids_dropped": [
                f"{c.sample_id}:{e}" for c in conversations for e in c.dropped_evidence
            ],
        },
        "protocol": {
            "memory_text": "(<session date_time>) <speaker>: <text> [shares <blip_caption>]",
            "search": f"Lexmem.search(question, MemoryFilter(project=sample_id), limit={TOP}, "
            "mode=hybrid|bm25|vector, record_access=False)",
            "gold": "evidence split on ';' and spaces, D:11:26 -> D11:26, D30:05 -> D30:5, "
            "ids absent from the conversation dropped; questions left without gold skipped",
            "metrics": "percent; R@k = share of gold turns in the top k, averaged over "
            "questions; NDCG@10 binary relevance; MRR over the top 50",
            "headline_categories": list(HEADLINE_CATEGORIES),
            "category_names": {str(k): v for k, v in CATEGORY_NAMES.items()},
            "bm25": f"k1 {BM25_K1}, b {BM25_B}, idf log(1 + (N - df + 0.5) / (df + 0.5)), "
            "lower-cased [a-z0-9]+ tokens, NLTK English stop words (179), statistics per "
            "conversation; only turns sharing a term are ranked",
            "dense": "cosine between the vectors lexmem stored and the query's embed_one vector",
            "query_cache": "off while timing: every search embeds its question afresh",
            "rrf": f"sum of 1/({RRF_K} + rank) over the BM25 ranking (matching turns) and the "
            "dense ranking (every turn)",
        },
        "systems": SYSTEMS,
        "metrics": metrics,
        "table_categories_1_4": {s: metrics[s]["overall"] for s in SYSTEMS},
        "ingest": ingest_info,
        "consistency": {
            "lexmem_vector_equals_dense_top10_share": round(same_top10, 4),
            "note": "lexmem's vector leg and the dense baseline rank the same stored vectors "
            "by cosine; a share below ~1 means the store's vector search is approximate "
            "or filtered differently",
        },
        "latency": lat,
        "selection": selection,
        "reference_figures_all_ten_conversations": {
            "bm25": {"r@10": 58.9, "ndcg@10": 46.4},
            "dense_all_minilm_l6_v2": {"r@10": 48.6},
            "rrf": {"r@10": 58.4, "hit@10": 65.3},
            "bm25_on_locomo10_dev_five_conversations": {"r@10": 60.2, "hit@10": 66.1},
        },
        "machine": machine_info(),
        "run": {
            "options": {
                "data": str(opts.data),
                "conversations": opts.conversations,
                "quick": opts.quick,
            },
            "model_load_s": round(model_load_s, 2),
            "total_s": round(time.perf_counter() - started, 1),
            "process_cpu_s": round(sum(os.times()[:2]) - sum(cpu_started[:2]), 1),
            "load_average_at_end": load_average(),
        },
    }
    return result, rankings["lexmem"]


def table(result: dict[str, Any]) -> str:
    cats = [c for c in (*HEADLINE_CATEGORIES, 5) if str(c) in result["metrics"]["lexmem"]["by_category"]]  # fmt: skip
    header = ["system (cats 1-4)", "R@5", "R@10", "Hit@10", "NDCG@10", "MRR"]
    header += [f"R@10 c{c}" for c in cats] + ["p50 ms", "p95 ms"]
    rows = [header]
    for s in SYSTEMS:
        m = result["metrics"][s]
        o = m["overall"]
        row = [s, *(f"{o[k]:.1f}" for k in METRICS)]
        row += [f"{m['by_category'][str(c)]['r@10']:.1f}" for c in cats]
        lat = result["latency"][s]
        row += [f"{lat['p50_ms']:.1f}", f"{lat['p95_ms']:.1f}"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    n = result["metrics"]["lexmem"]
    counts = ", ".join(f"c{c} {n['by_category'][str(c)]['n']}" for c in cats)
    lines.append(f"questions: {n['overall']['n']} in categories 1-4 ({counts}); c5 = adversarial, apart")  # fmt: skip
    sel = result.get("selection")
    if sel:
        lines.append("")
        lines.append("weights (categories 1-4)  R@10 in-sample")
        for name, o in sel["configurations_in_sample"].items():
            mark = " <- shipped" if name == sel["shipped"] else ""
            lines.append(f"  {name}  {o['r@10']:.1f} (Hit@10 {o['hit@10']:.1f}){mark}")
        for label, block in (("held out", sel["held_out"]), ("in-sample", sel["in_sample"])):
            o = block["overall"]
            mh = (block["by_category"].get("1") or {}).get("r@10")
            lines.append(f"{label}: R@10 {o['r@10']:.1f}, Hit@10 {o['hit@10']:.1f}, multi-hop R@10 "
                         f"{'-' if mh is None else f'{mh:.1f}'}")  # fmt: skip
        picks = ", ".join(f"{c}: {n}" for c, n in sel["picks"].items())
        lines.append(f"picked per held-out conversation: {picks}")
        verdict = "yes" if sel["shipped_is_chosen"] else f"NO, the procedure chose {sel['chosen']}"
        lines.append(f"shipped weights are the ones chosen on all conversations: {verdict}")
    return "\n".join(lines)


def summary_line(result: dict[str, Any]) -> str:
    s = result["summary"]
    m = result["metrics"]
    ing = result["ingest"]
    sel = result.get("selection")
    held = ""
    if sel:
        h = sel["held_out"]["overall"]
        held = (f"; held out (one conversation out) R@10 {h['r@10']:.1f}%, Hit@10 {h['hit@10']:.1f}%, "
                f"in-sample minus held out {sel['gap_in_sample_minus_held_out']['r@10']:+.1f}")  # fmt: skip
    return (
        f"{NAME}: lexmem R@10 {s['value']:.1f}% vs BM25 {s['baseline_value']:.1f}% "
        f"(x{s['ratio']:.2f}), dense {m['dense']['overall']['r@10']:.1f}%, "
        f"RRF {m['rrf']['overall']['r@10']:.1f}%; lexmem Hit@10 "
        f"{m['lexmem']['overall']['hit@10']:.1f}%, NDCG@10 {m['lexmem']['overall']['ndcg@10']:.1f}; "
        f"{m['lexmem']['overall']['n']} questions, {len(result['data']['conversations'])} "
        f"conversations; ingest {ing['memories']} turns in {ing['wall_s']:.1f} s, hybrid p50 "
        f"{result['latency']['lexmem']['p50_ms']:.0f} ms{held}"
    )


def _write_json(path: Path, data: Any) -> None:
    try:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise BenchError(f"cannot write {path} ({exc.strerror})") from exc


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        from lexmem.errors import LexmemError
    except ImportError as exc:
        print(f"{NAME}: error: lexmem is not importable ({exc}); use .venv/bin/python", file=sys.stderr)  # fmt: skip
        return 1
    # SIGTERM (a timeout, a kill) unwinds like Ctrl-C, so the temporary store is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if not opts.data.is_file():
            raise BenchError(f"no LoCoMo data at {opts.data} (use --data PATH)")
        if opts.out is not None:  # fail now, not after minutes of measuring
            try:
                opts.out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BenchError(f"cannot create {opts.out} ({exc.strerror})") from exc
        with bench_tempdir(opts.tmp_dir) as tmp:
            result, run_file = run(opts, tmp)
        if opts.out is not None:
            _write_json(opts.out / "locomo_metrics.json", {k: v for k, v in result.items() if k != "summary"})  # fmt: skip
            _write_json(opts.out / "locomo_run.json", run_file)
        write_result(NAME, result, opts.out)
        print(table(result))
        print(summary_line(result), flush=True)
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, LexmemError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{NAME}: error: {exc.strerror or exc} ({exc.filename or ''})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
