"""Run every benchmark in ``bench/`` and print one summary table.

Each ``bench/<name>.py`` (except this file and ``_``-prefixed helpers) runs as its own
subprocess with ``--out DIR`` (and ``--quick`` when given). A benchmark writes
``DIR/<name>.json`` holding a top-level ``"summary"`` object::

    {"headline": str, "value": float, "unit": str,
     "baseline": str, "baseline_value": float, "ratio": float}

The table shows those fields per benchmark, one line for each of its ``"figures"`` (a
list of the same objects, when it reports more than its headline); ``DIR/summary.json``
combines the summaries, the run details and every benchmark's full JSON. A benchmark's stdout
goes to ``DIR/<name>.log`` (its last line is echoed); its stderr (progress) passes
through. The exit status is non-zero when any benchmark failed.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NAME = "run_all"
# Benchmarks whose full size is a soak, not a measurement to repeat on every run (the
# 5,000-event crash run alone takes ~10 minutes on 2 cores): the suite runs them at
# their --quick size so that it stays near ten minutes; --full runs them whole, and
# each runs whole on its own (python bench/faults.py).
SOAKS = frozenset({"faults", "backup"})


def discover(only: Sequence[str] = ()) -> list[Path]:
    scripts = sorted(
        p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )
    if only:
        wanted = {n.removesuffix(".py") for n in only}
        unknown = wanted - {p.stem for p in scripts}
        if unknown:
            raise SystemExit(
                f"{NAME}: error: no benchmark named {', '.join(sorted(unknown))} "
                f"(have: {', '.join(p.stem for p in scripts) or 'none'})"
            )
        scripts = [p for p in scripts if p.stem in wanted]
    return scripts


def run_one(script: Path, out: Path, quick: bool, timeout: float | None) -> dict[str, Any]:
    name = script.stem
    cmd = [sys.executable, str(script), "--out", str(out)]
    if quick:
        cmd.append("--quick")
    result_file = out / f"{name}.json"
    result_file.unlink(missing_ok=True)  # never report a previous run's figures
    log_file = out / f"{name}.log"
    print(f"[{NAME}] {name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    status: dict[str, Any] = {"script": str(script.relative_to(HERE.parent)), "command": cmd[1:]}
    try:
        with open(log_file, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=None)
            try:
                status["returncode"] = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # SIGTERM first: the benchmark removes its temporary stores on the way out.
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                status["returncode"] = None
                status["error"] = f"timed out after {timeout:.0f} s"
            except BaseException:
                proc.terminate()
                proc.wait()
                raise
    except OSError as exc:
        status["returncode"] = None
        status["error"] = f"could not start ({exc.strerror})"
    status["seconds"] = round(time.perf_counter() - started, 1)
    status["log"] = str(log_file)
    last_line = _last_line(log_file)
    if last_line:
        status["last_line"] = last_line
        print(f"[{NAME}] {last_line}", file=sys.stderr, flush=True)
    if status.get("returncode") not in (0, None) and "error" not in status:
        status["error"] = f"exited with status {status['returncode']}"
    if result_file.exists():
        try:
            data = json.loads(result_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            status.setdefault("error", f"unreadable {result_file.name} ({exc})")
        else:
            status["data"] = data
            summary = data.get("summary") if isinstance(data, dict) else None
            if _valid_summary(summary):
                status["summary"] = summary
            else:
                status.setdefault("error", f"{result_file.name} has no valid top-level summary")
    else:
        status.setdefault("error", f"wrote no {result_file.name}")
    return status


def _last_line(path: Path) -> str | None:
    try:
        lines = [
            ln
            for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()
            if ln.strip()
        ]
    except OSError:
        return None
    return lines[-1] if lines else None


def _valid_summary(s: Any) -> bool:
    if not isinstance(s, dict):
        return False
    return all(isinstance(s.get(k), str) for k in ("headline", "unit", "baseline")) and all(
        isinstance(s.get(k), (int, float)) for k in ("value", "baseline_value", "ratio")
    )


def _num(x: Any) -> str:
    if not isinstance(x, (int, float)) or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def table(results: dict[str, dict[str, Any]]) -> str:
    header = ("benchmark", "headline", "value", "baseline", "baseline value", "ratio", "time")
    rows = []
    for name, r in results.items():
        s = r.get("summary")
        if s and "error" not in r:
            # Every figure the benchmark reports with its baseline, else its headline alone.
            data = r.get("data") if isinstance(r.get("data"), dict) else {}
            figures = [f for f in data.get("figures") or [] if _valid_summary(f)] or [s]
            for i, f in enumerate(figures):
                unit = f["unit"]
                rows.append(
                    (
                        name if i == 0 else "", f["headline"], f"{_num(f['value'])} {unit}",
                        f["baseline"], f"{_num(f['baseline_value'])} {unit}",
                        f"x{_num(f['ratio'])}", f"{r['seconds']:.0f} s" if i == 0 else "",
                    )
                )  # fmt: skip
        else:
            rows.append(
                (name, f"FAILED: {r.get('error', '?')}", "", "", "", "", f"{r['seconds']:.0f} s")
            )
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in (header, tuple("-" * w for w in widths), *rows)]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="run_all.py",
        description="Run every bench/*.py benchmark (each with --out DIR) and summarise them.",
    )
    p.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    p.add_argument(
        "--full",
        action="store_true",
        help=f"run the soaks ({', '.join(sorted(SOAKS))}) at full size too (adds ~15 minutes)",
    )
    p.add_argument(
        "--out", type=Path, default=HERE / "out", help="output folder (default bench/out/)"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    p.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per benchmark (default 1800)"
    )
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = p.parse_args(argv)

    scripts = discover(args.only or ())
    if args.list:
        for s in scripts:
            print(s.stem)
        return 0
    if not scripts:
        print(f"{NAME}: error: no benchmarks found in {HERE}", file=sys.stderr)
        return 1
    out: Path = args.out.expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"{NAME}: error: cannot create {out} ({exc.strerror})", file=sys.stderr)
        return 1

    started = time.time()
    results: dict[str, dict[str, Any]] = {}
    try:
        for script in scripts:
            quick = args.quick or (script.stem in SOAKS and not args.full)
            results[script.stem] = run_one(script, out, quick, args.timeout)
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130

    combined = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "quick": args.quick,
        "python": sys.executable,
        "summaries": {n: r.get("summary") for n, r in results.items()},
        "failed": {n: r["error"] for n, r in results.items() if "error" in r},
        "results": results,
    }
    target = out / "summary.json"
    try:
        target.write_text(json.dumps(combined, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"{NAME}: error: cannot write {target} ({exc.strerror})", file=sys.stderr)
        return 1
    print(table(results))
    print(f"\ncombined JSON: {target}")
    return 1 if combined["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
