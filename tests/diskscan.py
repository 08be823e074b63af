"""Proof that text is gone from a data folder: every file, every table version, decoded.

``grep`` is no proof for Lance: it compresses pages, so a forgotten memory's text can sit
in a data file, an older version or an index and never show as plain bytes. This reads
the folder the way an attacker with the disk would:

- every file's raw bytes (the plain files: digests, logs, JSON, settings);
- for each Lance table (a ``*.lance`` folder): every version the manifests still list,
  read back in full; every data file under ``data/`` decoded on its own, which includes
  rows a deletion vector hides; every index file under ``_indices/`` decoded the same way
  (or its raw bytes, when it is not a Lance file). A full-text index keeps its tokens in an
  FST (the Rust ``fst`` crate's format, column ``_token_fst_bytes``), where common letters
  are folded into node headers: :func:`fst_keys` walks it and lists every token.

``assert_nowhere(home, markers)`` fails naming each place a marker was found. Markers
should be one token the full-text tokenizer keeps whole and does not stem, e.g.
``zqxmarker17q`` (letters and digits, no punctuation).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["assert_nowhere", "find_markers", "fst_keys", "lance_tables", "texts_on_disk"]


def lance_tables(home: Path) -> list[Path]:
    """Every Lance table folder under ``home``."""
    return sorted(p for p in home.rglob("*.lance") if p.is_dir())


def _text_of(table: Any) -> Iterator[str]:
    """Every string value in an Arrow table (lists and structs opened up), and the
    numbers' text too, so a marker in any column is found."""
    import pyarrow as pa

    def walk(array: Any) -> Iterator[str]:
        t = array.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from walk(array.field(i))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from walk(array.flatten())
        elif pa.types.is_dictionary(t):
            yield from walk(array.dictionary)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            yield from (v for v in array.to_pylist() if v)
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            yield from (v.decode("utf-8", "replace") for v in array.to_pylist() if v)

    for column in table.columns:
        for chunk in column.chunks:
            yield from walk(chunk)


# The ``fst`` crate's table of common input bytes (its format, src/raw/common_inputs.rs).
_COMMON_INPUTS = (
    b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGWUV,YKJZXQ;)(~[]$!'*@"
)


def _uint(data: bytes, at: int, n: int) -> int:
    return int.from_bytes(data[at : at + n], "little") if n else 0


def fst_keys(data: bytes) -> Iterator[str]:
    """Every key of a serialised ``fst`` (the Rust crate, format 2 or 3)."""
    version = _uint(data, 0, 8)
    end = len(data) - (4 if version >= 3 else 0)
    root = _uint(data, end - 8, 8)

    def common(idx: int) -> int | None:
        return None if idx == 0 else _COMMON_INPUTS[idx - 1]

    def node(addr: int) -> tuple[bool, list[tuple[int, int]]]:
        """(final, [(input byte, target address)]) of the node at ``addr``; address 0
        is the empty final node."""
        if addr == 0:
            return True, []
        v = data[addr]
        kind = v >> 6
        if kind in (0b11, 0b10):
            c = common(v & 0x3F)
            inp = c if c is not None else data[addr - 1]
            ilen = 0 if c is not None else 1
            if kind == 0b11:
                return False, [(inp, addr - ilen - 1)]
            sizes = data[addr - ilen - 1]
            tsize, osize = sizes >> 4, sizes & 0x0F
            delta = _uint(data, addr - ilen - 1 - tsize, tsize)
            nend = addr - ilen - 1 - tsize - osize
            return False, [(inp, 0 if delta == 0 else nend - delta)]
        final = bool(v & 0x40)
        n = v & 0x3F
        nlen = 0
        if n == 0:
            n, nlen = data[addr - 1], 1
            n = 256 if n == 1 else n
        sizes = data[addr - nlen - 1]
        tsize, osize = sizes >> 4, sizes & 0x0F
        index = 256 if version >= 2 and n > 32 else 0
        base = addr - nlen - 1 - index
        nend = base - n - n * tsize - n * osize - (osize if final else 0)
        out: list[tuple[int, int]] = []
        for i in range(n):
            inp = data[base - i - 1]
            delta = _uint(data, base - n - i * tsize - tsize, tsize)
            out.append((inp, 0 if delta == 0 else nend - delta))
        return final, out

    stack: list[tuple[int, bytes]] = [(root, b"")]
    while stack:
        addr, prefix = stack.pop()
        final, trans = node(addr)
        if final and prefix:
            yield prefix.decode("utf-8", "replace")
        for inp, target in trans:
            stack.append((target, prefix + bytes([inp])))


def _hits(texts: Iterable[str], markers: Iterable[str]) -> set[str]:
    wanted = [m.casefold() for m in markers]
    found: set[str] = set()
    for text in texts:
        folded = text.casefold()
        found.update(m for m in wanted if m in folded)
    return found


def _decode_file(path: Path) -> Any | None:
    """A Lance file's rows (all of them: a data file knows nothing of deletions), or
    None when ``path`` is not a Lance file (a deletion vector, an index's ``.idx``: their
    raw bytes are scanned). A ``.lance`` file that cannot be decoded fails the scan: a
    proof must not skip what it cannot read."""
    from lance.file import LanceFileReader

    if path.suffix != ".lance":
        return None
    return LanceFileReader(str(path)).read_all().to_table()


def texts_on_disk(home: Path) -> Iterator[tuple[str, list[str]]]:
    """(where, the texts found there) for every place under ``home`` a text can hide: each
    file's raw bytes, each Lance table version's rows, and each data and index file decoded
    (a full-text index's tokens included)."""
    import lance

    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # a live writer's temporary file, gone meanwhile
            continue
        yield f"{path.relative_to(home)}: raw bytes", [data.decode("utf-8", "replace")]
    for table in lance_tables(home):
        name = table.relative_to(home)
        try:
            ds = lance.dataset(str(table))
        except Exception as exc:  # a folder with no committed version holds nothing to read
            if "not found" in str(exc).lower():
                continue
            raise
        for v in ds.versions():
            version = v["version"]
            rows = lance.dataset(str(table), version=version).to_table()
            yield f"{name} version {version}: rows", list(_text_of(rows))
        for sub in ("data", "_indices"):
            for path in sorted(p for p in (table / sub).rglob("*") if p.is_file()):
                decoded = _decode_file(path)
                if decoded is None:
                    continue  # its raw bytes were read above
                texts = list(_text_of(decoded))
                if "_token_fst_bytes" in decoded.schema.names:
                    for blob in decoded.column("_token_fst_bytes").to_pylist():
                        texts.extend(fst_keys(blob) if blob else ())
                yield f"{path.relative_to(home)}: decoded rows", texts


def find_markers(home: Path, markers: Iterable[str]) -> list[str]:
    """Where any of ``markers`` (case-insensitive) is found under ``home``: one line each."""
    markers = list(markers)
    found: list[str] = []
    for where, texts in texts_on_disk(home):
        hit = _hits(texts, markers)
        if hit:
            found.append(f"{where} hold {sorted(hit)}")
    return found


def assert_nowhere(home: Path, markers: Iterable[str]) -> None:
    """Fail, naming every place, if any marker is still anywhere under ``home``."""
    found = find_markers(home, markers)
    assert not found, "text that should be gone is still on disk:\n" + "\n".join(found)
