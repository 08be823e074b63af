"""The data folder, its permissions, and the versioned settings file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lexmem.api import Lexmem
from lexmem.config import SCHEMA_VERSION, Paths, resolve_paths
from lexmem.doctor import run_checks
from lexmem.embedder import Embedder
from lexmem.errors import ConfigError
from lexmem.settings import Settings, load_settings, save_settings


def test_lexmem_home_wins_else_the_platform_folder(tmp_path: Path) -> None:
    assert resolve_paths({"LEXMEM_HOME": str(tmp_path / "x")}).home == tmp_path / "x"
    platform_home = resolve_paths({}).home
    assert platform_home.name == "lexmem"
    assert str(platform_home).startswith(os.environ["XDG_DATA_HOME"])  # isolated by conftest


def test_missing_settings_mean_defaults(paths: Paths) -> None:
    s = load_settings(paths)
    assert s == Settings()
    assert not paths.settings.exists()


def test_settings_round_trip_atomically_with_owner_only_mode(paths: Paths) -> None:
    s = Settings()
    s.search.default_limit = 25
    s.embedding.batch_size = 16
    save_settings(paths, s)
    assert stat.S_IMODE(paths.settings.stat().st_mode) == 0o600
    assert load_settings(paths) == s
    assert not list(paths.home.glob(".settings.toml.*"))


def test_unversioned_settings_are_migrated_and_rewritten(paths: Paths) -> None:
    paths.settings.write_text('model = "BAAI/bge-small-en-v1.5"\n\n[search]\ndefault_limit = 7\n')
    s = load_settings(paths)
    assert s.schema_version == SCHEMA_VERSION
    assert s.embedding.model == "BAAI/bge-small-en-v1.5"
    assert s.search.default_limit == 7
    assert f"schema_version = {SCHEMA_VERSION}" in paths.settings.read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("schema_version = 99\n", "newer lexmem"),
        ("schema_version = 1\n[search]\ndefault_limit = 'ten'\n", "must be int"),
        ("schema_version = 1\n[search]\nbogus = 1\n", "unknown setting search.bogus"),
        ("schema_version = 1\nsearch = 3\n", "must be a table"),
        ("this is [not toml", "not valid TOML"),
    ],
)
def test_bad_settings_get_a_one_line_error_naming_the_file(
    paths: Paths, text: str, message: str
) -> None:
    paths.settings.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        load_settings(paths)
    assert str(paths.settings) in str(err.value)
    assert "\n" not in str(err.value)


def test_every_file_and_folder_in_the_data_folder_is_owner_only(
    tmp_path: Path, embedder: Embedder
) -> None:
    old = os.umask(0o022)  # a typical, permissive user umask: lexmem must not inherit it
    try:
        lm = Lexmem.open(tmp_path / "home", embedder=embedder)
        assert os.umask(0o077) & 0o077 == 0o077  # the process umask was tightened
    finally:
        os.umask(old)
    lm.remember("The project uses PostgreSQL for data storage")
    lm.store.optimize()
    save_settings(lm.paths, lm.settings)
    loose = []
    for root, dirs, files in os.walk(lm.paths.home):
        for name in dirs + files:
            p = Path(root) / name
            if p.is_symlink():
                continue
            mode = stat.S_IMODE(p.stat().st_mode)
            if mode & 0o077:
                loose.append((str(p), oct(mode)))
    assert loose == []
    assert stat.S_IMODE(lm.paths.home.stat().st_mode) == 0o700


def test_doctor_reports_and_fixes_loose_permissions(lm: Lexmem) -> None:
    lm.remember("something")
    (lm.paths.store / "meta.json").chmod(0o644)
    checks = {c.name: c for c in run_checks(str(lm.paths.home))}
    assert checks["permissions"].state == "fail" and "--fix" in checks["permissions"].detail
    assert checks["model"].state == "ok" and checks["store"].state == "ok"
    fixed = {c.name: c for c in run_checks(str(lm.paths.home), fix=True)}
    assert fixed["permissions"].state == "ok"
    assert stat.S_IMODE((lm.paths.store / "meta.json").stat().st_mode) == 0o600


def test_doctor_reports_a_broken_settings_file(paths: Paths) -> None:
    paths.settings.write_text("schema_version = 'x'\n")
    checks = {c.name: c for c in run_checks(str(paths.home))}
    assert checks["settings"].state == "fail"


def test_doctor_says_when_it_tightened_a_loose_data_folder(paths: Paths) -> None:
    paths.home.chmod(0o755)
    checks = {c.name: c for c in run_checks(str(paths.home))}
    assert checks["permissions"].state == "warn" and "now 0700" in checks["permissions"].detail
    assert stat.S_IMODE(paths.home.stat().st_mode) == 0o700


def test_capture_settings_round_trip_and_are_validated(paths: Paths) -> None:
    s = Settings()
    s.capture.mode = "full"
    s.capture.optout = ["/home/u/secret-repo"]
    s.capture.project_modes = {"/home/u/shop": "off"}
    save_settings(paths, s)
    assert load_settings(paths) == s
    paths.settings.write_text("schema_version = 1\n[capture]\nmode = 'sometimes'\n")
    with pytest.raises(ConfigError, match=r"capture\.mode"):
        load_settings(paths)
    paths.settings.write_text("schema_version = 1\n[capture]\noptout = [1, 2]\n")
    with pytest.raises(ConfigError, match="list of strings"):
        load_settings(paths)


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("linux", {"XDG_DATA_HOME": "/x/data"}, "/x/data/lexmem"),
        ("linux", {"XDG_DATA_HOME": "relative"}, "~/.local/share/lexmem"),
        ("darwin", {}, "~/Library/Application Support/lexmem"),
        ("win32", {"LOCALAPPDATA": "C:/Users/u/AppData/Local"}, "C:/Users/u/AppData/Local/lexmem"),
    ],
)
def test_default_home_per_platform(platform: str, env: dict[str, str], expected: str) -> None:
    from lexmem.config import default_home

    assert default_home(env, platform) == Path(expected).expanduser()


# -- the hook's light read of the settings ------------------------------------------------


def test_the_section_table_matches_the_settings_dataclasses() -> None:
    """``config._SECTIONS`` (what a file is checked against) declares the dataclasses' fields."""
    import dataclasses

    from lexmem import config
    from lexmem.settings import (
        CaptureSettings,
        ContextSettings,
        EmbeddingSettings,
        LlmSettings,
        SearchSettings,
        StoreSettings,
        TeamSettings,
        UiSettings,
    )

    classes = {
        "embedding": EmbeddingSettings,
        "search": SearchSettings,
        "store": StoreSettings,
        "capture": CaptureSettings,
        "context": ContextSettings,
        "llm": LlmSettings,
        "ui": UiSettings,
        "team": TeamSettings,
    }
    assert list(config._SECTIONS) == list(classes)
    for name, cls in classes.items():
        declared = dataclasses.asdict(cls())
        table = config._SECTIONS[name]
        assert list(table) == list(declared), name
        assert {k: (type(v), v) for k, v in table.items()} == {
            k: (type(v), v) for k, v in declared.items()
        }, name
    assert [f.name for f in dataclasses.fields(Settings)] == ["schema_version", *classes]


SETTINGS_FILES = [
    "",
    "schema_version = 1\n",
    'model = "BAAI/bge-small-en-v1.5"\n[capture]\nmode = "off"\n',  # layout 0, migrated
    "schema_version = 1\n[capture]\nmode = 'full'\noptout = ['/r/secret']\n"
    "allow_paths = ['/r']\nproject_modes = {'/r/shop' = 'off'}\nwindow_turns = 3\n",
    "schema_version = 1\n[search]\nsalience_weight = 1\n[capture]\nwatch = ['/notes']\n",
    # what load_settings refuses, the hook must refuse the same way
    "schema_version = 99\n",
    "schema_version = 'x'\n",
    "schema_version = 1\n[search]\ndefault_limit = 'ten'\n",
    "schema_version = 1\n[search]\nbogus = 1\n",
    "schema_version = 1\nsearch = 3\n",
    "schema_version = 1\n[embedding]\ndim = true\n",
    "schema_version = 1\n[store]\nuser_id = 7\n[capture]\nmode = 'nope'\n",
    "schema_version = 1\n[capture]\nmode = 'sometimes'\n",
    "schema_version = 1\n[capture]\noptout = [1, 2]\n",
    "schema_version = 1\n[capture]\nproject_modes = {'/r' = 'loud'}\n",
    "schema_version = 1\n[capture]\nproject_modes = {'/r' = 1}\n",
    "schema_version = 1\n[capture]\nwindow_turns = 2.5\n",
    "this is [not toml",
    b"schema_version = 1\n# \xff\n",
]


@pytest.mark.parametrize("text", SETTINGS_FILES)
def test_the_hooks_capture_rules_agree_with_load_settings(paths: Paths, text: str | bytes) -> None:
    from lexmem.config import load_capture_rules

    if text:
        paths.home.mkdir(parents=True, exist_ok=True)
        data = text if isinstance(text, bytes) else text.encode()
        paths.settings.write_bytes(data)
    before = paths.settings.read_bytes() if paths.settings.exists() else None
    try:
        expected = load_settings(paths, write_back=False).capture
    except ConfigError as exc:
        with pytest.raises(ConfigError) as err:
            load_capture_rules(paths)
        assert str(err.value) == str(exc)
    else:
        rules = load_capture_rules(paths)
        assert (rules.mode, rules.project_modes, rules.optout, rules.allow_paths) == (
            expected.mode,
            expected.project_modes,
            expected.optout,
            expected.allow_paths,
        )
    after = paths.settings.read_bytes() if paths.settings.exists() else None
    assert after == before  # the hook never writes the settings back


def test_importing_config_builds_no_dataclass_and_never_loads_the_settings_module() -> None:
    """The hook imports config on every call: the dataclasses (``dataclasses`` pulls in
    ``inspect``) live in :mod:`lexmem.settings`, which imports config, never the reverse."""
    import json
    import subprocess
    import sys

    script = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        "import lexmem.config as c\n"
        "light = sorted(set(sys.modules) - before)\n"
        "print(json.dumps([light, hasattr(c, 'Settings')]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=True, timeout=60
    ).stdout
    light, has_settings = json.loads(out.decode().splitlines()[-1])
    assert not {"dataclasses", "tomllib", "typing", "lexmem.settings"} & set(light)
    assert not has_settings


def test_paths_is_a_frozen_value() -> None:
    import copy
    import pickle

    a, b = Paths(Path("/x/lexmem")), Paths(Path("/x/lexmem"))
    assert a == b and hash(a) == hash(b) and a != Paths(Path("/y"))
    assert repr(a) == f"Paths(home={Path('/x/lexmem')!r})"
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a
    with pytest.raises(AttributeError):
        a.home = Path("/y")
    match a:
        case Paths(home):
            assert home == Path("/x/lexmem")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://team:hunter2@db.example/lexmem",
        "postgresql://db.example/lexmem?password=hunter2",
        "host=db.example dbname=lexmem password=hunter2",
    ],
)
def test_a_database_address_with_its_password_is_refused(tmp_path: Path, url: str) -> None:
    paths = Paths(tmp_path / "home")
    paths.ensure()
    paths.settings.write_text(f'[store]\nbackend = "postgres"\nurl = "{url}"\n')
    with pytest.raises(ConfigError, match="must not carry a password"):
        load_settings(paths)
    assert "hunter2" in paths.settings.read_text()  # refused, not rewritten


def test_the_store_backend_is_one_lexmem_knows(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "home")
    paths.ensure()
    paths.settings.write_text('[store]\nbackend = "mysql"\n')
    with pytest.raises(ConfigError, match=r"store\.backend must be one of lance, postgres"):
        load_settings(paths)
    paths.settings.write_text(
        '[store]\nbackend = "postgres"\nurl = "postgresql://team@db.example/lexmem"\n'
    )
    settings = load_settings(paths)
    assert (settings.store.backend, settings.store.url) == (
        "postgres",
        "postgresql://team@db.example/lexmem",
    )
