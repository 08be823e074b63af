"""Build a realistic lexmem data folder, the way a person's months of use would leave it.

    python tools/demo_data.py DIR [--memories N] [--sessions K] [--seed S]

DIR holds two folders: ``DIR/lexmem``, the data folder (``LEXMEM_HOME``), and
``DIR/home/dana``, the person's home folder (``HOME``), with the repositories the agent
sessions ran in (``~/work/shop``, ``~/writing/novel``, ...) and the trial's record.
Everything goes through lexmem's own paths:

- remembered notes through the facade (``Lexmem.remember``, ``supersede``, ``link``, ``pin``,
  ``archive``, ``reinforce``), some with titles longer than 120 characters, some in a named
  project ("shop") whose repository the agents know by its root (``~/work/shop``);
- thousands of developer and writer notes, varied from templates by a seeded generator and
  encoded in batches (``Lexmem.encoder.encode_batch``, ``Lexmem.store.store_many``), spread
  over the last half year;
- real agent sessions: the JSON Claude Code sends on each event piped into the installed
  ``lexmem-hook claude``, one subprocess per event, then drained by the capture service
  (first prompts, tool calls and failures, corrections, a compaction, one left open);
- configuration changes and a correction through the service's capture calls, reviews
  accepted and rejected, and an event cut off mid-write, which the service quarantines.

The same arguments give the same memories (texts, projects, ages); ids and the hooks'
timestamps are new each time. Prints one summary line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from lexmem.api import Lexmem
    from lexmem.service.writer import CaptureService

USER = "dana"
MODEL = "claude-sonnet-4-5-20250929"
BATCH = 500  # memories per encode_batch + store_many: one commit each

# Repositories the agents work in, relative to HOME; the hook names each by its root.
REPOS = [
    "work/shop",
    "work/billing-service",
    "work/infra-terraform",
    "work/mobile-app",
    "work/data-pipeline",
    "src/dotfiles",
    "writing/novel",
]
# Projects a person names when remembering by hand: "shop" and "novel" are also
# repositories above, which is how one project comes to have two names.
NAMED = ["shop", "novel", "blog", "thesis", "household"]


# -- the notes a person remembered by hand -------------------------------------------------

LONG_TITLE = (
    "Why the checkout service retries payment captures exactly three times with jittered "
    "exponential backoff before it gives up and parks the order for manual review"
)
HAND_NOTES: list[tuple[str, str | None, str | None]] = [
    # (text, project: "~/..." a repository, a name, or None; title or None)
    (
        "The billing service uses PostgreSQL 16 with logical replication to the warehouse; "
        "the replica lags about four seconds at peak.",
        "~/work/billing-service",
        None,
    ),
    (
        "Run `make check` before pushing: it runs ruff, mypy and the fast tests in about "
        "ninety seconds.",
        "~/work/shop",
        None,
    ),
    ("Deploys go out on Tuesdays and Thursdays after the standup, never on Fridays.", "shop", None),
    (
        "The shop's product images live in the `shop-media` bucket behind the CDN; never "
        "serve them from the app servers.",
        "shop",
        None,
    ),
    (
        "Payment captures are retried three times with jittered exponential backoff (2 s, "
        "8 s, 30 s); after the third failure the order is parked with status "
        "`needs_review` and the on-call person gets a page. The retry count lives in "
        "settings.toml, not in code, so support can raise it during a provider outage.",
        "~/work/shop",
        LONG_TITLE,
    ),
    ("Mara's eyes are green; her brother Tomas has the grey ones.", "novel", None),
    ("Chapter titles stay under five words.", "novel", None),
    (
        "The harbour town is called Kellan's Reach; the ferry runs twice a day, at seven "
        "and at four, and not at all on Sundays.",
        "~/writing/novel",
        "Setting notes for Kellan's Reach, the harbour town in the novel where the ferry "
        "runs twice a day and never on Sundays, plus the tide table",
    ),
    ("User prefers British spelling in prose and American spelling in code.", None, None),
    (
        "Release checklist: bump the version, update CHANGELOG.md, tag, build the wheel, "
        "upload to the internal index, announce in #releases.",
        "~/work/shop",
        None,
    ),
    (
        "The mobile app's minimum iOS version is 16; Android's minimum SDK is 26.",
        "~/work/mobile-app",
        None,
    ),
    (
        "Terraform state lives in the `infra-state` bucket with DynamoDB locking; never run "
        "`terraform apply` from a laptop, only from the pipeline.",
        "~/work/infra-terraform",
        "Terraform state, locking and the rule that applies only ever run from the CI "
        "pipeline and never from anybody's laptop, even during an incident at night",
    ),
    (
        "The nightly ETL job starts at 02:15 UTC and must finish before the 06:00 report "
        "export; it usually takes 95 minutes.",
        "~/work/data-pipeline",
        None,
    ),
    (
        "Blog posts go out on the first Monday of the month; drafts live in the `drafts/` "
        "folder and need two readers.",
        "blog",
        None,
    ),
    ("Thesis chapter 4 needs the ablation table redone with the 2025 dataset.", "thesis", None),
    (
        "The boiler service is due in March; the engineer's number is on the fridge.",
        "household",
        None,
    ),
    ("Always use `rg` instead of `grep -r` in the dotfiles' scripts.", "~/src/dotfiles", None),
]
STAGING = [
    "The staging database listens on port 5432.",
    "The staging database listens on port 5433 since the move to the new cluster.",
    "The staging database listens on port 6543 (PgBouncer) since the connection-pool "
    "change in October; connect to 5433 only for migrations.",
]


# -- the many notes, varied from templates ------------------------------------------------

SLOTS: dict[str, list[str]] = {
    "service": [
        "checkout",
        "billing",
        "search",
        "inventory",
        "notifications",
        "auth",
        "recommendations",
        "reporting",
        "media",
        "shipping",
    ],
    "db": ["PostgreSQL 16", "PostgreSQL 15", "Redis 7", "SQLite", "ClickHouse", "DynamoDB"],
    "port": ["5432", "5433", "6379", "8080", "8443", "9090", "3000", "6543"],
    "tool": [
        "ruff",
        "mypy",
        "pytest",
        "black",
        "pre-commit",
        "uv",
        "pnpm",
        "terraform",
        "docker compose",
        "make",
    ],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday"],
    "person": ["Priya", "Jonas", "Amara", "Tom", "Keiko", "Luis", "Sven", "Noor"],
    "env": ["staging", "production", "the preview environments", "CI", "local dev"],
    "file": [
        "settings.toml",
        "docker-compose.yml",
        "Makefile",
        "pyproject.toml",
        ".github/workflows/ci.yml",
        "alembic.ini",
        "config/app.yaml",
    ],
    "num": ["3", "5", "10", "30", "60", "90", "250", "500"],
    "version": ["3.11", "3.12", "3.13"],
    "region": ["eu-west-1", "eu-central-1", "us-east-1"],
    "queue": ["emails", "webhooks", "exports", "thumbnails", "invoices"],
    "character": ["Mara", "Tomas", "Aunt Ilse", "the harbourmaster", "Jonah Reyes", "Old Pell"],
    "place": [
        "the quay",
        "the lighthouse",
        "the chandlery",
        "the ferry office",
        "the cannery",
        "the chapel on the headland",
    ],
    "chapter": [str(n) for n in range(1, 25)],
    "colour": ["green", "grey", "brown", "hazel"],
    "month": ["January", "March", "May", "September", "November"],
}
DEV_TEMPLATES = [
    "The {service} service uses {db}; its connection string is read from {file}.",
    "The {service} service listens on port {port} in {env}.",
    "Run `{tool}` before every commit in the {service} repository.",
    "Deploys of the {service} service go out on {day}s after the standup.",
    "{person} owns the {service} service; ask them before changing its schema.",
    "The {queue} queue is drained by a worker with a concurrency of {num}.",
    "Timeouts for calls to the {service} service are {num} seconds in {env}.",
    "CI pins Python {version}; a newer interpreter locally hides failures that CI catches.",
    "Feature flags for the {service} service live in {file}, not in the database.",
    "The {service} service's logs go to Loki with a retention of {num} days.",
    "Never run database migrations of the {service} service by hand in {env}; the "
    "pipeline runs them before the deploy.",
    "Production runs in {region}; the disaster-recovery copy of the {service} data is in "
    "another region and restored monthly.",
    "When the {service} tests fail with a connection error, {db} is not running: start it "
    "with `docker compose up -d`.",
    "The {service} service's rate limit is {num} requests per second per API key.",
    "Use `{tool}` rather than the older script in the {service} repository; {person} "
    "switched it over in {month}.",
    "Backups of the {service} database run every {num} minutes and are kept for 30 days.",
    "The {queue} worker retries a failed job {num} times before it goes to the dead-letter queue.",
    "Code review needs one approval for the {service} service and two for anything "
    "touching payments.",
    "Secrets for {env} come from the vault at deploy time; never commit them to {file}.",
    "The {service} service's health check is `/healthz` on port {port}.",
    "Staging data for the {service} service is refreshed from an anonymised production "
    "snapshot every {day}.",
    "Fix: the {service} service's flaky test came from a shared {db} fixture; each test "
    "now gets its own schema.",
    "We decided to move the {queue} queue from RabbitMQ to {db} in {month}.",
    "On-call for the {service} service rotates weekly; {person} has the runbook.",
    "The {service} API returns dates as ISO 8601 in UTC; the mobile app converts them.",
    "How to release the {service} service: bump the version in {file}, tag, let the "
    "pipeline build and deploy to {env}, then watch the dashboards for {num} minutes.",
]
WRITER_TEMPLATES = [
    "{character} never goes to {place} after dark.",
    "In chapter {chapter}, {character} finds the ledger hidden at {place}.",
    "{character}'s eyes are {colour}.",
    "The ferry reaches {place} at seven in the morning in chapter {chapter}.",
    "Keep {character}'s dialogue short and dry; no exclamation marks.",
    "{character} learned to sail from Old Pell the summer before chapter {chapter}.",
    "Chapter {chapter} is told from {character}'s point of view.",
    "The storm in chapter {chapter} happens in {month}; the harbour freezes only once in the book.",
    "{character} and Mara have not spoken since the funeral at {place}.",
    "Use British spelling in the manuscript: harbour, colour, grey.",
    "The agent wants the first three chapters by {month}.",
    "Cut the flashback at {place} from chapter {chapter}; it slows the opening.",
]
OTHER_TEMPLATES = [
    ("Blog post idea: what we learned moving the {queue} queue to {db}.", "blog"),
    ("Thesis: the baseline for chapter {chapter} uses {num} epochs and seed 7.", "thesis"),
    ("The car's MOT is due in {month}.", "household"),
    ("Bins go out on {day} evenings; recycling every other week.", "household"),
    (
        "Dotfiles: the shell prompt shows the git branch and the Python {version} venv.",
        "~/src/dotfiles",
    ),
]
PREFIXES = ["", "", "", "Note: ", "Remember: ", "Decision: ", "From the retro: "]
SUFFIXES = ["", "", "", " (agreed with {person})", " — see {file}", " since {month}"]
# Where a note came from, and how often: most were remembered on purpose.
SOURCES = [
    ("explicit", 80),
    ("conversation", 10),
    ("agent_response", 4),
    ("correction", 3),
    ("workflow", 3),
]


def fill(template: str, rng: random.Random) -> str:
    return template.format_map({k: rng.choice(v) for k, v in SLOTS.items()})


def generated_notes(n: int, seed: int, home: Path) -> list[tuple[str, str | None, str, int]]:
    """``n`` distinct notes: (text, project, source, age in minutes)."""
    rng = random.Random(seed)
    repos = [
        "~/work/shop",
        "~/work/billing-service",
        "~/work/infra-terraform",
        "~/work/mobile-app",
        "~/work/data-pipeline",
        "shop",
    ]
    sources = [s for s, weight in SOURCES for _ in range(weight)]
    seen: set[str] = set()
    notes: list[tuple[str, str | None, str, int]] = []
    while len(notes) < n:
        roll = rng.random()
        if roll < 0.62:
            text, project = fill(rng.choice(DEV_TEMPLATES), rng), rng.choice(repos)
        elif roll < 0.85:
            text, project = (
                fill(rng.choice(WRITER_TEMPLATES), rng),
                rng.choice(["novel", "~/writing/novel"]),
            )
        elif roll < 0.95:
            template, project = rng.choice(OTHER_TEMPLATES)
            text = fill(template, rng)
        else:
            text, project = fill(rng.choice(DEV_TEMPLATES), rng), None
        text = rng.choice(PREFIXES if roll < 0.62 else PREFIXES[:5]) + text[0].upper() + text[1:]
        if roll < 0.62 and text.endswith("."):  # the suffixes name people and files at work
            text = text[:-1] + fill(rng.choice(SUFFIXES), rng) + "."
        if text in seen:
            continue
        seen.add(text)
        # Older notes are fewer: ages skew towards the last weeks, up to half a year.
        age = int(rng.random() ** 2 * 180 * 24 * 60) + 60
        notes.append((text, project_path(project, home), rng.choice(sources), age))
    return notes


def project_path(project: str | None, home: Path) -> str | None:
    """A ``~/...`` repository as the absolute root the hook would name; a name as it is."""
    if project is not None and project.startswith("~/"):
        return str(home / project[2:])
    return project


# -- agent sessions, as Claude Code sends them ---------------------------------------------


@dataclass
class Turn:
    """One hook event: its name and the fields Claude Code adds to the common ones."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    cwd: str = ""  # relative to the repository; "" = its root


def prompt(text: str) -> Turn:
    return Turn("UserPromptSubmit", {"prompt": text})


def answer(text: str) -> Turn:
    return Turn("Stop", {"stop_hook_active": False, "last_assistant_message": text})


def tool(name: str, tool_input: dict[str, Any], response: Any, *, failed: str = "") -> list[Turn]:
    """PreToolUse then PostToolUse (or PostToolUseFailure with ``failed`` as its error)."""
    tid = "toolu_01" + uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(tool_input)).hex[:22]
    common = {"tool_name": name, "tool_input": tool_input, "tool_use_id": tid}
    if failed:
        after = Turn("PostToolUseFailure", {**common, "error": failed, "is_interrupt": False})
    else:
        after = Turn("PostToolUse", {**common, "tool_response": response})
    return [Turn("PreToolUse", common), after]


def bash(command: str, stdout: str = "", *, failed: str = "") -> list[Turn]:
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    return tool("Bash", {"command": command, "description": command[:40]}, response, failed=failed)


PYTEST_KEYERROR = """Exit code 1
============================= test session starts ==============================
collected 12 items

tests/test_orders.py ..........F.                                         [100%]

=================================== FAILURES ===================================
Traceback (most recent call last):
  File "{root}/tests/test_orders.py", line 31, in test_order_total
    assert total(make_order()) == 42
  File "{root}/orders/service.py", line 42, in total
    customer = payload["customer_id"]
KeyError: 'customer_id'
=========================== short test summary info ============================
FAILED tests/test_orders.py::test_order_total - KeyError: 'customer_id'
1 failed, 11 passed in 0.41s"""


def sessions(home: Path) -> list[tuple[str, list[Turn]]]:
    """(repository, events) per session, in the order they happened."""
    shop, novel = home / "work/shop", home / "writing/novel"
    billing = home / "work/billing-service"
    start = Turn("SessionStart", {"source": "startup", "model": MODEL})
    end = Turn("SessionEnd", {"reason": "prompt_input_exit"})
    return [
        (
            "work/shop",
            [
                start,
                prompt("The order tests are failing since this morning, can you fix them?"),
                *bash("pytest tests/test_orders.py", failed=PYTEST_KEYERROR.format(root=shop)),
                *tool(
                    "Read",
                    {"file_path": f"{shop}/orders/service.py"},
                    {
                        "type": "text",
                        "file": {
                            "filePath": f"{shop}/orders/service.py",
                            "content": "def total(payload):\n    customer = payload['customer_id']\n",
                        },
                    },
                ),
                *tool(
                    "Edit",
                    {
                        "file_path": f"{shop}/orders/service.py",
                        "old_string": "payload['customer_id']",
                        "new_string": "payload.get('customer_id') or session.customer_id",
                    },
                    {"filePath": f"{shop}/orders/service.py"},
                ),
                *bash("pytest tests/test_orders.py", "12 passed in 0.38s"),
                answer(
                    "Fixed. The root cause was that the mobile client omits customer_id from "
                    "the order payload, so total() raised KeyError. I changed "
                    "orders/service.py to fall back to the session's customer when the field "
                    "is missing. All 12 tests pass now."
                ),
                prompt("thanks!"),
                answer("You're welcome!"),
                end,
            ],
        ),
        (
            "writing/novel",
            [
                start,
                prompt(
                    "Draft chapter 3: Mara confronts her brother Tomas at the harbour about "
                    "the missing ledger."
                ),
                *tool(
                    "Write",
                    {
                        "file_path": f"{novel}/chapters/03-harbour.md",
                        "content": "# Chapter Three: In Which Mara Finally Confronts Her "
                        "Brother Tomas at the Harbour\n\nThe ferry horn sounded twice. "
                        "Mara's blue eyes narrowed as Tomas stepped off the gangway.",
                    },
                    {"type": "create", "filePath": f"{novel}/chapters/03-harbour.md"},
                ),
                answer(
                    "I drafted chapter 3 in chapters/03-harbour.md (about 1,900 words). Mara "
                    "confronts Tomas on the quay and he admits he sold the ledger."
                ),
                prompt(
                    "Nice start. Keep chapter titles short. And Mara's eyes are green, not blue."
                ),
                *tool(
                    "Edit",
                    {
                        "file_path": f"{novel}/chapters/03-harbour.md",
                        "old_string": "Mara's blue eyes",
                        "new_string": "Mara's green eyes",
                    },
                    {"filePath": f"{novel}/chapters/03-harbour.md"},
                ),
                answer('Done: the title is now "The Harbour" and Mara\'s eyes are green.'),
                prompt("I prefer British spelling in the manuscript, always."),
                answer("Understood. I'll use British spelling: harbour, colour, grey."),
                end,
            ],
        ),
        (
            "work/shop",
            [
                start,
                prompt(
                    "Add a background job queue for the order confirmation emails so "
                    "checkout stops waiting on the mail server."
                ),
                answer(
                    "I'll add RabbitMQ with a `confirmations` exchange and a worker "
                    "container in docker-compose.yml."
                ),
                prompt(
                    "No, that's wrong: we decided to use Redis 7 for the job queue, not RabbitMQ."
                ),
                *tool(
                    "Edit",
                    {
                        "file_path": f"{shop}/docker-compose.yml",
                        "old_string": "services:",
                        "new_string": "services:\n  redis:\n    image: redis:7",
                    },
                    {"filePath": f"{shop}/docker-compose.yml"},
                ),
                *bash(
                    "git push origin main",
                    failed="Exit code 1\nremote: error: GH006: "
                    "Protected branch update failed for refs/heads/main.",
                ),
                prompt("Never commit directly to main; open a pull request instead."),
                *bash(
                    "git switch -c email-queue && git push -u origin email-queue",
                    "branch 'email-queue' set up to track 'origin/email-queue'.",
                ),
                answer(
                    "The queue now uses Redis 7 (a `redis:7` service in docker-compose.yml) "
                    "and the change is on the email-queue branch, ready for a pull request."
                ),
                end,
            ],
        ),
        (
            "work/infra-terraform",
            [
                start,
                prompt(
                    "Connect to the staging database and list the tables the migration touched."
                ),
                answer(
                    "Postgres listens on port 5432 on staging, so I'll connect with "
                    "psql -h staging-db -p 5432."
                ),
                prompt("actually it's port 5433"),
                *bash(
                    "psql -h staging-db -p 5433 -c '\\dt'",
                    " public | orders | table\n public | order_items | table",
                ),
                answer("Connected on 5433: the migration touched orders and order_items."),
                Turn(
                    "PreCompact",
                    {"trigger": "manual", "custom_instructions": "Keep the staging facts"},
                ),
                prompt("ok thanks"),
                answer("Glad to help."),
                end,
            ],
        ),
        (
            "work/billing-service",
            [
                start,
                prompt("Why does the invoice export take twenty minutes? It used to take two."),
                *tool(
                    "Grep",
                    {"pattern": "def export_invoices", "path": str(billing)},
                    {"numFiles": 1, "filenames": [f"{billing}/billing/export.py"]},
                ),
                *tool(
                    "Read",
                    {"file_path": f"{billing}/billing/export.py"},
                    {
                        "type": "text",
                        "file": {
                            "filePath": f"{billing}/billing/export.py",
                            "content": "for invoice in Invoice.objects.all():\n    rows.append(...)",
                        },
                    },
                ),
                answer(
                    "The export loads every invoice with its lines one query at a time (an "
                    "N+1 query): 40,000 invoices mean 40,001 queries. Prefetching the lines "
                    "brings it back to two queries."
                ),
                prompt(
                    "We always use select_related or prefetch_related in exports; make that "
                    "a rule for the billing code."
                ),
                answer("Noted: exports in the billing service always prefetch their related rows."),
            ],
        ),  # still open: no SessionEnd
    ]


def run_hook(payload: dict[str, Any], cwd: Path, env: dict[str, str]) -> None:
    """One event, as Claude Code runs its hook: the JSON on stdin, from the agent's folder."""
    hook = Path(sys.executable).with_name("lexmem-hook")
    if not hook.exists():
        raise SystemExit(f"error: {hook} is missing: run ./dev setup")
    done = subprocess.run(
        [str(hook), "claude"],
        input=json.dumps(payload).encode(),
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"error: lexmem-hook exited {done.returncode}: {done.stderr.decode()}")


def play_sessions(home: Path, count: int, rng: random.Random, env: dict[str, str]) -> int:
    """Send ``count`` sessions' events through the hook; returns the events sent."""
    sent = 0
    for repo, turns in sessions(home)[:count]:
        root = home / repo
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        slug = str(root).replace("/", "-")
        transcript = home / ".claude" / "projects" / slug / f"{sid}.jsonl"
        for turn in turns:
            payload = {
                "session_id": sid,
                "transcript_path": str(transcript),
                "cwd": str(root),
                "permission_mode": "default",
                "hook_event_name": turn.event,
                **turn.fields,
            }
            run_hook(payload, root, env)
            sent += 1
    return sent


# -- building it -----------------------------------------------------------------------------


def environment(base: Path) -> tuple[Path, Path]:
    """Point this process (and the hooks it runs) at the demo's own folders; never at the
    person's keyring, home or data folder."""
    data, home = base / "lexmem", base / "home" / USER
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        HOME=str(home),
        LEXMEM_HOME=str(data),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    for name in ("LEXMEM_LICENCE", "LEXMEM_LICENCE_FILE", "LEXMEM_NO_SERVICE"):
        os.environ.pop(name, None)
    for repo in REPOS:
        (home / repo / ".git").mkdir(parents=True, exist_ok=True)
    return data, home


def remember_by_hand(lm: Lexmem, home: Path) -> dict[str, str]:
    """The hand-written notes, a supersede chain, links, pins; returns ids by role."""
    ids: dict[str, str] = {}
    for i, (text, project, title) in enumerate(HAND_NOTES):
        result = lm.remember(text, project=project_path(project, home), title=title)
        ids[f"hand{i}"] = result.memories[0].id
    first = lm.remember(STAGING[0], project=str(home / "work/infra-terraform"))
    ids["staging0"] = old = first.memories[0].id
    for i, text in enumerate(STAGING[1:], 1):
        _, old = lm.supersede(old, with_text=text, own=True)
        ids[f"staging{i}"] = old
    lm.link(ids["hand0"], ids["staging2"], "relates_to")
    lm.link(ids["hand4"], ids["hand2"], "depends_on")
    lm.link(ids["hand5"], ids["hand7"], "relates_to")
    for key in ("hand0", "hand4", "hand5", "staging2"):
        lm.pin(ids[key])
    for _ in range(4):
        lm.reinforce(ids["hand1"], 0.1)
    return ids


def store_generated(lm: Lexmem, notes: Sequence[tuple[str, str | None, str, int]]) -> list[str]:
    """The generated notes, encoded and stored in batches, with their ages."""
    from lexmem.encoder import EncodingRequest
    from lexmem.models import MemoryContext, MemorySource

    now = datetime.now(UTC)
    ids: list[str] = []
    for start in range(0, len(notes), BATCH):
        part = notes[start : start + BATCH]
        requests = [
            EncodingRequest(
                text,
                context=MemoryContext(
                    source=MemorySource(source),
                    project=project,
                    capture_mode=None if source == "explicit" else "assist",
                ),
            )
            for text, project, source, _ in part
        ]
        memories = lm.encoder.encode_batch(requests)
        # A long note becomes several chunks: each chunk takes its note's age.
        ages = iter(age for *_, age in part)
        age = 0
        for m in memories:
            if m.chunk is None or m.chunk.chunk_index == 0:
                age = next(ages)
            m.created_at = m.last_accessed_at = now - timedelta(minutes=age)
            if m.source != MemorySource.EXPLICIT:
                m.confidence = 0.7 + (age % 29) / 100
        lm.store.store_many(memories)
        ids.extend(m.id for m in memories)
    return ids


def remember_recent(lm: Lexmem, notes: Sequence[tuple[str, str | None, str, int]]) -> int:
    """This week's notes, as the CLI, MCP and the tray remember them: explicit inbox events
    the service drains (and audits), a batch encoded at a time."""
    from lexmem.capture.inbox import make_event
    from lexmem.service.client import enqueue

    agents = ["cli", "mcp", "tray"]
    for i, (text, project, _, _) in enumerate(notes):
        agent = agents[i % len(agents)]
        enqueue(
            lm,
            make_event(
                "explicit",
                text,
                session_id=f"{agent}-explicit",
                agent=agent,
                project=project,
                metadata={"pin": False},
            ),
        )
    return len(notes)


NOTES_FOLDER = "notes"  # under HOME: Markdown notes the person has lexmem watch
MARKDOWN = {
    "harbour-town.md": "# Kellan's Reach\n\nA harbour town on a grey northern coast. The "
    "ferry runs at seven and at four, never on Sundays.\n\n## Places\n\n- The quay, "
    "where the cannery boats tie up.\n- The lighthouse on the headland, empty since the "
    "storm of chapter 11.\n- The chandlery, run by Aunt Ilse.\n",
    "characters.md": "# Characters\n\n## Mara\n\nGreen eyes, thirty-four, came back "
    "for the funeral and stayed.\n\n## Tomas\n\nMara's brother, grey eyes, sold the "
    "ledger to pay his debts.\n\n## Old Pell\n\nTaught both of them to sail; knows "
    "more than he says.\n",
    "style-sheet.md": "# Style sheet\n\nBritish spelling throughout: harbour, colour, "
    "grey. Chapter titles under five words. No exclamation marks in dialogue.\n",
    "work-journal.md": "# Work journal\n\n## Redis queue\n\nMoved the order "
    "confirmation emails to a Redis 7 queue; the worker runs with a concurrency of 10."
    "\n\n## Billing export\n\nThe invoice export was an N+1 query; prefetching the "
    "lines took it from twenty minutes to two.\n",
}


def watch_notes(lm: Lexmem, home: Path) -> int:
    """A folder of Markdown notes, watched and read once, as the settings dialog does."""
    folder = home / NOTES_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in MARKDOWN.items():
        (folder / name).write_text(text, encoding="utf-8")
    lm.settings.capture.watch = [str(folder)]
    lm.save_settings(lm.settings)
    return lm.scan_notes(folder).chunks


def configure(lm: Lexmem, home: Path) -> None:
    """Settings a person changed: full capture for one repository, an opt-out, a name."""
    settings = lm.settings
    settings.capture.mode = "assist"
    settings.capture.project_modes = {str(home / "work/shop"): "full"}
    settings.capture.optout = [str(home / "work/client-acme-portal")]
    settings.capture.user_name = "Dana"
    lm.save_settings(settings)


def capture_calls(service: CaptureService, home: Path) -> int:
    """Configuration changes and a correction, as the service's capture calls take them."""
    shop, mobile = str(home / "work/shop"), str(home / "work/mobile-app")
    made = [
        service.capture_configuration_change("editor.theme", "light", "dark"),
        service.capture_configuration_change("python.formatter", "black", "ruff", project=shop),
        service.capture_configuration_change("editor.tabSize", 4, 2, project=mobile),
        service.capture_configuration_change("git.defaultBranch", "master", "main"),
        service.capture_configuration_change("editor.theme", "dark", "light"),
        service.capture_user_correction(
            "The billing API uses OAuth",
            "The billing API uses API keys",
            "How does the billing API authenticate?",
            project=str(home / "work/billing-service"),
        ),
    ]
    return sum(len(m) for m in made)


def quarantine_one(lm: Lexmem, rng: random.Random) -> None:
    """An event a killed producer left half-written: the service quarantines it."""
    eid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    cut = json.dumps({"v": 1, "event_id": eid, "session_id": "s", "event_type": "prompt"})
    lm.paths.inbox.mkdir(mode=0o700, parents=True, exist_ok=True)
    (lm.paths.inbox / f"{eid}.json").write_text(cut[:-20], encoding="utf-8")


def build(base: Path, memories: int, session_count: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    data, home = environment(base)
    if data.exists() and any(data.iterdir()):
        raise SystemExit(f"error: {data} is not empty: give a new folder")
    from lexmem.api import Lexmem
    from lexmem.service.ops import review
    from lexmem.service.writer import CaptureService

    rng = random.Random(seed)
    lm = Lexmem.open(data)
    service = CaptureService(lm)
    service.acquire()  # the hooks' SessionStart then finds a service and starts none
    try:
        configure(lm, home)
        hand = remember_by_hand(lm, home)
        notes = generated_notes(memories, seed, home)
        # The youngest tenth of the explicit notes came in this week, through the inbox.
        recent = sorted((n for n in notes if n[2] == "explicit"), key=lambda n: n[3])
        recent = recent[: len(notes) // 10]
        chosen = set(recent)
        bulk = store_generated(lm, [n for n in notes if n not in chosen])
        for mid in random.Random(seed + 1).sample(bulk, min(len(bulk), max(1, len(bulk) // 100))):
            lm.archive(mid)
        lm.archive(hand["hand15"])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        events = play_sessions(home, session_count, rng, env)
        watch_notes(lm, home)
        remember_recent(lm, recent)
        quarantine_one(lm, rng)
        service.drain()
        captured = capture_calls(service, home)
        # The person reviewed the older automatic captures, and threw a few away.
        queue = lm.review_queue()
        old = queue[len(queue) // 4 :]
        review(lm, old[: max(0, len(old) - 3)], "accepted")
        review(lm, old[-3:], "rejected")
        lm.refresh()
        figures = {
            "data": str(data),
            "home": str(home),
            "memories": lm.status_counts()["active"],
            "kept": lm.count(),
            "projects": len(lm.projects()),
            "sessions": len(lm.sessions()),
            "hook_events": events,
            "captured_by_calls": captured,
            "review_queue": len(lm.review_queue()),
            "audit": len(lm.audit_entries(limit=100_000)),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    finally:
        service.release()
        lm.close()
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a new folder: DIR/lexmem and DIR/home/dana")
    parser.add_argument(
        "--memories",
        type=int,
        default=3000,
        help="generated notes besides the hand-written ones (default 3000)",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=5,
        help="agent sessions through the hook, 0 to 5 (default 5)",
    )
    parser.add_argument("--seed", type=int, default=18, help="the generator's seed (default 18)")
    args = parser.parse_args(argv)
    if args.memories < 0 or not 0 <= args.sessions <= 5:
        parser.error("--memories must be 0 or more and --sessions 0 to 5")
    f = build(args.dir.expanduser().absolute(), args.memories, args.sessions, args.seed)
    print(
        f"{f['memories']:,} active memories ({f['kept']:,} kept) in {f['projects']} projects, {f['sessions']} sessions "
        f"({f['hook_events']} hook events), {f['audit']:,} audit entries, "
        f"{f['review_queue']} to review, in {f['seconds']} s: LEXMEM_HOME={f['data']} "
        f"HOME={f['home']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
