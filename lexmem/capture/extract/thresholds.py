"""Every threshold, limit and confidence extraction uses."""

from __future__ import annotations

__all__ = [
    "C_CONFIG",
    "C_CONFIG_NOOP",
    "C_CONFIG_SECRET",
    "C_CONSTRAINT",
    "C_CONSTRAINT_LOCAL",
    "C_CONSTRAINT_SOFT",
    "C_CORRECTION",
    "C_CORRECTION_DIFF",
    "C_CORRECTION_UNCONFIRMED",
    "C_CORRECTION_VAGUE",
    "C_DECISION",
    "C_DECISION_AGENT",
    "C_DECISION_CONFIRMED",
    "C_DECISION_LOCAL",
    "C_DECISION_UNRESOLVED",
    "C_EXPLICIT",
    "C_EXPLICIT_EVENT",
    "C_FACT",
    "C_FIX_EXPLAINED",
    "C_FIX_FULL",
    "C_FIX_LINT",
    "C_FIX_VERIFIED",
    "C_HANDOFF_EDITED",
    "C_HANDOFF_FIXED",
    "C_HANDOFF_THIN",
    "C_HANDOFF_VERIFIED",
    "C_PREFERENCE",
    "C_PREFERENCE_STRONG",
    "C_PROCEDURE_DONE",
    "C_PROCEDURE_SAID",
    "C_PROCEDURE_USER",
    "C_QUESTION_AGENT",
    "C_QUESTION_USER",
    "C_REWRITE",
    "C_RISK_AGENT",
    "C_RISK_USER",
    "C_TEMPORARY",
    "C_TRIGGER_PREF",
    "C_WORKFLOW",
    "C_WORKFLOW_REPEATED",
    "C_WORKFLOW_REPORTED",
    "C_WORKFLOW_SPECIFIC",
    "MAX_OUT",
    "MAX_RESULT_HEAD",
    "MAX_RESULT_TAIL",
    "MAX_SEEN_IDS",
    "MAX_SENTENCE",
    "MAX_SESSIONS",
    "MAX_TAIL_EVENTS",
    "MAX_TEXT",
    "TITLE_LIMIT",
]

# ------------------------------------------------------------------------ limits

# Constraint: the service must stay responsive on pasted logs and huge tool output.
# Prose is read up to this many characters, tool output only at its head and tail
# (a traceback's last line and a test runner's summary are at the end).
MAX_TEXT = 20_000
MAX_RESULT_HEAD = 6_000
MAX_RESULT_TAIL = 6_000
# A "sentence" longer than this is a paste, not a statement worth keeping.
MAX_SENTENCE = 600
MAX_OUT = 1_200
TITLE_LIMIT = 80
# Carry-over between windows of one session, and how many sessions are remembered.
MAX_TAIL_EVENTS = 150
MAX_SESSIONS = 256
MAX_SEEN_IDS = 20_000

# --------------------------------------------------------------- confidences

C_EXPLICIT_EVENT = 0.95
C_EXPLICIT = 0.92
C_TRIGGER_PREF = 0.9
C_CORRECTION_DIFF = 0.9
C_CORRECTION = 0.88
C_CORRECTION_UNCONFIRMED = 0.78
C_CORRECTION_VAGUE = 0.7
C_FIX_FULL = 0.88
C_FIX_VERIFIED = 0.72
C_FIX_EXPLAINED = 0.65
C_FIX_LINT = 0.55
C_DECISION = 0.85
C_DECISION_CONFIRMED = 0.8
C_DECISION_UNRESOLVED = 0.55
C_DECISION_AGENT = 0.62
C_DECISION_LOCAL = 0.6
C_CONSTRAINT = 0.82
C_CONSTRAINT_SOFT = 0.76
C_CONSTRAINT_LOCAL = 0.6
C_PREFERENCE = 0.8
C_PREFERENCE_STRONG = 0.84  # "I prefer", "always ...": the wording itself says it is a rule
C_FACT = 0.68
C_TEMPORARY = 0.5
C_PROCEDURE_USER = 0.8
C_PROCEDURE_DONE = 0.78
C_PROCEDURE_SAID = 0.6
C_QUESTION_USER = 0.66
C_QUESTION_AGENT = 0.6
C_RISK_USER = 0.68
C_RISK_AGENT = 0.6
C_CONFIG = 0.8
C_CONFIG_SECRET = 0.3
C_CONFIG_NOOP = 0.2
C_WORKFLOW = 0.6
C_WORKFLOW_SPECIFIC = 0.7
C_WORKFLOW_REPEATED = 0.8
C_WORKFLOW_REPORTED = 0.7
C_REWRITE = 0.5
C_HANDOFF_FIXED = 0.8
C_HANDOFF_VERIFIED = 0.75
C_HANDOFF_EDITED = 0.6
C_HANDOFF_THIN = 0.35
