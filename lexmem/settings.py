"""The sections of ``settings.toml`` as dataclasses.

Loading and saving them is here too. The hook command never imports this module: it
reads the settings it needs through :mod:`lexmem.config` without building these
classes, and ``dataclasses`` alone (it pulls in ``inspect``) would cost it ~10 ms on
every call. ``config`` validates a file against the same fields and defaults (its
``_SECTIONS`` table, which a test keeps equal to these classes); this module imports
``config``, never the other way round.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lexmem.base import atomic_write
from lexmem.config import (
    DEFAULT_MODEL,
    FILE_MODE,
    SCHEMA_VERSION,
    Paths,
    llm_url_problem,
    read_settings,
    secure_umask,
    store_url_problem,
    team_url_problem,
)
from lexmem.errors import ConfigError

__all__ = [
    "CaptureSettings",
    "ContextSettings",
    "EmbeddingSettings",
    "LlmSettings",
    "SearchSettings",
    "Settings",
    "StoreSettings",
    "TeamSettings",
    "UiSettings",
    "load_settings",
    "save_settings",
]


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
    # A long-running app or service drops the model (~250 MB, with its process) after this
    # many minutes without an embedding, and loads it again when next needed (0: keep it).
    idle_unload_minutes: float = 10.0


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
    # Archived memories are forgotten for good after this many days (0: kept forever).
    retention_days: int = 0
    # Where the memories are kept: "lance" (the data folder) or "postgres" (a PostgreSQL
    # database with pgvector at ``url``, written without its password).
    backend: str = "lance"
    url: str = ""


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
    # Automatic capture paused until this UTC time ("YYYY-MM-DDTHH:MM:SSZ"; "" = not paused).
    paused_until: str = ""
    # Your name as the speaker of your turns in agent sessions ("" = your login name).
    user_name: str = ""
    # Agents' events wait in the inbox until none has come for this long (seconds; at
    # most 60), so that the service's work on them does not compete with the agent's
    # own while it works. What a person gives (remember, edits) is taken in at once.
    settle_seconds: float = 1.0


@dataclass(slots=True)
class ContextSettings:
    # The size cap of a project's session-start digest (Claude Code previews >10 KB).
    digest_bytes: int = 6144


@dataclass(slots=True)
class LlmSettings:
    # An OpenAI-compatible chat-completions endpoint; empty = no LLM, nothing leaves the
    # machine. Its API key lives in the OS keyring, never here.
    url: str = ""
    model: str = ""
    timeout_s: float = 30.0
    # The daily budget (0: no limit). When it is spent the rules work alone until tomorrow;
    # the counters are in llm.json in the data folder (`lexmem llm status`).
    calls_per_day: int = 500
    tokens_per_day: int = 200_000


@dataclass(slots=True)
class UiSettings:
    # system (follow the desktop's palette), light or dark.
    theme: str = "system"


@dataclass(slots=True)
class TeamSettings:
    # The team's PostgreSQL database (with pgvector), written without its password (the
    # OS keyring keeps that); "" = no team. Off this machine it must use checked TLS.
    url: str = ""
    # The role lexmem connects as ("" = the one in the url, else the login name).
    user: str = ""
    # Which local projects (a repository root or a name) are shared, and under which
    # name the team knows each: local project -> team project.
    projects: dict[str, str] = field(default_factory=dict)
    # How often the service asks the server for changes when it is not told of them.
    poll_seconds: float = 30.0


@dataclass(slots=True)
class Settings:
    schema_version: int = SCHEMA_VERSION
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    capture: CaptureSettings = field(default_factory=CaptureSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    llm: LlmSettings = field(default_factory=LlmSettings)
    ui: UiSettings = field(default_factory=UiSettings)
    team: TeamSettings = field(default_factory=TeamSettings)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_settings(paths: Paths, *, write_back: bool = True) -> Settings:
    """Read settings.toml (defaults when absent), migrating older layouts.

    A migrated file is written back unless ``write_back`` is false (the hook reads
    settings but never writes them).
    """
    found = read_settings(paths.settings)
    if found is None:
        return Settings()
    old_version, version, sections = found
    settings = Settings(
        schema_version=version,
        embedding=EmbeddingSettings(**sections["embedding"]),
        search=SearchSettings(**sections["search"]),
        store=StoreSettings(**sections["store"]),
        capture=CaptureSettings(**sections["capture"]),
        context=ContextSettings(**sections["context"]),
        llm=LlmSettings(**sections["llm"]),
        ui=UiSettings(**sections["ui"]),
        team=TeamSettings(**sections["team"]),
    )
    if old_version != SCHEMA_VERSION and write_back:
        save_settings(paths, settings)
    return settings


def save_settings(paths: Paths, settings: Settings) -> None:
    """Write settings.toml atomically (:func:`~lexmem.base.atomic_write`), mode 0600."""
    import tomli_w

    problem = (
        llm_url_problem(settings.llm.url)
        or store_url_problem(settings.store.url)
        or team_url_problem(settings.team.url)
    )
    if problem:
        raise ConfigError(problem, path=str(paths.settings))
    paths.ensure()
    target = paths.settings
    text = tomli_w.dumps(settings.to_dict())
    with secure_umask():
        try:
            atomic_write(target, text, mode=FILE_MODE)
        except OSError as exc:
            raise ConfigError(f"cannot write settings ({exc.strerror})", path=str(target)) from exc
