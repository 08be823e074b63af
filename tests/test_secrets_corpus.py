"""The secrets corpus (tests/data/secrets/corpus.jsonl): redaction, and every channel end to end.

The corpus holds FAKE, format-valid secrets in the contexts an agent session holds them
(built by tests/data/make_secrets_corpus.py, which a test below re-runs), and look-alikes
that must survive. Two layers:

* :func:`~lexmem.capture.redact.redact` on each row: no secret survives, nor any 8-character
  fragment of one (a rule that stops at punctuation leaves ``[REDACTED];w0rd!Xy``); no
  look-alike is damaged.
* Each channel through which text reaches lexmem, driven as an agent or a person drives
  it, into a data folder of its own, drained by the real service: Claude Code's hook
  (a prompt, Bash output, Edit / Write / MultiEdit with their structured responses, Stop
  reading the transcript), Codex's ``notify``, ``lexmem remember``, MCP ``save_memory``
  and a watched Markdown note (a secret in its body, its heading and its file name). Then
  every file under the data folder is read raw, every version of every Lance table and
  every Lance data file is read back decoded with pylance (deleted-but-not-compacted rows
  included: Lance compresses pages, so a raw scan alone proves nothing), and the output of
  ``list``, ``search``, ``show``, ``export`` and ``audit`` is scanned. Each channel is a
  test of its own, so a failure names the channel and the corpus rows that leaked.

Rows are batched several to a call (as a pasted .env or a long tool output would be), which
keeps the whole module at a couple of minutes on two cores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from conftest import shared_model
from diskscan import texts_on_disk

from lexmem.api import Lexmem
from lexmem.capture.redact import redact
from lexmem.cli import cli
from lexmem.embedder import Embedder
from lexmem.service.watcher import MarkdownWatcher
from lexmem.service.writer import CaptureService

DATA = Path(__file__).resolve().parent / "data"
CORPUS = DATA / "secrets" / "corpus.jsonl"
ROWS: list[dict[str, Any]] = [
    json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()
]
SECRET_ROWS = [r for r in ROWS if r["kind"] == "secret"]
LOOKALIKES = [r for r in ROWS if r["kind"] == "lookalike"]

HOOK = Path(sys.executable).with_name("lexmem-hook")
LEXMEM = Path(sys.executable).with_name("lexmem")
TIMEOUT = 120.0  # a ceiling for one command on a busy machine, never a measurement
FRAGMENT = 8  # no run of this many characters of a secret may survive redaction
BATCH_CHARS = 16_000  # about what one pasted .env or one long tool output holds

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "ru", "ja", "zh", "ko")
TRICKS = (
    "fullwidth_equals", "fullwidth_colon", "nbsp", "cyrillic_key", "zero_width_key",
    "double_json_escaped", "split_string_literal", "gmail_app_password", "punctuation_value",
)  # fmt: skip
SURROUNDINGS = (  # secrets named by what surrounds them (issue 30)
    "telegram_url_path", "login_positional", "auth_tuple", "second_positional", "pem_base64",
    "base64_named", "password_stdin", "cli_ampersand", "yaml_secret_list",
    "markdown_secret_column", "backslash_continuation", "ansi_colour", "nmcli_psk",
    "printed_secret",
)  # fmt: skip


# -- the corpus itself ---------------------------------------------------------------------


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_secrets_corpus", DATA / "make_secrets_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_corpus_is_what_its_script_builds() -> None:
    gen = _generator()
    assert gen.render(gen.build()) == CORPUS.read_text(encoding="utf-8"), (
        "tests/data/secrets/corpus.jsonl is stale: run python tests/data/make_secrets_corpus.py"
    )


def test_the_corpus_covers_the_field() -> None:
    secrets = [s for r in SECRET_ROWS for s in r["secret"]]
    formats = {r["format"] for r in SECRET_ROWS}
    assert len(secrets) >= 340 and len(formats) >= 157, (len(secrets), len(formats))
    assert len(LOOKALIKES) >= 70
    assert {f"prose_{lang}" for lang in LANGUAGES} <= formats
    assert set(TRICKS) <= formats
    assert set(SURROUNDINGS) <= formats
    assert {"template_key", "kubeconfig_certificate", "surroundings_lookalike"} <= {
        r["format"] for r in LOOKALIKES
    }
    for row in SECRET_ROWS:
        assert all(s in row["text"] for s in row["secret"]), row["id"]
    for row in LOOKALIKES:
        assert all(k in row["text"] for k in row["must_keep"]), row["id"]


# -- redact() on every row -----------------------------------------------------------------


def _masked(text: str, secrets: list[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, "\0")
    return text


def surviving(row: dict[str, Any], redacted: str) -> list[str]:
    """Each secret of ``row`` still in ``redacted``, whole or as an 8-character fragment
    (fragments that the text holds anyway, outside the secret -- a key name -- do not count)."""
    context = _masked(row["text"], row["secret"])
    found = []
    for s in row["secret"]:
        if s in redacted:
            found.append(s)
            continue
        frags = {s[i : i + FRAGMENT] for i in range(len(s) - FRAGMENT + 1)}
        left = sorted(f for f in frags if f in redacted and f not in context)
        if left:
            found.append(f"{s} (fragment {left[0]!r})")
    return found


@pytest.mark.parametrize("row", SECRET_ROWS, ids=[r["id"] for r in SECRET_ROWS])
def test_redact_removes_every_secret_in_the_corpus(row: dict[str, Any]) -> None:
    out = redact(row["text"]).text
    left = surviving(row, out)
    assert not left, f"{row['format']}: survived {left}\n--- redacted text ---\n{out}"


def test_redact_leaves_the_lookalikes_intact() -> None:
    damaged = []
    for row in LOOKALIKES:
        out = redact(row["text"]).text
        lost = [k for k in row["must_keep"] if k not in out]
        if lost:
            damaged.append(f"{row['id']}: {lost[0]!r} became {out!r}")
    assert not damaged, "look-alikes damaged:\n" + "\n".join(damaged)


# -- scanning a data folder ------------------------------------------------------------------


def _unique_window(s: str, taken: str, width: int, from_end: bool) -> str | None:
    """The ``width``-character window of ``s`` nearest its start (or end) found nowhere in
    ``taken``: a prefix every token of a kind shares (``pypi-AgEIcHlwaS5vcmc``) would
    otherwise blame every row of that kind for one row's leak."""
    starts = range(len(s) - width, -1, -1) if from_end else range(len(s) - width + 1)
    for i in starts:
        window = s[i : i + width]
        if window.lower() not in taken:
            return window
    return None


def _needles() -> list[tuple[str, str, str]]:
    """(needle, row id, format), lower-cased: a 12-character window near each end of a
    secret (8 for one shorter than 24), which catch a whole secret and one cut short or
    half replaced, in the forms a JSON file writes it. A window the corpus holds
    elsewhere (a key name, another row's secret) is no evidence and is not used."""
    context = "\n".join(_masked(r["text"], r.get("secret", [])) for r in ROWS).lower()
    secrets = [(s, r) for r in SECRET_ROWS for s in r["secret"]]
    out: list[tuple[str, str, str]] = []
    for s, row in secrets:
        others = "\0".join(o for o, _ in secrets if o != s).lower()
        taken = context + "\0" + others
        # A short secret (a password) is also looked for by its first and last 8
        # characters: ``p4ss;w0rd!Xy`` redacted to ``[REDACTED];w0rd!Xy`` still leaks.
        width = FRAGMENT if len(s) < 24 else 12
        parts = [w for w in (_unique_window(s, taken, width, e) for e in (False, True)) if w]
        assert parts, f"{row['id']}: no part of {s!r} is its own"
        forms = set()
        for p in parts:
            forms |= {p, json.dumps(p)[1:-1], json.dumps(p, ensure_ascii=False)[1:-1]}
        out += [(form.lower(), row["id"], row["format"]) for form in sorted(forms)]
    return out


NEEDLES = _needles()


def find_secrets(sources: dict[str, str]) -> dict[str, set[str]]:
    """Row id -> where a secret of that row was found (case-insensitively)."""
    found: dict[str, set[str]] = {}
    lowered = {where: text.lower() for where, text in sources.items()}
    for needle, row_id, _fmt in NEEDLES:
        for where, text in lowered.items():
            if needle in text:
                found.setdefault(row_id, set()).add(where)
    return found


def on_disk(home: Path) -> dict[str, str]:
    """Every place under ``home`` a text can hide, read as tests/diskscan.py reads it: raw
    files, every Lance version, every data and index file decoded (deleted rows too)."""
    return {where: "\n".join(texts) for where, texts in texts_on_disk(home)}


# -- the channels ------------------------------------------------------------------------------


def batches(rows: list[dict[str, Any]], limit: int = BATCH_CHARS) -> list[str]:
    """The rows' texts, several to a batch, each under a heading that names the row."""
    out: list[str] = []
    current = ""
    for row in rows:
        piece = f"### {row['id']}\n{row['text']}\n\n"
        if current and len(current) + len(piece) > limit:
            out.append(current)
            current = ""
        current += piece
    if current:
        out.append(current)
    return out


@dataclass
class Session:
    """One channel's run: its data folder, its repository, and everything it printed."""

    home: Path
    repo: Path
    base: Path
    outputs: dict[str, str] = field(default_factory=dict)
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def run(
        self, name: str, cmd: list[str], stdin: bytes = b""
    ) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, cwd=self.repo, timeout=TIMEOUT, check=False
        )
        n = len(self.outputs)
        self.outputs[f"<stdout of {name} #{n}>"] = proc.stdout.decode("utf-8", "replace")
        self.outputs[f"<stderr of {name} #{n}>"] = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}: {proc.stderr[-2000:]!r}"
        return proc

    def claude(self, event: str, **fields: Any) -> None:
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.base / "transcript.jsonl"),
            "cwd": str(self.repo), "permission_mode": "acceptEdits", "hook_event_name": event,
            **fields,
        }  # fmt: skip
        self.run(f"lexmem-hook claude {event}", [str(HOOK), "claude"], json.dumps(payload).encode())

    def end(self) -> None:
        self.claude("Stop", stop_hook_active=False, last_assistant_message="Done.")
        self.claude("SessionEnd", reason="prompt_input_exit")


def _patch(old: str, new: str) -> list[dict[str, Any]]:
    lines = [f"-{ln}" for ln in old.splitlines()] + [f"+{ln}" for ln in new.splitlines()]
    return [{"oldStart": 1, "oldLines": len(old.splitlines()), "newStart": 1,
             "newLines": len(new.splitlines()), "lines": lines}]  # fmt: skip


def ch_prompt(s: Session, parts: list[str]) -> None:
    for text in parts:
        s.claude(
            "UserPromptSubmit", prompt=f"Here is what I have, please fix the deploy:\n\n{text}"
        )
    s.end()


def ch_bash(s: Session, parts: list[str]) -> None:
    for i, text in enumerate(parts):
        cmd = {"command": f"cat notes/session-{i}.txt", "description": "Show the notes"}
        s.claude("PreToolUse", tool_name="Bash", tool_use_id=f"toolu_b{i}", tool_input=cmd)
        s.claude("PostToolUse", tool_name="Bash", tool_use_id=f"toolu_b{i}", tool_input=cmd,
                 tool_response={"stdout": text, "stderr": "", "interrupted": False,
                                "isImage": False})  # fmt: skip
    s.end()


def ch_edit(s: Session, parts: list[str]) -> None:
    path = str(s.repo / "config" / "app.env")
    for i, old in enumerate(parts):
        new = parts[(i + 1) % len(parts)]
        tool_input = {"file_path": path, "old_string": old, "new_string": new, "replace_all": False}
        s.claude("PreToolUse", tool_name="Edit", tool_use_id=f"toolu_e{i}", tool_input=tool_input)
        s.claude("PostToolUse", tool_name="Edit", tool_use_id=f"toolu_e{i}", tool_input=tool_input,
                 tool_response={"filePath": path, "oldString": old, "newString": new,
                                "originalFile": old, "structuredPatch": _patch(old, new),
                                "userModified": False, "replaceAll": False})  # fmt: skip
    s.end()


def ch_write(s: Session, parts: list[str]) -> None:
    for i, text in enumerate(parts):
        path = str(s.repo / "config" / f"settings-{i}.yaml")
        tool_input = {"file_path": path, "content": text}
        s.claude("PostToolUse", tool_name="Write", tool_use_id=f"toolu_w{i}", tool_input=tool_input,
                 tool_response={"type": "create", "filePath": path, "content": text,
                                "structuredPatch": [], "originalFile": None})  # fmt: skip
    s.end()


def ch_multiedit(s: Session, parts: list[str]) -> None:
    rows = [f"### {r['id']}\n{r['text']}" for r in SECRET_ROWS]
    per = max(1, len(rows) // len(parts))
    for i in range(0, len(rows), per):
        chunk = rows[i : i + per]
        edits = [{"old_string": a, "new_string": b, "replace_all": False}
                 for a, b in zip(chunk, chunk[1:] + chunk[:1], strict=True)]  # fmt: skip
        path = str(s.repo / "deploy" / f"values-{i}.yaml")
        original = "\n\n".join(chunk)
        tool_input = {"file_path": path, "edits": edits}
        s.claude("PostToolUse", tool_name="MultiEdit", tool_use_id=f"toolu_m{i}",
                 tool_input=tool_input,
                 tool_response={"filePath": path, "edits": edits, "originalFileContents": original,
                                "structuredPatch": _patch(original, original[::-1]),
                                "userModified": False})  # fmt: skip
    s.end()


def ch_stop(s: Session, parts: list[str]) -> None:
    """Stop without ``last_assistant_message``: the hook reads the answer from the transcript."""
    transcript = s.base / "transcript.jsonl"
    lines = []
    for i, text in enumerate(parts):
        lines.append(
            {
                "type": "user",
                "sessionId": s.session_id,
                "uuid": str(uuid.uuid4()),
                "message": {"role": "user", "content": "What did you find in the config?"},
            }
        )
        lines.append({"type": "assistant", "sessionId": s.session_id, "uuid": str(uuid.uuid4()),
                      "message": {"id": f"msg_{i:04d}", "role": "assistant", "model": "claude",
                                  "content": [{"type": "text", "text": text}]}})  # fmt: skip
        transcript.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        s.claude("Stop", stop_hook_active=False)
    s.claude("SessionEnd", reason="prompt_input_exit")


def ch_codex(s: Session, parts: list[str]) -> None:
    for i, text in enumerate(parts):
        payload = {
            "type": "agent-turn-complete", "thread-id": s.session_id, "turn-id": f"turn-{i}",
            "cwd": str(s.repo), "input-messages": [f"check this config:\n{text}"],
            "last-assistant-message": parts[(i + 1) % len(parts)],
        }  # fmt: skip
        s.run("lexmem-hook codex (notify)", [str(HOOK), "codex", json.dumps(payload)])


def ch_remember(s: Session, parts: list[str]) -> None:
    for text in parts:
        # The service here holds its lock and drains only afterwards: handed over, not
        # waited for (a waiting remember would wait for as long as the service lives).
        s.run("lexmem remember", [str(LEXMEM), "remember", "--no-wait", "-", "--project",
                                  str(s.repo)], text.encode())  # fmt: skip


def ch_mcp(s: Session, parts: list[str]) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def save_all() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "lexmem", "mcp"], env=dict(os.environ),
            cwd=str(s.repo),
        )  # fmt: skip
        with open(s.base / "mcp.stderr", "a", encoding="utf-8") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(TIMEOUT):
                    await session.initialize()
                    for text in parts:
                        saved = await session.call_tool("save_memory", {"text": text})
                        assert not saved.is_error, saved.content
                        s.outputs[f"<mcp reply #{len(s.outputs)}>"] = json.dumps(
                            saved.structured_content
                        )

    anyio.run(save_all)
    s.outputs["<stderr of lexmem mcp>"] = (s.base / "mcp.stderr").read_text("utf-8", "replace")


def _row_secret(row_id: str) -> str:
    return next(r["secret"][0] for r in SECRET_ROWS if r["id"] == row_id)


# Channels that need the running service (the watcher is part of it), not a subprocess.
NOTE_NAME_ROW, NOTE_HEADING_ROW = "databricks_token-1", "github_pat_classic-2"


def notes_folder(s: Session, parts: list[str]) -> Path:
    folder = s.base / "notes"
    folder.mkdir()
    name = folder / f"staging-{_row_secret(NOTE_NAME_ROW)}.md"
    heading = f"# Staging access ({_row_secret(NOTE_HEADING_ROW)})\n\n"
    name.write_text(heading + "\n".join(parts), encoding="utf-8")
    return folder


CHANNELS: dict[str, Callable[[Session, list[str]], None] | None] = {
    "claude_prompt": ch_prompt,
    "claude_bash_output": ch_bash,
    "claude_edit": ch_edit,
    "claude_write": ch_write,
    "claude_multiedit": ch_multiedit,
    "claude_stop_transcript": ch_stop,
    "codex_notify": ch_codex,
    "lexmem_remember": ch_remember,
    "mcp_save_memory": ch_mcp,
    "markdown_note": None,  # the service's own watcher reads it (below)
}


def cli_outputs(s: Session, embedder: Embedder) -> None:
    """What a person (or a script) reads back: list, search, show, export, audit."""
    runner = CliRunner()

    def invoke(*args: str) -> str:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, f"lexmem {' '.join(args)}: {result.output}"
        s.outputs[f"<lexmem {' '.join(args)[:60]}>"] = result.output
        return result.output

    with shared_model(embedder):
        # Tool output may well make no memory (the extractor keeps what is worth keeping):
        # an empty list is no failure, and the canary check below proves the channel ran.
        listed = json.loads(invoke("list", "--json", "--status", "any", "--limit", "100000"))
        for query in ("password", "token api key", "deploy staging config", "secret"):
            invoke("search", query, "--json", "--status", "any")
        for memory in listed:
            invoke("show", memory["id"], "--json")
        export = s.base / "export"
        invoke("export", str(export), "--json")
        for path in sorted(export.rglob("*")):
            if path.is_file():
                s.outputs[f"<export {path.name}>"] = path.read_text("utf-8", "replace")
        invoke("audit", "--json", "--limit", "100000")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "work" / "shop-api"
    (r / ".git").mkdir(parents=True)
    return r.resolve()


def _report(found: dict[str, set[str]]) -> str:
    fmt = {r["id"]: r["format"] for r in SECRET_ROWS}
    lines = [f"{len(found)} corpus rows leaked:"]
    for row_id in sorted(found):
        places = sorted(found[row_id])
        shown = ", ".join(places[:3]) + (f" (+{len(places) - 3} more)" if len(places) > 3 else "")
        lines.append(f"  {row_id} [{fmt[row_id]}]: {shown}")
    return "\n".join(lines)


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_no_corpus_secret_reaches_disk_or_output(
    channel: str, repo: Path, data_home: Path, embedder: Embedder, tmp_path: Path
) -> None:
    s = Session(home=data_home, repo=repo, base=tmp_path)
    parts = batches(SECRET_ROWS)
    lm = Lexmem.open(data_home, embedder=embedder)
    svc = CaptureService(lm)
    # The service holds its lock while the agent works, as `lexmem serve` would: producers
    # queue into the inbox and a SessionStart would start no second service.
    svc.acquire()
    try:
        produce = CHANNELS[channel]
        if produce is not None:
            produce(s, parts)
            inbox = {f"<inbox before drain: {p.name}>": p.read_text("utf-8", "replace")
                     for p in sorted((data_home / "inbox").glob("*.json"))}  # fmt: skip
            assert inbox, f"{channel}: nothing reached the inbox"
            s.outputs.update(inbox)
            svc.drain()
        else:
            MarkdownWatcher(svc, [str(notes_folder(s, parts))]).scan_all()
        svc.abandon_idle()
        svc.drain()
    finally:
        svc.release()  # flushes the digests: they are files under the data folder too
        lm.close()
    cli_outputs(s, embedder)

    sources = {**on_disk(data_home), **s.outputs}
    # The channel carried the corpus somewhere (so a clean scan means redacted, not absent):
    # its row headings are no secrets and reach the inbox or the store.
    everything = "\n".join(sources.values())
    assert any(f"### {r['id']}" in everything for r in SECRET_ROWS), f"{channel} captured nothing"
    found = find_secrets(sources)
    assert not found, f"{channel}: " + _report(found)


def test_the_scan_is_not_blind(tmp_path: Path) -> None:
    """The checks above find a planted secret raw, in a decoded Lance version, and in a
    deleted Lance row that only a data file still holds."""
    import lance
    import pyarrow as pa

    row = next(r for r in SECRET_ROWS if r["format"] == "stripe_secret_key")
    secret = row["secret"][0]
    path = tmp_path / "store" / "t.lance"
    table = pa.table({"id": ["a", "b"], "content": ["harmless", f"key {secret} here"]})
    lance.write_dataset(table, str(path))
    ds = lance.dataset(str(path))
    ds.delete("id = 'b'")
    decoded = on_disk(tmp_path)
    latest = max(v["version"] for v in lance.dataset(str(path)).versions())
    assert secret not in decoded[f"store/t.lance version {latest}: rows"]
    assert row["id"] in find_secrets(decoded)
    assert row["id"] in find_secrets({k: v for k, v in decoded.items() if "decoded" in k})
    assert row["id"] in find_secrets({"x": f"prefix {secret.upper()} suffix"})
    assert find_secrets({"x": "nothing here"}) == {}
