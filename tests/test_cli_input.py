"""What a person's shell hands ``lexmem``, end to end: the real console script (and
``python -m lexmem``) as subprocesses, with and without a real ``lexmem serve``.

- Bytes that are not UTF-8, on standard input or in an argument, are refused with one
  line naming the byte (exit 2, bad input), never an internal error.
- A closed output pipe (``lexmem list | head -1``) ends the command quietly with 141, as
  SIGPIPE ends other tools: no traceback, whether the service answered or not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from faultkit import environment, lexmem_command
from test_readers import serving

MODULE = [sys.executable, "-m", "lexmem"]
CLOSED_PIPE = 141  # 128 + SIGPIPE, as a shell reports a tool the signal ended


def run(home: Path, argv: Sequence[str | bytes], *, stdin: bytes | None = None,
        command: Sequence[str] = MODULE, cold: bool = False) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    env = environment(home)
    if cold:
        env["LEXMEM_NO_SERVICE"] = "1"
    return subprocess.run(
        [*command, *argv], input=stdin if stdin is not None else b"", capture_output=True,
        env=env, timeout=300, check=False,
    )  # fmt: skip


def one_error(done: subprocess.CompletedProcess[bytes], code: int) -> str:
    """The one line a failed command says; nothing on standard output."""
    said = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, (done.returncode, said)
    assert done.stdout == b""
    lines = said.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lexmem: error: "), lines
    assert "Error" not in lines[0] and "Traceback" not in said, said  # no exception's name
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A data folder with one memory (its id in ``home / "id"``)."""
    home = tmp_path / "lexmem"
    done = run(home, ["remember", "--json", "The shop deploys on Tuesdays."])
    assert done.returncode == 0, done.stderr
    (tmp_path / "id").write_text(json.loads(done.stdout)["ids"][0], encoding="utf-8")
    return home


def memory_id(home: Path) -> str:
    return (home.parent / "id").read_text(encoding="utf-8")


# -- bytes that are not UTF-8 ----------------------------------------------------------------


def test_standard_input_that_is_not_utf8_is_refused_naming_the_byte(home: Path) -> None:
    mid = memory_id(home)[:8]
    for argv in (
        ["remember", "-"], ["remember"], ["remember", "--json", "-"], ["classify", "-"],
        ["supersede", mid, "--with", "-"], ["edit", mid, "--text", "-"],
    ):  # fmt: skip
        line = one_error(run(home, argv, stdin=b"caf\xe9 au lait"), 2)
        assert "standard input is not valid UTF-8 (byte 3: 0xe9)" in line, (argv, line)
    # Nothing was stored or changed.
    listed = json.loads(run(home, ["list", "--json"], cold=True).stdout)
    assert [m["content"] for m in listed] == ["The shop deploys on Tuesdays."]
    # Valid UTF-8 goes through as ever.
    ok = run(home, ["remember", "-"], stdin="Café orders close at 18:00.".encode())
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("via", ["the command line", "the console script with a service"])
def test_arguments_that_are_not_utf8_are_refused_naming_the_byte(home: Path, via: str) -> None:
    cases: list[tuple[list[str | bytes], str]] = [
        (["search", b"\xff\xfe"], "QUERY is not valid UTF-8 (byte 0: 0xff)"),
        (["search", b"which caf\xe9"], "QUERY is not valid UTF-8 (byte 9: 0xe9)"),
        (["search", "orders", "--project", b"sh\xffop"], "--project is not valid UTF-8 (byte 2"),
        (["list", "--project", b"\xc3"], "--project is not valid UTF-8 (byte 0: 0xc3)"),
        (["remember", b"caf\xe9"], "TEXT is not valid UTF-8 (byte 3: 0xe9)"),
        (["remember", "Orders", "--title", b"\xe9t\xe9"], "--title is not valid UTF-8 (byte 0"),
        (["classify", b"caf\xe9"], "TEXT is not valid UTF-8 (byte 3"),
        (["edit", memory_id(home)[:8], "--title", b"x\x80"], "--title is not valid UTF-8 (byte 1"),
        (["optout", "add", b"/tmp/caf\xe9"], "not valid UTF-8 (byte 8: 0xe9)"),
    ]
    if via == "the command line":
        for argv, says in cases:
            assert says in one_error(run(home, argv), 2), argv
        return
    with serving(home):
        for argv, says in cases:
            assert says in one_error(run(home, argv, command=lexmem_command()), 2), argv


# -- a closed output pipe ------------------------------------------------------------------------


def closed_reader(home: Path, argv: Sequence[str], command: Sequence[str]) -> tuple[int, bytes]:
    """Run a command whose standard output is a pipe nobody reads any more (its reading
    end closed before the command starts): (exit code, what it said on stderr)."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [*command, *argv], stdin=subprocess.DEVNULL, stdout=write, stderr=subprocess.PIPE,
            env=environment(home), timeout=300, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    return done.returncode, done.stderr


READS = [["list"], ["list", "--json"], ["search", "deploys"], ["search", "deploys", "--json"],
         ["stats"], ["audit"], ["sessions"], ["digest"]]  # fmt: skip


@pytest.fixture
def service(home: Path) -> Iterator[None]:
    with serving(home):
        yield


def test_a_closed_pipe_ends_every_command_quietly_without_a_service(home: Path) -> None:
    others = [["show", memory_id(home)[:8]], ["status"], ["classify", "Deploy on Tuesdays"],
              ["remember", "Invoices go out on the 1st."], ["optout", "list"]]  # fmt: skip
    for command in (MODULE, lexmem_command()):
        for argv in [*READS, *others]:
            code, said = closed_reader(home, argv, command)
            assert (code, said) == (CLOSED_PIPE, b""), (argv, code, said.decode())


def test_a_closed_pipe_ends_an_answered_read_quietly(home: Path, service: None) -> None:
    for argv in [*READS, ["show", memory_id(home)[:8]]]:
        code, said = closed_reader(home, argv, lexmem_command())
        assert (code, said) == (CLOSED_PIPE, b""), (argv, code, said.decode())


def test_a_password_on_standard_input_that_is_not_utf8_is_refused_naming_the_byte(
    tmp_path: Path,
) -> None:
    # Read as one line before anything connects: the address is never reached.
    home = tmp_path / "data"
    for argv in (
        ["team", "join", "postgresql:///team?host=/nonexistent", "--project", "shop",
         "--password-stdin"],
        ["team", "admin", "postgresql:///team?host=/nonexistent", "--team", "t",
         "--member", "ann", "--password-stdin"],
    ):  # fmt: skip
        line = one_error(run(home, argv, stdin=b"hunt\xe9r2\n", cold=True), 2)
        assert "standard input is not valid UTF-8 (byte 4: 0xe9)" in line, (argv, line)
        assert "hunt" not in line
