"""The ``lexmem`` command line, end to end: real store, real model, real files.

Most tests drive :data:`lexmem.cli.cli` in-process through click's ``CliRunner``
(the autouse fixture in conftest gives each test a fresh ``LEXMEM_HOME``); a few
run the installed console script as a subprocess, as a user's shell would.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import shared_model

from lexmem import __version__, wire
from lexmem import cli as cli_module
from lexmem.api import Lexmem
from lexmem.cli import cells, cli, clip
from lexmem.config import resolve_paths
from lexmem.embedder import Embedder
from lexmem.models import MemoryContext, MemoryType
from lexmem.service.readers import ReaderServer

COMMANDS = [
    "status", "remember", "search", "show", "list", "pin", "unpin", "archive", "restore",
    "supersede", "edit", "forget", "link", "classify", "stats", "export", "import", "decay",
    "reembed", "doctor", "optimize", "serve", "ingest", "audit", "optout", "watch", "sessions",
]  # fmt: skip

MEMORY_FIELDS = {
    "id", "content", "type", "title", "created_at", "updated_at", "last_accessed_at",
    "access_count", "salience", "importance", "pinned", "status", "superseded_by", "source",
    "project", "chunk", "confidence", "classification_method",
}  # fmt: skip


# -- helpers ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _shared_model(embedder: Embedder) -> Iterator[None]:
    # The console-script tests below load the model the real way, in their own process.
    with shared_model(embedder):
        yield


# The suite runs twice: once with every command run here, once with the read commands
# answered by a service over its reader socket, as they are while a service runs.
VIA: dict[str, str] = {"mode": "local"}


@pytest.fixture(autouse=True, params=["local", "service"])
def _via(request: pytest.FixtureRequest) -> Iterator[None]:
    VIA["mode"] = request.param
    yield
    VIA["mode"] = "local"


@dataclass
class Answered:
    """What a read answered over the reader socket printed (a ``Result``'s fields)."""

    stdout: str
    stderr: str
    exit_code: int

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def via_service(args: list[str]) -> Answered | None:
    """``args`` answered by a reader server with an open core, over the real socket."""
    paths = resolve_paths()
    if not paths.store.is_dir():
        return None  # no data folder: no service could run on it
    lm = Lexmem.open(paths.home)
    try:
        with ReaderServer(paths, cli_module.reader_handlers(lm)):
            out, err = io.StringIO(), io.StringIO()
            code = wire.ask_cli(paths, args, stdout=out, stderr=err)
    finally:
        lm.close()
    assert code is not None, f"the reader socket did not answer lexmem {' '.join(args)}"
    return Answered(out.getvalue(), err.getvalue(), code)


def run(*args: str, input: str | None = None, code: int = 0) -> Result | Answered:
    """Invoke the CLI in-process (or, for a read, through a service) and check the exit code."""
    answered = None
    if VIA["mode"] == "service" and args and args[0] in wire.READ_COMMANDS and input is None:
        answered = via_service(list(args))
    result = answered or CliRunner().invoke(
        cli, list(args), input=input, prog_name="lexmem", catch_exceptions=False
    )
    assert result.exit_code == code, (
        f"lexmem {' '.join(args)} exited {result.exit_code}, not {code}\n"
        f"stdout: {result.stdout}\nstderr: {result.stderr}"
    )
    return result


def run_json(*args: str, input: str | None = None) -> Any:
    return json.loads(run(*args, "--json", input=input).stdout)


def error(*args: str, code: int, input: str | None = None) -> str:
    """Run a failing command: exactly one line on stderr, nothing on stdout; the message."""
    result = run(*args, input=input, code=code)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lexmem: error: "), lines[0]
    assert result.stdout == ""
    return lines[0]


def remember(text: str, *options: str) -> str:
    """Remember ``text`` and return the new memory's full id."""
    data = run_json("remember", text, *options)
    assert len(data["ids"]) == 1
    return str(data["ids"][0])


def ids_of(hits_or_memories: list[dict[str, Any]]) -> list[str]:
    return [h["id"] for h in hits_or_memories]


def search_ids(query: str, *options: str) -> list[str]:
    return ids_of(run_json("search", query, *options)["hits"])


def lexmem_script() -> str:
    """The installed console script: next to this interpreter, else on PATH."""
    sibling = Path(sys.executable).parent / ("lexmem.exe" if os.name == "nt" else "lexmem")
    if sibling.exists():
        return str(sibling)
    found = shutil.which("lexmem")
    if found is None:  # pragma: no cover - the package is installed in the venv
        pytest.skip("the lexmem console script is not installed")
    return found


def run_script(
    *args: str, home: Path, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LEXMEM_HOME": str(home)}
    env.pop("LEXMEM_DEBUG", None)
    return subprocess.run(
        [lexmem_script(), *args],
        check=False,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


LONG_TEXT = " ".join(
    f"Paragraph {i}: the payment service retries failed webhooks with exponential backoff, "
    f"records every attempt in the ledger table, and alerts the on-call engineer after "
    f"the fifth failure in a row."
    for i in range(30)
)


# -- discovery ------------------------------------------------------------------


def test_the_console_script_adds_the_desktop_app(
    data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)  # a terminal with no display at all
    top = run_script("--help", home=data_home)
    assert "  app  " in top.stdout and "Open the desktop app" in top.stdout
    no_display = run_script("app", home=data_home)
    assert no_display.returncode == 1
    assert no_display.stderr.strip().splitlines() == [
        "lexmem: error: no display to open the app on (DISPLAY and WAYLAND_DISPLAY are unset); "
        "`lexmem serve` captures without one"
    ]
    assert "0 active, 0 archived" in run_script(home=data_home).stdout  # no display: a status


def test_version_help_and_status(data_home: Path) -> None:
    assert run("--version").stdout.strip() == f"lexmem, version {__version__}"
    top = run("--help").stdout
    for name in COMMANDS:
        assert name in top
        sub = run(name, "--help").stdout
        assert sub.startswith(f"Usage: lexmem {name}")
        assert "Pinned the" not in sub and "Archived the" not in sub  # imperative help
    assert "Usage: lexmem show [OPTIONS] ID" in run("show", "-h").stdout

    first = run().stdout  # a brand-new user types `lexmem`
    assert str(data_home) in first
    assert "0 active, 0 archived, 0 superseded" in first
    assert "lexmem remember" in first
    status = run_json("status")
    assert status["version"] == __version__
    assert status["data_folder"] == str(data_home)
    assert status["memories"] == {"active": 0, "archived": 0, "superseded": 0}
    assert status["embedding_model"]
    assert run("list").stdout.startswith("No memories yet")


# -- remember -------------------------------------------------------------------------


def test_remember_types_options_and_stdin() -> None:
    out = run("remember", "The project uses PostgreSQL for data storage", "--project", "shop")
    assert out.stdout.startswith("Remembered ")
    assert "as semantic (rule-based," in out.stdout

    data = run_json(
        "remember", "To deploy, first run 'npm build', then 'npm deploy'",
        "--project", "shop", "--pin", "--title", "  Deploying the shop  ",
    )  # fmt: skip
    assert set(data) == {"ids", "queued", "classification", "memories"} and data["queued"] is False
    assert set(data["classification"]) == {"type", "confidence", "method", "rationale"}
    assert data["classification"]["type"] == "procedural"
    assert data["classification"]["method"] == "rule_based"
    (m,) = data["memories"]
    assert set(m) >= MEMORY_FIELDS
    assert "embedding" not in m
    assert m["id"] == data["ids"][0]
    assert (m["type"], m["project"], m["pinned"], m["title"]) == (
        "procedural", "shop", True, "Deploying the shop",
    )  # fmt: skip

    given = run_json("remember", "I like tea", "--type", "episodic")
    assert given["memories"][0]["type"] == "episodic"
    assert given["classification"]["method"] == "explicit"
    assert "(given)" in run("remember", "Tabs, not spaces", "--type", "semantic").stdout

    piped = run_json("remember", "-", input="Sessions are cached in Redis\n")
    assert piped["memories"][0]["content"] == "Sessions are cached in Redis"
    implicit = run_json("remember", input="Piped without a dash")  # stdin is not a terminal
    assert implicit["memories"][0]["content"] == "Piped without a dash"

    assert "empty" in error("remember", "", code=2)
    assert "empty" in error("remember", "   ", code=2)
    assert "empty" in error("remember", "-", input="  \n", code=2)
    assert "title is empty" in error("remember", "some text", "--title", " ", code=2)
    assert "invalid value for '--type'" in error("remember", "x", "--type", "nope", code=2)
    assert len(run_json("list", "--status", "any")) == 6


def test_long_text_becomes_linked_chunks() -> None:
    assert len(LONG_TEXT) > 5000
    data = run_json("remember", "-", "--project", "payments", input=LONG_TEXT)
    n = len(data["ids"])
    assert n > 1
    assert [m["chunk"]["chunk_index"] for m in data["memories"]] == list(range(n))
    assert all(m["chunk"]["total_chunks"] == n for m in data["memories"])
    assert data["memories"][0]["title"].endswith(f"(1/{n})")
    assert all(m["project"] == "payments" for m in data["memories"])
    assert "".join(m["content"] for m in data["memories"]).count("Paragraph 29:") >= 1
    listed = run("list", "--project", "payments").stdout
    assert len(listed.splitlines()) == n + 1

    first, second = data["ids"][:2]
    shown = run("show", first[:8]).stdout
    assert f"chunk      1 of {n} of a long text" in shown
    assert f"continues ← {second[:8]}" in shown
    detail = run_json("show", second)
    assert {"from": second, "to": first, "type": "continues"}.items() <= detail["links_from"][
        0
    ].items()


# -- search -------------------------------------------------------------------------------


def test_search_filters_modes_why_and_json() -> None:
    db = remember("The project uses PostgreSQL for data storage", "--project", "shop")
    deploy = remember("To deploy, first run 'npm build', then 'npm deploy'", "--project", "shop")
    bug = remember("Yesterday we fixed the login bug by clearing the session cache")
    remember("The office plants need water on Mondays", "--project", "office")

    table = run("search", "PostgreSQL", "database", "-n", "3").stdout.splitlines()
    assert table[0].split() == ["ID", "SCORE", "TYPE", "PROJECT", "TITLE"]
    assert table[1].startswith(db[:8])

    data = run_json("search", "PostgreSQL")
    assert set(data) == {"query", "mode", "timings_ms", "hits"}
    assert (data["query"], data["mode"]) == ("PostgreSQL", "hybrid")
    hit = data["hits"][0]
    assert {"id", "score", "relevance", "bm25_rank", "vector_rank", "similarity", "salience",
            "recency", "pinned", "why", "memory"} <= set(hit)  # fmt: skip
    assert hit["id"] == db and hit["bm25_rank"] == 1 and "keywords #1" in hit["why"]
    assert set(hit["memory"]) >= MEMORY_FIELDS

    assert search_ids("deploy", "--mode", "bm25") == [deploy]
    bm25 = run_json("search", "deploy", "--mode", "bm25")
    assert bm25["mode"] == "bm25" and bm25["hits"][0]["vector_rank"] is None
    vector = run_json("search", "how do I ship a release", "--mode", "vector", "-n", "2")
    # Only memories close enough in meaning are returned (min_similarity), at most -n of them.
    assert vector["mode"] == "vector" and 1 <= len(vector["hits"]) <= 2
    assert all(h["bm25_rank"] is None for h in vector["hits"])

    assert set(search_ids("project", "--project", "shop")) <= {db, deploy}
    assert search_ids("login", "--type", "episodic") == [bug]
    assert search_ids("login", "--type", "procedural", "--mode", "bm25") == []
    assert search_ids("login", "--source", "explicit", "--mode", "bm25") == [bug]
    assert search_ids("PostgreSQL", "--since", "2000-01-01", "--until", "2999-01-01")[0] == db
    assert search_ids("PostgreSQL", "--since", "2999-01-01T09:00") == []
    assert run("search", "PostgreSQL", "--until", "2000-01-01").stdout == "No memories match.\n"
    assert run("search", "zzqqxx", "--mode", "bm25").stdout == "No memories match.\n"

    why = run("search", "deploy", "--project", "shop", "--why").stdout
    assert f"{deploy[:8]}  keywords #1, meaning #1" in why

    assert "--since" in error("search", "x", "--since", "yesterday", code=2)
    assert "--until" in error("search", "x", "--until", "2026-13-45", code=2)
    assert "not before --until" in error(
        "search", "x", "--since", "2026-02-01", "--until", "2026-01-01", code=2
    )
    assert "query is empty" in error("search", "  ", code=2)
    assert "missing argument 'QUERY...'" in error("search", code=2)
    assert "--limit" in error("search", "x", "--limit", "0", code=2)
    assert "--mode" in error("search", "x", "--mode", "magic", code=2)


# -- show and ids -------------------------------------------------------------------------------


def test_show_and_id_prefixes() -> None:
    mid = remember("Our CI runs on GitHub Actions", "--project", "infra", "--title", "CI")
    text = run("show", mid[:4]).stdout
    assert text.startswith("CI\n\nOur CI runs on GitHub Actions\n")
    for line in (f"  id         {mid}", "  status     active", "  project    infra",
                 "  source     explicit", "  accessed   0 times"):  # fmt: skip
        assert line in text
    assert run("show", mid.upper()[:8]).stdout == text
    assert run("show", f"  {mid}  ").stdout == text

    data = run_json("show", mid[:6])
    assert data["id"] == mid and data["title"] == "CI"
    assert {"links_from", "links_to", "superseded_by_chain", "supersedes_chain",
            "confidence_history"} <= set(data)  # fmt: skip
    assert len(data["confidence_history"]) == 1

    assert "no memory with id ffff0000" in error("show", "ffff0000", code=3)
    assert "no memory" in error("show", "00000000-0000-0000-0000-000000000000", code=3)
    assert "not a memory id" in error("show", "zzzz", code=2)
    assert "at least 4 characters" in error("show", "ab", code=2)
    assert "missing argument 'ID'" in error("show", code=2)
    for args in (["pin"], ["unpin"], ["archive"], ["restore"], ["forget", "--yes"],
                 ["edit", "--title", "x"], ["link", mid, "--type", "x"]):  # fmt: skip
        assert "no memory with id ffff0000" in error(*args, "ffff0000", code=3)


def test_ambiguous_prefix_is_bad_input(data_home: Path, embedder: Embedder) -> None:
    twins = {"abcd0000-0000-4000-8000-000000000001": "first twin",
             "abcd1111-0000-4000-8000-000000000002": "second twin"}  # fmt: skip
    with Lexmem.open(data_home, embedder=embedder) as core:
        for mid, text in twins.items():
            (m,) = core.encoder.encode_with_type(text, MemoryType.SEMANTIC, MemoryContext())
            core.store.store_many([m.replace(id=mid)])
    msg = error("show", "abcd", code=2)
    assert msg == "lexmem: error: id prefix abcd matches more than one memory; give more of it"
    assert "matches more than one memory" in error("pin", "ABCD", code=2)
    assert run_json("show", "abcd0")["content"] == "first twin"
    assert run_json("show", "abcd0000-0000-4000-8000-00000000000")["content"] == "first twin"
    assert run("pin", "abcd1").stdout == "Pinned abcd1111.\n"


# -- list -------------------------------------------------------------------------------------


def test_list_filters_sort_and_paging() -> None:
    a = remember("Alpha fact about the billing system", "--project", "billing")
    b = remember("Beta: how to rotate the API keys, step by step", "--type", "procedural")
    c = remember("Gamma happened yesterday at the standup", "--type", "episodic", "--pin")

    assert ids_of(run_json("list")) == [c, b, a]  # newest first
    assert ids_of(run_json("list", "--sort", "title")) == [a, b, c]
    assert ids_of(run_json("list", "--project", "billing")) == [a]
    assert ids_of(run_json("list", "--type", "procedural")) == [b]
    assert ids_of(run_json("list", "--source", "explicit")) == [c, b, a]
    assert ids_of(run_json("list", "--pinned")) == [c]
    assert ids_of(run_json("list", "--not-pinned")) == [b, a]
    assert ids_of(run_json("list", "--since", "2000-01-01", "--until", "2999-12-31")) == [c, b, a]
    assert run_json("list", "--since", "2999-01-01") == []
    for sort in ("salience", "accessed", "updated"):
        assert sorted(ids_of(run_json("list", "--sort", sort))) == sorted([a, b, c])

    page1 = run("list", "-n", "2").stdout.splitlines()
    assert page1[0].split() == ["ID", "CREATED", "TYPE", "STATUS", "SAL", "PROJECT", "TITLE"]
    assert [line[:8] for line in page1[1:3]] == [c[:8], b[:8]]
    assert "📌 Gamma happened" in page1[1]
    # Columns line up: every row's TITLE starts under the header's.
    start = page1[0].index("TITLE")
    assert cells(page1[2][:start]) == start and page1[2][start:].startswith("Beta")
    assert page1[3] == "… 1 more (use --offset 2)"
    page2 = run("list", "-n", "2", "--offset", "2").stdout.splitlines()
    assert len(page2) == 2 and page2[1].startswith(a[:8])
    assert run("list", "--offset", "5").stdout == "No more memories.\n"
    assert run("list", "--project", "nope").stdout == "No memories match.\n"

    assert "--since" in error("list", "--since", "31/01/2026", code=2)
    assert "--limit" in error("list", "--limit", "0", code=2)
    assert "--offset" in error("list", "--offset", "-1", code=2)
    assert "--sort" in error("list", "--sort", "size", code=2)


# -- a memory's life ------------------------------------------------------------------------------


def test_pin_unpin_archive_restore() -> None:
    mid = remember("The staging database lives on db-staging-01")
    other = remember("Lunch is at noon")

    assert run("pin", mid[:5]).stdout == f"Pinned {mid[:8]}.\n"
    assert run_json("show", mid)["pinned"] is True
    assert ids_of(run_json("list", "--pinned")) == [mid]
    data = run_json("unpin", mid[:5])
    assert data["id"] == mid and data["changes"]["updated"] == [mid]
    assert run_json("show", mid)["pinned"] is False

    assert mid in search_ids("staging database")
    assert run("archive", mid[:8]).stdout == f"Archived {mid[:8]}.\n"
    assert mid not in search_ids("staging database")
    assert mid not in ids_of(run_json("list"))
    assert ids_of(run_json("list", "--status", "archived")) == [mid]
    assert mid in search_ids("staging database", "--status", "archived")
    table = run("search", "staging database", "--status", "any").stdout
    assert "STATUS" in table.splitlines()[0] and "archived" in table
    assert "1 active, 1 archived" in run().stdout

    assert run_json("restore", mid)["changes"]["updated"] == [mid]
    assert run_json("show", mid)["status"] == "active"
    assert search_ids("staging database")[0] == mid
    assert set(ids_of(run_json("list"))) == {mid, other}


def test_supersede_by_and_with() -> None:
    old = remember("The project uses PostgreSQL 14", "--project", "shop")
    out = run("supersede", old[:8], "--with", "The project uses PostgreSQL 16").stdout
    assert out.startswith(f"{old[:8]} is superseded by ")
    new = run_json("list", "--project", "shop")[0]
    assert new["content"] == "The project uses PostgreSQL 16"
    assert new["project"] == "shop"  # inherited from the old memory
    assert out.strip().endswith(f"{new['id'][:8]}.")

    hits = search_ids("PostgreSQL version")
    assert new["id"] in hits and old not in hits
    assert old in search_ids("PostgreSQL version", "--status", "superseded")
    shown = run("show", old[:8]).stdout
    assert f"status     superseded by {new['id'][:8]}" in shown
    assert f"chain      [{old[:8]}] → {new['id'][:8]}" in shown
    old_detail = run_json("show", old)
    assert old_detail["status"] == "superseded"
    assert old_detail["superseded_by"] == new["id"]
    assert old_detail["superseded_by_chain"] == [new["id"]]
    assert run_json("show", new["id"])["supersedes_chain"] == [old]

    newest = remember("The project uses PostgreSQL 17", "--project", "shop")
    data = run_json("supersede", new["id"][:8], "--by", newest[:8])
    assert (data["superseded"], data["by"]) == (new["id"], newest)
    chain = run("show", new["id"]).stdout
    assert f"chain      {old[:8]} → [{new['id'][:8]}] → {newest[:8]}" in chain

    via_stdin = run_json("supersede", newest, "--with", "-", input="PostgreSQL 18 it is\n")
    assert run_json("show", via_stdin["by"])["content"] == "PostgreSQL 18 it is"

    other = remember("Unrelated note about lunch")
    both = error("supersede", other, "--by", old, "--with", "text", code=2)
    assert "exactly one of --by ID" in both
    assert "exactly one of --by ID" in error("supersede", other, code=2)
    assert "empty" in error("supersede", other, "--with", "  ", code=2)
    assert "itself" in error("supersede", other, "--by", other, code=2)
    assert "cycle" in error("supersede", via_stdin["by"], "--by", old, code=2)
    assert "no memory" in error("supersede", other, "--by", "ffff0000", code=3)
    assert "no memory" in error("supersede", "ffff0000", "--with", "text", code=3)


def test_edit_options_and_editor(monkeypatch: pytest.MonkeyPatch) -> None:
    mid = remember("Sessions are cached in Redis", "--project", "web")
    assert run("edit", mid[:8], "--text", "Sessions are cached in Redis 7").stdout == (
        f"Updated {mid[:8]}.\n"
    )
    m = run_json("show", mid)
    assert m["content"] == "Sessions are cached in Redis 7"
    assert m["title"] == "Sessions are cached in Redis 7"  # a derived title follows the text
    assert m["updated_at"] is not None

    data = run_json("edit", mid, "--title", "Redis sessions", "--type", "procedural",
                    "--project", "infra", "--salience", "0.9")  # fmt: skip
    assert data["id"] == mid and data["changes"]["updated"] == [mid]
    m = run_json("show", mid)
    assert (m["title"], m["type"], m["project"], m["salience"]) == (
        "Redis sessions", "procedural", "infra", 0.9,
    )  # fmt: skip
    run("edit", mid, "--project", "")
    assert run_json("show", mid)["project"] is None
    assert mid in search_ids("Redis 7", "--mode", "bm25")

    assert run("edit", mid, "--text", "Sessions are cached in Redis 7").stdout == (
        "Nothing changed.\n"
    )
    run("edit", mid, "--text", "-", input="Sessions live in Valkey now\n")
    assert run_json("show", mid)["content"] == "Sessions live in Valkey now"

    assert "content is empty" in error("edit", mid, "--text", "  ", code=2)
    assert "title is empty" in error("edit", mid, "--title", "", code=2)
    assert "--salience" in error("edit", mid, "--salience", "2", code=2)
    assert "--type" in error("edit", mid, "--type", "weird", code=2)
    assert "no terminal for an editor" in error("edit", mid, code=2)

    # With a terminal and no option, the content opens in $EDITOR.
    monkeypatch.setattr(cli_module, "interactive", lambda: True)
    monkeypatch.setattr("click.edit", lambda text, **kw: text.replace("Valkey", "KeyDB"))
    assert run("edit", mid[:8]).stdout == f"Updated {mid[:8]}.\n"
    assert run_json("show", mid)["content"] == "Sessions live in KeyDB now"
    monkeypatch.setattr("click.edit", lambda text, **kw: None)  # closed without saving
    assert run("edit", mid[:8]).stdout == "Nothing changed.\n"


def test_forget(monkeypatch: pytest.MonkeyPatch) -> None:
    keep = remember("Keep this one")
    gone = remember("Forget this one")
    old = remember("An older version")
    run("supersede", old, "--by", gone)
    run("link", keep, gone, "--type", "relates_to")

    msg = error("forget", gone[:8], code=2)  # no --yes, and standard input is not a terminal
    assert "pass --yes" in msg
    assert run_json("show", gone)["id"] == gone

    assert run("forget", gone[:8], "--yes").stdout == (
        f"Forgot {gone[:8]}: erased from the data folder. Backups made before now still hold "
        "it (lexmem backup --list shows them).\n"
    )
    assert "no memory" in error("show", gone, code=3)
    assert "no memory" in error("forget", gone, "--yes", code=3)
    assert run_json("show", keep)["links_from"] == []  # its links went with it
    assert "its replacement was forgotten" in run("show", old).stdout

    monkeypatch.setattr(cli_module, "interactive", lambda: True)
    declined = run("forget", keep[:8], input="n\n", code=1)
    assert "Forget " in declined.stderr and "for good?" in declined.stderr
    assert "Backups made before now still hold it" in declined.stderr  # said before asking
    assert declined.stderr.splitlines()[-1] == (f"lexmem: kept {keep[:8]}; nothing was forgotten")
    assert declined.stdout == ""
    assert run_json("show", keep)["id"] == keep
    data = run_json("forget", keep[:8], input="y\n")
    assert data["id"] == keep and data["changes"]["deleted"] == [keep]
    assert "no memory" in error("show", keep, code=3)


def test_link() -> None:
    a = remember("The checkout service calls the payment service")
    b = remember("The payment service talks to Stripe")
    assert run("link", a[:8], b[:8], "--type", "depends_on").stdout == (
        f"Linked {a[:8]} —depends_on→ {b[:8]} (0.50).\n"
    )
    data = run_json("link", a, b, "--type", " Depends On ", "--strength", "0.9")
    assert (data["from"], data["to"], data["type"], data["strength"]) == (
        a, b, "depends_on", 0.9,
    )  # fmt: skip
    assert data["changes"]["links"] is True
    links = run_json("show", a)["links_from"]
    assert len(links) == 1 and (links[0]["type"], links[0]["strength"]) == ("depends_on", 0.9)
    assert f"link       depends_on ← {a[:8]} (0.90)" in run("show", b).stdout
    assert "depends_on 1" in run("stats").stdout

    assert "itself" in error("link", a, a, "--type", "x", code=2)
    assert "--type is empty" in error("link", a, b, "--type", "  ", code=2)
    assert "missing option '--type'" in error("link", a, b, code=2)
    assert "--strength" in error("link", a, b, "--type", "x", "--strength", "1.5", code=2)
    assert "no memory" in error("link", a, "ffff0000", "--type", "x", code=3)


def test_classify() -> None:
    out = run("classify", "To install, run pip install lexmem").stdout
    assert out.startswith("procedural (") and "rule-based" in out
    data = run_json("classify", "Yesterday", "the", "build", "broke")
    assert set(data) == {"type", "confidence", "method", "rationale"}
    assert data["type"] == "episodic" and data["method"] == "rule_based"
    assert run_json("classify", "-", input="Python is a programming language\n")["type"] == (
        "semantic"
    )
    assert "empty" in error("classify", "", code=2)
    assert "empty" in error("classify", input="", code=2)


def test_stats_decay_reembed_and_doctor(data_home: Path) -> None:
    a = remember("The API gateway is Kong", "--project", "infra")
    b = remember("Always run the linter before pushing", "--pin")
    remember("Yesterday the deploy failed twice")
    remember("Python is the main language", "--project", "infra")
    run("link", a, b, "--type", "relates_to")
    run("search", "gateway")

    stats = run_json("stats")
    assert {"memories", "by_status", "by_type", "by_source", "top_projects", "pinned",
            "mean_salience", "links", "links_by_type", "accesses", "oldest", "newest",
            "disk_bytes", "data_folder", "embedding_model"} <= set(stats)  # fmt: skip
    n = stats["memories"]
    assert n > 3 and stats["by_status"] == {"active": n}
    assert stats["pinned"] == 1 and stats["links_by_type"]["relates_to"] == 1
    assert stats["accesses"] >= 1 and stats["data_folder"] == str(data_home)
    text = run("stats").stdout
    assert text.startswith(f"memories     {n}  ({n} active)")
    for label in ("types", "sources", "projects", "pinned", "links", "on disk", "model"):
        assert f"\n{label:<13}" in text or text.startswith(label)

    assert run("decay", "--factor", "0.5").stdout == f"Decayed the salience of {n - 1} memories.\n"
    assert run_json("show", a)["salience"] == pytest.approx(0.25)
    assert run_json("show", b)["salience"] == pytest.approx(0.5)  # pinned: never decays
    assert run_json("decay") == {"decayed": n - 1}
    assert run_json("show", a)["salience"] == pytest.approx(0.245)
    assert "--factor" in error("decay", "--factor", "0", code=2)
    assert "--factor" in error("decay", "--factor", "1.5", code=2)

    reembedded = run("reembed")
    assert reembedded.stdout.startswith(f"Re-embedded {n} memories with ")
    assert reembedded.stderr == ""  # no progress bar without a terminal
    assert run_json("reembed") == {"reembedded": n}
    assert search_ids("which gateway do we use")[0] == a

    doctor = run("doctor").stdout.splitlines()
    names = ["data folder", "permissions", "settings", "model", "store", "keyring", "services",
             "claude user", "claude project", "codex", "service", "hook"]  # fmt: skip
    assert [line[6:21].strip() for line in doctor] == names
    assert all(line[:4] in ("ok  ", "warn") for line in doctor)
    checks = run_json("doctor")
    assert [c["name"] for c in checks] == names
    assert all(set(c) == {"name", "state", "detail"} for c in checks)
    assert {c["name"]: c["state"] for c in checks}["store"] == "ok"
    if os.name == "posix":
        loose = data_home / "settings-backup.txt"
        loose.write_text("x")
        loose.chmod(0o644)
        assert "FAIL  permissions" in run("doctor", code=1).stdout
        assert "tightened 1 " in run("doctor", "--fix").stdout
        assert loose.stat().st_mode & 0o077 == 0


# -- export and import ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rich_home(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """A data folder with one of everything: chunks, links, pins, archive, supersede, edits."""
    with shared_model(embedder):
        return _make_rich_home(tmp_path_factory.mktemp("rich") / "lexmem")


def _make_rich_home(home: Path) -> Path:
    h = ("--home", str(home))

    def make(*args: str, input: str | None = None) -> Any:
        return run_json(*h, *args, input=input)

    db = make("remember", "The project uses PostgreSQL for data storage", "--project", "shop")
    dep = make("remember", "To deploy, run 'make release'", "--project", "shop", "--pin")
    make("remember", "-", "--project", "docs", input=LONG_TEXT)
    ep = make("remember", "Yesterday the build broke, O'Brien fixed it; \"quotes\", commas",
              "--type", "episodic")  # fmt: skip
    uni = make("remember", "Ünïcødé, emoji 📌 and\nnew lines\tand tabs", "--title", "Odd text")
    make("link", db["ids"][0], dep["ids"][0], "--type", "relates_to", "--strength", "0.7")
    make("supersede", db["ids"][0], "--with", "The project uses PostgreSQL 16")
    make("archive", ep["ids"][0])
    make("edit", uni["ids"][0], "--salience", "0.8", "--project", "misc")
    make("search", "deploy")  # access counts and timestamps change
    return home


def listing(*home: str) -> list[dict[str, Any]]:
    """Every memory, as `list --status any --json` prints it."""
    items: list[dict[str, Any]] = run_json(*home, "list", "--status", "any", "-n", "1000")
    return items


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_export_import_round_trip(fmt: str, rich_home: Path, tmp_path: Path) -> None:
    src = ("--home", str(rich_home))
    out = tmp_path / f"export-{fmt}"
    text = run(*src, "export", str(out), "--format", fmt).stdout
    before = listing(*src)
    links = run_json(*src, "stats")["links"]
    assert len(before) > 5 and links > 2
    assert text == (
        f"Exported {len(before)} memories, {links} links and {len(before)} confidence points "
        f"to {out} ({fmt}).\n"
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == fmt
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", f"memories.{fmt}", f"links.{fmt}", f"confidence.{fmt}"]
    )

    # Into the fresh LEXMEM_HOME of this test.
    counts = run_json("import", str(out))
    assert counts == {"memories": len(before), "links": links, "confidence": len(before),
                      "skipped_memories": 0, "skipped_links": 0, "skipped_confidence": 0}  # fmt: skip
    after = listing()
    assert after == before  # ids, contents, timestamps, statuses: exactly
    assert "already exist here" in error("import", str(out), code=2)  # importing twice
    assert listing() == before

    old = next(m for m in before if m["status"] == "superseded")
    assert run_json("show", old["id"])["superseded_by_chain"] == [old["superseded_by"]]
    assert run_json("stats")["links"] == links
    assert search_ids("deploy release", "--project", "shop")


def test_export_and_import_refuse_bad_folders(tmp_path: Path) -> None:
    remember("Something to export")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert "not an empty folder" in error("export", str(taken), code=2)
    assert (taken / "notes.txt").read_text() == "mine"
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert "not an empty folder" in error("export", str(a_file), code=2)
    assert "does not exist" in error("export", str(tmp_path / "no" / "deeper"), code=2)
    assert "--format" in error("export", str(tmp_path / "x"), "--format", "xml", code=2)

    empty = tmp_path / "empty"
    empty.mkdir()
    data = run_json("export", str(empty))
    assert data == {"folder": str(empty), "format": "jsonl",
                    "counts": {"memories": 1, "links": 0, "confidence": 1}}  # fmt: skip

    assert "not a lexmem export" in error("import", str(taken), code=2)
    assert "not a lexmem export" in error("import", str(tmp_path / "missing"), code=2)
    broken = tmp_path / "broken"
    shutil.copytree(empty, broken)
    (broken / "manifest.json").write_text("{not json")
    assert "not valid JSON" in error("import", str(broken), code=2)
    damaged = tmp_path / "damaged"
    shutil.copytree(empty, damaged)
    (damaged / "memories.jsonl").write_text('{"id": 1, "nonsense": true}\n')
    msg = error("--home", str(tmp_path / "other"), "import", str(damaged), code=2)
    assert "memories.jsonl does not match the sha256 in its manifest" in msg
    manifest = json.loads((damaged / "manifest.json").read_text())
    del manifest["sha256"]  # as exports made before the manifest carried checksums
    (damaged / "manifest.json").write_text(json.dumps(manifest))
    msg = error("--home", str(tmp_path / "other"), "import", str(damaged), code=2)
    assert "memories.jsonl cannot be read as a lexmem jsonl export" in msg


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["frobnicate"], 2, "no such command 'frobnicate'"),
        (["--bogus"], 2, "no such option '--bogus'"),
        (["list", "--bogus"], 2, "(see `lexmem list --help`)"),
        (["remember", ""], 2, "nothing to remember"),
        (["list", "--since", "not-a-date"], 2, "--since must be a date"),
        (["pin"], 2, "missing argument 'ID'"),
        (["show", "deadbeef"], 3, "no memory with id deadbeef"),
        (["restore", "deadbeef-0000-4000-8000-000000000000"], 3, "no memory"),
    ],
)
def test_errors_are_one_line(args: list[str], code: int, words: str) -> None:
    assert words in error(*args, code=code)


def test_home_option_and_unusable_home(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    mid = run_json("--home", str(other), "remember", "Stored elsewhere")["ids"][0]
    assert run_json("list") == []
    assert ids_of(run_json("--home", str(other), "list")) == [mid]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert "--home" in error("--home", str(a_file), "list", code=2)


def test_clip_and_cells() -> None:
    assert cells("abc") == 3 and cells("📌 x") == 4
    assert clip("short", 10) == "short"
    assert clip("a long title that goes on", 10) == "a long ti…"
    assert clip("a long title", 8) == "a long…"  # no space before the ellipsis
    assert clip("already cut…", 9) == "already…"
    assert cells(clip("📌📌📌📌📌📌", 7)) <= 7
    assert clip("Gamma partition replication… (4/5)", 20) == "Gamma partiti… (4/5)"


# -- the installed console script ---------------------------------------------------------------


@pytest.fixture
def script_home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "script-home"


def test_script_remember_then_search_json(script_home: Path) -> None:
    r = run_script("remember", "-", "--project", "shell", home=script_home,
                   input="The cache layer uses Memcached with a 5 minute TTL\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Remembered ") and r.stderr == ""
    r = run_script("search", "memcached TTL", "--project", "shell", "--json", home=script_home)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["hits"][0]["memory"]["content"] == (
        "The cache layer uses Memcached with a 5 minute TTL"
    )
    assert data["hits"][0]["memory"]["project"] == "shell"
    if os.name == "posix":  # the console script makes everything owner-only
        assert (script_home.stat().st_mode & 0o077) == 0
        assert all(
            (p.stat().st_mode & 0o077) == 0 for p in script_home.rglob("*") if not p.is_symlink()
        )
    r = run_script("--version", home=script_home)
    assert (r.returncode, r.stdout.strip()) == (0, f"lexmem, version {__version__}")


def test_script_errors_are_one_line_with_exit_codes(script_home: Path) -> None:
    r = run_script("show", "deadbeef", home=script_home)
    assert r.returncode == 3
    assert r.stderr == "lexmem: error: no memory with id deadbeef\n" and r.stdout == ""

    r = run_script("remember", "--title", "x", home=script_home, input="")
    assert (r.returncode, r.stderr) == (
        2,
        "lexmem: error: nothing to remember: the text is empty\n",
    )

    r = run_script("forget", "deadbeef", "--frobnicate", home=script_home)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        "lexmem: error: no such option '--frobnicate' (see `lexmem forget --help`)\n"
    )


def test_a_model_change_reembeds_on_the_next_command(tmp_path: Path, embedder: Embedder) -> None:
    """Changing embedding.model in settings.toml: the next command re-embeds, then works.

    Runs the real console script: the in-process tests share the default model.
    """
    from lexmem.config import Paths
    from lexmem.settings import EmbeddingSettings, Settings, save_settings

    home = tmp_path / "home"
    run("--home", str(home), "remember", "The API runs on port 8080")
    folder = tmp_path / "cls-model"
    shutil.copytree(embedder.models_dir / "all-MiniLM-L6-v2-int8", folder)
    settings = Settings(
        embedding=EmbeddingSettings(model="local/cls", path=str(folder), pooling="cls")
    )
    save_settings(Paths(home), settings)
    exe = Path(sys.executable).with_name("lexmem")
    env = {**os.environ, "LEXMEM_HOME": str(home)}
    proc = subprocess.run(
        [str(exe), "search", "which port", "--json"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "re-embedding 1 memories" in proc.stderr
    assert json.loads(proc.stdout)["hits"][0]["memory"]["content"] == "The API runs on port 8080"
    meta = json.loads((home / "store" / "meta.json").read_text())
    assert meta["embedding_space"].startswith("local/cls|")


def test_capture_commands_optout_watch_ingest_audit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    assert "Opted out" in run("optout", "add", str(repo)).stdout
    assert run_json("optout", "list") == [str(repo.resolve())]
    run("optout", "remove", str(repo))
    assert run_json("optout", "list") == []
    assert "not a folder" in error("watch", "add", str(tmp_path / "missing"), code=2)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Style\n\nChapter titles stay under five words.\n")
    run("watch", "add", str(notes))
    assert run_json("watch", "list") == [str(notes.resolve())]
    scanned = run_json("watch", "scan")
    assert scanned["files"] == 1 and scanned["chunks"] == 1
    assert run_json("ingest") == {**run_json("ingest"), "events": 0}
    assert run("audit").stdout.strip() == "No audit entries."
    assert run("sessions").stdout.strip() == "No sessions captured yet."
    assert run_json("sessions") == []
    run("watch", "remove", str(notes))
    assert run_json("watch", "list") == []


def test_project_dot_means_the_repository_the_command_is_given_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--project .`` from a folder inside a repository files the memory under the
    repository's root, not under a project literally named "."; a read says the same."""
    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    run("remember", "--project", ".", "The shop's CI runs on self-hosted runners")
    (memory,) = run_json("list", "--project", "..")
    assert memory["project"] == str(repo)
    assert run_json("list", "--project", str(repo))[0]["id"] == memory["id"]
