"""`lexmem import` keeps nothing it was not given and loses nothing it was given: an
export that does not match its manifest, or holds a link to a memory it lacks, is refused
whole; a second import adds only what is new with --skip-existing; Ctrl-C says exactly
what was kept. Everything through the real CLI on real stores."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import error, run
from conftest import shared_model

from lexmem.api import Lexmem
from lexmem.config import Paths
from lexmem.embedder import Embedder


@pytest.fixture(autouse=True)
def _shared_model(embedder: Embedder) -> Iterator[None]:
    with shared_model(embedder):
        yield


def count(*home: str) -> int:
    return int(json.loads(run(*home, "stats", "--json").stdout)["memories"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(folder: Path, **changes: Any) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(changes)
    for key, value in list(manifest.items()):
        if value is None:
            del manifest[key]
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def three(tmp_path: Path) -> tuple[Path, list[str]]:
    """An export of three memories, the first linked to the third."""
    src = ("--home", str(tmp_path / "source"))
    ids = [
        json.loads(run(*src, "remember", text, "--json").stdout)["ids"][0]
        for text in (
            "The project uses PostgreSQL for data storage",
            "Deploys go out on Tuesdays after the review",
            "The staging database is reset every night",
        )
    ]
    run(*src, "link", ids[0], ids[2], "--type", "relates_to")
    out = tmp_path / "export"
    run(*src, "export", str(out))
    return out, ids


def drop_memory(folder: Path, ident: str) -> None:
    path = folder / "memories.jsonl"
    lines = [ln for ln in path.read_text().splitlines() if json.loads(ln)["id"] != ident]
    path.write_text("".join(ln + "\n" for ln in lines))


def test_export_manifest_gives_each_files_sha256(three: tuple[Path, list[str]]) -> None:
    out, _ = three
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == {"memories": 3, "links": 1, "confidence": 3}
    assert manifest["sha256"] == {
        name: sha256(out / name) for name in ("memories.jsonl", "links.jsonl", "confidence.jsonl")
    }


def test_a_truncated_export_is_refused_whole(three: tuple[Path, list[str]]) -> None:
    """The manifest says 3 memories, the file holds 2, and a link points at the missing
    one: refused with one line, nothing imported (it used to import 2 and the link)."""
    out, ids = three
    drop_memory(out, ids[2])
    msg = error("import", str(out), code=2)
    assert "memories.jsonl does not match the sha256 in its manifest" in msg
    assert "nothing was imported" in msg
    assert count() == 0

    # An export from before manifests carried hashes: its row counts are checked.
    write_manifest(out, sha256=None)
    msg = error("import", str(out), code=2)
    assert "holds 2 memories but its manifest says 3" in msg and "nothing was imported" in msg
    assert count() == 0

    # Counts that agree, but a link to a memory neither in the export nor here.
    write_manifest(out, counts={"memories": 2, "links": 1, "confidence": 3})
    msg = error("import", str(out), code=2)
    assert "link" in msg and ids[2] in msg and "neither in the export nor in this store" in msg
    assert count() == 0


def test_a_link_to_a_memory_already_here_is_accepted(
    three: tuple[Path, list[str]], tmp_path: Path
) -> None:
    out, ids = three
    # The linked memory is here already (the whole export was imported into "other"), so
    # an export without it can be added there: its link points at a memory that exists.
    other = ("--home", str(tmp_path / "other"))
    run(*other, "import", str(out))
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("memories.jsonl", "links.jsonl", "confidence.jsonl", "manifest.json"):
        (partial / name).write_bytes((out / name).read_bytes())
    drop_memory(partial, ids[2])
    run(*other, "forget", ids[0], "--yes")
    run(*other, "forget", ids[1], "--yes")
    write_manifest(partial, sha256=None, counts={"memories": 2, "links": 1, "confidence": 3})
    # The confidence point of the dropped memory belongs to a memory here: accepted.
    line = run(*other, "import", str(partial), "--skip-existing").stdout
    assert line.startswith("Imported 2 memories, 1 links and 2 confidence points; skipped ")
    assert count(*other) == 3


def test_importing_again_offers_and_honours_skip_existing(
    three: tuple[Path, list[str]], tmp_path: Path
) -> None:
    out, _ = three
    run("import", str(out))
    msg = error("import", str(out), code=2)
    assert "3 of the export's 3 memories already exist here" in msg
    assert f"lexmem import --skip-existing {out}" in msg
    assert count() == 3

    # A newer export of the same store holds one more memory: only that one is added.
    src = ("--home", str(tmp_path / "source"))
    run(*src, "remember", "Invoices are archived after seven years")
    newer = tmp_path / "newer"
    run(*src, "export", str(newer))
    line = run("import", str(newer), "--skip-existing").stdout
    assert line == (
        "Imported 1 memories, 0 links and 1 confidence points; skipped 3 memories, "
        "1 links and 3 confidence points whose ids are already here.\n"
    )
    assert count() == 4
    data = json.loads(run("import", str(newer), "--skip-existing", "--json").stdout)
    assert data == {
        "memories": 0, "links": 0, "confidence": 0,
        "skipped_memories": 4, "skipped_links": 1, "skipped_confidence": 4,
    }  # fmt: skip
    assert count() == 4


# -- Ctrl-C ----------------------------------------------------------------------------------


def grow_export(src: Path, out: Path, n: int) -> None:
    """An export of ``n`` memories made from a real one-memory export (new ids, the same
    vector rounded to keep the file small), with a manifest that matches it."""
    row = json.loads((src / "memories.jsonl").read_text().splitlines()[0])
    row["vector"] = [round(x, 3) for x in row["vector"]]
    out.mkdir()
    with open(out / "memories.jsonl", "w") as fh:
        for i in range(n):
            fh.write(json.dumps({**row, "id": str(uuid.UUID(int=i + 1)),
                                 "content": f"Note {i}: {row['content']}"}) + "\n")  # fmt: skip
    (out / "links.jsonl").write_text("")
    (out / "confidence.jsonl").write_text("")
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["counts"] = {"memories": n, "links": 0, "confidence": 0}
    manifest["sha256"] = {
        name: sha256(out / name) for name in ("memories.jsonl", "links.jsonl", "confidence.jsonl")
    }
    (out / "manifest.json").write_text(json.dumps(manifest))


# Constraint: a process started in the background by a non-interactive shell inherits
# SIGINT ignored, and Python then never installs its Ctrl-C handler; the import must be a
# process that Ctrl-C reaches, as it is on a terminal, so the child installs it itself.
_MAIN = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from lexmem.cli import main; main(sys.argv[1:])"
)


def cli_process(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "LEXMEM_HOME": str(home)}
    env.pop("LEXMEM_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "-c", _MAIN, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_ctrl_c_during_an_import_says_exactly_what_was_kept(
    tmp_path: Path, data_home: Path
) -> None:
    n = 6000  # three batches of the store's 2,000
    src = ("--home", str(tmp_path / "source"))
    run(*src, "remember", "The project uses PostgreSQL for data storage")
    one = tmp_path / "one"
    run(*src, "export", str(one))
    big = tmp_path / "big"
    grow_export(one, big, n)

    proc = cli_process(data_home, "import", str(big))
    progress = Paths(data_home).progress
    # Ctrl-C once the import has written its first batch (its published progress says so).
    while proc.poll() is None:
        seen = []
        for f in progress.glob("*.json") if progress.is_dir() else []:
            try:
                seen.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                continue  # being replaced, or gone
        if any(p.get("job") == "import" and p.get("done", 0) > 0 for p in seen):
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.01)
    out, err = proc.communicate(timeout=300)
    held = count()
    if proc.returncode == 0:  # it had finished before the signal came
        assert out.startswith(f"Imported {n:,} memories") and held == n
    else:
        assert proc.returncode == 130, (proc.returncode, out, err)
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1, err
        said = lines[0]
        if "nothing of" in said:
            assert said.endswith("was imported (the store is as it was)") and held == 0
        elif "after the import had finished" in said:
            assert f"{n:,} memories" in said and held == n
        else:
            kept = re.search(r"interrupted: ([\d,]+) of ([\d,]+) memories imported", said)
            assert kept, said
            assert int(kept.group(1).replace(",", "")) == held
            assert "--skip-existing" in said

    # The rest, without "already exist": --skip-existing adds exactly what is missing.
    line = run("import", str(big), "--skip-existing").stdout
    assert line.startswith(f"Imported {n - held:,} memories")
    assert count() == n
    Lexmem.open(data_home).close()  # the store opens cleanly afterwards
