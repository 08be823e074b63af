"""Push the outbox to the team's server and pull the team's changes into the local store.

The single writer runs :meth:`TeamSync.sync_once` on its own thread (the service's loop,
or ``lexmem team sync`` as a maintenance job): nothing else writes the store meanwhile.

Push: the outbox's changes, a batch at a time, one transaction on the server per batch.
A change leaves the outbox only once the server confirmed its (memory id, version),
applied or decided in a conflict; the server applies a repeat as nothing, so a push cut
short by a kill is simply pushed again. A change the server refuses (a project the role
may not write) is dropped with the reason kept for ``lexmem team status``.

Pull: per team project, every change after this client's cursor, applied with the
store's own operations (``store_many`` for new memories with their own ids and times;
``edit``, ``set_pinned``, ``archive``, ``restore``, ``supersede`` and links for changed
ones; the facade's erasure for tombstones), under the local project the team's name
maps back to, inside :meth:`SharingStore.quiet` so that nothing pulled is pushed back.
The cursor moves only after the batch is applied: a kill re-applies it, which changes
nothing the second time.

Conflicts are the server's to decide (the higher version, then the later edit); the
losing version is kept in the server's history and counted here for the status.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lexmem.capture.policy import optout_rules, project_opted_out
from lexmem.errors import InvalidInputError, LexmemError, StoreIOError
from lexmem.keystore import SecretStoreError, get_secret
from lexmem.models import MemoryLink, MemoryStatus, MemoryType
from lexmem.store.schema import memory_from_row
from lexmem.team.outbox import Entry, Outbox, TeamState, now_text
from lexmem.team.recorder import SharingStore

if TYPE_CHECKING:
    from lexmem.models import Memory
    from lexmem.settings import TeamSettings

__all__ = [
    "PUSH_BATCH",
    "SyncReport",
    "TeamSync",
    "connect_url",
    "open_server",
    "password_entry",
    "server_module",
]

log = logging.getLogger("lexmem.team")

PUSH_BATCH = 200
PULL_BATCH = 500
# Backoff after a failed sync: 2, 4, 8 ... seconds, at most this.
MAX_BACKOFF_S = 60.0

_EDITABLE = (
    "content", "title", "type", "project", "salience", "importance", "metadata",
    "fingerprint", "word_count", "learning_context",
)  # fmt: skip


def server_module() -> Any:
    """``lexmem.store.postgres.team``, which needs psycopg (the ``team`` extra)."""
    try:
        return importlib.import_module("lexmem.store.postgres.team")
    except ImportError as exc:
        raise LexmemError(
            "team mode needs psycopg and the team server module: pip install 'lexmem[team]'"
        ) from exc


def connect_url(url: str, user: str) -> str:
    """The address to connect with: ``url`` with ``user`` as its role when given."""
    url = url.strip()
    if not user:
        return url
    if "://" in url:
        return f"{url}{'&' if '?' in url else '?'}user={user}"
    return f"{url} user={user}"


def password_entry(url: str, user: str) -> str:
    """The keyring entry that holds the password of ``user`` at ``url``."""
    return f"team-password:{user or '-'}@{url.strip()}"


def open_server(
    settings: TeamSettings, *, dim: int, space: str, password: str | None = None
) -> Any:
    """A :class:`TeamServer` connected as ``settings`` say (with ``password``, else the
    keyring's), its schema checked; one line (a :class:`LexmemError`) when the server is
    down, the address wrong or the password missing."""
    module = server_module()
    from lexmem.store.postgres.address import passfile_problem, tls_problem

    url = connect_url(settings.url, settings.user)
    # Judged as libpq will connect (hostaddr, PGHOST, a service ...), before it does.
    problem = tls_problem(url)
    if problem:
        raise InvalidInputError(problem)
    # The pool says each failed connection attempt on its own, over several lines, on
    # stderr: lexmem says the failure once, in one line (and in the log).
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    if password is None:
        try:
            password = get_secret(password_entry(settings.url, settings.user))
        except SecretStoreError:
            # No keyring, or nothing kept: a server that asks for none (a Unix socket,
            # trust or peer), a client certificate, or libpq's password file.
            password = None
    if password is None:
        problem = passfile_problem(url)
        if problem:
            raise InvalidInputError(problem)
    server = module.TeamServer(url, password=password, dim=dim, space=space)
    try:
        server.open()
    except LexmemError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LexmemError(f"cannot reach the team server: {first}") from exc
    return server


@dataclass(slots=True)
class SyncReport:
    pushed: int = 0
    pulled: int = 0
    deleted: int = 0
    conflicts: int = 0
    refused: int = 0
    lost: int = 0  # this client's edits that lost a conflict (also in ``conflicts``)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pushed": self.pushed, "pulled": self.pulled, "deleted": self.deleted,
            "conflicts": self.conflicts, "lost": self.lost, "refused": self.refused,
            "errors": list(self.errors),
        }  # fmt: skip


def _aware(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def _vector(value: Any) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, str):  # pgvector's text form, '[1,2,3]'
        value = [float(x) for x in value.strip("[]").split(",") if x.strip()]
    return [float(x) for x in value]


def memory_of(row: Mapping[str, Any], local_project: str) -> Memory:
    """A pulled row as a local memory, under the local project."""
    data = {k: _aware(v) for k, v in row.items()}
    data["vector"] = _vector(row.get("vector"))
    data["project"] = local_project
    meta = data.get("metadata")
    if isinstance(meta, dict):
        import json

        data["metadata"] = json.dumps(meta, sort_keys=True) if meta else None
    return memory_from_row(data)


class TeamSync:
    """One data folder's sync with its team server (the writer's thread only)."""

    def __init__(
        self,
        store: SharingStore,
        settings: TeamSettings,
        *,
        erase: Callable[[Sequence[str]], Sequence[str]],
        dim: int,
        space: str,
    ) -> None:
        self.store = store
        self.settings = settings
        self.erase = erase
        self.dim = dim
        self.space = space
        self.outbox: Outbox = store.outbox
        self.state: TeamState = store.state
        self._server: Any = None
        self.failures = 0
        self.next_try = 0.0
        self.last_pull = 0.0
        self.said = ""
        self.role = settings.user  # as the server names it, once connected

    # -- the connection -------------------------------------------------------------------

    def server(self) -> Any:
        if self._server is None:
            self._server = open_server(self.settings, dim=self.dim, space=self.space)
        return self._server

    def close(self) -> None:
        if self._server is not None:
            try:
                self._server.close()
            finally:
                self._server = None

    def configure(self, settings: TeamSettings) -> None:
        """New ``[team]`` settings (a join or leave elsewhere): reconnect when the address
        changed, share what the map now names."""
        if (settings.url, settings.user) != (self.settings.url, self.settings.user):
            self.close()
        self.settings = settings
        self.store.projects = dict(settings.projects)

    @property
    def team_projects(self) -> dict[str, str]:
        """Team project -> local project."""
        return {team: local for local, team in self.settings.projects.items()}

    # -- one sync -------------------------------------------------------------------------

    def due(self, notified: bool) -> bool:
        """Whether the loop should sync now: a change waits on either side, or the poll
        interval passed; never before the backoff of a failure ends."""
        now = time.monotonic()
        if not self.settings.url or not self.settings.projects or now < self.next_try:
            return False
        if notified or now - self.last_pull >= self.settings.poll_seconds:
            return True
        return self.outbox.size() > 0

    def sync_once(self) -> SyncReport:
        """Push the outbox, then pull; raises the one-line failure (the server down, a
        refusal) after recording it for the status."""
        report = SyncReport()
        try:
            try:
                self._sync(report)
            except StoreIOError:
                if self._server is None:
                    raise
                # The connections kept from the last sync may be dead (the server
                # restarted, an administrator ended them): once more on fresh ones.
                self.close()
                self._sync(report)
        except Exception as exc:
            self.close()
            self.failures += 1
            self.next_try = time.monotonic() + min(MAX_BACKOFF_S, 2.0**self.failures)
            message = str(exc) if isinstance(exc, LexmemError) else f"{type(exc).__name__}: {exc}"
            message = (message.strip().splitlines() or [""])[0]
            self.state.set_meta(last_error=message, last_error_at=now_text())
            raise
        self.failures = 0
        self.next_try = 0.0
        self.last_pull = time.monotonic()
        self.state.set_meta(last_sync=now_text(), last_error="")
        if report.conflicts:
            self.state.add_conflicts(report.conflicts)
        return report

    def _sync(self, report: SyncReport) -> None:
        server = self.server()
        self.share_joined()
        self.push(server, report)
        self.pull(server, report)

    def share_joined(self) -> None:
        """A project joined since the last sync: queue every memory it had here (once)."""
        for local, team in self.settings.projects.items():
            if self.state.shared(team):
                continue
            ids = self.store.inner.ids_in_projects([local])
            for i in range(0, len(ids), 500):
                self.store.share(ids[i : i + 500])
            self.state.mark_shared(team)

    # -- push -----------------------------------------------------------------------------

    def _change(self, module: Any, entry: Entry) -> Any:
        return module.Change(
            memory_id=entry.memory_id,
            version=entry.version,
            deleted=entry.deleted,
            row=None if entry.deleted else entry.row,
            links=tuple(entry.links),
            confidence=tuple(entry.confidence),
            project=entry.project,
        )

    def push(self, server: Any, report: SyncReport) -> None:
        module = server_module()
        while True:
            entries = self.outbox.entries(PUSH_BATCH)
            if not entries:
                return
            try:
                outcome = server.push([self._change(module, e) for e in entries])
            except InvalidInputError:
                # One change refused refuses the call: find which, push the rest.
                outcome = None
                for entry in entries:
                    try:
                        self._confirm(server.push([self._change(module, entry)]), [entry], report)
                    except InvalidInputError as exc:
                        self.outbox.drop(entry.memory_id)
                        report.refused += 1
                        report.errors.append(str(exc))
                        self.state.set_meta(last_refusal=str(exc))
            if outcome is not None:
                self._confirm(outcome, entries, report)

    def _confirm(self, outcome: Any, entries: Sequence[Entry], report: SyncReport) -> None:
        by_id = {e.memory_id: e for e in entries}
        known: dict[str, tuple[int, str | None]] = {}
        # This client's edits the team now holds: a pull that brings another role's row
        # at the same version says one of them was beaten afterwards.
        mine: dict[str, int] = {}
        lost: list[tuple[str, int, str, str | None]] = []
        for mid in outcome.applied:
            entry = by_id.get(mid)
            if entry is not None:
                known[mid] = (entry.version, entry.project)
                if not entry.deleted:
                    mine[mid] = entry.version
        settled: list[str] = []
        for conflict in outcome.conflicts:
            entry = by_id.get(conflict.memory_id)
            if entry is None:
                continue
            if conflict.kept_mine:
                known[conflict.memory_id] = (conflict.kept_version, entry.project)
                if not entry.deleted:
                    mine[conflict.memory_id] = conflict.kept_version
            else:
                # The server kept another version: the version is not raised here, so
                # that the pull brings the kept one in.
                known.pop(conflict.memory_id, None)
                settled.append(conflict.memory_id)
                lost.append((conflict.memory_id, conflict.lost_version, "", entry.project))
            report.conflicts += 1
        report.lost += len(lost)
        # The versions first: a kill between the two pushes the entry again, which the
        # server takes as a repeat.
        self.state.set_versions(known)
        self.state.set_mine(mine)
        self.state.add_lost(lost)
        for mid in [*known, *settled]:
            self.outbox.done(mid, by_id[mid].version)
            report.pushed += 1

    # -- pull -----------------------------------------------------------------------------

    def pull(self, server: Any, report: SyncReport) -> None:
        self.role = str(getattr(server, "role", "") or self.settings.user)
        rules = optout_rules(self.store.paths, self.store.capture)
        for team, local in self.team_projects.items():
            if project_opted_out(local, rules):
                continue  # an opted-out repository leaves no trace, the team's included
            after = self.state.cursor(team)
            while True:
                batch = server.pull([team], after, PULL_BATCH)
                if batch.changes:
                    self.apply(batch.changes, team, local, report)
                if batch.revision > after:
                    self.state.set_cursor(team, batch.revision)
                if len(batch.changes) < PULL_BATCH or batch.revision <= after:
                    break
                after = batch.revision

    def apply(self, changes: Sequence[Any], team: str, local: str, report: SyncReport) -> None:
        """Write pulled changes into the local store (none of it goes back out)."""
        latest: dict[str, Any] = {}
        for change in changes:  # the last change of each memory is its state
            latest[change.memory_id] = change
        inner = self.store.inner
        known: dict[str, tuple[int, str | None]] = {}
        erase: list[str] = []
        fresh: list[Memory] = []
        updates: list[tuple[Memory, Memory]] = []
        existing = {m.id: m for m in inner.get_many(list(latest), with_embedding=False)}
        self._losses(latest, team, report)
        # A change this client pushed comes back too: it is compared field by field
        # below and changes nothing. (Not skipped by version: another client's
        # concurrent edit that won has the same version as this one's that lost.)
        for mid, change in latest.items():
            pending = self.outbox.get(mid)
            if change.deleted:
                self.outbox.drop(mid)
                if mid in existing:
                    erase.append(mid)
                known[mid] = (int(change.version), team)
                continue
            if pending is not None and pending.version > int(change.version):
                continue  # a later local change waits to be pushed: it wins by version
            if change.row is None:
                continue
            incoming = memory_of(change.row, local)
            if mid in existing:
                updates.append((existing[mid], incoming))
            else:
                fresh.append(incoming)
            known[mid] = (int(change.version), team)
        with self.store.quiet(), inner.writing():
            if fresh:
                self._store_new(fresh)
                report.pulled += len(fresh)
            for current, incoming in updates:
                self._update(current, incoming)
                report.pulled += 1
            self._relations([latest[m.id] for m in fresh] + [latest[c.id] for c, _ in updates])
        if erase:
            with self.store.quiet():
                gone = self.erase(erase)
            report.deleted += len(gone)
        self.state.set_versions(known)

    def _losses(self, latest: Mapping[str, Any], team: str, report: SyncReport) -> None:
        """This client's edits that another role's version beat after they went in: the
        team's row at the same version, written by someone else (the server decided
        against ours on their push, and kept ours in its history)."""
        mine = self.state.mine(list(latest))
        # A memory forgotten on the team is gone here too: no conflict left to tell of.
        self.state.drop_lost([mid for mid, change in latest.items() if change.deleted])
        unnamed = {x["id"] for x in self.state.lost() if not x["winner"]}
        lost: list[tuple[str, int, str, str | None]] = []
        behind: list[str] = []
        for mid, change in latest.items():
            writer = str(getattr(change, "written_by", "") or "")
            if mid not in mine:
                if mid in unnamed and writer and not change.deleted and writer != self.role:
                    self.state.name_winner(mid, writer)  # a loss the push was told of
                continue
            version = int(change.version)
            if change.deleted or version > mine[mid]:
                behind.append(mid)  # built on, or forgotten: not a conflict of ours
            elif version == mine[mid] and writer and self.role and writer != self.role:
                lost.append((mid, version, writer, team))
        self.state.drop_mine(behind)
        if lost:
            self.state.add_lost(lost)
            report.conflicts += len(lost)
            report.lost += len(lost)
            for mid, version, writer, _ in lost:
                log.info("[MEM:TEAM] %s: this edit (version %d) lost to %s's", mid, version, writer)

    def _store_new(self, memories: list[Memory]) -> None:
        inner = self.store.inner
        # Statuses and pointers are set after every memory is here (a replacement may
        # come later in the batch than what it replaced).
        plain = [m.replace(status=MemoryStatus.ACTIVE, superseded_by=None) for m in memories]
        inner.store_many(plain)
        for m in memories:
            if m.status == MemoryStatus.ARCHIVED:
                inner.archive(m.id)

    def _update(self, current: Memory, incoming: Memory) -> None:
        inner = self.store.inner
        fields: dict[str, Any] = {}
        for name in _EDITABLE:
            new = getattr(incoming, name)
            if name == "type":
                new = MemoryType(new)
            if new != getattr(current, name):
                fields[name] = new
        if "content" in fields and incoming.embedding is not None:
            full = inner.get(current.id, with_embedding=True)
            if incoming.embedding is not None and (
                full.embedding is None
                or [round(float(x), 6) for x in full.embedding]
                != [round(float(x), 6) for x in incoming.embedding]
            ):
                fields["embedding"] = incoming.embedding
        if fields:
            inner.edit(current.id, **fields)
        if incoming.pinned != current.pinned:
            inner.set_pinned(current.id, incoming.pinned)
        if incoming.status != current.status:
            if incoming.status == MemoryStatus.ARCHIVED:
                inner.archive(current.id)
            elif incoming.status == MemoryStatus.ACTIVE:
                inner.restore(current.id)
            elif current.status != MemoryStatus.ACTIVE:
                inner.restore(current.id)  # superseded below, from active

    def _relations(self, changes: Sequence[Any]) -> None:
        """Replacements and links of the pulled memories, once all of them are here."""
        inner = self.store.inner
        for change in changes:
            row = change.row or {}
            by = row.get("superseded_by")
            if row.get("status") == str(MemoryStatus.SUPERSEDED) and by:
                current = inner.get_optional(change.memory_id, with_embedding=False)
                if current is not None and current.superseded_by != by:
                    if current.status != MemoryStatus.ACTIVE:
                        inner.restore(change.memory_id)
                    try:
                        inner.supersede(change.memory_id, str(by))
                    except LexmemError as exc:  # its replacement is not shared with us
                        log.info(
                            "[MEM:TEAM] supersede of %s not applied: %s", change.memory_id, exc
                        )
        for change in changes:
            wanted = {(str(lk["to_id"]), str(lk["link_type"])): lk for lk in change.links or ()}
            have = {(lk.to_id, lk.link_type): lk for lk in inner.get_links_from(change.memory_id)}
            for key, lk in have.items():
                if key not in wanted:
                    inner.delete_link(change.memory_id, lk.to_id, lk.link_type)
            for key, lk in wanted.items():
                old = have.get(key)
                if old is not None and abs(old.strength - float(lk["strength"])) < 1e-9:
                    continue
                try:
                    inner.store_link(
                        MemoryLink(
                            change.memory_id, key[0], key[1], float(lk["strength"]),
                            id=str(lk.get("id") or "") or MemoryLink(change.memory_id, key[0], key[1]).id,
                            created_at=_aware(lk.get("created_at")) or datetime.now(UTC),
                        )
                    )  # fmt: skip
                except LexmemError:
                    continue  # its other end is not here (not shared with us)


class ChangeListener:
    """Waits on the server's change notices (its own connection) and wakes the writer."""

    def __init__(
        self, settings: TeamSettings, *, dim: int, space: str, wake: Callable[[], None]
    ) -> None:
        self.settings = settings
        self.dim, self.space = dim, space
        self.wake = wake
        self.notified = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lexmem-team-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        server: Any = None
        failures = 0
        while not self._stop.is_set():
            try:
                if server is None:
                    server = open_server(self.settings, dim=self.dim, space=self.space)
                if server.wait_for_change(1.0):
                    self.notified.set()
                    self.wake()
                failures = 0
            except Exception:  # noqa: BLE001 - the writer's sync says why; this retries
                if server is not None:
                    try:
                        server.close()
                    except Exception:
                        log.debug("closing the listener's connection failed", exc_info=True)
                    server = None
                failures += 1
                self._stop.wait(min(MAX_BACKOFF_S, 2.0**failures))
        if server is not None:
            try:
                server.close()
            except Exception:
                log.debug("closing the listener's connection failed", exc_info=True)
