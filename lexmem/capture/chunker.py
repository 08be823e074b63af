"""Split long text into overlapping, sentence-aware chunks of words (seed 002).

A port of seed 002's ``TextChunker``. Text is cut into windows of ``chunk_size``
words; each window may end a little early so that it closes on a sentence, and
consecutive windows share ``overlap`` words so that a fact straddling a cut is
whole in at least one chunk. Every chunk remembers where it came from
(:class:`~lexmem.models.ChunkMetadata`) so a memory can point back into its source.

Standard library only; linear in the size of the input.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from lexmem.errors import InvalidInputError
from lexmem.models import ChunkMetadata

__all__ = [
    "CHUNK_SIZE_WORDS",
    "MIN_CHUNK_WORDS",
    "OVERLAP_WORDS",
    "SENTENCE_TERMINATORS",
    "ChunkerConfigError",
    "ChunkerError",
    "EmptyContentError",
    "InvalidUtf8Error",
    "TextChunk",
    "TextChunker",
]

CHUNK_SIZE_WORDS = 200
"""Default number of words per chunk."""

OVERLAP_WORDS = 50
"""Default number of words consecutive chunks share."""

MIN_CHUNK_WORDS = 50
"""Smallest ``chunk_size`` a :class:`TextChunker` accepts by default."""

SENTENCE_TERMINATORS: tuple[str, ...] = (".", "!", "?")
"""Characters that end a sentence when they end a word."""

# A word is a maximal run of non-whitespace. ``\s`` in a str pattern matches exactly
# the characters ``str.isspace()`` accepts, so these words are the words of
# ``str.split()`` -- but finditer also yields their positions, which the chunks need
# to slice the original text.
_WORD = re.compile(r"\S+")


class ChunkerError(InvalidInputError, ValueError):
    """Base of every error the chunker raises: a problem with a value handed in."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class EmptyContentError(ChunkerError):
    """The content holds no words: it is empty or only whitespace."""


class InvalidUtf8Error(ChunkerError):
    """The content is ``bytes`` that are not valid UTF-8, or a ``str`` that cannot
    be encoded as UTF-8 (it holds lone surrogates)."""


class ChunkerConfigError(ChunkerError):
    """A :class:`TextChunker` was configured with sizes that cannot work."""


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk of a text.

    ``content`` is the exact slice of the original text from the first word's first
    character to the last word's last character, so line breaks and indentation
    inside the chunk (Markdown structure) survive. ``word_count`` counts its
    whitespace-separated words.
    """

    content: str
    word_count: int
    metadata: ChunkMetadata


class TextChunker:
    """Splits text into overlapping chunks of at most ``chunk_size`` words.

    ``chunk_size`` must exceed ``overlap`` (otherwise a chunk could not move past
    the one before it) and be at least ``min_chunk_words``. ``min_chunk_words``
    defaults to :data:`MIN_CHUNK_WORDS`; it is keyword-only and exists as an
    explicit escape hatch so tests and special callers can build small chunkers
    (the seed's worked example uses ``chunk_size=10, overlap=3``).

    Raises :class:`ChunkerConfigError` for an invalid configuration.
    """

    __slots__ = ("_chunk_size", "_min_chunk_words", "_overlap", "_sentence_window")

    def __init__(
        self,
        chunk_size: int = CHUNK_SIZE_WORDS,
        overlap: int = OVERLAP_WORDS,
        *,
        min_chunk_words: int = MIN_CHUNK_WORDS,
    ) -> None:
        if overlap < 0:
            raise ChunkerConfigError(f"overlap must not be negative (got {overlap})")
        if chunk_size <= overlap:
            raise ChunkerConfigError(
                f"chunk_size ({chunk_size}) must be greater than overlap ({overlap})"
            )
        if chunk_size < min_chunk_words:
            raise ChunkerConfigError(
                f"chunk_size ({chunk_size}) must be at least {min_chunk_words} words"
            )
        self._chunk_size = chunk_size
        self._overlap = overlap
        self._min_chunk_words = min_chunk_words
        # The seed lets a chunk end early on a sentence boundary "within 20% of the
        # target". Integer division keeps 20% exact (chunk_size * 0.2 is a float
        # and could round across an integer). It is always < chunk_size, so an
        # adjusted chunk still holds at least one word.
        self._sentence_window = chunk_size // 5

    @property
    def chunk_size(self) -> int:
        """Most words a chunk may hold."""
        return self._chunk_size

    @property
    def overlap(self) -> int:
        """Words a chunk shares with the one before it (see :meth:`chunk_text`)."""
        return self._overlap

    @property
    def min_chunk_words(self) -> int:
        """The smallest ``chunk_size`` this chunker was allowed to take."""
        return self._min_chunk_words

    def __repr__(self) -> str:
        return f"TextChunker(chunk_size={self._chunk_size}, overlap={self._overlap})"

    def chunk_text(self, content: str | bytes, file_path: str = "") -> list[TextChunk]:
        """Split ``content`` into chunks, in order.

        ``content`` may be ``str`` or UTF-8 ``bytes`` (decoded strictly).
        ``file_path`` is only recorded in each chunk's metadata.

        Text of at most ``chunk_size`` words becomes one chunk. Longer text is cut
        into windows of ``chunk_size`` words; a window that does not reach the end
        of the text is shortened to end on the nearest word ending in ``.``, ``!``
        or ``?`` if one lies at most ``chunk_size // 5`` words back, and otherwise
        is cut at the word boundary. The next window starts ``overlap`` words
        before the end of this one -- or, if the sentence cut made this chunk too
        short for that, one word after this chunk's start, so every chunk starts
        strictly after the previous one. Chunks never split a word (a very long
        word is kept whole) and together they cover every word.

        In each chunk's metadata ``word_offset`` is the index of its first word,
        ``char_offset`` the ``str`` index of that word in the (decoded) text, and
        ``original_file_hash`` the hex SHA-256 of the whole text's UTF-8 bytes.

        Raises :class:`InvalidUtf8Error` for undecodable bytes (or a ``str`` that
        cannot be encoded as UTF-8) and :class:`EmptyContentError` if the content
        holds no words.
        """
        text, raw = _text_and_bytes(content)

        # Word boundaries as two parallel lists of positions rather than a list of
        # word strings: chunks are slices of ``text``, never words joined back.
        starts: list[int] = []
        ends: list[int] = []
        for match in _WORD.finditer(text):
            starts.append(match.start())
            ends.append(match.end())
        n_words = len(starts)
        if n_words == 0:
            raise EmptyContentError("Content is empty string")

        # (first word index, one past last word index) of every chunk.
        spans: list[tuple[int, int]] = []
        if n_words <= self._chunk_size:
            spans.append((0, n_words))
        else:
            start = 0
            while True:
                end = min(start + self._chunk_size, n_words)
                if end == n_words:
                    # The last chunk is not pulled back to a sentence: that would
                    # only leave a sliver of words for yet another chunk.
                    spans.append((start, end))
                    break
                end = self._sentence_end(text, ends, end)
                spans.append((start, end))
                # max() guarantees progress when a sentence cut left a chunk of
                # no more than ``overlap`` words; the new start is still <= end, so
                # no word is skipped.
                start = max(end - self._overlap, start + 1)

        file_hash = hashlib.sha256(raw).hexdigest()
        total = len(spans)
        return [
            TextChunk(
                content=text[starts[first] : ends[last - 1]],
                word_count=last - first,
                metadata=ChunkMetadata(
                    file_path=file_path,
                    chunk_index=index,
                    total_chunks=total,
                    word_offset=first,
                    char_offset=starts[first],
                    original_file_hash=file_hash,
                ),
            )
            for index, (first, last) in enumerate(spans)
        ]

    def _sentence_end(self, text: str, ends: list[int], end: int) -> int:
        """Pull ``end`` (exclusive word index) back to just after the nearest word
        that ends a sentence, looking at most ``_sentence_window`` words back;
        ``end`` unchanged if there is none that close."""
        for back in range(self._sentence_window + 1):
            last_word = end - 1 - back
            # ``ends[i] - 1`` is the last character of word ``i``.
            if text[ends[last_word] - 1] in SENTENCE_TERMINATORS:
                return last_word + 1
        return end


def _text_and_bytes(content: str | bytes) -> tuple[str, bytes]:
    """The content as text and as UTF-8 bytes (the bytes are what gets hashed)."""
    if isinstance(content, str):
        try:
            return content, content.encode("utf-8")
        except UnicodeEncodeError as exc:
            # Only lone surrogates get here; such a str has no UTF-8 form to hash.
            raise InvalidUtf8Error(f"Content cannot be encoded as UTF-8: {exc}") from exc
    if isinstance(content, bytes):
        try:
            return content.decode("utf-8"), content
        except UnicodeDecodeError as exc:
            raise InvalidUtf8Error(f"Content is not valid UTF-8: {exc}") from exc
    # Fail loudly rather than with an AttributeError deep inside for, say, None.
    raise TypeError(f"content must be str or bytes, not {type(content).__name__}")
