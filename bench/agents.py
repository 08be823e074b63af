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
  (and SessionEnd's) still the command (docs/agents.md).

The ``hooks`` set-ups are installed with no ``claude`` on PATH, so with the command hooks
that any Claude Code runs. ``--claude`` picks the Claude Code: ``pinned``
(tests/agents), or the path of another ``claude`` (the newest, installed with ``npm
install --prefix DIR``: ``DIR/node_modules/.bin/claude``).

Reports the median wall time of each (``claude -p`` start to exit), and in how many of the
``hooks+mcp`` sessions lexmem's tools were in the first model request (Claude Code in
``-p`` mode sends its first request without an MCP server that is still starting).
Targets: tools in the first request in every session (10 of 10); a session with lexmem
within 15 % of the same session without it.

    .venv/bin/python bench/agents.py [--runs N] [--claude pinned|PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
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
SETUPS = ("bare", "hooks", "hooks+mcp", "noop-hooks", "tool-hooks")
TOOL = "mcp__lexmem__search_memory"
TARGET_SLOWDOWN = 0.15


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="3 sessions per set-up")
    p.add_argument("--runs", type=int, default=None, help="sessions per set-up (default 5)")
    p.add_argument("--out", type=Path, help="also write DIR/agents.json")
    p.add_argument("--claude", default="pinned", help="pinned, or the path of a claude")
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
    import os

    from realagents import Sandbox

    sb = Sandbox(root, model_url)
    if setup == "tool-hooks":  # install finds this Claude Code and its version
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
    if setup == "noop-hooks":
        settings = sb.home / ".claude" / "settings.json"
        data = json.loads(settings.read_text())
        for groups in data["hooks"].values():
            for group in groups:
                group["hooks"] = [{**h, "command": "true"} for h in group["hooks"]]
        settings.write_text(json.dumps(data, indent=2))
    return sb


def measure(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from fakemodel import FakeModel, Turn
    from realagents import missing_reason

    reason = missing_reason("claude") if opts.claude == "pinned" else None
    exe = _claude(opts)
    if reason or not exe.exists():
        raise BenchError(reason or f"{exe} is missing")
    times: dict[str, list[float]] = {s: [] for s in SETUPS}
    tools_first = 0
    with FakeModel() as model:
        boxes = {s: _setup(tmp / s.replace("+", "-"), model.url, s, exe) for s in SETUPS}
        try:
            for i in range(opts.runs):
                for setup in SETUPS:
                    sb = boxes[setup]
                    model.reset()
                    model.script(Turn(tool="Bash", input={"command": "echo ok"}), Turn(text="ok"))
                    start = time.monotonic()
                    sb.run([str(exe), "-p", "Run echo ok, then say ok.",
                            "--dangerously-skip-permissions", "--output-format", "json"])  # fmt: skip
                    times[setup].append(time.monotonic() - start)
                    requests = model.main_requests()
                    if setup == "tool-hooks":
                        assert _tool_hooks(sb), "tool-hooks set up no mcp_tool hook"
                    if setup == "hooks+mcp" and requests and TOOL in requests[0].tool_names:
                        tools_first += 1
                    print(
                        f"{NAME}: run {i + 1}/{opts.runs} {setup}: {times[setup][-1]:.2f} s",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            for sb in boxes.values():
                sb.close()
    medians = {s: statistics.median(v) for s, v in times.items()}
    return {
        "runs": opts.runs,
        "claude_code": _version(exe),
        "seconds": {s: [round(x, 3) for x in v] for s, v in times.items()},
        "median_s": {s: round(m, 3) for s, m in medians.items()},
        "slowdown": {s: round(medians[s] / medians["bare"] - 1, 3) for s in SETUPS[1:]},
        "tools_in_first_request": tools_first,
        "targets": {
            "tools_in_first_request": f"{opts.runs} of {opts.runs}",
            "slowdown_at_most": TARGET_SLOWDOWN,
        },
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
            "Claude Code one-tool session with lexmem (hooks + MCP), median", m["hooks+mcp"],
            "s", "the same session without lexmem, median", m["bare"],
        )  # fmt: skip
        result["figures"] = make_figures(
            ("session with lexmem (hooks + MCP), median", m["hooks+mcp"], "s",
             "without lexmem, median", m["bare"]),
            ("session with lexmem's hooks only, median", m["hooks"], "s",
             "without lexmem, median", m["bare"]),
            ("session with lexmem's hooks as MCP tool calls (hooks + MCP), median",
             m["tool-hooks"], "s", "without lexmem, median", m["bare"]),
            ("session with hooks that do nothing (Claude Code's own cost), median",
             m["noop-hooks"], "s", "without lexmem, median", m["bare"]),
            ("sessions with lexmem's tools in the first request", f["tools_in_first_request"],
             "sessions", "sessions run", f["runs"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        s = f["slowdown"]
        print(
            f"{NAME}: Claude Code one-tool session, median of {f['runs']}: "
            f"{m['bare']:.2f} s bare, {m['hooks']:.2f} s with hooks ({s['hooks']:+.0%}), "
            f"{m['hooks+mcp']:.2f} s with hooks + MCP ({s['hooks+mcp']:+.0%}; target "
            f"+{TARGET_SLOWDOWN:.0%}), {m['noop-hooks']:.2f} s with hooks that do nothing "
            f"({s['noop-hooks']:+.0%}), {m['tool-hooks']:.2f} s with hooks as MCP tool calls + "
            f"MCP ({s['tool-hooks']:+.0%}); lexmem's tools in the first request "
            f"{f['tools_in_first_request']} of {f['runs']} (target {f['runs']} of {f['runs']})",
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
