"""Seed 001 (MEM-03): the encoder's criteria and scenarios, with the real model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.encoder import EncoderOptions, EncodingRequest, MemoryEncoder
from lexmem.errors import InvalidInputError
from lexmem.models import (
    ClassificationMethod,
    MemoryContext,
    MemorySource,
    MemoryType,
    TypeClassification,
)


class ScriptedLlm:
    """Stands in for the optional LLM client (arrives with the integrations work).

    Fake because a real model is slow and non-deterministic; it records each call.
    """

    def __init__(self, answer: TypeClassification | None = None, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.answer = answer
        self.fail = fail

    def classify(self, content: str) -> TypeClassification | None:
        self.calls.append(content)
        if self.fail:
            raise TimeoutError("the endpoint did not answer")
        return self.answer


@pytest.fixture
def encoder(embedder: Embedder) -> MemoryEncoder:
    return MemoryEncoder(embedder)


def test_classify_semantic_content(encoder: MemoryEncoder) -> None:
    r = encoder.classify_type("The project uses PostgreSQL for data storage")
    assert r.type == MemoryType.SEMANTIC and r.confidence >= 0.7


def test_classify_episodic_content(encoder: MemoryEncoder) -> None:
    r = encoder.classify_type("Last week we debugged the authentication module")
    assert r.type == MemoryType.EPISODIC and r.method == ClassificationMethod.RULE_BASED


def test_classify_procedural_content(encoder: MemoryEncoder) -> None:
    r = encoder.classify_type("To deploy, first run 'npm build', then 'npm deploy'")
    assert r.type == MemoryType.PROCEDURAL


def test_llm_fallback_for_ambiguous_content(embedder: Embedder) -> None:
    llm = ScriptedLlm(
        TypeClassification(MemoryType.EPISODIC, 0.8, ClassificationMethod.LLM_BASED, "llm says so")
    )
    enc = MemoryEncoder(embedder, options=EncoderOptions(rule_confidence_threshold=0.7), llm=llm)
    r = enc.classify_type("Important information about the system")
    assert llm.calls == ["Important information about the system"]
    assert r.method == ClassificationMethod.LLM_BASED and r.type == MemoryType.EPISODIC


def test_confident_rules_do_not_call_the_llm(embedder: Embedder) -> None:
    llm = ScriptedLlm(
        TypeClassification(MemoryType.EPISODIC, 0.8, ClassificationMethod.LLM_BASED, None)
    )
    enc = MemoryEncoder(embedder, llm=llm)
    enc.classify_type("The project uses PostgreSQL for data storage")
    assert llm.calls == []


def test_without_an_llm_or_when_it_fails_the_rule_result_stands(embedder: Embedder) -> None:
    text = "Important information about the system"
    plain = MemoryEncoder(embedder).classify_type(text)
    assert plain.method == ClassificationMethod.RULE_BASED and plain.confidence < 0.7
    failing = MemoryEncoder(embedder, llm=ScriptedLlm(fail=True)).classify_type(text)
    assert failing == plain
    silent = MemoryEncoder(embedder, llm=ScriptedLlm(None)).classify_type(text)
    assert silent == plain
    disabled = MemoryEncoder(
        embedder, options=EncoderOptions(use_llm_fallback=False), llm=ScriptedLlm(fail=True)
    )
    assert disabled.classify_type(text) == plain


def test_encode_generates_valid_embeddings_and_copies_context(encoder: MemoryEncoder) -> None:
    ctx = MemoryContext(
        source=MemorySource.CONVERSATION, project="shop", session_id="s1", learning_context="chat"
    )
    [m] = encoder.encode("The API uses JWT tokens for auth", ctx)
    v = np.asarray(m.embedding)
    assert v.shape == (384,) and np.isfinite(v).all()
    assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-4)
    assert (m.source, m.project, m.session_id, m.learning_context) == (
        MemorySource.CONVERSATION,
        "shop",
        "s1",
        "chat",
    )
    assert m.type == MemoryType.SEMANTIC and m.salience == 0.5


def test_encode_with_type_is_explicit(encoder: MemoryEncoder) -> None:
    [m] = encoder.encode_with_type("whatever text", MemoryType.PROCEDURAL)
    assert (
        m.type == MemoryType.PROCEDURAL and m.classification_method == ClassificationMethod.EXPLICIT
    )


def test_batch_encoding_returns_one_memory_per_item_with_valid_embeddings(
    encoder: MemoryEncoder,
) -> None:
    items = [
        EncodingRequest(f"Fact number {i}: service {i} listens on port {8000 + i}")
        for i in range(10)
    ]
    memories = encoder.encode_batch(items)
    assert len(memories) == 10
    for m in memories:
        assert m.embedding is not None and len(m.embedding) == 384
    single = encoder.encode(items[3].content)[0]
    assert np.allclose(
        single.embedding, memories[3].embedding, atol=1e-5
    )  # batching changes nothing


def test_over_long_content_is_chunked_not_truncated(encoder: MemoryEncoder) -> None:
    sentences = [
        f"Sentence {i} explains part {i} of the migration plan in some detail." for i in range(120)
    ]
    text = " ".join(sentences)
    assert len(text) > 2000
    memories = encoder.encode(text, MemoryContext(source_document="docs/plan.md"))
    assert len(memories) > 1
    assert all(m.chunk is not None and m.chunk.total_chunks == len(memories) for m in memories)
    covered = " ".join(m.content for m in memories)
    for s in sentences:
        assert s in covered  # every sentence survives in some chunk
    assert memories[1].title.endswith(f"(2/{len(memories)})")


def test_empty_content_is_refused(encoder: MemoryEncoder) -> None:
    with pytest.raises(InvalidInputError):
        encoder.encode("   ")


def test_remember_links_chunks_in_order(lm: Lexmem) -> None:
    text = " ".join(f"Step {i}: do the thing number {i} carefully." for i in range(150))
    result = lm.remember(text, project="long")
    ids = [m.id for m in result.memories]
    assert len(ids) > 1
    for prev, nxt in itertools.pairwise(ids):
        assert [lk.to_id for lk in lm.store.get_links_from(nxt) if lk.link_type == "continues"] == [
            prev
        ]


def test_encoder_metrics_count_by_type_and_method(encoder: MemoryEncoder) -> None:
    encoder.encode("The project uses PostgreSQL for data storage")
    encoder.encode_with_type("x", MemoryType.EPISODIC)
    assert encoder.encoded_by_type["semantic"] == 1 and encoder.encoded_by_type["episodic"] == 1
    assert encoder.classifications_by_method["rule_based"] == 1
    assert len(encoder.latency_ms) == 2
