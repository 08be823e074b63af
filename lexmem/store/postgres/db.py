"""The connection to a PostgreSQL database that the postgres backend's store, journal and
search share: a pool, transactions, the cross-process write lock, and PostgreSQL's
failures turned into :class:`~lexmem.errors.StoreError`.

Every connection talks UTC (``timezone`` set at connect, so timestamps come back aware in
UTC) and runs with autocommit off; :meth:`Database.tx` is one transaction.

The write lock (:meth:`Database.writing`) is a session-level advisory lock on a
connection the thread keeps for the ``with`` block: every transaction the thread opens
meanwhile runs on that connection, so the store's and the journal's operations inside one
``writing()`` block commit with no other writer between them, and nesting is free.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from lexmem.errors import (
    InvalidInputError,
    LexmemError,
    StoreDamagedError,
    StoreError,
    StoreIOError,
    StoreLockedError,
)

__all__ = ["WRITE_LOCK_KEY", "Database", "PasswordRefusedError", "failure", "safe_url"]

# The advisory lock lexmem's writers take: a fixed 64-bit key of its own.
WRITE_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"lexmem: team database writer").digest()[:8], "big", signed=True
)
# How long a writer waits for another to finish, and a connection for the server, in s.
WRITE_LOCK_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0


def safe_url(url: str) -> str:
    """``url`` without its password (what may be shown or logged)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(a database address that cannot be read)"
    info.pop("password", None)
    host = str(info.get("hostaddr") or info.get("host") or "localhost")  # where libpq goes
    where = host if host.startswith("/") else f"{host}:{info.get('port') or 5432}"
    user = info.get("user")
    return f"{str(user) + '@' if user else ''}{where}/{info.get('dbname') or ''}"


def failure(
    exc: BaseException, doing: str, where: str | None = None, waited: float = WRITE_LOCK_TIMEOUT
) -> LexmemError:
    """The :class:`StoreError` (or :class:`InvalidInputError`) PostgreSQL's ``exc`` is,
    saying what lexmem was ``doing`` in one line."""
    if isinstance(exc, LexmemError):
        return exc
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, pgerrors.LockNotAvailable | pgerrors.QueryCanceled):
        return StoreLockedError(where or "the database", waited)
    if isinstance(exc, PoolTimeout) or (
        isinstance(exc, psycopg.OperationalError) and _unreachable(exc.sqlstate)
    ):
        return StoreIOError(f"{doing}: the database server cannot be reached ({first})", path=where)
    if isinstance(
        exc,
        pgerrors.DataException
        | pgerrors.IntegrityError
        | pgerrors.SyntaxErrorOrAccessRuleViolation,
    ) and not isinstance(exc, pgerrors.InsufficientPrivilege | pgerrors.UndefinedTable):
        return InvalidInputError(f"{doing}: {first}")
    if isinstance(exc, pgerrors.UndefinedTable | pgerrors.UndefinedColumn | pgerrors.DataCorrupted):
        return StoreDamagedError(f"{doing}: {first}", path=where)
    return StoreError(f"{doing}: {first}")


class PasswordRefusedError(StoreError):
    """The server refused the role's password, or asked for one and none was given: a
    credential the person gives, so the exit code of bad input."""

    exit_code = 2


_WRONG_PASSWORD = re.compile(r'password authentication failed for user "([^"]*)"')


def refused(exc: BaseException, url: str) -> PasswordRefusedError | None:
    """The :class:`PasswordRefusedError` a failed connection is, or None."""
    text = str(exc)
    wrong = _WRONG_PASSWORD.search(text)
    if wrong:
        return PasswordRefusedError(f"the server refused the password for {wrong.group(1)}")
    if "no password supplied" in text:
        try:
            user = str(psycopg.conninfo.conninfo_to_dict(url).get("user") or "")
        except psycopg.ProgrammingError:
            user = ""
        user = user or os.environ.get("PGUSER") or getpass.getuser()
        return PasswordRefusedError(
            f"the server asked for {user}'s password and lexmem has none (give it with "
            "--password-stdin, or in a password file only you can read: docs/team.md)"
        )
    return None


def _unreachable(sqlstate: str | None) -> bool:
    """Whether an operational failure is the server not there (no SQLSTATE: the
    connection itself; class 08: connection exceptions; 57P: shut down or starting;
    class 53: out of disk, memory or connections), not a statement's own."""
    return sqlstate is None or sqlstate.startswith(("08", "57P", "53"))


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET timezone = 'UTC'")
    conn.commit()


class Database:
    """One database, shared by a backend's store, journal and search in this process."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 6) -> None:
        self.url = url
        self.where = safe_url(url)
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"connect_timeout": int(CONNECT_TIMEOUT)},
            configure=_configure,
            open=False,
            name="lexmem",
        )
        self._opened = False
        self._local = threading.local()

    def open(self) -> None:
        if self._opened:
            return
        try:
            # One connection first: a server that is down says so at once, where the
            # pool would retry it until its timeout.
            psycopg.connect(self.url, connect_timeout=int(CONNECT_TIMEOUT)).close()
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except Exception as exc:
            self._pool.close()
            raise (
                refused(exc, self.url) or failure(exc, f"opening {self.where}", self.where)
            ) from exc
        self._opened = True

    def close(self) -> None:
        self._pool.close()
        self._opened = False

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's writing connection when it holds the write lock, else one from
        the pool for the block."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        try:
            with self._pool.connection(timeout=CONNECT_TIMEOUT) as conn:
                yield conn
        except PoolTimeout as exc:
            raise failure(exc, f"reaching {self.where}", self.where) from exc

    @contextmanager
    def tx(self, doing: str = "reading the team database") -> Iterator[psycopg.Cursor[Any]]:
        """A cursor in one transaction: committed at the end of the block, rolled back
        (as a savepoint, nested) on an error, which leaves as :func:`failure` says."""
        try:
            with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield cur
        except LexmemError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise failure(exc, doing, self.where) from exc

    @contextmanager
    def writing(self, timeout: float = WRITE_LOCK_TIMEOUT) -> Iterator[None]:
        """The write lock across processes for the block (re-entrant in a thread)."""
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        with self.connection() as conn:
            try:
                conn.execute(f"SET lock_timeout = '{int(timeout * 1000)}ms'")
                conn.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK_KEY,))
                conn.execute("SET lock_timeout = 0")
                conn.commit()
            except psycopg.Error as exc:
                conn.rollback()
                raise failure(exc, "waiting for the team database's write lock") from exc
            self._local.conn = conn
            self._local.depth = 1
            try:
                yield
            finally:
                self._local.conn = None
                self._local.depth = 0
                try:
                    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        conn.rollback()
                    conn.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK_KEY,))
                    conn.commit()
                except psycopg.Error:
                    pass  # the connection is broken: its session, and so its lock, ended

    def rewrite(
        self,
        vacuums: Sequence[sql.Composed | str],
        doing: str,
        *,
        after: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        """Run ``vacuums`` (``VACUUM (FULL, ...)`` statements, one at a time: VACUUM runs
        in no transaction block) under the write lock,
        outside any transaction, on this thread's writing connection switched to
        autocommit for it; then ``after`` on that connection (the statistics catalog's
        rewrite). A reader holding a table past the write lock's timeout is
        :class:`StoreLockedError`; a table the server skipped (a role that does not own
        it: VACUUM only warns) is :class:`StoreError`, one line, not a silent pass."""
        skipped: list[str] = []

        def notice(diag: psycopg.errors.Diagnostic) -> None:
            if (diag.severity_nonlocalized or diag.severity) == "WARNING":
                skipped.append(diag.message_primary or "a table was skipped")

        with self.writing(), self.connection() as conn:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raise StoreError(f"{doing}: cannot rewrite tables inside a transaction")
            conn.add_notice_handler(notice)
            try:
                conn.autocommit = True
                conn.execute(f"SET lock_timeout = '{int(WRITE_LOCK_TIMEOUT * 1000)}ms'")
                for vacuum in vacuums:
                    conn.execute(vacuum)
                if after is not None:
                    after(conn)
            except psycopg.Error as exc:
                raise failure(exc, doing, self.where) from exc
            finally:
                conn.remove_notice_handler(notice)
                # A broken connection ends its session, and its settings with it.
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SET lock_timeout = 0")
                with contextlib.suppress(psycopg.Error):
                    conn.autocommit = False
        if skipped:
            raise StoreError(f"{doing}: the server did not rewrite a table ({skipped[0]})")

    @contextmanager
    def write(self, doing: str) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction under the write lock."""
        with self.writing(), self.tx(doing) as cur:
            yield cur
