"""Shared helpers for the benchmark scripts in ``bench/``.

- :func:`machine_info`: what the numbers were measured on (cores, load, versions).
- :func:`percentiles`, :class:`Stopwatch`: timing summaries.
- :func:`write_result`: print a result as JSON and save it as ``DIR/<name>.json``.
- :func:`bench_tempdir`: a temporary folder that is removed however the run ends.
- :class:`MemoryCorpus`: deterministic, realistic agent-session memories (tech-stack
  facts, preferences, bug-fix episodes, procedures) with questions they answer.

Every benchmark writes a top-level ``"summary"`` object (see :func:`make_summary`),
which ``bench/run_all.py`` collects into one table.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BenchError",
    "MemoryCorpus",
    "MemoryRow",
    "Query",
    "Stopwatch",
    "bench_tempdir",
    "dir_bytes",
    "load_average",
    "machine_info",
    "make_summary",
    "percentiles",
    "write_result",
]


class BenchError(Exception):
    """A problem the user can fix (bad arguments, unwritable folder): one line, no traceback."""


# --- measuring ---------------------------------------------------------------


def percentiles(values_ms: Sequence[float], digits: int = 3) -> dict[str, float]:
    """p50/p95/mean/min/max of a list of milliseconds (nearest-rank percentiles)."""
    if not values_ms:
        return {"n": 0}
    xs = sorted(values_ms)
    n = len(xs)

    def rank(p: float) -> float:
        return xs[min(n - 1, max(0, round(p / 100 * n + 0.5) - 1))]

    return {
        "n": n,
        "p50_ms": round(rank(50), digits),
        "p95_ms": round(rank(95), digits),
        "mean_ms": round(sum(xs) / n, digits),
        "min_ms": round(xs[0], digits),
        "max_ms": round(xs[-1], digits),
    }


class Stopwatch:
    """Accumulates wall time over several ``with watch:`` blocks."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._t0 = 0.0

    def __enter__(self) -> Stopwatch:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds += time.perf_counter() - self._t0


def dir_bytes(path: Path) -> int:
    """Apparent size of every file below ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _mem_total_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    return None


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_info() -> dict[str, Any]:
    """Cores, memory, load and library versions: enough to compare two runs."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "cpu_model": _cpu_model(),
        "mem_total_gib": _mem_total_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "versions": {
            d: _version(d)
            for d in (
                "lexmem",
                "lancedb",
                "pylance",
                "pyarrow",
                "numpy",
                "fastembed",
                "onnxruntime",
            )
        },
        "load_average_at_start": load_average(),
        "thread_env": {
            k: os.environ.get(k)
            for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
        },
    }


# --- results -------------------------------------------------------------------


def make_summary(
    headline: str, value: float, unit: str, baseline: str, baseline_value: float
) -> dict[str, Any]:
    """The object ``run_all.py`` reads: our figure, the baseline's, and their ratio."""
    ratio = value / baseline_value if baseline_value else float("nan")
    return {
        "headline": headline,
        "value": round(float(value), 3),
        "unit": unit,
        "baseline": baseline,
        "baseline_value": round(float(baseline_value), 3),
        "ratio": round(ratio, 3),
    }


def make_figures(*rows: tuple[str, float, str, str, float]) -> list[dict[str, Any]]:
    """Every figure a benchmark reports beside its headline, each with its baseline:
    ``(headline, value, unit, baseline, baseline_value)`` rows; ``run_all.py`` prints
    one table line per figure."""
    return [make_summary(*row) for row in rows]


def write_result(name: str, result: dict[str, Any], out_dir: Path | None) -> Path | None:
    """Print ``result`` as JSON on stdout and, with ``out_dir``, save ``out_dir/<name>.json``."""
    text = json.dumps(result, indent=2, sort_keys=False, default=str)
    print(text, flush=True)
    if out_dir is None:
        return None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f"{name}.json"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise BenchError(f"cannot write {out_dir / (name + '.json')} ({exc.strerror})") from exc
    return target


@contextlib.contextmanager
def bench_tempdir(parent: Path | None = None, prefix: str = "lexmem-bench-") -> Iterator[Path]:
    """A fresh folder, removed when the block ends (also on errors and Ctrl-C)."""
    if parent is not None:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BenchError(f"cannot create {parent} ({exc.strerror})") from exc
    try:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as exc:
        raise BenchError(f"cannot create a temporary folder ({exc.strerror})") from exc
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- a realistic corpus ------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_PROJECT_NAMES = _words(
    "orion atlas kestrel bluebird quartz ember juniper nimbus pelican saffron tundra vortex "
    "willow zephyr cobalt falcon granite harbor ivy lynx maple nova onyx prism raven sierra "
    "topaz umber violet walnut yarrow acorn beacon cedar fjord glacier heron iris lantern "
    "meadow"
)
_PROJECT_SUFFIXES = _words("api web worker cli infra mobile docs billing search auth")
_PEOPLE = _words(
    "Alice Bob Priya Chen Maria Tomás Aisha Kenji Olga Sam Noor Lars Fatima Diego Mei Ravi "
    "Zoe Yusuf Ingrid Kwame"
)
_MODULES = _words(
    "auth billing search ingest notifications payments users reports sync export "
    "scheduler invoices webhooks sessions uploads"
)
_FILE_NAMES = _words(
    "handlers.py models.py client.ts worker.go routes.rs cache.py settings.py db.py auth.ts "
    "service.py scheduler.go api.ts views.py queries.sql jobs.py middleware.ts store.rs "
    "config.yaml retry.py serializers.py"
)
_FILE_DIRS = ("src/{m}", "app/{m}", "internal/{m}", "lib/{m}", "services/{m}", "packages/{m}/src")
_MIGRATION_DIRS = ("db", "backend", "server", "src/db", "infra/sql")
_STACKS = (
    ("FastAPI", "Python"), ("Django", "Python"), ("Flask", "Python"), ("NestJS", "TypeScript"),
    ("Express", "TypeScript"), ("Gin", "Go"), ("chi", "Go"), ("Axum", "Rust"),
    ("Actix Web", "Rust"), ("Spring Boot", "Java"), ("Ktor", "Kotlin"), ("Rails", "Ruby"),
    ("Phoenix", "Elixir"), ("ASP.NET Core", "C#"), ("Laravel", "PHP"),
)  # fmt: skip
_DBS = (
    "PostgreSQL 16", "PostgreSQL 15", "MySQL 8.0", "SQLite", "MongoDB 7", "Redis 7", "DynamoDB",
    "ClickHouse", "DuckDB", "CockroachDB", "MariaDB 11", "Cassandra",
)  # fmt: skip
_MIGRATION_TOOLS = (
    "Alembic", "Flyway", "Liquibase", "Prisma Migrate", "golang-migrate", "Django migrations",
    "sqlx migrate", "Knex",
)  # fmt: skip
_FRONTENDS = (
    "React 18",
    "Vue 3",
    "Svelte 5",
    "Angular 17",
    "SolidJS",
    "Next.js 14",
    "Nuxt 3",
    "Astro",
)
_BUNDLERS = ("Vite", "webpack", "esbuild", "Rollup", "Turbopack", "Parcel")
_TEST_TOOLS = (
    "pytest",
    "Jest",
    "Vitest",
    "Playwright",
    "Cypress",
    "go test",
    "cargo test",
    "RSpec",
)
_LINTERS = ("ruff", "ESLint", "golangci-lint", "clippy", "mypy", "Prettier", "Black", "RuboCop")
_PKG_TOOLS = ("uv", "Poetry", "pip-tools", "pnpm", "npm", "yarn", "cargo", "Gradle", "Maven")
_CLOUDS = ("AWS", "GCP", "Azure", "Fly.io", "Hetzner", "DigitalOcean", "Render", "Vercel")
_REGIONS = ("eu-west-1", "us-east-1", "eu-central-1", "ap-southeast-2", "us-west-2", "europe-west4")
_CDNS = ("Cloudflare", "CloudFront", "Fastly", "an nginx ingress", "Caddy", "Traefik")
_CI = ("GitHub Actions", "GitLab CI", "CircleCI", "Buildkite", "Jenkins", "Drone")
_QUEUES = ("Kafka", "RabbitMQ", "SQS", "NATS", "Redis Streams", "Celery", "Sidekiq", "Temporal")
_BUGS = (
    "race condition", "memory leak", "off-by-one error", "deadlock", "N+1 query",
    "timezone bug", "null pointer dereference", "stale cache entry", "connection pool exhaustion",
    "unicode decoding error", "integer overflow", "infinite retry loop",
)  # fmt: skip
_COLUMNS = ("user_id", "created_at", "tenant_id", "order_id", "email", "status", "updated_at")
_SETTINGS = ("timeout", "max_connections", "batch_size", "retry_limit", "cache_ttl", "page_size")
_LIBS = (
    "requests", "httpx", "SQLAlchemy", "pydantic", "axios", "lodash", "tokio", "serde", "grpcio",
    "boto3", "numpy", "protobuf", "celery", "react-query",
)  # fmt: skip
_CAUSES = (
    "a missing index on {column}", "the connection pool was capped at {n2} connections",
    "a cached token was never refreshed", "the cron job ran in UTC instead of local time",
    "two workers updated the same row without a lock", "the retry loop had no backoff",
    "an unbounded in-memory cache", "a wrong default for {setting}",
    "the ORM loaded every related row one by one", "a timeout of {n2} ms on the upstream call",
    "the list endpoint ignored the page size", "float rounding in the currency conversion",
)  # fmt: skip
_FIXES = (
    "adding a composite index on ({column}, created_at)", "raising the pool size to {n2}",
    "taking a row lock with SELECT ... FOR UPDATE", "exponential backoff with jitter",
    "bounding the cache with an LRU of {n2} entries",
    "normalising timestamps to UTC at the API boundary", "pinning {lib} to the previous release",
    "batching the lookups into one JOIN", "moving {setting} into the settings file",
    "storing amounts as integer cents",
)  # fmt: skip
_PREFS = (
    "concise answers with the code first", "type hints on every public function",
    "small focused commits with conventional commit messages", "tabs over spaces in Go code",
    "British spelling in the documentation", "writing the failing test before the fix",
    "no emojis in commit messages", "explicit error values over exceptions for control flow",
    "four-space indentation", "f-strings over str.format", "dataclasses over plain dicts",
    "squash merges on main", "rebasing instead of merge commits",
    "structured JSON logs over printf debugging", "feature flags for risky changes",
)  # fmt: skip
_ENV_VARS = ("DATABASE_URL", "REDIS_URL", "API_TOKEN", "SENTRY_DSN", "AWS_PROFILE", "LOG_LEVEL")
_SERVICES = ("Stripe", "SendGrid", "Twilio", "OpenAI", "GitHub", "Sentry", "Datadog", "Slack")
_VAULTS = ("1Password", "AWS Secrets Manager", "HashiCorp Vault", "Doppler", "the CI secrets")
_BUILD_CMDS = ("make dist", "uv build", "pnpm build", "cargo build --release", "./gradlew assemble",
               "go build ./...", "npm run build")  # fmt: skip
_TEST_CMDS = ("pytest -x", "pnpm test", "go test ./...", "cargo test", "./gradlew test",
              "bundle exec rspec", "make test")  # fmt: skip
_MIG_CMDS = ("make migration", "alembic revision --autogenerate", "npx prisma migrate dev",
             "python manage.py makemigrations", "sqlx migrate add")  # fmt: skip
_LOG_CMDS = ("kubectl logs -f", "fly logs", "heroku logs --tail", "aws logs tail --follow",
             "journalctl -fu app")  # fmt: skip
_APMS = ("Datadog", "Honeycomb", "Grafana Tempo", "Jaeger", "Sentry Performance", "New Relic")
_TOOL_ERRORS = (
    ("mypy", "Cannot find implementation or library stub", ".mypy_cache", "mypy ."),
    ("pnpm", "ERR_PNPM_OUTDATED_LOCKFILE", "node_modules", "pnpm install"),
    ("cargo", "failed to select a version", "Cargo.lock", "cargo update"),
    ("docker compose", "port is already allocated", "the stopped containers", "docker compose up"),
    ("pytest", "ImportMismatchError", "the __pycache__ folders", "pytest"),
    ("Gradle", "Could not resolve all dependencies", "~/.gradle/caches", "./gradlew build"),
    ("terraform", "Error acquiring the state lock", ".terraform", "terraform init"),
    ("vite", "Outdated Optimize Dep", "node_modules/.vite", "pnpm dev"),
    ("uv", "No solution found when resolving dependencies", "uv.lock", "uv sync"),
    ("pre-commit", "InvalidManifestError", "~/.cache/pre-commit", "pre-commit run -a"),
)  # fmt: skip
_TEST_NAMES = (
    "test_checkout_total", "test_webhook_retry", "test_login_redirect", "test_export_csv",
    "test_search_pagination", "test_invoice_pdf", "test_sync_conflict", "test_upload_resume",
    "test_rate_limit_headers", "test_session_expiry", "test_refund_flow", "test_report_dates",
)  # fmt: skip


def _pick(seq: Sequence[Any]) -> Callable[[random.Random], Any]:
    return lambda r: r.choice(seq)


def _project(r: random.Random) -> str:
    return f"{r.choice(_PROJECT_NAMES)}-{r.choice(_PROJECT_SUFFIXES)}"


def _file(r: random.Random) -> str:
    module = r.choice(_MODULES)
    return f"{r.choice(_FILE_DIRS).format(m=module)}/{r.choice(_FILE_NAMES)}"


def _date(r: random.Random) -> str:
    return f"{r.randint(2023, 2025)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def _version_str(r: random.Random) -> str:
    return f"{r.randint(0, 4)}.{r.randint(0, 30)}.{r.randint(0, 12)}"


# Slot name -> value (a string), or a group of slots drawn together (a dict).
_SLOTS: dict[str, Callable[[random.Random], Any]] = {
    "project": _project,
    "person": _pick(_PEOPLE),
    "module": _pick(_MODULES),
    "file": _file,
    "dir": _pick(_MIGRATION_DIRS),
    "db": _pick(_DBS),
    "migtool": _pick(_MIGRATION_TOOLS),
    "fe": _pick(_FRONTENDS),
    "bundler": _pick(_BUNDLERS),
    "test": _pick(_TEST_TOOLS),
    "linter": _pick(_LINTERS),
    "pkgtool": _pick(_PKG_TOOLS),
    "cloud": _pick(_CLOUDS),
    "region": _pick(_REGIONS),
    "cdn": _pick(_CDNS),
    "ci": _pick(_CI),
    "queue": _pick(_QUEUES),
    "bug": _pick(_BUGS),
    "column": _pick(_COLUMNS),
    "setting": _pick(_SETTINGS),
    "lib": _pick(_LIBS),
    "cause": _pick(_CAUSES),
    "fix": _pick(_FIXES),
    "pref": _pick(_PREFS),
    "env": _pick(_ENV_VARS),
    "service": _pick(_SERVICES),
    "vault": _pick(_VAULTS),
    "buildcmd": _pick(_BUILD_CMDS),
    "testcmd": _pick(_TEST_CMDS),
    "migcmd": _pick(_MIG_CMDS),
    "logcmd": _pick(_LOG_CMDS),
    "apm": _pick(_APMS),
    "testname": _pick(_TEST_NAMES),
    "date": _date,
    "ver": _version_str,
    "n": lambda r: str(r.choice((2, 4, 8, 16, 32, 60, 100, 120, 300, 600, 1000))),
    "n2": lambda r: str(r.choice((5, 10, 20, 50, 200, 500, 2000, 5000))),
    "port": lambda r: str(r.choice((3000, 5173, 8000, 8080, 8443, 4200, 9000))),
    "mins": lambda r: str(r.randint(3, 45)),
    "secs": lambda r: str(r.choice((30, 60, 90, 300, 900))),
    "ms": lambda r: str(r.choice((850, 1200, 2400, 3100, 4800, 9000))),
    "stack": lambda r: dict(zip(("framework", "lang"), r.choice(_STACKS), strict=True)),
    "toolerr": lambda r: dict(
        zip(("tool", "error", "cache", "cmd"), r.choice(_TOOL_ERRORS), strict=True)
    ),
}
_GROUP_OF = {"framework": "stack", "lang": "stack", "tool": "toolerr", "error": "toolerr",
             "cache": "toolerr", "cmd": "toolerr"}  # fmt: skip
# Slots a "variant" of a memory redraws: who, where and when change, the topic stays.
_INCIDENTAL = frozenset(
    _words("project person date ver n n2 port mins secs ms file testname region module")
)


@dataclass(frozen=True, slots=True)
class _Template:
    kind: str
    type: str  # lexmem MemoryType value
    text: str
    questions: tuple[str, ...]


_TEMPLATES = (
    # -- semantic: stack facts and preferences
    _Template("stack-db", "semantic",
              "{project} uses {db} as its primary database; migrations live in {dir}/migrations "
              "and are applied with {migtool}.",
              ("which database does {project} use?", "how are database migrations applied in {project}?",
               "what datastore backs {project}")),
    _Template("stack-frontend", "semantic",
              "The {project} frontend is written in {fe} and bundled with {bundler}; the dev "
              "server listens on port {port}.",
              ("what frontend framework does {project} use?", "which port does the {project} dev server use?")),
    _Template("stack-backend", "semantic",
              "The {project} backend is built with {framework} in {lang}; dependencies are managed "
              "with {pkgtool} and the code is linted with {linter}.",
              ("what language is the {project} backend written in?", "which package manager does {project} use?")),
    _Template("preference", "semantic",
              "{person} prefers {pref} when working on {project}.",
              ("what does {person} prefer when working on {project}?", "{person} coding preferences")),
    _Template("deploy-facts", "semantic",
              "Staging for {project} runs on {cloud} in {region} with {n} replicas; production "
              "sits behind {cdn}.",
              ("where is {project} staging deployed?", "which cloud region hosts {project}?")),
    _Template("rate-limit", "semantic",
              "The public API of {project} is rate limited to {n} requests per minute per token; "
              "the limit is set in {file}.",
              ("what is the rate limit of the {project} API?", "where is the {project} rate limit configured?")),
    _Template("queue", "semantic",
              "{project} sends background jobs through {queue}; worker concurrency is {n} and a "
              "job times out after {secs} seconds.",
              ("what queue does {project} use for background jobs?", "job timeout for {project} workers")),
    _Template("ci", "semantic",
              "CI for {project} runs on {ci}; the full pipeline takes about {mins} minutes and "
              "{test} must pass before a merge.",
              ("which CI system does {project} use?", "how long does the {project} pipeline take?")),
    # -- episodic: bug fixes, incidents, upgrades
    _Template("bugfix", "episodic",
              "On {date} we fixed a {bug} in {file} ({project}): the cause was {cause}. The fix "
              "was {fix}.",
              ("how did we fix the {bug} in {project}?", "what caused the {bug} in {file}?")),
    _Template("deploy-failure", "episodic",
              "Deploy of {project} v{ver} failed on {date} because of {cause}; we rolled back "
              "after {mins} minutes; the follow-up fix was {fix}.",
              ("why did the {project} v{ver} deploy fail?", "what went wrong with the {project} deploy on {date}?")),
    _Template("flaky-test", "episodic",
              "The flaky test {testname} in {project} was caused by {cause}; {person} fixed it "
              "with {fix}.",
              ("why was {testname} flaky in {project}?", "who fixed the flaky {testname} test?")),
    _Template("slow-endpoint", "episodic",
              "{person} reported that the {module} endpoint of {project} was slow ({ms} ms p95); "
              "profiling showed {cause}, fixed by {fix}.",
              ("why was the {module} endpoint of {project} slow?", "p95 latency problem in {project} {module}")),
    _Template("incident", "episodic",
              "During the incident on {date}, {project} returned 502 errors for {mins} minutes: "
              "{cause}. Follow-up action: {fix}.",
              ("what caused the {project} outage on {date}?", "502 errors incident in {project}")),
    _Template("upgrade", "episodic",
              "Upgrading {lib} to {ver} in {project} broke the {module} module because of "
              "{cause}; we kept the old version until {person} finished the migration.",
              ("what broke when we upgraded {lib} in {project}?", "problems after the {lib} upgrade")),
    # -- procedural: how-tos
    _Template("release", "procedural",
              "To release {project}: bump the version in {file}, run `{buildcmd}`, tag v{ver} and "
              "push the tag; {ci} publishes the artifacts.",
              ("how do I release {project}?", "steps to publish a new version of {project}")),
    _Template("local-tests", "procedural",
              "To run the {project} tests locally: start {db} with `docker compose up -d db`, "
              "export {env}, then run `{testcmd}`.",
              ("how do I run the {project} tests locally?", "which environment variable do the {project} tests need?")),
    _Template("rotate-key", "procedural",
              "To rotate the {service} API key for {project}: create a new key in the {service} "
              "dashboard, store it as {env} in {vault}, redeploy, then revoke the old key.",
              ("how do I rotate the {service} key for {project}?", "where is the {service} API key stored?")),
    _Template("tool-error", "procedural",
              'When {tool} fails with "{error}" in {project}, delete {cache} and rerun `{cmd}`.',
              ('{tool} fails with "{error}", what do I do?', "how to fix {error} in {project}")),
    _Template("migration", "procedural",
              "To add a database migration in {project}: run `{migcmd}`, edit the generated file "
              "under {dir}/migrations and apply it with {migtool} before opening the PR.",
              ("how do I add a migration in {project}?", "steps to create a schema migration")),
    _Template("debug-prod", "procedural",
              "To debug {project} in production, tail the logs with `{logcmd}` and filter by "
              "request id; traces are in {apm}.",
              ("how do I debug {project} in production?", "where are the traces for {project}?")),
)  # fmt: skip

_SOURCES = ("explicit", "agent_response", "conversation", "correction", "workflow")


def _fields(text: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(text) if f]


@dataclass(slots=True)
class MemoryRow:
    """One generated memory: its text, type, project, and what it was made from."""

    text: str
    type: str
    project: str
    source: str
    template: int
    slots: dict[str, str]
    base: int | None = None  # for a variant: the row whose topic it shares


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    target: int  # the row that answers it


class MemoryCorpus:
    """Deterministic memory texts for a given seed; rows and queries are reproducible.

    ``row(i)`` for ``i < n_base`` is a fresh memory. ``variant(base, i)`` re-renders
    a base memory's template with its incidental slots (project, person, date,
    numbers, file) redrawn: same topic and wording, different particulars.
    """

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed

    def _render(
        self, t: _Template, r: random.Random, keep: dict[str, str] | None = None
    ) -> dict[str, str]:
        slots: dict[str, str] = {}
        for name in _fields(t.text):
            if name in slots:
                continue
            group = _GROUP_OF.get(name)
            if keep is not None and name in keep and name not in _INCIDENTAL:
                slots[name] = keep[name]
            elif group is not None:
                slots.update(_SLOTS[group](r))
            else:
                slots[name] = _SLOTS[name](r)
        # Causes and fixes carry slots of their own (a column, a number, a library).
        for key in ("cause", "fix"):
            if key in slots and "{" in slots[key]:
                for name in _fields(slots[key]):
                    if name not in slots:
                        slots[name] = _SLOTS[name](r)
                slots[key] = slots[key].format(**slots)
        return slots

    def _finish(
        self, ti: int, slots: dict[str, str], r: random.Random, base: int | None
    ) -> MemoryRow:
        t = _TEMPLATES[ti]
        return MemoryRow(
            text=t.text.format(**slots),
            type=t.type,
            project=slots.get("project", ""),
            source=r.choice(_SOURCES),
            template=ti,
            slots=slots,
            base=base,
        )

    def row(self, i: int) -> MemoryRow:
        r = random.Random(f"{self.seed}:row:{i}")
        ti = r.randrange(len(_TEMPLATES))
        return self._finish(ti, self._render(_TEMPLATES[ti], r), r, None)

    def variant(self, base: MemoryRow, base_index: int, i: int) -> MemoryRow:
        r = random.Random(f"{self.seed}:variant:{i}")
        slots = self._render(_TEMPLATES[base.template], r, keep=base.slots)
        return self._finish(base.template, slots, r, base_index)

    def question(self, row: MemoryRow, target: int, salt: str = "") -> Query:
        r = random.Random(f"{self.seed}:question:{target}:{salt}")
        q = r.choice(_TEMPLATES[row.template].questions)
        return Query(q.format(**row.slots), target)

    def queries(self, rows: Sequence[MemoryRow], among: int, n: int, salt: str = "") -> list[Query]:
        """``n`` questions about distinct rows among the first ``among`` rows."""
        r = random.Random(f"{self.seed}:queries:{salt}")
        targets = r.sample(range(min(among, len(rows))), k=min(n, among, len(rows)))
        return [self.question(rows[t], t, salt) for t in targets]

    @staticmethod
    def kinds() -> list[str]:
        return [t.kind for t in _TEMPLATES]
