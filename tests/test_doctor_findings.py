"""`lexmem doctor` says what is true: a service it cannot place is not called stale, a
data folder it cannot write does not hide the other checks, and links to a memory that is
not there are a problem. Through the real CLI, on real stores and real processes."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from clirun import run
from conftest import shared_model
from faultkit import environment, lexmem_command, wait_for

from lexmem.api import Lexmem
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.locks import service_running
from lexmem.store.schema import confidence_schema, links_schema, memory_schema


@pytest.fixture(autouse=True)
def _shared_model(embedder: Embedder) -> Iterator[None]:
    with shared_model(embedder):
        yield


def doctor(*home: str, code: int | None = None) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, [*home, "doctor", "--json"], prog_name="lexmem", catch_exceptions=False
    )
    if code is not None:
        assert result.exit_code == code, result.output
    return {c["name"]: c for c in json.loads(result.stdout)}


def test_a_service_whose_home_is_relative_is_placed_from_its_own_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LEXMEM_HOME=data lexmem serve` run in work/: its data folder is work/data, which
    exists. doctor, run elsewhere, used to look for ./data beside itself and say `kill`."""
    work = tmp_path / "work"
    work.mkdir()
    env = environment(work / "data")
    env["LEXMEM_HOME"] = "data"
    # Its record of itself goes to a state folder doctor does not read: doctor finds it
    # through /proc, as it finds a service started by an older lexmem, which kept none.
    env["XDG_STATE_HOME"] = str(tmp_path / "service-state")
    proc = subprocess.Popen(
        [*lexmem_command(), "serve"], cwd=work, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(
            lambda: service_running(Paths(work / "data")) or proc.poll() is not None,
            "lexmem serve to take the service lock",
        )
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        services = doctor()["services"]
        assert f"pid {proc.pid} for {work / 'data'}" in services["detail"]
        killed = re.search(r"`kill ([\d ]+)`", services["detail"])
        # (other lexmem services of this user, if any, are theirs to judge)
        assert killed is None or str(proc.pid) not in killed.group(1).split()
    finally:
        proc.terminate()
        proc.wait(60)


def _fill(folder: Path) -> None:
    """Write into ``folder`` until its file system has no byte left (tmpfs hands out
    whole pages: once a write fails, not one more byte fits)."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 16))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


@pytest.fixture(params=["read-only", "full"])
def unwritable_home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A data folder with one memory on a tmpfs, then remounted read-only or filled to the
    last byte, and the reason its check gives. (chmod does not stop root: a read-only or
    full file system makes the data folder check fail the real way.) Skips where mounting
    is not permitted."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "mode=0700,size=16m", "tmpfs", str(home)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()})")
    try:
        run("--home", str(home), "remember", "The staging database is reset every night")
        if request.param == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(home)], check=True)
            yield home, os.strerror(errno.EROFS)
        else:
            _fill(home)
            yield home, os.strerror(errno.ENOSPC)
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def test_an_unwritable_data_folder_fails_its_check_and_every_other_check_still_runs(
    unwritable_home: tuple[Path, str],
) -> None:
    home, reason = unwritable_home
    checks = doctor("--home", str(home), code=1)
    # It used to stop at the data folder's FAIL line.
    for name in ("permissions", "settings", "model", "store", "keyring", "services"):
        assert name in checks, sorted(checks)
    folder = checks["data folder"]
    assert folder["state"] == "fail"
    assert folder["detail"] == f"{home} cannot be written ({reason})"
    assert checks["settings"]["state"] == "ok"
    # The model loads; what it may fail at is keeping its checksum record in models/.
    model = checks["model"]
    assert model["state"] == "ok" or reason in model["detail"], model
    assert checks["store"]["detail"].startswith("1 memories"), checks["store"]


def test_links_to_a_memory_that_is_not_there_are_a_problem(
    data_home: Path, embedder: Embedder
) -> None:
    """What an import of a cut-short export used to leave: a link to a memory it lacked."""
    lm = Lexmem.open(data_home, embedder=embedder)
    try:
        here = lm.remember("The project uses PostgreSQL for data storage").memories[0]
        missing = "0f0e0d0c-0000-4000-8000-000000000003"
        link = {"id": "l-1", "from_id": here.id, "to_id": missing, "link_type": "relates_to",
                "strength": 0.5, "created_at": datetime.now(UTC)}  # fmt: skip
        lm.store.import_rows(
            memory_schema(lm.store.dim).empty_table(),
            pa.Table.from_pylist([link], schema=links_schema()),
            confidence_schema().empty_table(),
        )
    finally:
        lm.close()
    checks = doctor()
    assert checks["store"]["state"] == "ok"
    assert checks["links"]["state"] == "warn"
    assert checks["links"]["detail"].startswith(
        f"1 of 1 links point to a memory that is not in the store (e.g. link l-1 to {missing})"
    )
