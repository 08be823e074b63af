"""Where lexmem keeps its state, and its settings file.

Constraint: only the composition roots (the CLI, the service, the desktop app)
call :func:`lexmem.settings.load_settings`; everything else receives the values it
needs. The hook command reads what it applies through :func:`load_capture_rules`,
which checks the file the same way but builds none of the settings dataclasses.

All state lives under one data folder: ``LEXMEM_HOME`` when set, else the folder
named by the location pointer (``$XDG_CONFIG_HOME/lexmem/location``, written when the
person moves the data folder), else the platform's user data folder. Folders are
created 0700 and files 0600; the
process umask is tightened while lexmem writes so that files created by the
storage engine inherit the same modes.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

from lexmem import places
from lexmem.base import Frozen, atomic_write
from lexmem.errors import ConfigError, DataFolderError

# The hook imports this module on every call, so it imports nothing slow at module
# level: no ``typing``, ``tomllib`` (only when a settings file exists) or
# ``dataclasses`` (the settings dataclasses, and loading and saving them, live in
# :mod:`lexmem.settings`, which imports this module and never the other way round).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = [
    "CAPTURE_MODES",
    "CREATED_RECORD",
    "DEFAULT_MODEL",
    "DIGEST_LINKS",
    "DIGEST_LINK_NAME",
    "SCHEMA_VERSION",
    "CaptureRules",
    "Paths",
    "default_home",
    "digest_link",
    "digest_path",
    "load_capture_rules",
    "location_file",
    "read_location",
    "read_settings",
    "resolve_paths",
    "schema_steps",
    "secure_umask",
    "state_dir",
    "tighten_umask",
    "write_location",
]

SCHEMA_VERSION = 1
DEFAULT_MODEL = "lexmem/all-MiniLM-L6-v2-int8"
DIR_MODE = 0o700
FILE_MODE = 0o600
# In the data folder: the files and folders lexmem's installs created (agents' settings,
# the desktop entries), so that uninstalling removes exactly those.
CREATED_RECORD = "integrations.json"


class Paths(Frozen):
    """Every place lexmem reads or writes, derived from one data folder.

    A frozen value class with one field, ``home`` (:class:`~lexmem.base.Frozen`: the
    surface of ``@dataclass(frozen=True, slots=True)`` without importing ``dataclasses``).
    """

    __slots__ = ("home",)
    __match_args__ = ("home",)

    home: Path

    def __init__(self, home: Path) -> None:
        super().__init__(home)

    @property
    def settings(self) -> Path:
        return self.home / "settings.toml"

    @property
    def store(self) -> Path:
        return self.home / "store"

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def write_lock(self) -> Path:
        return self.home / "store.lock"

    @property
    def service_lock(self) -> Path:
        return self.home / "service.lock"

    @property
    def inbox(self) -> Path:
        return self.home / "inbox"

    @property
    def digests(self) -> Path:
        return self.home / "digests"

    @property
    def access(self) -> Path:
        """Searches' access records, queued for the single writer (one file per search)."""
        return self.home / "access"

    @property
    def progress(self) -> Path:
        """How far the writer's maintenance jobs are (one small file per job running)."""
        return self.home / "progress"

    def ensure(self) -> None:
        """Create the data folder tree with owner-only permissions."""
        with secure_umask():
            for folder in (self.home, self.store, self.models, self.logs):
                try:
                    folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
                except OSError as exc:
                    raise DataFolderError(
                        f"cannot create the data folder ({exc.strerror})", path=str(folder)
                    ) from exc
        if os.name == "posix":
            _tighten(self.home)


def _tighten(path: Path) -> None:
    """Owner-only mode on the data folder itself (it may predate lexmem)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(DIR_MODE)
    except OSError as exc:
        raise DataFolderError(
            f"cannot secure the data folder ({exc.strerror})", path=str(path)
        ) from exc


def default_home(environ: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The platform's per-user data folder for lexmem (what platformdirs would say).

    Constraint: the hook command resolves this too, so it stays standard-library only.
    """
    return Path(places.default_home(environ, platform))


def resolve_paths(environ: Mapping[str, str] | None = None) -> Paths:
    """``LEXMEM_HOME`` if set, else the folder the location pointer names, else the
    platform's per-user data folder."""
    return Paths(Path(places.data_home(environ)))


def state_dir(environ: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The per-user state folder, outside every data folder (the trial's record, the
    list of running services).

    ``$XDG_STATE_HOME/lexmem`` (``~/.local/state/lexmem``) on Linux; beside the location
    pointer on macOS and Windows, whose default data folders are elsewhere.
    """
    env = os.environ if environ is None else environ
    plat = platform or sys.platform
    if plat.startswith("win"):
        return Path(env.get("APPDATA") or str(Path.home() / "AppData" / "Roaming")) / "lexmem"
    if plat == "darwin":
        return Path.home() / "Library" / "Preferences" / "lexmem"
    xdg = env.get("XDG_STATE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "lexmem"


# --- the location pointer ----------------------------------------------------


def location_file(environ: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The pointer file naming a moved data folder, in the platform's config folder.

    Constraint: it lives outside every data folder (a move removes the old one), so on
    macOS and Windows it is not the data folder's parent: ``~/Library/Preferences`` and
    the roaming ``APPDATA`` rather than ``Application Support`` and ``LOCALAPPDATA``.
    """
    return Path(places.location_file(environ, platform))


def read_location(environ: Mapping[str, str] | None = None) -> Path | None:
    """The data folder the pointer names; None without a pointer (or with an unusable one).

    Constraint: the hook calls this on every run; it costs one failed ``open`` when there
    is no pointer. A pointer must hold one absolute path; anything else is ignored, so a
    damaged pointer falls back to the platform folder rather than to a relative one.
    """
    home = places.read_location(environ)
    return None if home is None else Path(home)


def write_location(home: Path | None, environ: Mapping[str, str] | None = None) -> None:
    """Point lexmem at ``home`` (atomically: :func:`~lexmem.base.atomic_write`), or remove the
    pointer (``None``: the platform folder again)."""
    target = location_file(environ)
    if home is None:
        try:
            target.unlink(missing_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot remove ({exc.strerror})", path=str(target)) from exc
        return
    if not home.is_absolute():
        raise ConfigError(f"the data folder must be an absolute path, not {home}", path=str(target))
    with secure_umask():
        try:
            target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            atomic_write(target, f"{home}\n", mode=FILE_MODE)
        except OSError as exc:
            raise ConfigError(f"cannot write ({exc.strerror})", path=str(target)) from exc


def tighten_umask() -> None:
    """Make every file this process creates from now on owner-only.

    Constraint: the storage engine writes files from its own threads (index builds,
    compaction), at moments a scoped umask cannot cover; a process that opens the
    store therefore keeps a tight umask for its whole life. It only ever removes
    permissions from the existing umask.
    """
    if os.name == "posix":
        old = os.umask(0o077)
        os.umask(old | 0o077)


class secure_umask:
    """Context manager: files and folders created inside are owner-only."""

    def __enter__(self) -> None:
        self._old = os.umask(0o077) if os.name == "posix" else None

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            os.umask(self._old)


# --- settings --------------------------------------------------------------

CAPTURE_MODES = ("off", "assist", "full")

# Every section of settings.toml: its settings and their defaults, as the dataclasses
# in :mod:`lexmem.settings` declare them (a test keeps the two equal). A file is
# validated against this table, so the hook can check a whole file as strictly as
# :func:`load_settings` does without building the dataclasses.
_SECTIONS: dict[str, dict[str, Any]] = {
    "embedding": {
        "model": DEFAULT_MODEL, "path": "", "pooling": "mean", "normalization": True,
        "dim": 384, "batch_size": 32, "threads": 0, "idle_unload_minutes": 10.0,
    },
    "search": {
        "default_limit": 10, "salience_weight": 0.15, "recency_weight": 0.10,
        "recency_half_life_days": 30.0, "pinned_boost": 0.10, "min_similarity": 0.15,
    },
    "store": {
        "user_id": "local", "decay_factor": 0.98, "salience_floor": 0.01,
        "vector_index_min_rows": 50_000, "retention_days": 0, "backend": "lance", "url": "",
    },
    "capture": {
        "mode": "assist", "project_modes": {}, "optout": [], "allow_paths": [],
        "window_turns": 6, "abandon_after_minutes": 120, "watch": [], "paused_until": "",
        "user_name": "", "settle_seconds": 1.0,
    },
    "context": {"digest_bytes": 6144},
    "llm": {
        "url": "", "model": "", "timeout_s": 30.0, "calls_per_day": 500, "tokens_per_day": 200_000,
    },
    "ui": {"theme": "system"},
    "team": {"url": "", "user": "", "projects": {}, "poll_seconds": 30.0},
}  # fmt: skip


class CaptureRules:
    """What the hook applies of ``[capture]``: the mode, per-project modes, opt-outs,
    allowed paths and the user's name (the same names and meaning as in
    :class:`CaptureSettings`)."""

    __slots__ = ("allow_paths", "mode", "optout", "paused_until", "project_modes", "user_name")

    mode: str
    project_modes: dict[str, str]
    optout: list[str]
    allow_paths: list[str]
    paused_until: str
    user_name: str

    def __init__(
        self,
        mode: str = _SECTIONS["capture"]["mode"],
        project_modes: dict[str, str] | None = None,
        optout: list[str] | None = None,
        allow_paths: list[str] | None = None,
        paused_until: str = "",
        user_name: str = "",
    ) -> None:
        self.paused_until = paused_until
        self.user_name = user_name
        self.mode = mode
        self.project_modes = {} if project_modes is None else project_modes
        self.optout = [] if optout is None else optout
        self.allow_paths = [] if allow_paths is None else allow_paths

    def __repr__(self) -> str:
        return (
            f"CaptureRules(mode={self.mode!r}, project_modes={self.project_modes!r}, "
            f"optout={self.optout!r}, allow_paths={self.allow_paths!r}, "
            f"paused_until={self.paused_until!r}, user_name={self.user_name!r})"
        )


def schema_steps(version: object, known: int) -> range:
    """The steps from layout ``version`` up to ``known``, one per version (step ``N`` takes
    layout N to N + 1); empty when the layout is current.

    Raises :class:`ValueError` with a one-line reason for a version that is not a whole
    number, or that is newer than ``known`` (a newer lexmem wrote it: this one must not
    touch it). The settings (below) and the data folder (:mod:`lexmem.store.migrations`) are
    both versioned this way.
    """
    if not isinstance(version, int) or version < 0:
        raise ValueError(f"schema_version must be a whole number, not {version!r}")
    if version > known:
        raise ValueError(f"written by a newer lexmem (schema {version}; this one knows {known})")
    return range(version, known)


def _migrate_0_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Move the top-level model into [embedding]."""
    # Layout 0 (unversioned) kept the model as a top-level ``model`` string.
    data = dict(data)
    model = data.pop("model", None)
    if model:
        data.setdefault("embedding", {})["model"] = model
    data["schema_version"] = 1
    return data


# The settings' steps, ``{N: layout N -> N + 1}``; each docstring names its step in errors.
# They live here, not in :mod:`lexmem.store.migrations`, because the hook reads (and migrates in
# memory) the settings without importing anything heavier than this module.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _migrate_0_to_1}


def migrate(data: dict[str, Any], *, path: str = "settings") -> dict[str, Any]:
    """Bring a settings mapping up to :data:`SCHEMA_VERSION`, step by step (in memory:
    the file is rewritten by :func:`load_settings`, or, when the store opens, by the data
    folder's migration, all or nothing with the store's own steps)."""
    try:
        steps = schema_steps(data.get("schema_version", 0), SCHEMA_VERSION)
    except ValueError as exc:
        raise ConfigError(str(exc), path=path) from exc
    for version in steps:
        data = MIGRATIONS[version](data)
    return data


_KEY_PARAMS = ("key", "token", "secret", "password", "auth", "signature")


def llm_url_problem(url: str) -> str | None:
    """Why ``[llm] url`` must not be kept as it is, or None. A URL carrying credentials
    (``https://user:key@host``, ``?api_key=...``) would put a key in settings.toml, in
    ``lexmem status`` and in logs; the key belongs in the keyring (Settings → LLM)."""
    from urllib.parse import parse_qsl, urlsplit

    parts = urlsplit(url.strip())
    if parts.username or parts.password:
        return "llm.url must not carry a user name or key (put the key in the keyring)"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if any(word in name.lower().replace("-", "_") for word in _KEY_PARAMS):
            return (
                f"llm.url must not carry a key in its query ({name}=…; put the key in the keyring)"
            )
    return None


# The storage backends by name (lexmem.store.backends makes them).
STORE_BACKENDS = ("lance", "postgres")


def store_url_problem(url: str) -> str | None:
    """Why ``[store] url`` must not be kept as it is, or None: the database's password
    belongs in the keyring, never in settings.toml."""
    return _password_problem(url, "store.url")


def _conninfo(text: str) -> tuple[dict[str, str], str | None]:
    """A PostgreSQL address (``postgresql://...`` or ``key=value ...``) as its parameters,
    and the password of a URL's user part (None without one)."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    if "://" not in text:
        pairs = re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)", text)
        return {k.lower(): v.strip("'") for k, v in pairs}, None
    parts = urlsplit(text)
    info = {k.lower(): v for k, v in parse_qsl(parts.query, keep_blank_values=True)}
    if "host" not in info:
        hosts = []
        for item in parts.netloc.rpartition("@")[2].split(","):
            host = item.rsplit(":", 1)[0] if item.count(":") == 1 else item
            hosts.append(unquote(host.strip("[]")))
        info["host"] = ",".join(hosts)
    return info, parts.password


def _password_problem(url: str, name: str) -> str | None:
    text = url.strip()
    if not text:
        return None
    info, password = _conninfo(text)
    if password or "password" in info:
        return f"{name} must not carry a password (put it in the keyring)"
    return None


def _local_host(host: str) -> bool:
    """A Unix socket's folder, or this machine over loopback."""
    import ipaddress

    if not host or host.startswith("/") or host.startswith("@"):
        return True
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def team_url_problem(url: str) -> str | None:
    """Why ``[team] url`` must not be kept as it is, or None: never a password (the keyring
    keeps it), and TLS that checks the server (``sslmode=verify-full``, or ``require`` or
    ``verify-ca`` with a CA file in ``sslrootcert``) unless the server is on this machine
    (a Unix socket, loopback)."""
    text = url.strip()
    if not text:
        return None
    problem = _password_problem(text, "team.url")
    if problem:
        return problem
    info, _ = _conninfo(text)
    if "://" in text and not text.split("://", 1)[0].startswith("postgres"):
        return "team.url must be a postgresql:// address"
    # libpq connects to hostaddr when given (host is then only the name TLS checks), so
    # both lists are judged: every entry of each must be this machine.
    hosts = [h.strip() for h in (info.get("host") or "").split(",")]
    hosts += [h.strip() for h in info["hostaddr"].split(",")] if "hostaddr" in info else []
    if all(_local_host(h) for h in hosts):
        return None
    mode = info.get("sslmode", "")
    if mode == "verify-full" or (mode in ("require", "verify-ca") and info.get("sslrootcert")):
        return None
    return (
        "team.url names a server on another machine without checked TLS: add "
        "sslmode=verify-full (or sslmode=require with sslrootcert=CA file)"
    )


def _check_section(name: str, raw: Any, path: str) -> dict[str, Any]:
    """The values a section sets, checked against :data:`_SECTIONS` (ints become floats)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"[{name}] must be a table", path=path)
    defaults = _SECTIONS[name]
    unknown = sorted(set(raw) - set(defaults))
    if unknown:
        raise ConfigError(f"unknown setting {name}.{unknown[0]}", path=path)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        expected = type(defaults[key])
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ConfigError(
                f"{name}.{key} must be {expected.__name__}, not {type(value).__name__}", path=path
            )
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{name}.{key} must be a list of strings", path=path)
        if isinstance(value, dict) and not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{name}.{key} must map strings to strings", path=path)
        if (name, key) == ("llm", "url") and (problem := llm_url_problem(value)):
            raise ConfigError(problem, path=path)
        if (name, key) == ("store", "url") and (problem := store_url_problem(value)):
            raise ConfigError(problem, path=path)
        if (name, key) == ("team", "url") and (problem := team_url_problem(value)):
            raise ConfigError(problem, path=path)
        if (name, key) == ("team", "poll_seconds") and not 1.0 <= value <= 3600.0:
            raise ConfigError("team.poll_seconds must be between 1 and 3600", path=path)
        if (name, key) == ("store", "backend") and value not in STORE_BACKENDS:
            raise ConfigError(
                f"store.backend must be one of {', '.join(STORE_BACKENDS)}, not {value!r}",
                path=path,
            )
        values[key] = value
    return values


def read_settings(file: Path) -> tuple[Any, int, dict[str, dict[str, Any]]] | None:
    """The file's schema version as written and once migrated, and the values each
    section sets (checked); None when there is no file.

    Raises :class:`ConfigError` for anything :func:`load_settings` would refuse.
    """
    if not file.exists():
        return None
    import tomllib

    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read settings ({exc})", path=str(file)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc})", path=str(file)) from exc
    old_version = data.get("schema_version", 0)
    data = migrate(data, path=str(file))
    sections = {name: _check_section(name, data.get(name), str(file)) for name in _SECTIONS}
    capture = {**_SECTIONS["capture"], **sections["capture"]}
    bad_modes = [m for m in capture["project_modes"].values() if m not in CAPTURE_MODES]
    if bad_modes:
        raise ConfigError(
            f"capture.project_modes values must be one of {', '.join(CAPTURE_MODES)}, not {bad_modes[0]!r}",
            path=str(file),
        )
    if capture["mode"] not in CAPTURE_MODES:
        raise ConfigError(
            f"capture.mode must be one of {', '.join(CAPTURE_MODES)}, not {capture['mode']!r}",
            path=str(file),
        )
    return old_version, data["schema_version"], sections


def load_capture_rules(paths: Paths) -> CaptureRules:
    """The hook's read of the settings: ``[capture]``'s rules, defaults when there is no file.

    The whole file is checked exactly as :func:`load_settings` checks it (the same
    :class:`ConfigError` for the same problems), but no dataclass is built and
    nothing is ever written back.
    """
    found = read_settings(paths.settings)
    if found is None:
        return CaptureRules()
    capture = found[2]["capture"]
    return CaptureRules(
        mode=capture.get("mode", _SECTIONS["capture"]["mode"]),
        project_modes=capture.get("project_modes"),
        optout=capture.get("optout"),
        allow_paths=capture.get("allow_paths"),
        paused_until=capture.get("paused_until", ""),
        user_name=capture.get("user_name", ""),
    )


def is_frozen() -> bool:
    """True inside a PyInstaller bundle."""
    return bool(getattr(sys, "frozen", False))


def digest_path(paths: Paths, project: str | None) -> Path:
    """Where the service keeps a project's context digest."""
    # The interpreter's built-in SHA-256 when it has one: ``hashlib`` loads OpenSSL
    # (~3 ms of every SessionStart). The digest is the same either way.
    try:
        from _sha2 import sha256  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:
            from hashlib import sha256

    key = sha256((project or "").encode("utf-8")).hexdigest()[:16]
    return paths.digests / f"{key}.md"


# The digests' index by folder: ``digests/at/<project folder>/digest.md``, a link to the
# project's digest, for Claude Code's SessionStart command, which finds a repository's
# digest from its working folder with the shell alone (no Python process the agent
# waits for; see lexmem.agents.integrations.session_start_command).
DIGEST_LINKS = "at"
DIGEST_LINK_NAME = "digest.md"


def digest_link(paths: Paths, project: str | None) -> Path | None:
    """Where a project folder's digest is linked from, or ``None`` for a project that is
    not an absolute folder (a name, the general digest) or on a platform without the
    POSIX shell the link is for."""
    if not project or os.name == "nt" or not project.startswith("/") or "\n" in project:
        return None
    parts = [p for p in project.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    return paths.digests.joinpath(DIGEST_LINKS, *parts, DIGEST_LINK_NAME)
