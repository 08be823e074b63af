"""Redaction: lexmem against detect-secrets on the secrets corpus, throughput, hook latency.

1. The corpus (tests/data/secrets/corpus.jsonl): for each secret, caught or missed; for
   each look-alike, left alone or falsely alarmed. lexmem: :func:`lexmem.capture.redact.redact`
   on the row's text; a secret is caught when neither it nor any 8-character fragment of
   it survives, a look-alike is damaged when a ``must_keep`` substring does not survive.
   detect-secrets (same process, every default plugin, each row written to a file and
   scanned line by line as ``detect-secrets scan`` does): a secret is caught when one
   reported ``secret_value`` covers it, a look-alike is a false alarm when a reported
   value overlaps a ``must_keep`` substring.
2. Throughput on realistic Claude Code transcripts (JSONL: prompts, answers, tool calls
   and their output, a corpus secret now and then), redacted line by line and whole;
   detect-secrets scanning the same file is the baseline.
3. The worst adversarial case: long unbroken text built on the key names and shapes that
   make redaction backtrack or judge a candidate at every step (``key=``, ``token:``,
   ``secret:``, unclosed quotes and tags, escaped and disguised keys, command lines,
   tables, YAML lists...), each shape at 16 KB and at 1 MB, then the worst one at four
   sizes -- all with :func:`redact` as explicit text gets it (every rule over the whole
   text) -- and each shape at 1 MB again with ``budget=True``, as the hook calls it.
   Each measurement runs in a child process with a time limit, so a redactor that never
   finishes is reported as such rather than hanging.
4. The hook's p50 latency on a UserPromptSubmit carrying a .env, against ``python -c pass``.

Prints figures and writes ``--out DIR/redaction.json``; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BenchError,
    MemoryCorpus,
    bench_tempdir,
    machine_info,
    make_figures,
    make_summary,
    percentiles,
    write_result,
)

NAME = "redaction"
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "secrets" / "corpus.jsonl"
FRAGMENT = 8


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="fewer runs, smaller inputs")
    p.add_argument("--out", type=Path, help="also write DIR/redaction.json")
    p.add_argument("--hook-runs", type=int, default=None, help="hook invocations (default 40)")
    p.add_argument(
        "--limit", type=float, default=None, help="seconds allowed per adversarial run (default 60)"
    )
    opts = p.parse_args(argv)
    opts.hook_runs = opts.hook_runs or (15 if opts.quick else 40)
    opts.limit = opts.limit or (20.0 if opts.quick else 60.0)
    opts.transcript_mb = 1 if opts.quick else 4
    return opts


def load_corpus() -> list[dict[str, Any]]:
    try:
        lines = CORPUS.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BenchError(f"cannot read {CORPUS} ({exc.strerror})") from exc
    return [json.loads(line) for line in lines]


# -- 1. the corpus ---------------------------------------------------------------------------


def _survives(secret: str, text: str, context: str) -> bool:
    if secret in text:
        return True
    frags = {secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1)}
    return any(f in text and f not in context for f in frags)


def _masked(text: str, secrets: list[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, "\0")
    return text


def lexmem_on_corpus(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from lexmem.capture.redact import redact

    missed, damaged = [], []
    caught = total = 0
    t0 = time.perf_counter()
    outs = [redact(r["text"]).text for r in rows]
    seconds = time.perf_counter() - t0
    for row, out in zip(rows, outs, strict=True):
        if row["kind"] == "secret":
            context = _masked(row["text"], row["secret"])
            for s in row["secret"]:
                total += 1
                if _survives(s, out, context):
                    missed.append(f"{row['id']} [{row['format']}]")
                else:
                    caught += 1
        elif any(k not in out for k in row["must_keep"]):
            damaged.append(f"{row['id']} [{row['format']}]")
    return {"secrets": total, "caught": caught, "missed": len(missed),
            "missed_rows": sorted(set(missed)), "false_alarms": len(damaged),
            "false_alarm_rows": damaged, "seconds": round(seconds, 4)}  # fmt: skip


def detect_secrets_values(text: str, folder: Path) -> list[str]:
    """What ``detect-secrets scan`` reports for ``text`` as a file (default plugins)."""
    from detect_secrets.core.scan import scan_file

    path = folder / "row.txt"
    path.write_text(text, encoding="utf-8")
    return [s.secret_value for s in scan_file(str(path)) if s.secret_value]


def detect_secrets_on_corpus(rows: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    from detect_secrets.settings import default_settings

    missed, alarms = [], []
    caught = total = 0
    t0 = time.perf_counter()
    with default_settings():
        found = [detect_secrets_values(r["text"], folder) for r in rows]
    seconds = time.perf_counter() - t0
    for row, values in zip(rows, found, strict=True):
        if row["kind"] == "secret":
            for s in row["secret"]:
                total += 1
                if any(s in v for v in values):
                    caught += 1
                else:
                    missed.append(f"{row['id']} [{row['format']}]")
        elif any(v in k or k in v for v in values for k in row["must_keep"]):
            alarms.append(f"{row['id']} [{row['format']}]")
    return {"secrets": total, "caught": caught, "missed": len(missed),
            "missed_rows": sorted(set(missed)), "false_alarms": len(alarms),
            "false_alarm_rows": alarms, "seconds": round(seconds, 4)}  # fmt: skip


# -- 2. transcripts ----------------------------------------------------------------------------


def transcript(size_bytes: int, rows: list[dict[str, Any]], seed: int = 5) -> str:
    """A Claude Code session transcript as JSONL, about ``size_bytes`` long."""
    rng = random.Random(seed)
    corpus = MemoryCorpus(seed=seed)
    secrets = [r for r in rows if r["kind"] == "secret"]
    lookalikes = [r for r in rows if r["kind"] == "lookalike"]
    session = "5b1e2c3d-4f50-4a6b-8c7d-9e0f1a2b3c4d"
    lines: list[str] = []
    size = i = 0
    while size < size_bytes:
        i += 1
        memory = corpus.row(i).text
        stamp = f"2025-03-04T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z"
        base = {"sessionId": session, "cwd": "/home/dev/shop", "timestamp": stamp,
                "uuid": f"{rng.getrandbits(128):032x}", "version": "1.0.80"}  # fmt: skip
        kind = rng.random()
        if kind < 0.2:
            entry = {**base, "type": "user", "message": {"role": "user", "content": memory}}
        elif kind < 0.5:
            answer = " ".join(corpus.row(i + k).text for k in range(rng.randint(1, 4)))
            entry = {**base, "type": "assistant", "message": {
                "id": f"msg_{i:06d}", "role": "assistant", "model": "claude-sonnet-4",
                "content": [{"type": "text", "text": answer}]}}  # fmt: skip
        elif kind < 0.7:
            entry = {**base, "type": "assistant", "message": {
                "id": f"msg_{i:06d}", "role": "assistant", "content": [{
                    "type": "tool_use", "id": f"toolu_{i:06d}", "name": "Bash",
                    "input": {"command": rng.choice(("pytest -q", "git log --oneline -20",
                                                     "cat .env", "docker compose ps"))}}]}}  # fmt: skip
        else:
            # Tool output: logs and listings, a look-alike often, a secret now and then.
            body = [corpus.row(i + k).text for k in range(rng.randint(2, 8))]
            body.append(rng.choice(lookalikes)["text"])
            if rng.random() < 0.15:
                body.append(rng.choice(secrets)["text"])
            entry = {**base, "type": "user", "message": {"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": f"toolu_{i - 1:06d}",
                "content": "\n".join(body), "is_error": False}]}}  # fmt: skip
        line = json.dumps(entry, ensure_ascii=False)
        lines.append(line)
        size += len(line.encode()) + 1
    return "\n".join(lines) + "\n"


def throughput(text: str, folder: Path) -> dict[str, Any]:
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    from lexmem.capture.redact import redact

    mb = len(text.encode()) / 1e6
    lines = text.splitlines()
    t0 = time.perf_counter()
    for line in lines:
        redact(line)
    per_line = time.perf_counter() - t0
    t0 = time.perf_counter()
    redact(text)
    whole = time.perf_counter() - t0
    path = folder / "transcript.jsonl"
    path.write_text(text, encoding="utf-8")
    t0 = time.perf_counter()
    with default_settings():
        n = sum(1 for _ in scan_file(str(path)))
    ds = time.perf_counter() - t0
    return {"mb": round(mb, 3), "lines": len(lines),
            "lexmem_per_line_mb_s": round(mb / per_line, 2),
            "lexmem_whole_mb_s": round(mb / whole, 2),
            "detect_secrets_mb_s": round(mb / ds, 2), "detect_secrets_findings": n}  # fmt: skip


# -- 3. adversarial --------------------------------------------------------------------------

SHAPES = {
    "key=": "key=",
    "token:": "token:",
    "token: ": "token: ",
    "secret:": "secret:",
    "auth=": "auth=",
    "session=": "session=",
    "salt:": "salt:",
    "password=": "password=",
    "key=a": "key=a",
    "x-api-key:": "x-api-key:",
    '"password": " (unclosed)': '"password": "',
    "password is x": "password is x ",
    "Bearer ": "Bearer ",
    "-u ": "-u ",
    "Cookie: a=": "Cookie: a=",
    "://": "://",
    "-----BEGIN ": "-----BEGIN ",
    "<private> (unclosed)": "<private>",
    "base64 run": "QUJDRA",
    "escaped JSON key": '\\"password\\": \\"',
    "string literals joined": '"a" + ',
    "zero-width key": "pass\u200bword=",
    "full-width key": "password\uff1d",
    "Russian prose": "\u043f\u0430\u0440\u043e\u043b\u044c ",
    "Japanese prose": "\u30d1\u30b9\u30ef\u30fc\u30c9\u306f",
    "app password": "app password is ",
    "XML attributes": '<add key="password" value="',
    "pgpass lines": "a:5432:b:c:d\n",
    "echo lines": "$ echo $DB_PASSWORD\n",
    "table rows": "| api key |\n|---|\n",
    "YAML list": "api_tokens:\n  - ",
    "login calls": "login('a', '",
    "stdin pipes": "echo x | ",
    "colour codes": "\x1b[0m",
    "continued lines": "a\\\n",
    "psk keys": "psk: ",
}
_CHILD = r"""
import sys, time
from lexmem.capture.redact import redact
unit, n, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "budget"
text = (unit * (n // len(unit) + 1))[:n]
t0 = time.perf_counter()
redact(text, budget=budget)
print(time.perf_counter() - t0)
"""


def adversarial_once(unit: str, n: int, limit: float, budget: bool = False) -> float | None:
    """Seconds to redact ``unit`` repeated to ``n`` characters; None past ``limit``."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, unit, str(n), "budget" if budget else "all"],
            capture_output=True, text=True,
            timeout=limit, check=False, cwd=ROOT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        raise BenchError(f"adversarial run failed: {proc.stderr.strip()[-300:]}")
    return float(proc.stdout.strip())


def adversarial(limit: float) -> dict[str, Any]:
    """Every shape at 16 KB and at 1 MB, and at 1 MB under the hook's work budget; the
    worst at 1 MB again at four sizes."""
    small, large = 16 * 1024, 1024 * 1024
    shapes = {}
    for name, unit in SHAPES.items():
        s = adversarial_once(unit, small, limit)
        b = adversarial_once(unit, large, limit) if s is not None else None
        h = adversarial_once(unit, large, limit, budget=True)
        shapes[name] = {
            "16kb_seconds": round(s, 4) if s is not None else None,
            "1mb_seconds": round(b, 4) if b is not None else None,
            "1mb_budgeted_seconds": round(h, 4) if h is not None else None,
        }
        took = f"{b:.3f} s" if b is not None else f"> {limit:.0f} s"
        hook = f"{h:.3f} s" if h is not None else f"> {limit:.0f} s"
        print(f"[{NAME}] adversarial {name!r} x 1 MB: {took} (budgeted: {hook})",
              file=sys.stderr, flush=True)  # fmt: skip
    worst = max(shapes, key=lambda k: shapes[k]["1mb_seconds"] or float("inf"))
    sizes: dict[str, float | None] = {}
    for n in (16 * 1024, 64 * 1024, 256 * 1024, large):
        s = adversarial_once(SHAPES[worst], n, limit)
        sizes[str(n)] = round(s, 4) if s is not None else None
        if s is None:
            break  # a larger input will not finish either
    one_mb = shapes[worst]["1mb_seconds"]
    worst_budgeted = max(shapes, key=lambda k: shapes[k]["1mb_budgeted_seconds"] or float("inf"))
    return {"shapes": shapes, "worst_shape": worst, "worst_by_size_seconds": sizes,
            "limit_seconds": limit, "one_mb_seconds": one_mb,
            "one_mb_finished": one_mb is not None,
            "worst_budgeted_shape": worst_budgeted,
            "one_mb_budgeted_seconds": shapes[worst_budgeted]["1mb_budgeted_seconds"]}  # fmt: skip


def detect_secrets_adversarial(unit: str, folder: Path) -> float:
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    n = 1024 * 1024
    path = folder / "adversarial.txt"
    path.write_text((unit * (n // len(unit) + 1))[:n], encoding="utf-8")
    t0 = time.perf_counter()
    with default_settings():
        for _ in scan_file(str(path)):
            pass
    return time.perf_counter() - t0


# -- 4. the hook -------------------------------------------------------------------------------


def hook_latency(home: Path, repo: Path, runs: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from lexmem.config import Paths
    from lexmem.locks import FileLock

    # Byte-compiled modules as an installed package has them (see bench/capture.py).
    env = dict(os.environ, LEXMEM_HOME=str(home), PYTHONPYCACHEPREFIX=str(home / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    paths = Paths(home)
    paths.ensure()
    lock = FileLock(paths.service_lock, timeout=0)  # so no SessionStart starts a service
    lock.acquire()
    env_file = next(r["text"] for r in rows if r["format"] == "dotenv_file")
    prompt = json.dumps({
        "session_id": "bench", "transcript_path": None, "cwd": str(repo),
        "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
        "prompt": f"The deploy fails with a 401; here is the .env it reads:\n{env_file}",
    }).encode()  # fmt: skip
    hook = [str(BIN / "lexmem-hook"), "claude"]
    bare = [sys.executable, "-c", "pass"]
    times: dict[str, list[float]] = {"bare_python": [], "hook_prompt_with_secrets": []}

    def once(cmd: list[str], data: bytes) -> float:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, input=data, capture_output=True, env=env, check=False)
        ms = (time.perf_counter() - t0) * 1000
        if proc.returncode != 0:
            raise BenchError(f"{cmd[0]} exited {proc.returncode}: {proc.stderr.decode()[:200]}")
        return ms

    try:
        for _ in range(3):  # warm the file cache
            once(bare, b"")
            once(hook, prompt)
        for _ in range(runs):
            times["bare_python"].append(once(bare, b""))
            times["hook_prompt_with_secrets"].append(once(hook, prompt))
    finally:
        lock.release()
    out: dict[str, Any] = {k: percentiles(v) for k, v in times.items()}
    out["ratio_p50"] = round(
        out["hook_prompt_with_secrets"]["p50_ms"] / out["bare_python"]["p50_ms"], 2
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        rows = load_corpus()
        with bench_tempdir() as tmp:
            print(f"[{NAME}] corpus: lexmem and detect-secrets", file=sys.stderr, flush=True)
            ours = lexmem_on_corpus(rows)
            theirs = detect_secrets_on_corpus(rows, tmp)
            print(f"[{NAME}] transcripts ({opts.transcript_mb} MB)", file=sys.stderr, flush=True)
            text = transcript(opts.transcript_mb * 1_000_000, rows)
            tput = throughput(text, tmp)
            print(
                f"[{NAME}] adversarial (limit {opts.limit:.0f} s a run)",
                file=sys.stderr,
                flush=True,
            )
            adv = adversarial(opts.limit)
            adv["detect_secrets_1mb_seconds"] = round(
                detect_secrets_adversarial(SHAPES[adv["worst_shape"]], tmp), 3
            )
            print(f"[{NAME}] hook latency ({opts.hook_runs} runs)", file=sys.stderr, flush=True)
            repo = tmp / "repo"
            (repo / ".git").mkdir(parents=True)
            hooks = hook_latency(tmp / "home", repo, opts.hook_runs, rows)
        lookalikes = sum(1 for r in rows if r["kind"] == "lookalike")
        one_mb = adv["one_mb_seconds"]
        result: dict[str, Any] = {
            "benchmark": NAME,
            "machine": machine_info(),
            "corpus": {"file": str(CORPUS.relative_to(ROOT)), "secrets": ours["secrets"],
                       "lookalikes": lookalikes, "lexmem": ours, "detect_secrets": theirs},
            "throughput": tput,
            "adversarial": adv,
            "hook": hooks,
            # (adversarial_1mb_seconds: the hook's budgeted call; explicit text is read
            # whole, rule by rule, and has no target but finishing in linear time)
            "targets": {"adversarial_1mb_seconds": 0.25, "hook_p50_ratio": 1.3,
                        "lookalikes_damaged": 0},
        }  # fmt: skip
        result["summary"] = make_summary(
            "corpus secrets caught", ours["caught"], "secrets", "detect-secrets", theirs["caught"]
        )
        result["figures"] = make_figures(
            ("corpus secrets caught", ours["caught"], "secrets", "detect-secrets", theirs["caught"]),
            ("corpus secrets missed", ours["missed"], "secrets", "detect-secrets", theirs["missed"]),
            ("look-alikes damaged (false alarms)", ours["false_alarms"], "rows", "detect-secrets",
             theirs["false_alarms"]),
            ("transcript throughput, line by line", tput["lexmem_per_line_mb_s"], "MB/s",
             "detect-secrets scan", tput["detect_secrets_mb_s"]),
            ("adversarial 1 MB (worst shape)" if one_mb is not None
             else "adversarial 1 MB (worst shape): did not finish, the value is the time limit",
             one_mb if one_mb is not None else opts.limit, "s", "detect-secrets scan",
             adv["detect_secrets_1mb_seconds"]),
            ("adversarial 1 MB, hook's budgeted call (worst shape)",
             adv["one_mb_budgeted_seconds"] if adv["one_mb_budgeted_seconds"] is not None
             else opts.limit, "s", "detect-secrets scan", adv["detect_secrets_1mb_seconds"]),
            ("hook p50 (prompt with a .env)", hooks["hook_prompt_with_secrets"]["p50_ms"], "ms",
             "python -c pass p50", hooks["bare_python"]["p50_ms"]),
        )  # fmt: skip
        write_result(NAME, result, opts.out)
        worst = (f"{one_mb:.3f} s" if one_mb is not None
                 else f"did not finish in {opts.limit:.0f} s ({adv['worst_shape']!r}; "
                      f"by size {adv['worst_by_size_seconds']})")  # fmt: skip
        print(
            f"{NAME}: caught {ours['caught']}/{ours['secrets']} corpus secrets (detect-secrets "
            f"{theirs['caught']}), look-alikes damaged {ours['false_alarms']}/{lookalikes} "
            f"(detect-secrets {theirs['false_alarms']}); transcripts "
            f"{tput['lexmem_per_line_mb_s']} MB/s line by line, {tput['lexmem_whole_mb_s']} MB/s "
            f"whole (detect-secrets {tput['detect_secrets_mb_s']} MB/s); adversarial 1 MB {worst} "
            f"({adv['worst_shape']!r}; budgeted as the hook calls it: "
            f"{adv['one_mb_budgeted_seconds']} s); "
            f"hook p50 {hooks['hook_prompt_with_secrets']['p50_ms']:.0f} ms "
            f"(x{hooks['ratio_p50']} python -c pass)",
            flush=True,
        )
    except KeyboardInterrupt:
        print(f"{NAME}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, subprocess.CalledProcessError) as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
