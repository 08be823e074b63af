"""Bringing a team database's schema up to date, forward only, one process at a time.

:func:`migrate` takes PostgreSQL's advisory lock :data:`LOCK_KEY` for the whole run, so
any number of lexmem processes may open a database at once: the first applies the
missing steps of :data:`lexmem.store.postgres.schema.STEPS`, the others wait, then find
nothing left to do. Each step commits on its own, with its row in
``lexmem.schema_version``: a failing step is rolled back whole and leaves the database
at the version before it, to be taken up again by the next run.

A database at a version past the newest step this lexmem knows was laid out by a newer
lexmem: it is refused with :class:`~lexmem.errors.SchemaTooNewError` before anything in
it changes (only the lock is taken, and given back).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from lexmem.errors import InvalidInputError, SchemaTooNewError, StoreError, StoreLockedError
from lexmem.store.postgres.schema import STEPS, Step
from lexmem.version import __version__

__all__ = [
    "LOCK_KEY",
    "LOCK_TIMEOUT",
    "MAX_DIM",
    "describe",
    "migrate",
    "read_meta",
    "schema_version",
]

log = logging.getLogger("lexmem.migrations")

# The advisory lock every lexmem takes to change the schema: a fixed 64-bit key of its
# own, so it meets no other application's locks.
LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"lexmem: team database schema").digest()[:8], "big", signed=True
)
# How long a run waits for the lock, and a step for the tables it alters, in seconds.
LOCK_TIMEOUT = 120.0
# pgvector's HNSW index takes vectors of at most 2,000 dimensions.
MAX_DIM = 2000


def describe(conn: psycopg.Connection[Any]) -> str:
    """The database as a person would name it, without credentials."""
    info = conn.info
    return f"the team database {info.dbname} on {info.host}:{info.port}"


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version the database is at (0: lexmem never laid it out)."""
    with conn.transaction():
        return _version(conn)


def read_meta(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """What the database was made for (``embedding_space``, ``embedding_dim``); empty
    before the first step."""
    with conn.transaction():
        if _missing(conn, "lexmem.meta"):
            return {}
        rows = conn.execute("SELECT key, value FROM lexmem.meta").fetchall()
    return {str(key): str(value) for key, value in rows}


def migrate(
    conn: psycopg.Connection[Any],
    *,
    dim: int,
    space: str,
    steps: Sequence[Step] = STEPS,
    lock_timeout: float = LOCK_TIMEOUT,
) -> list[int]:
    """Apply the steps the database lacks, under the advisory lock; returns the versions
    applied (empty when it was up to date). ``dim`` and ``space`` are the embedding
    model's dimension and vector space id, written into the schema by the first step.

    ``conn`` must be outside a transaction; it is left outside one, holding no lock.
    Raises :class:`~lexmem.errors.SchemaTooNewError` for a database from a newer lexmem,
    :class:`~lexmem.errors.StoreLockedError` when another process held the lock past
    ``lock_timeout``, and :class:`~lexmem.errors.StoreError` naming the step that failed.
    """
    if not 1 <= dim <= MAX_DIM:
        raise InvalidInputError(
            f"a vector dimension of {dim}: the team database takes 1 to {MAX_DIM}"
        )
    if [s.version for s in steps] != list(range(1, len(steps) + 1)):
        raise InvalidInputError("schema steps must be numbered 1, 2, 3, ... in order")
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise InvalidInputError("migrate needs a connection outside any transaction")
    where = describe(conn)
    timeout_ms = str(max(1, round(lock_timeout * 1000)))
    t0 = time.monotonic()
    try:
        with conn.transaction():
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (timeout_ms,))
            conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    except psycopg.errors.LockNotAvailable as exc:
        raise StoreLockedError(f"the schema lock of {where}", time.monotonic() - t0) from exc
    except psycopg.Error as exc:
        raise StoreError(f"{where}: {_reason(exc)}") from exc
    try:
        return _apply(conn, where, steps, dim=dim, space=space, timeout_ms=timeout_ms)
    except psycopg.Error as exc:
        raise StoreError(f"{where}: {_reason(exc)}") from exc
    finally:
        # A broken connection's session is gone, and its lock with it.
        if not conn.closed and not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            if not conn.autocommit:
                conn.commit()


def _apply(
    conn: psycopg.Connection[Any],
    where: str,
    steps: Sequence[Step],
    *,
    dim: int,
    space: str,
    timeout_ms: str,
) -> list[int]:
    with conn.transaction():
        current = _version(conn)
    if current > len(steps):
        raise SchemaTooNewError(where, found=current, known=len(steps))
    applied: list[int] = []
    for step in steps[current:]:
        text = sql.SQL(step.sql).format(dim=sql.Literal(dim), space=sql.Literal(space))
        t0 = time.monotonic()
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (timeout_ms,))
                conn.execute(text)
                conn.execute(
                    "INSERT INTO lexmem.schema_version (version, name, lexmem_version)"
                    " VALUES (%s, %s, %s)",
                    (step.version, step.name, __version__),
                )
        except psycopg.Error as exc:
            raise StoreError(
                f"{where}: schema step {step.version} ({step.name}) failed: {_reason(exc)}; "
                f"the database stays at version {step.version - 1}"
            ) from exc
        log.info(
            "[MEM:STORE] %s: schema step %d (%s) in %.0f ms",
            where, step.version, step.name, (time.monotonic() - t0) * 1000,
        )  # fmt: skip
        applied.append(step.version)
    return applied


def _reason(exc: BaseException) -> str:
    """PostgreSQL's message, first line (its detail and hint lines follow it)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _missing(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NULL", (table,)).fetchone()
    return bool(row and row[0])


def _version(conn: psycopg.Connection[Any]) -> int:
    if _missing(conn, "lexmem.schema_version"):
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM lexmem.schema_version").fetchone()
    return int(row[0]) if row else 0
