"""Every threshold, limit and confidence extraction uses, in one place.

A candidate's confidence is one of the ``C_*`` values below (a rule may lower it to
another, never raise it past what it says). The writer (:mod:`lexmem.service.pipeline`)
keeps a candidate when its confidence reaches the capture mode's threshold,
:data:`MODE_THRESHOLDS`: ``assist`` keeps 0.7 and up, ``full`` 0.5 and up. The bands
(see :mod:`lexmem.capture.extract`): 0.90-0.95 explicit statements, 0.75-0.88 what the
user states or confirms and what was verified, 0.50-0.74 what is probably worth keeping
but less certain, below 0.5 the audit log only.

The other numbers are the rules' thresholds (minimum words of substance, how similar a
rewrite must be to read as an edit, how much of a run must be nameable to be a workflow)
and the limits that keep extraction linear in the size of a window.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "AFFIRMATION_MAX_WORDS",
    "AFFIRMATION_READ",
    "ASSIST_THRESHOLD",
    "CHITCHAT_MAX_WORDS",
    "CLASSIFIER_SURE",
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
    "DIFF_MAX_EDITS",
    "DIFF_MAX_TOKENS",
    "DIFF_RULE_MAX_WORDS",
    "EDIT_SIMILARITY",
    "FULL_THRESHOLD",
    "HANDOFF_DECISION",
    "MAX_AGENT_TEXTS",
    "MAX_CAUSE_NOTES",
    "MAX_CODE_LINES",
    "MAX_DIGEST_COMMANDS",
    "MAX_DIGEST_FILES",
    "MAX_OPTIONS",
    "MAX_OUT",
    "MAX_PER_TURN",
    "MAX_PROPOSALS",
    "MAX_RESULT_HEAD",
    "MAX_RESULT_TAIL",
    "MAX_SEEN_IDS",
    "MAX_SENTENCE",
    "MAX_SENTENCES",
    "MAX_SESSIONS",
    "MAX_TAIL_EVENTS",
    "MAX_TEXT",
    "MAX_UNMATCHED_CALLS",
    "MIN_ACTIONS_FOR_PATTERN",
    "MIN_EXPLANATION_WORDS",
    "MIN_MENTION_CHARS",
    "MIN_OBJECT_WORDS",
    "MIN_STATEMENT_WORDS",
    "MODE_THRESHOLDS",
    "OPTION_REF_MAX_WORDS",
    "PATTERN_WINDOW_MINUTES",
    "SHORT_READ",
    "TITLE_LIMIT",
    "WORKFLOW_MIN_NAMED_SHARE",
    "WORKFLOW_MIN_REPEATS",
    "WORKFLOW_MIN_STAGES",
    "WORKFLOW_REPEAT_STAGES",
]

# ------------------------------------------------------------- capture modes

# ``assist`` (the default) keeps candidates of this confidence and up: seed 000's
# MinExtractionConfidence.
ASSIST_THRESHOLD = 0.7
# ``full`` keeps candidates of this confidence and up.
FULL_THRESHOLD = 0.5
# What the writer compares a candidate's confidence with, by capture mode. A mode not
# named here (``off``) keeps nothing automatic.
MODE_THRESHOLDS: Mapping[str, float] = MappingProxyType(
    {"assist": ASSIST_THRESHOLD, "full": FULL_THRESHOLD}
)

# --------------------------------------------------------------- confidences

# ``explicit`` events (``lexmem remember``, MCP ``save_memory``, the tray).
C_EXPLICIT_EVENT = 0.95
# "Remember that ...", "note that ...", "keep in mind ..." in a prompt.
C_EXPLICIT = 0.92
# A constraint or preference stated with a trigger phrase ("from now on", "going
# forward"): also the floor for a durable constraint.
C_TRIGGER_PREF = 0.9
# A correction from a word diff (``Extractor.correction``).
C_CORRECTION_DIFF = 0.9
# A correction in conversation that names what the agent said or did, or is marked as one
# ("no, ...", "actually ...").
C_CORRECTION = 0.88
# "Don't X, Y" or "X, not Y" when the agent never mentioned X: maybe a plain rule.
C_CORRECTION_UNCONFIRMED = 0.78
# A correction that says only "not that" ("don't do that again", "it's wrong").
C_CORRECTION_VAGUE = 0.7
# A fix: the failing command passes again and the agent explained the cause or the fix.
C_FIX_FULL = 0.88
# A fix: the failing command passes again, with no explanation.
C_FIX_VERIFIED = 0.72
# A fix: the agent explained cause and fix, with no verifying run.
C_FIX_EXPLAINED = 0.65
# The most a fixed lint or format finding gets: rarely worth recalling elsewhere.
C_FIX_LINT = 0.55
# A decision the user states ("let's go with X", "we decided to ...").
C_DECISION = 0.85
# The agent's proposal that the user's next message confirms ("sounds good").
C_DECISION_CONFIRMED = 0.8
# A decision naming an option ("go with option B") that cannot be found.
C_DECISION_UNRESOLVED = 0.55
# A decision the agent labels in its response ("Decision: ...").
C_DECISION_AGENT = 0.62
# The most a decision about the code at hand gets ("let's use a dict here").
C_DECISION_LOCAL = 0.6
# A rule ("never ...", "we must ...", "don't use mocks in integration tests").
C_CONSTRAINT = 0.82
# "Only use X" without a word saying it lasts.
C_CONSTRAINT_SOFT = 0.76
# "Don't touch this file": about the task at hand.
C_CONSTRAINT_LOCAL = 0.6
# A preference ("keep chapter titles short", "I like ...").
C_PREFERENCE = 0.8
# "I prefer", "always ...": the wording itself says it is a rule.
C_PREFERENCE_STRONG = 0.84
# A fact about the project ("we deploy on Fly.io", "our API uses ...").
C_FACT = 0.68
# The most a statement limited in time gets ("for now", "this time", "today").
C_TEMPORARY = 0.5
# A procedure the user states ("to release, run `make release`").
C_PROCEDURE_USER = 0.8
# A procedure the agent states and whose commands ran and succeeded in the window.
C_PROCEDURE_DONE = 0.78
# A procedure the agent only states.
C_PROCEDURE_SAID = 0.6
# An open question or TODO, from the user or from the agent.
C_QUESTION_USER = 0.66
C_QUESTION_AGENT = 0.6
# A risk ("this will break if ...", "Risk: ..."), from the user or from the agent.
C_RISK_USER = 0.68
C_RISK_AGENT = 0.6
# A configuration change ("User prefers dark mode").
C_CONFIG = 0.8
# A setting whose name looks like a credential: the audit log only, value withheld.
C_CONFIG_SECRET = 0.3
# A setting "changed" to the value it had.
C_CONFIG_NOOP = 0.2
# A workflow observed once, of generic steps ("npm test, npm run build, git push").
C_WORKFLOW = 0.6
# A workflow observed once that runs a project's own entry point (a make target, a script).
C_WORKFLOW_SPECIFIC = 0.7
# A workflow whose last stages were seen at least twice in the window.
C_WORKFLOW_REPEATED = 0.8
# A workflow from reported actions (``Extractor.workflow``).
C_WORKFLOW_REPORTED = 0.7
# The user rewrote the agent's text wholesale: a note, not a rule.
C_REWRITE = 0.5
# A session's handoff: edits verified by a passing run, with a fix among them.
C_HANDOFF_FIXED = 0.8
# A session's handoff: edits verified by a passing run.
C_HANDOFF_VERIFIED = 0.75
# A session's handoff: edits with no verifying run.
C_HANDOFF_EDITED = 0.6
# A session's handoff: no edits (the audit log only).
C_HANDOFF_THIN = 0.35

# ------------------------------------------------------------ rule thresholds

# A message of at most this many words, all filler ("ok thanks", "great job"), is
# chit-chat.
CHITCHAT_MAX_WORDS = 12
# How much of a message is read to tell whether it is chit-chat, or whether a response
# says enough to stand as the session's outcome.
SHORT_READ = 2_000
# A reply of at most this many words that starts with a yes ("sounds good") confirms the
# agent's proposal; only its first AFFIRMATION_READ characters are read.
AFFIRMATION_MAX_WORDS = 14
AFFIRMATION_READ = 400
# Words of substance (stop words and redaction placeholders do not count) a user's
# sentence, an explicit note, a restated correction or an open item needs.
MIN_STATEMENT_WORDS = 2
# Words of substance the object of a decision or a proposal, the goal of a procedure,
# or the right side of "X, not Y" needs.
MIN_OBJECT_WORDS = 1
# Words of substance a sentence needs to explain a fix ("Fixed." does not), and a
# response to be kept as a session's outcome.
MIN_EXPLANATION_WORDS = 3
# The shortest phrase looked for in the agent's recent output (to tell whether a
# correction is about what the agent said).
MIN_MENTION_CHARS = 2
# "Go with option B" of at most this many words is rewritten with the option's own words;
# a longer sentence keeps its words and names the option after them.
OPTION_REF_MAX_WORDS = 4
# An explicit note takes the classifier's type only when the classifier is this sure;
# otherwise it is semantic (a stated fact).
CLASSIFIER_SURE = 0.6
# Decisions at least this confident are listed in the session's handoff.
HANDOFF_DECISION = 0.75
# A correction's word diff: a middle part longer than this many tokens (on either side)
# is not diffed, and reads as a rewrite.
DIFF_MAX_TOKENS = 400
# Below this similarity (difflib's ratio over the words), or with more than
# DIFF_MAX_EDITS separate edits, the user rewrote the text rather than corrected it.
EDIT_SIMILARITY = 0.4
DIFF_MAX_EDITS = 4
# One replaced phrase in a sentence of at most this many words (and no comma) gives the
# corrected sentence itself as the rule: "API uses API keys, not OAuth."
DIFF_RULE_MAX_WORDS = 15
# Workflow patterns (seed 000's MemoryCaptureOptions; ``ExtractOptions``' defaults): the
# fewest meaningful actions, within how many minutes.
MIN_ACTIONS_FOR_PATTERN = 3
PATTERN_WINDOW_MINUTES = 30
# At most this many candidates from one turn (seed 000's MaxMemoriesPerTurn), the most
# confident first; explicit events, configuration changes and workflows are not counted.
MAX_PER_TURN = 3
# At least this share of a run's steps must be ones a workflow can name.
WORKFLOW_MIN_NAMED_SHARE = 0.5
# A workflow has at least this many distinct stages (or ``min_actions_for_pattern``
# when that is fewer).
WORKFLOW_MIN_STAGES = 3
# A workflow's last WORKFLOW_REPEAT_STAGES stages seen at least WORKFLOW_MIN_REPEATS
# times in the window make it a repeated one.
WORKFLOW_REPEAT_STAGES = 3
WORKFLOW_MIN_REPEATS = 2

# ------------------------------------------------------------------------ limits

# Constraint: the service must stay responsive on pasted logs and huge tool output.
# Prose is read up to this many characters, tool output only at its head and tail
# (a traceback's last line and a test runner's summary are at the end).
MAX_TEXT = 20_000
MAX_RESULT_HEAD = 6_000
MAX_RESULT_TAIL = 6_000
# A "sentence" longer than this is a paste, not a statement worth keeping.
MAX_SENTENCE = 600
# A candidate's text is cut, at a sentence, to this many characters; its title to
# TITLE_LIMIT.
MAX_OUT = 1_200
TITLE_LIMIT = 80
# Segmenting reads at most this many sentences of one text, and keeps this many lines
# of a fenced code block.
MAX_SENTENCES = 400
MAX_CODE_LINES = 40
# Carry-over between windows of one session, and how many sessions are remembered.
MAX_TAIL_EVENTS = 150
MAX_SESSIONS = 256
MAX_SEEN_IDS = 20_000
# What one pass keeps in view: tool calls still waiting for their result, the agent's
# recent output (for corrections), the cause sentences of an open failure, the options
# and proposals of the last response.
MAX_UNMATCHED_CALLS = 16
MAX_AGENT_TEXTS = 8
MAX_CAUSE_NOTES = 6
MAX_OPTIONS = 10
MAX_PROPOSALS = 5
# What the handoff digest collects over a session.
MAX_DIGEST_COMMANDS = 40
MAX_DIGEST_FILES = 200
