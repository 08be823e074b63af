"""The CLI run in the test's own process (click's runner), as the import, export and
doctor tests read it: the exit code checked, and a failure's one line."""

from __future__ import annotations

from click.testing import CliRunner, Result

from lexmem.cli import cli


def run(*args: str, code: int = 0) -> Result:
    """``lexmem ARGS``, which must exit with ``code``."""
    result = CliRunner().invoke(cli, list(args), prog_name="lexmem", catch_exceptions=False)
    assert result.exit_code == code, (
        f"lexmem {' '.join(args)} exited {result.exit_code}, not {code}\n"
        f"stdout: {result.stdout}\nstderr: {result.stderr}"
    )
    return result


def error(*args: str, code: int) -> str:
    """A failing command: one line on stderr, nothing on stdout; the line."""
    result = run(*args, code=code)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lexmem: error: "), result.stderr
    assert result.stdout == ""
    return lines[0]
