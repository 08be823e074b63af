"""Packaging: the desktop entry and icon (`lexmem install|uninstall desktop`), the wheel
and sdist installed into a fresh virtual environment, and the PyInstaller bundle run
with a clean environment.

The desktop tests write into the test's own XDG folders (tests/conftest.py). Building
the wheel and the bundle takes minutes: those tests always run in CI (``CI=true``) and
locally only with ``LEXMEM_SLOW_TESTS=1``. They print what they measured (build time,
size) and assert none of it: timing belongs to bench/.
"""

from __future__ import annotations

import configparser
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lexmem import __version__
from lexmem.cli import cli
from lexmem.desktop import (
    autostart_command,
    autostart_path,
    desktop_entry,
    icon_path,
    menu_entry_path,
    set_autostart,
)

ROOT = Path(__file__).resolve().parent.parent
LINUX = ROOT / "packaging" / "linux"
ICON = ROOT / "resources" / "icons" / "lexmem.svg"
# pip and build run with the user's own environment (their pip configuration and cache),
# which the tests' isolation (tests/conftest.py) replaces once collection is over.
BUILD_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
SLOW = (
    os.environ.get("CI", "").lower() in ("true", "1") or os.environ.get("LEXMEM_SLOW_TESTS") == "1"
)
slow = pytest.mark.skipif(
    not SLOW, reason="builds for minutes: runs in CI (CI=true) or with LEXMEM_SLOW_TESTS=1"
)
xdg = pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="freedesktop.org desktops")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def entry_of(text: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser["Desktop Entry"]


def check_entry_file(path: Path) -> None:
    """desktop-file-validate when Debian's desktop-file-utils is installed; else the keys
    every launcher needs, checked by hand."""
    validator = shutil.which("desktop-file-validate")
    if validator:
        done = subprocess.run([validator, str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0 and not done.stdout.strip(), done.stdout
        return
    entry = entry_of(path.read_text(encoding="utf-8"))
    assert entry["Type"] == "Application" and entry["Name"] == "lexmem"
    assert entry["Version"] in ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5")
    assert entry["Exec"] and entry["Icon"] and entry["Categories"].endswith(";")


def tree(root: Path) -> dict[str, bytes | None]:
    """Every folder (None) and file (its bytes) below ``root``."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


@pytest.fixture
def user_home() -> Path:
    return Path(os.environ["HOME"])


# -- the files in packaging/linux --------------------------------------------------------


def test_the_packaged_desktop_file_is_the_one_lexmem_writes_and_is_valid() -> None:
    shipped = LINUX / "lexmem.desktop"
    assert shipped.read_text(encoding="utf-8") == desktop_entry(
        ["lexmem", "app", "--show"], menu=True
    )
    check_entry_file(shipped)
    entry = entry_of(shipped.read_text(encoding="utf-8"))
    assert entry["Icon"] == "lexmem" and entry["StartupWMClass"] == "lexmem"
    # The icon in the hicolor layout is the app's own (a copy: `cp -r` keeps it whole).
    themed = LINUX / "icons" / "hicolor" / "scalable" / "apps" / "lexmem.svg"
    assert not themed.is_symlink() and themed.read_bytes() == ICON.read_bytes()


# -- lexmem install|uninstall desktop ------------------------------------------------------


@xdg
def test_install_desktop_adds_the_entry_and_icon_and_uninstall_removes_exactly_them(
    user_home: Path, data_home: Path
) -> None:
    share = Path(os.environ["XDG_DATA_HOME"])
    # What the user already has: another app's entry, and a config folder.
    (share / "applications").mkdir(parents=True)
    other = share / "applications" / "editor.desktop"
    other.write_text("[Desktop Entry]\nType=Application\nName=Editor\nExec=editor\n")
    (user_home / ".config").mkdir()
    before = tree(user_home)

    result = run("install", "desktop")
    assert result.exit_code == 0, result.output
    entry_file, icon_file = menu_entry_path(), icon_path()
    assert entry_file == share / "applications" / "lexmem.desktop"
    assert icon_file == share / "icons" / "hicolor" / "scalable" / "apps" / "lexmem.svg"
    assert result.output.splitlines() == [f"created {entry_file}", f"created {icon_file}"]
    check_entry_file(entry_file)
    entry = entry_of(entry_file.read_text(encoding="utf-8"))
    argv = shlex.split(entry["Exec"])
    # The lexmem that ran the install (this virtual environment's script), with the
    # explicit data folder the desktop session would not know.
    assert argv == [autostart_command()[0], "--home", str(data_home), "app", "--show"]
    assert Path(argv[0]).is_absolute() and Path(argv[0]).is_file()
    assert entry["Icon"] == "lexmem" and icon_file.read_bytes() == ICON.read_bytes()
    for f in (entry_file, icon_file):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(icon_file.parent.stat().st_mode) == 0o700
    assert not [p for p in share.rglob(".*")]  # no temporary file left

    again = run("install", "desktop")
    assert again.exit_code == 0 and "nothing to change" in again.output

    # Start at login, as the Settings toggle turns it on: uninstall removes it too.
    set_autostart(True, command=autostart_command(data_home))
    assert autostart_path().is_file()

    out = run("uninstall", "desktop")
    assert out.exit_code == 0, out.output
    assert f"removed {autostart_path()}" in out.output
    assert f"removed {share / 'icons'}{os.sep}" in out.output
    after = tree(user_home)
    # Only the autostart folder remains of what was not there: the Settings toggle made it.
    assert {k: v for k, v in after.items() if "autostart" not in k} == before
    assert run("uninstall", "desktop").output.startswith("nothing to change")


@xdg
def test_dry_run_shows_the_entry_and_writes_nothing(user_home: Path, data_home: Path) -> None:
    before = tree(user_home)
    result = run("install", "desktop", "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"+++ {menu_entry_path()}" in result.output and "+Exec=" in result.output
    assert f"create {icon_path()} (the lexmem icon," in result.output
    assert result.output.rstrip().endswith("2 files would change; nothing was written")
    assert tree(user_home) == before and not data_home.exists()
    assert run("install", "desktop").exit_code == 0
    installed = tree(user_home)
    undo = run("uninstall", "desktop", "--dry-run")
    assert "-Exec=" in undo.output and f"remove {icon_path()}" in undo.output
    assert tree(user_home) == installed


@xdg
def test_an_entry_from_another_lexmem_is_updated_and_a_foreign_one_refused(
    user_home: Path,
) -> None:
    entry_file = menu_entry_path()
    entry_file.parent.mkdir(parents=True)
    entry_file.write_text(desktop_entry(["/opt/old venv/bin/lexmem", "app"], menu=True))
    result = run("install", "desktop")
    assert result.exit_code == 0 and f"wrote {entry_file}" in result.output
    assert shlex.split(entry_of(entry_file.read_text())["Exec"])[0] == autostart_command()[0]

    foreign = "[Desktop Entry]\nType=Application\nName=lexmem\nExec=/usr/bin/lexicon-memory\n"
    entry_file.write_text(foreign)
    for action in ("install", "uninstall"):
        refused = run(action, "desktop")
        assert refused.exit_code == 2
        (line,) = refused.output.strip().splitlines()
        assert line.startswith("lexmem: error: ") and "starts another program" in line
    assert entry_file.read_text() == foreign

    scoped = run("install", "desktop", "--project")
    assert scoped.exit_code == 2 and "for the user only" in scoped.output


@xdg
def test_desktop_and_agent_installs_share_their_record_without_losing_entries(
    user_home: Path, data_home: Path
) -> None:
    """Both record what they created in integrations.json; each removes only its own."""
    assert run("install", "claude").exit_code == 0
    assert run("install", "desktop").exit_code == 0
    record = data_home / "integrations.json"
    created = json.loads(record.read_text())["created"]
    assert str(user_home / ".claude" / "settings.json") in created
    assert str(icon_path().parent) in created
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert run("uninstall", "desktop").exit_code == 0
    assert json.loads(record.read_text())["created"] == sorted(
        str(p)
        for p in (user_home / ".claude", user_home / ".claude.json",
                  user_home / ".claude" / "settings.json")
    )  # fmt: skip
    assert run("uninstall", "claude").exit_code == 0
    assert not (user_home / ".claude" / "settings.json").exists()
    assert not (user_home / ".local").exists()


# -- the wheel and the sdist -----------------------------------------------------------------


def source_packages() -> set[str]:
    """Every package of lexmem and ui in the source tree (a folder with an ``__init__.py``)."""
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("lexmem", "ui")
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_pyproject_names_every_package_the_wheel_must_hold() -> None:
    """``[tool.setuptools] packages`` is a list by name: a subpackage left out of it would
    silently be missing from the wheel (the editable install used for development does not
    show it). The full check, on a built wheel, is the slow test below."""
    import tomllib

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert source_packages() - set(listed) == set()


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """What a fresh login shell has: no virtual environment, no PYTHONPATH, no display."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LEXMEM_HOME": str(tmp / "data"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
        **extra,
    }


def sh(cmd: list[str], env: dict[str, str], *, stdin: str = "", cwd: Path | None = None,
       timeout: float = 300) -> str:  # fmt: skip
    done = subprocess.run(
        cmd, input=stdin, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{shlex.join(cmd)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def agent_turn(hook: Path, env: dict[str, str], repo: Path, fact: str) -> None:
    """A Claude Code turn through the hook command: the user states a fact, the agent answers."""
    for payload in (
        {"hook_event_name": "UserPromptSubmit", "prompt": f"Remember that {fact}."},
        {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Noted."},
    ):
        body = {"session_id": "packaging-1", "transcript_path": None, "cwd": str(repo), **payload}
        assert sh([str(hook), "claude"], env, stdin=json.dumps(body)) == ""


def round_trip(lexmem: Path, hook: Path, tmp: Path, env: dict[str, str]) -> None:
    """A hook event drained by `lexmem ingest` and found; `remember` then `search`."""
    repo = tmp / "repo"
    (repo / ".git").mkdir(parents=True)
    agent_turn(hook, env, repo, "the staging database listens on port 6543")
    inbox = Path(env["LEXMEM_HOME"]) / "inbox"
    assert len(list(inbox.glob("*.json"))) == 2
    report = json.loads(sh([str(lexmem), "ingest", "--json"], env))
    assert report["events"] == 2 and report["saved"] == 1, report
    hits = json.loads(sh([str(lexmem), "search", "staging database port", "--json"], env))["hits"]
    assert "6543" in hits[0]["memory"]["content"] and hits[0]["memory"]["project"] == str(repo)
    said = "The billing service is written in Rust and deployed with Nomad"
    sh([str(lexmem), "remember", said, "--project", "billing"], env)
    found = json.loads(sh([str(lexmem), "search", "what language is billing in", "--json"], env))
    assert found["hits"][0]["memory"]["content"] == said
    assert not (Path(env["LEXMEM_HOME"]) / "logs" / "hook.log").exists()  # no hook problem


@pytest.mark.slow
@slow
def test_wheel_and_sdist_build_install_into_a_fresh_venv_and_run(tmp_path: Path) -> None:
    tools = dict(BUILD_ENV)
    out = tmp_path / "dist"
    started = time.perf_counter()
    # Isolated: the build backend comes from PyPI (or pip's cache), as for any user.
    sh([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], tools, timeout=900)
    built = time.perf_counter() - started
    (sdist,) = out.glob("lexmem-*.tar.gz")
    (wheel,) = out.glob("lexmem-*.whl")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for f in ("pyproject.toml", "README.md", "LICENSE", "resources/__init__.py"):
        assert f in names
    for res in ROOT.joinpath("resources").rglob("*"):
        if res.is_file() and "__pycache__" not in res.parts:
            assert str(res.relative_to(ROOT)) in names, res
    with zipfile.ZipFile(wheel) as whl:
        inside = set(whl.namelist())
        entry_points = next(n for n in inside if n.endswith(".dist-info/entry_points.txt"))
        scripts = whl.read(entry_points).decode()
    for res in ("__init__.py", "icons/lexmem.svg", "themes/dark.qss", "model/tokenizer.json"):
        assert f"lexmem_resources/{res}" in inside
    for module in ROOT.joinpath("lexmem").rglob("*.py"):  # every subpackage's modules too
        assert module.relative_to(ROOT).as_posix() in inside, module
    assert (
        "lexmem = ui.front:main" in scripts and "lexmem-hook = lexmem.capture.entry:main" in scripts
    )

    venv = tmp_path / "venv"
    started = time.perf_counter()
    sh([sys.executable, "-m", "venv", str(venv)], tools)
    sh([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], tools,
       timeout=900)  # fmt: skip
    installed = time.perf_counter() - started
    env = clean_env(tmp_path)
    lexmem, hook = venv / "bin" / "lexmem", venv / "bin" / "lexmem-hook"
    assert sh([str(lexmem), "--version"], env).strip() == f"lexmem, version {__version__}"
    round_trip(lexmem, hook, tmp_path, env)
    print(f"\npython -m build: {built:.0f} s (sdist {sdist.stat().st_size / 1e6:.2f} MB, "
          f"wheel {wheel.stat().st_size / 1e6:.2f} MB); fresh venv + pip install: {installed:.0f} s")  # fmt: skip


# -- the PyInstaller bundle ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The bundle built from this checkout into a temporary folder, with PyInstaller's
    cache there too (so the build is a cold one, as in CI); removed afterwards (~700 MB)."""
    where = tmp_path_factory.mktemp("bundle")
    env = {**BUILD_ENV, "XDG_CACHE_HOME": str(where / "cache")}
    cmd = [sys.executable, str(ROOT / "packaging" / "build.py"), "--json",
           "--dist", str(where / "dist"), "--work", str(where / "work")]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    print(f"\nbundle: built in {result['seconds']:.0f} s, {result['bytes'] / 1e6:.0f} MB "
          f"in {result['files']} files")  # fmt: skip
    yield result
    shutil.rmtree(where, ignore_errors=True)


@pytest.mark.slow
@slow
def test_the_bundle_runs_the_cli_the_hook_and_search_on_its_own(
    bundle: dict[str, Any], tmp_path: Path
) -> None:
    lexmem, hook = Path(bundle["executable"]), Path(bundle["hook"])
    assert lexmem.parent == hook.parent  # one folder: installs write sibling paths
    env = clean_env(tmp_path)
    assert sh([str(lexmem), "--version"], env).strip() == f"lexmem, version {__version__}"
    commands = sh([str(lexmem), "--help"], env)
    for name in ("app", "mcp", "serve", "ingest", "install", "search"):
        assert f"\n  {name} " in commands
    round_trip(lexmem, hook, tmp_path, env)
    # The model came from inside the bundle, verified by its sha256.
    verified = json.loads((Path(env["LEXMEM_HOME"]) / "models" / "verified.json").read_text())
    assert Path(verified["path"]).is_relative_to(lexmem.parent)
    status = json.loads(sh([str(lexmem), "status", "--json"], env))
    assert status["memories"]["active"] == 2


@pytest.mark.slow
@slow
def test_installs_from_the_bundle_point_at_the_bundle(
    bundle: dict[str, Any], tmp_path: Path
) -> None:
    lexmem, hook = Path(bundle["executable"]), Path(bundle["hook"])
    env = clean_env(tmp_path)
    home = Path(env["HOME"])
    sh([str(lexmem), "install", "claude"], env)
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert shlex.split(command) == [str(hook), "claude"]
    servers = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert servers["lexmem"]["command"] == str(lexmem)
    # The installed command line runs, as the agent would run it.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    body = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "transcript_path": None,
            "cwd": str(repo), "prompt": "Which port does staging use?"}  # fmt: skip
    sh(shlex.split(command), env, stdin=json.dumps(body))
    assert len(list((Path(env["LEXMEM_HOME"]) / "inbox").glob("*.json"))) == 1

    sh([str(lexmem), "install", "desktop"], env)
    entry_file = Path(env["XDG_DATA_HOME"]) / "applications" / "lexmem.desktop"
    check_entry_file(entry_file)
    argv = shlex.split(entry_of(entry_file.read_text())["Exec"])
    assert argv[0] == str(lexmem) and argv[-2:] == ["app", "--show"]
    icon = Path(env["XDG_DATA_HOME"]) / "icons" / "hicolor" / "scalable" / "apps" / "lexmem.svg"
    assert icon.read_bytes() == ICON.read_bytes()
    sh([str(lexmem), "uninstall", "desktop"], env)
    assert not entry_file.exists() and not icon.exists()


@pytest.fixture(autouse=True)
def _no_service_left(tmp_path: Path) -> Iterator[None]:
    """A command from the bundle may start `lexmem serve` for the test's data folder
    (`lexmem mcp`'s relay does), and pytest keeps the folder: the service ran on after
    every CI run. Whatever the test, a service left for its folder is stopped here."""
    yield
    if sys.platform.startswith("linux"):
        for pid in _services_of(tmp_path / "data"):
            _stop(pid)


def _services_of(home: Path) -> list[int]:
    """The pids of `lexmem serve` processes of this user whose LEXMEM_HOME is ``home``."""
    want = b"LEXMEM_HOME=" + os.fsencode(home)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv[1:2] != [b"serve"]:
                continue
            if want in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_session_start_through_the_bundles_hook_starts_the_bundles_service(
    bundle: dict[str, Any], tmp_path: Path
) -> None:
    """Found on PATH by its bare name (argv[0] is then just `lexmem-hook`), the hook still
    starts the `lexmem serve` beside it."""
    lexmem = Path(bundle["executable"])
    env = clean_env(tmp_path, PATH=f"{lexmem.parent}:/usr/bin:/bin")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    body = {"hook_event_name": "SessionStart", "source": "startup", "session_id": "s",
            "transcript_path": None, "cwd": str(repo)}  # fmt: skip
    sh(["lexmem-hook", "claude"], env, stdin=json.dumps(body))
    lock = Path(env["LEXMEM_HOME"]) / "service.lock"
    pid = 0
    deadline = time.monotonic() + 60
    while not pid and time.monotonic() < deadline:
        text = lock.read_text().strip() if lock.exists() else ""
        pid = int(text) if text.isdigit() else 0
        time.sleep(0.1)
    assert pid, "no lexmem serve started within 60 s"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
        assert argv == [str(lexmem).encode(), b"serve"]
    finally:
        _stop(pid)


@pytest.mark.slow
@slow
def test_the_bundle_serves_mcp(bundle: dict[str, Any], tmp_path: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = clean_env(tmp_path)
    sh([bundle["executable"], "remember", "Releases are cut on Tuesdays", "--project", "ops"], env)

    async def session() -> tuple[set[str], str]:
        params = StdioServerParameters(
            command=bundle["executable"], args=["mcp"], env=env, cwd=str(tmp_path)
        )
        with open(tmp_path / "server.stderr", "w", encoding="utf-8") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as s,
            ):
                with anyio.fail_after(120):
                    await s.initialize()
                    tools = {t.name for t in (await s.list_tools()).tools}
                    found = await s.call_tool("search_memory", {"query": "when are releases cut"})
        return tools, str(found.content[0])

    tools, found = anyio.run(session)
    assert {"search_memory", "save_memory", "forget_memory"} <= tools
    assert "Releases are cut on Tuesdays" in found


@pytest.mark.slow
@slow
def test_the_bundles_app_starts_offscreen_without_import_errors(
    bundle: dict[str, Any], tmp_path: Path
) -> None:
    """The tray app (Qt's offscreen platform: no display here) runs its in-process
    service, then quits cleanly on SIGTERM."""
    env = clean_env(tmp_path, QT_QPA_PLATFORM="offscreen")
    log = tmp_path / "app.log"
    with open(log, "w", encoding="utf-8") as fh:
        app = subprocess.Popen([bundle["executable"], "app"], env=env, stdout=fh, stderr=fh)
    lock = Path(env["LEXMEM_HOME"]) / "service.lock"
    try:
        deadline = time.monotonic() + 90
        while app.poll() is None and time.monotonic() < deadline:
            if lock.exists() and lock.read_text().strip() == str(app.pid):
                break
            time.sleep(0.2)
        assert app.poll() is None, log.read_text()
        assert lock.read_text().strip() == str(app.pid), "the app's service did not start"
        time.sleep(2)  # the model loads and the first drain runs
    finally:
        app.send_signal(signal.SIGTERM)
        code = app.wait(60)
    text = log.read_text()
    assert code == 0, text
    for bad in ("Traceback", "Error", "No module named", "Could not load the Qt platform"):
        assert bad not in text, text
