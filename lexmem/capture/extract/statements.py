"""Statement rules and the pass over a window.

The patterns that read a sentence as an explicit note, a correction, a decision, a
constraint, a preference, an open item, a risk or a procedure, and :class:`_Pass`: one
left-to-right pass over a session's events that applies them to prompts and responses,
pairs tool calls with their results to find fixes, and keeps the handoff digest."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lexmem.capture.classify import classify
from lexmem.capture.extract.candidates import CandidateKind, ExtractOptions
from lexmem.capture.extract.corrections import _configuration
from lexmem.capture.extract.text import (
    _AGENT_LEAD,
    _CODE_SPAN,
    _DURABLE,
    _DURABLE_LEAD,
    _DURABLE_TAIL,
    _PLACEHOLDER,
    _PLEASE,
    _SECRET_STATEMENT,
    _TEMPORARY,
    _WS,
    _bound_text,
    _clip,
    _content_words,
    _decapitalise,
    _finish,
    _is_affirmation,
    _norm_quotes,
    _segment,
    _Sentence,
    _strip_lead,
    _third_person,
    _title,
    is_chitchat,
    trigger_phrases,
)
from lexmem.capture.extract.thresholds import (
    C_CONSTRAINT,
    C_CONSTRAINT_LOCAL,
    C_CONSTRAINT_SOFT,
    C_CORRECTION,
    C_CORRECTION_UNCONFIRMED,
    C_CORRECTION_VAGUE,
    C_DECISION,
    C_DECISION_AGENT,
    C_DECISION_CONFIRMED,
    C_DECISION_LOCAL,
    C_DECISION_UNRESOLVED,
    C_EXPLICIT,
    C_EXPLICIT_EVENT,
    C_FACT,
    C_FIX_EXPLAINED,
    C_FIX_FULL,
    C_FIX_LINT,
    C_FIX_VERIFIED,
    C_PREFERENCE,
    C_PREFERENCE_STRONG,
    C_PROCEDURE_DONE,
    C_PROCEDURE_SAID,
    C_PROCEDURE_USER,
    C_QUESTION_AGENT,
    C_QUESTION_USER,
    C_RISK_AGENT,
    C_RISK_USER,
    C_TEMPORARY,
    C_TRIGGER_PREF,
    CLASSIFIER_SURE,
    MAX_AGENT_TEXTS,
    MAX_CAUSE_NOTES,
    MAX_DIGEST_COMMANDS,
    MAX_DIGEST_FILES,
    MAX_OPTIONS,
    MAX_PROPOSALS,
    MAX_SEEN_IDS,
    MAX_SENTENCE,
    MAX_TAIL_EVENTS,
    MAX_TEXT,
    MAX_UNMATCHED_CALLS,
    MIN_EXPLANATION_WORDS,
    MIN_MENTION_CHARS,
    MIN_OBJECT_WORDS,
    MIN_STATEMENT_WORDS,
    OPTION_REF_MAX_WORDS,
    SHORT_READ,
    TITLE_LIMIT,
)
from lexmem.capture.extract.tools import (
    _CHANGE_STAGES,
    _VERIFY_STAGES,
    _Action,
    _display_command,
    _Event,
    _Failure,
    _failure,
    _make_action,
    _outcome,
    _tool_input,
)
from lexmem.capture.extract.workflows import _Step, _steps_of_action, _time_groups, _workflow
from lexmem.models import MemorySource, MemoryType

__all__ = ()  # nothing public: the underscored names are for this package's modules


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
    if result.type is not MemoryType.SEMANTIC and result.confidence < CLASSIFIER_SURE:
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
        self.unmatched: deque[_Action] = deque(maxlen=MAX_UNMATCHED_CALLS)
        # Recent agent output (responses, written text, commands), for corrections.
        self.agent_texts: deque[tuple[int, str]] = deque(maxlen=MAX_AGENT_TEXTS)
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
        return max(min(starts), len(self.ev) - MAX_TAIL_EVENTS)

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
                C_DECISION_CONFIRMED,
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
            if len(text) > MAX_SENTENCE or _QUESTION_END.search(text):
                continue
            if _SECRET_STATEMENT.search(text) or _content_words(text) < MIN_STATEMENT_WORDS:
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
        if _content_words(text) < MIN_STATEMENT_WORDS or _SECRET_STATEMENT.search(text):
            return None
        return _Draft(
            CandidateKind.EXPLICIT,
            _title("Remember", _third_person(body)),
            _bound_text(text),
            _explicit_type(text),
            C_EXPLICIT,
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
        if len(needle) < MIN_MENTION_CHARS:
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
            return self._corr_draft(e, text, None, C_CORRECTION, "correction-not-how"), used_next
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
            conf = C_CORRECTION if hit is not None or marked else C_CORRECTION_UNCONFIRMED
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
                e, text, act.call.pos, C_CORRECTION_VAGUE, "correction-dont-repeat"
            ), used_next
        m_xy = _X_NOT_Y.match(body)
        if m_xy and _content_words(m_xy.group("good")) >= MIN_OBJECT_WORDS:
            good, bad = m_xy.group("good").strip(), m_xy.group("bad").strip()
            hit = self._agent_mentions(bad)
            resolved = self._resolve_pronoun(good) if _PRONOUN_BODY.match(good) else None
            text = _finish(f"{resolved or good}, not {bad}")
            if hit is None and not marked and _RULE_START.match(good):
                return None  # "use tabs, not spaces" as a plain preference: handled later
            conf = C_CORRECTION if hit is not None or marked else C_CORRECTION_UNCONFIRMED
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
                    e, resolved[0], resolved[1], C_CORRECTION, "correction-substitute"
                ), used_next
            text = _finish(body)
            ctx = self._last_agent_sentence()
            if ctx:
                text += f" (Correcting the agent, who had said: “{_clip(ctx, 160)}”)"
            return self._corr_draft(
                e, text, None, C_CORRECTION_VAGUE, "correction-vague"
            ), used_next
        text = _finish(_third_person(body))
        if _content_words(text) < MIN_STATEMENT_WORDS:
            return None
        return self._corr_draft(e, text, None, C_CORRECTION, "correction-restated"), used_next

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
        conf = C_DECISION
        obj_part = statement.split(" ", 1)[1] if " " in statement else statement
        if _OPTION_REF.search(obj_part) or _ANAPHORA.match(obj_part):
            resolved = self._resolve_option(obj_part)
            if resolved is not None:
                if len(obj_part.split()) <= OPTION_REF_MAX_WORDS:
                    # "go with option B" -> the option's own words, with the label.
                    verb = statement.split(" ", 1)[0]
                    statement = f"{verb} {_decapitalise(resolved[0])} ({obj_part})"
                else:
                    statement = f"{statement} ({resolved[0]})"
                ids = sorted({resolved[1], e.pos})
            else:
                conf = C_DECISION_UNRESOLVED
        if _TEMPORARY.search(core):
            conf = min(conf, C_TEMPORARY)
        elif _LOCAL_SCOPE.search(statement):
            # "let's use a dict here": a choice about the code in front of us.
            conf = min(conf, C_DECISION_LOCAL)
        if _content_words(statement) < MIN_OBJECT_WORDS:
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
        conf = C_CONSTRAINT
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
            conf = C_CONSTRAINT_LOCAL if _DEICTIC.search(rest.group("rest")) else C_CONSTRAINT
        elif _ONLY.match(core):
            rule = "constraint-only"
            conf = C_CONSTRAINT if _DURABLE.search(core) or durable else C_CONSTRAINT_SOFT
        elif (m := _WE_NEVER.match(core)) is not None and m.group("adv").lower() != "always":
            rule = "constraint-we-never"
        elif _MUST.search(core) and not _MUST_SPECULATE.search(core):
            rule = "constraint-must"
        elif _NEED_DURABLE.search(core):
            rule = "constraint-need"
        elif _PROJECT_FACT.match(core) and not _FACT_NOISE.search(core):
            rule = "project-fact"
            conf = C_FACT
            # "We use Datadog for alerts, I'll add one there": the fact, not the plan.
            core = _FACT_TAIL.split(core, maxsplit=1)[0]
        if not rule:
            return None
        if _TEMPORARY.search(core) and not durable:
            conf = C_TEMPORARY
        if durable or triggers:
            conf = max(conf, C_TRIGGER_PREF if triggers else C_CONSTRAINT)
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
        conf = C_PREFERENCE
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
                conf = C_PREFERENCE_STRONG
        elif _ALWAYS.match(core):
            rule = "preference-always"
            conf = C_PREFERENCE_STRONG
        elif _PREFER_IMP.match(core):
            rule = "preference-prefer"
            conf = C_PREFERENCE_STRONG
        elif _STYLE_RULE.match(core):
            rule = "preference-style"
        elif _IMPERATIVE_RULE.match(core) and (durable or _DURABLE.search(core)):
            rule = "preference-durable-imperative"
        elif (m_xy := _X_NOT_Y.match(core)) and _IMPERATIVE_RULE.match(m_xy.group("good")):
            rule = "preference-x-not-y"
        if not rule:
            return None
        if triggers or durable:
            conf = C_TRIGGER_PREF
        if _TEMPORARY.search(core) and not durable:
            conf = C_TEMPORARY
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
            conf = C_QUESTION_USER if user else C_QUESTION_AGENT
            mtype = MemoryType.EPISODIC
        else:
            conf = C_RISK_USER if user else C_RISK_AGENT
            mtype = MemoryType.SEMANTIC
        bare = _finish(statement)
        # "TODO: handle pagination ..." keeps its label in the text.
        text = f"{prefix}: {bare}" if statement is not core else bare
        if _content_words(bare) < MIN_STATEMENT_WORDS:
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
        if _content_words(goal) < MIN_OBJECT_WORDS or re.match(
            r"(?i)(?:do|fix|be|make)\s+(?:this|that|it)\b", goal
        ):
            return None
        text = _finish(f"To {goal}, {_decapitalise(steps)}")
        commands = [c.strip("`").lstrip("$ ").strip() for c in _CODE_SPAN.findall(text)]
        carried = self._carried_out(commands)
        conf = C_PROCEDURE_USER if user else C_PROCEDURE_DONE if carried else C_PROCEDURE_SAID
        return _Draft(
            CandidateKind.PROCEDURE,
            _clip(f"How to {goal}", TITLE_LIMIT),
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
                if _CAUSE.search(s.text) and len(self.notes) < MAX_CAUSE_NOTES:
                    self.notes.append((e.pos, s.text))
        self.proposals = []
        self.options = {}
        self.option_order = []
        for i, s in enumerate(sentences):
            text = s.text.strip()
            if i in used or len(text) > MAX_SENTENCE:
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
                        C_DECISION_AGENT,
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
        self.agent_texts.append((e.pos, _norm_quotes(e.content[:MAX_TEXT]).lower()))

    def _note_option(self, e: _Event, s: _Sentence) -> None:
        m = _OPTION_LINE.match(s.text.strip())
        if m and (s.list_item or s.text.lower().startswith("option")):
            label = m.group("label").upper()
            if label not in self.options and len(self.options) < MAX_OPTIONS:
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
        if (
            tentative
            and _content_words(statement) >= MIN_OBJECT_WORDS
            and len(self.proposals) < MAX_PROPOSALS
        ):
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
                if len(s.text) > MAX_SENTENCE:
                    continue
                if _content_words(s.text) < MIN_EXPLANATION_WORDS:
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
            conf, rule = C_FIX_FULL, "fix-verified-explained"
        elif fix.verify is not None:
            conf, rule = C_FIX_VERIFIED, "fix-verified"
        else:
            conf, rule = C_FIX_EXPLAINED, "fix-explained"
        if first.action.stage in ("lint", "format"):
            # A lint finding fixed is rarely worth recalling in another session.
            conf = min(conf, C_FIX_LINT)
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
                _clip(title, TITLE_LIMIT),
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
        body = _strip_lead(_norm_quotes(e.content.strip()[:MAX_TEXT]))
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
                _clip(title, TITLE_LIMIT),
                _bound_text(text),
                _explicit_type(text),
                C_EXPLICIT_EVENT,
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
        if len(d.seen) < MAX_SEEN_IDS:
            d.seen.add(e.id)
        d.project = d.project or e.project
        d.agent = e.agent if d.agent == "generic" else d.agent
        if d.first_ts is None and e.ts is not None:
            d.first_ts = e.ts
        if e.type == "prompt" and not d.goal and not is_chitchat(e.content):
            sentences = [s.text for s in _segment(e.content) if not s.text.startswith("`")]
            d.goal = _clip(" ".join(sentences[:2]) or e.content, 200)
            d.goal_id = e.id
        elif (
            e.type == "response" and _content_words(e.content[:SHORT_READ]) >= MIN_EXPLANATION_WORDS
        ):
            sentences = [s.text for s in _segment(e.content)[:2]]
            d.outcome = _clip(" ".join(sentences), 300)
            d.outcome_id = e.id
        elif e.type == "tool_result":
            action = self.action_at.get(e.pos)
            if action is None or action.kind != "shell" or action.stage is None:
                return
            if (
                len(d.commands) < MAX_DIGEST_COMMANDS
                or _display_command(action.command) in d.commands
            ):
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
                    if len(d.files) < MAX_DIGEST_FILES:
                        d.files[f] = None
            elif (
                action.kind == "shell"
                and action.stage is not None
                and len(d.commands) < MAX_DIGEST_COMMANDS
            ):
                d.commands.setdefault(_display_command(action.command), None)
