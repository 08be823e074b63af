"""What lexmem costs a real Claude Code session, and whether its tools arrive in time.

Drives the real Claude Code CLI (installed by ``./dev`` from ``tests/agents/package-lock.json``)
against the fake model server of ``tests/agents/fakemodel.py`` on 127.0.0.1, in a sandbox
HOME, with a one-tool session: the model calls Bash once (``echo ok``), then answers. Three
set-ups, run in turn (A, B, C, A, B, C, ...) so drift in the machine's load hits each alike:

- ``bare``: no lexmem;
- ``hooks``: lexmem's hooks only (``lexmem install claude``, the MCP server taken out);
- ``hooks+mcp``: what ``lexmem install claude`` sets up, hooks and the ``lexmem mcp`` server;
- ``noop-hooks``: the floor, Claude Code's own cost of running hooks: the same hook
  registrations as ``hooks``, each running ``true`` (a command that does nothing);
- ``tool-hooks``: what ``lexmem install claude`` sets up when it finds this Claude Code
  (2.1.118 or later) on PATH: the hooks as calls of lexmem's MCP tool, SessionStart's
  (and SessionEnd's) still the command (docs/agents.md);
- ``noop-tool-hooks``: the floor for ``tool-hooks``, Claude Code's own cost of the same
  registrations doing nothing: each command hook running ``true``, and the MCP server an
  empty one (``tests/agents/noopmcp.py`` under ``python -S``) whose hook tool answers
  ``{}`` at once.

Each session starts once lexmem's work from the sessions before it is done (no process
of any sandbox left running but its service, every inbox empty and every service idle):
no set-up's session pays for another's, and
what is measured is what lexmem costs the agent while the agent works. (lexmem's service
takes an agent's events in once they have settled, ``[capture] settle_seconds``.)

Per blocking hook, what the agent waits for, lexmem against the floor: each tool hook's
call (from Claude Code's debug log, ``--debug-file``, of one more session of each of those
two set-ups a round: "mcp_tool calling" to the hook's "success"), and each command hook
the agent waits for, run as Claude Code runs it (``/bin/sh -c COMMAND`` in the project,
the event's payload on stdin, until its output closes and it exits) against the same
with ``true``.

The ``hooks`` set-ups are installed with no ``claude`` on PATH, so with the command hooks
that any Claude Code runs. ``--claude`` picks the Claude Code: ``pinned``
(tests/agents), or the path of another ``claude`` (the newest, installed with ``npm
install --prefix DIR``: ``DIR/node_modules/.bin/claude``).

Reports the median wall time of each (``claude -p`` start to exit), and in how many of the
``hooks+mcp`` and ``tool-hooks`` sessions lexmem's tools were in the first model request
(Claude Code in ``-p`` mode sends its first request without an MCP server that is still
starting). Targets (issue 16): tools in the first request in every session; the session
with lexmem (``tool-hooks``) within 10 % of the session without it, or, where the floor
is above that, within 3 points of the floor; per blocking hook, at most 5 ms more than
the floor's. Points over the floor are given two ways: by the set-ups' medians, and as
the median of each round's own ((lexmem - floor) / bare, its sessions seconds apart,
the rounds run forwards and backwards in turn), which leaves out the machine's drift
between rounds; both verdicts are printed.

    .venv/bin/python bench/agents.py [--runs N] [--claude pinned|PATH] [--session-only] [--out DIR]

``--session-only``: the three set-ups the session's target compares, for more rounds in
the same time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "agents"))

from _common import (  # noqa: E402
    BenchError,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    write_result,
)

NAME = "agents"
SETUPS = ("bare", "hooks", "hooks+mcp", "noop-hooks", "tool-hooks", "noop-tool-hooks")
SESSION_SETUPS = ("bare", "tool-hooks", "noop-tool-hooks")
TOOL = "mcp__lexmem__search_memory"
TARGET_SLOWDOWN = 0.10
TARGET_OVER_FLOOR = 0.03
TARGET_HOOK_MS = 5.0
NOOP_MCP = HERE.parent / "tests" / "agents" / "noopmcp.py"
COMMAND_RUNS = 30  # each command hook against `true`, alternating


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="3 sessions per set-up")
    p.add_argument("--runs", type=int, default=None, help="sessions per set-up (default 5)")
    p.add_argument("--out", type=Path, help="also write DIR/agents.json")
    p.add_argument("--claude", default="pinned", help="pinned, or the path of a claude")
    p.add_argument("--session-only", action="store_true",
                   help="only the set-ups the session's target compares (bare, tool-hooks, "
                        "noop-tool-hooks): more rounds in the same time")  # fmt: skip
    opts = p.parse_args(argv)
    if opts.runs is None:
        opts.runs = 3 if opts.quick else 5
    if opts.runs < 1:
        raise BenchError("--runs must be at least 1")
    return opts


def _claude(opts: argparse.Namespace) -> Path:
    from realagents import agent_bin

    return agent_bin("claude") if opts.claude == "pinned" else Path(opts.claude).absolute()


def _setup(root: Path, model_url: str, setup: str, exe: Path) -> Any:
    from realagents import Sandbox

    sb = Sandbox(root, model_url)
    if setup in ("tool-hooks", "noop-tool-hooks"):  # install finds this Claude Code
        sb.env["PATH"] = f"{exe.parent}{os.pathsep}{sb.env['PATH']}"
    if setup != "bare":
        sb.lexmem("install", "claude")
        # Warm the data folder (settings, model files) so the first run pays no set-up.
        sb.lexmem("remember", "The shop is released with 'make ship'", "--project", str(sb.project))
    if setup in ("hooks", "noop-hooks"):
        claude_json = sb.home / ".claude.json"
        data = json.loads(claude_json.read_text())
        data.get("mcpServers", {}).pop("lexmem", None)
        claude_json.write_text(json.dumps(data, indent=2))
    if setup in ("noop-hooks", "noop-tool-hooks"):
        settings = sb.home / ".claude" / "settings.json"
        data = json.loads(settings.read_text())
        for groups in data["hooks"].values():
            for group in groups:
                group["hooks"] = [
                    {**h, "command": "true"} if h.get("type") == "command" else h
                    for h in group["hooks"]
                ]
        settings.write_text(json.dumps(data, indent=2))
    if setup == "noop-tool-hooks":
        claude_json = sb.home / ".claude.json"
        data = json.loads(claude_json.read_text())
        data["mcpServers"]["lexmem"] = {
            **data["mcpServers"]["lexmem"], "command": sys.executable, "args": ["-S", str(NOOP_MCP)],
        }  # fmt: skip
        claude_json.write_text(json.dumps(data, indent=2))
    return sb


def _service_cpu(sb: Any) -> float | None:
    """CPU seconds the sandbox's lexmem service and its own processes (the model's) have
    used (None: no service)."""
    pid = _service_pid(sb)
    if pid is None or not os.path.exists(f"/proc/{pid}"):
        return None
    ticks = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(name) == pid or int(fields[1]) == pid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _service_pid(sb: Any) -> int | None:
    try:
        return int((sb.lexmem_home / "service.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _sandbox_processes(sb: Any) -> list[int]:
    """The processes of the sandbox still running but its service: a hook a session left
    in the background (SessionStart's starts half a second late, by design), a relay
    still recording. Known by the sandbox's data folder in their environment."""
    mark = f"LEXMEM_HOME={sb.lexmem_home}".encode() + b"\0"
    service = _service_pid(sb)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (os.getpid(), service):
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if mark not in f.read():
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent != service:  # the service's own (its model's process) are the service
            found.append(int(name))
    return found


def _settled(sb: Any, limit: float = 120.0) -> None:
    """Wait until lexmem's work from the sandbox's last session is done (no process of
    it left but the service, its inbox empty, its service idle for a moment): each
    session starts on a machine no other session's work still occupies, whichever set-up
    it is."""
    inbox = sb.lexmem_home / "inbox"
    deadline = time.monotonic() + limit
    last: float | None = -1.0
    quiet = 0  # polls in a row with nothing waiting and no CPU used (ticks are 10 ms)
    while time.monotonic() < deadline:
        waiting = bool(_sandbox_processes(sb)) or (inbox.is_dir() and any(
            n.endswith(".json") and not n.startswith(".") for n in os.listdir(inbox)
        ))  # fmt: skip
        cpu = _service_cpu(sb)
        quiet = quiet + 1 if not waiting and cpu == last else 0
        if quiet >= 2:
            return
        last = cpu
        time.sleep(0.25)


def _tool_hook_waits(log: str) -> dict[str, list[float]]:
    """Per event, the milliseconds each ``mcp_tool`` hook call took, from a debug log:
    "mcp_tool calling" to that event's "success" line."""
    waits: dict[str, list[float]] = {}
    started: datetime | None = None
    for line in log.splitlines():
        stamp = _stamp(line)
        if stamp is None:
            continue
        if "Hooks: mcp_tool calling" in line:
            started = stamp
        elif started is not None and '"Hook ' in line and " success:" in line:
            event = line.split('"Hook ', 1)[1].split(" ", 1)[0].split(":", 1)[0]
            waits.setdefault(event, []).append((stamp - started).total_seconds() * 1000)
            started = None
    return waits


def _stamp(line: str) -> datetime | None:
    try:
        return datetime.fromisoformat(line[:24].replace("Z", "+00:00"))
    except ValueError:
        return None


def _command_waits(sb: Any) -> dict[str, list[float]]:
    """Per blocking command hook of a set-up, the milliseconds the agent waits for it
    (``/bin/sh -c`` in the project, the payload on stdin, to its exit with its output
    closed), alternating with ``true``: the same registration doing nothing."""
    settings = json.loads((sb.home / ".claude" / "settings.json").read_text())
    payload = json.dumps({
        "session_id": "bench", "transcript_path": "", "cwd": str(sb.project),
        "hook_event_name": "SessionStart", "source": "startup",
    }).encode()  # fmt: skip
    commands = {
        event: h["command"]
        for event, groups in settings["hooks"].items()
        for g in groups
        for h in g["hooks"]
        if h.get("type") == "command" and not h.get("async")
    }
    waits: dict[str, list[float]] = {}
    for _ in range(COMMAND_RUNS):
        for event, command in commands.items():
            for name, cmd in ((event, command), (f"{event} (true)", "true")):
                body = payload.replace(b"SessionStart", event.encode())
                start = time.monotonic()
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", cmd], cwd=sb.project, env=sb.env, start_new_session=True,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                )  # fmt: skip
                proc.communicate(body, timeout=60)
                waits.setdefault(name, []).append((time.monotonic() - start) * 1000)
                _wait_for_group(proc.pid)  # what it left running in the background ends first
    return waits


def _wait_for_group(pgid: int, limit: float = 30.0) -> None:
    """Wait until no process of the group is left (each measurement on its own)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def measure(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from fakemodel import FakeModel, Turn
    from realagents import missing_reason

    reason = missing_reason("claude") if opts.claude == "pinned" else None
    exe = _claude(opts)
    if reason or not exe.exists():
        raise BenchError(reason or f"{exe} is missing")
    setups = SESSION_SETUPS if opts.session_only else SETUPS
    times: dict[str, list[float]] = {s: [] for s in setups}
    tools_first = {s: 0 for s in ("hooks+mcp", "tool-hooks") if s in setups}
    tool_waits: dict[str, dict[str, list[float]]] = {"tool-hooks": {}, "noop-tool-hooks": {}}
    argv = [str(exe), "-p", "Run echo ok, then say ok.", "--dangerously-skip-permissions",
            "--output-format", "json"]  # fmt: skip
    with FakeModel() as model:
        boxes = {s: _setup(tmp / s.replace("+", "-"), model.url, s, exe) for s in setups}
        try:
            assert _tool_hooks(boxes["tool-hooks"]), "tool-hooks set up no mcp_tool hook"
            for i in range(opts.runs):
                # Forwards, then backwards: no set-up always comes after the same one.
                for setup in setups if i % 2 == 0 else setups[::-1]:
                    sb = boxes[setup]
                    for box in boxes.values():
                        _settled(box)
                    model.reset()
                    model.script(Turn(tool="Bash", input={"command": "echo ok"}), Turn(text="ok"))
                    start = time.monotonic()
                    sb.run(argv)
                    times[setup].append(time.monotonic() - start)
                    requests = model.main_requests()
                    if setup in tools_first and requests and TOOL in requests[0].tool_names:
                        tools_first[setup] += 1
                    print(
                        f"{NAME}: run {i + 1}/{opts.runs} {setup}: {times[setup][-1]:.2f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                # One more session of each with Claude Code's debug log, for the tool
                # hooks' waits (not timed: the log costs the session time).
                for setup, waits in tool_waits.items():
                    sb = boxes[setup]
                    for box in boxes.values():
                        _settled(box)
                    model.reset()
                    model.script(Turn(tool="Bash", input={"command": "echo ok"}), Turn(text="ok"))
                    log = sb.root / f"debug-{i}.log"
                    sb.run([*argv, "--debug-file", str(log)])
                    for event, ms in _tool_hook_waits(log.read_text(errors="replace")).items():
                        waits.setdefault(event, []).extend(ms)
            command_waits = _command_waits(boxes["tool-hooks"])
            # Sessions started with no service running (stopped before each): lexmem's
            # tools must still be in the first request (the relay answers the opening).
            cold = 0
            for i in range(opts.runs):
                sb = boxes["tool-hooks"]
                sb._stop_service()
                model.reset()
                model.script(Turn(tool="Bash", input={"command": "echo ok"}), Turn(text="ok"))
                sb.run(argv)
                requests = model.main_requests()
                cold += bool(requests and TOOL in requests[0].tool_names)
                print(f"{NAME}: cold session {i + 1}/{opts.runs}: tools in the first request "
                      f"{cold} of {i + 1}", file=sys.stderr, flush=True)  # fmt: skip
        finally:
            for sb in boxes.values():
                sb.close()
    medians = {s: statistics.median(v) for s, v in times.items()}
    slowdown = {s: round(medians[s] / medians["bare"] - 1, 3) for s in setups[1:]}
    # Each round's sessions ran within seconds of each other: its own points over the
    # floor ((lexmem - floor) / bare) leave out the drift of the machine between rounds
    # (a shared host: the same bare session took 0.45 to 0.69 s within ten minutes).
    paired = sorted(
        (t - f) / b for b, t, f in zip(times["bare"], times["tool-hooks"],
                                       times["noop-tool-hooks"], strict=True)
    )  # fmt: skip
    paired_over = statistics.median(paired)
    quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
    hooks: dict[str, dict[str, float | None]] = {}
    for event in sorted(set(tool_waits["tool-hooks"]) | set(tool_waits["noop-tool-hooks"])):
        ours, floor = (_median(tool_waits[s].get(event)) for s in tool_waits)
        hooks[f"{event} (mcp_tool)"] = _over(ours, floor)
    for name in sorted(n for n in command_waits if not n.endswith(" (true)")):
        hooks[f"{name} (command)"] = _over(
            _median(command_waits[name]), _median(command_waits[f"{name} (true)"])
        )
    over_floor = slowdown["tool-hooks"] - slowdown["noop-tool-hooks"]
    session_ok = slowdown["tool-hooks"] <= TARGET_SLOWDOWN or (
        slowdown["noop-tool-hooks"] > TARGET_SLOWDOWN and over_floor <= TARGET_OVER_FLOOR
    )
    paired_ok = slowdown["tool-hooks"] <= TARGET_SLOWDOWN or (
        slowdown["noop-tool-hooks"] > TARGET_SLOWDOWN and paired_over <= TARGET_OVER_FLOOR
    )
    hooks_ok = all(
        h["over_ms"] is not None and h["over_ms"] <= TARGET_HOOK_MS for h in hooks.values()
    )
    return {
        "runs": opts.runs,
        "claude_code": _version(exe),
        "seconds": {s: [round(x, 3) for x in v] for s, v in times.items()},
        "median_s": {s: round(m, 3) for s, m in medians.items()},
        "slowdown": slowdown,
        "over_floor": round(over_floor, 3),
        "over_floor_paired": {
            "median": round(paired_over, 3),
            "quartiles": [round(q, 3) for q in (quartiles[0], quartiles[2])],
            "rounds": [round(x, 3) for x in paired],
        },
        "hook_wait_ms": hooks,
        "tools_in_first_request": tools_first,
        "tools_in_first_request_no_service": cold,
        "targets": {
            "tools_in_first_request": f"{opts.runs} of {opts.runs}, with and without a service",
            "slowdown_at_most": TARGET_SLOWDOWN,
            "or_over_floor_at_most": TARGET_OVER_FLOOR,
            "hook_over_floor_ms_at_most": TARGET_HOOK_MS,
            "session_met": session_ok,
            "session_met_paired": paired_ok,
            "hooks_met": hooks_ok,
        },
    }


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def _over(ours: float | None, floor: float | None) -> dict[str, float | None]:
    return {
        "lexmem_ms": None if ours is None else round(ours, 1),
        "floor_ms": None if floor is None else round(floor, 1),
        "over_ms": None if ours is None or floor is None else round(ours - floor, 1),
    }


def _tool_hooks(sb: Any) -> bool:
    settings = json.loads((sb.home / ".claude" / "settings.json").read_text())
    return any(
        h.get("type") == "mcp_tool"
        for gs in settings["hooks"].values()
        for g in gs
        for h in g["hooks"]
    )


def _version(exe: Path) -> str | None:
    try:
        out = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        opts = parse_args(argv)
        if shutil.which("git") is None:
            raise BenchError("git is needed (the sandbox's project is a repository)")
        with bench_tempdir() as tmp:
            f = measure(opts, tmp)
        result: dict[str, Any] = {"benchmark": NAME, "machine": machine_info(), **f}
        m = f["median_s"]
        result["summary"] = make_summary(
            "Claude Code one-tool session with lexmem (tool hooks + MCP), median",
            m["tool-hooks"], "s", "the same session without lexmem, median", m["bare"],
        )  # fmt: skip
        first = f["tools_in_first_request"]
        rows = [
            ("session with lexmem (tool hooks + MCP), median", m["tool-hooks"], "s",
             "without lexmem, median", m["bare"]),
            ("session with the same registrations doing nothing (the floor), median",
             m["noop-tool-hooks"], "s", "without lexmem, median", m["bare"]),
        ]  # fmt: skip
        if "hooks" in m:
            rows += [
                ("session with lexmem (command hooks + MCP), median", m["hooks+mcp"], "s",
                 "without lexmem, median", m["bare"]),
                ("session with lexmem's command hooks only, median", m["hooks"], "s",
                 "without lexmem, median", m["bare"]),
                ("session with command hooks that do nothing, median", m["noop-hooks"], "s",
                 "without lexmem, median", m["bare"]),
            ]  # fmt: skip
        rows += [
            ("sessions with lexmem's tools in the first request (tool hooks)",
             first["tool-hooks"], "sessions", "sessions run", f["runs"]),
            ("sessions started with no service running with lexmem's tools in the first "
             "request", f["tools_in_first_request_no_service"], "sessions", "sessions run",
             f["runs"]),
        ]  # fmt: skip
        result["figures"] = make_figures(*rows)
        write_result(NAME, result, opts.out)
        s, t, p = f["slowdown"], f["targets"], f["over_floor_paired"]
        waits = "; ".join(
            f"{name} {h['lexmem_ms']} ms vs {h['floor_ms']} ms ({h['over_ms']:+.1f})"
            if h["over_ms"] is not None else f"{name} n/a"
            for name, h in f["hook_wait_ms"].items()
        )  # fmt: skip
        commands = (
            f"; command hooks + MCP {m['hooks+mcp']:.2f} s ({s['hooks+mcp']:+.0%}), command "
            f"hooks only {m['hooks']:.2f} s ({s['hooks']:+.0%}), command hooks doing nothing "
            f"{m['noop-hooks']:.2f} s ({s['noop-hooks']:+.0%})"
            if "hooks" in m else ""
        )  # fmt: skip
        command_first = (
            f", {first['hooks+mcp']} of {f['runs']} (command hooks)" if "hooks+mcp" in first else ""
        )
        print(
            f"{NAME}: Claude Code {f['claude_code']}, one-tool session, median of {f['runs']}: "
            f"{m['bare']:.2f} s bare; lexmem (tool hooks + MCP) {m['tool-hooks']:.2f} s "
            f"({s['tool-hooks']:+.0%}), the same registrations doing nothing "
            f"{m['noop-tool-hooks']:.2f} s ({s['noop-tool-hooks']:+.0%}), "
            f"{f['over_floor'] * 100:+.1f} points over the floor by the medians, "
            f"{p['median'] * 100:+.1f} by the rounds' own (quartiles {p['quartiles'][0] * 100:+.1f}"
            f" to {p['quartiles'][1] * 100:+.1f}) (target +{TARGET_SLOWDOWN:.0%}, or "
            f"{TARGET_OVER_FLOOR * 100:.0f} points over a floor above it: "
            f"{'met' if t['session_met'] else 'NOT met'} by the medians, "
            f"{'met' if t['session_met_paired'] else 'NOT met'} by the rounds){commands}; "
            f"per blocking hook, lexmem vs the floor: {waits} (target "
            f"+{TARGET_HOOK_MS:.0f} ms: {'met' if t['hooks_met'] else 'NOT met'}); lexmem's tools "
            f"in the first request {first['tool-hooks']} of {f['runs']} (tool hooks)"
            f"{command_first}, {f['tools_in_first_request_no_service']} of {f['runs']} started "
            "with no service running (tool hooks)",
            flush=True,
        )
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, AssertionError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
