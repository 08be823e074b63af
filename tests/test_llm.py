"""The optional LLM against a real HTTP server that speaks the chat-completions protocol.

The server is real (stdlib ``http.server`` on 127.0.0.1, an ephemeral port) so that the
client's HTTP, timeouts, headers and JSON handling are exercised as they are in use; its
answers are scripted because a real model is slow and non-deterministic.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox, make_event
from lexmem.cli import cli
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.keystore import LLM_API_KEY, SERVICE
from lexmem.licence import LicenceService
from lexmem.llm import LlmClient, LlmError
from lexmem.models import ClassificationMethod, MemoryType
from lexmem.service.client import remember_through_inbox
from lexmem.service.writer import CaptureService
from lexmem.settings import LlmSettings, Settings, load_settings, save_settings

AMBIGUOUS = "Important information about the system"  # the rules are unsure (seed 001)


# -- the scripted endpoint -------------------------------------------------------------------

USES = {
    "Classify the following": "classify",
    "Analyze this conversation": "extract",
    "The user corrected": "correction",
    "The user performed these actions": "workflow",
    "Summarize this": "summary",
    'Reply with the JSON {"ok": true}': "test",
}


def ok(content: str, tokens: int = 50) -> dict[str, Any]:
    return {"content": content, "tokens": tokens}


class Endpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict[str, Any]] = []
        self.script: dict[str, list[dict[str, Any]]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def answer(self, use: str, *actions: dict[str, Any]) -> None:
        """What to answer for ``use``, in order; the last one repeats."""
        self.script[use] = list(actions)

    def uses(self) -> list[str]:
        return [r["use"] for r in self.requests]

    def next_action(self, use: str) -> dict[str, Any]:
        queue = self.script.get(use) or [{"status": 404}]
        return queue.pop(0) if len(queue) > 1 else queue[0]


class Handler(BaseHTTPRequestHandler):
    server: Endpoint

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        use = next((u for k, u in USES.items() if prompt.startswith(k)), "other")
        self.server.requests.append(
            {"path": self.path, "headers": dict(self.headers), "body": body, "use": use}
        )
        action = self.server.next_action(use)
        time.sleep(action.get("sleep", 0.0))
        if "status" in action:
            self._send(action["status"], b'{"error": {"message": "scripted failure"}}')
            return
        if "raw" in action:
            self._send(200, action["raw"])
            return
        message: dict[str, Any] = {"role": "assistant", "content": action.get("content")}
        if "refusal" in action:
            message = {"role": "assistant", "content": None, "refusal": action["refusal"]}
        reply = {
            "id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": action.get("tokens", 50)},
        }  # fmt: skip
        self._send(200, json.dumps(reply).encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (a timeout test)
            self.wfile.write(data)


@pytest.fixture(autouse=True)
def _shared_model(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI invocations share the loaded model (each would load its own: ~0.5 s)."""
    real_open = Lexmem.open.__func__  # type: ignore[attr-defined]

    def open_shared(cls: type[Lexmem], /, home: Any = None, **kw: Any) -> Lexmem:
        kw["embedder"] = kw.get("embedder") or embedder
        return real_open(cls, home, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(Lexmem, "open", classmethod(open_shared))


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def llm_settings(endpoint: Endpoint, **kw: Any) -> Settings:
    s = Settings()
    s.llm = LlmSettings(
        url=endpoint.url, model="test-model", timeout_s=kw.pop("timeout_s", 5.0), **kw
    )
    return s


@pytest.fixture
def open_lm(
    data_home: Path, embedder: Embedder, endpoint: Endpoint
) -> Iterator[Callable[..., Lexmem]]:
    opened: list[Lexmem] = []

    def make(**kw: Any) -> Lexmem:
        licence = kw.pop("licence", None)
        lm = Lexmem.open(
            data_home, settings=llm_settings(endpoint, **kw), embedder=embedder, licence=licence
        )
        opened.append(lm)
        return lm

    yield make
    for lm in opened:
        lm.close()


@pytest.fixture
def lm(open_lm: Callable[..., Lexmem]) -> Lexmem:
    return open_lm()


@pytest.fixture
def service(lm: Lexmem) -> Iterator[CaptureService]:
    svc = CaptureService(lm)
    svc.acquire()
    yield svc
    svc.release()


def core_licence(paths: Paths) -> LicenceService:
    """A data folder whose 14-day trial ended: Core, without LLM-assisted encoding."""
    clock = {"now": datetime(2026, 3, 1, tzinfo=UTC)}
    svc = LicenceService(paths, public_keys={}, clock=lambda: clock["now"], environ={}, cache_s=0)
    svc.status()  # the trial starts
    clock["now"] += timedelta(days=20)
    return svc


def fallbacks(lm: Lexmem) -> list[Any]:
    lm.refresh()
    return [e for e in lm.audit_entries(limit=1000) if e.decision == "fallback"]


def session(inbox: Inbox, sid: str, prompt: str, response: str = "Noted.") -> None:
    for kind, body in (("session_start", ""), ("prompt", prompt), ("response", response)):
        inbox.write(make_event(kind, body, session_id=sid, agent="claude", project="/w/shop"))


# -- nothing leaves the machine unless configured ---------------------------------------------


def test_nothing_is_sent_without_an_endpoint(
    data_home: Path, embedder: Embedder, endpoint: Endpoint
) -> None:
    with Lexmem.open(data_home, embedder=embedder) as lm:  # [llm] url is empty by default
        assert lm.llm is None and lm.encoder.llm is None
        r = lm.remember(AMBIGUOUS)
        assert r.classification.method == ClassificationMethod.RULE_BASED
        with CaptureService(lm) as svc:
            session(svc.inbox, "s1", "We decided to use PostgreSQL 16 for the billing service.")
            svc.drain()
            svc.capture_user_correction("the API uses OAuth", "the API uses API keys")
    client = LlmClient(LlmSettings(), Paths(data_home))
    with pytest.raises(LlmError, match="no LLM endpoint is configured") as exc:
        client.complete("hello")
    assert exc.value.reason == "not-configured"
    assert endpoint.requests == []


def test_core_sends_nothing_even_when_configured(open_lm: Callable[..., Lexmem], paths: Paths,
                                                  endpoint: Endpoint) -> None:  # fmt: skip
    endpoint.answer("classify", ok('{"type": "episodic", "confidence": 0.9, "rationale": "x"}'))
    lm = open_lm(licence=core_licence(paths))
    assert lm.llm is None and lm.encoder.llm is None
    lm.remember(AMBIGUOUS)
    long_text = " ".join(f"Sentence {i} about the billing system." for i in range(400))
    lm.remember(long_text)
    with CaptureService(lm) as svc:
        svc.capture_user_correction("the API uses OAuth", "the API uses API keys")
    assert endpoint.requests == []


# -- 1. classification fallback (seed 001) -----------------------------------------------------


def test_classification_below_the_rule_threshold_asks_the_llm_with_the_keyring_key(
    lm: Lexmem, endpoint: Endpoint, memory_keyring: Any
) -> None:
    memory_keyring.set_password(SERVICE, LLM_API_KEY, "sk-test-123")
    endpoint.answer(
        "classify",
        ok('```json\n{"type": "Episodic", "confidence": 0.8, "rationale": "an incident"}\n```'),
    )
    result = lm.remember(AMBIGUOUS)
    assert result.classification.method == ClassificationMethod.LLM_BASED
    assert result.classification.type == MemoryType.EPISODIC
    assert result.memories[0].metadata["classification"] == "an incident"
    [req] = endpoint.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test-123"
    assert req["body"]["model"] == "test-model" and req["body"]["stream"] is False
    assert AMBIGUOUS in req["body"]["messages"][-1]["content"]
    # Confident rules need no LLM.
    lm.remember("The project uses PostgreSQL for data storage")
    assert len(endpoint.requests) == 1


def test_no_key_in_the_keyring_sends_no_authorization(lm: Lexmem, endpoint: Endpoint) -> None:
    endpoint.answer("classify", ok('{"type": "semantic", "confidence": 0.9}'))
    assert lm.classify(AMBIGUOUS).method == ClassificationMethod.LLM_BASED
    assert "Authorization" not in endpoint.requests[0]["headers"]


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (ok("The type is semantic."), "not the JSON asked for"),
        (ok('{"type": "factual", "confidence": 0.9}'), "not semantic, episodic or procedural"),
        (ok('{"type": "semantic", "confidence": 1.7}'), "not a number from 0 to 1"),
        (ok('["semantic"]'), "not a JSON object"),
        ({"raw": b"<html>gateway</html>"}, "not a chat completion"),
        ({"status": 500}, "HTTP 500"),
        ({"status": 401}, "HTTP 401"),
        (
            {"sleep": 1.5, "content": '{"type": "semantic", "confidence": 0.9}'},
            "did not answer within",
        ),
        ({"refusal": "I can't help with that."}, "declined"),
        (ok("I'm sorry, but I can't classify this content."), "declined"),
    ],
)
def test_a_failed_classification_keeps_the_rule_result_and_says_why(
    open_lm: Callable[..., Lexmem], endpoint: Endpoint, action: dict[str, Any], reason: str
) -> None:
    lm = open_lm(timeout_s=0.5)
    endpoint.answer("classify", action)
    [m] = lm.remember(AMBIGUOUS).memories  # never lost
    assert m.classification_method == ClassificationMethod.RULE_BASED
    assert (
        reason in m.metadata["llm_notes"][0] and "the rules decided" in m.metadata["llm_notes"][0]
    )
    assert len(endpoint.requests) == 1


def test_the_service_audits_a_classification_fallback(lm: Lexmem, endpoint: Endpoint) -> None:
    endpoint.answer("classify", {"status": 503})
    done = remember_through_inbox(lm, AMBIGUOUS)
    assert done.memories[0].classification_method == ClassificationMethod.RULE_BASED
    [entry] = [e for e in lm.audit_entries() if e.rule == "explicit"]
    assert "HTTP 503" in entry.metadata["llm_notes"][0]


# -- 2. extraction from a conversation window (seed 000) ----------------------------------------


def test_window_extraction_adds_what_the_rules_missed(
    service: CaptureService, endpoint: Endpoint
) -> None:
    extraction = [
        {"content": "The team decided to use PostgreSQL 16 for the billing service.", "type": "semantic", "confidence": 0.95},
        {"content": "Invoices are generated nightly by the ledger job at 02:00 UTC.", "type": "semantic", "confidence": 0.9},
        {"content": "The user seemed to like the answer.", "type": "episodic", "confidence": 0.3},
    ]  # fmt: skip
    endpoint.answer("extract", ok(json.dumps(extraction)))
    session(service.inbox, "s1", "We decided to use PostgreSQL 16 for the billing service. "
            "Also, invoices go out nightly from the ledger job at 02:00 UTC.")  # fmt: skip
    report = service.drain()
    assert endpoint.uses() == ["extract"]
    prompt = endpoint.requests[0]["body"]["messages"][-1]["content"]
    assert "User: We decided to use PostgreSQL 16" in prompt and "Assistant: Noted." in prompt
    contents = [m.content for m in service.lm.list_memories(limit=None)]
    assert any("PostgreSQL 16" in c for c in contents)
    assert sum("PostgreSQL" in c for c in contents) == 1  # the rules had it: not twice
    assert "Invoices are generated nightly by the ledger job at 02:00 UTC." in contents
    assert not any("seemed to like" in c for c in contents)  # below 0.7
    by_llm = [e for e in service.lm.audit_entries() if e.rule == "llm-extraction"]
    assert [e.decision for e in by_llm] == ["saved"] and report.saved == len(contents)


def test_window_extraction_is_capped_per_turn(service: CaptureService, endpoint: Endpoint) -> None:
    facts = [f"The staging cluster number {i} runs service{i} on port 80{i}{i}." for i in range(6)]
    endpoint.answer("extract", ok(json.dumps(
        [{"content": f, "type": "semantic", "confidence": 0.8 + i / 100} for i, f in enumerate(facts)]
    )))  # fmt: skip
    session(service.inbox, "s1", "Here is how staging is laid out, in case it matters.")
    service.drain()
    saved = [e for e in service.lm.audit_entries() if e.rule == "llm-extraction"]
    assert sorted(e.title for e in saved) == sorted(facts[3:])


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (ok('[{"content": "x", "type": "semantic"}]'), "not a number"),
        (ok('{"memories": []}'), "not a JSON array"),
        ({"status": 500}, "HTTP 500"),
        ({"sleep": 1.5, "content": "[]"}, "did not answer within"),
        ({"refusal": "No."}, "declined"),
    ],
)
def test_a_failed_extraction_keeps_the_rule_candidates_and_audits_why(
    open_lm: Callable[..., Lexmem], endpoint: Endpoint, action: dict[str, Any], reason: str
) -> None:
    lm = open_lm(timeout_s=0.5)
    endpoint.answer("extract", action)
    with CaptureService(lm) as svc:
        session(svc.inbox, "s1", "We decided to use PostgreSQL 16 for the billing service.")
        svc.drain()
    [m] = lm.list_memories(limit=None)
    assert "PostgreSQL 16" in m.content  # the event was not lost: the rules' memory stands
    [entry] = fallbacks(lm)
    assert entry.rule == "llm.extract" and reason in entry.reason
    assert entry.reason.endswith("the rules' result stands") and entry.session_id == "s1"


# -- 3 and 4. correction and workflow synthesis (seed 000) -----------------------------------------


def test_correction_synthesis_rewords_the_rule_candidate(
    service: CaptureService, endpoint: Endpoint
) -> None:
    endpoint.answer("correction", ok('"The API uses API keys for authentication, not OAuth."'))
    [m] = service.capture_user_correction(
        "the API uses OAuth", "the API uses API keys", "auth docs"
    )
    assert m.content == "The API uses API keys for authentication, not OAuth."
    assert m.title.startswith("Correction: The API uses API keys")
    assert m.salience > 0.5  # still reinforced as a correction
    prompt = endpoint.requests[0]["body"]["messages"][-1]["content"]
    assert "Original: the API uses OAuth" in prompt and "Context: auth docs" in prompt


def test_a_correction_event_uses_the_llm_and_falls_back_on_malformed_output(
    service: CaptureService, endpoint: Endpoint
) -> None:
    endpoint.answer("correction", ok(""), ok("The build uses pnpm, not npm."))
    service.inbox.write(make_event("correction", "", session_id="s9", metadata={
        "original": "run npm install", "corrected": "run pnpm install"}))  # fmt: skip
    service.drain()
    [first] = service.lm.list_memories(limit=None)
    assert "pnpm" in first.content and first.content != "The build uses pnpm, not npm."
    [entry] = fallbacks(service.lm)
    assert entry.rule == "llm.correction" and "empty" in entry.reason
    [second] = service.capture_user_correction("npm test", "pnpm test")
    assert second.content == "The build uses pnpm, not npm."


def workflow_actions() -> list[dict[str, Any]]:
    return [
        {"action_type": "command", "description": d, "timestamp": f"2026-11-22T10:{i * 5:02d}:00+00:00"}
        for i, d in enumerate(["run tests", "build", "commit", "push"])
    ]  # fmt: skip


def test_workflow_synthesis_describes_the_procedure(
    service: CaptureService, endpoint: Endpoint
) -> None:
    text = "To release: 1) run the tests, 2) build, 3) commit, 4) push to main."
    endpoint.answer("workflow", ok(text))
    [m] = service.capture_workflow_pattern(workflow_actions())
    assert m.content == text and m.type == MemoryType.PROCEDURAL
    assert "1. command: run tests" in endpoint.requests[0]["body"]["messages"][-1]["content"]


@pytest.mark.parametrize("action", [ok("none"), {"status": 502}])
def test_workflow_keeps_the_rule_text_when_the_llm_has_nothing(
    service: CaptureService, endpoint: Endpoint, action: dict[str, Any]
) -> None:
    endpoint.answer("workflow", action)
    [m] = service.capture_workflow_pattern(workflow_actions())
    assert all(step in m.content for step in ("run tests", "build", "commit", "push"))
    notes = fallbacks(service.lm)
    assert len(notes) == (1 if "status" in action else 0)


# -- 5. summaries of over-long content (seed 001) ------------------------------------------------


LONG = " ".join(
    f"Paragraph {i}: the billing service retries failed charges after {i} minutes."
    for i in range(80)
)


def test_over_long_content_keeps_its_chunks_under_a_summary_title(
    lm: Lexmem, endpoint: Endpoint
) -> None:
    endpoint.answer(
        "summary", ok("Billing retries failed charges on a growing schedule. It never gives up.")
    )
    memories = lm.remember(LONG, type=MemoryType.SEMANTIC).memories
    assert len(memories) > 1 and "".join(m.content for m in memories).count("Paragraph 79") >= 1
    assert (
        memories[0].title
        == f"Billing retries failed charges on a growing schedule. (1/{len(memories)})"
    )
    assert all(m.metadata["summary"].startswith("Billing retries") for m in memories)
    assert endpoint.uses() == ["summary"]


def test_a_failed_summary_keeps_the_plain_title(lm: Lexmem, endpoint: Endpoint) -> None:
    endpoint.answer("summary", {"status": 500})
    memories = lm.remember(LONG, type=MemoryType.SEMANTIC).memories
    assert memories[0].title.startswith("Paragraph 0")
    assert "summary" not in memories[0].metadata
    assert "HTTP 500" in memories[0].metadata["llm_notes"][0]


# -- the budget and the breaker -----------------------------------------------------------------


def test_the_daily_budget_stops_calls_survives_restarts_and_says_so(
    open_lm: Callable[..., Lexmem], endpoint: Endpoint
) -> None:
    endpoint.answer("classify", ok('{"type": "semantic", "confidence": 0.9}', tokens=40))
    endpoint.answer("extract", ok("[]"))
    lm = open_lm(calls_per_day=2)
    assert lm.remember(AMBIGUOUS).classification.method == ClassificationMethod.LLM_BASED
    assert lm.remember(AMBIGUOUS + " again").classification.method == ClassificationMethod.LLM_BASED
    third = lm.remember(AMBIGUOUS + " once more").memories[0]
    assert third.classification_method == ClassificationMethod.RULE_BASED
    assert "daily LLM budget is spent (2 of 2 calls)" in third.metadata["llm_notes"][0]
    assert len(endpoint.requests) == 2
    status = lm.llm.status() if lm.llm else {}
    assert (status["calls"], status["tokens"], status["calls_per_day"]) == (2, 80, 2)
    again = open_lm(calls_per_day=2)  # a restart: the counters are in the data folder
    with CaptureService(again) as svc:
        session(svc.inbox, "s1", "We decided to use PostgreSQL 16 for the billing service.")
        session(svc.inbox, "s2", "We decided to use Redis 7 for the session cache.")
        svc.drain()
    assert len(endpoint.requests) == 2 and again.count() == 5  # nothing lost
    budget = fallbacks(again)
    assert {e.session_id for e in budget} == {"s1", "s2"}
    assert all("budget is spent" in e.reason for e in budget)
    save_settings(again.paths, llm_settings(endpoint, calls_per_day=2))
    out = CliRunner().invoke(cli, ["llm", "status"])
    assert out.exit_code == 0, out.output
    assert "2 of 2 calls" in out.output


def test_a_token_budget_stops_calls_too(open_lm: Callable[..., Lexmem], endpoint: Endpoint) -> None:
    endpoint.answer("classify", ok('{"type": "semantic", "confidence": 0.9}', tokens=5000))
    lm = open_lm(tokens_per_day=1000)
    lm.classify(AMBIGUOUS)
    with pytest.raises(LlmError, match="5,000 of 1,000 tokens") as exc:
        assert lm.llm is not None
        lm.llm.classify(AMBIGUOUS + "!")
    assert exc.value.reason == "budget" and len(endpoint.requests) == 1


def test_the_circuit_opens_after_repeated_failures_then_lets_one_probe_through(
    data_home: Path, endpoint: Endpoint
) -> None:
    now = [1_000_000.0]
    client = LlmClient(llm_settings(endpoint).llm, Paths(data_home), clock=lambda: now[0],
                       breaker_threshold=3, breaker_cooldown_s=60)  # fmt: skip
    Paths(data_home).ensure()
    endpoint.answer("classify", {"status": 500}, {"status": 500}, {"status": 500},
                    ok('{"type": "procedural", "confidence": 0.9}'))  # fmt: skip
    for _ in range(3):
        with pytest.raises(LlmError, match="HTTP 500"):
            client.classify(AMBIGUOUS)
    with pytest.raises(LlmError, match="paused after 3 failures in a row") as exc:
        client.classify(AMBIGUOUS)
    assert exc.value.reason == "circuit-open" and len(endpoint.requests) == 3
    assert client.status()["circuit"] == "open"
    now[0] += 61  # half-open: one probe goes through, and its success closes the circuit
    assert client.status()["circuit"] == "half-open"
    assert client.classify(AMBIGUOUS).type == MemoryType.PROCEDURAL
    assert client.status()["circuit"] == "closed" and len(endpoint.requests) == 4


def test_a_failed_probe_opens_the_circuit_again(data_home: Path, endpoint: Endpoint) -> None:
    now = [1_000_000.0]
    Paths(data_home).ensure()
    client = LlmClient(llm_settings(endpoint, timeout_s=0.3).llm, Paths(data_home),
                       clock=lambda: now[0], breaker_threshold=2, breaker_cooldown_s=60)  # fmt: skip
    endpoint.answer("classify", {"sleep": 1.0, "content": "{}"})
    for _ in range(2):
        with pytest.raises(LlmError, match=r"did not answer within 0\.3 s"):
            client.classify(AMBIGUOUS)
    now[0] += 61
    with pytest.raises(LlmError) as probe:
        client.classify(AMBIGUOUS)
    assert probe.value.reason == "timeout" and len(endpoint.requests) == 3
    with pytest.raises(LlmError) as shut:
        client.classify(AMBIGUOUS)
    assert shut.value.reason == "circuit-open" and len(endpoint.requests) == 3
    assert client.status()["failures"] == {"timeout": 3}
    assert "did not answer" in client.status()["last_error"]


def test_unusable_answers_do_not_trip_the_breaker(data_home: Path, endpoint: Endpoint) -> None:
    Paths(data_home).ensure()
    client = LlmClient(llm_settings(endpoint).llm, Paths(data_home), breaker_threshold=2)
    endpoint.answer("classify", ok("semantic, I think"))
    for _ in range(4):  # the endpoint works; only these answers are unusable
        with pytest.raises(LlmError, match="not the JSON asked for"):
            client.classify(AMBIGUOUS)
    assert client.status()["circuit"] == "closed" and len(endpoint.requests) == 4


# -- settings, the command line -----------------------------------------------------------------


def test_the_budget_settings_load_from_settings_toml(paths: Paths) -> None:
    paths.settings.write_text(
        "schema_version = 1\n[llm]\nurl = 'http://localhost:11434/v1'\nmodel = 'llama3.2'\n"
        "calls_per_day = 50\ntokens_per_day = 0\n"
    )
    s = load_settings(paths).llm
    assert (s.url, s.model, s.calls_per_day, s.tokens_per_day) == (
        "http://localhost:11434/v1",
        "llama3.2",
        50,
        0,
    )
    assert (LlmSettings().calls_per_day, LlmSettings().tokens_per_day) == (500, 200_000)


def test_llm_test_and_status_commands(data_home: Path, endpoint: Endpoint) -> None:
    save_settings(Paths(data_home), llm_settings(endpoint))
    endpoint.answer("test", ok('{"ok": true}'))
    runner = CliRunner()
    done = runner.invoke(cli, ["llm", "test"])
    assert done.exit_code == 0, done.output
    assert f"The LLM at {endpoint.url} answered in" in done.output
    shown = json.loads(runner.invoke(cli, ["llm", "status", "--json"]).output)
    assert (shown["calls"], shown["enabled"], shown["circuit"]) == (1, True, "closed")
    status = runner.invoke(cli, ["status"]).output
    assert "llm           test-model at" in status and "1 of 500 calls" in status
    endpoint.answer("test", {"status": 500})
    failed = runner.invoke(cli, ["llm", "test"])
    assert failed.exit_code == 1 and "HTTP 500" in failed.output


def test_status_says_the_llm_is_off_by_default() -> None:
    out = CliRunner().invoke(cli, ["status"]).output
    assert "llm           off (no endpoint configured: nothing leaves this machine)" in out
    failed = CliRunner().invoke(cli, ["llm", "test"])
    assert failed.exit_code == 2 and "no LLM endpoint is configured" in failed.output


def test_the_settings_dialog_shows_the_budget_and_todays_usage(
    qtbot: Any, lm: Lexmem, endpoint: Endpoint, tmp_path: Path
) -> None:
    from ui.context import AppContext
    from ui.settings_dialog import SettingsDialog

    endpoint.answer("classify", ok('{"type": "semantic", "confidence": 0.9}', tokens=120))
    lm.classify(AMBIGUOUS)
    ctx = AppContext(lm)
    try:
        dlg = SettingsDialog(ctx)
        qtbot.addWidget(dlg)
        qtbot.waitUntil(lambda: "1 of 500 calls, 120 of 200,000 tokens" in dlg.llm_usage.text(),
                        timeout=10_000)  # fmt: skip
        assert (dlg.llm_calls.value(), dlg.llm_tokens.value()) == (500, 200_000)
        dlg.llm_calls.setValue(20)
        qtbot.waitUntil(lambda: load_settings(lm.paths).llm.calls_per_day == 20, timeout=10_000)
        assert lm.settings.llm.calls_per_day == 20  # the running client sees it at once
        qtbot.waitUntil(lambda: "1 of 20 calls" in dlg.llm_usage.text(), timeout=10_000)
        dlg.tabs.setCurrentIndex(
            next(i for i in range(dlg.tabs.count()) if dlg.tabs.tabText(i) == "LLM")
        )
        dlg.show()
        assert dlg.grab().save(str(tmp_path / "llm-tab.png"))
    finally:
        ctx.close()
