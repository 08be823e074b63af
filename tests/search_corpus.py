"""A small realistic store for search tests: 47 memories in three projects.

Remembered notes of the kind a person keeps (decisions, conventions, people, chores)
for a web shop, a novel and a home lab, and four agent sessions captured through the
inbox and the capture service, as the hook writes them, each ending in a session
handoff. One note answers "which database does the shop use" directly; a handoff of
a session that worked on the shop's database talks about the database at length.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lexmem.api import Lexmem, MemoryFilter
from lexmem.capture.inbox import Inbox, InboxEvent, make_event
from lexmem.models import MemorySource
from lexmem.service.writer import CaptureService

QUESTION = "which database does the shop use"
ANSWER = "The shop uses PostgreSQL 16 for orders, customers and the product catalogue."

NOTES: tuple[tuple[str, str], ...] = (
    ("shop", ANSWER),
    ("shop", "Payments go through Stripe; the webhook secret lives in the deploy keyring."),
    ("shop", "Product images are stored in an S3 bucket behind CloudFront."),
    ("shop", "Never deploy the shop on a Friday afternoon."),
    ("shop", "The checkout page must load in under two seconds on a 3G connection."),
    ("shop", "Anna owns the storefront design; ask her before changing the colours."),
    ("shop", "Run make release and then tag the commit to publish a new version of the shop."),
    ("shop", "Redis caches the category pages for five minutes."),
    ("shop", "The staging site is at staging.example-shop.test and resets every night."),
    ("shop", "VAT rates come from the tax table, never hard-coded in templates."),
    ("shop", "Shipping labels are printed through the DHL API; the sandbox key is in 1Password."),
    ("shop", "Customer support answers within one working day; tickets go to Zendesk."),
    ("shop", "Order numbers are sequential per year, like 2026-000123."),
    ("shop", "We use Django 5 with server-rendered templates and a little htmx."),
    ("shop", "Discount codes expire at midnight in the shop's own time zone, Europe/Berlin."),
    ("shop", "Nightly backups of the shop run at 02:00 and are kept for thirty days."),
    ("shop", "Search on the shop uses Meilisearch, reindexed after every product import."),
    ("shop", "The product feed for Google Shopping is regenerated every morning at 04:00."),
    ("novel", "The novel is set in a harbour town on the Baltic coast in 1923."),
    ("novel", "Mara is the protagonist; she runs the lighthouse after her father dies."),
    ("novel", "Chapters alternate between Mara and her brother Tomas."),
    ("novel", "The manuscript is written in Markdown and built to EPUB with pandoc."),
    ("novel", "Keep chapters under 4,000 words."),
    ("novel", "The editor wants the first three chapters by the end of March."),
    ("novel", "Use British spelling throughout the manuscript."),
    ("novel", "The storm in chapter twelve is the turning point of the plot."),
    ("novel", "Tomas never learns who sank the fishing boat."),
    ("novel", "The working title is The Keeper's Daughter."),
    ("novel", "Dialogue uses single quotation marks, as the publisher's house style asks."),
    ("novel", "Research notes on 1920s fishing boats are in research/boats.md."),
    ("novel", "Beta readers are Jonas, Priya and my sister; send them chapters as PDF."),
    ("homelab", "The home server runs Proxmox on an old ThinkCentre with 32 GB of RAM."),
    ("homelab", "Pi-hole handles DNS for the whole flat."),
    ("homelab", "Backups go to a Hetzner storage box with restic every night."),
    ("homelab", "The NAS has two mirrored 4 TB disks."),
    ("homelab", "Home Assistant runs in a VM and controls the heating."),
    ("homelab", "The router's admin password is in the password manager, not in notes."),
    ("homelab", "Grafana dashboards show the power draw of the rack."),
    ("homelab", "Update the containers on the first Sunday of each month."),
    ("homelab", "The Postgres database for Nextcloud runs in its own container."),
    ("homelab", "Tailscale connects the laptop to the home network when travelling."),
)

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


class _Session:
    """The events the hook writes for one agent session, in order."""

    def __init__(self, sid: str, project: str, start: datetime) -> None:
        self.sid, self.project, self.clock = sid, project, start
        self.events: list[InboxEvent] = []
        self._uses = 0

    def event(self, kind: str, content: str = "", **meta: Any) -> None:
        self.clock += timedelta(minutes=1)
        self.events.append(
            make_event(
                kind, content, session_id=self.sid, agent="claude", project=self.project,
                cwd=self.project, metadata=meta, timestamp=self.clock.isoformat(),
            )
        )  # fmt: skip

    def tool(self, name: str, tool_input: dict[str, Any], output: str, **meta: Any) -> None:
        self._uses += 1
        use = f"toolu_{self._uses:02d}"
        self.event("tool_call", "", tool_name=name, tool_input=tool_input, tool_use_id=use)
        self.event("tool_result", output, tool_name=name, tool_use_id=use, **meta)

    def edit(self, path: str, old: str, new: str) -> None:
        full = f"{self.project}/{path}"
        self.tool(
            "Edit",
            {"file_path": full, "old_string": old, "new_string": new},
            f"The file {full} has been updated.",
        )

    def bash(self, command: str, output: str = "", code: int = 0) -> None:
        self.tool("Bash", {"command": command}, output, exit_code=code)


def _sessions(root: str) -> list[_Session]:
    shop, novel = f"{root}/shop", f"{root}/novel"
    out = []
    s = _Session("sess-shop-db", shop, T0)
    s.event("session_start")
    s.event(
        "prompt",
        "The shop's database migrations fail on a fresh database since the orders "
        "change. Can you make the migrations run again and check the database tests?",
    )
    s.bash("python manage.py migrate", "django.db.utils.ProgrammingError: relation", code=1)
    s.edit("orders/migrations/0012_order_number.py", "AddField(", "AlterField(")
    s.edit("shop/settings/database.py", "CONN_MAX_AGE = 0", "CONN_MAX_AGE = 60")
    s.bash("python manage.py migrate", "Applying orders.0012_order_number... OK")
    s.bash("pytest tests/test_database.py", "12 passed in 3.1s")
    s.event(
        "response",
        "The migrations run on a fresh database again: migration 0012 altered a field "
        "the database did not have yet, so it now alters it after adding it. The "
        "database tests pass and the shop's settings keep connections open for a minute.",
    )
    s.event("session_end")
    out.append(s)

    s = _Session("sess-shop-css", shop, T0 + timedelta(hours=3))
    s.event("session_start")
    s.event("prompt", "The checkout button is hidden behind the cookie banner on phones. Fix it.")
    s.edit("static/css/checkout.css", "z-index: 10", "z-index: 1000")
    s.bash("npm run build", "built in 2.4s")
    s.event(
        "response",
        "The checkout button sits above the cookie banner now: its z-index was lower "
        "than the banner's. The build passes.",
    )
    s.event("session_end")
    out.append(s)

    s = _Session("sess-novel-epub", novel, T0 + timedelta(days=1))
    s.event("session_start")
    s.event("prompt", "The EPUB build drops the chapter titles. Can you fix the pandoc build?")
    s.edit("build/epub.yaml", "toc: false", "toc: true")
    s.edit("Makefile", "pandoc -o book.epub", "pandoc --top-level-division=chapter -o book.epub")
    s.bash("make epub", "book.epub written")
    s.event(
        "response",
        "The EPUB has its chapter titles again: pandoc needed the top-level division "
        "set to chapter, and the table of contents is back on.",
    )
    s.event("session_end")
    out.append(s)

    s = _Session("sess-novel-count", novel, T0 + timedelta(days=2))
    s.event("session_start")
    s.event("prompt", "Write a script that counts the words of each chapter of the manuscript.")
    s.edit("tools/wordcount.py", "", "import pathlib\n")
    s.bash("python tools/wordcount.py", "chapter-01.md 3812\nchapter-02.md 4105")
    s.event(
        "response",
        "tools/wordcount.py prints the word count of each chapter; chapter two is over "
        "the 4,000-word limit.",
    )
    s.event("session_end")
    out.append(s)
    return out


def populate(lm: Lexmem, root: str = "/home/u/work") -> dict[str, str]:
    """Fill ``lm`` with the corpus; the ids of the answer and the shop database handoff."""
    ids = {}
    for project, text in NOTES:
        mid = lm.remember(text, project=project).memories[0].id
        if text == ANSWER:
            ids["answer"] = mid
    lm.settings.capture.mode = "full"
    inbox = Inbox(lm.paths.inbox)
    for s in _sessions(root):
        for e in s.events:
            inbox.write(e)
    with CaptureService(lm) as service:
        service.drain()
    handoffs = [
        m
        for m in lm.list_memories(MemoryFilter(source=MemorySource.HOOK_EVENT), limit=1000)
        if m.title.startswith("Handoff")
    ]
    ids["handoff"] = next(m.id for m in handoffs if m.session_id == "sess-shop-db")
    return ids
