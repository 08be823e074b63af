"""Hybrid search on PostgreSQL + pgvector: :class:`PostgresSearcher` implements
:class:`lexmem.store.protocol.SearchBackend` with the team database's own queries and the
local store's fusion (:mod:`lexmem.store.fusion`), so the same memories rank the same way
on either backend (``tests/test_search_parity.py`` holds them to it).

- The keyword leg scores BM25 in SQL over ``search_text``, the generated ``tsvector``
  holding the memory's own words at weight A and its session neighbours' (the context
  field) at weight D, with the context field boosted by ``Fusion.context``: the local
  leg's fielded BM25, OR semantics, over PostgreSQL's English stemming. Why not
  ``ts_rank``: it has no inverse document frequency, so a question's common word
  ("use") weighs as much as its rare one ("PostgreSQL"), and the keyword evidence the
  fusion standardises would mean something else on this backend.
- The vector leg orders by cosine distance (``<=>``) through the HNSW index with
  ``hnsw.ef_search`` raised to the depth; pgvector 0.6 filters after the index scan, so
  when a filter leaves the scan short of the depth the query runs again exact.
- Hybrid search then reads the sessions of the best candidates whole, with each row's
  exact cosine computed by the server, and the fusion does the rest.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lexmem.models import utcnow
from lexmem.settings import SearchSettings
from lexmem.store.fusion import (
    Candidate,
    Fusion,
    SearchResult,
    blend,
    check_request,
    context_sessions,
    hit,
    leg_depth,
    session_context,
)
from lexmem.store.postgres.schema import MEMORY_COLUMNS
from lexmem.store.postgres.store import PostgresStore, filter_sql, vector_text
from lexmem.store.protocol import MemoryFilter
from lexmem.store.schema import ROW_COLUMNS, memory_from_row

if TYPE_CHECKING:
    import psycopg

    from lexmem.embedder import Embedder

__all__ = ["BM25_B", "BM25_K1", "PostgresSearcher"]

# BM25's constants, LanceDB's (and Lucene's) defaults, so both keyword legs score alike.
BM25_K1 = 1.2
BM25_B = 0.75

_TABLE = "lexmem.memories"
# The memory row's fields under their lexmem names (what memory_from_row reads).
_SELECT = ", ".join(f'{MEMORY_COLUMNS[name]} AS "{name}"' for name in ROW_COLUMNS)
# The same fields of the keyword leg's matches (``m``).
_PLAIN = ", ".join(f'm."{name}"' for name in ROW_COLUMNS)
# The words of a text as LanceDB's tokenizer splits them, at every punctuation mark
# (PostgreSQL's parser alone keeps "ivy-auth", "a/b.go" or "x_y" whole as well): as
# search_text is made (schema step 4).
_WORDS = "regexp_replace({}, '[[:punct:]]+', ' ', 'g')"
# Each field's token count in a row's tsvector: positions carry the weight of the field
# they came from (stop words take a position but no entry, as LanceDB's tokenizer drops
# them from its counts).
_LENGTHS = """
    SELECT count(*) FILTER (WHERE w = 'A') AS dla, count(*) FILTER (WHERE w = 'D') AS dld
    FROM unnest({v}) AS u, unnest(u.weights) AS w
"""


def _named(flt: MemoryFilter) -> tuple[str, dict[str, Any]]:
    """The store's condition for ``flt`` (:func:`~lexmem.store.postgres.store.filter_sql`)
    with named parameters (``f0``, ``f1``, ...), so the legs' queries name theirs too."""
    where, values = filter_sql(flt)
    pieces = where.split("%s")
    text = pieces[0] + "".join(f"%(f{n})s{piece}" for n, piece in enumerate(pieces[1:]))
    return text, {f"f{n}": v for n, v in enumerate(values)}


def _tsquery_lexeme(lexeme: str) -> str:
    """A lexeme as tsquery input takes it, quoted: matched as it is, never parsed."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _utc(value: Any) -> Any:
    return value.astimezone(UTC) if isinstance(value, datetime) else value


def _row(record: dict[str, Any]) -> dict[str, Any]:
    """A database row as the memory row lexmem's rows are (``metadata`` as the JSON text
    :func:`lexmem.store.schema.memory_to_row` writes, times in ``datetime.UTC``)."""
    row = {k: _utc(v) for k, v in record.items()}
    meta = row.get("metadata")
    if meta is not None and not isinstance(meta, str):
        row["metadata"] = json.dumps(meta, sort_keys=True) if meta else None
    return row


class PostgresSearcher:
    """Runs searches against one team database with one embedder."""

    def __init__(
        self, store: PostgresStore, embedder: Embedder, settings: SearchSettings | None = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        self.fusion = Fusion()
        self._executor: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # The corpus' size and mean field lengths, which BM25 normalises by: a pass over
        # the whole table, kept while the number of memories stays the same.
        self._lengths: tuple[int, float, float, int] | None = None

    def search(
        self,
        query: str,
        flt: MemoryFilter | None = None,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        record_access: bool = True,
        now: datetime | None = None,
    ) -> SearchResult:
        """The best ``limit`` memories for ``query`` under ``flt`` (active ones by default)."""
        query = check_request(query, mode, limit)
        flt = flt or MemoryFilter()
        where, params = _named(flt)
        depth = leg_depth(mode, limit, self.fusion)
        timings: dict[str, float] = {}
        candidates: dict[str, Candidate] = {}

        # The keyword leg runs on a worker thread, on a connection of its own, while this
        # one embeds the query and runs the vector leg.
        keyword: Future[tuple[list[dict[str, Any]], float]] | None = None
        vector: str | None = None
        if mode in ("hybrid", "bm25"):
            keyword = self._pool().submit(self._timed_bm25, query, where, params, depth)
        if mode in ("hybrid", "vector"):
            t0 = time.perf_counter()
            embedding = self.embedder.embed_one(query)
            vector = vector_text(embedding)
            timings["embed"] = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            rows = self._nearest(embedding, flt, depth)
            for rank, row in enumerate(rows, start=1):
                c = candidates.setdefault(row["id"], Candidate(row["id"], row))
                c.vector_rank = rank
                c.similarity = 1.0 - float(row.get("_distance") or 0.0)
            timings["vector"] = (time.perf_counter() - t0) * 1000
        if keyword is not None:
            rows, timings["bm25"] = keyword.result()
            for rank, row in enumerate(rows, start=1):
                c = candidates.setdefault(row["id"], Candidate(row["id"], row))
                c.bm25_rank, c.bm25_score = rank, float(row.get("_score") or 0.0)

        if mode == "hybrid" and self.fusion.session_context and candidates and vector:
            t0 = time.perf_counter()
            self._session_context(candidates, vector, where, params)
            timings["context"] = (time.perf_counter() - t0) * 1000

        t0 = time.perf_counter()
        ranked = blend(
            list(candidates.values()), mode, now or utcnow(), query, self.settings, self.fusion
        )[:limit]
        hits = [
            hit(memory_from_row(c.row), score, c, relevance, rec)
            for score, c, relevance, rec in ranked
        ]
        timings["fuse"] = (time.perf_counter() - t0) * 1000
        if record_access and hits:
            t0 = time.perf_counter()
            self.store.record_access_many([h.memory.id for h in hits])
            timings["record_access"] = (time.perf_counter() - t0) * 1000
        return SearchResult(query, mode, hits, timings)

    def _pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lexmem-bm25")
            return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- the keyword leg ---------------------------------------------------------------

    def _timed_bm25(
        self, query: str, where: str, params: dict[str, Any], depth: int
    ) -> tuple[list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        rows = self._bm25(query, where, params, depth)
        return rows, (time.perf_counter() - t0) * 1000

    def _bm25(
        self, query: str, where: str, params: dict[str, Any], depth: int
    ) -> list[dict[str, Any]]:
        """The ``depth`` rows ``where`` admits that hold any of the query's words, by
        fielded BM25 as LanceDB's multi-field query scores it: the better of the
        content field's score and ``Fusion.context`` times the context field's, each
        with its own document frequencies and mean length over the memories that have
        the field (over the whole table, whatever the filter, as LanceDB's index)."""
        boost = self.fusion.context
        with self.store.db.tx("searching the team database's text") as cur:
            # Each word of the query as often as it occurs, as LanceDB's query counts it.
            cur.execute(
                "SELECT lexeme, coalesce(array_length(positions, 1), 1)"
                f" FROM unnest(to_tsvector('english', {_WORDS.format('%s')}))",
                (query,),
            )
            times = {str(r[0]): int(r[1]) for r in cur.fetchall()}
            lexemes = sorted(times)
            if not lexemes:
                return []
            total, avg_a, avg_d, with_context = self._corpus(cur)
            weights = "AD" if boost > 0 else "A"
            cur.execute(
                "SELECT t.lexeme, "
                + ", ".join(
                    f"(SELECT count(*) FROM {_TABLE} WHERE search_text @@ (t.q || ':{w}')::tsquery)"
                    for w in weights
                )
                + " FROM unnest(%s::text[], %s::text[]) AS t(lexeme, q)",
                (lexemes, [_tsquery_lexeme(x) for x in lexemes]),
            )
            frequencies = {r[0]: r[1:] for r in cur.fetchall()}
            idf_a = [times[x] * self._idf(total, frequencies[x][0]) for x in lexemes]
            idf_d = (
                [times[x] * self._idf(with_context, frequencies[x][1]) for x in lexemes]
                if boost > 0
                else [0.0] * len(lexemes)
            )
            # OR of the words, each in the fields searched: a match on the context alone
            # counts only when the context field does.
            tsquery = " | ".join(
                f"{_tsquery_lexeme(x)}{'' if boost > 0 else ':A'}" for x in lexemes
            )
            cur.execute(
                f"""
                WITH q(lexeme, idf_a, idf_d) AS (
                    SELECT * FROM unnest(%(lex)s::text[], %(idf_a)s::float8[],
                                         %(idf_d)s::float8[])
                ),
                m AS (
                    SELECT {_SELECT}, search_text FROM {_TABLE}
                    WHERE search_text @@ %(tsq)s::tsquery AND {where}
                )
                SELECT {_PLAIN}, s.score AS _score
                FROM m,
                LATERAL ({_LENGTHS.format(v="m.search_text")}) AS l,
                LATERAL (
                    SELECT greatest(coalesce(sum(
                        q.idf_a * x.tfa * (%(k1)s + 1)
                            / (x.tfa + %(k1)s * (1 - %(b)s + %(b)s * l.dla / %(avg_a)s))
                    ), 0), %(boost)s * coalesce(sum(
                        q.idf_d * x.tfd * (%(k1)s + 1)
                            / (x.tfd + %(k1)s * (1 - %(b)s + %(b)s * l.dld / %(avg_d)s))
                    ), 0)) AS score
                    FROM (
                        SELECT u.lexeme,
                               count(*) FILTER (WHERE w = 'A') AS tfa,
                               count(*) FILTER (WHERE w = 'D') AS tfd
                        FROM unnest(m.search_text) AS u, unnest(u.weights) AS w
                        WHERE u.lexeme = ANY(%(lex)s::text[])
                        GROUP BY u.lexeme
                    ) AS x JOIN q USING (lexeme)
                ) AS s
                ORDER BY s.score DESC, m.id COLLATE "C"
                LIMIT %(depth)s
                """,
                {
                    **params,
                    "lex": lexemes,
                    "idf_a": idf_a,
                    "idf_d": idf_d,
                    "tsq": tsquery,
                    "k1": BM25_K1,
                    "b": BM25_B,
                    "avg_a": max(avg_a, 1e-9),
                    "avg_d": max(avg_d, 1e-9),
                    "boost": max(boost, 0.0),
                    "depth": depth,
                },
            )
            names = [d.name for d in cur.description or ()]
            out = []
            for record in cur.fetchall():
                out.append(_row(dict(zip(names, record, strict=True))))
            return out

    @staticmethod
    def _idf(total: int, frequency: int) -> float:
        """BM25's inverse document frequency (the form LanceDB uses, never negative)."""
        return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))

    def _corpus(self, cur: psycopg.Cursor[Any]) -> tuple[int, float, float, int]:
        """How many memories there are, the mean length of their content and of their
        context (over those with one), and how many have a context."""
        cur.execute(f"SELECT count(*) FROM {_TABLE}")
        found = cur.fetchone()
        total = int(found[0]) if found else 0
        cached = self._lengths
        if cached is not None and cached[0] == total:
            return cached
        cur.execute(
            f"""
            SELECT avg(l.dla), avg(nullif(l.dld, 0)), count(nullif(l.dld, 0))
            FROM {_TABLE} AS m, LATERAL ({_LENGTHS.format(v="m.search_text")}) AS l
            """
        )
        row = cur.fetchone()
        lengths = (
            total,
            float(row[0] or 0.0) if row else 0.0,
            float(row[1] or 0.0) if row else 0.0,
            int(row[2] or 0) if row else 0,
        )
        self._lengths = lengths
        return lengths

    # -- the vector leg ----------------------------------------------------------------

    def _nearest(self, embedding: Any, flt: MemoryFilter, depth: int) -> list[dict[str, Any]]:
        """The ``depth`` rows ``flt`` admits nearest ``embedding`` by cosine, nearest first
        (ties by id), with ``_distance``: the store's HNSW scan, exact when a filter
        leaves it short (:meth:`PostgresStore.nearest_rows`)."""
        rows = [_row(r) for r in self.store.nearest_rows(embedding, flt, depth, _SELECT)]
        for r in rows:
            r["_distance"] = r.pop("distance")
        rows.sort(key=lambda r: (float(r["_distance"]), r["id"]))  # the index orders no ties
        return rows

    # -- session context ---------------------------------------------------------------

    def _session_context(
        self, candidates: dict[str, Candidate], vector: str, where: str, params: dict[str, Any]
    ) -> None:
        """Read the sessions of the best candidates whole, in session order with each
        memory's exact cosine, and let the fusion give each its neighbours' keyword
        evidence (:func:`lexmem.store.fusion.session_context`): one query."""
        sessions = context_sessions(candidates, self.fusion)
        if not sessions:
            return
        with self.store.db.tx("reading sessions from the team database") as cur:
            rows = self._session_rows(cur, sorted(sessions), vector, where, params)
        if rows:
            sims: Sequence[float] = [float(r.pop("_similarity")) for r in rows]
            session_context(candidates, rows, sims, sessions, self.fusion, partial=False)

    def _session_rows(
        self,
        cur: psycopg.Cursor[Any],
        sessions: list[str],
        vector: str,
        where: str,
        params: dict[str, Any],
    ) -> list[dict[str, Any]]:
        return self._plain(
            cur,
            f"""
            SELECT {_SELECT}, 1 - (embedding <=> %(v)s::vector) AS _similarity FROM {_TABLE}
            WHERE {where} AND session_id = ANY(%(sessions)s::text[])
            ORDER BY session_id COLLATE "C", created_at, id COLLATE "C"
            LIMIT %(max_rows)s
            """,
            {**params, "v": vector, "sessions": sessions, "max_rows": self.fusion.max_rows},
        )

    @staticmethod
    def _plain(cur: psycopg.Cursor[Any], sql: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        cur.execute(sql, args)
        names = [d.name for d in cur.description or ()]
        return [_row(dict(zip(names, r, strict=True))) for r in cur.fetchall()]
