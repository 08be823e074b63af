"""``lexmem mcp``'s relay: the agent's opening answered while the service starts, of
every protocol version the MCP SDK knows; the session carried on when the service
stops; a quiet end when the agent stops it; Claude Code's ``mcp_tool`` hook calls
answered at once by the relay itself, every event kept, redacted, in the calls' order.

Each test runs the real ``lexmem mcp`` (the console script, so the relay) against a
data folder whose manifest a real recording wrote, with a real service where one is
needed. "No service running" is a service that is starting: its lock held, its socket
not up yet, so the relay starts none until the test lets go of the lock.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultkit import environment, lexmem_command, wait_for
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from lexmem.agents.hookcall import HOOK_TOOL
from lexmem.capture.inbox import Inbox
from lexmem.config import Paths
from lexmem.locks import FileLock, service_running
from lexmem.service.pipeline import agent_order
from lexmem.service.registry import services

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
ANSWER_TIMEOUT = 120.0  # a ceiling for a busy machine (a cold service start), not a measurement
NEWEST_MODERN = MODERN_PROTOCOL_VERSIONS[-1]


def envelope(version: str) -> dict[str, Any]:
    """A per-request session's ``_meta``, as Claude Code 2.1.332 sends it."""
    return {
        VERSION_KEY: version,
        "io.modelcontextprotocol/clientInfo": {"name": "scripted", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}},
    }


class Agent:
    """``lexmem mcp`` as an agent runs it: JSON-RPC lines on its stdin and stdout, every
    line it answers kept (to check that nothing is answered twice)."""

    def __init__(self, home: Path) -> None:
        self.proc = subprocess.Popen(
            [*lexmem_command(), "mcp"], env=environment(home), cwd=home,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: list[dict[str, Any]] = []
        self._unread: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._held: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            self.lines.append(message)
            self._unread.put(message)
        self._unread.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, ident: Any, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}})

    def next(self, match: Any) -> dict[str, Any]:
        """The next line ``match`` accepts (lines that come first are kept for later)."""
        for i, held in enumerate(self._held):
            if match(held):
                return self._held.pop(i)
        while True:
            try:
                message = self._unread.get(timeout=ANSWER_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no answer; so far: {self.lines}") from None
            if message is None:
                raise AssertionError(f"lexmem mcp ended: {self.stderr()}; so far: {self.lines}")
            if match(message):
                return message
            self._held.append(message)

    def reply(self, ident: Any) -> dict[str, Any]:
        return self.next(lambda m: m.get("id") == ident and "method" not in m)

    def ask(self, ident: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.request(ident, method, params)
        return self.reply(ident)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(ANSWER_TIMEOUT)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def answered_once(self) -> None:
        ids = [json.dumps(m["id"]) for m in self.lines if "method" not in m and "id" in m]
        assert len(ids) == len(set(ids)), f"answered twice: {self.lines}"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A data folder with the answers a service records for the relay, and no service."""
    home = tmp_path / "lexmem"
    Paths(home).ensure()
    subprocess.run(
        [sys.executable, "-m", "lexmem.agents.mcp_server", "--record-manifest", str(home)],
        env=environment(home), stdin=subprocess.DEVNULL, capture_output=True, check=True,
        timeout=ANSWER_TIMEOUT, cwd=home,
    )  # fmt: skip
    yield home
    stop_services_of(home)


def stop_services_of(home: Path) -> None:
    for s in services():
        if s.home == home:
            os.kill(s.pid, signal.SIGTERM)
    wait_for(lambda: not service_running(Paths(home)), "the service to stop", ANSWER_TIMEOUT)


@pytest.fixture
def starting(home: Path) -> Iterator[FileLock]:
    """A service that is starting: its lock held, no socket yet."""
    lock = FileLock(Paths(home).service_lock, timeout=0)
    lock.acquire()
    try:
        yield lock
    finally:
        if lock.held:
            lock.release()


def handshake_opening(agent: Agent, version: str) -> list[dict[str, Any]]:
    """Claude Code 2.1.332's opening, falling back to the handshake at ``version``: a
    ``server/discover`` probe, then ``initialize``, then the listings."""
    agent.request("probe", "server/discover", {"_meta": envelope(NEWEST_MODERN)})
    init = agent.ask(1, "initialize", {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "scripted", "version": "1"},
    })  # fmt: skip
    agent.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    answers = [agent.reply("probe"), init]
    for n, method in enumerate(("tools/list", "prompts/list", "resources/list"), 2):
        answers.append(agent.ask(n, method))
    return answers


def modern_opening(agent: Agent, version: str) -> list[dict[str, Any]]:
    """Claude Code 2.1.332's opening at ``version``: ``server/discover``, then a
    ``subscriptions/listen`` stream (it waits for the acknowledgement), then the
    listings, each request carrying its envelope."""
    meta = {"_meta": envelope(version)}
    answers = [agent.ask("probe", "server/discover", meta)]
    notifications = {"toolsListChanged": True, "promptsListChanged": True}
    agent.request("listen:0", "subscriptions/listen", {**meta, "notifications": notifications})
    answers.append(
        agent.next(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
    )
    for n, method in enumerate(("tools/list", "prompts/list", "resources/list"), 1):
        answers.append(agent.ask(n, method, meta))
    return answers


def tool_names(answer: dict[str, Any]) -> list[str]:
    return sorted(t["name"] for t in answer["result"]["tools"])


# -- the opening, with no service running --------------------------------------------------


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
def test_a_discover_probe_then_the_handshake_is_answered_at_once(
    home: Path, starting: FileLock, version: str
) -> None:
    """The probe answered from the manifest does not hold back the ``initialize`` that
    follows it (on 60c5e3c the probe waited for the service, and so did everything
    after it). A client proposing 2026-07-28 to ``initialize`` is answered as the
    service answers it: with the newest handshake version."""
    agent = Agent(home)
    try:
        probe, init, tools, *_ = handshake_opening(agent, version)
        assert probe["result"]["supportedVersions"] == list(MODERN_PROTOCOL_VERSIONS)
        assert init["result"]["serverInfo"]["name"] == "lexmem"
        assert "search_memory" in tool_names(tools)
        assert not (home / "reader.sock").exists()  # all of it from the manifest
    finally:
        agent.stderr()


@pytest.mark.parametrize("version", MODERN_PROTOCOL_VERSIONS)
def test_a_per_request_opening_is_answered_at_once(
    home: Path, starting: FileLock, version: str
) -> None:
    agent = Agent(home)
    try:
        discover, ack, tools, *_ = modern_opening(agent, version)
        assert discover["result"]["supportedVersions"] == list(MODERN_PROTOCOL_VERSIONS)
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen:0"
        assert "search_memory" in tool_names(tools)
        # A version the service does not serve is refused as the service refuses it.
        refused = agent.ask("later", "server/discover", {"_meta": envelope("2099-01-01")})
        assert refused["error"]["code"] == -32022
        assert refused["error"]["data"]["supported"] == list(MODERN_PROTOCOL_VERSIONS)
        assert not (home / "reader.sock").exists()
    finally:
        agent.stderr()


def test_the_relay_answers_as_the_service_does_and_hands_over_without_repeating(
    home: Path, starting: FileLock
) -> None:
    """What the manifest answers is what the service answers to the same requests; once
    the service is up, the requests that waited for it are answered, and none twice."""
    cold = {}
    agents = {}
    for era in ("handshake", "modern"):
        agent = agents[era] = Agent(home)
        if era == "handshake":
            cold[era] = handshake_opening(agent, HANDSHAKE_PROTOCOL_VERSIONS[-1])
        else:
            cold[era] = modern_opening(agent, NEWEST_MODERN)
    search = {"name": "search_memory", "arguments": {"query": "anything"}}
    agents["handshake"].request("call", "tools/call", search)
    agents["modern"].request("call", "tools/call", {"_meta": envelope(NEWEST_MODERN), **search})
    starting.release()  # the relays start the service now
    for era, agent in agents.items():
        answer = agent.reply("call")
        assert answer["result"]["isError"] is False, answer
        # and the session goes on in the service
        params = {"_meta": envelope(NEWEST_MODERN)} if era == "modern" else {}
        assert tool_names(agent.ask("again", "tools/list", params)) == tool_names(cold[era][2])
        assert agent.close() == 0
        agent.answered_once()
        acks = [m for m in agent.lines if m.get("method", "").endswith("acknowledged")]
        assert len(acks) == (1 if era == "modern" else 0), agent.lines
    wait_for(lambda: (home / "reader.sock").exists(), "the service's socket", ANSWER_TIMEOUT)
    warm = Agent(home)
    try:
        assert handshake_opening(warm, HANDSHAKE_PROTOCOL_VERSIONS[-1]) == cold["handshake"]
        assert warm.close() == 0
        warm = Agent(home)
        assert modern_opening(warm, NEWEST_MODERN) == cold["modern"]
        assert warm.close() == 0
    finally:
        warm.stderr()


# -- the service stops mid-session ------------------------------------------------------------


def service_pid(home: Path) -> int:
    pids = [s.pid for s in services() if s.home == home]
    assert len(pids) == 1, pids
    return pids[0]


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_a_service_that_stops_mid_session_is_replaced_and_the_session_goes_on(
    home: Path, era: str
) -> None:
    agent = Agent(home)
    try:
        params: dict[str, Any] = {}
        if era == "handshake":
            handshake_opening(agent, HANDSHAKE_PROTOCOL_VERSIONS[-1])
        else:
            modern_opening(agent, NEWEST_MODERN)
            params = {"_meta": envelope(NEWEST_MODERN)}
        search = {**params, "name": "search_memory", "arguments": {"query": "anything"}}
        assert agent.ask("first", "tools/call", search)["result"]["isError"] is False
        old = service_pid(home)
        # Calls in flight when the service dies: it stops answering, then is killed.
        os.kill(old, signal.SIGSTOP)
        agent.request("read in flight", "tools/call", search)
        save = {**params, "name": "save_memory", "arguments": {"text": "Deploys are on Fridays"}}
        agent.request("write in flight", "tools/call", save)
        os.kill(old, signal.SIGKILL)
        # The write may or may not have been done: the agent is told it has no answer.
        lost = agent.reply("write in flight")
        assert lost["error"]["message"].startswith("the lexmem service stopped"), lost
        # A read (its tool says readOnlyHint) is asked again of the next service.
        assert agent.reply("read in flight")["result"]["isError"] is False
        # The relay starts another service and replays the opening to it.
        assert agent.ask("later", "tools/call", search)["result"]["isError"] is False
        assert service_pid(home) != old
        assert agent.close() == 0
        agent.answered_once()
        if era == "modern":  # the stream goes on in the new service, acknowledged once
            acks = [m for m in agent.lines if m.get("method", "").endswith("acknowledged")]
            assert len(acks) == 1, agent.lines
    finally:
        agent.stderr()


# -- how it ends ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "stdin"])
def test_stopping_it_is_quiet(home: Path, starting: FileLock, how: str) -> None:
    agent = Agent(home)
    init = agent.ask(1, "initialize", {
        "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
        "clientInfo": {"name": "scripted", "version": "1"},
    })  # fmt: skip
    assert init["result"]["serverInfo"]["name"] == "lexmem"
    if how == "stdin":
        code, expected = agent.close(), 0  # all it asked was answered: no service needed
    else:
        agent.proc.send_signal(getattr(signal, how))
        code, expected = agent.proc.wait(ANSWER_TIMEOUT), 128 + getattr(signal, how)
    assert agent.stderr() == ""  # on 60c5e3c: a KeyboardInterrupt's traceback
    assert code == expected


# -- Claude Code's hook calls -----------------------------------------------------------------

SECRET = "ghp_" + "Zq8wX1vB4nM7kL2pR9sT6yU3iO5aE0dF1gH2"
CALLS = 120


def inbox_events(home: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in Inbox(Paths(home).inbox).pending()]


def every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def opened(agent: Agent) -> None:
    init = agent.ask(0, "initialize", {
        "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "2.1.337"},
    })  # fmt: skip
    assert init["result"]["serverInfo"]["name"] == "lexmem"
    agent.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def prompt_call(n: int, cwd: Path, text: str) -> dict[str, Any]:
    """A UserPromptSubmit as Claude Code's mcp_tool hook calls the tool (strings only)."""
    return {"name": HOOK_TOOL, "arguments": {
        "hook_event_name": "UserPromptSubmit", "session_id": "s-relay", "cwd": str(cwd),
        "transcript_path": "", "permission_mode": "default", "prompt": text,
    }}  # fmt: skip


@pytest.mark.parametrize("how", ["SIGINT", "stdin"])
def test_hook_calls_are_answered_at_once_and_every_event_is_kept_in_order(
    home: Path, starting: FileLock, tmp_path: Path, how: str
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    secluded = tmp_path / "secluded"
    (secluded / ".git").mkdir(parents=True)
    (secluded / ".lexmem-optout").write_text("")
    agent = Agent(home)
    try:
        opened(agent)
        for n in range(CALLS):
            text = f"note {n:03d}: the deploy uses token {SECRET}" if n == 7 else f"note {n:03d}"
            agent.request(n + 1, "tools/call", prompt_call(n, repo, text))
            if n == 50:  # an opted-out repository's event is answered and leaves no trace
                agent.request("secluded", "tools/call", prompt_call(n, secluded, "hidden plan"))
        answers = [agent.reply(n + 1) for n in range(CALLS)] + [agent.reply("secluded")]
        # Answered by the relay (no service runs: its lock is held), as the tool answers.
        for answer in answers:
            result = answer["result"]
            assert result["content"] == [{"type": "text", "text": "{}"}]
            assert result["structuredContent"] == {"result": "{}"} and not result["isError"]
        if how == "SIGINT":  # Claude Code stops its MCP server so, as soon as it is done
            agent.proc.send_signal(signal.SIGINT)
            assert agent.proc.wait(ANSWER_TIMEOUT) == 128 + signal.SIGINT
        else:
            assert agent.close() == 0
        assert agent.stderr() == ""
        agent.answered_once()
    finally:
        if agent.proc.poll() is None:
            agent.stderr()
    events = inbox_events(home)
    prompts = [e["content"] for e in agent_order(events)]
    assert len(prompts) == CALLS, prompts  # each kept once, the opted-out one not at all
    assert [p[:8] for p in prompts] == [f"note {n:03d}" for n in range(CALLS)]
    assert [e["content"][:8] for e in events] == [p[:8] for p in prompts]  # written in order
    assert all(e["session_id"] == "s-relay" and e["event_type"] == "prompt" for e in events)
    assert SECRET.encode() not in every_byte(home)
    assert b"hidden plan" not in every_byte(home)
    assert events[7]["metadata"]["redactions"] >= 1


def test_a_call_that_is_not_the_tools_shape_still_goes_to_the_service_which_says_why(
    home: Path, starting: FileLock, tmp_path: Path
) -> None:
    """The relay answers only well-formed hook calls; the rest are the server's (which
    needs the service: let it start)."""
    agent = Agent(home)
    try:
        opened(agent)
        agent.request(1, "tools/call", {"name": HOOK_TOOL, "arguments": {"session_id": "s"}})
        starting.release()
        answer = agent.reply(1)
        assert answer.get("error") or answer["result"]["isError"], answer
        assert agent.close() == 0
    finally:
        agent.stderr()
    assert inbox_events(home) == []


def test_a_stop_signal_right_after_the_last_answer_loses_no_event(
    home: Path, starting: FileLock, tmp_path: Path
) -> None:
    """Claude Code 2.1.197 sends SIGINT a millisecond after the session's Stop hook call
    is answered: each answered event is kept."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    for n in range(12):
        agent = Agent(home)
        try:
            opened(agent)
            agent.request(1, "tools/call", prompt_call(n, repo, f"note {n:03d}"))
            assert agent.reply(1)["result"]["content"][0]["text"] == "{}"
            agent.proc.send_signal(signal.SIGINT)
            assert agent.proc.wait(ANSWER_TIMEOUT) == 128 + signal.SIGINT, agent.stderr()
        finally:
            agent.stderr()
    assert sorted(e["content"] for e in inbox_events(home)) == [f"note {n:03d}" for n in range(12)]


# -- what the agent's opening waits for ---------------------------------------------------

OPENING_PROBE = """
import os, sys
sys.path.insert(0, os.environ["LEXMEM_TEST_REPO"])
seen = []
real = os.write
def write(fd, data):
    if fd == 1 and not seen:
        seen.append(sorted(sys.modules))
    return real(fd, data)
os.write = write
def leave(code):  # the relay's process ends with os._exit: here, the probe reports first
    raise SystemExit(code)
os._exit = leave
sys.argv = ["lexmem", "mcp"]
from ui.front import main
try:
    main()
except SystemExit:
    pass
late = ("pathlib", "socket", "subprocess", "lexmem.config", "lexmem.wire", "lexmem.capture.hook",
        "lexmem.capture.inbox", "lexmem.locks", "urllib.parse")
print("BEFORE-FIRST-ANSWER", [m for m in late if m in seen[0]], file=sys.stderr)
"""


def test_the_opening_is_answered_before_the_relay_imports_what_it_needs_later(
    home: Path, starting: FileLock
) -> None:
    """The agent waits for the relay's first answer as its session starts (Claude Code
    2.1.337 sends its first request only once its MCP servers have answered): the data
    folder is found without ``pathlib`` (:mod:`lexmem.places`), and the socket, the
    configuration and the hook are imported once the opening has its answers, when a
    hook call or the service needs them."""
    # No site (``-S``): a development install's finder imports pathlib as Python starts,
    # which an installed lexmem does not; the relay needs nothing from site-packages.
    env = {**environment(home), "LEXMEM_TEST_REPO": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", OPENING_PROBE], env=env, cwd=home,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    meta = {"_meta": envelope(NEWEST_MODERN)}
    lines = [{"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": meta},
             {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": meta}]  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(lines[0]).encode() + b"\n")
    proc.stdin.flush()
    first = json.loads(proc.stdout.readline())
    assert first["id"] == "probe" and "result" in first
    proc.stdin.write(json.dumps(lines[1]).encode() + b"\n")
    proc.stdin.flush()
    assert "search_memory" in tool_names(json.loads(proc.stdout.readline()))
    _, err = proc.communicate(timeout=ANSWER_TIMEOUT)
    assert proc.returncode == 0, err
    assert "BEFORE-FIRST-ANSWER []" in err.decode(), err.decode()
