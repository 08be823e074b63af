"""The warm service answers readers over its Unix-domain socket (``<data>/reader.sock``).

The socket itself (private, removed, a stale one replaced, a deep data folder, other
users refused, bad requests answered in one line), then a real ``lexmem serve``: CLI
reads through it print exactly what the cold CLI prints, load neither LanceDB nor the
model in the reader's process, and ``lexmem mcp`` relays MCP sessions to it (many at
once), starting a service when none runs. A service whose data folder is deleted stops.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import faultkit
import pytest
from faultkit import environment, lexmem_command, wait_for

from lexmem import wire
from lexmem.config import Paths
from lexmem.locks import FileLock, service_running
from lexmem.service.readers import ReaderServer
from lexmem.service.registry import services


def echo(request: dict[str, Any], conn: socket.socket, stream: Any) -> None:
    wire.send_json(conn, {"echo": request.get("say")})


def ask(paths: Paths, request: Any) -> Any:
    sock = wire.connect(paths)
    assert sock is not None, "no reader socket"
    with sock, sock.makefile("rb") as stream:
        if isinstance(request, bytes):
            sock.sendall(request)
        else:
            wire.send_json(sock, request)
        return wire.read_line(stream)


# -- the socket -------------------------------------------------------------------------------


def test_the_socket_is_private_and_goes_with_the_server(paths: Paths) -> None:
    server = ReaderServer(paths, {"echo": echo})
    assert server.start()
    try:
        st = os.lstat(paths.home / "reader.sock")
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(paths.home).st_mode) == 0o700
        assert ask(paths, {"v": 1, "kind": "echo", "say": "hi"}) == {"echo": "hi"}
    finally:
        server.stop()
    assert not (paths.home / "reader.sock").exists()
    assert wire.connect(paths) is None


def test_a_dead_services_socket_is_replaced(paths: Paths) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(paths.home / "reader.sock"))
    stale.close()  # bound, never listening: what a killed service leaves
    assert wire.connect(paths) is None
    with ReaderServer(paths, {"echo": echo}):
        assert ask(paths, {"v": 1, "kind": "echo", "say": 1}) == {"echo": 1}


def test_a_deep_data_folder_still_gets_a_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    paths = Paths(deep)
    paths.ensure()
    assert len(os.fsencode(deep / "reader.sock")) > 108
    with ReaderServer(paths, {"echo": echo}) as server:
        assert server.path == deep / "reader.sock"
        assert ask(paths, {"v": 1, "kind": "echo", "say": "deep"}) == {"echo": "deep"}


@pytest.mark.parametrize(
    ("request_line", "says"),
    [
        (b"not json\n", "bad request"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"v": 99, "kind": "echo"}\n', "protocol 99 is not 1"),
        (b'{"v": 1, "kind": "rm -rf"}\n', "no such request: 'rm -rf'"),
    ],
)
def test_a_bad_request_gets_one_line(paths: Paths, request_line: bytes, says: str) -> None:
    with ReaderServer(paths, {"echo": echo}):
        reply = ask(paths, request_line)
        assert says in reply["error"]
        assert "\n" not in reply["error"]
        # and the server goes on answering
        assert ask(paths, {"v": 1, "kind": "echo", "say": 2}) == {"echo": 2}


@pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to be another user"
)
def test_another_user_is_refused_even_with_the_door_open() -> None:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="lexmem-uid-"))  # every folder above it is passable
    os.chmod(base, 0o711)
    paths = Paths(base / "data")
    paths.ensure()
    with ReaderServer(paths, {"echo": echo}):
        # Open what the 0700 folder and the 0600 socket close, to reach the uid check.
        os.chmod(paths.home, 0o711)
        os.chmod(paths.home / "reader.sock", 0o666)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child, as nobody
            os.close(read)
            try:
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX)
                s.connect(str(paths.home / "reader.sock"))
                s.sendall(b'{"v": 1, "kind": "echo", "say": "x"}\n')
                s.settimeout(10)
                try:
                    answer = s.recv(100)
                except ConnectionResetError:  # closed with the request unread
                    answer = b""
                os.write(write, b"answered" if answer else b"refused")
            except Exception as exc:  # noqa: BLE001 - the child reports anything
                os.write(write, f"failed {exc}".encode())
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as child:
            assert child.read() == b"refused"
        # and this user is still answered
        assert ask(paths, {"v": 1, "kind": "echo", "say": "me"}) == {"echo": "me"}
    shutil.rmtree(base)


# -- a real service ---------------------------------------------------------------------------


def serving(home: Path) -> AbstractContextManager[subprocess.Popen[bytes]]:
    """A real `lexmem serve` on ``home``, up once its reader socket answers."""

    def answers() -> bool:
        sock = wire.connect(Paths(home))
        if sock is not None:
            sock.close()
        return sock is not None

    return faultkit.serving(home, ready=answers, what="the service's reader socket",
                            stderr=subprocess.PIPE)  # fmt: skip


def lexmem(home: Path, *args: str, cold: bool = False, cwd: Path | None = None,
           code: int = 0) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = environment(home)
    env["COLUMNS"] = "100"
    if cold:
        env["LEXMEM_NO_SERVICE"] = "1"
    result = subprocess.run(
        [*lexmem_command(), *args], env=env, capture_output=True, text=True, timeout=120, check=False,
        cwd=cwd,
    )  # fmt: skip
    assert result.returncode == code, f"lexmem {' '.join(args)}: {result.stdout}{result.stderr}"
    return result


def _stable(value: Any) -> Any:
    """The output without what differs from one run to the next: timings, access records,
    and the files on disk (a starting service folds new rows into the indices)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()
                if k not in ("timings_ms", "last_accessed_at", "access_count", "accesses",
                             "disk_bytes", "table_versions")}  # fmt: skip
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    return value


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    home = tmp_path / "lexmem"
    project = tmp_path / "shop"
    project.mkdir()
    for text in (
        "The shop uses PostgreSQL 16 for its orders database.",
        "Deploys go through `make deploy`, never by hand.",
        "Prefer pnpm over npm in this repository.",
    ):
        lexmem(home, "remember", "--project", str(project), text)
    lexmem(home, "ingest")
    return home


def test_cli_reads_through_the_service_print_what_the_cold_cli_prints(
    seeded: Path, tmp_path: Path
) -> None:
    project = tmp_path / "shop"
    first = json.loads(lexmem(seeded, "list", "--json", cold=True).stdout)
    mid = first[0]["id"] if isinstance(first, list) else first["memories"][0]["id"]
    reads = [
        ["search", "which database does the shop use"], ["list"], ["show", mid[:8]],
        ["stats"], ["digest"], ["audit"], ["sessions"], ["search", "pnpm", "--project", "nowhere"],
    ]  # fmt: skip
    cold = {}
    for argv in reads:
        cold[(*argv, "--json")] = lexmem(seeded, *argv, "--json", cold=True, cwd=project)
        cold[tuple(argv)] = lexmem(seeded, *argv, cold=True, cwd=project)
    errors = {("show", "nonexistent"): lexmem(seeded, "show", "nonexistent", cold=True, code=2)}
    with serving(seeded):
        for argv, was in cold.items():
            now = lexmem(seeded, *argv, cwd=project)
            if "--json" in argv:
                assert _stable(json.loads(now.stdout)) == _stable(json.loads(was.stdout)), argv
            elif argv[0] not in ("search", "stats"):  # scores and sizes differ in the last digit
                assert now.stdout == was.stdout, argv
            assert now.stderr == was.stderr, argv
        for argv, was in errors.items():
            now = lexmem(seeded, *argv, code=2)
            assert (now.stdout, now.stderr) == (was.stdout, was.stderr)
        assert "PostgreSQL" in lexmem(seeded, "digest", cwd=project).stdout


def test_an_answered_read_loads_neither_the_store_nor_the_model(seeded: Path) -> None:
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['lexmem', 'search', 'database']\n"
        "from ui.front import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('lancedb', 'pyarrow', 'duckdb', 'onnxruntime', 'fastembed', 'numpy', 'click', 'mcp',"
        " 'pydantic', 'anyio') or m in ('lexmem.cli', 'lexmem.api', 'lexmem.store'))\n"
        "print('HEAVY', heavy, 'CODE', code, file=sys.stderr)\n"
    )
    with serving(seeded):
        result = subprocess.run([sys.executable, "-c", probe], env=environment(seeded), check=False,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "The shop uses" in result.stdout
    assert "HEAVY [] CODE 0" in result.stderr, result.stderr


# -- MCP through the relay --------------------------------------------------------------------


class McpClient:
    """`lexmem mcp` as an agent starts it: JSON-RPC lines on its stdin and stdout."""

    def __init__(self, home: Path, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [*lexmem_command(), "mcp"], env=environment(home), cwd=cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else "no answer"
        reply = json.loads(line)
        assert reply.get("id") == self.next_id, reply
        return reply.get("result", reply.get("error"))

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def initialize(self) -> Any:
        result = self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        })  # fmt: skip
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(30)

    def search(self, query: str) -> list[str]:
        result = self.request(
            "tools/call", {"name": "search_memory", "arguments": {"query": query}}
        )
        return [h["content"] for h in json.loads(result["content"][0]["text"])["results"]]


def test_mcp_sessions_are_relayed_to_the_service_many_at_once(seeded: Path, tmp_path: Path) -> None:
    with serving(seeded) as proc:
        clients = [McpClient(seeded, cwd=tmp_path / "shop") for _ in range(4)]
        results: dict[int, Any] = {}

        def session(i: int, client: McpClient) -> None:
            info = client.initialize()
            tools = client.request("tools/list")
            results[i] = (info["serverInfo"]["name"], len(tools["tools"]),
                          client.search("which database"), client.close())  # fmt: skip

        threads = [threading.Thread(target=session, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(results) == 4
        for name, n_tools, hits, code in results.values():
            assert (name, n_tools, code) == ("lexmem", 9, 0)  # with the hooks' tool
            assert any("PostgreSQL" in h for h in hits)
        # the sessions ran in the service: no relay opened the store
        assert proc.poll() is None
    log = (seeded / "logs" / "lexmem.log").read_text()
    assert "[MEM:MCP] opened" not in log


def test_mcp_starts_a_service_when_none_runs(seeded: Path) -> None:
    assert not service_running(Paths(seeded))
    client = McpClient(seeded)
    try:
        assert client.initialize()["serverInfo"]["name"] == "lexmem"
        assert any("PostgreSQL" in h for h in client.search("database"))
        assert service_running(Paths(seeded))
        assert (seeded / "reader.sock").exists()
    finally:
        client.close()
    assert [s for s in services() if s.home == seeded], "the relay's service is not listed"
    stop_services_of(seeded)


def stop_services_of(home: Path) -> None:
    for s in services():
        if s.home == home:
            os.kill(s.pid, 15)
    wait_for(lambda: not service_running(Paths(home)), "the service to stop")


def test_mcp_answers_the_opening_while_the_service_starts(seeded: Path) -> None:
    with serving(seeded):
        wait_for(lambda: (seeded / "mcp-manifest.json").exists(), "the recorded answers")
        warm = McpClient(seeded)
        warm_init = warm.initialize()
        warm_tools = warm.request("tools/list")
        assert warm.close() == 0
    assert stat.S_IMODE(os.stat(seeded / "mcp-manifest.json").st_mode) == 0o600
    # A service that is starting: its lock is held, its socket not up yet.
    lock = FileLock(Paths(seeded).service_lock, timeout=0)
    lock.acquire()
    client = McpClient(seeded)
    try:
        assert client.initialize() == warm_init
        assert client.request("tools/list") == warm_tools
        assert not (seeded / "reader.sock").exists()
    finally:
        lock.release()
    try:
        # the relay starts the service, replays the opening to it, and the session goes on
        assert any("PostgreSQL" in h for h in client.search("database"))
        assert client.request("tools/list") == warm_tools
    finally:
        assert client.close() == 0
        stop_services_of(seeded)


def test_mcp_without_a_data_folder_serves_in_process_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "never"
    client = McpClient(home)
    try:
        assert client.initialize()["serverInfo"]["name"] == "lexmem"
        assert client.search("anything") == []
    finally:
        client.close()
    assert not home.exists()


# -- a service that knows when to go ----------------------------------------------------------


def test_a_service_whose_data_folder_is_deleted_stops(seeded: Path) -> None:
    import shutil

    with serving(seeded) as proc:
        assert any(s.pid == proc.pid and s.folder_exists for s in services())
        # As a person would: delete it, and again if the running service was writing an
        # index file into it meanwhile (rmtree then finds a folder it emptied refilled).
        wait_for(
            lambda: shutil.rmtree(seeded, ignore_errors=True) or not seeded.exists(),
            timeout=30, what="the data folder deleted",
        )  # fmt: skip
        proc.wait(60)  # it notices within seconds
        assert not seeded.exists()  # and wrote nothing back into it meanwhile
        assert proc.returncode == 0
        assert proc.stderr is not None
        assert "is gone; the service stopped" in proc.stderr.read().decode()
    assert all(s.pid != proc.pid for s in services())
    # Nor does the process it started to record the relay's manifest outlive it: it read
    # forever from a session that could not start in the deleted folder (every CI run
    # left one behind).
    wait_for(lambda: not _recorders_of(seeded), timeout=60, what="the manifest recorder gone")


def _recorders_of(home: Path) -> list[int]:
    """The pids of live manifest recorders started for ``home`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"--record-manifest" in args and os.fsencode(home) in args:
            found.append(int(entry.name))
    return found


def test_recording_the_manifest_in_a_deleted_folder_ends_with_one_line(tmp_path: Path) -> None:
    """The recorder runs in the data folder. Deleted first, the session could not start
    (not even the working directory reads), and the recorder waited for its answer
    forever."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from lexmem.agents.mcp_server import MANIFEST_VERSIONS

    gone = tmp_path / "gone"
    gone.mkdir()
    record = f"{sys.executable} -m lexmem.agents.mcp_server --record-manifest {gone}"
    proc = subprocess.run(
        ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec {record}'],
        stdin=subprocess.DEVNULL, capture_output=True, check=False,
        timeout=120,  # a guard against a hang, far above the second it takes
    )  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert err.startswith("lexmem: error: recording the MCP manifest: the MCP session stopped")
    assert "FileNotFoundError" in err and err.count("\n") == 1

    home = tmp_path / "here"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "lexmem.agents.mcp_server", "--record-manifest", str(home)],
        stdin=subprocess.DEVNULL, capture_output=True, check=False, timeout=120, cwd=home,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    manifest = json.loads((home / "mcp-manifest.json").read_text())
    assert set(manifest["sessions"]) == {*MANIFEST_VERSIONS, "*"}  # "*": a version unknown
    assert set(manifest["modern"]) == set(MODERN_PROTOCOL_VERSIONS)


def test_doctor_lists_a_service_whose_data_folder_is_gone(tmp_path: Path) -> None:
    from lexmem.doctor import run_checks
    from lexmem.service.registry import register

    gone = tmp_path / "deleted"
    # What an older lexmem left: a `lexmem serve` that never stops, its folder deleted.
    old = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "lexmem", "serve"],
        env=environment(gone), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    # And a record of a service that was killed: pruned, not listed.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    record = register(tmp_path / "elsewhere")  # this process, as a service
    assert record is not None
    stale = record.with_name(f"{dead.pid}.json")
    stale.write_text(json.dumps({"pid": dead.pid, "home": str(tmp_path / "elsewhere")}))
    record.unlink()
    try:
        wait_for(lambda: any(s.pid == old.pid for s in services()), "the old service to show")
        checks = {c.name: c for c in run_checks(str(tmp_path / "lexmem"))}
        assert checks["services"].state == "warn"
        assert f"pid {old.pid} for {gone}" in checks["services"].detail
        assert f"`kill {old.pid}`" in checks["services"].detail
        assert not stale.exists()
        assert all(s.pid != dead.pid for s in services())
    finally:
        old.kill()
        old.wait()


def test_install_records_the_answers_for_the_first_session(tmp_path: Path) -> None:
    home = tmp_path / "lexmem"
    lexmem(home, "install", "claude")
    manifest = json.loads((home / "mcp-manifest.json").read_text())
    opening = manifest["sessions"]["2025-06-18"]
    assert opening["initialize"]["serverInfo"]["name"] == "lexmem"
    assert opening["initialize"]["protocolVersion"] == "2025-06-18"
    # The tool list is the first version's, written once and named by the others.
    first = next(iter(manifest["sessions"]))
    assert opening["tools/list"] == first != "2025-06-18"
    assert "search_memory" in [
        t["name"] for t in manifest["sessions"][first]["tools/list"]["tools"]
    ]
    assert len((home / "mcp-manifest.json").read_bytes()) < 60_000
    assert stat.S_IMODE(os.stat(home / "mcp-manifest.json").st_mode) == 0o600


def test_mcp_requests_piped_in_at_once_end_cleanly(seeded: Path) -> None:
    """A script that writes its requests and closes stdin at once gets the opening's
    answer and a clean exit, as from the in-process server (whose SDK, like the service's,
    ends the session at the end of its input, dropping calls still running)."""
    lexmem(seeded, "install", "claude")  # records the opening answers
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search_memory", "arguments": {"query": "database"}}},
    ]  # fmt: skip
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    try:
        result = subprocess.run([*lexmem_command(), "mcp"], input=stdin, env=environment(seeded),
                                capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        replies = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
        assert result.returncode == 0, result.stderr
        assert replies[1]["result"]["serverInfo"]["name"] == "lexmem"
        assert set(replies) <= {1, 2}
    finally:
        stop_services_of(seeded)


def test_a_starting_service_records_the_answers_without_loading_the_mcp_sdk(
    tmp_path: Path,
) -> None:
    """The manifest is recorded in a process of its own: the MCP SDK (~30 MB resident)
    enters a long-lived service only with an agent's first session."""
    home = tmp_path / "lexmem"
    code = f"""
import sys
from lexmem.api import Lexmem
from lexmem.cli import reader_warmup
lm = Lexmem.open({str(home)!r})
reader_warmup(lm)()
print(sorted(m for m in ("mcp", "mcp_types", "lexmem.agents.mcp_server") if m in sys.modules))
lm.close()
"""
    out = subprocess.run(
        [sys.executable, "-c", code], env=environment(home), capture_output=True, text=True,
        timeout=300, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "[]"
    manifest = json.loads((home / "mcp-manifest.json").read_text())
    assert manifest["sessions"] and all(
        "initialize" in s and "tools/list" in s for s in manifest["sessions"].values()
    )
    assert stat.S_IMODE((home / "mcp-manifest.json").stat().st_mode) == 0o600
