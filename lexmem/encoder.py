"""The memory encoder (seed 001): content in, typed and embedded memories out.

Classification is rule-based first; below ``rule_confidence_threshold`` an LLM
classifier may be asked, when one is configured (the optional LLM client plugs
in through :class:`LlmClassifier`). With no LLM, or when it fails, the rule
result stands.

Content longer than ``max_content_length`` is split by seed 002's
:class:`~lexmem.capture.chunker.TextChunker` into overlapping chunks, each its own memory
with chunk metadata, rather than truncated or summarised away. With an LLM
(:class:`LlmSummariser`), seed 001's summary of the whole text becomes the chunks'
title and their ``summary`` metadata; the chunks keep every word.

When the LLM fails, the rule result (or the plain title) stands and the memory's
``llm_notes`` metadata says why, for the capture service's audit entry.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lexmem.capture.chunker import TextChunker
from lexmem.capture.classify import RuleBasedClassifier
from lexmem.errors import InvalidInputError
from lexmem.models import (
    ClassificationMethod,
    Memory,
    MemoryContext,
    MemoryType,
    TypeClassification,
    make_title,
)

if TYPE_CHECKING:
    from lexmem.embedder import Embedder

__all__ = ["EncoderOptions", "EncodingRequest", "LlmClassifier", "LlmSummariser", "MemoryEncoder"]

log = logging.getLogger("lexmem.encoder")


class LlmClassifier(Protocol):
    """What the encoder asks of an LLM: a classification, or ``None`` when it has none."""

    def classify(self, content: str) -> TypeClassification | None: ...


@runtime_checkable
class LlmSummariser(Protocol):
    """What the encoder asks of an LLM for over-long content: its key facts."""

    def summarise(self, content: str) -> str: ...


@dataclass(frozen=True, slots=True)
class EncoderOptions:
    """Seed 001's ``MemoryEncoderOptions``."""

    rule_confidence_threshold: float = 0.7
    max_content_length: int = 2000
    use_llm_fallback: bool = True
    default_salience: float = 0.5


@dataclass(frozen=True, slots=True)
class EncodingRequest:
    content: str
    context: MemoryContext = field(default_factory=MemoryContext)
    explicit_type: MemoryType | None = None


class MemoryEncoder:
    """Seed 001's ``IMemoryEncoder``; methods are synchronous (run them off a UI loop)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        options: EncoderOptions | None = None,
        classifier: RuleBasedClassifier | None = None,
        llm: LlmClassifier | None = None,
        chunker: TextChunker | None = None,
        summariser: LlmSummariser | None = None,
    ) -> None:
        self.embedder = embedder
        self.options = options or EncoderOptions()
        self.classifier = classifier or RuleBasedClassifier()
        self.llm = llm
        self.chunker = chunker or TextChunker()
        self.summariser = summariser
        # Why the LLM's answer was not used, per content, until the draft records it.
        self._llm_notes: dict[str, list[str]] = {}
        self.encoded_by_type: Counter[str] = Counter()
        self.classifications_by_method: Counter[str] = Counter()
        self.latency_ms: list[float] = []

    def classify_type(self, content: str) -> TypeClassification:
        """Rules first; the LLM only below the threshold, and only if it answers."""
        rule = self.classifier.classify(content)
        result = rule
        if (
            rule.confidence < self.options.rule_confidence_threshold
            and self.options.use_llm_fallback
            and self.llm
        ):
            try:
                answer = self.llm.classify(content)
            except Exception as exc:  # noqa: BLE001 - an LLM failure must never lose the memory
                log.warning(
                    "[MEM:ENCODE] LLM classification failed (%s); keeping the rule result", exc
                )
                self._note(content, f"classification: {exc}; the rules decided")
                answer = None
            if answer is not None:
                result = answer
        self.classifications_by_method[str(result.method)] += 1
        log.info(
            "[MEM:ENCODE] Classified content as %s with %d%% confidence via %s",
            result.type, int(result.confidence * 100), result.method,
        )  # fmt: skip
        return result

    def _note(self, content: str, note: str) -> None:
        notes = self._llm_notes.setdefault(content.strip(), [])
        if note not in notes:
            notes.append(note)
        while len(self._llm_notes) > 64:  # a classification preview that was never encoded
            del self._llm_notes[next(iter(self._llm_notes))]

    def _summary(self, text: str) -> str | None:
        """Seed 001's summary of over-long content, or None (no LLM, or it failed)."""
        if self.summariser is None or not self.options.use_llm_fallback:
            return None
        try:
            return self.summariser.summarise(text)
        except Exception as exc:  # noqa: BLE001 - an LLM failure must never lose the memory
            log.warning("[MEM:ENCODE] LLM summary failed (%s); keeping the plain title", exc)
            self._note(text, f"summary: {exc}; the chunks keep their plain title")
            return None

    def encode(self, content: str, context: MemoryContext | None = None) -> list[Memory]:
        """Classify, then encode (one memory, or one per chunk of over-long content)."""
        classification = self.classify_type(content)
        return self._encode([(content, context or MemoryContext(), classification)])

    def encode_classified(
        self, content: str, classification: TypeClassification, context: MemoryContext | None = None
    ) -> list[Memory]:
        """Encode with a classification the caller already has (e.g. shown to the user)."""
        return self._encode([(content, context or MemoryContext(), classification)])

    def encode_with_type(
        self, content: str, mtype: MemoryType, context: MemoryContext | None = None
    ) -> list[Memory]:
        explicit = TypeClassification(
            mtype, 1.0, ClassificationMethod.EXPLICIT, "given by the caller"
        )
        return self._encode([(content, context or MemoryContext(), explicit)])

    def encode_batch(self, items: Sequence[EncodingRequest]) -> list[Memory]:
        """Encode many items with batched embedding; one memory per item (more for long ones)."""
        jobs = []
        for item in items:
            if item.explicit_type is not None:
                cls = TypeClassification(
                    item.explicit_type, 1.0, ClassificationMethod.EXPLICIT, "given by the caller"
                )
            else:
                cls = self.classify_type(item.content)
            jobs.append((item.content, item.context, cls))
        memories = self._encode(jobs)
        log.info("[MEM:ENCODE] Batch encoded %d memories", len(memories))
        return memories

    def _encode(self, jobs: list[tuple[str, MemoryContext, TypeClassification]]) -> list[Memory]:
        started = time.perf_counter()
        drafts: list[Memory] = []
        for content, ctx, cls in jobs:
            text = content.strip() if isinstance(content, str) else ""
            if not text:
                raise InvalidInputError("cannot remember empty content")
            drafts.extend(self._draft(text, ctx, cls))
        vectors = self.embedder.embed([m.content for m in drafts])
        for m, v in zip(drafts, vectors, strict=True):
            m.embedding = [float(x) for x in v]
            self.encoded_by_type[str(m.type)] += 1
            log.info("[MEM:ENCODE] Encoded %s memory with %d chars", m.type, len(m.content))
        self.latency_ms.append((time.perf_counter() - started) * 1000)
        return drafts

    def _draft(self, text: str, ctx: MemoryContext, cls: TypeClassification) -> list[Memory]:
        o = self.options
        common = {
            "type": cls.type,
            "source": ctx.source,
            "project": ctx.project,
            "user_id": ctx.user_id,
            "session_id": ctx.session_id,
            "conversation_id": ctx.conversation_id,
            "learning_context": ctx.learning_context,
            "capture_mode": ctx.capture_mode,
            "pinned": ctx.pinned,
            "salience": o.default_salience if ctx.salience is None else ctx.salience,
            "importance": o.default_salience if ctx.importance is None else ctx.importance,
            "confidence": cls.confidence,
            "classification_method": cls.method,
        }
        meta = dict(ctx.metadata)
        if cls.rationale:
            meta.setdefault("classification", cls.rationale)
        summary = self._summary(text) if len(text) > o.max_content_length else None
        notes = self._llm_notes.pop(text, None)
        if notes:
            meta["llm_notes"] = notes
        if len(text) <= o.max_content_length:
            return [
                Memory(
                    content=text, title=ctx.title or make_title(text),
                    source_document=ctx.source_document, metadata=meta, **common,  # type: ignore[arg-type]
                )
            ]  # fmt: skip
        chunks = self.chunker.chunk_text(text, ctx.source_document or "")
        base_title = ctx.title or make_title(summary or text, limit=64)
        if summary:
            meta["summary"] = summary
        out = []
        for ch in chunks:
            n, total = ch.metadata.chunk_index + 1, ch.metadata.total_chunks
            out.append(
                Memory(
                    content=ch.content,
                    title=f"{base_title} ({n}/{total})",
                    chunk=ch.metadata,
                    source_document=ctx.source_document,
                    metadata=dict(meta),
                    **common,  # type: ignore[arg-type]
                )
            )
        return out
