"""Where the data folder is: the location pointer, and moving the folder (real files,
a real store, the real hook script, a real second process holding the lock)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lexmem.api import Lexmem
from lexmem.config import (
    Paths,
    default_home,
    location_file,
    read_location,
    resolve_paths,
    write_location,
)
from lexmem.desktop import move_data_folder
from lexmem.embedder import Embedder
from lexmem.errors import DataFolderError, InvalidInputError
from lexmem.locks import FileLock

HOOK = Path(sys.executable).with_name("lexmem-hook")


@pytest.fixture
def no_env_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """lexmem as a person runs it: no LEXMEM_HOME, so the pointer decides."""
    monkeypatch.delenv("LEXMEM_HOME")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_pointer_names_the_data_folder_unless_lexmem_home_is_set(
    tmp_path: Path, no_env_home: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve_paths().home == default_home()
    elsewhere = tmp_path / "elsewhere"
    write_location(elsewhere)
    pointer = location_file()
    assert pointer == Path(os.environ["XDG_CONFIG_HOME"]) / "lexmem" / "location"
    assert pointer.read_text() == f"{elsewhere}\n" and _mode(pointer) == 0o600
    assert resolve_paths().home == elsewhere == read_location()
    monkeypatch.setenv("LEXMEM_HOME", str(tmp_path / "explicit"))
    assert resolve_paths().home == tmp_path / "explicit"  # the variable still wins
    monkeypatch.delenv("LEXMEM_HOME")
    pointer.write_text("relative/folder\n")  # damaged: ignored, never a relative folder
    assert resolve_paths().home == default_home()
    write_location(None)
    assert not pointer.exists() and resolve_paths().home == default_home()


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("linux", {"XDG_CONFIG_HOME": "/x/config"}, "/x/config/lexmem/location"),
        ("linux", {"XDG_CONFIG_HOME": "relative"}, "~/.config/lexmem/location"),
        ("darwin", {}, "~/Library/Preferences/lexmem/location"),
        ("win32", {"APPDATA": "C:/Users/u/AppData/Roaming"}, "C:/Users/u/AppData/Roaming/lexmem/location"),
    ],
)  # fmt: skip
def test_the_pointer_lives_outside_every_data_folder(
    platform: str, env: dict[str, str], expected: str
) -> None:
    assert location_file(env, platform) == Path(expected).expanduser()
    assert default_home(env, platform) not in location_file(env, platform).parents


def test_the_hook_follows_the_pointer(tmp_path: Path, no_env_home: None) -> None:
    moved = tmp_path / "moved-here"
    write_location(moved)
    event = {
        "session_id": "wrapper-1", "event_id": "6b1f5c9e-2d3a-4e8b-9f70-1a2b3c4d5e6f",
        "event_type": "prompt", "timestamp": "2026-02-20T12:00:00Z",
        "content": "we deploy from the release branch",
    }  # fmt: skip
    proc = subprocess.run(
        [str(HOOK), "event"],
        check=False,
        input=json.dumps(event).encode(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == b""
    assert [p.name for p in (moved / "inbox").glob("*.json")] != []
    assert not default_home().exists()


def test_moving_the_data_folder_round_trip(
    tmp_path: Path, no_env_home: None, embedder: Embedder
) -> None:
    first = tmp_path / "first"
    write_location(first)
    with Lexmem.open(embedder=embedder) as lm:
        assert lm.paths.home == first
        mid = lm.remember("The staging database listens on port 5433").memories[0].id
    seen: list[tuple[int, int]] = []
    second = tmp_path / "disk" / "lexmem-data"
    second.parent.mkdir()
    second.mkdir()  # an empty folder is a fine target

    moved = move_data_folder(Paths(first), second, progress=lambda d, t: seen.append((d, t)))

    assert moved.paths.home == second and moved.left_behind == "" and moved.files > 0
    assert seen[0] == (0, moved.size) and seen[-1] == (moved.size, moved.size)
    assert not first.exists()
    assert resolve_paths().home == second and _mode(second) == 0o700
    assert not [p for p in second.parent.iterdir() if p.name.startswith(".")]  # no staging left
    with Lexmem.open(embedder=embedder) as lm:
        assert lm.get(mid).content == "The staging database listens on port 5433"
        assert lm.search("staging database port").hits[0].memory.id == mid

    # Back to the platform's folder: the pointer goes away rather than naming the default.
    move_data_folder(Paths(second), default_home())
    assert not location_file().exists() and not second.exists()
    with Lexmem.open(embedder=embedder) as lm:
        assert lm.paths.home == default_home() and lm.get(mid).pinned is False


def test_a_move_is_refused_before_anything_is_touched(tmp_path: Path, no_env_home: None) -> None:
    home = tmp_path / "data"
    write_location(home)
    Paths(home).ensure()
    (home / "settings.toml").write_text("schema_version = 1\n")
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    for target, message in (
        (full, "not empty"),
        (home / "inner", "inside the data folder"),
        (tmp_path, "holds the data folder"),
        (home / "settings.toml" / "x", "inside the data folder"),
        (full / "notes.txt" / "x", "is not a folder"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            move_data_folder(Paths(home), target)
    with pytest.raises(InvalidInputError, match="not the data folder lexmem uses"):
        move_data_folder(Paths(tmp_path / "other"), tmp_path / "new")
    os.environ["LEXMEM_HOME"] = str(home)
    try:
        with pytest.raises(InvalidInputError, match="LEXMEM_HOME is set"):
            move_data_folder(Paths(home), tmp_path / "new")
    finally:
        del os.environ["LEXMEM_HOME"]
    assert (home / "settings.toml").exists() and read_location() == home
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "full", "userhome"]


def test_a_service_in_another_process_blocks_the_move_but_our_own_does_not(
    tmp_path: Path, no_env_home: None
) -> None:
    home = tmp_path / "data"
    write_location(home)
    paths = Paths(home)
    paths.ensure()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\nfrom pathlib import Path\nfrom lexmem.locks import FileLock\n"
         f"FileLock(Path({str(paths.service_lock)!r}), timeout=0).acquire()\n"
         "print('held', flush=True)\nsys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(DataFolderError, match=f"another process \\(process {holder.pid}\\)"):
            move_data_folder(paths, tmp_path / "new")
        assert home.is_dir() and not (tmp_path / "new").exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # This process's own service (the app's) holds the lock: the move is its own.
    with FileLock(paths.service_lock, timeout=0):
        moved = move_data_folder(paths, tmp_path / "new")
    assert moved.paths.home == tmp_path / "new" and not home.exists()


def test_a_move_that_fails_half_way_leaves_everything_as_it_was(
    tmp_path: Path, no_env_home: None
) -> None:
    home = tmp_path / "data"
    write_location(home)
    Paths(home).ensure()
    (home / "store" / "big.bin").write_bytes(os.urandom(3 << 20))
    target = tmp_path / "new"

    class Cancelled(Exception):
        pass

    def cancel_after_a_megabyte(done: int, total: int) -> None:
        if done > 1 << 20:
            raise Cancelled

    with pytest.raises(Cancelled):
        move_data_folder(Paths(home), target, progress=cancel_after_a_megabyte)
    assert not target.exists() and read_location() == home
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "userhome"]  # no staging
    assert len((home / "store" / "big.bin").read_bytes()) == 3 << 20

    os.mkfifo(home / "store" / "zz-pipe")  # no copy can take it: refused before copying
    with pytest.raises(DataFolderError, match="special file"):
        move_data_folder(Paths(home), target)
    assert not target.exists() and read_location() == home


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_the_data_folder_without_pathlib_is_the_same_folder(
    tmp_path: Path, no_env_home: None, monkeypatch: pytest.MonkeyPatch, platform: str
) -> None:
    """``lexmem mcp`` finds the data folder with :mod:`lexmem.places` (os and sys only)
    before it imports ``pathlib``; the configuration's answers are built on the same
    functions, so the two never disagree."""
    from lexmem import places

    env = dict(os.environ)
    assert places.default_home(env, platform) == str(default_home(env, platform))
    assert places.location_file(env, platform) == str(location_file(env, platform))
    for xdg in ("", "relative/data", str(tmp_path / "xdg")):
        env["XDG_DATA_HOME"] = xdg
        assert Path(places.default_home(env, platform)) == default_home(env, platform)
    env["XDG_DATA_HOME"] = os.environ["XDG_DATA_HOME"]
    assert Path(places.data_home(env)) == resolve_paths(env).home == default_home(env)
    write_location(tmp_path / "moved")
    assert Path(places.data_home(env)) == resolve_paths(env).home == tmp_path / "moved"
    location_file().write_text("~/moved-again\n")
    expected = Path.home() / "moved-again"
    assert Path(places.data_home(env)) == resolve_paths(env).home == expected
    monkeypatch.chdir(tmp_path)
    for given in ("relative/home", "~/home", str(tmp_path / "a" / ".." / "b"), " spaced "):
        env["LEXMEM_HOME"] = given
        assert Path(places.data_home(env)) == resolve_paths(env).home
        assert places.absolute(given.strip()) == places.data_home(env)
