"""A question against a small realistic store: the direct answer first, a short list.

Real store, real model, sessions captured through the inbox and the capture service
(tests/search_corpus.py).
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import shared_model
from search_corpus import ANSWER, QUESTION, populate

from lexmem.api import Lexmem, listed, match_spans
from lexmem.cli import cli
from lexmem.embedder import Embedder
from lexmem.store.search import query_terms


def _words(text: str, query: str) -> list[str]:
    return [text[a:b] for a, b in match_spans(text, query)]


def test_the_direct_answer_ranks_above_the_session_handoff(lm: Lexmem) -> None:
    ids = populate(lm)
    assert lm.count() == 47
    hits = lm.search(QUESTION, limit=200, record_access=False).hits
    order = [h.memory.id for h in hits]
    # The handoff of the session that fixed the shop's database migrations says
    # "database" and "shop" often and at length; the answer says what the question asks.
    assert order[0] == ids["answer"], [h.memory.content[:50] for h in hits[:3]]
    assert order.index(ids["answer"]) < order.index(ids["handoff"])


def test_a_listing_keeps_what_is_relevant_to_a_question(lm: Lexmem) -> None:
    ids = populate(lm)
    hits = lm.search(QUESTION, limit=200, record_access=False).hits
    assert len(hits) > 15  # ranking takes every memory with a word or some meaning in common
    shown = listed(hits, QUESTION)
    texts = [h.memory.content for h in shown]
    assert shown[0].memory.content == ANSWER
    assert ids["handoff"] in {h.memory.id for h in shown}
    assert len(shown) <= 8, texts
    # Matched by "use" alone, or by a vague cosine: not listed.
    for unrelated in ("British spelling", "Django 5", "Dialogue uses", "Pi-hole", "Anna owns"):
        assert not any(unrelated in t for t in texts), unrelated
    # A single word that is the whole query lists what holds it.
    backups = listed(lm.search("backups", limit=200, record_access=False).hits, "backups")
    assert {h.memory.content.split()[0] for h in backups} == {"Backups", "Nightly"}


def test_match_spans_whole_words_any_case_stems_and_stop_words() -> None:
    text = "Databases: the shop's DB uses the database the shop used; a user is no use."
    assert _words(text, "which database does the shop use") == [
        "Databases", "shop", "uses", "database", "shop", "used", "use",
    ]  # fmt: skip
    assert _words("Never deploy the shop on a Friday", "DEPLOY") == ["deploy"]
    assert _words("metadata and data", "data") == ["data"]  # whole words only
    assert _words("the the", "the") == ["the", "the"]  # only stop words: they are the query
    assert match_spans("anything", "") == [] and query_terms("   ") == set()


def test_the_cli_table_lists_what_is_relevant_and_json_keeps_the_ranking(
    lm: Lexmem, embedder: Embedder
) -> None:
    ids = populate(lm)
    with shared_model(embedder):
        table = CliRunner().invoke(cli, ["search", QUESTION, "-n", "20"], catch_exceptions=False)
        data = CliRunner().invoke(
            cli, ["search", QUESTION, "-n", "20", "--json"], catch_exceptions=False
        )
    rows = table.stdout.splitlines()[1:]
    assert rows[0].startswith(ids["answer"][:8])
    assert 1 <= len(rows) <= 8, table.stdout  # not twenty
    assert not any("British spelling" in r for r in rows)
    assert len(json.loads(data.stdout)["hits"]) == 20  # scripts and agents: the whole top-k
