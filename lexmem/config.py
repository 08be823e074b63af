"""Where lexmem keeps its state, and its settings file.

Constraint: only the composition roots (the CLI, the service, the desktop app)
call :func:`load_settings`; everything else receives the values it needs.

All state lives under one data folder: ``LEXMEM_HOME`` when set, else the
platform's user data folder. Folders are created 0700 and files 0600; the
process umask is tightened while lexmem writes so that files created by the
storage engine inherit the same modes.
"""

from __future__ import annotations

import os
import stat
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, DataFolderError

__all__ = [
    "DEFAULT_MODEL",
    "SCHEMA_VERSION",
    "CaptureSettings",
    "EmbeddingSettings",
    "Paths",
    "SearchSettings",
    "Settings",
    "StoreSettings",
    "default_home",
    "load_settings",
    "resolve_paths",
    "save_settings",
    "secure_umask",
    "tighten_umask",
]

SCHEMA_VERSION = 1
DEFAULT_MODEL = "lexmem/all-MiniLM-L6-v2-int8"
DIR_MODE = 0o700
FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class Paths:
    """Every place lexmem reads or writes, derived from one data folder."""

    home: Path

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
    env = os.environ if environ is None else environ
    plat = platform or sys.platform
    if plat.startswith("win"):
        base = env.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "lexmem"
    if plat == "darwin":
        return Path.home() / "Library" / "Application Support" / "lexmem"
    xdg = env.get("XDG_DATA_HOME", "").strip()
    base_path = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base_path / "lexmem"


def resolve_paths(environ: Mapping[str, str] | None = None) -> Paths:
    """``LEXMEM_HOME`` if set, else the platform's per-user data folder."""
    env = os.environ if environ is None else environ
    home = env.get("LEXMEM_HOME", "").strip()
    if home:
        return Paths(Path(home).expanduser().absolute())
    return Paths(default_home(env))


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


@dataclass(slots=True)
class EmbeddingSettings:
    # A fastembed model name, or lexmem's embedded default. ``path`` points at a
    # local folder (model.onnx + tokenizer files) for models that must not be fetched.
    model: str = DEFAULT_MODEL
    path: str = ""
    pooling: str = "mean"
    normalization: bool = True
    dim: int = 384
    batch_size: int = 32
    threads: int = 0


@dataclass(slots=True)
class SearchSettings:
    default_limit: int = 10
    salience_weight: float = 0.15
    recency_weight: float = 0.10
    recency_half_life_days: float = 30.0
    pinned_boost: float = 0.10
    # all-MiniLM-L6-v2 puts unrelated sentences at cosine ~0-0.15 from each other.
    min_similarity: float = 0.15


@dataclass(slots=True)
class StoreSettings:
    user_id: str = "local"
    decay_factor: float = 0.98
    salience_floor: float = 0.01
    vector_index_min_rows: int = 50_000


CAPTURE_MODES = ("off", "assist", "full")


@dataclass(slots=True)
class CaptureSettings:
    # off: nothing automatic; assist: only high-confidence durable facts; full: broader.
    mode: str = "assist"
    # Per-project overrides: repository root -> mode.
    project_modes: dict[str, str] = field(default_factory=dict)
    # Repository roots that leave no trace (a `.lexmem-optout` file in a repository works too).
    optout: list[str] = field(default_factory=list)
    # When not empty, automatic capture only from these folders (and below).
    allow_paths: list[str] = field(default_factory=list)
    # Events buffered per session before candidates are extracted.
    window_turns: int = 6
    # A session silent this long is abandoned.
    abandon_after_minutes: int = 120
    # Markdown folders watched for notes.
    watch: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Settings:
    schema_version: int = SCHEMA_VERSION
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    capture: CaptureSettings = field(default_factory=CaptureSettings)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _migrate_0_to_1(data: dict[str, Any]) -> dict[str, Any]:
    # Layout 0 (unversioned) kept the model as a top-level ``model`` string.
    data = dict(data)
    model = data.pop("model", None)
    if model:
        data.setdefault("embedding", {})["model"] = model
    data["schema_version"] = 1
    return data


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _migrate_0_to_1}


def migrate(data: dict[str, Any], *, path: str = "settings") -> dict[str, Any]:
    """Bring a settings mapping up to :data:`SCHEMA_VERSION`, step by step."""
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or version < 0:
        raise ConfigError(f"schema_version must be a whole number, not {version!r}", path=path)
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"written by a newer lexmem (schema {version}; this one knows {SCHEMA_VERSION})",
            path=path,
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version = data["schema_version"]
    return data


def _section(cls: type[Any], raw: Any, name: str, path: str) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ConfigError(f"[{name}] must be a table", path=path)
    known = {f for f in cls.__dataclass_fields__}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown setting {name}.{unknown[0]}", path=path)
    defaults = cls()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        expected = type(getattr(defaults, key))
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
        values[key] = value
    return cls(**values)


def load_settings(paths: Paths, *, write_back: bool = True) -> Settings:
    """Read settings.toml (defaults when absent), migrating older layouts.

    A migrated file is written back unless ``write_back`` is false (the hook reads
    settings but never writes them).
    """
    file = paths.settings
    if not file.exists():
        return Settings()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read settings ({exc})", path=str(file)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc})", path=str(file)) from exc
    old_version = data.get("schema_version", 0)
    data = migrate(data, path=str(file))
    settings = Settings(
        schema_version=data["schema_version"],
        embedding=_section(EmbeddingSettings, data.get("embedding"), "embedding", str(file)),
        search=_section(SearchSettings, data.get("search"), "search", str(file)),
        store=_section(StoreSettings, data.get("store"), "store", str(file)),
        capture=_section(CaptureSettings, data.get("capture"), "capture", str(file)),
    )
    bad_modes = [m for m in settings.capture.project_modes.values() if m not in CAPTURE_MODES]
    if bad_modes:
        raise ConfigError(
            f"capture.project_modes values must be one of {', '.join(CAPTURE_MODES)}, not {bad_modes[0]!r}",
            path=str(file),
        )
    if settings.capture.mode not in CAPTURE_MODES:
        raise ConfigError(
            f"capture.mode must be one of {', '.join(CAPTURE_MODES)}, not {settings.capture.mode!r}",
            path=str(file),
        )
    if old_version != SCHEMA_VERSION and write_back:
        save_settings(paths, settings)
    return settings


def save_settings(paths: Paths, settings: Settings) -> None:
    """Write settings.toml atomically (temporary file, fsync, rename), mode 0600."""
    import tomli_w

    paths.ensure()
    target = paths.settings
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    text = tomli_w.dumps(settings.to_dict())
    with secure_umask():
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ConfigError(f"cannot write settings ({exc.strerror})", path=str(target)) from exc


def is_frozen() -> bool:
    """True inside a PyInstaller bundle."""
    return bool(getattr(sys, "frozen", False))
