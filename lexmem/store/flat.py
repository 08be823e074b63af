"""The vector leg in memory: exact cosine search over a copy of the store's rows.

Below the size at which the store builds its vector index, LanceDB answers a vector
query by reading and scoring every row, about 17 ms at 10,000 memories, most of it
reading. A warm process (the service, the tray) searches the same rows again and
again, so it keeps them: the vectors as one unit-length matrix (a product with the
query is under a millisecond at 10,000) and the ranking columns as an Arrow table, for
one version of the table. Filters are evaluated on those columns, with the same
meaning as :func:`~lexmem.store.lance.filter_where` gives them in SQL.

The copy is moved to a new version by the store itself when a commit changes nothing
it holds but the access records (which it updates from the store), or nothing at all
(compaction, index upkeep): :meth:`FlatVectors.at`. Any other commit makes it stale,
and the next search takes a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from lexmem.store.protocol import MemoryFilter

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = [
    "ACCESS_COLUMNS", "FLAT_MAX_ROWS", "FlatVectors", "admitted", "arrow_rows", "filter_columns",
]  # fmt: skip

# What access records change: kept as Python lists, updated in place.
ACCESS_COLUMNS = ("access_count", "last_accessed_at")
# Above this many rows the copy is not kept (at 384 dimensions the matrix is ~1.5 kB a
# row: 30 MB here); LanceDB's own query serves, and from the store's vector-index
# threshold on, its index.
FLAT_MAX_ROWS = 20_000


class FlatVectors:
    """One version of the table's rows, for exact nearest-neighbour queries."""

    __slots__ = (
        "access", "access_types", "columns", "position", "rows", "stored", "unit", "version",
    )  # fmt: skip

    def __init__(
        self, version: int, rows: pa.Table, unit: np.ndarray,
        access: dict[str, list[Any]], position: dict[str, int],
        stored: tuple[np.ndarray, np.ndarray], access_types: dict[str, pa.DataType],
    ) -> None:  # fmt: skip
        self.version = version
        self.rows = rows  # row i of ``unit`` is row i here (no access columns)
        self.unit = unit  # float32, one unit-length row per memory (zero stays zero)
        # The stored vectors that normalising changed (a tenth of a model's, off by a
        # last bit): (row -> slot or -1, those vectors). The session read gives them
        # back exactly as LanceDB would, at a tenth of a second matrix's memory.
        self.stored = stored
        self.access = access  # each access column, a list in row order
        self.access_types = access_types
        self.position = position  # id -> row
        self.columns = frozenset([*rows.column_names, *access])

    @classmethod
    def from_table(cls, version: int, table: pa.Table, dim: int) -> FlatVectors:
        """A copy of ``table`` (its ``vector`` column and the row columns)."""
        import numpy as np

        vectors = table.column("vector").combine_chunks()
        matrix = np.asarray(vectors.values.to_numpy(zero_copy_only=False), dtype=np.float32)
        matrix = matrix.reshape(len(table), dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        changed = np.flatnonzero((unit != matrix).any(axis=1))
        slot = np.full(len(matrix), -1, dtype=np.int32)
        slot[changed] = np.arange(len(changed), dtype=np.int32)
        stored = (slot, np.ascontiguousarray(matrix[changed]))
        access = {c: table.column(c).to_pylist() for c in ACCESS_COLUMNS}
        types = {c: table.schema.field(c).type for c in ACCESS_COLUMNS}
        position = {str(i): n for n, i in enumerate(table.column("id").to_pylist())}
        # One chunk a column: taking a few rows from one chunk is several times quicker.
        rows = table.drop_columns(["vector", *ACCESS_COLUMNS]).combine_chunks()
        return cls(version, rows, unit, access, position, stored, types)

    def at(self, version: int, accessed: Sequence[dict[str, Any]] = ()) -> FlatVectors:
        """The same rows at ``version``, a commit that changed none of them but the
        access records of ``accessed`` (rows of id and the access columns, as stored)."""
        for row in accessed:
            n = self.position.get(str(row["id"]))
            if n is not None:
                for column in ACCESS_COLUMNS:
                    self.access[column][n] = row[column]
        return FlatVectors(
            version, self.rows, self.unit, self.access, self.position, self.stored,
            self.access_types,
        )  # fmt: skip

    def serves(self, columns: Sequence[str]) -> bool:
        return self.columns.issuperset(columns)

    def get(self, ids: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]:
        """The rows of ``ids`` that the copy has, in that order, with ``columns``."""
        return self._take([n for i in ids if (n := self.position.get(i)) is not None], columns)

    def _take(self, rows: Sequence[int], columns: Sequence[str]) -> list[dict[str, Any]]:
        if not rows:  # an empty list has no type Arrow can take by
            return []
        plain = [c for c in columns if c not in ACCESS_COLUMNS]
        out = arrow_rows(self.rows.select(plain).take(list(rows)))
        for column in columns:
            if column in ACCESS_COLUMNS:
                values = self.access[column]
                for row, n in zip(out, rows, strict=True):
                    row[column] = values[n]
        return out

    def session_rows(
        self, flt: MemoryFilter, sessions: Iterable[str], ids: Iterable[str], limit: int,
        columns: Sequence[str],
    ) -> tuple[pa.Table, np.ndarray]:  # fmt: skip
        """What :meth:`~lexmem.store.lance.MemoryStore.session_rows` reads from LanceDB:
        the rows ``flt`` admits of these sessions and of ``ids``, the first ``limit`` in
        table order (the order a scan meets them), with ``columns``; and their vectors
        as stored, row i of the matrix for row i of the table."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        wanted = np.zeros(len(self.unit), dtype=bool)
        names = sorted({s for s in sessions if s})
        if names:
            column = self.rows.column("session_id")
            inside = pc.is_in(column, value_set=pa.array(names, type=column.type))
            wanted |= pc.fill_null(inside, False).to_numpy(zero_copy_only=False)
        for i in ids:
            n = self.position.get(i)
            if n is not None:
                wanted[n] = True
        admitted = self._admitted(flt)
        if admitted is not None:
            wanted &= admitted
        index = np.flatnonzero(wanted)[: max(limit, 0)]
        plain = self.rows.select([c for c in columns if c not in ACCESS_COLUMNS])
        taken = plain.take(pa.array(index, type=pa.int64()))
        arrays = []
        for column in columns:
            if column in ACCESS_COLUMNS:
                values = self.access[column]
                kept = [values[n] for n in index.tolist()]
                arrays.append(pa.array(kept, type=self.access_types[column]))
            else:
                arrays.append(taken.column(column).combine_chunks())
        vectors = self.unit[index]
        slot, exact = self.stored
        slots = slot[index]
        changed = slots >= 0
        vectors[changed] = exact[slots[changed]]
        return pa.Table.from_arrays(arrays, names=list(columns)), vectors

    def nearest(
        self, vector: Any, flt: MemoryFilter, depth: int, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The ``depth`` rows ``flt`` admits nearest ``vector`` by cosine, nearest first,
        each with ``columns`` and ``_distance`` (1 - cosine), as LanceDB returns them."""
        import numpy as np

        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(query))
        if norm > 0:
            query = query / norm
        sims = self.unit @ query  # every row: cheaper than gathering the admitted ones
        admitted = self._admitted(flt)
        if admitted is None:
            index = np.arange(len(sims))
        else:
            index = np.flatnonzero(admitted)
            sims = sims[index]
        if not len(index):
            return []
        k = min(depth, len(index))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(index) else np.arange(len(index))
        # Nearest first; equal scores in table order, as a scan would meet them.
        top = top[np.lexsort((index[top], -sims[top]))]
        rows = self._take(index[top].tolist(), columns)
        for row, sim in zip(rows, sims[top], strict=True):
            row["_distance"] = float(1.0 - sim)
        return rows

    def _admitted(self, flt: MemoryFilter) -> Any:
        return admitted(self.rows, flt)


def filter_columns(flt: MemoryFilter) -> list[str]:
    """The columns :func:`admitted` reads for ``flt``."""
    named = (
        ("project", flt.project is not None or bool(flt.exclude_projects)),
        ("type", flt.type is not None), ("status", flt.status is not None),
        ("source", flt.source is not None), ("session_id", flt.session_id is not None),
        ("user_id", flt.user_id is not None),
        ("source_document", flt.source_document is not None),
        ("pinned", flt.pinned is not None),
        ("created_at", flt.created_after is not None or flt.created_before is not None),
    )  # fmt: skip
    return [column for column, used in named if used]


def admitted(rows: pa.Table, flt: MemoryFilter) -> Any:
    """A boolean mask of the rows of ``rows`` that ``flt`` admits (None: all of them),
    with the meaning :func:`~lexmem.store.lance.filter_where` gives it in SQL: NULL
    never equals a value. ``rows`` needs the :func:`filter_columns` of ``flt``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    masks: list[Any] = []

    def equal(column: str, value: Any) -> None:
        masks.append(pc.equal(rows.column(column), pa.scalar(value)))

    if flt.project is not None:
        equal("project", flt.project)
    if flt.exclude_projects:
        col = rows.column("project")
        listed = pa.array(sorted(set(flt.exclude_projects)), type=col.type)
        masks.append(pc.or_(pc.is_null(col), pc.invert(pc.is_in(col, value_set=listed))))
    for column, value in (
        ("type", flt.type), ("status", flt.status), ("source", flt.source),
        ("session_id", flt.session_id), ("user_id", flt.user_id),
        ("source_document", flt.source_document),
    ):  # fmt: skip
        if value is not None:
            equal(column, str(value))
    if flt.pinned is not None:
        masks.append(pc.equal(rows.column("pinned"), pa.scalar(bool(flt.pinned))))
    if flt.created_after is not None or flt.created_before is not None:
        created = rows.column("created_at")
        if flt.created_after is not None:
            at = pa.scalar(flt.created_after).cast(created.type)
            masks.append(pc.greater_equal(created, at))
        if flt.created_before is not None:
            at = pa.scalar(flt.created_before).cast(created.type)
            masks.append(pc.less(created, at))
    if not masks:
        return None
    mask = masks[0]
    for m in masks[1:]:
        mask = pc.and_kleene(mask, m)
    return pc.fill_null(mask, False).to_numpy(zero_copy_only=False)


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist()``: the same rows, the same values, in a third of the time for
    a table with the store's timestamps.

    Why: Arrow makes each ``timestamp[us, tz=UTC]`` value a datetime through its time
    zone, about 4.5 microseconds a value; a search turns several hundred rows' two
    timestamps into Python (both legs and the session read), ~2 ms of a 25 ms search.
    Here such a column is read as integers and each value is the epoch plus that many
    microseconds, in the zone Arrow would give it. Other columns are Arrow's own."""
    names = table.column_names
    if not names:
        return [{} for _ in range(table.num_rows)]
    columns = [_values(table.column(n)) for n in range(len(names))]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _values(column: Any) -> list[Any]:
    """One column's values as ``to_pylist`` gives them (see :func:`arrow_rows`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.type != pa.timestamp("us", tz="UTC"):
        out: list[Any] = column.to_pylist()
        return out
    epoch = _epoch()
    ints = pc.cast(column, pa.int64())
    if not column.null_count:
        return [epoch + timedelta(microseconds=v) for v in ints.to_numpy().tolist()]
    return [None if v is None else epoch + timedelta(microseconds=v) for v in ints.to_pylist()]


@cache
def _epoch() -> datetime:
    """What a ``timestamp[us, tz=UTC]`` counts from, as Arrow gives it (its zone object)."""
    import pyarrow as pa

    value: datetime = pa.scalar(0, type=pa.timestamp("us", tz="UTC")).as_py()
    return value
