"""Tests for lexmem.capture.chunker: seed 002's TextChunker."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from lexmem.capture.chunker import (
    CHUNK_SIZE_WORDS,
    MIN_CHUNK_WORDS,
    OVERLAP_WORDS,
    SENTENCE_TERMINATORS,
    ChunkerConfigError,
    ChunkerError,
    EmptyContentError,
    InvalidUtf8Error,
    TextChunk,
    TextChunker,
)
from lexmem.models import ChunkMetadata

# --------------------------------------------------------------------------- helpers


def words(n: int, prefix: str = "w") -> list[str]:
    """n distinct words without sentence terminators, so positions are checkable."""
    return [f"{prefix}{i}" for i in range(n)]


def spans(chunks: list[TextChunk]) -> list[tuple[int, int]]:
    """(first word index, one past last word index) of every chunk."""
    return [(c.metadata.word_offset, c.metadata.word_offset + c.word_count) for c in chunks]


def reference_spans(all_words: list[str], chunk_size: int, overlap: int) -> list[tuple[int, int]]:
    """An independent, deliberately naive transcription of the seed's algorithm."""
    n = len(all_words)
    if n <= chunk_size:
        return [(0, n)]
    out: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + chunk_size, n)
        if end < n:
            # Candidates: end itself, then up to chunk_size // 5 words earlier.
            for cut in range(end, end - chunk_size // 5 - 1, -1):
                if all_words[cut - 1][-1] in ".!?":
                    end = cut
                    break
        out.append((start, end))
        if end == n:
            return out
        start = max(end - overlap, start + 1)


def check_invariants(text: str, chunks: list[TextChunk], chunker: TextChunker, path: str) -> None:
    """Everything that must hold for any input, whatever the configuration."""
    all_words = text.split()
    n = len(all_words)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert chunks
    assert chunks[0].metadata.word_offset == 0
    for i, chunk in enumerate(chunks):
        meta = chunk.metadata
        assert meta == ChunkMetadata(
            file_path=path,
            chunk_index=i,
            total_chunks=len(chunks),
            word_offset=meta.word_offset,
            char_offset=meta.char_offset,
            original_file_hash=digest,
        )
        assert 1 <= chunk.word_count <= chunker.chunk_size
        # The content is the exact original slice starting at the first word.
        assert text[meta.char_offset :].startswith(chunk.content)
        assert chunk.content == chunk.content.strip()
        assert (
            chunk.content.split()
            == all_words[meta.word_offset : meta.word_offset + chunk.word_count]
        )
        # char_offset is the position of word number word_offset.
        assert len(text[: meta.char_offset].split()) == meta.word_offset
    last = chunks[-1]
    assert last.metadata.word_offset + last.word_count == n
    for prev, nxt in itertools.pairwise(chunks):
        p_start, p_end = prev.metadata.word_offset, prev.metadata.word_offset + prev.word_count
        n_start = nxt.metadata.word_offset
        assert p_start < n_start <= p_end  # progress, and no word skipped
        if prev.word_count > chunker.overlap:
            assert p_end - n_start == chunker.overlap
        else:
            assert n_start == p_start + 1
        # A chunk only ends early on a sentence, never by more than 20%.
        assert prev.word_count >= chunker.chunk_size - chunker.chunk_size // 5
        if prev.word_count < chunker.chunk_size:
            assert prev.content[-1] in SENTENCE_TERMINATORS


# ------------------------------------------------------------------ constants & API


def test_constants() -> None:
    assert CHUNK_SIZE_WORDS == 200
    assert OVERLAP_WORDS == 50
    assert MIN_CHUNK_WORDS == 50
    assert SENTENCE_TERMINATORS == (".", "!", "?")


def test_defaults() -> None:
    chunker = TextChunker()
    assert chunker.chunk_size == 200
    assert chunker.overlap == 50
    assert chunker.min_chunk_words == 50
    assert "200" in repr(chunker)


def test_text_chunk_is_frozen() -> None:
    chunk = TextChunker().chunk_text("hello")[0]
    with pytest.raises(AttributeError):
        chunk.content = "other"  # type: ignore[misc]


def test_error_hierarchy() -> None:
    for cls in (EmptyContentError, InvalidUtf8Error, ChunkerConfigError):
        assert issubclass(cls, ChunkerError)
    assert issubclass(ChunkerError, ValueError)
    err = EmptyContentError("boom")
    assert err.message == "boom"
    assert str(err) == "boom"


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(("size", "overlap"), [(100, 100), (100, 150), (50, 50)])
def test_config_size_not_above_overlap(size: int, overlap: int) -> None:
    with pytest.raises(ChunkerConfigError) as info:
        TextChunker(size, overlap)
    assert "overlap" in info.value.message


def test_config_size_below_minimum() -> None:
    with pytest.raises(ChunkerConfigError) as info:
        TextChunker(49, 10)
    assert "50" in info.value.message
    TextChunker(50, 10)  # exactly the minimum is fine


def test_config_negative_overlap() -> None:
    with pytest.raises(ChunkerConfigError):
        TextChunker(100, -1)


def test_config_escape_hatch() -> None:
    chunker = TextChunker(10, 3, min_chunk_words=1)
    assert (chunker.chunk_size, chunker.overlap, chunker.min_chunk_words) == (10, 3, 1)
    with pytest.raises(ChunkerConfigError):
        TextChunker(3, 3, min_chunk_words=1)  # the hatch does not lift size > overlap
    with pytest.raises(ChunkerConfigError):
        TextChunker(10, 3, min_chunk_words=20)


def test_config_error_is_chunker_error() -> None:
    with pytest.raises(ChunkerError):
        TextChunker(10, 3)


# ----------------------------------------------------------------------- single chunk


def test_short_text_single_chunk() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    chunks = TextChunker().chunk_text(text, "notes/fox.md")
    assert len(chunks) == 1
    chunk = chunks[0]
    assert chunk.content == text
    assert chunk.word_count == 9
    assert chunk.metadata == ChunkMetadata(
        file_path="notes/fox.md",
        chunk_index=0,
        total_chunks=1,
        word_offset=0,
        char_offset=0,
        original_file_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def test_single_word() -> None:
    chunks = TextChunker().chunk_text("hello")
    assert len(chunks) == 1
    assert chunks[0].content == "hello"
    assert chunks[0].word_count == 1
    assert chunks[0].metadata.file_path == ""


def test_single_chunk_trims_surrounding_whitespace() -> None:
    text = "\n\n  hello there  \n"
    (chunk,) = TextChunker().chunk_text(text)
    assert chunk.content == "hello there"
    assert chunk.metadata.char_offset == 4
    # The hash is of the original content, not of the trimmed chunk.
    assert chunk.metadata.original_file_hash == hashlib.sha256(text.encode()).hexdigest()


def test_exactly_chunk_size_is_one_chunk() -> None:
    text = " ".join(words(200))
    chunks = TextChunker().chunk_text(text)
    assert len(chunks) == 1
    assert chunks[0].word_count == 200
    assert chunks[0].content == text


# ---------------------------------------------------------------------- many chunks


def test_201_words_two_chunks_with_overlap() -> None:
    ws = words(201)
    chunks = TextChunker().chunk_text(" ".join(ws))
    assert spans(chunks) == [(0, 200), (150, 201)]
    assert chunks[0].content.split()[-50:] == chunks[1].content.split()[:50]
    assert [c.metadata.total_chunks for c in chunks] == [2, 2]
    assert [c.metadata.chunk_index for c in chunks] == [0, 1]


def test_many_chunks_overlap_50() -> None:
    ws = words(1000)
    text = " ".join(ws)
    chunker = TextChunker()
    chunks = chunker.chunk_text(text)
    assert spans(chunks) == [
        (0, 200),
        (150, 350),
        (300, 500),
        (450, 650),
        (600, 800),
        (750, 950),
        (900, 1000),
    ]
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.content.split()[-50:] == nxt.content.split()[:50]
    check_invariants(text, chunks, chunker, "")


def test_no_sentence_boundaries_cuts_at_word_boundary() -> None:
    ws = words(450)
    chunks = TextChunker().chunk_text(" ".join(ws))
    assert [c.word_count for c in chunks[:-1]] == [200, 200]
    for chunk in chunks:
        # Every chunk is made of whole words of the original.
        assert all(w in ws for w in chunk.content.split())


# ------------------------------------------------------------ sentence-boundary cuts


def _with_terminator_at(index: int, n: int = 260) -> list[str]:
    ws = words(n)
    ws[index] += "."
    return ws


def test_sentence_boundary_inside_window_pulls_chunk_back() -> None:
    chunks = TextChunker().chunk_text(" ".join(_with_terminator_at(170)))
    assert spans(chunks)[0] == (0, 171)
    assert chunks[0].content.endswith("w170.")
    assert chunks[1].metadata.word_offset == 171 - 50


def test_sentence_boundary_at_last_word_keeps_full_chunk() -> None:
    chunks = TextChunker().chunk_text(" ".join(_with_terminator_at(199)))
    assert spans(chunks)[0] == (0, 200)


def test_sentence_boundary_exactly_20_percent_back() -> None:
    # 40 words back from the target end of 200: the chunk ends after word 159.
    chunks = TextChunker().chunk_text(" ".join(_with_terminator_at(159)))
    assert spans(chunks)[0] == (0, 160)


def test_sentence_boundary_beyond_20_percent_is_ignored() -> None:
    chunks = TextChunker().chunk_text(" ".join(_with_terminator_at(158)))
    assert spans(chunks)[0] == (0, 200)


def test_nearest_sentence_boundary_wins() -> None:
    ws = words(260)
    ws[165] += "!"
    ws[185] += "?"
    chunks = TextChunker().chunk_text(" ".join(ws))
    assert spans(chunks)[0] == (0, 186)
    assert chunks[0].content.endswith("w185?")


@pytest.mark.parametrize("mark", [".", "!", "?"])
def test_each_terminator_counts(mark: str) -> None:
    ws = words(260)
    ws[180] += mark
    assert spans(TextChunker().chunk_text(" ".join(ws)))[0] == (0, 181)


def test_other_punctuation_is_not_a_boundary() -> None:
    ws = words(260)
    ws[180] += ";"
    ws[181] += ","
    ws[182] += ":"
    assert spans(TextChunker().chunk_text(" ".join(ws)))[0] == (0, 200)


def test_final_chunk_is_not_pulled_back() -> None:
    ws = words(201)
    ws[190] += "."
    # The first chunk ends at the sentence; the last runs to the end of the text.
    assert spans(TextChunker().chunk_text(" ".join(ws))) == [(0, 191), (141, 201)]


def test_spec_worked_example() -> None:
    names = ["one", "two", "three", "four", "five", "six"]
    names += ["seven", "eight", "nine", "ten", "eleven", "twelve"]
    text = " ".join(f"Sentence {name}." for name in names)  # 24 words
    chunker = TextChunker(chunk_size=10, overlap=3, min_chunk_words=1)
    chunks = chunker.chunk_text(text, "example.txt")
    # Pass 1: words 0-10 already end on "five.". Pass 2 starts 3 words back (word 7)
    # and its target end 17 ("Sentence") is pulled back to after "eight." (16).
    assert spans(chunks) == [(0, 10), (7, 16), (13, 22), (19, 24)]
    assert chunks[0].content == (
        "Sentence one. Sentence two. Sentence three. Sentence four. Sentence five."
    )
    assert chunks[1].content == "four. Sentence five. Sentence six. Sentence seven. Sentence eight."
    assert chunks[-1].content == "ten. Sentence eleven. Sentence twelve."
    assert {c.metadata.total_chunks for c in chunks} == {4}
    check_invariants(text, chunks, chunker, "example.txt")


def test_sentence_cut_shorter_than_overlap_still_progresses() -> None:
    # chunk_size=5, overlap=4: a sentence cut to 4 words would restart at the same
    # word forever; the chunker moves on by one word instead.
    ws = ["a", "b", "c", "d.", "e", "f", "g", "h", "i", "j", "k", "l"]
    chunker = TextChunker(5, 4, min_chunk_words=1)
    chunks = chunker.chunk_text(" ".join(ws))
    assert spans(chunks)[:3] == [(0, 4), (1, 6), (2, 7)]
    check_invariants(" ".join(ws), chunks, chunker, "")


def test_overlap_larger_than_sentence_cut_chunk() -> None:
    ws = words(30)
    ws[7] += "."
    chunker = TextChunker(10, 9, min_chunk_words=1)
    chunks = chunker.chunk_text(" ".join(ws))
    # First chunk: target 10, cut back to 8 (2 = 10 // 5 words). 8 - 9 < 1, so the
    # next chunk starts one word after the first.
    assert spans(chunks)[:2] == [(0, 8), (1, 11)]
    check_invariants(" ".join(ws), chunks, chunker, "")


def test_zero_overlap() -> None:
    chunker = TextChunker(50, 0)
    chunks = chunker.chunk_text(" ".join(words(120)))
    assert spans(chunks) == [(0, 50), (50, 100), (100, 120)]


# ------------------------------------------------------------------------ odd words


def test_very_long_word_kept_whole() -> None:
    giant = "x" * 100_000
    text = " ".join([*words(120), giant, *words(120, "v")])
    chunker = TextChunker()
    chunks = chunker.chunk_text(text)
    holders = [c for c in chunks if giant in c.content]
    assert holders
    for chunk in holders:
        assert giant in chunk.content.split()
    check_invariants(text, chunks, chunker, "")


def test_single_very_long_word() -> None:
    giant = "y" * 50_000
    (chunk,) = TextChunker().chunk_text(giant)
    assert chunk.content == giant
    assert chunk.word_count == 1


# --------------------------------------------------------------------- bad content


@pytest.mark.parametrize("content", ["", "   ", "\n\t \r\n", "\u00a0\u3000", b"", b" \n "])
def test_empty_or_whitespace_content(content: str | bytes) -> None:
    with pytest.raises(EmptyContentError) as info:
        TextChunker().chunk_text(content)
    assert info.value.message == "Content is empty string"


@pytest.mark.parametrize("content", [b"\xff\xfe", b"abc \xc3\x28 def", b"caf\xe9", b"\xed\xa0\x80"])
def test_invalid_utf8_bytes(content: bytes) -> None:
    with pytest.raises(InvalidUtf8Error) as info:
        TextChunker().chunk_text(content)
    assert info.value.message
    assert isinstance(info.value.__cause__, UnicodeDecodeError)


def test_str_with_lone_surrogate_is_invalid_utf8() -> None:
    with pytest.raises(InvalidUtf8Error):
        TextChunker().chunk_text("abc \ud800 def")


def test_other_types_rejected() -> None:
    with pytest.raises(TypeError):
        TextChunker().chunk_text(None)  # type: ignore[arg-type]


def test_valid_bytes_accepted() -> None:
    text = "Grüße aus Köln. Ça va? " * 60
    raw = text.encode("utf-8")
    from_bytes = TextChunker().chunk_text(raw, "k.md")
    from_str = TextChunker().chunk_text(text, "k.md")
    assert from_bytes == from_str
    assert from_bytes[0].metadata.original_file_hash == hashlib.sha256(raw).hexdigest()


# ------------------------------------------------------------------ offsets & hash


def test_offsets_point_at_first_word() -> None:
    ws = words(700)
    # Irregular whitespace so char offsets are not a simple multiple of anything.
    seps = [" ", "  ", "\n", "\t", " \n\n "]
    text = "  " + "".join(w + seps[i % len(seps)] for i, w in enumerate(ws))
    chunker = TextChunker()
    chunks = chunker.chunk_text(text)
    assert len(chunks) > 3
    for chunk in chunks:
        meta = chunk.metadata
        assert text[meta.char_offset :].startswith(chunk.content)
        assert chunk.content.split()[0] == ws[meta.word_offset]
        assert text[meta.char_offset :].split(maxsplit=1)[0] == ws[meta.word_offset]
    check_invariants(text, chunks, chunker, "")


def test_every_word_covered() -> None:
    ws = words(2345)
    for i in range(0, 2345, 37):
        ws[i] += "."
    chunks = TextChunker().chunk_text(" ".join(ws))
    covered: set[int] = set()
    for a, b in spans(chunks):
        covered.update(range(a, b))
    assert covered == set(range(2345))


def test_hash_matches_sha256_of_utf8() -> None:
    text = "naïve café — 東京 " * 100
    chunks = TextChunker().chunk_text(text, "u.txt")
    expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert len(chunks) > 1
    assert {c.metadata.original_file_hash for c in chunks} == {expected}
    assert {c.metadata.file_path for c in chunks} == {"u.txt"}


# -------------------------------------------------------------- markdown & unicode


def test_markdown_newlines_preserved() -> None:
    section = (
        "# Heading\n\nSome intro text here.\n\n"
        "- item one\n- item two\n\n"
        "```python\ndef f():\n    return 1\n```\n\n"
    )
    text = section * 20
    chunker = TextChunker(60, 15)
    chunks = chunker.chunk_text(text, "doc.md")
    assert len(chunks) > 1
    for chunk in chunks:
        start = chunk.metadata.char_offset
        assert text[start : start + len(chunk.content)] == chunk.content
    assert "\n\n" in chunks[0].content
    assert "\n    return 1\n```" in chunks[0].content
    check_invariants(text, chunks, chunker, "doc.md")


def test_unicode_text() -> None:
    vocab = ["東京", "naïve", "café.", "Ωμέγα", "🙂", "emoji👍!", "ÅÄÖ", "中文?", "straße"]
    rng = random.Random(7)
    text = "\u3000".join(rng.choice(vocab) for _ in range(555))  # ideographic spaces
    chunker = TextChunker()
    chunks = chunker.chunk_text(text)
    assert len(chunks) > 2
    check_invariants(text, chunks, chunker, "")
    assert spans(chunks) == reference_spans(text.split(), 200, 50)


# -------------------------------------------------------------------------- scale


def test_large_input_completes() -> None:
    n = 100_000
    rng = random.Random(1)
    ws = [f"w{i}" + ("." if rng.random() < 0.05 else "") for i in range(n)]
    text = " ".join(ws)
    chunks = TextChunker().chunk_text(text, "big.txt")
    assert chunks[0].metadata.word_offset == 0
    assert chunks[-1].metadata.word_offset + chunks[-1].word_count == n
    assert spans(chunks) == reference_spans(ws, 200, 50)
    # Roughly n / (chunk_size - overlap) chunks; sentence cuts add a few.
    assert n // 150 <= len(chunks) <= n // 100


# ----------------------------------------------------------------- property test


def _random_text(rng: random.Random) -> str:
    vocab = ["alpha", "beta.", "gamma!", "delta?", "é", "東", "x" * 40, "a.b", ".", "?!", "end.)"]
    seps = [" ", "  ", "\n", "\t", "\n\n", "\u00a0", "\u2003", " \r\n"]
    n = rng.randint(1, 400)
    parts = [rng.choice(seps) if rng.random() < 0.3 else ""]
    for _ in range(n):
        parts.append(rng.choice(vocab) if rng.random() < 0.7 else f"t{rng.randint(0, 99)}")
        parts.append(rng.choice(seps))
    if rng.random() < 0.5:
        parts.pop()  # sometimes no trailing whitespace
    return "".join(parts)


def test_random_texts_invariants() -> None:
    rng = random.Random(20240501)
    for case in range(400):
        text = _random_text(rng)
        chunk_size = rng.randint(1, 40)
        overlap = rng.randint(0, chunk_size - 1)
        chunker = TextChunker(chunk_size, overlap, min_chunk_words=1)
        path = f"f{case}.md"
        chunks = chunker.chunk_text(text.encode("utf-8") if case % 2 else text, path)
        check_invariants(text, chunks, chunker, path)
        assert spans(chunks) == reference_spans(text.split(), chunk_size, overlap), (
            case,
            chunk_size,
            overlap,
        )
