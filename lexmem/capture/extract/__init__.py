"""Candidate extraction: turn a window of agent-session events into memory candidates.

The capture service (DESIGN.md, "The shape") buffers each session's events and, at a
window boundary (every N turns, at Stop, at SessionEnd), hands the window to
:class:`Extractor`. The extractor only *proposes*: each :class:`Candidate` carries a
confidence that the service (:mod:`lexmem.service.pipeline`) compares with the capture
mode's threshold (``assist`` keeps >= 0.7, seed 000's MinExtractionConfidence; ``full``
keeps >= 0.5; both are ``MODE_THRESHOLDS`` in :mod:`lexmem.capture.extract.thresholds`),
then redacts, dedupes, audits and writes.

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

Confidence calibration (what ``assist`` keeps is >= 0.7; every value is named, with
what it is for, in :mod:`lexmem.capture.extract.thresholds`):

* 0.90-0.95: explicit "remember"/"note that" statements and ``explicit`` events;
  preferences stated with a seed trigger phrase; clean ``correction()`` diffs.
* 0.75-0.88: corrections in conversation, decisions the user states or confirms,
  durable constraints and preferences, verified and explained fixes,
  configuration changes, procedures the user states (or the agent states and ran),
  repeated workflows, handoffs of sessions whose edits were verified.
* 0.50-0.74: things that are probably worth keeping but are less certain: fixes
  without an explanation or without a verifying run, procedures the agent explains,
  single observed workflows, open questions, risks, project facts, handoffs of
  sessions that changed files without verifying them; and what is held low on
  purpose: statements limited in time ("for now"), fixed lint findings, decisions
  naming an option that cannot be found, wholesale rewrites. ``assist`` keeps those
  of 0.70 and up; ``full`` keeps them all.
* below 0.5: for the audit log only (handoffs of sessions that changed nothing,
  settings that look like secrets).

State. The extractor remembers a little per session between calls (a bounded tail
of the previous window, and a digest for the handoff), so that a bug that fails in one
window and is fixed in the next, or a proposal confirmed at the start of the next
window, is still found. At session end pass the last window with ``final=True``, or
call :meth:`Extractor.finish` when there is no window left (an empty window cannot
name its session); :meth:`Extractor.forget` drops an abandoned session. Use one
:class:`Extractor` per service; it is not thread-safe. Time is linear in the size of the
window: every regular expression has bounded repetition, long texts are read only up to
a fixed length, and sentences longer than a few hundred characters are not read as
statements.

The modules, each importing only those below it (an import-linter contract):
``extractor`` (:class:`Extractor`, :func:`confirmations`), ``statements`` (the statement
rules and the pass over a window), ``corrections`` and ``workflows``, ``tools`` (events,
tool use, outcomes, failures), ``candidates`` and ``text``, and ``thresholds``. This
``__init__`` only re-exports the public names.
"""

from lexmem.capture.extract.candidates import Candidate, CandidateKind, ExtractOptions
from lexmem.capture.extract.extractor import Extractor, confirmations
from lexmem.capture.extract.text import TRIGGER_PATTERNS, is_chitchat, trigger_phrases

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
