"""The optional LLM: one small client for OpenAI-compatible chat-completions endpoints.

A local Ollama (``http://localhost:11434/v1``), LM Studio, llama.cpp's server or a
hosted provider: anything that answers ``POST {url}/chat/completions``. It is off by
default (``[llm] url`` empty): then nothing leaves the machine, and every path works
on the rules alone. Its API key is read from the OS keyring (:data:`LLM_API_KEY`),
never from a file, and sent as a Bearer header.

What lexmem asks of it (seeds 000 and 001): a type when the rules are unsure
(:meth:`LlmClient.classify`), memorable statements from a conversation window
(:meth:`LlmClient.extract`), the rule behind a correction and the procedure behind a
workflow (:meth:`LlmClient.correction`, :meth:`LlmClient.workflow`), and a summary of
over-long content (:meth:`LlmClient.summarise`).

Every answer is parsed strictly: anything but the asked-for shape is an
:class:`LlmError` (so are timeouts, HTTP errors and refusals), and the caller keeps
the rule result. Two guards keep a bad endpoint from slowing capture down or running
up a bill: a daily budget of calls and tokens (``calls_per_day``, ``tokens_per_day``;
the counters live in ``llm.json`` in the data folder, so they survive restarts and
are shared by every lexmem process), and a circuit breaker that stops calling after
a few transport failures in a row, then lets one probe through after a cool-down.

Standard library only: ``urllib`` speaks the protocol, imported when a call is made.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lexmem.errors import LexmemError
from lexmem.models import ClassificationMethod, MemoryType, TypeClassification

if TYPE_CHECKING:
    from lexmem.config import Paths
    from lexmem.settings import LlmSettings

__all__ = ["Extraction", "LlmClient", "LlmError", "status_line"]

log = logging.getLogger("lexmem.llm")

STATE_FILE = "llm.json"
BREAKER_THRESHOLD = 3  # transport failures in a row before the circuit opens
BREAKER_COOLDOWN_S = 300.0  # how long it stays open before one probe is let through
MAX_REPLY_BYTES = 1_000_000
MAX_PROMPT_CHARS = 12_000  # a window or a note is cut to this (the tail is kept)
MIN_EXTRACTION_CONFIDENCE = 0.7  # seed 000 MinExtractionConfidence
MAX_PER_TURN = 3  # seed 000 MaxMemoriesPerTurn
# Failures of the endpoint itself trip the breaker; an answer in the wrong shape or a
# refusal does not (the endpoint works; it is this one answer that is unusable).
TRANSPORT = frozenset({"timeout", "unreachable", "http", "envelope"})

_TYPES = {t.value: t for t in MemoryType}
_FENCE = re.compile(r"\A```[a-zA-Z]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
_REFUSAL = re.compile(
    r"\A\W*(?:i'?m sorry|i am sorry|sorry,|i can(?:no|')t\b|i cannot\b|i won'?t\b|"
    r"i'?m (?:not able|unable)|i am (?:not able|unable)|as an ai\b)",
    re.IGNORECASE,
)
_KINDS = ("decision", "fix", "constraint", "preference", "procedure", "question", "risk")

_CLASSIFY = """Classify the following content into one of these memory types:

1. SEMANTIC: Facts, preferences, concepts, definitions
   Examples: "The project uses PostgreSQL", "User prefers dark mode"

2. EPISODIC: Specific events, conversations, incidents with temporal context
   Examples: "On January 15th, we fixed the auth bug", "Last week's deployment failed"

3. PROCEDURAL: How-to knowledge, workflows, step-by-step processes
   Examples: "To deploy, run 'make prod'", "First compile, then test, then deploy"

Content to classify:
{content}

Respond with JSON only: {{"type": "semantic|episodic|procedural", "confidence": 0.0-1.0, "rationale": "brief explanation"}}"""

_EXTRACT = """Analyze this conversation and extract any learnable information.

{conversation}

Extract information that would be useful to remember for future conversations:
- User preferences and requirements
- Project facts and constraints
- Decisions made
- Procedures or workflows mentioned

Respond with a JSON array only:
[
  {{
    "content": "statement to remember",
    "type": "semantic|episodic|procedural",
    "confidence": 0.0-1.0
  }}
]

Return an empty array [] if nothing notable to remember."""

_CORRECTION = """The user corrected this output:
Original: {original}
Corrected to: {corrected}
Context: {context}

Synthesize a concise statement to remember that will prevent this mistake in the future.
Focus on the underlying preference or rule, not the specific instance.

Example: If original was "the API uses OAuth" and corrected to "the API uses API keys",
the statement should be "The API uses API keys for authentication, not OAuth."

Respond with just the statement to remember:"""

_WORKFLOW = """The user performed these actions in sequence:
{actions}

If this represents a meaningful workflow pattern, describe it as a procedure in one or two sentences.
If the actions are unrelated or random, respond with "none".

Example good pattern: "To deploy the application: 1) Run tests, 2) Build the project, 3) Push to main"

Respond with just the procedure, or "none":"""

_SUMMARY = "Summarize this in under 500 words, preserving key facts:\n\n{content}"

_SYSTEM = (
    "You help a memory system for software work. Answer exactly in the format asked, "
    "with no preamble."
)


class LlmError(LexmemError):
    """The LLM gave no usable answer: ``reason`` says why, the message in one line.

    Reasons: ``not-configured``, ``budget``, ``circuit-open``, ``timeout``,
    ``unreachable``, ``http``, ``envelope`` (not a chat completion), ``malformed`` (not
    the asked-for JSON or text), ``refusal``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Extraction:
    """One statement the LLM found worth keeping (seed 000's ``MemoryExtraction``)."""

    content: str
    type: MemoryType
    confidence: float
    kind: str = ""


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds") if t else None


def _fresh_state(day: str) -> dict[str, Any]:
    return {"day": day, "calls": 0, "tokens": 0, "failures": {}, "last_error": ""}


def _clean(text: str) -> str:
    """LLM output as lexmem keeps it: secrets redacted like any other text."""
    from lexmem.capture.redact import redact

    return redact(text).text.strip()


def _tail(text: str, limit: int = MAX_PROMPT_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _unfence(text: str) -> str:
    """The answer without one surrounding Markdown code fence (models add them unasked)."""
    m = _FENCE.match(text.strip())
    return m.group(1).strip() if m else text.strip()


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise LlmError("malformed", f"the LLM's {what} confidence is not a number from 0 to 1")
    return float(value)


def _mtype(value: Any, what: str) -> MemoryType:
    mtype = _TYPES.get(value.strip().lower()) if isinstance(value, str) else None
    if mtype is None:
        raise LlmError(
            "malformed", f"the LLM's {what} type is not semantic, episodic or procedural"
        )
    return mtype


class LlmClient:
    """Talks to one OpenAI-compatible endpoint, within a daily budget and a circuit breaker.

    ``settings`` is read at each call, so a changed URL, model or budget applies at once.
    Thread-safe: the app's classification preview and the capture service share one.
    """

    def __init__(
        self,
        settings: LlmSettings,
        paths: Paths,
        *,
        clock: Callable[[], float] = time.time,
        breaker_threshold: int = BREAKER_THRESHOLD,
        breaker_cooldown_s: float = BREAKER_COOLDOWN_S,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.clock = clock
        self.breaker_threshold = breaker_threshold
        self.breaker_cooldown_s = breaker_cooldown_s
        self._lock = threading.Lock()
        self._probing = False
        self._classified: OrderedDict[str, TypeClassification] = OrderedDict()

    # -- configuration and state ---------------------------------------------------------

    @property
    def configured(self) -> bool:
        return bool(self.settings.url.strip())

    @property
    def endpoint(self) -> str:
        url = self.settings.url.strip().rstrip("/")
        return url if url.endswith("/chat/completions") else f"{url}/chat/completions"

    @property
    def state_file(self) -> Path:
        return self.paths.home / STATE_FILE

    def _read(self) -> dict[str, Any]:
        today = _day(self.clock())
        data: dict[str, Any] = {}
        try:
            loaded = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = None
        if isinstance(loaded, dict):
            data = loaded
        found = data.get("breaker")
        breaker: dict[str, Any] = found if isinstance(found, dict) else {}
        if data.get("day") != today:  # a new day: the budget starts again, the breaker stays
            data = _fresh_state(today)
        for key, default in _fresh_state(today).items():
            if not isinstance(data.get(key), type(default)):
                data[key] = default
        failures, until = breaker.get("failures"), breaker.get("open_until")
        data["breaker"] = {
            "failures": failures if isinstance(failures, int) else 0,
            "open_until": float(until) if isinstance(until, int | float) else 0.0,
        }
        return data

    def _write(self, data: dict[str, Any]) -> None:
        from lexmem.base import atomic_write

        try:
            atomic_write(self.state_file, json.dumps(data, sort_keys=True))
        except OSError as exc:
            # The counters are a guard, not data: a read-only folder must not stop capture.
            log.warning("[MEM:LLM] cannot save the LLM counters (%s)", exc.strerror)

    def _update(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Read, change and write the counters under the data folder's LLM lock."""
        from lexmem.locks import FileLock, LockTimeout

        lock = FileLock(self.paths.home / "llm.lock", timeout=2.0)
        try:
            lock.acquire()
            held = True
        except (LockTimeout, OSError):
            held = False  # another process holds it for long: count without it, once
        try:
            data = self._read()
            change(data)
            self._write(data)
            return data
        finally:
            if held:
                lock.release()

    def _circuit(self, data: Mapping[str, Any], now: float) -> str:
        breaker = data["breaker"]
        if breaker["failures"] < self.breaker_threshold:
            return "closed"
        return "open" if now < breaker["open_until"] else "half-open"

    def status(self) -> dict[str, Any]:
        """The budget, the breaker and the last failure, JSON-ready."""
        s = self.settings
        with self._lock:
            data = self._read()
        now = self.clock()
        circuit = self._circuit(data, now)
        return {
            "configured": self.configured,
            "url": s.url,
            "model": s.model,
            "day": data["day"],
            "calls": data["calls"],
            "calls_per_day": s.calls_per_day,
            "tokens": data["tokens"],
            "tokens_per_day": s.tokens_per_day,
            "circuit": circuit,
            "open_until": _iso(data["breaker"]["open_until"]) if circuit == "open" else None,
            "failures": dict(data["failures"]),
            "last_error": data["last_error"],
        }

    # -- one call ----------------------------------------------------------------------

    def _admit(self, prompt_chars: int) -> None:
        """Count the call about to be made, or refuse it (budget spent, circuit open)."""
        s = self.settings
        refusal: list[LlmError] = []

        def change(data: dict[str, Any]) -> None:
            now = self.clock()
            if s.calls_per_day and data["calls"] >= s.calls_per_day:
                refusal.append(LlmError(
                    "budget", f"the daily LLM budget is spent ({data['calls']} of "
                    f"{s.calls_per_day} calls); the rules work alone until tomorrow",
                ))  # fmt: skip
                return
            if s.tokens_per_day and data["tokens"] >= s.tokens_per_day:
                refusal.append(LlmError(
                    "budget", f"the daily LLM budget is spent ({data['tokens']:,} of "
                    f"{s.tokens_per_day:,} tokens); the rules work alone until tomorrow",
                ))  # fmt: skip
                return
            circuit = self._circuit(data, now)
            if circuit == "open" or (circuit == "half-open" and self._probing):
                until = time.strftime("%H:%M", time.localtime(data["breaker"]["open_until"]))
                refusal.append(LlmError(
                    "circuit-open", f"the LLM is paused after {data['breaker']['failures']} "
                    f"failures in a row (until {until}); the rules work alone meanwhile",
                ))  # fmt: skip
                return
            self._probing = circuit == "half-open"
            data["calls"] += 1
            data["tokens"] += prompt_chars // 4  # until the reply says how many it used

        with self._lock:
            self._update(change)
        if refusal:
            raise refusal[0]

    def _settle(self, prompt_chars: int, used: int | None, error: LlmError | None) -> None:
        def change(data: dict[str, Any]) -> None:
            if used is not None:  # the reply's own count replaces the estimate
                data["tokens"] = max(0, data["tokens"] + used - prompt_chars // 4)
            breaker = data["breaker"]
            if error is None:
                breaker["failures"], breaker["open_until"] = 0, 0.0
                return
            data["failures"][error.reason] = int(data["failures"].get(error.reason, 0)) + 1
            data["last_error"] = str(error)
            if error.reason in TRANSPORT:
                breaker["failures"] += 1
                if breaker["failures"] >= self.breaker_threshold:
                    breaker["open_until"] = self.clock() + self.breaker_cooldown_s
            elif self._probing:  # the endpoint answered: it is reachable again
                breaker["failures"], breaker["open_until"] = 0, 0.0

        with self._lock:
            self._update(change)
            self._probing = False

    def complete(self, prompt: str, *, max_tokens: int = 512) -> str:
        """One chat completion: the assistant's text, or :class:`LlmError`."""
        if not self.configured:
            raise LlmError("not-configured", "no LLM endpoint is configured ([llm] url)")
        chars = len(_SYSTEM) + len(prompt)
        self._admit(chars)
        used: int | None = None
        try:
            text, used = self._post(prompt, max_tokens)
        except LlmError as exc:
            self._settle(chars, used, exc)
            log.warning("[MEM:LLM] %s", exc)
            raise
        self._settle(chars, used, None)
        return text

    def _post(self, prompt: str, max_tokens: int) -> tuple[str, int | None]:
        import urllib.error
        import urllib.request

        from lexmem import __version__
        from lexmem.keystore import LLM_API_KEY, SecretStoreError, get_secret

        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": _SYSTEM},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": False,
        }
        if self.settings.model.strip():
            body["model"] = self.settings.model.strip()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"lexmem/{__version__}",
        }
        try:
            key = get_secret(LLM_API_KEY)
        except SecretStoreError:
            key = None  # no keyring: a local endpoint needs no key, a hosted one says 401
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.endpoint

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            # A POST must not turn into a GET, nor the key follow to another host: a
            # redirect is answered as the HTTP error it is.
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        handlers: list[Any] = [NoRedirect()]
        if urlparse(url).hostname in ("localhost", "127.0.0.1", "::1"):
            handlers.append(urllib.request.ProxyHandler({}))  # a local model never via a proxy
        opener = urllib.request.build_opener(*handlers)
        request = urllib.request.Request(
            url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        timeout = self.settings.timeout_s
        try:
            with opener.open(request, timeout=timeout) as response:
                raw = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise LlmError(
                "http", f"the LLM endpoint answered HTTP {exc.code} ({exc.reason})"
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise LlmError("timeout", f"the LLM did not answer within {timeout:g} s") from exc
            raise LlmError(
                "unreachable", f"cannot reach the LLM at {_shown(url)} ({exc.reason})"
            ) from exc
        except TimeoutError as exc:
            raise LlmError("timeout", f"the LLM did not answer within {timeout:g} s") from exc
        except OSError as exc:
            raise LlmError("unreachable", f"cannot reach the LLM at {_shown(url)} ({exc})") from exc
        return _message(raw)

    # -- the uses ------------------------------------------------------------------------

    def classify(self, content: str) -> TypeClassification:
        """Seed 001's LlmClassifier: the type of ``content``, or :class:`LlmError`."""
        with self._lock:
            cached = self._classified.get(content)
        if cached is not None:  # the quick-remember preview asks again as the person types
            return cached
        answer = _json(self.complete(_CLASSIFY.format(content=_tail(content)), max_tokens=200))
        if not isinstance(answer, dict):
            raise LlmError("malformed", "the LLM's classification is not a JSON object")
        rationale = answer.get("rationale")
        if rationale is not None and not isinstance(rationale, str):
            raise LlmError("malformed", "the LLM's classification rationale is not text")
        result = TypeClassification(
            _mtype(answer.get("type"), "classification"),
            _number(answer.get("confidence"), "classification"),
            ClassificationMethod.LLM_BASED,
            _clean(rationale)[:300] if rationale else None,
        )
        with self._lock:
            self._classified[content] = result
            while len(self._classified) > 64:
                self._classified.popitem(last=False)
        return result

    def extract(
        self,
        conversation: str,
        *,
        turns: int = 1,
        min_confidence: float = MIN_EXTRACTION_CONFIDENCE,
        max_per_turn: int = MAX_PER_TURN,
    ) -> list[Extraction]:
        """Seed 000's ExtractMemorableContent over a window ("User: …\\nAssistant: …").

        Only statements at ``min_confidence`` or above, the most confident first, at
        most ``max_per_turn`` per turn.
        """
        answer = _json(self.complete(_EXTRACT.format(conversation=_tail(conversation))))
        if not isinstance(answer, list):
            raise LlmError("malformed", "the LLM's extraction is not a JSON array")
        found: list[Extraction] = []
        for item in answer:
            if not isinstance(item, dict):
                raise LlmError("malformed", "an item of the LLM's extraction is not an object")
            content = item.get("content")
            if not isinstance(content, str) or not content.strip():
                raise LlmError("malformed", "an item of the LLM's extraction has no content")
            kind = item.get("kind", "")
            found.append(Extraction(
                _clean(content)[:1200], _mtype(item.get("type"), "extraction"),
                _number(item.get("confidence"), "extraction"),
                kind if kind in _KINDS else "",
            ))  # fmt: skip
        kept = sorted(
            (e for e in found if e.confidence >= min_confidence and e.content),
            key=lambda e: -e.confidence,
        )
        return kept[: max(0, max_per_turn) * max(1, turns)]

    def correction(self, original: str, corrected: str, context: str = "") -> str:
        """Seed 000's SynthesizeCorrectionLearning: one statement to remember."""
        prompt = _CORRECTION.format(
            original=_tail(original, 4000), corrected=_tail(corrected, 4000),
            context=_tail(context, 1000) or "(none)",
        )  # fmt: skip
        return _statement(self.complete(prompt, max_tokens=200), 600)

    def workflow(self, actions: Sequence[str]) -> str | None:
        """Seed 000's SynthesizeWorkflow: a procedure, or None when the LLM sees none."""
        listed = "\n".join(f"{i}. {a}" for i, a in enumerate(actions, 1))
        text = _statement(self.complete(_WORKFLOW.format(actions=_tail(listed, 6000))), 1200)
        return None if text.strip(" .\"'").lower() == "none" else text

    def summarise(self, content: str) -> str:
        """Seed 001's SummarizeContent: the key facts of over-long content."""
        text = _tail(content, 24_000)
        return _statement(self.complete(_SUMMARY.format(content=text), max_tokens=900), 4000)

    def test(self) -> dict[str, Any]:
        """One round trip with a fixed prompt (no memory leaves the machine): the answer
        and how long it took."""
        started = time.perf_counter()
        answer = _json(
            self.complete('Reply with the JSON {"ok": true} and nothing else.', max_tokens=20)
        )
        if answer != {"ok": True}:
            raise LlmError("malformed", 'the LLM did not answer {"ok": true} as asked')
        return {"ok": True, "seconds": round(time.perf_counter() - started, 3), **self.status()}


def _shown(url: str) -> str:
    """The endpoint as a message names it: scheme, host, port and path only.

    A URL may carry a credential (``https://user:key@host``, ``?api_key=...``); messages
    end up in llm.json and the log, which must never hold one.
    """
    parts = urlparse(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return f"{parts.scheme}://{netloc}{parts.path}"


def _message(raw: bytes) -> tuple[str, int | None]:
    """The assistant's text and the tokens used, from a chat-completion reply."""
    if len(raw) > MAX_REPLY_BYTES:
        raise LlmError("envelope", "the LLM's reply is larger than 1 MB")
    try:
        reply = json.loads(raw.decode("utf-8"))
        choice = reply["choices"][0]
        message = choice["message"]
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise LlmError("envelope", "the LLM endpoint's reply is not a chat completion") from exc
    if not isinstance(message, dict):
        raise LlmError("envelope", "the LLM endpoint's reply is not a chat completion")
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        raise LlmError("refusal", "the LLM declined to answer")
    content = message.get("content")
    if not isinstance(content, str):
        raise LlmError("envelope", "the LLM endpoint's reply has no text")
    usage = reply.get("usage") if isinstance(reply, dict) else None
    used = usage.get("total_tokens") if isinstance(usage, dict) else None
    valid = isinstance(used, int) and not isinstance(used, bool) and used >= 0
    return content, used if valid else None


def _json(text: str) -> Any:
    body = _unfence(text)
    if _REFUSAL.match(body):
        raise LlmError("refusal", "the LLM declined to answer")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise LlmError("malformed", "the LLM's answer is not the JSON asked for") from exc


def _statement(text: str, limit: int) -> str:
    body = _unfence(text)
    if _REFUSAL.match(body):
        raise LlmError("refusal", "the LLM declined to answer")
    body = body.strip().strip('"“”').strip()
    if not body:
        raise LlmError("malformed", "the LLM's answer is empty")
    if len(body) > limit:
        raise LlmError(
            "malformed", f"the LLM's answer is longer than the {limit} characters asked for"
        )
    return _clean(body)


def status_line(st: Mapping[str, Any]) -> str:
    """One line for people: off, or the day's counters and the breaker."""
    if not st.get("configured"):
        return "off (no endpoint configured: nothing leaves this machine)"

    def of(used: int, limit: int) -> str:
        return f"{used:,} of {limit:,}" if limit else f"{used:,} (no limit)"

    line = (
        f"{st['model'] or 'default model'} at {st['url']}: {of(st['calls'], st['calls_per_day'])} "
        f"calls, {of(st['tokens'], st['tokens_per_day'])} tokens today"
    )
    if st["circuit"] != "closed":
        line += f"; paused after repeated failures ({st['circuit']})"
    if st.get("enabled") is False:
        line += "; not used (LLM-assisted encoding needs Writer Pro)"
    return line
