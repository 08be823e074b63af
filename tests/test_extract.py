"""Tests for lexmem.capture.extract: candidates from windows of agent-session events.

Each scenario is a realistic window (what the hook would capture from Claude Code,
Codex or a writer's session) built with :class:`Session` below or loaded from
``tests/data/extract/*.jsonl``. The assertions check what a developer would want
remembered (kind, type, key phrases, provenance) and the confidence band that decides
whether ``assist`` (>= 0.75) or only ``full`` (>= 0.5) keeps it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lexmem.capture.extract import (
    TRIGGER_PATTERNS,
    Candidate,
    CandidateKind,
    ExtractOptions,
    Extractor,
    confirmations,
    is_chitchat,
    trigger_phrases,
)
from lexmem.models import MemorySource, MemoryType

DATA = Path(__file__).parent / "data" / "extract"
ASSIST = 0.75  # what capture mode "assist" keeps
FULL = 0.5  # what capture mode "full" keeps
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


# ---------------------------------------------------------------- builders


class Session:
    """Builds the events the hook would capture, one call per event (or tool use)."""

    def __init__(
        self, session: str = "s1", project: str | None = "/home/u/shop", agent: str = "claude"
    ) -> None:
        self.session = session
        self.project = project
        self.agent = agent
        self.events: list[dict[str, Any]] = []
        self.clock = T0
        self._uses = 0

    def event(self, etype: str, content: str = "", *, minutes: float = 1, **meta: Any) -> str:
        self.clock += timedelta(minutes=minutes)
        event_id = f"{self.session}-{len(self.events) + 1:03d}"
        self.events.append(
            {
                "event_id": event_id,
                "session_id": self.session,
                "event_type": etype,
                "timestamp": self.clock.isoformat(),
                "agent": self.agent,
                "project": self.project,
                "cwd": self.project,
                "content": content,
                "metadata": meta,
            }
        )
        return event_id

    def prompt(self, text: str, **kw: Any) -> str:
        return self.event("prompt", text, **kw)

    def response(self, text: str, **kw: Any) -> str:
        return self.event("response", text, **kw)

    def tool(
        self, name: str, tool_input: dict[str, Any], output: str, *, minutes: float = 1, **meta: Any
    ) -> tuple[str, str]:
        self._uses += 1
        use = f"toolu_{self._uses:02d}"
        call = self.event(
            "tool_call", "", minutes=minutes, tool_name=name, tool_input=tool_input, tool_use_id=use
        )
        result = self.event(
            "tool_result", output, minutes=0, tool_name=name, tool_use_id=use, **meta
        )
        return call, result

    def bash(self, command: str, output: str = "", code: int = 0, **kw: Any) -> tuple[str, str]:
        return self.tool("Bash", {"command": command}, output, exit_code=code, **kw)

    def edit(self, path: str, old: str = "", new: str = "", **kw: Any) -> tuple[str, str]:
        full = path if path.startswith("/") else f"{self.project}/{path}"
        return self.tool(
            "Edit",
            {"file_path": full, "old_string": old, "new_string": new},
            f"The file {full} has been updated.",
            **kw,
        )

    def read(self, path: str, output: str = "", **kw: Any) -> tuple[str, str]:
        full = path if path.startswith("/") else f"{self.project}/{path}"
        return self.tool("Read", {"file_path": full}, output, **kw)


def load(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def extract(
    events: list[dict[str, Any]], *, final: bool = False, **options: Any
) -> list[Candidate]:
    return Extractor(ExtractOptions(**options)).extract(events, final=final)


def of_kind(cands: list[Candidate], kind: CandidateKind) -> list[Candidate]:
    return [c for c in cands if c.kind is kind]


def one(cands: list[Candidate], kind: CandidateKind) -> Candidate:
    found = of_kind(cands, kind)
    assert len(found) == 1, f"expected one {kind}, got {[c.title for c in cands]}"
    return found[0]


def assert_well_formed(c: Candidate) -> None:
    assert 0.0 <= c.confidence <= 1.0
    assert c.title and len(c.title) <= 80
    assert c.text and len(c.text) <= 1_200
    assert c.rule
    assert c.metadata["candidate_kind"] == c.kind.value
    assert isinstance(c.event_ids, tuple)
    json.dumps(c.to_dict())  # the audit log must be able to store it


PYTEST_KEYERROR = """============================= test session starts ==============================
collected 12 items

tests/test_orders.py ..........F.                                         [100%]

=================================== FAILURES ===================================
Traceback (most recent call last):
  File "/home/u/shop/tests/test_orders.py", line 31, in test_order_total
    assert total(make_order()) == 42
  File "/home/u/shop/orders/service.py", line 42, in total
    customer = payload["customer_id"]
KeyError: 'customer_id'
=========================== short test summary info ============================
FAILED tests/test_orders.py::test_order_total - KeyError: 'customer_id'
========================= 1 failed, 11 passed in 0.41s ========================="""


def debugging_window() -> tuple[Session, dict[str, str]]:
    s = Session()
    ids: dict[str, str] = {}
    ids["prompt"] = s.prompt("The order tests are failing since this morning, can you fix them?")
    ids["fail_call"], ids["fail"] = s.bash("pytest tests/test_orders.py", PYTEST_KEYERROR, code=1)
    s.read("orders/service.py", "def total(payload):\n    customer = payload['customer_id']\n")
    s.tool("Grep", {"pattern": "customer_id"}, "orders/service.py:42: payload['customer_id']")
    ids["edit"], _ = s.edit(
        "orders/service.py",
        "payload['customer_id']",
        "payload.get('customer_id') or session.customer_id",
    )
    ids["pass_call"], ids["pass"] = s.bash("pytest tests/test_orders.py", "12 passed in 0.38s")
    ids["explain"] = s.response(
        "Fixed. The root cause was that the mobile client omits customer_id from the order "
        "payload, so total() raised KeyError. I changed orders/service.py to fall back to the "
        "session's customer when the field is missing. All 12 tests pass now."
    )
    s.prompt("thanks!")
    s.response("You're welcome!")
    return s, ids


# ------------------------------------------------------ resolved bugs (FIX)


def test_debugging_session_gives_one_fix_with_cause_files_and_verifying_command() -> None:
    s, ids = debugging_window()
    cands = extract(s.events)
    fix = one(cands, CandidateKind.FIX)
    assert len(cands) == 1  # the reads, the grep and the thanks add nothing
    assert fix.type is MemoryType.EPISODIC
    assert fix.confidence >= ASSIST
    assert fix.title == "Fix: KeyError 'customer_id' in orders/service.py"
    assert "KeyError: 'customer_id'" in fix.text
    assert "orders/service.py:42 (in total)" in fix.text
    assert "tests/test_orders.py::test_order_total" in fix.text
    assert "Cause: The root cause was that the mobile client omits customer_id" in fix.text
    assert "Fix: I changed orders/service.py to fall back" in fix.text
    assert "Verified: `pytest tests/test_orders.py` passes." in fix.text
    assert fix.metadata["files"] == ["orders/service.py"]
    assert fix.metadata["commands"] == ["pytest tests/test_orders.py"] * 2
    for key in ("fail", "edit", "pass", "explain"):
        assert ids[key] in fix.event_ids
    assert fix.event_ids == tuple(sorted(fix.event_ids))  # session order
    assert fix.project == "/home/u/shop" and fix.session_id == "s1"
    assert_well_formed(fix)


def test_claude_code_fixture_session_finds_the_fix_at_the_code_frame() -> None:
    cands = extract(load("claude_debug_session.jsonl"))
    fix = one(cands, CandidateKind.FIX)
    assert [c.kind for c in cands] == [CandidateKind.FIX]
    assert fix.title == "Fix: KeyError 'WELCOME10' in shop/checkout.py"
    assert "shop/checkout.py:88 (in total)" in fix.text  # pytest's short frame, not the test
    assert "key coupons by lower-case code" in fix.text
    assert "order.coupon.lower()" in fix.text
    assert fix.metadata["files"] == ["shop/checkout.py"]
    assert {"cc-7f3a-004", "cc-7f3a-011", "cc-7f3a-014", "cc-7f3a-015"} <= set(fix.event_ids)
    # Reads and greps are no part of the provenance.
    assert "cc-7f3a-006" not in fix.event_ids and "cc-7f3a-008" not in fix.event_ids


def test_codex_fixture_exec_command_and_apply_patch() -> None:
    cands = extract(load("codex_fix_session.jsonl"))
    fix = one(cands, CandidateKind.FIX)
    assert fix.confidence >= ASSIST
    assert "`cargo test` failed with panic: index out of bounds" in fix.text  # bash -lc unwrapped
    assert "src/parse.rs:41" in fix.text
    assert "guard clause was removed" in fix.text
    assert fix.metadata["files"] == ["src/parse.rs"]  # from the patch's "*** Update File:"


def test_fix_found_across_two_windows_of_one_session() -> None:
    ex = Extractor()
    s = Session()
    s.prompt("the build is broken")
    _, fail = s.bash(
        "npm run build",
        "src/cart.ts(14,7): error TS2322: Type 'string' is not assignable to type 'number'.",
        code=2,
    )
    s.response("The build fails with a type error in src/cart.ts.")
    assert ex.extract(s.events) == []
    first = len(s.events)
    s.prompt("ok, go on and fix it")
    s.edit("src/cart.ts", "qty: string", "qty: number")
    s.bash("npm run build", "built in 2.1s")
    s.response(
        "The build passes now. The cause was that quantity came from the form as a string; "
        "I changed the CartLine type to number."
    )
    fix = one(ex.extract(s.events[first:]), CandidateKind.FIX)
    assert fix.title == "Fix: TS2322 in src/cart.ts"
    assert "TS2322: Type 'string' is not assignable" in fix.text and "src/cart.ts:14" in fix.text
    assert fail in fix.event_ids  # provenance reaches back into the earlier window
    assert fix.confidence >= ASSIST


def test_fix_verified_but_unexplained_is_full_only_and_explained_but_unverified_too() -> None:
    s = Session()
    s.prompt("fix the failing test")
    s.bash("pytest -q", PYTEST_KEYERROR, code=1)
    s.edit("orders/service.py", "payload['customer_id']", "payload.get('customer_id')")
    s.bash("pytest -q", "12 passed")
    s.response("Done.")
    fix = one(extract(s.events), CandidateKind.FIX)
    assert FULL <= fix.confidence < ASSIST
    assert fix.source is MemorySource.HOOK_EVENT

    s = Session()
    s.prompt("fix the failing test")
    s.bash("pytest -q", PYTEST_KEYERROR, code=1)
    s.edit("orders/service.py", "payload['customer_id']", "payload.get('customer_id')")
    s.response(
        "The problem was that the payload has no customer_id for guest orders. "
        "I changed total() to use .get() instead."
    )
    fix = one(extract(s.events), CandidateKind.FIX)
    assert FULL <= fix.confidence < ASSIST
    assert fix.rule == "fix-explained"
    assert "Verified" not in fix.text


def test_an_unresolved_failure_and_a_flaky_rerun_give_no_fix() -> None:
    s = Session()
    s.prompt("why does CI fail?")
    s.bash("pytest -q", PYTEST_KEYERROR, code=1)
    s.response("The order tests fail with a KeyError; I have not changed anything yet.")
    assert extract(s.events, final=False) == []
    s.bash("pytest -q", "12 passed")  # passes again with no change in between: flaky, not fixed
    assert of_kind(extract(s.events), CandidateKind.FIX) == []


def test_lint_findings_fixed_from_post_tool_use_only_events_stay_low() -> None:
    # A capture that only sees PostToolUse: results carry their own tool input.
    s = Session()
    s.prompt("run the linter and fix what it finds")
    s.event(
        "tool_result",
        "src/app.py:3:1: F401 [*] `os` imported but unused\nFound 1 error.",
        tool_name="Bash",
        tool_input={"command": "ruff check src"},
    )
    s.event(
        "tool_result",
        "updated",
        tool_name="Edit",
        tool_input={"file_path": "/home/u/shop/src/app.py", "old_string": "import os\n"},
    )
    s.event(
        "tool_result",
        "All checks passed!",
        tool_name="Bash",
        tool_input={"command": "ruff check src"},
    )
    s.response("Removed the unused import in src/app.py; ruff is clean now.")
    fix = one(extract(s.events), CandidateKind.FIX)
    assert "F401" in fix.text and fix.metadata["files"] == ["src/app.py"]
    assert fix.confidence < ASSIST  # a lint finding is rarely worth recalling later


# --------------------------------------------------------------- decisions


def test_architecture_discussion_gives_the_decision_with_the_agents_reason() -> None:
    s = Session()
    s.prompt("We need a datastore for the new orders service. What are the options?")
    options = s.response(
        "Here are the options:\n\n"
        "1. PostgreSQL: transactional, and the team already runs it.\n"
        "2. MongoDB: flexible documents, but multi-document transactions are clunky.\n"
        "3. DynamoDB: serverless, but it locks us in.\n\n"
        "I recommend PostgreSQL because orders and payments must be updated in one transaction."
    )
    choice = s.prompt("Sounds good, let's go with PostgreSQL for the orders service.")
    s.response("Great, I'll add the SQLAlchemy models next.")
    cands = extract(s.events)
    decision = one(cands, CandidateKind.DECISION)
    assert len(cands) == 1
    assert decision.type is MemoryType.SEMANTIC and decision.confidence >= ASSIST
    assert decision.title == "Decision: use PostgreSQL for the orders service"
    assert decision.text == (
        "Decision: use PostgreSQL for the orders service, because orders and payments must "
        "be updated in one transaction."
    )
    assert decision.event_ids == (options, choice)
    assert decision.source is MemorySource.CONVERSATION


def test_agent_proposal_becomes_a_decision_only_when_the_user_confirms() -> None:
    s = Session()
    s.prompt("The job queue loses messages when the worker restarts.")
    proposal = s.response(
        "I'll use Redis Streams for the job queue because consumer groups give us "
        "acknowledgements and replay after a crash."
    )
    yes = s.prompt("yes, go ahead")
    decision = one(extract(s.events), CandidateKind.DECISION)
    assert decision.title == "Decision: use Redis Streams for the job queue"
    assert "because consumer groups give us acknowledgements" in decision.text
    assert "confirmed by the user" in decision.text
    assert decision.event_ids == (proposal, yes)
    assert decision.confidence >= ASSIST
    assert decision.source is MemorySource.AGENT_RESPONSE

    # Unconfirmed, or an "ok" to a plain statement of intent: no decision.
    s = Session()
    s.prompt("The job queue loses messages when the worker restarts.")
    s.response("I'll use Redis Streams for the job queue because consumer groups ack messages.")
    s.prompt("what about the retry limit?")
    assert of_kind(extract(s.events), CandidateKind.DECISION) == []
    s = Session()
    s.prompt("find where the retry limit is set")
    s.response("I'll use grep to find it.")
    s.prompt("ok")
    assert extract(s.events) == []


def test_going_with_an_option_resolves_it_from_the_agents_list() -> None:
    s = Session()
    s.prompt("How should we paginate the orders API?")
    listed = s.response(
        "Two approaches:\n"
        "- Option A: offset pagination, simple but slow on deep pages.\n"
        "- Option B: cursor pagination keyed on created_at, stable under inserts."
    )
    picked = s.prompt("Go with option B.")
    decision = one(extract(s.events), CandidateKind.DECISION)
    assert decision.text == (
        "Decision: use cursor pagination keyed on created_at, stable under inserts (option B)."
    )
    assert decision.event_ids == (listed, picked)
    assert decision.confidence >= ASSIST


@pytest.mark.parametrize(
    ("prompt", "title", "phrase"),
    [
        (
            "Use httpx instead of requests for the payment client.",
            "Decision: use httpx instead of requests for the payment client",
            "use httpx instead of requests",
        ),
        (
            "We decided to keep SQLite for the test suite because it needs no server.",
            "Decision: keep SQLite for the test suite",
            "because it needs no server",
        ),
        (
            "Decision: all timestamps are stored in UTC.",
            "Decision: all timestamps are stored in UTC",
            "stored in UTC",
        ),
        (
            "OK, we'll switch to Vite for the frontend build.",
            "Decision: switch to Vite for the frontend build",
            "switch to Vite",
        ),
    ],
)
def test_user_stated_decisions(prompt: str, title: str, phrase: str) -> None:
    s = Session()
    pid = s.prompt(prompt)
    decision = one(extract(s.events), CandidateKind.DECISION)
    assert decision.title == title
    assert phrase in decision.text
    assert decision.confidence >= ASSIST
    assert decision.event_ids == (pid,)


def test_local_or_temporary_choices_are_not_assist_worthy() -> None:
    s = Session()
    s.prompt("Let's use a dict here.")
    s.prompt("Let's use the mock server for now.")
    cands = extract(s.events)
    assert len(cands) == 2
    assert all(c.confidence < ASSIST for c in cands)


# -------------------------------------------- constraints and preferences


def test_ground_rules_give_constraints_and_preferences() -> None:
    s = Session()
    s.prompt("We must support Python 3.9.")
    s.prompt("Never push to main.")
    s.prompt("I prefer tabs.")
    s.prompt("Always use pnpm, not npm.")
    s.prompt("Don't use mocks in integration tests.")
    cands = extract(s.events)
    got = {c.text: (c.kind, c.type, c.trigger) for c in cands}
    assert got == {
        "We must support Python 3.9.": (CandidateKind.CONSTRAINT, MemoryType.SEMANTIC, False),
        "Never push to main.": (CandidateKind.CONSTRAINT, MemoryType.SEMANTIC, False),
        "User prefers tabs.": (CandidateKind.PREFERENCE, MemoryType.SEMANTIC, False),
        "Always use pnpm, not npm.": (CandidateKind.PREFERENCE, MemoryType.SEMANTIC, True),
        "Don't use mocks in integration tests.": (
            CandidateKind.CONSTRAINT,
            MemoryType.SEMANTIC,
            False,
        ),
    }
    assert all(c.confidence >= ASSIST for c in cands)
    assert [c.title for c in cands][:2] == [
        "Constraint: we must support Python 3.9",
        "Constraint: never push to main",
    ]


def test_task_requests_praise_and_speculation_are_not_rules() -> None:
    s = Session()
    for text in (
        "I want you to fix the login bug.",
        "I like it!",
        "I love how you structured the tests.",
        "Don't worry about the docs.",
        "Don't forget to run the tests.",
        "It must be a caching problem.",
        "We must be missing an import somewhere.",
        "Please refactor the checkout module.",
        "Make the button blue.",
    ):
        s.prompt(text)
        s.response("On it.")
    assert extract(s.events) == []


def test_a_rule_about_the_thing_at_hand_is_only_full_worthy() -> None:
    s = Session()
    s.prompt("Don't touch this file until the release is out.")
    s.prompt("Don't change the public API for now.")
    cands = extract(s.events)
    assert [c.kind for c in cands] == [CandidateKind.CONSTRAINT, CandidateKind.CONSTRAINT]
    assert all(c.confidence < ASSIST for c in cands)


# ------------------------------------------------------- explicit triggers


def test_seed_scenario_remember_that_we_use_postgresql() -> None:
    s = Session()
    pid = s.prompt("Remember that we use PostgreSQL")
    c = one(extract(s.events), CandidateKind.EXPLICIT)
    assert c.text == "We use PostgreSQL."
    assert c.type is MemoryType.SEMANTIC
    assert c.trigger is True and c.metadata["reinforce"] is True
    assert c.confidence >= 0.9
    assert c.source is MemorySource.EXPLICIT
    assert c.event_ids == (pid,)


@pytest.mark.parametrize(
    ("prompt", "kind", "text"),
    [
        (
            "Note that the staging database is reset every night at 02:00 UTC.",
            CandidateKind.EXPLICIT,
            "The staging database is reset every night at 02:00 UTC.",
        ),
        (
            "Keep in mind that the payments sandbox rejects amounts over 10,000.",
            CandidateKind.EXPLICIT,
            "The payments sandbox rejects amounts over 10,000.",
        ),
        (
            "For future reference, invoices are immutable once sent.",
            CandidateKind.EXPLICIT,
            "Invoices are immutable once sent.",
        ),
        (
            "From now on, run ruff before every commit.",
            CandidateKind.PREFERENCE,
            "Run ruff before every commit.",
        ),
        ("Always use pnpm.", CandidateKind.PREFERENCE, "Always use pnpm."),
        (
            "Never do force pushes on shared branches.",
            CandidateKind.CONSTRAINT,
            "Never do force pushes on shared branches.",
        ),
        (
            "I prefer to keep functions under 40 lines.",
            CandidateKind.PREFERENCE,
            "User prefers to keep functions under 40 lines.",
        ),
        (
            "I want all API errors to return JSON bodies.",
            CandidateKind.PREFERENCE,
            "User wants all API errors to return JSON bodies.",
        ),
    ],
)
def test_trigger_phrases_give_high_confidence_flagged_candidates(
    prompt: str, kind: CandidateKind, text: str
) -> None:
    s = Session()
    s.prompt(prompt)
    c = one(extract(s.events), kind)
    assert c.text == text
    assert c.trigger is True
    assert c.confidence >= 0.85
    assert c.type is MemoryType.SEMANTIC


def test_trigger_phrases_function() -> None:
    assert len(TRIGGER_PATTERNS) >= 9
    assert trigger_phrases("Remember that we use PostgreSQL") == ["remember that"]
    assert trigger_phrases("From now on, always use pnpm. I want short commits.") == [
        "from now on",
        "always use",
        "i want",
    ]
    assert trigger_phrases("Keep in mind, for future reference, note that X") == [
        "keep in mind",
        "for future reference",
        "note that",
    ]
    assert trigger_phrases("I prefer to NEVER DO that") == ["prefer to", "never do"]
    assert trigger_phrases("thanks, looks good") == []


# -------------------------------------------------------------- corrections


def test_correction_dialogue_states_the_rule_and_points_at_the_wrong_answer() -> None:
    s = Session()
    s.prompt("How does the billing API authenticate?")
    wrong = s.response(
        "The billing API uses OAuth 2.0 client credentials; you fetch a token from /oauth/token."
    )
    fix = s.prompt("No, that's wrong: the API uses API keys, not OAuth.")
    c = one(extract(s.events), CandidateKind.CORRECTION)
    assert c.text == "The API uses API keys, not OAuth."
    assert c.type is MemoryType.SEMANTIC
    assert c.source is MemorySource.CORRECTION
    assert c.metadata["reinforce"] is True
    assert c.confidence >= 0.85
    assert c.event_ids == (wrong, fix)


def test_actually_its_port_5433_rewrites_the_agents_statement() -> None:
    s = Session()
    s.prompt("Connect to the local database and list the tables.")
    said = s.response("Postgres listens on port 5432 locally, so I'll connect with psql -p 5432.")
    s.prompt("actually it's port 5433")
    c = one(extract(s.events), CandidateKind.CORRECTION)
    assert c.text == "Postgres listens on port 5433 locally (not 5432)."
    assert said in c.event_ids
    assert c.confidence >= ASSIST


@pytest.mark.parametrize(
    ("agent_turn", "user", "text"),
    [
        ("npm install zod", "Don't use npm, use pnpm.", "Use pnpm, not npm."),
        (
            "I'll write a raw SQL migration in migrations/0007.sql.",
            "That's not how we do migrations here. We generate them with alembic revision "
            "--autogenerate.",
            "How we do migrations here: we generate them with alembic revision --autogenerate.",
        ),
        (
            "The retry limit is 3.",
            "That's incorrect. The retry limit is 5 and it lives in settings.toml.",
            "The retry limit is 5 and it lives in settings.toml.",
        ),
    ],
)
def test_correction_forms(agent_turn: str, user: str, text: str) -> None:
    s = Session()
    s.prompt("go on")
    if agent_turn.startswith("npm"):
        s.bash(agent_turn, "added 1 package")
    else:
        s.response(agent_turn)
    s.prompt(user)
    c = one(extract(s.events), CandidateKind.CORRECTION)
    assert c.text == text
    assert c.confidence >= ASSIST
    assert c.metadata["reinforce"] is True


def test_dont_do_that_again_names_what_the_agent_did() -> None:
    s = Session()
    s.prompt("clean up the build")
    did, _ = s.bash("rm -rf build/ dist/", "")
    s.prompt("don't do that again")
    c = one(extract(s.events), CandidateKind.CORRECTION)
    assert "`rm -rf build/ dist/`" in c.text
    assert did in c.event_ids
    assert FULL <= c.confidence < ASSIST  # what exactly was wrong is a guess


def test_seed_scenario_capture_user_correction() -> None:
    c = Extractor().correction("API uses OAuth", "API uses API keys")
    assert c is not None
    assert "API keys" in c.text
    assert c.text == "API uses API keys, not OAuth."
    assert c.kind is CandidateKind.CORRECTION and c.type is MemoryType.SEMANTIC
    assert c.source is MemorySource.CORRECTION
    assert c.metadata["reinforce"] is True
    assert c.confidence >= 0.85
    assert c.title == "Correction: API uses API keys, not OAuth"


def test_correction_from_a_word_diff() -> None:
    ex = Extractor()
    c = ex.correction(
        "The API uses OAuth for authentication.", "The API uses API keys for authentication."
    )
    assert c is not None and c.text == "The API uses API keys for authentication, not OAuth."
    c = ex.correction(
        "Mara looked up, her blue eyes narrowing.",
        "Mara looked up, her green eyes narrowing.",
        context="chapter 3 draft",
    )
    assert c is not None
    assert c.text.startswith("Use “green”, not “blue”. Corrected text: “Mara looked up")
    assert c.text.endswith("Context: Chapter 3 draft.")
    c = ex.correction("We very strongly recommend the blue plan.", "We recommend the blue plan.")
    assert c is not None and c.text.startswith("Leave out “very strongly”.")
    c = ex.correction("Run the tests.", "Run the tests with --no-cov.")
    assert c is not None and "include “with --no-cov”" in c.text.lower()
    assert ex.correction("same text here", "same   text\nhere") is None
    rewrite = ex.correction("Hello world, this is a test.", "Completely different words now.")
    assert rewrite is not None and rewrite.confidence < ASSIST
    assert rewrite.rule == "correction-rewrite"


# ------------------------------------------------------------ configuration


def test_seed_scenario_configuration_change_theme_light_to_dark() -> None:
    c = Extractor().configuration("theme", "light", "dark")
    assert c.text == "User prefers dark mode."
    assert c.kind is CandidateKind.CONFIGURATION
    assert c.type is MemoryType.SEMANTIC and c.source is MemorySource.CONFIGURATION
    assert c.confidence >= ASSIST


@pytest.mark.parametrize(
    ("key", "old", "new", "text"),
    [
        ("editor.fontSize", 12, 14, "User changed font size from 12 to 14."),
        ("editor.formatOnSave", False, True, "User prefers format on save enabled."),
        ("autoSave", "on", "off", "User prefers auto save disabled."),
        ("capture.mode", None, "full", "User prefers capture mode set to full."),
        ("ui.colorScheme", "light", "Solarized Dark", "User prefers the Solarized Dark theme."),
        ("appearance", "dark", "light", "User prefers light mode."),
    ],
)
def test_configuration_phrasing(key: str, old: object, new: object, text: str) -> None:
    assert Extractor().configuration(key, old, new).text == text


def test_secret_settings_keep_their_values_out() -> None:
    c = Extractor().configuration("github_token", "[REDACTED:github_token]", "ghp_x")
    assert c.text == "User changed the github token setting."
    assert "ghp_x" not in json.dumps(c.to_dict())
    assert c.confidence < FULL


def test_config_change_events_in_a_window() -> None:
    s = Session(project=None)
    changed = s.event("config_change", "", key="theme", old="light", new="dark")
    s.event("config_change", "", key="editor.fontSize", old=12, new=12)  # no change
    s.event("config_change", "", old=1, new=2)  # no key: ignored
    c = one(extract(s.events), CandidateKind.CONFIGURATION)
    assert c.text == "User prefers dark mode."
    assert c.event_ids == (changed,)
    assert c.project is None


# ---------------------------------------------------------------- workflow


def test_three_actions_within_thirty_minutes_form_a_workflow() -> None:
    s = Session()
    s.prompt("ship the release notes change")
    a, _ = s.bash("npm test", "Tests: 42 passed, 42 total")
    b, _ = s.bash("npm run build", "built in 3.2s", minutes=4)
    c_, _ = s.bash("git push origin main", "To github.com:u/shop.git", minutes=5)
    s.response("Pushed.")
    wf = one(extract(s.events), CandidateKind.WORKFLOW)
    assert wf.type is MemoryType.PROCEDURAL and wf.source is MemorySource.WORKFLOW
    assert wf.text == (
        "To ship a change in shop: 1) run the tests (`npm test`) 2) build (`npm run build`) "
        "3) push (`git push origin main`)."
    )
    assert wf.title == "Workflow: ship a change (test → build → push)"
    assert wf.event_ids == (a, b, c_)
    assert FULL <= wf.confidence < ASSIST  # seen once: a pattern, not yet a habit


def test_two_actions_or_actions_spread_over_two_hours_are_no_workflow() -> None:
    s = Session()
    s.prompt("ship it")
    s.bash("npm test", "Tests: 42 passed")
    s.bash("git push", "")
    assert of_kind(extract(s.events), CandidateKind.WORKFLOW) == []

    s = Session()
    s.prompt("ship it")
    s.bash("npm test", "Tests: 42 passed")
    s.bash("npm run build", "built", minutes=60)
    s.bash("git push", "", minutes=60)
    assert of_kind(extract(s.events), CandidateKind.WORKFLOW) == []


def test_edit_test_commit_is_a_workflow_and_a_repeated_one_is_assist_worthy() -> None:
    s = Session()
    s.prompt("fix the typo in the README and commit it")
    s.edit("README.md", "teh", "the")
    s.bash("pytest -q", "3 passed in 0.1s")
    s.bash('git add README.md && git commit -m "Fix typo"', "[main 1a2b3c] Fix typo")
    wf = one(extract(s.events), CandidateKind.WORKFLOW)
    assert wf.text == (
        "To commit a change in shop: 1) edit the code (README.md) 2) run the tests "
        '(`pytest -q`) 3) commit (`git commit -m "…"`).'
    )
    assert wf.confidence < ASSIST

    s = Session()
    s.prompt("release both packages")
    for _ in range(2):
        s.bash("make test", "ok")
        s.bash("make dist", "built")
        s.bash("twine upload dist/*", "uploaded")
    wf = one(extract(s.events), CandidateKind.WORKFLOW)
    assert wf.metadata["stages"] == ["test", "build", "release"]
    assert wf.metadata["repeats"] == 2
    assert wf.confidence >= ASSIST


def test_seed_scenario_capture_workflow_pattern() -> None:
    actions = [
        {"action_type": "command", "description": "run tests", "timestamp": T0.isoformat()},
        {"action_type": "command", "description": "build", "timestamp": (T0 + timedelta(minutes=5)).isoformat()},
        {"action_type": "command", "description": "commit", "timestamp": (T0 + timedelta(minutes=9)).isoformat()},
        {"action_type": "command", "description": "push", "timestamp": (T0 + timedelta(minutes=12)).isoformat()},
    ]  # fmt: skip
    ex = Extractor()
    wf = ex.workflow(actions, project="/home/u/shop")
    assert wf is not None
    assert wf.type is MemoryType.PROCEDURAL and wf.kind is CandidateKind.WORKFLOW
    assert wf.text == "To ship a change in shop: 1) run tests 2) build 3) commit 4) push."
    assert ex.workflow(actions[:2]) is None  # fewer than three
    spread = [
        dict(a, timestamp=(T0 + timedelta(hours=i)).isoformat()) for i, a in enumerate(actions)
    ]
    assert ex.workflow(spread) is None  # longer than the pattern window
    reads = [
        {"action_type": "open", "description": f"open file {n}.py", "timestamp": T0.isoformat()}
        for n in "abcde"
    ]
    assert ex.workflow(reads) is None  # unrelated, random actions
    with_commands = [
        {"action_type": "shell", "description": "", "timestamp": T0.isoformat(), "metadata": {"command": c}}
        for c in ("make gen", "pytest tests/client -q", "git commit -am regen")
    ]  # fmt: skip
    wf = ex.workflow(with_commands)
    assert wf is not None and "`make gen`" in wf.text and wf.text.startswith("To commit a change")


def test_reading_files_is_no_workflow_and_yields_nothing() -> None:
    s = Session()
    s.prompt("look around the codebase and tell me how it is organised")
    for name in ("a.py", "b.py", "c.py", "d.py", "e.py"):
        s.read(name, "import os\nprint('x')\n")
    s.bash("ls -la", "total 8\ndrwxr-xr-x  .\n-rw-r--r-- setup.py")
    s.bash("grep -rn TODO .", "a.py:3: # TODO: remove")
    s.bash("git status", "On branch main\nnothing to commit")
    s.tool("Glob", {"pattern": "**/*.py"}, "a.py\nb.py\nc.py")
    s.response("The codebase has five modules; a.py is the entry point and b.py holds the models.")
    assert extract(s.events) == []
    handoff = one(extract(s.events, final=True), CandidateKind.HANDOFF)
    assert handoff.confidence < FULL  # nothing was changed


# -------------------------------------------------------------- procedures


def test_procedure_the_agent_carried_out_and_explained() -> None:
    s = Session()
    s.prompt("The API client is out of date with the OpenAPI spec.")
    gen, _ = s.bash("make gen", "generated 14 files")
    check, _ = s.bash("pytest tests/client -q", "20 passed")
    said = s.response(
        "Regenerated. To regenerate the client, run `make gen` then `pytest tests/client -q` "
        "to check it."
    )
    p = one(extract(s.events), CandidateKind.PROCEDURE)
    assert p.type is MemoryType.PROCEDURAL
    assert p.title == "How to regenerate the client"
    assert (
        p.text
        == "To regenerate the client, run `make gen` then `pytest tests/client -q` to check it."
    )
    assert p.metadata["commands"] == ["make gen", "pytest tests/client -q"]
    assert p.event_ids == (gen, check, said)
    assert p.confidence >= ASSIST


def test_procedure_only_explained_is_full_only_and_a_users_is_assist() -> None:
    s = Session()
    s.prompt("how do I reset the dev database?")
    s.response(
        "To reset the dev database:\n\n```bash\ndocker compose down -v\n"
        "docker compose up -d db\nalembic upgrade head\n```\n\nThat re-applies the migrations."
    )
    p = one(extract(s.events), CandidateKind.PROCEDURE)
    assert p.text == (
        "To reset the dev database, run 1) `docker compose down -v` 2) `docker compose up -d db` "
        "3) `alembic upgrade head`."
    )
    assert FULL <= p.confidence < ASSIST

    s = Session()
    s.prompt("To deploy to staging, run `make deploy ENV=staging` from the repo root.")
    p = one(extract(s.events), CandidateKind.PROCEDURE)
    assert p.source is MemorySource.CONVERSATION and p.confidence >= ASSIST


# ------------------------------------------------------ questions and risks


def test_open_questions_todos_and_risks_are_moderate() -> None:
    s = Session()
    s.prompt("Regenerate the API client.")
    s.bash("make gen", "generated 14 files")
    s.response(
        "Regenerated the client.\n\n"
        "TODO: handle pagination in list_orders(), the generator skips it.\n\n"
        "Note this will break if the spec renames operationIds, because the wrappers import "
        "them by name."
    )
    s.prompt("We still need to decide whether to publish the client to PyPI.")
    s.prompt("Risk: the nightly export job is not idempotent.")
    cands = extract(s.events)
    kinds = [(c.kind, c.title) for c in cands]
    assert kinds == [
        (
            CandidateKind.QUESTION,
            "TODO: handle pagination in list_orders(), the generator skips it",
        ),
        (
            CandidateKind.RISK,
            "Risk: this will break if the spec renames operationIds, because the wrappers…",
        ),
        (
            CandidateKind.QUESTION,
            "Open question: we still need to decide whether to publish the client to PyPI",
        ),
        (CandidateKind.RISK, "Risk: the nightly export job is not idempotent"),
    ]
    assert cands[0].text == "TODO: Handle pagination in list_orders(), the generator skips it."
    assert all(FULL <= c.confidence < ASSIST for c in cands)
    assert cands[0].type is MemoryType.EPISODIC and cands[1].type is MemoryType.SEMANTIC


# ----------------------------------------------------- confirmations, explicit


def test_search_confirmations_are_reported_not_extracted() -> None:
    s = Session()
    s.event("search_confirmation", "", memory_id="m-123", query="invoice immutability")
    s.event("search_confirmation", "", memory_id="m-123", query="invoice immutability")
    s.event("search_confirmation", "", memory_id="m-456", query="deploy steps")
    s.event("search_confirmation", "", query="no id")
    assert extract(s.events) == []
    expected = [("m-123", "invoice immutability"), ("m-456", "deploy steps")]
    assert confirmations(s.events) == expected
    assert Extractor().confirmations(s.events) == expected


def test_explicit_events_are_kept_with_top_confidence() -> None:
    s = Session()
    eid = s.event("explicit", "Remember that invoices are immutable once sent.")
    s.event("explicit", "   ")
    c = one(extract(s.events), CandidateKind.EXPLICIT)
    assert c.text == "Invoices are immutable once sent."
    assert c.type is MemoryType.SEMANTIC  # not an event, despite "sent"
    assert c.confidence >= 0.95 and c.trigger and c.event_ids == (eid,)


# ------------------------------------------------------------ writer session


def test_writer_session_preference_and_correction() -> None:
    events = load("writer_session.jsonl")
    cands = extract(events)
    pref = one(cands, CandidateKind.PREFERENCE)
    assert pref.text == "Keep chapter titles short."
    assert pref.confidence >= ASSIST and pref.type is MemoryType.SEMANTIC
    corr = one(cands, CandidateKind.CORRECTION)
    assert corr.text == "Mara's eyes are green, not blue."
    assert corr.confidence >= ASSIST and corr.metadata["reinforce"] is True
    # The agent's draft that said "blue" is part of the provenance.
    assert corr.event_ids == ("wr-3-002", "wr-3-005")
    assert len(cands) == 2


# ------------------------------------------------------------------ handoff


def test_handoff_summarises_a_substantial_session() -> None:
    s, ids = debugging_window()
    cands = extract(s.events, final=True)
    assert [c.kind for c in cands] == [CandidateKind.FIX, CandidateKind.HANDOFF]
    h = cands[-1]
    assert h.type is MemoryType.EPISODIC and h.confidence >= ASSIST
    assert h.title == "Handoff: the order tests are failing since this morning, can you fix them?"
    assert h.text.startswith(
        "Goal: The order tests are failing since this morning, can you fix them?"
    )
    assert "Changed 1 file(s): orders/service.py." in h.text
    assert "`pytest tests/test_orders.py` (passed)" in h.text
    assert "Fixed: KeyError 'customer_id' in orders/service.py." in h.text
    assert "Outcome: Fixed. The root cause was" in h.text  # not the closing "You're welcome!"
    assert h.event_ids == (ids["prompt"], ids["pass"], ids["explain"])
    assert h.metadata["verified"] is True and h.metadata["edits"] == 1


def test_handoff_across_windows_and_after_the_last_window() -> None:
    ex = Extractor()
    s, _ = debugging_window()
    half = 6
    first = ex.extract(s.events[:half])
    second = ex.extract(s.events[half:])
    assert [c.kind for c in first + second] == [CandidateKind.FIX]
    (handoff,) = ex.finish("s1")
    assert handoff.kind is CandidateKind.HANDOFF
    assert handoff.text.startswith("Goal: The order tests are failing")
    assert "orders/service.py" in handoff.text
    assert ex.finish("s1") == []  # forgotten once finished


def test_handoff_of_an_unverified_or_empty_session() -> None:
    s = Session(project="/home/u/novel")
    s.prompt("Draft the blurb for the back cover.")
    s.tool("Write", {"file_path": "/home/u/novel/blurb.md", "content": "A harbour town..."}, "ok")
    s.response("I drafted the blurb in blurb.md.")
    h = one(extract(s.events, final=True), CandidateKind.HANDOFF)
    assert FULL <= h.confidence < ASSIST
    assert "Changed 1 file(s): blurb.md." in h.text

    s = Session()
    s.prompt("hi")
    s.response("Hello! How can I help?")
    s.prompt("thanks, bye")
    assert extract(s.events, final=True) == []


# -------------------------------------------------------- redaction, noise


def test_redacted_placeholders_pass_through_and_are_not_content() -> None:
    s = Session()
    s.prompt("here's my token: [REDACTED:github_token]")
    s.prompt("my password is [REDACTED:password]")
    s.prompt("use [REDACTED:github_token] for the API")
    s.bash("GH_TOKEN=[REDACTED:github_token] git push origin feature", "remote: ok")
    assert extract(s.events) == []

    s = Session()
    s.prompt(
        "Remember that CI reads the deploy key from the [REDACTED:aws_secret] store, "
        "never from .env files."
    )
    c = one(extract(s.events), CandidateKind.EXPLICIT)
    assert c.text == (
        "CI reads the deploy key from the [REDACTED:aws_secret] store, never from .env files."
    )


def test_chitchat_only_window_yields_nothing() -> None:
    s = Session()
    for text in ("hi", "thanks", "lgtm", "ok", "great job", "sounds good", "👍", "🎉🎉"):
        s.prompt(text)
        s.response("Glad to help!")
    s.prompt("can you explain that again?")
    s.response(
        "Sure: the function reads the CSV, validates each row and writes the valid ones to the "
        "orders table."
    )
    assert extract(s.events) == []
    assert extract(s.events, final=True) == []


@pytest.mark.parametrize(
    "text",
    [
        "thanks", "Thanks!", "thank you so much", "lgtm", "LGTM 🚀", "ok", "okay", "k", "hi",
        "hello there", "great job", "Great job!", "sounds good", "sounds good, go ahead", "👍",
        "🎉🎉🎉", "...", "can you explain that again?", "Could you explain that again please?",
        "what do you mean?", "yes please", "perfect, thanks", "nice work!", "hmm", "Good morning!",
        "never mind", "cool cool", "awesome, ship it", "makes sense", "no worries", "",
    ],
)  # fmt: skip
def test_is_chitchat(text: str) -> None:
    assert is_chitchat(text)


@pytest.mark.parametrize(
    "text",
    [
        "Remember that we use PostgreSQL",
        "ok, always use pnpm",
        "thanks, and never push to main",
        "The build is broken",
        "I want short commit messages",
        "use tabs",
    ],
)
def test_is_not_chitchat(text: str) -> None:
    assert not is_chitchat(text)


def test_precision_low_signal_events_yield_nothing_worth_keeping() -> None:
    s = Session()
    low_signal_prompts = [
        "hi", "thanks!", "lgtm", "ok", "great job", "sounds good", "👍", "can you explain that again?",
        "run the tests", "fix it", "show me the diff", "what does this function do?",
        "open orders.py", "let me check", "can you look at the logs?", "try again",
        "why is it slow?", "makes sense", "sure", "that works", "hmm, interesting",
        "what's in the config folder?", "list the migrations", "ok continue",
        "nice, what's next?", "could you summarise the file?", "show me the failing test",
        "Please refactor this function.", "I like this approach.", "We should look into that later.",
        "How does caching work here?", "here's my token: [REDACTED:github_token]",
    ]  # fmt: skip
    replies = [
        "Sure, here it is.",
        "I'll take a look at the code.",
        "Here's what the file does: it parses the CSV and writes rows to the database.",
        "The tests pass.",
        "Let me check the logs first.",
        "Done. The function now returns early when the list is empty.",
    ]
    for i, text in enumerate(low_signal_prompts):
        s.prompt(text)
        if i % 4 == 0:
            s.read(f"src/module_{i}.py", "def f():\n    return 1\n")
        if i % 5 == 0:
            s.bash("ls src", "a.py\nb.py\nc.py")
            s.bash(f"grep -rn 'def f' src/module_{i}.py", "src/module.py:1:def f():")
        s.response(replies[i % len(replies)])
    assert len(s.events) >= 30
    cands = extract(s.events)
    assert [c.title for c in cands if c.confidence >= FULL] == []


# ------------------------------------------------ dedupe, cap, determinism


def test_same_statement_twice_is_one_candidate_with_both_provenances() -> None:
    s = Session()
    a = s.prompt("Never push to main.")
    s.response("Understood.")
    b = s.prompt("Again: never push to main!")
    cands = extract(s.events)
    c = one(cands, CandidateKind.CONSTRAINT)
    assert len(cands) == 1
    assert c.event_ids == (a, b)


def test_candidates_per_turn_are_capped_keeping_the_most_confident() -> None:
    s = Session()
    s.prompt(
        "Ground rules: We must support Python 3.9. Never push to main. I prefer tabs. "
        "Always use pnpm. Remember that the staging database is reset nightly."
    )
    cands = extract(s.events)
    # The three most confident survive, in the order they were said.
    assert [c.text for c in cands] == [
        "User prefers tabs.",
        "Always use pnpm.",
        "The staging database is reset nightly.",
    ]
    assert [c.confidence >= 0.84 for c in cands] == [True, True, True]
    assert len(extract(s.events, max_per_turn=10)) == 5


def test_output_is_deterministic_and_in_session_order() -> None:
    events = load("claude_debug_session.jsonl") + load("writer_session.jsonl")
    a = Extractor().extract(events, final=True)
    b = Extractor().extract(events, final=True)
    assert a == b
    assert [c.session_id for c in a] == ["cc-7f3a", "cc-7f3a", "wr-3", "wr-3", "wr-3"]
    assert [c.kind for c in a if c.session_id == "wr-3"] == [
        CandidateKind.PREFERENCE,
        CandidateKind.CORRECTION,
        CandidateKind.HANDOFF,
    ]


def test_long_statements_are_bounded_at_sentence_or_word_boundaries() -> None:
    s = Session()
    long_rule = (
        "Remember that "
        + " and ".join(f"service {i} talks to the billing gateway over mTLS" for i in range(40))
        + "."
    )
    s.prompt(long_rule)  # one sentence longer than anyone would keep: not a statement
    s.prompt("Remember that the release train leaves every other Tuesday. " * 1)
    cands = extract(s.events)
    assert [c.text for c in cands] == ["The release train leaves every other Tuesday."]
    c = Extractor().correction("word " * 50 + "blue", "word " * 50 + "green")
    assert c is not None and len(c.text) <= 1_200
    for cand in cands:
        assert_well_formed(cand)


def test_malformed_events_are_tolerated() -> None:
    events: list[Any] = [
        {"event_type": "prompt", "content": None},
        {"event_type": "prompt", "content": {"text": "structured"}, "metadata": "oops"},
        {"event_type": "tool_result", "content": "x", "metadata": {"exit_code": "1"}},
        {"event_type": "config_change", "metadata": {"key": "theme", "new": "dark"}},
        {"event_type": "unknown", "timestamp": "not a time"},
        "not a mapping",
    ]
    cands = Extractor().extract(events)
    assert [c.text for c in cands] == ["User prefers dark mode."]
    assert cands[0].event_ids == ("#3",)  # a positional id when the event has none


def test_windows_of_several_sessions_are_split() -> None:
    a = Session("A")
    a.prompt("Never push to main.")
    b = Session("B", project="/home/u/other")
    b.prompt("I prefer tabs.")
    mixed = [a.events[0], b.events[0]]
    cands = extract(mixed)
    assert [(c.session_id, c.project) for c in cands] == [
        ("A", "/home/u/shop"),
        ("B", "/home/u/other"),
    ]


def test_candidate_is_frozen_and_serialisable() -> None:
    c = Extractor().configuration("theme", "light", "dark", session_id="s9", event_ids=["e1"])
    with pytest.raises(FrozenInstanceError):
        c.title = "x"  # type: ignore[misc]
    d = c.to_dict()
    assert d["kind"] == "configuration" and d["event_ids"] == ["e1"] and d["session_id"] == "s9"
    assert hash(c)  # usable in sets despite the metadata dict


def _big_window(turns: int) -> Iterator[dict[str, Any]]:
    s = Session()
    for i in range(turns):
        s.prompt(f"please look at file {i} and tell me what it does")
        s.bash(f"pytest -q tests/test_{i}.py", "x" * 20_000 + "\n1 passed")
        s.response("It parses the config and validates it. " * 20)
    yield from s.events


def test_time_grows_linearly_with_the_window() -> None:
    small = list(_big_window(150))
    large = list(_big_window(600))
    started = time.perf_counter()
    Extractor().extract(small, final=True)
    t_small = time.perf_counter() - started
    started = time.perf_counter()
    Extractor().extract(large, final=True)
    t_large = time.perf_counter() - started
    assert t_large < 10 * max(t_small, 0.01)  # 4x the events, well under quadratic
    assert t_large < 15.0


def test_events_shaped_like_the_claude_code_hook_writes_them() -> None:
    # No exit codes (Claude Code's Bash response has only stdout/stderr), the call's
    # content is the hook's one-line description, a failure arrives as
    # PostToolUseFailure with is_error, and a big Write input is a clipped JSON string.
    s = Session()
    s.prompt("The nightly report crashes, please fix it.")

    def call(tool: str, described: str, tool_input: Any, use: str) -> None:
        s.event("tool_call", f"{tool}: {described}", tool_name=tool, tool_input=tool_input,
                tool_use_id=use, hook_event_name="PreToolUse")  # fmt: skip

    call("Bash", "python -m reports.nightly", {"command": "python -m reports.nightly"}, "t1")
    failed = s.event(
        "tool_result",
        "Exit code 1\nTraceback (most recent call last):\n"
        '  File "/home/u/shop/reports/nightly.py", line 12, in main\n'
        "    rows = fetch(since=yesterday())\n"
        "NameError: name 'yesterday' is not defined",
        tool_name="Bash",
        tool_input={"command": "python -m reports.nightly"},
        tool_use_id="t1",
        is_error=True,
        hook_event_name="PostToolUseFailure",
    )
    clipped = json.dumps({"file_path": "/home/u/shop/reports/nightly.py", "content": "x" * 9000})
    call("Write", "/home/u/shop/reports/nightly.py", clipped[:8000] + "\n[… 1011 more characters not captured]", "t2")  # fmt: skip
    s.event("tool_result", "File written", tool_name="Write", tool_use_id="t2", hook_event_name="PostToolUse")  # fmt: skip
    call("Bash", "python -m reports.nightly", {"command": "python -m reports.nightly"}, "t3")
    passed = s.event(
        "tool_result",
        "wrote 214 rows to reports/2026-11-21.csv",
        tool_name="Bash",
        tool_use_id="t3",
        hook_event_name="PostToolUse",
    )
    s.response(
        "The cause was a missing import: nightly.py used yesterday() without importing it from "
        "reports.dates. I added the import and the report runs again."
    )
    fix = one(extract(s.events), CandidateKind.FIX)
    assert (
        "NameError: name 'yesterday' is not defined at reports/nightly.py:12 (in main)" in fix.text
    )
    assert fix.metadata["files"] == ["reports/nightly.py"]  # read from the clipped input
    assert "Verified: `python -m reports.nightly` passes." in fix.text
    assert failed in fix.event_ids and passed in fix.event_ids
    assert fix.confidence >= ASSIST


def test_codex_edits_through_the_shell_count_as_edits() -> None:
    s = Session(agent="codex", project="/home/u/cli")
    s.prompt("the --since flag is ignored, fix it")
    s.tool("exec_command", {"cmd": ["bash", "-lc", "go test ./..."]},
           "--- FAIL: TestSince (0.00s)\n    since_test.go:14: got 10 rows, want 3\nFAIL", exit_code=1)  # fmt: skip
    patch, _ = s.tool(
        "exec_command",
        {"cmd": ["bash", "-lc", "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: cmd/list.go\n@@\n-\tq := all()\n+\tq := since(opts.Since)\n*** End Patch\nEOF"]},
        "Success. Updated the following files:\nM cmd/list.go",
        exit_code=0,
    )  # fmt: skip
    s.tool("exec_command", {"cmd": ["bash", "-lc", "go test ./..."]}, "ok  \texample.com/cli/cmd\t0.01s", exit_code=0)  # fmt: skip
    s.response(
        "The list command never passed opts.Since to the query, because the flag was parsed after the query was built. I now build the query from since(opts.Since)."
    )
    fix = one(extract(s.events), CandidateKind.FIX)
    assert fix.metadata["files"] == ["cmd/list.go"]
    assert patch in fix.event_ids
    assert "`go test ./...` failed with --- FAIL: TestSince" in fix.text
    assert fix.confidence >= ASSIST


def test_long_fix_explanations_are_cut_at_sentences_and_say_so() -> None:
    s = Session()
    s.prompt("fix the failing test")
    s.bash("pytest -q", PYTEST_KEYERROR, code=1)
    s.edit("orders/service.py", "payload['customer_id']", "payload.get('customer_id')")
    s.bash("pytest -q", "12 passed")
    s.response(
        "The root cause was that "
        + "the guest checkout path skipped the customer lookup " * 10
        + ". I changed "
        + "the service and its callers to agree on the payload shape " * 9
        + "."
    )
    fix = one(extract(s.events), CandidateKind.FIX)
    assert len(fix.text) <= 1_200
    assert fix.text.endswith(" […]")
    assert fix.text.startswith("`pytest -q` failed")


def test_a_proposal_confirmed_at_the_start_of_the_next_window() -> None:
    ex = Extractor()
    s = Session()
    s.prompt("Where should uploaded invoices live?")
    proposal = s.response(
        "I'd suggest storing them in S3 with a 7-year lifecycle rule, because the accountants "
        "need them for seven years. Shall I go ahead?"
    )
    assert ex.extract(s.events) == []
    first = len(s.events)
    yes = s.prompt("yes please")
    decision = one(ex.extract(s.events[first:]), CandidateKind.DECISION)
    assert decision.title == "Decision: storing them in S3 with a 7-year lifecycle rule"
    assert "because the accountants need them for seven years" in decision.text
    assert decision.event_ids == (proposal, yes)


def test_project_facts_the_user_mentions_are_full_only() -> None:
    s = Session()
    s.prompt("Add an alert for the 429 rate.")
    s.response("Which alerting tool do you use?")
    said = s.prompt("We use Datadog for alerts, I'll add the monitor there myself.")
    c = one(extract(s.events), CandidateKind.CONSTRAINT)
    assert c.text == "We use Datadog for alerts."
    assert c.rule == "project-fact" and FULL <= c.confidence < ASSIST
    assert c.event_ids == (said,)


def test_a_candidate_names_its_speaker_only_when_one_speaker_said_its_turns() -> None:
    """``metadata["speaker"]``: who said the turns a candidate was drawn from (the hook
    records it per event); none when the turns have different speakers, or none."""
    ex = Extractor()
    s = Session()
    s.prompt("Never push directly to main.")
    s.events[-1]["speaker"] = "Ada"
    s.response("I'd suggest using Redis Streams for the job queue, because it is already deployed.")
    s.events[-1]["speaker"] = "Claude"
    s.prompt("yes please")
    s.events[-1]["speaker"] = "Ada"
    s.prompt("From now on always run the linter before committing.")  # an old event: no speaker
    found = {c.kind: c for c in ex.extract(s.events)}
    assert found[CandidateKind.CONSTRAINT].metadata["speaker"] == "Ada"
    assert "speaker" not in found[CandidateKind.DECISION].metadata  # Claude's, confirmed by Ada
    assert "speaker" not in found[CandidateKind.PREFERENCE].metadata
