"""Fault and load harness for lexmem's capture path: feed, kill, verify.

Shared by ``tests/test_faults.py`` (CI sizes) and ``bench/faults.py`` (full sizes), so
both check exactly the same things:

- :class:`Feed`: a deterministic stream of inbox events (explicit "remember this"
  events and short agent sessions), with ids derived from the seed and the index, so
  the verifier knows every id that was fed without being told.
- :func:`crash_run`: a producer process writes the feed into the inbox while this
  process starts ``lexmem serve`` and SIGKILLs it at random moments (during start-up
  and while it drains), restarting it each time, then lets it finish.
- :func:`load_run`: several producer processes send agent hook payloads through the
  real ``lexmem-hook`` command while one ``lexmem serve`` drains.
- :func:`verify` and :func:`verify_load`: every event's effect exists exactly once,
  nothing is left in the inbox or quarantine, the store opens and ``lexmem doctor``
  passes.

Run as a script it is the producer processes themselves (``feed`` and ``hooks``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
BIN = Path(sys.executable).parent
# Event ids of a feed derive from (seed, index) in this namespace.
FEED_NAMESPACE = uuid.UUID("0f5d7a52-2a0c-4c55-a1c0-6c657866a017")

_SERVICES = ("billing", "search", "auth", "ingest", "export", "reports", "sync", "webhooks")
_PROJECTS = ("orion", "atlas", "kestrel", "quartz", "ember", "nimbus", "pelican", "tundra")
_STORES = ("PostgreSQL 16", "Redis 7", "SQLite", "ClickHouse", "DuckDB", "MySQL 8.0")
_PEOPLE = ("Alice", "Priya", "Chen", "Maria", "Kenji", "Olga", "Noor", "Diego")


class HarnessError(RuntimeError):
    """The run itself went wrong (a service that never started, or exited by itself)."""


# -- commands and environment ---------------------------------------------------------------


def lexmem_command() -> list[str]:
    """The installed ``lexmem`` console script beside this interpreter, else ``python -m``."""
    exe = BIN / ("lexmem.exe" if os.name == "nt" else "lexmem")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "lexmem"]


def hook_command() -> list[str]:
    exe = BIN / ("lexmem-hook.exe" if os.name == "nt" else "lexmem-hook")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from lexmem.capture.hook import main; main()"]


def environment(home: Path) -> dict[str, str]:
    """A child's environment: this data folder, no display, no keyring, no licence key.

    A fresh data folder runs its Writer Pro trial, so automatic capture and unlimited
    storage apply as they would for a new user.
    """
    env = dict(os.environ)
    env["LEXMEM_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "LEXMEM_LICENCE", "LEXMEM_LICENCE_FILE"):
        env.pop(name, None)
    return env


# -- the feed -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Feed:
    """``n`` inbox events: explicit ones and, making up ``agent_share`` of them, agent
    turns (a prompt asking to remember a fact, then the answer), each in its own session."""

    n: int
    seed: int = 0
    agent_share: float = 0.1

    def event_id(self, i: int) -> str:
        return str(uuid.uuid5(FEED_NAMESPACE, f"{self.seed}:{i}"))

    def events(self) -> list[dict[str, Any]]:
        from lexmem.capture.inbox import make_event

        rng = random.Random(self.seed)
        out: list[dict[str, Any]] = []
        # An agent turn is two events: one starts every ``every`` events.
        every = max(2, round(2 / self.agent_share)) if self.agent_share > 0 else 0
        i = 0
        while i < self.n:
            project = rng.choice(_PROJECTS)
            if every and i % every == 0 and i + 1 < self.n:
                session = f"crash-{self.seed}-s{i}"
                fact = (
                    f"Remember that the {rng.choice(_SERVICES)} service of {project} keeps its "
                    f"queue in {rng.choice(_STORES)} on port {10_000 + i}."
                )
                for kind, text in (("prompt", fact), ("response", "Noted, I will keep that.")):
                    out.append(make_event(
                        kind, text, session_id=session, agent="claude", project=project,
                        event_id=self.event_id(i),
                    ))  # fmt: skip
                    i += 1
                continue
            text = (
                f"Fact {i}: {rng.choice(_PEOPLE)} owns the {rng.choice(_SERVICES)} service of "
                f"{project}; it listens on port {20_000 + i} and stores its data in "
                f"{rng.choice(_STORES)}."
            )
            out.append(make_event(
                "explicit", text, session_id=f"crash-{self.seed}-explicit", agent="cli",
                project=project, event_id=self.event_id(i),
            ))  # fmt: skip
            i += 1
        return out


def write_feed(home: Path, feed: Feed, rate: float | None = None) -> int:
    """Write the feed into the inbox (at ``rate`` events per second when given)."""
    from lexmem.capture.inbox import Inbox
    from lexmem.config import Paths

    inbox = Inbox(Paths(home).inbox)
    started = time.monotonic()
    events = feed.events()
    for k, event in enumerate(events):
        if rate:
            delay = started + k / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        inbox.write(event)
    return len(events)


def start_feed(home: Path, feed: Feed, rate: float | None = None) -> subprocess.Popen[bytes]:
    """The producer: a separate process writing ``feed`` into ``home``'s inbox."""
    cmd = [sys.executable, str(HERE), "feed", "--home", str(home), "--n", str(feed.n),
           "--seed", str(feed.seed), "--agent-share", str(feed.agent_share)]  # fmt: skip
    if rate:
        cmd += ["--rate", str(rate)]
    return subprocess.Popen(cmd, env=environment(home), stdin=subprocess.DEVNULL)


# -- the service as a child process -----------------------------------------------------------


class ServiceProcess:
    """``lexmem serve`` as a child process; its stderr is read for the "watching" line,
    which it prints once it holds the lock and has recovered what a crash left."""

    def __init__(self, home: Path, log: list[str] | None = None) -> None:
        self.log = log if log is not None else []
        self.ready = threading.Event()
        self.ready_after: float | None = None
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [*lexmem_command(), "serve"], env=environment(home), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(home.parent),
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip()
            self.log.append(line)
            if not self.ready.is_set() and "watching" in line:
                self.ready_after = time.monotonic() - self.started
                self.ready.set()

    def tail(self, n: int = 5) -> str:
        return " | ".join(self.log[-n:])

    def check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            self._reader.join(5)
            raise HarnessError(f"lexmem serve exited by itself with {code}: {self.tail()}")

    def wait_ready(self, timeout: float = 180.0) -> float:
        if not self.ready.wait(timeout):
            self.check_alive()
            raise HarnessError(f"lexmem serve was not ready within {timeout:.0f} s")
        assert self.ready_after is not None
        return self.ready_after

    def kill(self) -> None:
        """SIGKILL: no clean-up, no flush, no lock release but the kernel's."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self._reader.join(5)

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM: the service finishes the batch it is in and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"lexmem serve did not stop within {timeout:.0f} s") from None
        self._reader.join(5)
        return code


def pending(home: Path) -> int:
    """Event files waiting in the inbox (temporary files are not events yet)."""
    try:
        return sum(
            1 for n in os.listdir(home / "inbox") if n.endswith(".json") and not n.startswith(".")
        )
    except FileNotFoundError:
        return 0


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds; a test failure naming ``what`` after ``timeout``
    (a ceiling for a busy machine, never a measurement)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def serving(
    home: Path, *, ready: Callable[[], bool] | None = None,
    what: str = "lexmem serve to take the service lock", stderr: int = subprocess.DEVNULL,
) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """A real `lexmem serve` on ``home``, yielded once ``ready()`` holds (by default: once
    it holds the service lock); stopped with SIGTERM at the end."""
    from lexmem.config import Paths
    from lexmem.locks import service_running

    up = ready or (lambda: service_running(Paths(home)))
    proc = subprocess.Popen(
        [*lexmem_command(), "serve"], env=environment(home), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=stderr,
    )  # fmt: skip
    try:
        wait_for(lambda: up() or proc.poll() is not None, what)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "lexmem serve exited"
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


def _wait_until(check: Callable[[], bool], timeout: float, what: str, poll: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise HarnessError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(poll)


def finish(home: Path, log: list[str], timeout: float) -> None:
    """Start the service once more, wait until the inbox is empty, stop it cleanly."""
    service = ServiceProcess(home, log)
    try:
        service.wait_ready()

        def drained() -> bool:
            service.check_alive()
            return pending(home) == 0

        _wait_until(drained, timeout, "draining the inbox")
    except BaseException:
        service.kill()
        raise
    code = service.stop()
    if code != 0:
        raise HarnessError(f"lexmem serve exited {code} on SIGTERM: {service.tail()}")


# -- the crash run ----------------------------------------------------------------------------


@dataclass(slots=True)
class CrashRun:
    fed: int
    kills: int = 0
    kills_in_startup: int = 0
    kills_while_draining: int = 0
    seconds: float = 0.0
    kill_moments_s: list[float] = field(default_factory=list)
    # Events each life killed while draining took in (known once the feed is all written).
    taken_in_per_life: list[int] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    @property
    def events_per_s(self) -> float:
        return self.fed / self.seconds if self.seconds else 0.0


def baseline_run(home: Path, feed: Feed, *, timeout: float = 1800.0) -> CrashRun:
    """The same feed and service, never killed: what the crash run is measured against."""
    run = CrashRun(fed=feed.n)
    started = time.monotonic()
    producer = start_feed(home, feed)
    try:
        service = ServiceProcess(home, run.log)
        try:
            service.wait_ready()
            if producer.wait(timeout) != 0:
                raise HarnessError(f"the producer exited {producer.returncode}")

            def drained() -> bool:
                service.check_alive()
                return pending(home) == 0

            _wait_until(drained, timeout, "draining the inbox")
        except BaseException:
            service.kill()
            raise
        if service.stop() != 0:
            raise HarnessError(f"lexmem serve did not exit 0 on SIGTERM: {service.tail()}")
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    run.seconds = time.monotonic() - started
    return run


def crash_run(
    home: Path,
    feed: Feed,
    *,
    kills: int,
    seed: int = 0,
    startup_share: float = 0.25,
    timeout: float = 1800.0,
) -> CrashRun:
    """Feed while ``lexmem serve`` is SIGKILLed ``kills`` times at random moments.

    A quarter of the kills (``startup_share``) land anywhere in the service's start-up
    (imports, the lock, recovering buffered windows); the rest land while it drains, a
    random time after it is ready, drawn uniformly from ``[0, 2 * window]``. ``window``
    adapts so that each life takes in about its share of the feed: one killed before its
    first commit lengthens it, one that took in far more than its share shortens it. So
    the kills spread over the whole feed (encoding, commits, removing files) instead of
    all landing on an idle service once the inbox is empty. After the last kill the
    service runs once more until the inbox is empty and is stopped cleanly.
    """
    rng = random.Random(seed)
    run = CrashRun(fed=feed.n)
    started = time.monotonic()
    producer = start_feed(home, feed)
    ready_s = 3.0  # refined from each start
    window = 1.0
    per_life = max(1.0, feed.n / (kills * (1 - startup_share)))
    try:
        while run.kills < kills:
            if time.monotonic() - started > timeout:
                raise HarnessError(f"{run.kills} of {kills} kills after {timeout:.0f} s")
            service = ServiceProcess(home, run.log)
            born = time.monotonic()
            try:
                if rng.random() < startup_share:
                    time.sleep(rng.uniform(0.0, ready_s))
                    draining = service.ready.is_set()
                    before = None
                else:
                    ready_s = 0.5 * ready_s + 0.5 * service.wait_ready()
                    before = pending(home) if producer.poll() is not None else None
                    time.sleep(rng.uniform(0.0, 2 * window))
                    draining = True
                service.check_alive()
            except BaseException:
                service.kill()
                raise
            lived = time.monotonic() - born
            service.kill()
            run.kills += 1
            run.kill_moments_s.append(round(lived, 3))
            if draining:
                run.kills_while_draining += 1
            else:
                run.kills_in_startup += 1
            if before is not None:
                took_in = before - pending(home)
                run.taken_in_per_life.append(took_in)
                if took_in == 0 and before:
                    window *= 1.3
                elif took_in > 2 * per_life:
                    window *= 0.8
        if producer.wait(timeout) != 0:
            raise HarnessError(f"the producer exited {producer.returncode}")
        finish(home, run.log, timeout)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    run.seconds = time.monotonic() - started
    return run


# -- verifying ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Verdict:
    """What a run left behind, against what was fed."""

    fed: int
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    memories: int = 0
    audit_entries: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.quarantined or self.leftovers or self.problems
        )

    def summary(self) -> str:
        parts = [
            f"{self.fed} fed",
            f"{len(self.lost)} lost",
            f"{len(self.duplicated)} duplicated",
            f"{len(self.quarantined)} quarantined",
            f"{len(self.leftovers)} left in the inbox",
        ]
        details = [*self.lost[:3], *self.duplicated[:3], *self.quarantined[:3], *self.leftovers[:3]]
        return ", ".join(parts) + "".join(f"; {p}" for p in [*self.problems, *details])

    def to_dict(self) -> dict[str, Any]:
        return {
            "fed": self.fed, "lost": len(self.lost), "duplicated": len(self.duplicated),
            "quarantined": len(self.quarantined), "left_in_inbox": len(self.leftovers),
            "memories": self.memories, "audit_entries": self.audit_entries,
            "problems": self.problems, "examples": {
                "lost": self.lost[:5], "duplicated": self.duplicated[:5],
                "quarantined": self.quarantined[:5], "left_in_inbox": self.leftovers[:5],
            },
        }  # fmt: skip


def _column(table: Any, name: str) -> list[Any]:
    n = int(table.count_rows())
    if not n:
        return []
    values: list[Any] = table.search().select([name]).limit(n).to_arrow()[name].to_pylist()
    return values


def _inbox_state(home: Path, verdict: Verdict, fed_ids: set[str]) -> None:
    inbox = home / "inbox"
    for p in sorted(inbox.iterdir()) if inbox.exists() else []:
        if p.is_file():
            verdict.leftovers.append(f"{p.name} left in the inbox")
    for p in sorted((inbox / "quarantine").glob("*")):
        good = any(i in p.name for i in fed_ids)
        verdict.quarantined.append(f"{p.name} quarantined" + (" (a good event)" if good else ""))


def _opens_cleanly(home: Path, verdict: Verdict, doctor: bool) -> None:
    """A fresh process opens the store and searches it; ``lexmem doctor`` passes."""
    code = (
        "import sys\nfrom lexmem.api import Lexmem\nlm = Lexmem.open(sys.argv[1])\n"
        "n = lm.count()\nhits = lm.search('which port does the service listen on',"
        " record_access=False).hits\nprint(n, len(hits))\nlm.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(home)], env=environment(home), capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        verdict.problems.append(f"the store does not open cleanly: {last}")
    elif verdict.memories and done.stdout.split()[1:] == ["0"]:
        verdict.problems.append("the store opens but a search finds nothing")
    if not doctor:
        return
    done = subprocess.run(
        [*lexmem_command(), "doctor", "--json"], env=environment(home), capture_output=True,
        text=True, timeout=300, check=False, cwd=str(home.parent),
    )  # fmt: skip
    try:
        checks = json.loads(done.stdout)
    except ValueError:
        verdict.problems.append(f"lexmem doctor printed no report: {done.stderr.strip()[:300]}")
        return
    failed = [f"{c['name']}: {c['detail']}" for c in checks if c["state"] == "fail"]
    if failed:
        verdict.problems.append("lexmem doctor failed: " + "; ".join(failed))


def _unaudited(verdict: Verdict, ids: set[str]) -> None:
    """Every memory was saved with an audit entry naming it (a crash between the two
    commits must not leave it unexplained)."""
    if ids:
        verdict.problems.append(f"{len(ids)} memories have no audit entry (e.g. {min(ids)})")


def verify(home: Path, feed: Feed, *, doctor: bool = True) -> Verdict:
    """Every fed event's effect exists exactly once, and nothing else is wrong.

    An explicit event's effect is its memory (the id derives from the event id) or its
    audit entry (a skip); an agent event's is its record in the journal, and its
    session's candidates in the audit log. Duplicates are looked for by id (memories,
    audit entries, journal records) and by content.
    """
    from lexmem.api import Lexmem
    from lexmem.capture.inbox import derived_id

    events = feed.events()
    verdict = Verdict(fed=len(events))
    lm = Lexmem.open(home)
    try:
        journal = lm.journal
        processed = Counter(_column(journal.t("processed"), "event_id"))
        audit_ids = Counter(_column(journal.t("audit"), "id"))
        audit_sessions = Counter(_column(journal.t("audit"), "session_id"))
        audited: set[str] = set(_column(journal.t("audit"), "memory_id"))
        buffered = int(journal.t("buffer").count_rows())
        table = lm.store.scan_arrow(None, ["id", "content", "session_id"])
        memory_ids = Counter(table["id"].to_pylist())
        contents = Counter(table["content"].to_pylist())
        sessions = Counter(table["session_id"].to_pylist())
    finally:
        lm.close()
    verdict.memories = sum(memory_ids.values())
    verdict.audit_entries = sum(audit_ids.values())
    agent_sessions: set[str] = set()
    for e in events:
        eid = e["event_id"]
        if processed[eid] > 1:
            verdict.duplicated.append(f"event {eid} taken in {processed[eid]} times")
        if e["event_type"] != "explicit":
            agent_sessions.add(e["session_id"])
            if processed[eid] == 0:
                verdict.lost.append(f"{e['event_type']} event {eid} never taken in")
            continue
        mid = derived_id("explicit", eid)
        entries = audit_ids[derived_id("audit", mid)]
        if memory_ids[mid] == 0 and entries == 0:
            verdict.lost.append(f"explicit event {eid}: neither its memory nor its audit entry")
        if memory_ids[mid] > 1 or entries > 1:
            verdict.duplicated.append(
                f"explicit event {eid}: {memory_ids[mid]} memories, {entries} audit entries"
            )
    for sid in sorted(agent_sessions):
        if not audit_sessions[sid] and not sessions[sid]:
            verdict.lost.append(f"session {sid}: no memory and no audit entry")
    verdict.duplicated += [
        f"memory id {i} stored {n} times" for i, n in memory_ids.items() if n > 1
    ]
    _unaudited(verdict, set(memory_ids) - audited)
    verdict.duplicated += [
        f"audit entry {i} written {n} times" for i, n in audit_ids.items() if n > 1
    ]
    verdict.duplicated += [
        f"{n} memories say {c[:60]!r}" for c, n in contents.items() if n > 1 and c
    ]
    if buffered:
        verdict.problems.append(f"{buffered} agent events still wait for their window")
    _inbox_state(home, verdict, {e["event_id"] for e in events})
    _opens_cleanly(home, verdict, doctor)
    return verdict


# -- the concurrent producers run ------------------------------------------------------------

HOOK_SESSION = 5  # events per hook session: prompt, tool call, tool result, answer, end


def hook_payloads(tag: str, producer: int, count: int, repo: Path) -> Iterator[dict[str, Any]]:
    """``count`` Claude Code hook payloads in sessions of :data:`HOOK_SESSION` events."""
    rng = random.Random(f"{tag}:{producer}")
    for j in range(count):
        k, step = divmod(j, HOOK_SESSION)
        session = f"{tag}-p{producer}-s{k}"
        base = {"session_id": session, "transcript_path": None, "cwd": str(repo),
                "permission_mode": "default"}  # fmt: skip
        service, store = rng.choice(_SERVICES), rng.choice(_STORES)
        port = 30_000 + producer * 1000 + j
        if step == 0:
            prompt = f"Remember that the {service} worker of producer {producer} uses {store} on port {port}."
            yield {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
        elif step == 1:
            yield {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": f"pytest tests/test_{service}.py -q"},
                   "tool_use_id": f"t-{session}"}  # fmt: skip
        elif step == 2:
            output = f"{rng.randint(3, 90)} passed in {rng.uniform(0.1, 9):.2f}s\n"
            yield {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                   "tool_input": {"command": f"pytest tests/test_{service}.py -q"},
                   "tool_use_id": f"t-{session}",
                   "tool_response": {"stdout": output, "stderr": "", "interrupted": False}}  # fmt: skip
        elif step == 3:
            yield {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                   "last_assistant_message": f"Noted: {service} uses {store} on port {port}."}  # fmt: skip
        else:
            yield {**base, "hook_event_name": "SessionEnd", "reason": "exit"}


def expected_sessions(tag: str, producers: int, count: int) -> dict[str, int]:
    """Events each session of a load run must leave in the journal (one per payload)."""
    out: Counter[str] = Counter()
    for p in range(producers):
        for j in range(count):
            out[f"{tag}-p{p}-s{j // HOOK_SESSION}"] += 1
    return dict(out)


def send_hooks(home: Path, repo: Path, tag: str, producer: int, count: int) -> list[float]:
    """Run the real hook command once per payload; returns each call's milliseconds."""
    env = environment(home)
    cmd = [*hook_command(), "claude"]
    took: list[float] = []
    for payload in hook_payloads(tag, producer, count, repo):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, input=json.dumps(payload).encode(), env=env,
                              capture_output=True, timeout=120, check=False)  # fmt: skip
        took.append((time.perf_counter() - t0) * 1000)
        if done.returncode != 0:
            raise HarnessError(f"lexmem-hook exited {done.returncode}: {done.stderr[:200]!r}")
    return took


@dataclass(slots=True)
class LoadRun:
    producers: int
    per_producer: int
    feeding_s: float = 0.0
    accounted_s: float = 0.0
    hook_ms: list[float] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return self.producers * self.per_producer

    @property
    def events_per_s(self) -> float:
        return self.sent / self.accounted_s if self.accounted_s else 0.0


class TakenIn:
    """How many events the journal holds, read from the service's commits."""

    def __init__(self, home: Path) -> None:
        from lexmem.api import Lexmem

        self.lm = Lexmem.open(home)

    def count(self) -> int:
        self.lm.store.refresh()
        if "processed" not in self.lm.store.list_tables():
            return 0
        return int(self.lm.store.table("processed").count_rows())

    def close(self) -> None:
        self.lm.close()


def load_run(
    home: Path, repo: Path, *, producers: int, per_producer: int, tag: str = "load",
    timeout: float = 1800.0,
) -> LoadRun:  # fmt: skip
    """``producers`` processes send ``per_producer`` payloads each through ``lexmem-hook``
    while a running ``lexmem serve`` drains; returns once the journal holds them all."""
    run = LoadRun(producers, per_producer)
    service = ServiceProcess(home, run.log)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        service.wait_ready()
        taken_in = TakenIn(home)
        started = time.monotonic()
        for p in range(producers):
            cmd = [sys.executable, str(HERE), "hooks", "--home", str(home), "--repo", str(repo),
                   "--tag", tag, "--producer", str(p), "--count", str(per_producer)]  # fmt: skip
            procs.append(subprocess.Popen(cmd, env=environment(home), stdout=subprocess.PIPE))
        for proc in procs:
            out, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise HarnessError(f"a hook producer exited {proc.returncode}")
            run.hook_ms += json.loads(out)["hook_ms"]
        run.feeding_s = time.monotonic() - started

        def accounted() -> bool:
            service.check_alive()
            return taken_in.count() >= run.sent

        try:
            _wait_until(accounted, timeout, "taking in every hook event", poll=0.2)
        finally:
            taken_in.close()
        run.accounted_s = time.monotonic() - started
    except BaseException:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        service.kill()
        raise
    if service.stop() != 0:
        raise HarnessError(f"lexmem serve did not exit 0 on SIGTERM: {service.tail()}")
    return run


def verify_load(home: Path, expected: dict[str, int]) -> Verdict:
    """Each session's events are in the journal exactly as often as they were sent, and
    every window was extracted; nothing is left in the inbox or quarantine."""
    from lexmem.api import Lexmem

    verdict = Verdict(fed=sum(expected.values()))
    lm = Lexmem.open(home)
    try:
        journal = lm.journal
        ids = Counter(_column(journal.t("processed"), "event_id"))
        by_session = Counter(_column(journal.t("processed"), "session_id"))
        buffered = int(journal.t("buffer").count_rows())
        table = lm.store.scan_arrow(None, ["id", "content"])
        contents = Counter(table["content"].to_pylist())
        verdict.memories = table.num_rows
        verdict.audit_entries = int(journal.t("audit").count_rows())
        audited = set(_column(journal.t("audit"), "memory_id"))
        _unaudited(verdict, set(table["id"].to_pylist()) - audited)
    finally:
        lm.close()
    for sid, n in sorted(expected.items()):
        got = by_session[sid]
        if got < n:
            verdict.lost += [f"session {sid}: {n - got} of {n} events never taken in"]
        elif got > n:
            verdict.duplicated += [f"session {sid}: {got} events taken in, {n} sent"]
    verdict.duplicated += [f"event {i} taken in {n} times" for i, n in ids.items() if n > 1]
    verdict.duplicated += [f"{n} memories say {c[:60]!r}" for c, n in contents.items() if n > 1]
    if buffered:
        verdict.problems.append(f"{buffered} agent events still wait for their window")
    _inbox_state(home, verdict, set())
    _opens_cleanly(home, verdict, doctor=False)
    return verdict


# -- the producer processes ----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="lexmem fault-harness producer processes")
    sub = p.add_subparsers(dest="what", required=True)
    f = sub.add_parser("feed", help="write a Feed into the inbox")
    f.add_argument("--home", type=Path, required=True)
    f.add_argument("--n", type=int, required=True)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--agent-share", type=float, default=0.1)
    f.add_argument("--rate", type=float, default=None)
    h = sub.add_parser("hooks", help="send hook payloads through lexmem-hook")
    h.add_argument("--home", type=Path, required=True)
    h.add_argument("--repo", type=Path, required=True)
    h.add_argument("--tag", required=True)
    h.add_argument("--producer", type=int, required=True)
    h.add_argument("--count", type=int, required=True)
    args = p.parse_args(argv)
    if args.what == "feed":
        write_feed(args.home, Feed(args.n, args.seed, args.agent_share), args.rate)
    else:
        took = send_hooks(args.home, args.repo, args.tag, args.producer, args.count)
        print(json.dumps({"hook_ms": [round(t, 3) for t in took]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
