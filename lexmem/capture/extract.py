"""Candidate extraction: turn a window of agent-session events into memory candidates.

The capture service (DESIGN.md, "The shape") buffers each session's events and, at a
window boundary (every N turns, at Stop, at SessionEnd), hands the window to
:class:`Extractor`. The extractor only *proposes*: each :class:`Candidate` carries a
confidence that the service compares with the capture mode's threshold (``assist``
keeps >= 0.7, seed 000's MinExtractionConfidence; ``full`` keeps >= 0.5; both are
``THRESHOLDS`` in :mod:`lexmem.service.writer`), then redacts, dedupes, audits and writes.

Everything here is rule-based, deterministic and standard-library only: seed 003's
"Candidate Extractor" without an LLM, and seed 000's capture points (conversation
turns with trigger phrases, corrections, configuration changes, workflow patterns,
search confirmations). The rules favour precision. Chit-chat, reads, greps and file
listings yield nothing; only statements someone would act on in a later session reach
the confidence that ``assist`` keeps.

The rules (``Candidate.rule`` names the one that fired, for the audit log):

* user statements, sentence by sentence (questions and chit-chat are skipped):
  explicit triggers ("remember that", "note that", "keep in mind", "for future
  reference") -> EXPLICIT; corrections ("no, that's wrong: ...", "actually it's ...",
  "don't X, use Y", "X, not Y", "that's not how we ...") -> CORRECTION; decisions
  ("let's go with X", "we decided to ...", "use X instead of Y", "go with option B")
  -> DECISION; rules ("never push to main", "we must support Python 3.9", "don't use
  mocks in integration tests") -> CONSTRAINT; preferences ("I prefer tabs", "always
  use pnpm", "from now on ...", "keep chapter titles short") -> PREFERENCE; open
  items ("we still need to decide ...", "TODO: ...") -> QUESTION; risks ("this will
  break if ...", "risk: ...") -> RISK; "To X, run `y`" -> PROCEDURE.
* assistant responses: a proposal ("I'll use X because ...") becomes a DECISION only
  when the user's next message confirms it; "To X, run `y`" -> PROCEDURE (more
  confident when the command was actually run and succeeded); labelled decisions,
  risks and open questions.
* tool activity: a failing command (non-zero exit, traceback, failing tests), then
  edits, then the same kind of command passing and/or the agent explaining the root
  cause -> one FIX naming the error, cause, fix, files and verifying command. Three or
  more meaningful actions (test, build, commit, push, ...) within the pattern window
  -> WORKFLOW "To <goal>: 1) ... 2) ... 3) ...".
* ``config_change`` events -> CONFIGURATION ("User prefers dark mode");
  ``explicit`` events -> EXPLICIT; ``search_confirmation`` events -> no candidate,
  see :func:`confirmations`.
* ``final=True`` -> one HANDOFF per session: goal, files changed, commands run,
  fixes, open items, outcome.

Confidence calibration (what ``assist`` keeps is >= 0.7):

* 0.90-0.95: explicit "remember"/"note that" statements and ``explicit`` events;
  preferences stated with a seed trigger phrase; clean ``correction()`` diffs.
* 0.80-0.88: corrections in conversation, decisions the user states or confirms,
  durable constraints and preferences, verified and explained fixes,
  configuration changes, procedures the user states.
* 0.60-0.74: things that are probably worth keeping but are less certain: fixes
  without an explanation or without a verifying run, procedures the agent explains,
  single observed workflows, open questions, risks, project facts, handoffs of
  sessions that changed files without verifying them. ``assist`` keeps those of
  0.70 and up; ``full`` keeps them all.
* below 0.5: for the audit log only (handoffs of sessions that changed nothing,
  settings that look like secrets).

State. The extractor remembers a little per session between calls (a bounded tail
of the previous window, and a digest for the handoff), so that a bug that fails in one
window and is fixed in the next, or a proposal confirmed at the start of the next
window, is still found. At session end pass the last window with ``final=True``, or
call :meth:`Extractor.finish` when there is no window left (an empty window cannot
name its session); :meth:`Extractor.forget` drops an abandoned session. Use one
:class:`Extractor` per service; it is not thread-safe. Time is linear in the size of the window: every regular expression has
bounded repetition, long texts are read only up to a fixed length, and sentences
longer than a few hundred characters are not read as statements.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from lexmem.capture.classify import classify
from lexmem.models import MemorySource, MemoryType

__all__ = [
    "TRIGGER_PATTERNS",
    "Candidate",
    "CandidateKind",
    "ExtractOptions",
    "Extractor",
    "confirmations",
    "is_chitchat",
    "trigger_phrases",
]


class CandidateKind(StrEnum):
    """What a candidate is about (seed 003's candidate types, seed 000's capture points)."""

    DECISION = "decision"
    FIX = "fix"
    CONSTRAINT = "constraint"
    PREFERENCE = "preference"
    PROCEDURE = "procedure"
    WORKFLOW = "workflow"
    QUESTION = "question"
    RISK = "risk"
    CORRECTION = "correction"
    EXPLICIT = "explicit"
    CONFIGURATION = "configuration"
    HANDOFF = "handoff"


@dataclass(frozen=True)
class Candidate:
    """A proposed memory, before policy, redaction, dedupe and writing.

    ``confidence`` is in [0, 1]; the service keeps a candidate when it reaches the
    capture mode's threshold. ``trigger`` says an explicit trigger phrase (seed 000's
    ``MemoryTriggerPatterns``) was present, which should boost salience;
    ``metadata["reinforce"]`` asks for the same boost for corrections. ``event_ids``
    name the events the candidate was drawn from, in session order.
    """

    kind: CandidateKind
    title: str
    text: str
    type: MemoryType
    confidence: float
    source: MemorySource
    event_ids: tuple[str, ...]
    project: str | None
    session_id: str
    trigger: bool = False
    rule: str = ""
    # Excluded from the hash so that a frozen candidate stays hashable.
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for the audit log)."""
        return {
            "kind": self.kind.value,
            "title": self.title,
            "text": self.text,
            "type": self.type.value,
            "confidence": round(self.confidence, 4),
            "source": self.source.value,
            "event_ids": list(self.event_ids),
            "project": self.project,
            "session_id": self.session_id,
            "trigger": self.trigger,
            "rule": self.rule,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class ExtractOptions:
    """Tuning from seed 000's ``MemoryCaptureOptions``."""

    min_actions_for_pattern: int = 3
    pattern_window_minutes: int = 30
    max_per_turn: int = 3


# ------------------------------------------------------------------------ limits

# Constraint: the service must stay responsive on pasted logs and huge tool output.
# Prose is read up to this many characters, tool output only at its head and tail
# (a traceback's last line and a test runner's summary are at the end).
_MAX_TEXT = 20_000
_MAX_RESULT_HEAD = 6_000
_MAX_RESULT_TAIL = 6_000
# A "sentence" longer than this is a paste, not a statement worth keeping.
_MAX_SENTENCE = 600
_MAX_OUT = 1_200
_TITLE_LIMIT = 80
# Carry-over between windows of one session, and how many sessions are remembered.
_MAX_TAIL_EVENTS = 150
_MAX_SESSIONS = 256
_MAX_SEEN_IDS = 20_000

# --------------------------------------------------------------- confidences

_C_EXPLICIT_EVENT = 0.95
_C_EXPLICIT = 0.92
_C_TRIGGER_PREF = 0.9
_C_CORRECTION_DIFF = 0.9
_C_CORRECTION = 0.88
_C_CORRECTION_UNCONFIRMED = 0.78
_C_CORRECTION_VAGUE = 0.7
_C_FIX_FULL = 0.88
_C_FIX_VERIFIED = 0.72
_C_FIX_EXPLAINED = 0.65
_C_FIX_LINT = 0.55
_C_DECISION = 0.85
_C_DECISION_CONFIRMED = 0.8
_C_DECISION_UNRESOLVED = 0.55
_C_DECISION_AGENT = 0.62
_C_DECISION_LOCAL = 0.6
_C_CONSTRAINT = 0.82
_C_CONSTRAINT_SOFT = 0.76
_C_CONSTRAINT_LOCAL = 0.6
_C_PREFERENCE = 0.8
_C_PREFERENCE_STRONG = 0.84  # "I prefer", "always ...": the wording itself says it is a rule
_C_FACT = 0.68
_C_TEMPORARY = 0.5
_C_PROCEDURE_USER = 0.8
_C_PROCEDURE_DONE = 0.78
_C_PROCEDURE_SAID = 0.6
_C_QUESTION_USER = 0.66
_C_QUESTION_AGENT = 0.6
_C_RISK_USER = 0.68
_C_RISK_AGENT = 0.6
_C_CONFIG = 0.8
_C_CONFIG_SECRET = 0.3
_C_CONFIG_NOOP = 0.2
_C_WORKFLOW = 0.6
_C_WORKFLOW_SPECIFIC = 0.7
_C_WORKFLOW_REPEATED = 0.8
_C_WORKFLOW_REPORTED = 0.7
_C_REWRITE = 0.5
_C_HANDOFF_FIXED = 0.8
_C_HANDOFF_VERIFIED = 0.75
_C_HANDOFF_EDITED = 0.6
_C_HANDOFF_THIN = 0.35

# ----------------------------------------------------------------- triggers

# Seed 000's MemoryTriggerPatterns, then the ones the capture design adds.
TRIGGER_PATTERNS: tuple[str, ...] = (
    r"\bremember\s+that\b",
    r"\balways\s+use\b",
    r"\bnever\s+do\b",
    r"\bprefer\s+to\b",
    r"\bi\s+want\b",
    r"\bfrom\s+now\s+on\b",
    r"\bnote\s+that\b",
    r"\bkeep\s+in\s+mind\b",
    r"\bfor\s+future\s+reference\b",
    r"\bgoing\s+forward\b",
    r"\bremember\s+to\b",
    r"\bbear\s+in\s+mind\b",
)
_TRIGGERS = tuple(re.compile(p, re.IGNORECASE) for p in TRIGGER_PATTERNS)


def trigger_phrases(text: str) -> list[str]:
    """The explicit trigger phrases in ``text``, lower-cased, in order of appearance."""
    text = _norm_quotes(text[:_MAX_TEXT])
    found: list[tuple[int, str]] = []
    for pattern in _TRIGGERS:
        for m in pattern.finditer(text):
            found.append((m.start(), _WS.sub(" ", m.group(0).lower())))
    out: list[str] = []
    for _, phrase in sorted(found):
        if phrase not in out:
            out.append(phrase)
    return out


# ----------------------------------------------------------------- chit-chat


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WS = re.compile(r"\s+")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"'})
_WORD = re.compile(r"[a-z][a-z']*")

# Words that carry no memorable content on their own. A message made only of these
# ("ok thanks", "great job, looks good", "yes please go ahead") is chit-chat.
_FILLER = _wordset(
    """
    a about ack agree agreed ahead all alright amazing and appreciate appreciated
    awesome awsome bye brilliant carry cheers continue cool correct could dear did do
    done doing excellent fab fantastic fine for gg go good got gotcha great guys ha haha
    hah happy hello help helpful hey hi hm hmm hmmm how i i'm im indeed is it it's job
    just k kk keep let let's lets lgtm lol looks love lovely makes man many much my
    neat nice no nope now np oh ok okay on one perfect please pls plz proceed really
    right same sense ship so sounds super sure sweet thank thanks that that's the
    then there this thx to too ty understood up very wait well what whoa wonderful
    work worked works wow yay yeah yep yes yup you you're your welcome glad anytime
    morning evening afternoon night bye goodbye fast quick
    """
)
_META_QUESTION = re.compile(
    r"^(?:(?:can|could|would)\s+you\s+)?(?:please\s+)?(?:explain|repeat|say|clarify|"
    r"elaborate|go\s+over|rephrase|summari[sz]e)\s*(?:that|this|it|what\s+you\s+(?:said|did|"
    r"mean[t]?))?(?:\s+(?:again|more|once\s+more|in\s+more\s+detail|please|for\s+me))*\s*\??$"
    r"|^what\s+(?:do|did)\s+you\s+mean\b.{0,40}$|^what\s+does\s+that\s+mean\??$"
    r"|^(?:why|what|how\s+so|really|are\s+you\s+sure|come\s+again|huh|pardon|sorry)\s*\??$"
    r"|^(?:never\s*mind|nvm|forget\s+it|no\s+worries|all\s+good|my\s+bad)\b.{0,20}$",
    re.IGNORECASE,
)
_AFFIRM = re.compile(
    r"^(?:yes|yep|yeah|yup|sure|ok(?:ay)?|sounds\s+good|sounds\s+great|lgtm|go\s+ahead|"
    r"go\s+for\s+it|do\s+it|agreed|agree|perfect|great|makes\s+sense|that\s+works|"
    r"works\s+for\s+me|let'?s\s+do\s+(?:it|that|this)|ship\s+it|approved|correct|"
    r"exactly|please\s+do|good\s+idea|fine|alright|👍)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:no|not|don't|dont|instead|but|rather|wait|hold\s+on)\b", re.I)


def is_chitchat(text: str) -> bool:
    """Whether ``text`` carries nothing worth remembering on its own.

    Greetings, thanks, acknowledgements ("ok", "lgtm", "sounds good", "great job"),
    emoji and punctuation, and requests to repeat or explain ("can you explain that
    again?") are chit-chat. A message with an explicit trigger phrase never is.
    """
    if not text or not text.strip():
        return True
    norm = _norm_quotes(text.strip()[:2_000]).lower()
    if trigger_phrases(norm):
        return False
    words = _WORD.findall(norm)
    if not words:
        return True  # emoji, punctuation, numbers only
    if _META_QUESTION.match(norm.strip(" .!")):
        return True
    return len(words) <= 12 and all(w in _FILLER for w in words)


def _is_affirmation(text: str) -> bool:
    """A short yes (confirms the agent's proposal), without a "but" or "instead"."""
    norm = _norm_quotes(text.strip()[:400]).lower()
    if not _AFFIRM.match(norm) or len(_WORD.findall(norm)) > 14:
        return False
    return not _NEGATION.search(norm)


# --------------------------------------------------------------- small helpers


def _norm_quotes(text: str) -> str:
    return text.translate(_QUOTES)


_PLACEHOLDER = re.compile(r"\[REDACTED(?::[^\]\s]{0,60})?\]")
_CODE_SPAN = re.compile(r"`[^`\n]{1,300}`")
_PROTECTED = re.compile(r"`[^`\n]{1,300}`|\[REDACTED(?::[^\]\s]{0,60})?\]")
_TOKEN = re.compile("\ue000(\\d+)\ue001")
_STOPWORDS = _wordset(
    """
    a an the is are was were be been it its this that these those to of in on at for
    with and or but so if as by my our your his her their me we you i he she they them
    here there is my mine what which who please just also very really then now
    """
)
# Words that may be capitalised at the start of a sentence (not tool names like
# "pnpm" or "uv", which keep their spelling).
_STARTERS = _wordset(
    """
    a add after all also always an any api avoid before call check commit deploy do how leave
    does don't each every for format from go if in include install it its keep make
    never no not only our prefer push put remove return run set some stick store
    switch test that the their there these they this those to update use user we
    when with without write when whenever
    """
)


_KNOWN_PROGRAMS = _wordset(
    "npm pnpm yarn git make pytest python python3 cargo go uv poetry docker kubectl ruff mypy "
    "tox nox helm terraform gh bun deno node npx just pip pipx psql curl ssh"
)
# Names conventionally written in lower case even at the start of a sentence.
_LOWERCASE_NAMES = _wordset("iphone ios macos npm jq vim emacs zsh bash sh")


def _content_words(text: str) -> int:
    """How many words of substance ``text`` has (placeholders do not count)."""
    text = _PLACEHOLDER.sub(" ", text)
    return sum(1 for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)


def _capitalise(text: str) -> str:
    """Capitalise an ordinary first word; leave tool names ("pnpm") and code alone."""
    m = re.match(r"[a-z][a-z']*(?![\w./-])", text)
    if m and m.group(0) not in _KNOWN_PROGRAMS and m.group(0) not in _LOWERCASE_NAMES:
        return text[0].upper() + text[1:]
    return text


def _decapitalise(text: str) -> str:
    m = re.match(r"[A-Z][a-z']*\b", text)
    if m and m.group(0).lower() in _STARTERS and m.group(0) != "I":
        return text[0].lower() + text[1:]
    return text


def _finish(text: str) -> str:
    """One clean statement: single spaces, capitalised, ending in punctuation."""
    text = _WS.sub(" ", text).strip().strip(" ,;:-")
    if not text:
        return ""
    text = _capitalise(text)
    if text[-1] not in ".!?":
        text += "."
    return text


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary and marked with an ellipsis."""
    text = _WS.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return (cut or text[: limit - 1]) + "…"


def _bound_text(text: str, limit: int = _MAX_OUT) -> str:
    """Keep whole sentences up to ``limit``; say so when something was left out."""
    if len(text) <= limit:
        return text
    marker = " […]"
    out = ""
    for sentence in _split_plain(text):
        if len(out) + len(sentence) + 1 + len(marker) > limit:
            break
        out = f"{out} {sentence}".strip()
    if not out:
        out = text[: limit - len(marker) - 1].rsplit(" ", 1)[0]
    return out + marker


def _split_plain(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


def _title(prefix: str, statement: str) -> str:
    """A short title: ``prefix: first clause of statement`` within 80 characters."""
    first = _split_plain(statement.strip())
    body = first[0] if first else statement
    body = body.strip().rstrip(".!")
    if prefix:
        body = _decapitalise(body)
        return _clip(f"{prefix}: {body}", _TITLE_LIMIT)
    return _clip(body, _TITLE_LIMIT)


def _third_person(text: str) -> str:
    """ "I prefer tabs" -> "User prefers tabs": a memory is read later, by someone else."""
    rewrites = (
        (r"^i\s+(?:really\s+|strongly\s+|generally\s+|usually\s+)?prefer\b", "User prefers"),
        (r"^i(?:'d|\s+would)\s+(?:much\s+)?rather\b", "User would rather"),
        (r"^i(?:'d|\s+would)\s+prefer\b", "User would prefer"),
        (r"^i(?:'d|\s+would)\s+like\b", "User would like"),
        (r"^i\s+(?:really\s+)?like\b", "User likes"),
        (r"^i\s+(?:really\s+)?love\b", "User loves"),
        (r"^i\s+(?:really\s+)?hate\b", "User hates"),
        (r"^i\s+(?:really\s+)?dislike\b", "User dislikes"),
        (r"^i\s+(?:really\s+)?(?:don't|do\s+not)\s+like\b", "User doesn't like"),
        (r"^i\s+(?:really\s+)?(?:don't|do\s+not)\s+want\b", "User doesn't want"),
        (r"^i\s+never\s+want\b", "User never wants"),
        (r"^i\s+(?:really\s+)?want\b", "User wants"),
        (r"^i\s+always\b", "User always"),
        (r"^i\s+never\b", "User never"),
        (r"^i\s+use\b", "User uses"),
    )
    for pattern, repl in rewrites:
        new, n = re.subn(pattern, repl, text, count=1, flags=re.IGNORECASE)
        if n:
            return new
    return text


# Lead-ins that carry no content: "ok, also, please ...".
_LEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|also|and|but|btw|by\s+the\s+way|oh|hey|fyi|so|again|once\s+more|"
    r"as\s+i\s+said|one\s+more\s+thing|"
    r"one\s+thing|just\s+so\s+you\s+know|quick\s+note|important)\s*[,:.!-]*\s+)+",
    re.IGNORECASE,
)
# How agents introduce an aside; the statement proper follows.
_AGENT_LEAD = re.compile(
    r"^(?:note|n\.b\.|nb|important|also note|one caveat|caveat)\s*(?:that\b)?\s*[:,-]?\s*",
    re.IGNORECASE,
)
# "Ground rules: We must ...": a short label before a sentence. Labels that rules
# read ("Decision:", "TODO:", "Risk:") stay.
_LABEL = re.compile(r"^([A-Za-z][\w' -]{0,30}?)\s*:\s+(?=[A-Z`\"'])")
_RULE_LABELS = frozenset(
    {
        "decision", "decided", "verdict", "conclusion", "todo", "to-do", "fixme", "tbd",
        "open question", "open issue", "follow-up", "follow up", "unresolved", "next step",
        "question for later", "risk", "warning", "caveat", "gotcha", "known issue",
        "limitation", "heads-up", "heads up", "beware", "note", "important", "fyi",
        "for the record", "for future reference", "remember",
    }
)  # fmt: skip
_PLEASE = re.compile(r"^(?:please|pls|plz|kindly)\s*,?\s+", re.IGNORECASE)
_DURABLE_LEAD = re.compile(
    r"^(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|henceforth|"
    r"as\s+a\s+(?:general\s+)?rule|in\s+general|generally)\s*[,:—–-]?\s+",
    re.IGNORECASE,
)
_DURABLE_TAIL = re.compile(
    r"[,\s]+(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future)\s*[.!]?$", re.I
)
_DURABLE = re.compile(
    r"\b(?:always|never|from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|every\s+time|"
    r"whenever|by\s+default|throughout|everywhere|in\s+general|consistently|as\s+a\s+rule|"
    r"any\s+time|anytime|in\s+this\s+(?:repo|repository|project|codebase|book|series)|"
    r"project[- ]wide|across\s+the|all\s+(?:of\s+)?(?:the|our|my)?\s*\w+s\b)",
    re.IGNORECASE,
)
_TEMPORARY = re.compile(
    r"\b(?:for\s+now|right\s+now|just\s+now|this\s+time|for\s+this\s+(?:task|pr|change|one|"
    r"commit|run)|today|yet|at\s+the\s+moment|temporarily|in\s+this\s+pr|for\s+the\s+moment|"
    r"until\s+(?:i|we|the|further|after)\b|for\s+a\s+(?:bit|moment|sec))\b",
    re.IGNORECASE,
)
_SECRET_STATEMENT = re.compile(
    r"\b(?:tokens?|passwords?|passwd|secrets?|api[ _-]?keys?|keys?|credentials?|pat|"
    r"passphrase)\b[^.\n]{0,40}?(?:\bis\b|=|:|\bwas\b|\bhere\b|\bto\b|\buse\b)\s*[`'\"]?"
    r"\[REDACTED",
    re.IGNORECASE,
)


def _strip_lead(text: str) -> str:
    text = _LEAD.sub("", text.strip())
    m = _LABEL.match(text)
    if m and m.group(1).lower() not in _RULE_LABELS:
        text = text[m.end() :]  # "Ground rules: We must ..." -> "We must ..."
    return _PLEASE.sub("", text)


# ------------------------------------------------------------------ segmenting


@dataclass(slots=True)
class _Sentence:
    text: str
    list_item: bool = False
    code_after: str = ""  # a fenced code block that follows this sentence


_FENCE = re.compile(r"^\s*(?:```|~~~)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|#{1,6}|>)\s+")
_SENT_END = re.compile(r"[.!?]+[\"')\]]*(?=\s+[\"'(\[A-Z0-9\ue000`*_])")
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|mr|mrs|ms|dr|st|no|fig|eq|ca)\.)$", re.I)
_EMPHASIS = re.compile(r"\*\*|__")


def _segment(text: str) -> list[_Sentence]:
    """Split prose into sentences: list items and lines stand alone, code stays whole.

    Inline code and redaction placeholders are protected while splitting so that a
    ``setup.py.`` or a ``[REDACTED:github_token]`` never breaks a sentence, and they
    come back unchanged.
    """
    text = _norm_quotes(text[:_MAX_TEXT])
    out: list[_Sentence] = []
    code: list[str] = []
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            if in_code:
                if out and not out[-1].code_after:
                    out[-1].code_after = "\n".join(code)
                code = []
            in_code = not in_code
            continue
        if in_code:
            if len(code) < 40:
                code.append(line)
            continue
        if not line.strip():
            continue
        item = bool(_LIST_MARK.match(line))
        line = _EMPHASIS.sub("", _LIST_MARK.sub("", line, count=1)).strip()
        saved: list[str] = []

        def protect(m: re.Match[str], saved: list[str] = saved) -> str:
            saved.append(m.group(0))
            return f"\ue000{len(saved) - 1}\ue001"

        guarded = _PROTECTED.sub(protect, line)
        start = 0
        for m in _SENT_END.finditer(guarded):
            piece = guarded[start : m.end()]
            if _ABBREV.search(piece):
                continue
            out.append(_Sentence(_restore(piece.strip(), saved), item))
            start = m.end()
        rest = guarded[start:].strip()
        if rest:
            out.append(_Sentence(_restore(rest, saved), item))
        if len(out) > 400:
            break
    return out


def _restore(text: str, saved: list[str]) -> str:
    return _TOKEN.sub(lambda m: saved[int(m.group(1))], text)


# -------------------------------------------------------------------- events


@dataclass(slots=True)
class _Event:
    pos: int
    id: str
    type: str
    session: str
    ts: datetime | None
    project: str | None
    cwd: str | None
    agent: str
    content: str
    meta: Mapping[str, Any]


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _event(raw: Mapping[str, Any], pos: int) -> _Event:
    """A tolerant view of one event: events come from other processes."""
    meta = raw.get("metadata")
    return _Event(
        pos=pos,
        id=str(raw.get("event_id") or f"#{pos}"),
        type=str(raw.get("event_type") or "").lower(),
        session=str(raw.get("session_id") or ""),
        ts=_parse_time(raw.get("timestamp")),
        project=str(raw["project"]) if raw.get("project") else None,
        cwd=str(raw["cwd"]) if raw.get("cwd") else None,
        agent=str(raw.get("agent") or "generic"),
        content=_as_text(raw.get("content")),
        meta=meta if isinstance(meta, Mapping) else {},
    )


def _relative(path: str, *roots: str | None) -> str:
    for root in roots:
        if root and path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1 :]
    return path


# --------------------------------------------------------------------- tools

_SHELL_TOOLS = frozenset(
    {
        "bash", "shell", "local_shell", "exec_command", "run_terminal_cmd", "terminal",
        "run_command", "execute_command", "run_shell_command", "container.exec",
        "powershell", "sh", "zsh", "command",
    }
)  # fmt: skip
_EDIT_TOOLS = frozenset(
    {
        "edit", "multiedit", "write", "notebookedit", "apply_patch", "edit_file",
        "write_file", "create_file", "str_replace_editor", "str_replace_based_edit_tool",
        "replace_in_file", "patch", "insert", "search_replace",
    }
)  # fmt: skip
_READ_SUBCOMMANDS = frozenset({"view", "read", "list"})

# Shell commands that only look: they are neither workflow steps nor verifications.
_EXPLORE = re.compile(
    r"^(?:ls|ll|la|dir|cat|bat|head|tail|less|more|grep|egrep|rg|ag|ack|find|fd|tree|pwd|"
    r"echo|printf|which|whereis|type|file|stat|wc|du|df|env|printenv|whoami|date|id|jq|"
    r"awk|cut|sort|uniq|diff|open|xdg-open|code|vim?|nano|man|help|history|clear|cd|"
    r"sed\s+-n|git\s+(?:status|diff|log|show|branch|blame|remote|rev-parse|ls-files|"
    r"config\s+--get|stash\s+list|reflog|describe|shortlog)|"
    r"(?:python3?|node)\s+(?:-V|--version)|\S+\s+--(?:version|help))\b",
    re.IGNORECASE,
)
_STAGES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (stage, re.compile(rx, re.IGNORECASE))
    for stage, rx in (
        ("lint", r"\bpre-commit\b"),
        (
            "deploy",
            r"\b(?:deploy\w*|kubectl\s+apply|helm\s+(?:upgrade|install)|terraform\s+apply|"
            r"fly\s+deploy|vercel|netlify\s+deploy|serverless\s+deploy|sls\s+deploy|"
            r"eb\s+deploy|ship\s+to\s+prod\w*)\b",
        ),
        (
            "release",
            r"\b(?:npm\s+publish|pnpm\s+publish|yarn\s+publish|twine\s+upload|cargo\s+publish|"
            r"gh\s+release|poetry\s+publish|uv\s+publish|release|publish)\b",
        ),
        ("push", r"\bgit\s+push\b|\bpush\b"),
        ("merge", r"\bgit\s+merge\b|\bgh\s+pr\s+merge\b|^merge\b"),
        ("pr", r"\bgh\s+pr\s+create\b|\bpull\s+request\b|\bopen\s+(?:a\s+)?pr\b"),
        ("tag", r"\bgit\s+tag\b"),
        ("commit", r"\bgit\s+commit\b|\bcommit\b"),
        ("stage", r"\bgit\s+add\b|^stage\b"),
        ("typecheck", r"\b(?:mypy|pyright|tsc\s+--noemit|type[- ]?check\w*)\b"),
        (
            "lint",
            r"\b(?:ruff(?!\s+format)|flake8|pylint|eslint|golangci-lint|clippy|rubocop|"
            r"shellcheck|stylelint|lint\w*)\b",
        ),
        (
            "format",
            r"\b(?:ruff\s+format|black|isort|prettier|gofmt|cargo\s+fmt|rustfmt|format\w*)\b",
        ),
        (
            "test",
            r"\b(?:pytest|py\.test|unittest|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|"
            r"(?:go|cargo|dotnet|mvn|gradle|npm|pnpm|yarn|bun|deno|mix)\s+(?:run\s+)?test\w*|"
            r"make\s+(?:test|check)\w*|tests?)\b",
        ),
        ("migrate", r"\b(?:migrate|migrations?|alembic\s+upgrade|db:migrate)\b"),
        (
            "generate",
            r"\b(?:make\s+gen\w*|codegen|protoc|openapi-generator\w*|generate|regenerate)\b",
        ),
        (
            "install",
            r"\b(?:(?:pip3?|uv\s+pip|pipx|npm|pnpm|yarn|bun|brew|apt(?:-get)?|gem|cargo|go|"
            r"poetry|uv)\s+(?:install|add|ci|i|sync|get)|bundle\s+install|install\w*)\b",
        ),
        (
            "build",
            r"\b(?:build\w*|compile\w*|make|tsc|webpack|vite\s+build|mvn\s+package|"
            r"gradle\s+assemble)\b",
        ),
        (
            "run",
            r"^(?:python3?|node|deno|bun|ruby|go\s+run|cargo\s+run|\./|bash\s|sh\s|"
            r"docker(?:-compose|\s+compose)?\s+(?:up|run)|npm\s+(?:run\s+)?start|uvicorn|"
            r"flask|npx|uv\s+run|poetry\s+run)",
        ),
    )
)
_VERIFY_STAGES = frozenset({"test", "build", "lint", "typecheck", "run"})
_CHANGE_STAGES = frozenset({"install", "migrate", "generate", "format"})
_STEP_PHRASE = {
    "test": "run the tests",
    "lint": "run the linter",
    "format": "format the code",
    "typecheck": "type-check",
    "build": "build",
    "install": "install the dependencies",
    "migrate": "run the migrations",
    "generate": "regenerate the generated code",
    "stage": "stage the changes",
    "commit": "commit",
    "push": "push",
    "merge": "merge",
    "pr": "open a pull request",
    "tag": "tag the release",
    "release": "publish the release",
    "deploy": "deploy",
    "run": "run it",
    "edit": "edit the code",
}
_GOAL = {
    "deploy": "deploy",
    "release": "publish a release",
    "push": "ship a change",
    "merge": "merge a change",
    "pr": "open a pull request",
    "tag": "tag a release",
    "commit": "commit a change",
    "build": "build the project",
    "test": "check a change",
    "lint": "check a change",
    "typecheck": "check a change",
    "format": "check a change",
    "migrate": "update the database schema",
    "generate": "regenerate code",
    "run": "run the project",
    "install": "set up the project",
    "edit": "make a change",
}
# Codex runs ["bash", "-lc", "cargo test"]: the command is the last part.
_SHELL_WRAPPER = re.compile(r"^(?:/\S*/)?(?:bash|sh|zsh|pwsh|powershell)\s+-l?c\s+")
_ENV_PREFIX = re.compile(r"^(?:(?:sudo|time|nice|command)\s+|[A-Z_][A-Z0-9_]*=\S*\s+)+")
_COMMIT_MSG = re.compile(r"(\s-(?:m|am)|\s--message)\s+(?:\"[^\"]*\"|'[^']*'|\S+)")


def _split_command(command: str) -> list[str]:
    """``a && b; c | d`` -> ["a", "b", "c"] (a pipe's consumer is not a step)."""
    parts: list[str] = []
    for part in re.split(r"\s*(?:&&|\|\||;|\n)\s*", command[:2_000]):
        part = part.split(" | ", 1)[0].strip()
        part = _ENV_PREFIX.sub("", part)
        if part:
            parts.append(part)
    return parts[:12]


def _stage(command: str) -> str | None:
    """The workflow stage of one shell command or action description; None = explore."""
    text = command.strip()
    if not text or _EXPLORE.match(text):
        return None
    for stage, pattern in _STAGES:
        if pattern.search(text):
            return stage
    return "other"


def _display_command(command: str) -> str:
    first = command.strip().split("\n", 1)[0]
    if re.search(r"\bcommit\b", first):
        first = _COMMIT_MSG.sub(r'\1 "…"', first)  # the message is not part of the procedure
    return _clip(first, 80)


@dataclass(slots=True)
class _Action:
    """One tool use: a call, and its result once seen."""

    call: _Event
    kind: str  # "shell", "edit" or "other"
    command: str = ""
    files: tuple[str, ...] = ()
    new_text: str = ""
    stage: str | None = None  # of the command's main part; "edit" for edits
    key: str = ""  # what a later run must match to count as "the same check"
    result: _Event | None = None
    ok: bool | None = None


_INPUT_FIELD = re.compile(
    r'"(?P<key>file_path|path|notebook_path|command|cmd)"\s*:\s*(?P<value>"(?:[^"\\]|\\.){0,4000}")'
)


def _tool_input(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The tool's input; from a clipped JSON string, at least its path or command.

    Constraint: the hook keeps metadata small, so a large input (a Write of a long
    file) arrives as a JSON text cut short, which no longer parses.
    """
    value = meta.get("tool_input")
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str) or not value.startswith("{"):
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping):
        return parsed
    fields: dict[str, Any] = {}
    for m in _INPUT_FIELD.finditer(value[:_MAX_TEXT]):
        try:
            fields.setdefault(m.group("key"), json.loads(m.group("value")))
        except ValueError:
            continue
    return fields


_PATCH_FILE = re.compile(r"\*\*\* (?:Update|Add|Delete) File:\s*(\S+)")
# Files a shell command writes: Codex patches and edits through the shell.
_SHELL_REDIRECT = re.compile(r"(?<![0-9&>])>>?\s*(?P<path>(?!/dev/)[\w.][\w./-]{0,200})")
_SHELL_INPLACE = re.compile(
    r"^(?:sed|perl)\s+(?:-\w+\s+)*-[a-z]*i[a-z]*\b.*?\s(?P<path>[\w./-]+)\s*$"
)


def _shell_writes(command: str) -> list[str]:
    """The files a shell command edits (apply_patch, redirection, sed -i), if any."""
    head = command[:_MAX_TEXT]
    if "*** Begin Patch" in head or head.startswith("apply_patch"):
        return _PATCH_FILE.findall(head)
    first = head.split("\n", 1)[0]
    out: list[str] = []
    for part in _split_command(first):
        if re.match(r"^(?:cat|echo|printf|tee)\b", part):
            out.extend(m.group("path") for m in _SHELL_REDIRECT.finditer(part))
            if part.startswith("tee "):
                out.extend(w for w in part.split()[1:] if not w.startswith("-"))
        m = _SHELL_INPLACE.match(part)
        if m:
            out.append(m.group("path"))
    return out


def _make_action(e: _Event) -> _Action:
    tool = str(e.meta.get("tool_name") or "").strip()
    low = tool.lower()
    ti = _tool_input(e.meta)
    sub = str(ti.get("command") or "") if low == "str_replace_based_edit_tool" else ""
    # A call's content is the hook's one-line description ("Bash: pytest -q"): the last
    # resort for the command or path. A result's content is output, never that.
    described = ""
    if e.type == "tool_call" and tool and e.content.startswith(f"{tool}: "):
        described = e.content[len(tool) + 2 :].split("\n", 1)[0].strip()
    if low in _SHELL_TOOLS or (low not in _EDIT_TOOLS and "command" in ti and not tool):
        raw = ti.get("command") if "command" in ti else ti.get("cmd")
        if isinstance(raw, list):
            raw = " ".join(str(x) for x in raw)
        command = _SHELL_WRAPPER.sub("", str(raw or described).strip())
        if command[:1] in "'\"" and command[-1:] == command[:1]:
            command = command[1:-1]
        written = _shell_writes(command)
        if written:
            roots = (e.project, e.cwd)
            rel = tuple(dict.fromkeys(_relative(f, *roots) for f in written))
            return _Action(e, "edit", command=command, files=rel, stage="edit")
        parts = _split_command(command)
        stages = [s for s in (_stage(p) for p in parts) if s]
        main = next((s for s in stages if s in _VERIFY_STAGES), stages[-1] if stages else None)
        key = main if main in _VERIFY_STAGES and main != "run" else " ".join(command.split()[:2])
        return _Action(e, "shell", command=command, stage=main, key=key)
    if low in _EDIT_TOOLS and sub.lower() not in _READ_SUBCOMMANDS:
        files: list[str] = []
        for k in ("file_path", "path", "notebook_path", "filename", "target_file"):
            if isinstance(ti.get(k), str):
                files.append(ti[k])
                break
        else:
            if described and "*** " not in described:
                files.append(described)
        changes = ti.get("changes")
        if isinstance(changes, Mapping):
            files.extend(str(k) for k in changes)
        for k in ("input", "patch", "content", "command"):
            if isinstance(ti.get(k), str) and "*** " in ti[k]:
                files.extend(_PATCH_FILE.findall(ti[k][:_MAX_TEXT]))
        new_parts = [str(ti.get(k) or "") for k in ("new_string", "content", "new_str")]
        edits = ti.get("edits")
        if isinstance(edits, list):
            new_parts.extend(
                str(x.get("new_string") or "") for x in edits if isinstance(x, Mapping)
            )
        roots = (e.project, e.cwd)
        rel = tuple(dict.fromkeys(_relative(f, *roots) for f in files if f))
        return _Action(e, "edit", files=rel, new_text="\n".join(new_parts)[:4_000], stage="edit")
    return _Action(e, "other")


_EXIT_IN_TEXT = re.compile(
    r"(?:exit(?:ed)?\s+(?:with\s+)?(?:non-zero\s+)?(?:code|status)(?:\s+code)?|exit_code\s*[=:]|"
    r"returned\s+non-zero\s+exit\s+status)\s*(\d{1,3})",
    re.IGNORECASE,
)
_FAIL_SIGNS = re.compile(
    r"Traceback \(most recent call last\)|^(?:E\s+)?[A-Za-z_][\w.]*(?:Error|Exception):|"
    r"^FAILED\b|^FAIL\b|\b\d+ failed\b|\bnpm ERR!|^error(?:\[E\d+\])?:|\berror TS\d+|"
    r"panicked at|BUILD FAILED|\bCommand failed\b|^fatal:|\bFAILURES?\b|--- FAIL:|"
    r"\bTests?:\s+\d+ failed|^\s*\d+ errors?\b|\bSyntaxError\b|\bFound [1-9]\d* errors?\b|"
    r"\btest result: FAILED\b",
    re.MULTILINE,
)
_PASS_SIGNS = re.compile(
    r"\b\d+ passed\b|^OK\b|\bAll (?:\d+ )?tests? passed\b|\bBuild succeeded\b|"
    r"\bSuccess(?:fully)?\b|\b0 (?:errors|failures|failed)\b|^ok\s+\S+|"
    r"\bFound 0 errors\b|\bAll checks passed\b|\bno issues found\b|\bSuccess: no issues\b",
    re.MULTILINE | re.IGNORECASE,
)


def _scan_region(text: str) -> str:
    if len(text) <= _MAX_RESULT_HEAD + _MAX_RESULT_TAIL:
        return text
    return text[:_MAX_RESULT_HEAD] + "\n" + text[-_MAX_RESULT_TAIL:]


def _outcome(result: _Event, action: _Action) -> bool | None:
    """Did the command succeed? Exit code first, then what its output says."""
    meta = result.meta
    if meta.get("interrupted") is True or meta.get("is_interrupt") is True:
        return None  # the user stopped it: neither a failure nor a pass
    code = meta.get("exit_code", meta.get("exitCode", meta.get("returncode")))
    if isinstance(code, bool):
        code = None
    if isinstance(code, int):
        return code == 0
    if meta.get("is_error") is True or meta.get("success") is False:
        return False
    text = _scan_region(result.content)
    m = _EXIT_IN_TEXT.search(text)
    if m:
        return m.group(1) == "0"
    if _FAIL_SIGNS.search(text):
        return False
    if meta.get("hook_event_name") == "PostToolUse":
        # Claude Code fires PostToolUse only for a tool call that succeeded (a failed one
        # fires PostToolUseFailure), so with no sign of failure this one passed.
        return True
    if action.stage in _VERIFY_STAGES and _PASS_SIGNS.search(text):
        return True
    return None


@dataclass(slots=True)
class _Failure:
    action: _Action
    summary: str  # "KeyError: 'customer_id'"
    name: str  # "KeyError"
    location: str  # "orders/service.py:42 (in total)" or a test id
    test: str  # the failing test, when the runner names it
    ids: list[int]


# A Python traceback frame, and pytest's short form of one ("shop/a.py:88: in total").
_FRAME = re.compile(
    r'File "(?P<path>[^"]{1,300})", line (?P<line>\d+), in (?P<func>[\w<>.]+)|'
    r"^(?P<path2>[\w./-]{1,300}\.py):(?P<line2>\d+): in (?P<func2>[\w<>.]+)"
)
_EXC_LINE = re.compile(
    r"^(?:E\s+)?(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt|Warning))"
    r"(?::\s*(?P<msg>.{0,200}))?$"
)
# tsc "src/a.ts(14,7): error TS2322: ...", gcc/rustc/eslint "src/a.c:3:5: error: ...".
_COMPILER_ERR = re.compile(
    r"^(?P<path>[\w./-]{1,200})(?:\((?P<line>\d+),\d+\)|:(?P<line2>\d+):\d+):?\s+"
    r"(?:(?:error|fatal error)\s*(?P<code>[A-Z]{1,4}\d{2,6})?:?|(?P<lint>[A-Z]{1,4}\d{2,6})\b)"
    r"\s+(?P<msg>.{1,200})$"
)
_PANIC = re.compile(r"panicked at (?P<path>[\w./-]{1,200}):(?P<line>\d+)(?::\d+)?:?\s*(?P<msg>.*)$")
_FAILED_TEST = re.compile(r"^FAILED\s+(?P<test>\S+)(?:\s+-\s+(?P<why>.{0,200}))?$")
_GENERIC_ERR = re.compile(
    r"^(?:error(?:\[E\d+\])?:|npm ERR!|fatal:|.*\berror TS\d+:|--- FAIL:|FAIL\s|.*panicked at)",
    re.IGNORECASE,
)


def _failure(action: _Action, result: _Event, pos: int) -> _Failure:
    """What broke: the exception (a traceback's last line), the failing test, the place."""
    text = _scan_region(result.content)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()][-400:]
    summary = name = location = test = ""
    roots = (result.project, result.cwd, action.call.project, action.call.cwd)
    for ln in lines:
        m = _FAILED_TEST.match(ln)
        if m:
            location = location or m.group("test")
            test = test or m.group("test")
            why = (m.group("why") or "").strip()
            if why and not summary:
                summary = why
                name = why.split(":", 1)[0].strip()
    frames: list[tuple[str, str, str]] = []
    for ln in lines:
        fm = _FRAME.search(ln)
        if fm:
            path = fm.group("path") or fm.group("path2")
            if "site-packages" not in path and "/lib/python" not in path:
                frames.append(
                    (
                        path,
                        fm.group("line") or fm.group("line2"),
                        fm.group("func") or fm.group("func2"),
                    )
                )
    # The deepest frame in the project's own code (not the test calling it) is where
    # the error was raised; the failing test is kept apart.
    code_frames = [f for f in frames if not re.search(r"(?:^|/)tests?/|(?:^|/)test_", f[0])]
    chosen = code_frames[-1] if code_frames else (frames[-1] if frames else None)
    if chosen is not None:
        test = location
        location = f"{_relative(chosen[0], *roots)}:{chosen[1]} (in {chosen[2]})"
    if not summary:
        for i, ln in enumerate(lines):
            m = _PANIC.search(ln[:300])
            if m:
                msg = m.group("msg").strip() or (lines[i + 1][:200] if i + 1 < len(lines) else "")
                name = "panic"
                summary = f"panic: {msg}" if msg else "panic"
                location = location or f"{_relative(m.group('path'), *roots)}:{m.group('line')}"
                break
    if not summary:
        for ln in lines:
            m = _COMPILER_ERR.match(ln[:300])
            if m:
                name = m.group("code") or m.group("lint") or "error"
                summary = f"{name}: {m.group('msg').strip()}"
                location = (
                    location
                    or f"{_relative(m.group('path'), *roots)}:{m.group('line') or m.group('line2')}"
                )
                break
    if not summary:
        for ln in reversed(lines):
            m = _EXC_LINE.match(ln[:300])
            if m:
                name = m.group("name")
                msg = (m.group("msg") or "").strip()
                summary = f"{name}: {msg}" if msg else name
                break
    if not summary:
        for ln in lines:
            if _GENERIC_ERR.match(ln[:300]):
                summary = ln[:200]
                break
    if not summary:
        counts = re.search(r"\b\d+ failed\b[^\n]{0,60}", text)
        summary = counts.group(0) if counts else ""
    return _Failure(action, _clip(summary, 200), name, location, test, [action.call.pos, pos])


# ------------------------------------------------------------------- drafts


@dataclass(slots=True)
class _Draft:
    kind: CandidateKind
    title: str
    text: str
    type: MemoryType
    confidence: float
    source: MemorySource
    ids: list[int]
    anchor: int
    trigger: bool = False
    rule: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    capped: bool = True  # counts against max_per_turn
    turn: int = 0
    seq: int = 0  # creation order: sentence order within one event


@dataclass(slots=True)
class _Proposal:
    statement: str  # "use Redis Streams for the job queue"
    reason: str
    sentence: str
    pos: int


@dataclass(slots=True)
class _PendingFix:
    failures: list[_Failure]
    changes: list[_Action]
    verify: _Action | None
    notes: list[tuple[int, str]]  # explanation sentences seen before the passing run


@dataclass(slots=True)
class _Digest:
    """What the handoff summary needs, accumulated over a session's windows."""

    session: str
    project: str | None = None
    agent: str = "generic"
    goal: str = ""
    goal_id: str = ""
    files: dict[str, None] = field(default_factory=dict)
    commands: dict[str, bool | None] = field(default_factory=dict)
    edits: int = 0
    verified: bool = False
    verify_id: str = ""
    outcome: str = ""
    outcome_id: str = ""
    fixes: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    opens: list[str] = field(default_factory=list)
    first_ts: datetime | None = None
    seen: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Session:
    digest: _Digest
    tail: list[Mapping[str, Any]] = field(default_factory=list)


# ----------------------------------------------------------- statement rules

_QUESTION_END = re.compile(r"\?\s*[)\"']*$")
_EXPLICIT = re.compile(
    r"^(?:(?:please\s+)?remember(?:\s+that)?|note(?:\s+that)?|"
    r"keep\s+in\s+mind(?:\s+that)?|bear\s+in\s+mind(?:\s+that)?|for\s+future\s+reference|"
    r"for\s+the\s+record|fyi|important)\s*[:,—–-]?\s+(?P<body>.{3,})$",
    re.IGNORECASE | re.DOTALL,
)
_CORR_NO = re.compile(
    r"^(?:no|nope|nah|wrong|incorrect|not\s+quite|not\s+really|that's\s+wrong)\b\s*[,.!:;—–-]+\s*"
    r"(?P<body>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_CORR_WRONG = re.compile(
    r"^(?:(?:that|this|it)(?:'s|\s+is|\s+was)|you(?:'re|\s+are|\s+were|\s+got\s+(?:that|it|this)))"
    r"\s+(?:\w+\s+)?(?:wrong|incorrect|not\s+(?:right|correct|true|accurate|quite\s+right)|"
    r"mistaken|a\s+mistake)\b\s*[,.!:;—–-]*\s*(?P<body>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_CORR_ACTUALLY = re.compile(
    r"^(?:(?:no|well|hmm|oh|wait)\s*[,.!]?\s+)?actually\b\s*[,:]?\s+(?P<body>.{3,})$",
    re.IGNORECASE | re.DOTALL,
)
_CORR_NOT_HOW = re.compile(
    r"^(?:that's|that\s+is|this\s+is|that\s+isn't|this\s+isn't)\s+(?:not\s+)?how\s+"
    r"(?P<what>we\b[^.:;,]{0,80}?|it\s+works|things\s+work\s+here|this\s+works)"
    r"\s*(?:[.:;,—–-]+\s*(?P<body>.+)|[.!]*)$",
    re.IGNORECASE | re.DOTALL,
)
_CORR_DONT_DO = re.compile(
    r"^(?:don't|do\s+not|dont|never)\s+(?P<bad>[^,;.—–]{2,120}?)\s*[,;—–-]+\s*"
    r"(?:instead\s*,?\s*)?(?:(?:please|just|always)\s+)?"
    r"(?P<good>(?:use|do|run|call|write|put|keep|add|make|go|stick|prefer|try|import|"
    r"create|set|return|raise|pass|ask|leave|rename|store)\b.{2,200})$",
    re.IGNORECASE | re.DOTALL,
)
_X_NOT_Y = re.compile(
    r"^(?P<good>.{3,200}?)\s*,\s*(?:and\s+)?not\s+(?P<bad>[^,;.]{1,80}?)\s*[.!]?$",
    re.IGNORECASE | re.DOTALL,
)
_PRONOUN_BODY = re.compile(
    r"^(?:it(?:'s|\s+is|\s+should\s+be|\s+was)|that(?:'s|\s+is|\s+should\s+be)|its|"
    r"should\s+be|it\s+uses|we\s+use)\s+(?P<new>.{1,120}?)[.!]?$",
    re.IGNORECASE | re.DOTALL,
)
_CLAUSE_END = re.compile(r"[;:]|,\s+(?:so|and|but|which|then|because)\b|\s+-\s+|\.\s")
_ANAPHORIC_DONT = re.compile(
    r"^(?:don't|do\s+not|never)\s+(?:do|run|try)\s+(?:that|this|it)\b(?:\s+(?:again|anymore|ever))?"
    r"\s*[.!]?$",
    re.IGNORECASE,
)

_DEC_VERBS = (
    r"go\s+with|use|stick\s+with|keep\s+using|switch\s+to|move\s+to|migrate\s+to|adopt|"
    r"pick|choose|settle\s+on|standardi[sz]e\s+on|drop|replace|store|deploy\s+(?:to|on)|"
    r"host\s+(?:on|in)|build\s+(?:it|this)\s+(?:with|on|in)|write\s+(?:it|this)\s+in"
)
_DEC_LETS = re.compile(
    r"\b(?:let's|let\s+us|lets|we'll|we\s+will|we're\s+going\s+to|we\s+are\s+going\s+to|"
    r"we\s+should|i'll|i\s+will|i'm\s+going\s+to)\s+(?:just\s+|definitely\s+|now\s+|instead\s+)?"
    r"(?P<verb>" + _DEC_VERBS + r")\s+(?P<obj>.{2,200})$",
    re.IGNORECASE | re.DOTALL,
)
_DEC_DECIDED = re.compile(
    r"\b(?:we|i|the\s+team)\s+(?:have\s+|'ve\s+|just\s+|finally\s+)*"
    r"(?P<verb>decided|agreed|chose|opted|settled)\s+(?P<prep>to|on|that|for|against)?\s*"
    r"(?P<obj>.{2,200})$",
    re.IGNORECASE | re.DOTALL,
)
_DEC_LABEL = re.compile(
    r"^(?:decision|decided|verdict|conclusion)\s*[:—–-]\s*(?P<obj>.{3,200})$",
    re.IGNORECASE | re.DOTALL,
)
_DEC_INSTEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yeah|so)\s*[,.]?\s+)?(?:let's\s+|we\s+should\s+|we'll\s+)?"
    r"(?P<verb>use|go\s+with|switch\s+to|pick|store|write)\s+(?P<new>.{1,100}?)\s+"
    r"(?:instead\s+of|rather\s+than)\s+(?P<old>.{1,100}?)\s*[.!]?$",
    re.IGNORECASE | re.DOTALL,
)
_DEC_GO_WITH = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yeah|yep|sure|alright|great|perfect|fine|good)\s*[,.!]?\s+)*"
    r"(?:let's\s+|we'll\s+)?(?:go\s+(?:with|for)|pick|take|choose)\s+(?P<obj>.{1,200})$",
    re.IGNORECASE | re.DOTALL,
)
_OPTION_REF = re.compile(
    r"\b(?:option|approach|choice|alternative|variant|plan)\s+(?P<ref>[a-z0-9]{1,2}|one|two|three|"
    r"four)\b|\bthe\s+(?P<ord>first|second|third|fourth|last|former|latter)(?:\s+(?:one|option|"
    r"approach|choice))?\b|^(?P<bare>[A-D1-4])\b",
    re.IGNORECASE,
)
_ANAPHORA = re.compile(
    r"^(?:it|that|this|them|those|these|one|your\s+(?:suggestion|proposal|approach|plan|"
    r"recommendation|idea)|what\s+you\s+(?:said|suggested|proposed))\b",
    re.IGNORECASE,
)
_OPTION_LINE = re.compile(
    r"^(?:option\s+)?(?P<label>[A-D]|\d{1,2})\s*[.):-]\s+(?P<text>.{3,200})$", re.IGNORECASE
)
_REASON = re.compile(
    r"\s*[,;]?\s+\b(?:because|since|as|so\s+that|given\s+that)\b\s+(?P<why>.+)$", re.I
)

_PROPOSAL = re.compile(
    r"\b(?:i(?:'ll|\s+will)|i'd|i\s+would|i\s+suggest|i\s+recommend|i\s+propose|"
    r"my\s+recommendation\s+is\s+to|we\s+could|we\s+should|let's|i'm\s+going\s+to|i\s+plan\s+to|"
    r"i\s+(?:'d|would)\s+(?:suggest|recommend))\s+(?:\w+\s+)?"
    r"(?P<verb>go\s+with|use|switch\s+to|adopt|pick|choose|stick\s+with|store|replace|move\s+to|"
    r"migrate\s+to)\s+(?P<obj>.{2,200})$",
    re.IGNORECASE | re.DOTALL,
)
_TENTATIVE = re.compile(
    r"\b(?:recommend|suggest|propose|i'd|i\s+would|we\s+could|we\s+should|let's|"
    r"my\s+recommendation|shall\s+i|should\s+i)\b",
    re.IGNORECASE,
)
_RECOMMEND = re.compile(
    r"\bi(?:'d|\s+would)?\s+(?:recommend|suggest|propose)\s+(?P<obj>.{2,200})$", re.I | re.S
)

_MUST = re.compile(
    r"\b(?:must|mustn't|must\s+not|shall\s+not|cannot|can\s+not|may\s+not|"
    r"(?:is|are)\s+(?:not\s+)?(?:allowed|permitted|forbidden|prohibited|required|mandatory))\b",
    re.IGNORECASE,
)
_MUST_SPECULATE = re.compile(
    r"\bmust\s+(?:be\s+(?:a|an|the|something|coming|related|caused|because|it|that|why|"
    r"kidding|joking|\w+ing)|have\s+(?:been|\w+ed|\w+en))\b",
    re.IGNORECASE,
)
_NEED_DURABLE = re.compile(
    r"\b(?:we|it|this|the\s+\w+|everything|all\s+\w+|our\s+\w+)\s+(?:still\s+|always\s+)?"
    r"(?:need|needs|have|has)\s+to\s+(?:support|run\s+on|work\s+(?:on|with|in|offline|without)|"
    r"stay|remain|keep|be\s+(?:compatible|backwards?[- ]compatible|able|deployable)|target|"
    r"comply|handle)\b",
    re.IGNORECASE,
)
_NEVER = re.compile(
    r"^(?:never|don't\s+ever|do\s+not\s+ever|never\s+ever)\s+(?P<rest>.{2,200})$", re.I | re.S
)
_DONT = re.compile(r"^(?:don't|do\s+not|dont|avoid)\s+(?P<rest>.{2,200})$", re.I | re.S)
_DONT_CHAT = re.compile(
    r"^(?:worry|bother|forget|mind|know|think|understand|see|get|care|remember|need|want|like|"
    r"have|stop|hesitate|rush|panic|be\s+(?:sorry|afraid|shy)|do\s+(?:that|this|it)\b|"
    r"overthink|apologi[sz]e|ask\b)",
    re.IGNORECASE,
)
_DEICTIC = re.compile(r"\b(?:this|that|it|these|those|here|there|him|her)\b", re.IGNORECASE)
_LOCAL_SCOPE = re.compile(
    r"\b(?:here|this\s+(?:one|line|function|file|loop|case|test|endpoint))\b", re.I
)
_ONLY = re.compile(
    r"^only\s+(?:ever\s+)?(?:use|run|deploy|push|commit|target|install|write|import|call)\b",
    re.I,
)
_WE_NEVER = re.compile(
    r"^(?:we|our\s+team|the\s+team)\s+(?P<adv>never|don't|do\s+not|always|only)\s+"
    r"(?P<rest>.{2,200})$",
    re.IGNORECASE | re.DOTALL,
)
_PREF_I = re.compile(
    r"^(?P<subj>i|we)(?:'d|\s+would)?\s+(?:really\s+|strongly\s+|generally\s+|usually\s+|"
    r"much\s+|always\s+)?(?P<verb>prefer|rather|like|love|hate|dislike|don't\s+like|"
    r"do\s+not\s+like|don't\s+want|do\s+not\s+want|want|never\s+want)\s+(?P<rest>.{2,200})$",
    re.IGNORECASE | re.DOTALL,
)
_PRAISE = re.compile(
    r"^(?:it|that|this|the\s+way|your|how\s+you|what\s+you)\b|^(?:it|that|this)\s", re.I
)
_TASK_WANT = re.compile(r"^(?:you\s+to|to|a|an|some|the\s+ability)\b", re.IGNORECASE)
_ALWAYS = re.compile(r"^always\s+(?P<rest>.{2,200})$", re.IGNORECASE | re.DOTALL)
_PREFER_IMP = re.compile(r"^prefer\s+(?P<rest>.{2,200})$", re.IGNORECASE | re.DOTALL)
_STYLE_RULE = re.compile(
    r"^(?:keep|make|write|name|format|indent|put|use|sort|spell|capitali[sz]e|end|start)\s+"
    r"(?:all\s+|the\s+|our\s+|your\s+|every\s+|each\s+)?(?:[\w'-]+\s+){0,3}[\w'-]+s\b"
    r"\s+(?:short|brief|concise|small|simple|under\s+\d+|below\s+\d+|at\s+most\s+\d+|"
    r"lowercase|lower-case|uppercase|in\s+\w+|consistent|sorted|alphabetical|"
    r"snake_case|camelcase|kebab-case|plain|descriptive|with\s+\w+|without\s+\w+|"
    r"as\s+\w+|to\s+(?:one|a\s+single|\d+))\b",
    re.IGNORECASE,
)
_IMPERATIVE_RULE = re.compile(
    r"^(?:keep|make|write|name|format|indent|put|use|sort|spell|capitali[sz]e|add|run|"
    r"include|avoid|prefer|stick\s+to|target|pin|commit|squash|rebase|sign)\b",
    re.IGNORECASE,
)
_RULE_START = re.compile(
    r"^(?:(?:please\s+)?(?:always|never|prefer|only)\b|" + _IMPERATIVE_RULE.pattern[1:] + ")",
    re.IGNORECASE,
)
_PROJECT_FACT = re.compile(
    r"^(?:we|our\s+(?:team|app|project|service|backend|frontend|api|stack|repo|codebase|ci|"
    r"servers?|database|db)|this\s+(?:project|repo|app|service|codebase)|"
    r"the\s+(?:project|repo|app|codebase|production\s+\w+|staging\s+\w+))\s+"
    r"(?:use|uses|run|runs|deploy|deploys|host|hosts|target|targets|support|supports|"
    r"rely\s+on|relies\s+on|depend\s+on|depends\s+on|are\s+on|is\s+on|live\s+in|lives\s+in|"
    r"release|releases|ship|ships)\b",
    re.IGNORECASE,
)
_FACT_NOISE = re.compile(
    r"\b(?:but|fails?|failing|broken|error|crash|bug|issue|problem|why|wrong|slow|weird)\b", re.I
)
_FACT_TAIL = re.compile(
    r"[,;]\s+(?:and\s+|so\s+)?(?:i|we|you)(?:'ll|'d|\s+will|\s+can|\s+should)\b", re.I
)
_Q_DECIDE = re.compile(
    r"\b(?:still\s+)?(?:need|needs|have|has)\s+to\s+(?:decide|figure\s+out|work\s+out|settle|"
    r"determine|agree\s+on|choose|confirm|find\s+out|pick)\b",
    re.IGNORECASE,
)
_Q_LABEL = re.compile(
    r"^(?:todo|to-do|fixme|open\s+question|open\s+issue|tbd|follow[- ]up|unresolved|"
    r"question\s+for\s+later|next\s+step)\s*[:—–-]\s*(?P<rest>.{3,300})$",
    re.IGNORECASE | re.DOTALL,
)
_Q_UNSURE = re.compile(
    r"\b(?:not\s+(?:yet\s+)?(?:sure|decided|clear)|unsure|unclear|undecided|"
    r"haven't\s+(?:yet\s+)?decided|open\s+question)\s+(?:yet\s+)?(?:whether|if|how|which|what|"
    r"when|who)\b",
    re.IGNORECASE,
)
_Q_LATER = re.compile(
    r"\b(?:left|leaving|leave)\s+(?:that|this|it)?\s*(?:as\s+a\s+)?(?:todo|for\s+later|"
    r"for\s+a\s+follow[- ]up)\b|\b(?:still|yet)\s+(?:needs?|has|have)\s+to\s+be\s+"
    r"(?:handled|decided|implemented|done|fixed|addressed)\b|\b(?:is|are)\s+not\s+"
    r"(?:yet\s+)?(?:handled|implemented|covered|addressed)\s+yet\b",
    re.IGNORECASE,
)
_R_LABEL = re.compile(
    r"^(?:risk|warning|caveat|gotcha|known\s+issue|limitation|heads[- ]up|beware)\s*[:—–-]\s*"
    r"(?P<rest>.{3,300})$",
    re.IGNORECASE | re.DOTALL,
)
_R_BREAK = re.compile(
    r"\b(?:will|would|could|might|may|can)\s+(?:\w+\s+)?(?:break|fail|crash|corrupt|leak|"
    r"deadlock|hang|time\s+out|overflow|lose\s+data|double[- ]charge|go\s+out\s+of\s+sync)\b"
    r"[^.]{0,120}?\b(?:if|when|once|unless|under|whenever)\b",
    re.IGNORECASE,
)
_R_TERMS = re.compile(
    r"\b(?:race\s+condition|not\s+thread[- ]safe|data\s+loss|security\s+(?:risk|hole|issue|"
    r"vulnerability)|breaking\s+change|single\s+point\s+of\s+failure|won't\s+scale|"
    r"doesn't\s+scale)\b",
    re.IGNORECASE,
)
_PAST_NARRATION = re.compile(r"\b(?:was|were|did|had|failed|broke|crashed|happened)\b", re.I)
_PROC_TO = re.compile(
    r"^(?:in\s+order\s+)?to\s+(?P<goal>[a-z][^,:;]{2,100}?)\s*[,:]\s*(?P<steps>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_PROC_RUN_TO = re.compile(
    r"(?:^|\b(?:you\s+can|you\s+need\s+to|you\s+have\s+to|you\s+should|just|simply|always)\s+)"
    r"(?P<verb>run|use|execute|call|invoke)\s+(?P<cmd>`[^`]{1,200}`(?:\s+(?:and|then)\s+"
    r"`[^`]{1,200}`)?)\s+(?:to|in\s+order\s+to)\s+(?P<goal>[^.;]{3,120})",
    re.IGNORECASE,
)
_STEP_START = re.compile(
    r"^(?:first\s*,?\s*|then\s*,?\s*|just\s+)?(?:run|use|execute|call|set|add|install|pass|"
    r"export|start|stop|restart|open|edit|create|delete|remove|update|bump|tag|push|commit|"
    r"build|deploy|invoke|regenerate|generate|copy|move|rename|make|type|enter|cd|source|"
    r"activate|apply|migrate|restore|clear|`)",
    re.IGNORECASE,
)
_CAUSE = re.compile(
    r"\b(?:root\s+cause|the\s+(?:cause|problem|issue|bug|error|failure|crash|culprit)\s+(?:was|is|"
    r"came|comes|happens|happened)|(?:was|were|is|are)\s+caused\s+by|caused\s+by|because|"
    r"due\s+to|turned\s+out|the\s+reason)\b",
    re.IGNORECASE,
)
_FIX_VERB = re.compile(
    r"\b(?:fix(?:ed|es)?|the\s+fix|i(?:'ve)?\s+(?:changed|updated|added|replaced|removed|"
    r"moved|renamed|patched|made|switched|wrapped|guarded|reverted|pinned)|now\s+(?:passes|"
    r"pass|works|returns|handles|uses)|all\s+(?:\d+\s+)?tests?\s+(?:now\s+)?pass)\b|"
    r"^(?:removed|changed|updated|added|replaced|moved|renamed|patched|switched|wrapped|"
    r"guarded|reverted|pinned|made)\b|\bi\s+now\s+\w+",
    re.IGNORECASE,
)


def _explicit_type(text: str) -> MemoryType:
    """The classifier's type when it is sure; otherwise semantic (a stated fact)."""
    result = classify(text)
    if result.type is not MemoryType.SEMANTIC and result.confidence < 0.6:
        return MemoryType.SEMANTIC
    return result.type


def _reason_split(obj: str) -> tuple[str, str]:
    m = _REASON.search(obj)
    if not m:
        return obj.strip().rstrip(".!"), ""
    return obj[: m.start()].strip().rstrip(".!,"), m.group("why").strip().rstrip(".!")


def _decision_statement(verb: str, obj: str) -> str:
    verb = _WS.sub(" ", verb.lower())
    if verb in ("go with", "use", "pick", "choose", "settle on", "go for", "take"):
        return f"use {obj}"
    if verb in ("stick with", "keep using"):
        return f"keep using {obj}"
    if verb in ("switch to", "move to", "migrate to"):
        return f"switch to {obj}"
    if verb.startswith("standardi"):
        return f"standardise on {obj}"
    return f"{verb} {obj}"


# ----------------------------------------------------------------- the pass


class _Pass:
    """One left-to-right pass over a session's events (carried tail + new window)."""

    def __init__(
        self, options: ExtractOptions, events: list[_Event], first_new: int, digest: _Digest
    ) -> None:
        self.opts = options
        self.ev = events
        self.first_new = first_new
        self.digest = digest
        self.drafts: list[_Draft] = []
        self.turn = 0
        self.turn_of: dict[int, int] = {}
        self.actions: list[_Action] = []
        self.action_at: dict[int, _Action] = {}  # by the position of its call or result
        self.by_use_id: dict[str, _Action] = {}
        self.unmatched: deque[_Action] = deque(maxlen=16)
        # Recent agent output (responses, written text, commands), for corrections.
        self.agent_texts: deque[tuple[int, str]] = deque(maxlen=8)
        self.last_action: _Action | None = None
        self.proposals: list[_Proposal] = []
        self.options: dict[str, tuple[str, int]] = {}
        self.option_order: list[str] = []
        self.open: list[_Failure] = []
        self.changes: list[_Action] = []
        self.notes: list[tuple[int, str]] = []
        self.pending: _PendingFix | None = None
        self.last_prompt = -1
        self.last_response = -1

    # ------------------------------------------------------------- driving

    def run(self, final: bool) -> None:
        handlers = {
            "prompt": self._prompt,
            "response": self._response,
            "tool_call": self._tool_call,
            "tool_result": self._tool_result,
            "config_change": self._config,
            "explicit": self._explicit,
        }
        for e in self.ev:
            self.turn_of[e.pos] = self.turn
            handler = handlers.get(e.type)
            if handler is not None:
                handler(e)
            if e.pos >= self.first_new:
                self._digest_event(e)
        if self.pending is not None and final:
            # Anchored just past the last event, so that it counts as new even when
            # the session is finished with no new events (Extractor.finish).
            self._emit_fix(self.pending, None, len(self.ev))
            self.pending = None
        self._workflows()

    def tail_start(self) -> int:
        """Where the next window's carried context must begin."""
        starts = [self.last_prompt if self.last_prompt >= 0 else len(self.ev)]
        if self.open:
            starts.append(min(f.ids[0] for f in self.open))
        if self.pending is not None:
            starts.append(min(f.ids[0] for f in self.pending.failures))
        return max(min(starts), len(self.ev) - _MAX_TAIL_EVENTS)

    def _add(self, draft: _Draft) -> None:
        draft.turn = self.turn_of.get(draft.anchor, self.turn)
        draft.seq = len(self.drafts)
        self.drafts.append(draft)

    # ---------------------------------------------------------- user turns

    def _prompt(self, e: _Event) -> None:
        if self.pending is not None:
            # The turn that fixed the bug ended without an explanation.
            self._emit_fix(self.pending, None, e.pos)
            self.pending = None
        self.turn += 1
        self.turn_of[e.pos] = self.turn
        self.last_prompt = e.pos
        text = e.content
        before = len(self.drafts)
        if not is_chitchat(text):
            self._user_statements(e)
        if self.proposals and _is_affirmation(text):
            own = [d for d in self.drafts[before:] if d.kind is CandidateKind.DECISION]
            if own:
                # "Sounds good, let's go with PostgreSQL": the user's own words win, and
                # the agent's reason for the proposal is kept.
                best = self.proposals[-1]
                if best.reason and ", because " not in own[0].text:
                    own[0].text = _bound_text(own[0].text.rstrip(".") + f", because {best.reason}.")
                own[0].ids = sorted({*own[0].ids, best.pos})
            else:
                self._confirm(e)
        self.proposals = []

    def _confirm(self, e: _Event) -> None:
        best = self.proposals[-1]
        statement = best.statement
        body = f"Decision: {statement}"
        if best.reason:
            body += f", because {best.reason}"
        text = _finish(body) + " (Proposed by the agent and confirmed by the user.)"
        self._add(
            _Draft(
                CandidateKind.DECISION,
                _title("Decision", statement),
                _bound_text(text),
                MemoryType.SEMANTIC,
                _C_DECISION_CONFIRMED,
                MemorySource.AGENT_RESPONSE,
                [best.pos, e.pos],
                e.pos,
                rule="decision-confirmed",
            )
        )

    def _user_statements(self, e: _Event) -> None:
        sentences = _segment(e.content)
        consumed: set[int] = set()
        for i, s in enumerate(sentences):
            if i in consumed:
                continue
            text = s.text.strip()
            if len(text) > _MAX_SENTENCE or _QUESTION_END.search(text):
                continue
            if _SECRET_STATEMENT.search(text) or _content_words(text) < 2:
                continue
            nxt = sentences[i + 1].text.strip() if i + 1 < len(sentences) else ""
            draft, used_next = self._user_sentence(e, text, nxt, s)
            if used_next:
                consumed.add(i + 1)
            if draft is not None:
                self._add(draft)

    def _user_sentence(
        self, e: _Event, text: str, nxt: str, s: _Sentence
    ) -> tuple[_Draft | None, bool]:
        triggers = trigger_phrases(text)
        core = _strip_lead(text)
        corr = self._correction(e, core, nxt)
        if corr is not None:
            corr[0].trigger = bool(triggers)
            return corr
        m = _EXPLICIT.match(core)
        if m:
            return self._explicit_statement(e, m.group("body"), triggers), False
        durable_lead = bool(_DURABLE_LEAD.match(core))
        core = _DURABLE_LEAD.sub("", core)
        core = _PLEASE.sub("", core)
        if durable_lead:
            core = _DURABLE_TAIL.sub("", core)
        for rule in (self._decision, self._constraint, self._preference):
            draft = rule(e, core, triggers, durable_lead)
            if draft is not None:
                return draft, False
        draft = self._open_item(e, core, MemorySource.CONVERSATION, user=True)
        if draft is None:
            draft = self._procedure(e, core, s, MemorySource.CONVERSATION, user=True)
        return draft, False

    def _explicit_statement(self, e: _Event, body: str, triggers: list[str]) -> _Draft | None:
        body = body.strip()
        if body.lower().startswith("to "):
            body = "always " + body[3:]  # "remember to X" -> "always X"
        body = _DURABLE_LEAD.sub("", _PLEASE.sub("", body))
        text = _finish(_third_person(body))
        if _content_words(text) < 2 or _SECRET_STATEMENT.search(text):
            return None
        return _Draft(
            CandidateKind.EXPLICIT,
            _title("Remember", _third_person(body)),
            _bound_text(text),
            _explicit_type(text),
            _C_EXPLICIT,
            MemorySource.EXPLICIT,
            [e.pos],
            e.pos,
            trigger=True,
            rule="explicit-trigger",
            meta={"trigger_phrases": triggers or ["remember"], "reinforce": True},
        )

    # ------------------------------------------------------------ corrections

    def _agent_mentions(self, phrase: str) -> int | None:
        """The position of the latest agent output that mentions ``phrase``."""
        needle = _WS.sub(" ", phrase.strip().lower().strip("`'\" "))
        needle = re.sub(r"^(?:the|a|an)\s+", "", needle)
        if len(needle) < 2:
            return None
        pattern = re.compile(r"(?<!\w)" + re.escape(needle) + r"(?!\w)")
        for pos, text in reversed(self.agent_texts):
            if pattern.search(text):
                return pos
        return None

    def _correction(self, e: _Event, core: str, nxt: str) -> tuple[_Draft, bool] | None:
        body = core
        marked = False
        used_next = False
        for _ in range(3):
            m = _CORR_NO.match(body) or _CORR_WRONG.match(body) or _CORR_ACTUALLY.match(body)
            if not m:
                break
            marked = True
            body = _strip_lead(m.group("body") or "")
        m_how = _CORR_NOT_HOW.match(body)
        if m_how:
            what = m_how.group("what").strip()
            rule_body = (m_how.group("body") or "").strip()
            if not rule_body and nxt:
                rule_body, used_next = nxt, True
            if not rule_body:
                return None
            text = _finish(f"How {what}: {_decapitalise(rule_body)}")
            return self._corr_draft(e, text, None, _C_CORRECTION, "correction-not-how"), used_next
        if marked and not body and nxt and self._has_agent_context():
            body, used_next = _strip_lead(nxt), True
        if marked and not body:
            return None
        m_dont = _CORR_DONT_DO.match(body)
        if m_dont:
            bad, good = m_dont.group("bad").strip(), m_dont.group("good").strip().rstrip(".!")
            good = re.sub(r"\s+instead\s*$", "", good, flags=re.I)
            bad_verb, _, bad_obj = bad.partition(" ")
            if good.lower().startswith(bad_verb.lower() + " ") and bad_obj:
                text = _finish(f"{good}, not {bad_obj}")
            else:
                text = _finish(f"Don't {bad}; {good} instead")
            hit = self._agent_mentions(bad_obj or bad)
            conf = _C_CORRECTION if hit is not None or marked else _C_CORRECTION_UNCONFIRMED
            return self._corr_draft(e, text, hit, conf, "correction-dont-do"), used_next
        if _ANAPHORIC_DONT.match(body) and self.last_action is not None:
            act = self.last_action
            what = (
                f"`{_display_command(act.command)}`"
                if act.command
                else ("editing " + ", ".join(act.files) if act.files else "that")
            )
            text = f"Don't do what the agent did here again: {what}."
            return self._corr_draft(
                e, text, act.call.pos, _C_CORRECTION_VAGUE, "correction-dont-repeat"
            ), used_next
        m_xy = _X_NOT_Y.match(body)
        if m_xy and _content_words(m_xy.group("good")) >= 1:
            good, bad = m_xy.group("good").strip(), m_xy.group("bad").strip()
            hit = self._agent_mentions(bad)
            resolved = self._resolve_pronoun(good) if _PRONOUN_BODY.match(good) else None
            text = _finish(f"{resolved or good}, not {bad}")
            if hit is None and not marked and _RULE_START.match(good):
                return None  # "use tabs, not spaces" as a plain preference: handled later
            conf = _C_CORRECTION if hit is not None or marked else _C_CORRECTION_UNCONFIRMED
            return self._corr_draft(e, text, hit, conf, "correction-x-not-y"), used_next
        if not marked:
            return None
        if not self._has_agent_context() and not _PRONOUN_BODY.match(body):
            # "Actually, let's use Redis" at the start of a session: a statement, not a fix.
            return None
        if _PRONOUN_BODY.match(body):
            resolved = self._resolve_pronoun(body)
            if resolved:
                return self._corr_draft(
                    e, resolved[0], resolved[1], _C_CORRECTION, "correction-substitute"
                ), used_next
            text = _finish(body)
            ctx = self._last_agent_sentence()
            if ctx:
                text += f" (Correcting the agent, who had said: “{_clip(ctx, 160)}”)"
            return self._corr_draft(
                e, text, None, _C_CORRECTION_VAGUE, "correction-vague"
            ), used_next
        text = _finish(_third_person(body))
        if _content_words(text) < 2:
            return None
        return self._corr_draft(e, text, None, _C_CORRECTION, "correction-restated"), used_next

    def _has_agent_context(self) -> bool:
        return bool(self.agent_texts)

    def _last_agent_sentence(self) -> str:
        if self.last_response < 0:
            return ""
        sentences = _segment(self.ev[self.last_response].content)
        return sentences[0].text if sentences else ""

    def _resolve_pronoun(self, body: str) -> tuple[str, int] | None:
        """ "it's port 5433" + the agent's "Postgres listens on port 5432" -> a rule.

        The first word of the new value names what was wrong ("port"); the agent's
        latest sentence using that word with a different value is rewritten.
        """
        m = _PRONOUN_BODY.match(body.strip())
        if not m:
            return None
        new = m.group("new").strip().rstrip(".!")
        words = new.split()
        if len(words) < 2 or self.last_response < 0:
            return None
        head, value = words[0], " ".join(words[1:])
        pattern = re.compile(r"\b" + re.escape(head) + r"\s+(\S+?)(?=[\s.,;:)]|$)", re.IGNORECASE)
        for pos, _ in reversed(self.agent_texts):
            ev = self.ev[pos] if pos < len(self.ev) else None
            if ev is None or ev.type != "response":
                continue
            for s in _segment(ev.content):
                hit = pattern.search(s.text)
                if hit and hit.group(1).lower() != value.lower():
                    old = hit.group(1)
                    fixed = s.text[: hit.start(1)] + value
                    # Keep only the clause that holds the value, not "..., so I'll ...".
                    rest = _CLAUSE_END.split(s.text[hit.end(1) :], maxsplit=1)[0]
                    fixed = (fixed + rest).strip().rstrip(".!,")
                    return _finish(f"{fixed} (not {old})"), pos
        return None

    def _corr_draft(self, e: _Event, text: str, hit: int | None, conf: float, rule: str) -> _Draft:
        ids = [e.pos] if hit is None else sorted({hit, e.pos})
        return _Draft(
            CandidateKind.CORRECTION,
            _title("Correction", text),
            _bound_text(text),
            MemoryType.SEMANTIC,
            conf,
            MemorySource.CORRECTION,
            ids,
            e.pos,
            rule=rule,
            meta={"reinforce": True},
        )

    # -------------------------------------------------------------- decisions

    def _decision(self, e: _Event, core: str, triggers: list[str], durable: bool) -> _Draft | None:
        rule = ""
        statement = reason = old = ""
        m_i = _DEC_INSTEAD.match(core)
        if m_i:
            statement = _decision_statement(m_i.group("verb"), m_i.group("new").strip())
            old = m_i.group("old").strip().rstrip(".!")
            rule = "decision-instead-of"
        else:
            for pattern, name in (
                (_DEC_LABEL, "decision-label"),
                (_DEC_DECIDED, "decision-decided"),
                (_DEC_LETS, "decision-lets"),
                (_DEC_GO_WITH, "decision-go-with"),
            ):
                m = pattern.search(core) if pattern is not _DEC_GO_WITH else pattern.match(core)
                if not m:
                    continue
                obj, reason = _reason_split(m.group("obj"))
                if name == "decision-decided":
                    prep = (m.group("prep") or "").lower()
                    if prep == "against":
                        statement = (
                            f"do not {obj}"
                            if re.match(r"(?i)\w+ing\b", obj) is None
                            else f"not {obj}"
                        )
                    elif prep in ("on", "for"):
                        statement = f"use {obj}"
                    else:
                        statement = obj
                elif name == "decision-lets":
                    statement = _decision_statement(m.group("verb"), obj)
                elif name == "decision-go-with":
                    statement = f"use {obj}"
                else:
                    statement = obj
                rule = name
                break
        if not rule:
            return None
        statement = statement.strip().rstrip(".!,")
        ids = [e.pos]
        conf = _C_DECISION
        obj_part = statement.split(" ", 1)[1] if " " in statement else statement
        if _OPTION_REF.search(obj_part) or _ANAPHORA.match(obj_part):
            resolved = self._resolve_option(obj_part)
            if resolved is not None:
                if len(obj_part.split()) <= 4:
                    # "go with option B" -> the option's own words, with the label.
                    verb = statement.split(" ", 1)[0]
                    statement = f"{verb} {_decapitalise(resolved[0])} ({obj_part})"
                else:
                    statement = f"{statement} ({resolved[0]})"
                ids = sorted({resolved[1], e.pos})
            else:
                conf = _C_DECISION_UNRESOLVED
        if _TEMPORARY.search(core):
            conf = min(conf, _C_TEMPORARY)
        elif _LOCAL_SCOPE.search(statement):
            # "let's use a dict here": a choice about the code in front of us.
            conf = min(conf, _C_DECISION_LOCAL)
        if _content_words(statement) < 1:
            return None
        body = f"Decision: {statement}"
        if old:
            body += f" instead of {old}"
        if reason:
            body += f", because {reason}"
        text = _finish(body)
        return _Draft(
            CandidateKind.DECISION,
            _title("Decision", f"{statement} instead of {old}" if old else statement),
            _bound_text(text),
            MemoryType.SEMANTIC,
            conf,
            MemorySource.CONVERSATION,
            ids,
            e.pos,
            trigger=bool(triggers),
            rule=rule,
            meta={"trigger_phrases": triggers} if triggers else {},
        )

    def _resolve_option(self, ref_text: str) -> tuple[str, int] | None:
        """ "option B" / "the second one" -> the text of that option in the last response."""
        if not self.option_order:
            if self.proposals and _ANAPHORA.match(ref_text):
                p = self.proposals[-1]
                return p.statement, p.pos
            return None
        m = _OPTION_REF.search(ref_text)
        label = ""
        if m:
            ref = (m.group("ref") or m.group("ord") or m.group("bare") or "").lower()
            words = {"one": "1", "two": "2", "three": "3", "four": "4"}
            ordinals = {"first": 0, "second": 1, "third": 2, "fourth": 3, "former": 0}
            if ref in ("last", "latter"):
                label = self.option_order[-1]
            elif ref in ordinals and ordinals[ref] < len(self.option_order):
                label = self.option_order[ordinals[ref]]
            else:
                label = words.get(ref, ref).upper()
        if label in self.options:
            text, pos = self.options[label]
            return _clip(text.rstrip(".!"), 200), pos
        return None

    # ------------------------------------------------------ constraints, prefs

    def _constraint(
        self, e: _Event, core: str, triggers: list[str], durable: bool
    ) -> _Draft | None:
        rule = ""
        conf = _C_CONSTRAINT
        if _NEVER.match(core):
            rule = "constraint-never"
        elif _ANAPHORIC_DONT.match(core):
            return None
        elif _DONT.match(core):
            rest = _DONT.match(core)
            if rest is None or _DONT_CHAT.match(rest.group("rest")):
                return None
            rule = "constraint-dont"
            # "don't touch this file" is about the task at hand; "don't use mocks in
            # integration tests" is a standing rule.
            conf = _C_CONSTRAINT_LOCAL if _DEICTIC.search(rest.group("rest")) else _C_CONSTRAINT
        elif _ONLY.match(core):
            rule = "constraint-only"
            conf = _C_CONSTRAINT if _DURABLE.search(core) or durable else _C_CONSTRAINT_SOFT
        elif (m := _WE_NEVER.match(core)) is not None and m.group("adv").lower() != "always":
            rule = "constraint-we-never"
        elif _MUST.search(core) and not _MUST_SPECULATE.search(core):
            rule = "constraint-must"
        elif _NEED_DURABLE.search(core):
            rule = "constraint-need"
        elif _PROJECT_FACT.match(core) and not _FACT_NOISE.search(core):
            rule = "project-fact"
            conf = _C_FACT
            # "We use Datadog for alerts, I'll add one there": the fact, not the plan.
            core = _FACT_TAIL.split(core, maxsplit=1)[0]
        if not rule:
            return None
        if _TEMPORARY.search(core) and not durable:
            conf = _C_TEMPORARY
        if durable or triggers:
            conf = max(conf, _C_TRIGGER_PREF if triggers else _C_CONSTRAINT)
        text = _finish(_third_person(core))
        return _Draft(
            CandidateKind.CONSTRAINT,
            _title("Constraint" if rule != "project-fact" else "Project", _third_person(core)),
            _bound_text(text),
            MemoryType.SEMANTIC,
            conf,
            MemorySource.CONVERSATION,
            [e.pos],
            e.pos,
            trigger=bool(triggers),
            rule=rule,
            meta={"trigger_phrases": triggers} if triggers else {},
        )

    def _preference(
        self, e: _Event, core: str, triggers: list[str], durable: bool
    ) -> _Draft | None:
        rule = ""
        conf = _C_PREFERENCE
        m = _PREF_I.match(core)
        if m:
            verb = m.group("verb").lower()
            rest = m.group("rest")
            if verb in ("like", "love") and _PRAISE.match(rest):
                return None  # "I like it", "I love this": praise, not a preference
            if verb == "want" and _TASK_WANT.match(rest) and not _DURABLE.search(rest):
                return None  # "I want you to fix ...": a task
            if verb == "rather" and re.match(r"(?i)(?:you\s+)?(?:not\s+)?\w+", rest) is None:
                return None
            rule = "preference-stated"
            if "prefer" in verb or verb == "rather":
                conf = _C_PREFERENCE_STRONG
        elif _ALWAYS.match(core):
            rule = "preference-always"
            conf = _C_PREFERENCE_STRONG
        elif _PREFER_IMP.match(core):
            rule = "preference-prefer"
            conf = _C_PREFERENCE_STRONG
        elif _STYLE_RULE.match(core):
            rule = "preference-style"
        elif _IMPERATIVE_RULE.match(core) and (durable or _DURABLE.search(core)):
            rule = "preference-durable-imperative"
        elif (m_xy := _X_NOT_Y.match(core)) and _IMPERATIVE_RULE.match(m_xy.group("good")):
            rule = "preference-x-not-y"
        if not rule:
            return None
        if triggers or durable:
            conf = _C_TRIGGER_PREF
        if _TEMPORARY.search(core) and not durable:
            conf = _C_TEMPORARY
        text = _finish(_third_person(core))
        return _Draft(
            CandidateKind.PREFERENCE,
            _title("Preference", _third_person(core)),
            _bound_text(text),
            MemoryType.SEMANTIC,
            conf,
            MemorySource.CONVERSATION,
            [e.pos],
            e.pos,
            trigger=bool(triggers),
            rule=rule,
            meta={"trigger_phrases": triggers} if triggers else {},
        )

    # ------------------------------------------------- open items and risks

    def _open_item(
        self, e: _Event, core: str, source: MemorySource, *, user: bool
    ) -> _Draft | None:
        kind = CandidateKind.QUESTION
        prefix = "Open question"
        statement = core
        m = _Q_LABEL.match(core)
        if m:
            rule = "question-todo"
            prefix = (
                "TODO" if core.lower().startswith(("todo", "to-do", "fixme")) else "Open question"
            )
            statement = m.group("rest")
        elif _Q_DECIDE.search(core):
            rule = "question-to-decide"
        elif _Q_UNSURE.search(core):
            rule = "question-unsure"
        elif _Q_LATER.search(core):
            rule = "question-left-open"
        else:
            kind = CandidateKind.RISK
            prefix = "Risk"
            m_r = _R_LABEL.match(core)
            if m_r:
                rule = "risk-label"
                statement = m_r.group("rest")
            elif _R_BREAK.search(core) and not _PAST_NARRATION.search(core):
                rule = "risk-breaks-if"
            elif _R_TERMS.search(core) and not _PAST_NARRATION.search(core):
                rule = "risk-term"
            else:
                return None
        if kind is CandidateKind.QUESTION:
            conf = _C_QUESTION_USER if user else _C_QUESTION_AGENT
            mtype = MemoryType.EPISODIC
        else:
            conf = _C_RISK_USER if user else _C_RISK_AGENT
            mtype = MemoryType.SEMANTIC
        bare = _finish(statement)
        # "TODO: handle pagination ..." keeps its label in the text.
        text = f"{prefix}: {bare}" if statement is not core else bare
        if _content_words(bare) < 2:
            return None
        return _Draft(
            kind,
            _title(prefix, statement),
            _bound_text(text),
            mtype,
            conf,
            source,
            [e.pos],
            e.pos,
            rule=rule,
        )

    # ------------------------------------------------------------ procedures

    def _procedure(
        self,
        e: _Event,
        core: str,
        s: _Sentence,
        source: MemorySource,
        *,
        user: bool,
        following: list[_Sentence] | None = None,
    ) -> _Draft | None:
        goal = steps = ""
        m = _PROC_TO.match(core)
        if m:
            goal, steps = m.group("goal").strip(), m.group("steps").strip()
            if steps and not _STEP_START.match(steps):
                return None
            if not steps:
                extra: list[str] = []
                if s.code_after:
                    extra = [ln.strip() for ln in s.code_after.splitlines() if ln.strip()][:6]
                    extra = [f"`{ln.lstrip('$ ').strip()}`" for ln in extra]
                elif following:
                    extra = [f.text.rstrip(".") for f in following if f.list_item][:8]
                if not extra:
                    return None
                steps = (
                    ", then ".join(extra)
                    if len(extra) < 3
                    else " ".join(f"{i}) {x}" for i, x in enumerate(extra, 1))
                )
                steps = "run " + steps if s.code_after else steps
        else:
            m2 = _PROC_RUN_TO.search(core)
            if not m2:
                return None
            goal = m2.group("goal").strip()
            steps = f"{m2.group('verb').lower()} {m2.group('cmd')}"
        goal = goal.rstrip(" .")
        if _content_words(goal) < 1 or re.match(
            r"(?i)(?:do|fix|be|make)\s+(?:this|that|it)\b", goal
        ):
            return None
        text = _finish(f"To {goal}, {_decapitalise(steps)}")
        commands = [c.strip("`").lstrip("$ ").strip() for c in _CODE_SPAN.findall(text)]
        carried = self._carried_out(commands)
        conf = _C_PROCEDURE_USER if user else _C_PROCEDURE_DONE if carried else _C_PROCEDURE_SAID
        return _Draft(
            CandidateKind.PROCEDURE,
            _clip(f"How to {goal}", _TITLE_LIMIT),
            _bound_text(text),
            MemoryType.PROCEDURAL,
            conf,
            source,
            [e.pos, *carried],
            e.pos,
            rule="procedure-user" if user else ("procedure-done" if carried else "procedure-said"),
            meta={"commands": commands},
        )

    def _carried_out(self, commands: list[str]) -> list[int]:
        """Positions of successful runs of these commands in this pass."""
        if not commands:
            return []
        found: list[int] = []
        for cmd in commands:
            for a in reversed(self.actions):
                if (
                    a.kind == "shell"
                    and a.ok
                    and (a.command.startswith(cmd) or (cmd.startswith(a.command) and a.command))
                ):
                    found.append(a.call.pos)
                    break
        return found if len(found) == len(commands) else []

    # ----------------------------------------------------------- responses

    def _response(self, e: _Event) -> None:
        self.last_response = e.pos
        sentences = _segment(e.content)
        used: set[int] = set()
        if self.pending is not None:
            used = self._emit_fix(self.pending, (e, sentences), e.pos)
            self.pending = None
        elif self.open and self.changes:
            used = self._explained_without_run(e, sentences)
        if self.open:
            # Explanations given while the bug is still open may be the root cause.
            for s in sentences:
                if _CAUSE.search(s.text) and len(self.notes) < 6:
                    self.notes.append((e.pos, s.text))
        self.proposals = []
        self.options = {}
        self.option_order = []
        for i, s in enumerate(sentences):
            text = s.text.strip()
            if i in used or len(text) > _MAX_SENTENCE:
                continue
            self._note_option(e, s)
            if _QUESTION_END.search(text):
                continue
            core = _AGENT_LEAD.sub("", _strip_lead(text))
            self._note_proposal(e, core)
            m = _DEC_LABEL.match(core)
            if m:
                obj, reason = _reason_split(m.group("obj"))
                self._add(
                    _Draft(
                        CandidateKind.DECISION,
                        _title("Decision", obj),
                        _bound_text(
                            _finish(f"Decision: {obj}" + (f", because {reason}" if reason else ""))
                        ),
                        MemoryType.SEMANTIC,
                        _C_DECISION_AGENT,
                        MemorySource.AGENT_RESPONSE,
                        [e.pos],
                        e.pos,
                        rule="decision-agent-label",
                    )
                )
                continue
            following = [x for x in sentences[i + 1 : i + 9]]
            draft = self._procedure(
                e, core, s, MemorySource.AGENT_RESPONSE, user=False, following=following
            )
            if draft is None:
                draft = self._open_item(e, core, MemorySource.AGENT_RESPONSE, user=False)
            if draft is not None:
                self._add(draft)
        self.agent_texts.append((e.pos, _norm_quotes(e.content[:_MAX_TEXT]).lower()))

    def _note_option(self, e: _Event, s: _Sentence) -> None:
        m = _OPTION_LINE.match(s.text.strip())
        if m and (s.list_item or s.text.lower().startswith("option")):
            label = m.group("label").upper()
            if label not in self.options and len(self.options) < 10:
                self.options[label] = (m.group("text").strip(), e.pos)
                self.option_order.append(label)
        elif s.text.lower().startswith("option "):
            m2 = re.match(r"(?i)option\s+([a-d1-9])\s*[:.)-]\s*(.{3,200})$", s.text.strip())
            if m2 and m2.group(1).upper() not in self.options:
                self.options[m2.group(1).upper()] = (m2.group(2).strip(), e.pos)
                self.option_order.append(m2.group(1).upper())

    def _note_proposal(self, e: _Event, core: str) -> None:
        m = _PROPOSAL.search(core)
        if m:
            obj, reason = _reason_split(m.group("obj"))
            statement = _decision_statement(m.group("verb"), obj)
        else:
            m = _RECOMMEND.search(core)
            if not m:
                return
            obj, reason = _reason_split(m.group("obj"))
            obj = re.sub(r"(?i)^(?:using|that\s+we\s+use|we\s+use)\s+", "", obj)
            obj = re.sub(r"(?i)^(?:that\s+)?(?:we|you)\s+", "", obj)
            # "I'd suggest storing them in S3": the gerund already says what to do.
            statement = obj if re.match(r"(?i)\w+ing\b", obj) else f"use {obj}"
        # Only a real proposal can be confirmed: one with a reason, or put tentatively
        # ("I'd suggest", "we could"). "I'll use grep to find it" followed by the
        # user's "ok" is no decision.
        tentative = bool(_TENTATIVE.search(core)) or bool(reason)
        if tentative and _content_words(statement) >= 1 and len(self.proposals) < 5:
            self.proposals.append(_Proposal(statement.rstrip(".!,"), reason, core, e.pos))

    # ---------------------------------------------------------------- tools

    def _tool_call(self, e: _Event) -> None:
        action = _make_action(e)
        use_id = str(e.meta.get("tool_use_id") or "")
        if use_id:
            self.by_use_id[use_id] = action
        else:
            self.unmatched.append(action)
        self._record(action)

    def _record(self, action: _Action) -> None:
        self.actions.append(action)
        self.action_at[action.call.pos] = action
        if action.kind == "other":
            return
        self.last_action = action
        if action.kind == "edit":
            if action.new_text:
                self.agent_texts.append((action.call.pos, _norm_quotes(action.new_text).lower()))
            if self.open:
                self.changes.append(action)
        elif action.command:
            self.agent_texts.append((action.call.pos, action.command.lower()[:2_000]))

    def _tool_result(self, e: _Event) -> None:
        use_id = str(e.meta.get("tool_use_id") or "")
        action = self.by_use_id.pop(use_id, None) if use_id else None
        if action is None and not use_id and self.unmatched:
            candidate = self.unmatched[-1]
            tool = str(e.meta.get("tool_name") or "")
            if not tool or tool == str(candidate.call.meta.get("tool_name") or ""):
                action = candidate
                self.unmatched.pop()
        if action is None:
            # A result that carries its own input (a PostToolUse-only capture).
            if not _tool_input(e.meta) and not e.meta.get("tool_name"):
                return
            action = _make_action(e)
            self._record(action)
        action.result = e
        self.action_at[e.pos] = action
        if action.kind != "shell" or action.stage is None:
            return  # reads, searches, listings: nothing to learn from their output
        action.ok = _outcome(e, action)
        if action.ok is False:
            if self.pending is not None:
                self._emit_fix(self.pending, None, e.pos)
                self.pending = None
            failure = _failure(action, e, e.pos)
            same = next((f for f in self.open if f.action.key == action.key), None)
            if same is not None:
                same.ids.append(e.pos)
            else:
                if not self.open:
                    self.changes = []
                    self.notes = []
                self.open.append(failure)
        elif action.ok:
            if action.stage in _CHANGE_STAGES and self.open:
                self.changes.append(action)
            if self.open and self.changes:
                matched = [
                    f
                    for f in self.open
                    if f.action.key == action.key
                    or (f.action.stage == action.stage and action.stage in _VERIFY_STAGES)
                ]
                if matched:
                    self.pending = _PendingFix(
                        matched, list(self.changes), action, list(self.notes)
                    )
                    self.open = [f for f in self.open if f not in matched]
                    if not self.open:
                        self.changes = []
                        self.notes = []

    def _explained_without_run(self, e: _Event, sentences: list[_Sentence]) -> set[int]:
        """A response that explains a cause and a fix for an open error, with no re-run."""
        has_cause = any(_CAUSE.search(s.text) for s in sentences)
        has_fix = any(_FIX_VERB.search(s.text) for s in sentences)
        if not (has_cause and has_fix):
            return set()
        fix = _PendingFix(list(self.open), list(self.changes), None, list(self.notes))
        self.open, self.changes, self.notes = [], [], []
        return self._emit_fix(fix, (e, sentences), e.pos)

    def _emit_fix(
        self,
        fix: _PendingFix,
        response: tuple[_Event, list[_Sentence]] | None,
        anchor: int,
    ) -> set[int]:
        used: set[int] = set()
        cause = remedy = ""
        ids: list[int] = []
        for f in fix.failures:
            ids.extend(f.ids)
        ids.extend(a.call.pos for a in fix.changes)
        if fix.verify is not None:
            ids.append(fix.verify.call.pos)
            if fix.verify.result is not None:
                ids.append(fix.verify.result.pos)
        if response is not None:
            e, sentences = response
            for i, s in enumerate(sentences):
                if len(s.text) > _MAX_SENTENCE:
                    continue
                if _content_words(s.text) < 3:
                    continue  # "Fixed." says nothing a later reader could use
                if not cause and _CAUSE.search(s.text):
                    cause = s.text
                    used.add(i)
                    if _FIX_VERB.search(s.text):
                        remedy = remedy or "-"  # one sentence tells both cause and fix
                elif not remedy and _FIX_VERB.search(s.text):
                    remedy = s.text
                    used.add(i)
                if cause and remedy:
                    break
            if used:
                ids.append(e.pos)
        if not cause and fix.notes:
            cause = fix.notes[0][1]
            ids.append(fix.notes[0][0])
        first = fix.failures[0]
        cmd = _display_command(first.action.command)
        files = list(dict.fromkeys(f for a in fix.changes for f in a.files))
        change_cmds = [_display_command(a.command) for a in fix.changes if a.kind == "shell"]
        error = first.summary or "an error"
        where = f" at {first.location}" if first.location else ""
        in_test = f" in {first.test}" if first.test and first.test != first.location else ""
        parts = [f"`{cmd}` failed{in_test} with {error.rstrip('.')}{where}."]
        for other in fix.failures[1:3]:
            parts.append(
                f"`{_display_command(other.action.command)}` also failed with {other.summary or 'an error'}."
            )
        if cause:
            parts.append(f"Cause: {_finish(cause)}")
        if remedy and remedy != "-":
            parts.append(f"Fix: {_finish(remedy)}")
        if files:
            parts.append("Files changed: " + ", ".join(files[:10]) + ".")
        if change_cmds:
            parts.append("Also ran: " + ", ".join(f"`{c}`" for c in change_cmds[:4]) + ".")
        if fix.verify is not None:
            parts.append(f"Verified: `{_display_command(fix.verify.command)}` passes.")
        text = " ".join(parts)
        explained = bool(cause or remedy)
        if fix.verify is not None and explained:
            conf, rule = _C_FIX_FULL, "fix-verified-explained"
        elif fix.verify is not None:
            conf, rule = _C_FIX_VERIFIED, "fix-verified"
        else:
            conf, rule = _C_FIX_EXPLAINED, "fix-explained"
        if first.action.stage in ("lint", "format"):
            # A lint finding fixed is rarely worth recalling in another session.
            conf = min(conf, _C_FIX_LINT)
        short = error if len(error) <= 40 else first.name or _clip(error, 40)
        short = short.replace(": ", " ", 1) if short.startswith(first.name or "\0") else short
        target = first.location.split(" ", 1)[0] if first.location else (files[0] if files else "")
        target = re.sub(r":\d+$", "", target)
        title = f"Fix: {short} in {target}" if target else f"Fix: {short}"
        if not first.summary:
            title = f"Fix: failing `{_clip(cmd, 50)}`"
        self._add(
            _Draft(
                CandidateKind.FIX,
                _clip(title, _TITLE_LIMIT),
                _bound_text(text),
                MemoryType.EPISODIC,
                conf,
                MemorySource.AGENT_RESPONSE if explained else MemorySource.HOOK_EVENT,
                sorted(set(ids)),
                anchor,
                rule=rule,
                meta={
                    "files": files,
                    "commands": [cmd]
                    + ([_display_command(fix.verify.command)] if fix.verify else []),
                    "error": error,
                },
            )
        )
        return used

    # ---------------------------------------------------- other event types

    def _config(self, e: _Event) -> None:
        key = e.meta.get("key")
        if not key:
            return
        old, new = e.meta.get("old"), e.meta.get("new")
        if old == new:
            return
        c = _configuration(str(key), old, new)
        self._add(
            _Draft(
                CandidateKind.CONFIGURATION,
                c[1],
                c[0],
                MemoryType.SEMANTIC,
                c[2],
                MemorySource.CONFIGURATION,
                [e.pos],
                e.pos,
                rule="configuration-change",
                meta=c[3],
                capped=False,
            )
        )

    def _explicit(self, e: _Event) -> None:
        body = _strip_lead(_norm_quotes(e.content.strip()[:_MAX_TEXT]))
        m = _EXPLICIT.match(body)
        if m:
            body = m.group("body")
        text = _finish(_third_person(body))
        if not text or _PLACEHOLDER.fullmatch(text.rstrip(".")):
            return
        title = str(e.meta.get("title") or "") or _title("", text)
        self._add(
            _Draft(
                CandidateKind.EXPLICIT,
                _clip(title, _TITLE_LIMIT),
                _bound_text(text),
                _explicit_type(text),
                _C_EXPLICIT_EVENT,
                MemorySource.EXPLICIT,
                [e.pos],
                e.pos,
                trigger=True,
                rule="explicit-event",
                meta={"reinforce": True},
                capped=False,
            )
        )

    # ------------------------------------------------------------- workflow

    def _workflows(self) -> None:
        steps: list[_Step] = []
        for a in self.actions:
            steps.extend(_steps_of_action(a))
        best: tuple[tuple[int, int], _Draft] | None = None
        for group in _time_groups(steps, self.opts.pattern_window_minutes):
            if group[-1].pos is None or group[-1].pos < self.first_new:
                continue
            wf = _workflow(group, self.opts, reported=False, project=self.ev[0].project)
            if wf is None:
                continue
            text, title, conf, meta = wf
            ids = sorted({s.pos for s in group if s.pos is not None})
            draft = _Draft(
                CandidateKind.WORKFLOW,
                title,
                text,
                MemoryType.PROCEDURAL,
                conf,
                MemorySource.WORKFLOW,
                ids,
                ids[-1],
                rule="workflow-observed",
                meta=meta,
                capped=False,
            )
            score = (len(meta["stages"]), ids[-1])
            if best is None or score > best[0]:
                best = (score, draft)
        if best is not None:
            self._add(best[1])

    # --------------------------------------------------------------- digest

    def _digest_event(self, e: _Event) -> None:
        d = self.digest
        if e.id in d.seen:
            return
        if len(d.seen) < _MAX_SEEN_IDS:
            d.seen.add(e.id)
        d.project = d.project or e.project
        d.agent = e.agent if d.agent == "generic" else d.agent
        if d.first_ts is None and e.ts is not None:
            d.first_ts = e.ts
        if e.type == "prompt" and not d.goal and not is_chitchat(e.content):
            sentences = [s.text for s in _segment(e.content) if not s.text.startswith("`")]
            d.goal = _clip(" ".join(sentences[:2]) or e.content, 200)
            d.goal_id = e.id
        elif e.type == "response" and _content_words(e.content[:2_000]) >= 3:
            sentences = [s.text for s in _segment(e.content)[:2]]
            d.outcome = _clip(" ".join(sentences), 300)
            d.outcome_id = e.id
        elif e.type == "tool_result":
            action = self.action_at.get(e.pos)
            if action is None or action.kind != "shell" or action.stage is None:
                return
            if len(d.commands) < 40 or _display_command(action.command) in d.commands:
                d.commands[_display_command(action.command)] = action.ok
            if action.ok and action.stage in _VERIFY_STAGES and d.edits:
                d.verified = True
                d.verify_id = e.id
        elif e.type == "tool_call":
            action = self.action_at.get(e.pos)
            if action is None:
                return
            if action.kind == "edit":
                d.edits += 1
                for f in action.files:
                    if len(d.files) < 200:
                        d.files[f] = None
            elif action.kind == "shell" and action.stage is not None and len(d.commands) < 40:
                d.commands.setdefault(_display_command(action.command), None)


# ------------------------------------------------------------------ workflow


@dataclass(slots=True)
class _Step:
    stage: str
    shown: str  # the command, the description, or the files edited
    pos: int | None
    ts: datetime | None
    ok: bool | None = None
    command: bool = True  # shown is a command, not a description


def _steps_of_action(a: _Action) -> list[_Step]:
    if a.kind == "edit":
        return [_Step("edit", ", ".join(a.files[:3]), a.call.pos, a.call.ts)]
    if a.kind != "shell":
        return []
    out: list[_Step] = []
    for part in _split_command(a.command):
        stage = _stage(part)
        if stage is not None:
            out.append(_Step(stage, _display_command(part), a.call.pos, a.call.ts, a.ok))
    return out


def _time_groups(steps: list[_Step], minutes: int) -> list[list[_Step]]:
    """Consecutive steps whose span stays within the pattern window."""
    window = timedelta(minutes=minutes)
    groups: list[list[_Step]] = []
    for step in steps:
        if groups:
            start = groups[-1][0].ts
            if start is None or step.ts is None or _delta(start, step.ts) <= window:
                groups[-1].append(step)
                continue
        groups.append([step])
    return groups


def _delta(a: datetime, b: datetime) -> timedelta:
    try:
        return abs(b - a)
    except TypeError:  # naive against aware: compare wall clocks
        return abs(b.replace(tzinfo=None) - a.replace(tzinfo=None))


# Project-specific entry points (a make target, a script) make a procedure worth more
# than the generic "npm test, npm run build" every project has.
_SPECIFIC_COMMAND = re.compile(
    r"^(?:make\s+\w|\./|scripts?/|bin/|just\s|task\s|(?:npm|pnpm|yarn)\s+run\s+"
    r"(?!(?:build|test|lint|dev|start|format|typecheck)\b))"
)


def _workflow(
    steps: list[_Step], opts: ExtractOptions, *, reported: bool, project: str | None
) -> tuple[str, str, float, dict[str, Any]] | None:
    """ "To <goal>: 1) ... 2) ... 3) ..." from steps, or None when they form no procedure."""
    if not steps:
        return None
    known = [s for s in steps if s.stage != "other"]
    if len(known) < opts.min_actions_for_pattern or len(known) * 2 < len(steps):
        return None  # too few, or mostly actions we cannot name: not a procedure
    # Keep each stage's last occurrence: after "test, edit, test" the procedure is
    # "edit, test". A failed step that was later repeated successfully disappears too.
    last: dict[str, int] = {}
    for i, s in enumerate(known):
        last[s.stage] = i
    ordered = [s for i, s in enumerate(known) if last[s.stage] == i]
    # "git add" then "git commit" is one step.
    ordered = [
        s
        for i, s in enumerate(ordered)
        if not (s.stage == "stage" and any(t.stage == "commit" for t in ordered[i + 1 :]))
    ]
    stages = [s.stage for s in ordered]
    lifecycle = set(stages) - {"edit", "run", "other"}
    if len(set(stages)) < min(3, opts.min_actions_for_pattern) or not lifecycle:
        return None
    goal = _GOAL.get(stages[-1], "make a change")
    where = ""
    if project:
        where = f" in {project.rstrip('/').rsplit('/', 1)[-1]}"
    rendered = []
    for i, s in enumerate(ordered, 1):
        phrase = _STEP_PHRASE.get(s.stage, "run")
        if s.stage == "edit":
            shown = f"edit the code ({s.shown})" if s.shown else "edit the code"
        elif reported and s.shown and not s.command:
            shown = s.shown  # the user's own words for the step ("run tests")
        elif s.shown and s.shown.lower() != phrase and s.shown.lower() not in phrase:
            looks_like_command = bool(re.match(r"^[\w./-]+(?:\s|$)", s.shown)) and (
                not reported or " " not in s.shown or s.shown.split()[0] in _KNOWN_PROGRAMS
            )
            shown = f"{phrase} (`{s.shown}`)" if looks_like_command else f"{phrase} ({s.shown})"
        else:
            shown = phrase
        rendered.append(f"{i}) {shown}")
    text = f"To {goal}{where}: " + " ".join(rendered) + "."
    # Repetition: the last three stages seen twice in the window.
    full = [s.stage for s in known]
    collapsed = [st for i, st in enumerate(full) if i == 0 or full[i - 1] != st]
    tri = tuple(stages[-3:])
    repeats = sum(
        1 for i in range(len(collapsed) - len(tri) + 1) if tuple(collapsed[i : i + len(tri)]) == tri
    )
    if reported:
        conf = _C_WORKFLOW_REPORTED
    elif repeats >= 2:
        conf = _C_WORKFLOW_REPEATED
    elif any(_SPECIFIC_COMMAND.match(s.shown) for s in ordered):
        conf = _C_WORKFLOW_SPECIFIC
    else:
        conf = _C_WORKFLOW
    title = _clip(f"Workflow: {goal} ({' → '.join(stages)})", _TITLE_LIMIT)
    meta: dict[str, Any] = {
        "stages": stages,
        "commands": [s.shown for s in ordered if s.stage != "edit"],
        "files": sorted(
            {f for s in ordered if s.stage == "edit" for f in s.shown.split(", ") if f}
        ),
        "repeats": repeats,
    }
    return _bound_text(text), title, conf, meta


def _steps_of_reported(action: Mapping[str, Any], pos: int) -> list[_Step]:
    """Steps from a seed-000 ``UserAction`` (``action_type``, ``description``, ...)."""
    if "event_type" in action:
        e = _event(action, pos)
        a = _make_action(e)
        return _steps_of_action(a)
    kind = str(action.get("action_type") or action.get("ActionType") or action.get("type") or "")
    desc = str(action.get("description") or action.get("Description") or "")
    meta = action.get("metadata") or action.get("Metadata") or {}
    command = str(meta.get("command") or "") if isinstance(meta, Mapping) else ""
    ts = _parse_time(action.get("timestamp") or action.get("Timestamp"))
    if kind.lower() in ("edit", "file_edit", "save", "write"):
        return [_Step("edit", desc, pos, ts, command=False)]
    if command:
        return [
            _Step(st, _display_command(p), pos, ts)
            for p in _split_command(command)
            if (st := _stage(p)) is not None
        ]
    stage = _stage(desc) if desc else None
    if stage is None or stage == "other":
        stage = _stage(kind) if kind else stage
    if stage is None:
        return []
    return [_Step(stage, _clip(desc, 80), pos, ts, command=False)]


# -------------------------------------------------------------- configuration

_SECRET_KEY = re.compile(r"(?i)token|secret|password|passwd|api[_-]?key|credential|private[_-]?key")
_THEME_KEY = re.compile(r"(?i)\b(?:theme|colou?r[ _-]?scheme|appearance|dark[ _-]?mode|mode)\b")
_GENERIC_KEY = frozenset(
    {"enabled", "enable", "mode", "size", "value", "level", "type", "style", "path"}
)
_TRUE = frozenset({"true", "on", "yes", "enabled", "1"})
_FALSE = frozenset({"false", "off", "no", "disabled", "0"})


def _humanise_key(key: str) -> str:
    parts = [p for p in re.split(r"[./:]", key.strip()) if p]
    if not parts:
        return key
    chosen = parts[-1]
    if chosen.lower() in _GENERIC_KEY and len(parts) > 1:
        chosen = f"{parts[-2]} {chosen}"
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", chosen).replace("_", " ").replace("-", " ")
    return _WS.sub(" ", words).strip().lower()


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return None


def _show_value(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return _clip(value.strip(), 80) or '""'
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    return _clip(_as_text(value), 80)


def _configuration(key: str, old: object, new: object) -> tuple[str, str, float, dict[str, Any]]:
    """Seed 000 CaptureConfigurationChange in natural words: text, title, confidence, meta."""
    name = _humanise_key(key)
    meta: dict[str, Any] = {"key": key, "old": _show_value(old), "new": _show_value(new)}
    if _SECRET_KEY.search(key):
        # Defence in depth: a credential is never a preference, and its value stays out.
        meta.update(old="[REDACTED]", new="[REDACTED]", secret_key=True)
        return (
            f"User changed the {name} setting.",
            _clip(f"Setting: {name} changed", 80),
            _C_CONFIG_SECRET,
            meta,
        )
    new_bool = _as_bool(new)
    shown = _show_value(new)
    if old == new:
        text, conf = f"User kept {name} set to {shown}.", _C_CONFIG_NOOP
    elif (
        isinstance(new, str)
        and new.strip().lower() in ("dark", "light")
        and _THEME_KEY.search(name)
    ):
        text, conf = f"User prefers {new.strip().lower()} mode.", _C_CONFIG
    elif isinstance(new, str) and _THEME_KEY.search(name) and not re.search(r"(?i)\bmode\b", name):
        text, conf = f"User prefers the {shown} theme.", _C_CONFIG
    elif new_bool is not None and (
        isinstance(new, bool) or _as_bool(old) is not None or old is None
    ):
        text, conf = f"User prefers {name} {'enabled' if new_bool else 'disabled'}.", _C_CONFIG
    elif old is None:
        text, conf = f"User prefers {name} set to {shown}.", _C_CONFIG
    else:
        text, conf = f"User changed {name} from {_show_value(old)} to {shown}.", _C_CONFIG
    title = _clip(f"Setting: {name} → {shown}", _TITLE_LIMIT)
    return text, title, conf, meta


# ------------------------------------------------------------- corrections


_OPENERS = "([{\"'“‘"
_CLOSERS = ".,;:!?)]}\"'”’"


def _diff_tokens(text: str) -> list[str]:
    """Words as written ("--no-cov", "3.9", "don't"), with surrounding punctuation apart."""
    out: list[str] = []
    for word in text.split()[:20_000]:
        lead: list[str] = []
        while len(word) > 1 and word[0] in _OPENERS:
            lead.append(word[0])
            word = word[1:]
        trail: list[str] = []
        while len(word) > 1 and word[-1] in _CLOSERS:
            trail.append(word[-1])
            word = word[:-1]
        out.extend(lead)
        out.append(word)
        out.extend(reversed(trail))
    return out


def _join_tokens(tokens: Sequence[str]) -> str:
    out = ""
    for t in tokens:
        if out and t not in _CLOSERS and out[-1] not in _OPENERS:
            out += " "
        out += t
    return out


def _sentence_around(text: str, needle: str) -> str:
    for s in _split_plain(_WS.sub(" ", text.strip())):
        if needle and needle in s:
            return s
    return ""


def _correction_text(original: str, corrected: str) -> tuple[str, float, str] | None:
    """A rule from a word diff: "X, not Y" / "Use “X”, not “Y”". None when nothing changed."""
    a = _diff_tokens(original[:_MAX_TEXT])
    b = _diff_tokens(corrected[:_MAX_TEXT])
    if a == b:
        return None
    # Trim the common head and tail first: edits are usually local, and this keeps
    # the quadratic part of difflib on a small middle.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    anchors: list[str] = []
    if len(mid_a) > 400 or len(mid_b) > 400:
        ops: list[tuple[str, list[str], list[str]]] = [("replace", mid_a, mid_b)]
        ratio = 0.0
    else:
        sm = difflib.SequenceMatcher(a=mid_a, b=mid_b, autojunk=False)
        ops = []
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag != "equal":
                ops.append((tag, mid_a[i1:i2], mid_b[j1:j2]))
                if tag == "delete":
                    # A deletion leaves nothing to find in the corrected text but its
                    # neighbour; remember it so the example sentence can be found.
                    near = b[head + j1 - 1] if head + j1 > 0 else (b[head + j1] if b else "")
                    anchors.append(near)
        same = len(a) - len(mid_a) + sum(block.size for block in sm.get_matching_blocks())
        ratio = 2.0 * same / max(1, len(a) + len(b))
    if ratio < 0.4 or len(ops) > 4:
        text = (
            f"User rewrote the agent's text. Agent's version: “{_clip(original, 200)}”. "
            f"User's version: “{_clip(corrected, 300)}”."
        )
        return text, _C_REWRITE, "correction-rewrite"
    rules: list[str] = []
    example = ""
    for op, old, new in ops:
        old_s, new_s = _join_tokens(old), _join_tokens(new)
        if op == "replace":
            rules.append(f"use “{new_s}”, not “{old_s}”")
        elif op == "insert":
            rules.append(f"include “{new_s}”")
        else:
            rules.append(f"leave out “{old_s}”")
        example = (
            example
            or _sentence_around(corrected, new_s)
            or next((x for x in (_sentence_around(corrected, n) for n in anchors) if x), "")
            or _sentence_around(original, old_s)
        )
    plain = example.rstrip(".!")
    if (
        len(ops) == 1
        and ops[0][0] == "replace"
        and plain
        and len(plain.split()) <= 15
        and "," not in plain
    ):
        # A short, simple sentence reads best as the rule itself: "API uses API keys, not OAuth."
        text = _finish(f"{plain}, not {_join_tokens(ops[0][1])}")
        return text, _C_CORRECTION_DIFF, "correction-diff"
    text = _finish("; ".join(rules))
    if example:
        text += f" Corrected text: “{_clip(example, 300)}”"
    return text, _C_CORRECTION_DIFF, "correction-diff"


# ----------------------------------------------------------------- public


def confirmations(events: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(memory_id, query) for each ``search_confirmation`` event, in order, once each.

    A confirmation is no new memory: the service reinforces the memory that was
    found (seed 000 CaptureSearchConfirmation).
    """
    out: list[tuple[str, str]] = []
    for raw in events:
        if str(raw.get("event_type") or "").lower() != "search_confirmation":
            continue
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        memory_id = str(meta.get("memory_id") or meta.get("result_id") or "")
        if not memory_id:
            continue
        pair = (memory_id, str(meta.get("query") or ""))
        if pair not in out:
            out.append(pair)
    return out


def _dedupe_key(text: str) -> str:
    return re.sub(r"[^\w\s]", "", _WS.sub(" ", text.lower())).strip()


class Extractor:
    """Turns windows of session events into memory candidates (see the module notes)."""

    def __init__(self, options: ExtractOptions | None = None) -> None:
        self.options = options or ExtractOptions()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    # ---------------------------------------------------------------- windows

    def extract(
        self, events: Sequence[Mapping[str, Any]], *, final: bool = False
    ) -> list[Candidate]:
        """Candidates from one window of events (in session order).

        ``final=True`` (session end) adds one HANDOFF candidate per session and forgets
        the session. Windows of several sessions are split by ``session_id``.
        """
        by_session: dict[str, list[Mapping[str, Any]]] = {}
        for raw in events:
            if isinstance(raw, Mapping):
                by_session.setdefault(str(raw.get("session_id") or ""), []).append(raw)
        out: list[Candidate] = []
        for session_id, window in by_session.items():
            out.extend(self._extract_session(session_id, window, final))
        return out

    def _extract_session(
        self, session_id: str, window: list[Mapping[str, Any]], final: bool
    ) -> list[Candidate]:
        state = self._sessions.pop(session_id, None) or _Session(_Digest(session_id))
        ids = {str(r.get("event_id")) for r in window if r.get("event_id")}
        tail = [r for r in state.tail if str(r.get("event_id")) not in ids]
        raws = tail + window
        evs = [_event(r, i) for i, r in enumerate(raws)]
        p = _Pass(self.options, evs, len(tail), state.digest)
        p.run(final)
        drafts = [d for d in p.drafts if d.anchor >= len(tail)]
        for d in drafts:
            if d.kind is CandidateKind.FIX:
                state.digest.fixes.append(d.title)
            elif d.kind is CandidateKind.DECISION and d.confidence >= 0.75:
                state.digest.decisions.append(d.title)
            elif d.kind in (CandidateKind.QUESTION,):
                state.digest.opens.append(d.title)
        candidates = self._finalise(drafts, evs, session_id)
        if final:
            handoff = self._handoff(state.digest)
            if handoff is not None:
                candidates.append(handoff)
        else:
            state.tail = raws[p.tail_start() :]
            self._sessions[session_id] = state
            while len(self._sessions) > _MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return candidates

    def _finalise(
        self, drafts: list[_Draft], evs: list[_Event], session_id: str
    ) -> list[Candidate]:
        # Dedupe: the same statement twice is one candidate with both provenances.
        merged: dict[str, _Draft] = {}
        for d in drafts:
            key = _dedupe_key(d.text)
            prev = merged.get(key)
            if prev is None:
                merged[key] = d
                continue
            keep, other = (prev, d) if prev.confidence >= d.confidence else (d, prev)
            keep.ids = sorted(set(keep.ids) | set(other.ids))
            keep.trigger = keep.trigger or other.trigger
            keep.anchor = min(keep.anchor, other.anchor)
            merged[key] = keep
        # Cap per turn, keeping the most confident (seed 000 MaxMemoriesPerTurn).
        per_turn: dict[int, list[_Draft]] = {}
        kept: list[_Draft] = []
        for d in merged.values():
            if d.capped:
                per_turn.setdefault(d.turn, []).append(d)
            else:
                kept.append(d)
        for turn_drafts in per_turn.values():
            turn_drafts.sort(key=lambda d: (-d.confidence, d.anchor, d.seq))
            kept.extend(turn_drafts[: max(0, self.options.max_per_turn)])
        kept.sort(key=lambda d: (d.anchor, d.seq))
        out: list[Candidate] = []
        for d in kept:
            anchor = evs[d.anchor] if d.anchor < len(evs) else None
            meta = {"candidate_kind": d.kind.value, **d.meta}
            meta.setdefault(
                "reinforce", d.kind in (CandidateKind.CORRECTION, CandidateKind.EXPLICIT)
            )
            meta["turn"] = d.turn
            if anchor is not None:
                meta["agent"] = anchor.agent
                if anchor.ts is not None:
                    meta["timestamp"] = anchor.ts.isoformat()
            out.append(
                Candidate(
                    kind=d.kind,
                    title=d.title,
                    text=d.text,
                    type=d.type,
                    confidence=round(min(1.0, max(0.0, d.confidence)), 4),
                    source=d.source,
                    event_ids=tuple(
                        dict.fromkeys(evs[i].id for i in sorted(d.ids) if i < len(evs))
                    ),
                    project=(anchor.project if anchor else None)
                    or next((e.project for e in evs if e.project), None),
                    session_id=(anchor.session if anchor else "") or session_id,
                    trigger=d.trigger,
                    rule=d.rule,
                    metadata=meta,
                )
            )
        return out

    def _handoff(self, d: _Digest) -> Candidate | None:
        """One summary of the session: goal, changes, commands, fixes, open items, outcome."""
        if not d.goal and not d.files and not d.commands:
            return None
        parts: list[str] = []
        if d.goal:
            parts.append(f"Goal: {_finish(d.goal)}")
        if d.files:
            files = list(d.files)
            more = f" (+{len(files) - 10} more)" if len(files) > 10 else ""
            parts.append(f"Changed {len(files)} file(s): {', '.join(files[:10])}{more}.")
        if d.commands:
            shown = []
            for cmd, ok in list(d.commands.items())[-8:]:
                status = " (passed)" if ok else " (failed)" if ok is False else ""
                shown.append(f"`{cmd}`{status}")
            parts.append("Ran: " + ", ".join(shown) + ".")
        if d.fixes:
            parts.append("Fixed: " + "; ".join(t.removeprefix("Fix: ") for t in d.fixes[:5]) + ".")
        if d.decisions:
            parts.append(
                "Decided: " + "; ".join(t.removeprefix("Decision: ") for t in d.decisions[:5]) + "."
            )
        if d.opens:
            parts.append("Open: " + "; ".join(t.split(": ", 1)[-1] for t in d.opens[:5]) + ".")
        if d.outcome:
            parts.append(f"Outcome: {_finish(d.outcome)}")
        text = _bound_text(" ".join(parts))
        if d.edits and d.verified:
            conf = _C_HANDOFF_FIXED if d.fixes else _C_HANDOFF_VERIFIED
        elif d.edits:
            conf = _C_HANDOFF_EDITED
        else:
            conf = _C_HANDOFF_THIN
        ids = tuple(i for i in (d.goal_id, d.verify_id, d.outcome_id) if i)
        meta: dict[str, Any] = {
            "candidate_kind": CandidateKind.HANDOFF.value,
            "files": list(d.files)[:50],
            "commands": list(d.commands)[:20],
            "edits": d.edits,
            "verified": d.verified,
            "agent": d.agent,
            "reinforce": False,
        }
        if d.first_ts is not None:
            meta["timestamp"] = d.first_ts.isoformat()
        return Candidate(
            kind=CandidateKind.HANDOFF,
            title=_title("Handoff", d.goal or "session summary"),
            text=text,
            type=MemoryType.EPISODIC,
            confidence=conf,
            source=MemorySource.HOOK_EVENT,
            event_ids=ids,
            project=d.project,
            session_id=d.session,
            trigger=False,
            rule="handoff",
            metadata=meta,
        )

    def finish(self, session_id: str) -> list[Candidate]:
        """End a session whose last window was already extracted: pending fix, handoff.

        Same as ``extract([], final=True)`` would be if an empty window could name its
        session. Returns nothing for a session this extractor does not know.
        """
        if session_id not in self._sessions:
            return []
        return self._extract_session(session_id, [], final=True)

    def forget(self, session_id: str) -> None:
        """Drop what is remembered of a session (when the service abandons it)."""
        self._sessions.pop(session_id, None)

    # ------------------------------------------------- seed 000 capture points

    def correction(
        self,
        original: str,
        corrected: str,
        context: str = "",
        *,
        session_id: str = "",
        project: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Candidate | None:
        """Seed 000 CaptureUserCorrection: the user replaced the agent's output.

        The rule comes from a word diff: one replaced phrase in a short sentence gives
        "<corrected sentence>, not <old phrase>"; several give "Use “X”, not “Y”; ...".
        A wholesale rewrite gives a low-confidence note. None when only whitespace
        changed.
        """
        if not corrected or not corrected.strip():
            return None
        synthesised = _correction_text(_norm_quotes(original or ""), _norm_quotes(corrected))
        if synthesised is None:
            return None
        text, conf, rule = synthesised
        if context.strip():
            text = f"{text} Context: {_finish(_clip(context, 200))}"
        return Candidate(
            kind=CandidateKind.CORRECTION,
            title=_title("Correction", text),
            text=_bound_text(text),
            type=MemoryType.SEMANTIC,
            confidence=conf,
            source=MemorySource.CORRECTION,
            event_ids=tuple(event_ids),
            project=project,
            session_id=session_id,
            trigger=False,
            rule=rule,
            metadata={"candidate_kind": "correction", "reinforce": True, "context": context[:200]},
        )

    def configuration(
        self,
        key: str,
        old: object,
        new: object,
        *,
        session_id: str = "",
        project: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Candidate:
        """Seed 000 CaptureConfigurationChange: "User prefers dark mode" and the like."""
        text, title, conf, meta = _configuration(str(key), old, new)
        return Candidate(
            kind=CandidateKind.CONFIGURATION,
            title=title,
            text=text,
            type=MemoryType.SEMANTIC,
            confidence=conf,
            source=MemorySource.CONFIGURATION,
            event_ids=tuple(event_ids),
            project=project,
            session_id=session_id,
            trigger=False,
            rule="configuration-change",
            metadata={"candidate_kind": "configuration", **meta},
        )

    def workflow(
        self,
        actions: Sequence[Mapping[str, Any]],
        *,
        session_id: str = "",
        project: str | None = None,
    ) -> Candidate | None:
        """Seed 000 CaptureWorkflowPattern: a procedure from observed actions, or None.

        Actions are seed-000 ``UserAction`` mappings (``action_type``, ``description``,
        ``timestamp``, ``metadata`` with an optional ``command``) or tool-call events.
        None when there are fewer than ``min_actions_for_pattern`` actions, when they
        span more than the pattern window, or when they form no procedure (reads,
        searches, actions that cannot be named).
        """
        if len(actions) < self.options.min_actions_for_pattern:
            return None
        steps: list[_Step] = []
        times: list[datetime] = []
        for i, action in enumerate(actions):
            if not isinstance(action, Mapping):
                continue
            ts = _parse_time(action.get("timestamp") or action.get("Timestamp"))
            if ts is not None:
                times.append(ts)
            steps.extend(_steps_of_reported(action, i))
        if times and _delta(min(times, key=_sort_time), max(times, key=_sort_time)) > timedelta(
            minutes=self.options.pattern_window_minutes
        ):
            return None
        wf = _workflow(steps, self.options, reported=True, project=project)
        if wf is None:
            return None
        text, title, conf, meta = wf
        ids = tuple(
            str(a.get("event_id")) for a in actions if isinstance(a, Mapping) and a.get("event_id")
        )
        return Candidate(
            kind=CandidateKind.WORKFLOW,
            title=title,
            text=text,
            type=MemoryType.PROCEDURAL,
            confidence=conf,
            source=MemorySource.WORKFLOW,
            event_ids=ids,
            project=project,
            session_id=session_id,
            trigger=False,
            rule="workflow-reported",
            metadata={"candidate_kind": "workflow", **meta},
        )

    @staticmethod
    def confirmations(events: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
        """See :func:`confirmations`."""
        return confirmations(events)


def _sort_time(ts: datetime) -> float:
    try:
        return ts.timestamp()
    except (OverflowError, OSError, ValueError):
        return 0.0
