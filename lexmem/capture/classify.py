"""Rule-based memory-type classification (seed 001).

Decides whether a piece of content is SEMANTIC (a standing fact, preference,
definition or rule), EPISODIC (a specific event anchored in time or narrative)
or PROCEDURAL (how to do something: steps, commands, workflows).

Why not the specification's naive algorithm (hits / number of patterns x weight):
dividing by the size of a pattern list punishes a type for having many ways to be
recognised, so one clear cue ("last week") scored lower than a stray "is" and the
spec's own scenarios failed. Here each *cue category* carries its own weight,
repeated hits add with diminishing returns (so long text cannot run away with a
score), and confidence is derived from both the winner's evidence and its margin
over the runner-up. With no cue at all we answer SEMANTIC at low confidence, so
that callers fall back to an LLM (their threshold is 0.7).

Standard library only; every pattern has bounded repetition and is applied once
over the text, so classification is linear in the length of the content, and only
the first 20,000 characters of very long content are read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from lexmem.models import ClassificationMethod, MemoryType, TypeClassification

__all__ = ["RuleBasedClassifier", "classify"]

_S = MemoryType.SEMANTIC
_E = MemoryType.EPISODIC
_P = MemoryType.PROCEDURAL

# Confidence shaping. A single strong cue (weight >= 2) with no competition lands
# just above the 0.7 LLM-fallback threshold; a single weak cue (weight 1) does not.
_MAX_CONFIDENCE = 0.95
_NO_CUE_CONFIDENCE = 0.3
_BASE = 0.2
_SPAN = 0.75
_EVIDENCE_SCALE = 1.6  # score at which evidence reaches 1 - 1/e
# Each further hit of the same category counts for this fraction of the previous
# one: 1, 0.5, 0.25, ... so a category is worth at most 2x its weight.
_DECAY = 0.5
_MAX_HITS_PER_CATEGORY = 6
# Only the head of very long content is read. Every category saturates after a few
# hits, so text past this point could barely move the scores; reading it would
# only cost time (about 0.25 s per 100k characters). Memories are usually chunks
# far shorter than this.
_MAX_CHARS = 20_000

# --------------------------------------------------------------------------- words

_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december)"
)
_MONTH_ABBR = r"(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?"
_NUMBER_WORD = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"a\s+few|a\s+couple\s+of|couple\s+of|several|a\s+handful\s+of)"
)
_TIME_UNIT = r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|sprints?)"

# Verbs that commonly open an instruction. Deliberately excludes words that are more
# often nouns or names at the start of a fact ("Go", "Test", "Keep", "Prefer").
_IMPERATIVE = (
    r"(?:run|re-?run|install|uninstall|use|click|double-click|right-click|open|close|"
    r"set|unset|create|add|copy|paste|start|stop|restart|navigate|go\s+to|type|enter|"
    r"select|choose|press|hit|tap|edit|update|upgrade|delete|remove|check|make\s+sure|"
    r"ensure|build|rebuild|deploy|redeploy|push|pull|merge|squash|rebase|generate|"
    r"regenerate|configure|enable|disable|export|import|call|execute|launch|activate|"
    r"deactivate|bump|tag|write|drop|restore|attach|dump|reproduce|verify|back\s+up|"
    r"clone|fetch|commit|mark|reload|reboot|log\s+in|log\s+out|sign\s+in|upload|"
    r"download|save|rename|move|replace|register|follow|wait|sort|apply|grant|revoke|"
    r"rotate|submit|fill\s+in|pick|drag|scroll|insert|append|point|send|translate|"
    r"freeze|announce|review|inspect|look\s+at|search|find|grep|kill|clear|purge|"
    r"flush|source|cd|mkdir|resolve|fix|make|initiali[sz]e|init|provision|bootstrap|"
    r"compile|lint|format|cherry-pick|stash|checkout|switch\s+to|create|define|"
    r"specify|pass|pipe|mount|unmount|seed|migrate|invoke|trigger|schedule|"
    r"document|record|note|remember\s+to|don'?t\s+forget\s+to|try|avoid)"
)

# Where an instruction can begin: start of text or line (after markdown list or
# heading markers), after sentence punctuation, after a comma or "and" (lists of
# steps, and "If X, run Y" / "Before merging, squash ..."), or after a sequence word.
_CLAUSE_START = (
    r"(?:^|(?<=[.!?;:])\s+|(?<=,)\s+(?:and\s+|or\s+)?|\band\s+|"
    r"\b(?:then|next|first|finally|afterwards|now|also)\s*,?\s+)"
    r"(?:[-*+•]\s+|\d{1,3}[.)]\s+|#{1,6}\s+|>\s+)?"
)

# Commands whose name followed by a subcommand or flag reads as something to run.
_CLI = (
    r"(?:npm|npx|pnpm|yarn|pip3?|pipx|uv|poetry|git|docker|docker-compose|kubectl|helm|"
    r"cargo|brew|apt(?:-get)?|curl|wget|ssh|scp|rsync|systemctl|python3?|pytest|ruff|"
    r"mypy|terraform|aws|gcloud|az|alembic|mkdocs|sudo|chmod|mkdir|rm|cp|mv|ls|tar|"
    r"openssl|psql|redis-cli|gh|go|make|node|deno|bun|rustup|conda|tox|nox|just)"
)

# Common irregular past forms ("was"/"were"/"had" are handled separately, they
# narrate too weakly to count as events).
_PAST_IRREGULAR = (
    r"(?:broke|ran|went|found|chose|saw|lost|made|took|wrote|rewrote|overwrote|forgot|"
    r"began|got|did|came|told|spent|caught|fell|built|rebuilt|sent|shut|left|kept|"
    r"thought|brought|bought|drove|flew|froze|gave|grew|held|knew|led|meant|met|paid|"
    r"rode|rose|sold|shook|slid|spoke|stole|stood|struck|swore|taught|tore|threw|"
    r"understood|woke|won|withdrew|undid|redid)"
)

# "-ed" words that are not past-tense events (nouns, adverbs, stative adjectives).
_NOT_EVENT_ED = frozenset(
    {
        "need", "speed", "feed", "seed", "bed", "red", "embed", "proceed", "exceed",
        "succeed", "indeed", "hundred", "based", "shared", "nested", "detailed",
        "limited", "advanced", "dedicated", "unused", "deprecated", "expected",
        "required", "preferred", "liked", "disliked", "wanted", "loved", "hated",
        "named", "called", "related", "interested", "experienced", "supported",
        "used", "allowed", "bred", "shed", "weed", "breed", "greed", "heed",
        "sacred", "naked", "wicked", "rugged", "ragged", "kindred", "tired",
        "skilled", "talented", "balanced", "sophisticated", "complicated",
        "automated", "outdated", "dated", "biased", "focused", "aged",
        "distributed", "centralized", "centralised", "typed", "untyped", "hosted",
        "self-hosted", "managed", "reserved", "licensed", "signed", "unsigned",
        "encrypted", "compressed", "versioned", "pinned", "scheduled", "sized",
        "colored", "coloured", "mixed", "fixed-width", "embedded", "red-flagged",
    }
)  # fmt: skip

_DETERMINERS = frozenset(
    {"a", "an", "the", "this", "that", "these", "those", "its", "our", "your", "their",
     "my", "his", "her", "every", "each", "any", "no", "all", "some"}
)  # fmt: skip

_BE_PRESENT = frozenset({"is", "are", "be", "been", "being", "am", "isn't", "aren't", "get"})

_FLAGS = re.IGNORECASE | re.MULTILINE
_PREV_WORD = re.compile(r"([\w'-]+)\W*$")


@dataclass(frozen=True, slots=True)
class _Cue:
    """One category of evidence: the pattern, the type it supports, its weight."""

    label: str
    type: MemoryType
    weight: float
    pattern: re.Pattern[str]
    # The group whose span is the cue proper: it is quoted in the rationale and
    # used to stop two cues of the same type from counting the same words.
    group: int = 0
    quote: bool = True
    accept: Callable[[str, re.Match[str]], bool] | None = None


def _cue(
    label: str,
    mtype: MemoryType,
    weight: float,
    regex: str,
    group: int = 0,
    *,
    quote: bool = True,
    accept: Callable[[str, re.Match[str]], bool] | None = None,
) -> _Cue:
    return _Cue(label, mtype, weight, re.compile(regex, _FLAGS), group, quote, accept)


def _prev_word(text: str, pos: int) -> str:
    """The word just before ``pos`` (looks back a bounded window to stay linear)."""
    m = _PREV_WORD.search(text[max(0, pos - 40) : pos])
    return m.group(1).lower() if m else ""


def _is_event_verb(text: str, m: re.Match[str]) -> bool:
    """Whether a past-tense form reads as an event rather than a state or adjective."""
    word = m.group(1).lower()
    if word in _NOT_EVENT_ED:
        return False
    # "is managed", "the generated file": a passive state or an adjective.
    prev = _prev_word(text, m.start(1))
    return prev not in _BE_PRESENT and prev not in _DETERMINERS


_CUES: tuple[_Cue, ...] = (
    # ---------------------------------------------------------------- EPISODIC
    # Explicit anchors in time are the strongest sign that something *happened*.
    _cue(
        "temporal marker",
        _E,
        2.5,
        r"\b(?:yesterday|last\s+night|this\s+(?:morning|afternoon|evening)|"
        r"earlier\s+(?:today|this\s+(?:week|month|year|morning|afternoon|sprint))|"
        r"the\s+other\s+day|just\s+now|today|tonight|"
        r"last\s+(?:week|month|year|night|sprint|quarter|time|release|weekend|"
        + _WEEKDAY
        + r")|"
        + _NUMBER_WORD
        + r"\s+"
        + _TIME_UNIT
        + r"\s+ago|"
        r"on\s+(?:"
        + _WEEKDAY
        + r"|(?:"
        + _MONTH
        + r"|"
        + _MONTH_ABBR
        + r")\s+\d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?"
        + _MONTH
        + r"|the\s+\d{1,2}(?:st|nd|rd|th))|"
        + _WEEKDAY
        + r"'s|in\s+"
        + _MONTH
        + r"(?:\s+\d{4})?|in\s+(?:19|20)\d{2})\b"
        r"|\b(?:19|20)\d{2}-\d{2}-\d{2}\b",
    ),
    # "we migrated", "I accidentally deleted": a narrator doing something in the past.
    _cue(
        "narrated past action",
        _E,
        2.0,
        r"\b(?:i|we|they|he|she|it|claude|someone|nobody|anyone|everyone|"
        r"the\s+(?:agent|team|customer|client|vendor|assistant))"
        r"\s+(?:\w+ly\s+)?([a-z]{2,}ed|" + _PAST_IRREGULAR + r"|had)\b",
        group=1,
        accept=_is_event_verb,
    ),
    # Occasions: a named event is something that took place.
    _cue(
        "event",
        _E,
        1.5,
        r"\b(?:(?:during|in|at|after)\s+(?:the\s+|our\s+|this\s+|that\s+|\w+'s\s+)?)?"
        r"(incident|outage|postmortem|post-mortem|retro|retrospective|standup|stand-up|"
        r"meeting|demo|war\s+room|hackathon)\b",
        group=1,
    ),
    # Past-tense verbs without a narrator ("the deploy failed", "the build broke"):
    # evidence of an event, but weaker on its own.
    _cue(
        "past-tense event verb",
        _E,
        1.25,
        r"\b([a-z][a-z'-]{1,}ed|" + _PAST_IRREGULAR + r")\b",
        group=1,
        accept=_is_event_verb,
    ),
    # Narrative connectives that relate one past happening to another.
    _cue(
        "narrative connective",
        _E,
        1.0,
        r"\b(?:when\s+(?:we|i|they)\s+\w+ed|while\s+\w+ing\b|before\s+anyone\s+noticed|"
        r"turned\s+out|at\s+the\s+time|back\s+then|had\s+to)\b",
    ),
    # "was"/"were" narrate, but weakly: facts are told in the present tense.
    _cue("past-tense narration", _E, 0.75, r"\b(was|were|wasn't|weren't)\b", group=1),
    # ---------------------------------------------------------------- PROCEDURAL
    # "To deploy, ..." / "To reset the database: ..." - a goal followed by the means.
    _cue(
        "purpose clause",
        _P,
        3.0,
        r"(?:^|(?<=[.!?\n])\s*)(?:in\s+order\s+)?(to\s+[a-z][\w-]*)[^,.:;\n]{0,100}[,:]",
        group=1,
    ),
    _cue(
        "how-to",
        _P,
        2.5,
        r"\bhow\s+to\b|\b(?:steps?\s+(?:to|for)|step\s+\d+|checklist|runbook|playbook|"
        r"recipe|procedure|instructions|walkthrough)\b",
    ),
    _cue(
        "numbered list",
        _P,
        2.5,
        r"(?:^|(?<=\s))(1[.)])(?=\s+\S[^\n]{0,200}?(?:\s|^)2[.)]\s+\S)",
        group=1,
        quote=False,
    ),
    _cue(
        "imperative",
        _P,
        2.0,
        # Not when it is a subject ("Build times are slow") or a label ("Note: ...").
        _CLAUSE_START + r"(" + _IMPERATIVE + r")\b(?!\s+(?:is|are|was|were)\b|\s*:)",
        group=1,
    ),
    _cue(
        "sequence",
        _P,
        1.5,
        r"\b(?:first(?:ly)?|second(?:ly)?|next|finally|afterwards|after\s+that|"
        r"once\s+(?:done|that|it|this)(?:\s+\w+)?)(?=\s*[,;:])|\bthen\b|\bfollowed\s+by\b|"
        r"\b(?:first|next|finally)(?=\s+" + _IMPERATIVE + r"\b)|"
        r"(?<=\w )first(?=\s*[,;]|\s+then\b)",
    ),
    _cue("code", _P, 1.5, r"```|`[^`\n]{1,200}`", quote=False),
    _cue(
        "command",
        _P,
        1.5,
        r"(?:^|(?<=[\s'\"`(]))(\$\s+\S+|"
        + _CLI
        + r"\s+(?!sure\b|to\b|is\b|are\b|was\b|the\b|a\b|an\b|and\b|or\b|in\b|of\b|for\b|it\b)"
        r"(?:-{1,2}[\w-]+|[a-z][\w:./-]*))|(?<=\s)--?[a-z][\w-]+=?|&&|\|\s*(?:grep|xargs|sort)\b",
        group=1,
    ),
    _cue("arrow", _P, 1.5, r"(?<=\s)(?:->|=>|→|⟶|>>)(?=\s)"),
    _cue(
        "instruction phrase",
        _P,
        1.5,
        r"\b(?:you\s+(?:need|have)\s+to|you\s+(?:can|will)\s+\w+|you'll|"
        r"make\s+sure|ensure\s+that|remember\s+to|don'?t\s+forget\s+to|"
        r"before\s+(?:you\s+\w+|\w+ing)|whenever\s+(?:you|the)\b)",
    ),
    _cue(
        "bulleted list",
        _P,
        1.0,
        r"^[ \t]*([-*+•])(?=[ \t]+\S[^\n]{0,300}\n[ \t]*[-*+•][ \t]+\S)",
        group=1,
        quote=False,
    ),
    # ---------------------------------------------------------------- SEMANTIC
    # Preferences hold even when reported in the past tense ("Jonas preferred ...").
    _cue(
        "preference",
        _S,
        2.5,
        r"\b(?:prefer(?:s|red)?|likes|liked|dislikes?|disliked|loves|hates|"
        r"favou?rite|(?:would|'d)\s+rather|wants|wanted|"
        r"(?:i|we|they|you|users?)\s+(?:really\s+)?(?:like|love|hate|want))\b",
    ),
    # A decision stated with its standing consequence is a fact, not an episode:
    # "we decided that all services will be written in TypeScript".
    _cue(
        "standing decision",
        _S,
        2.5,
        r"\b(?:decided|agreed|settled\s+on|resolved|ruled)\b[^.;\n]{0,80}?"
        r"\b(?:will|shall|should|must|going\s+forward|from\s+now\s+on)\b",
    ),
    # A lesson learned reported with a present-tense claim is a standing fact:
    # "the outage taught us that retries are dangerous".
    _cue(
        "lesson learned",
        _S,
        2.0,
        r"\b(?:taught\s+(?:us|me|them)|learn(?:ed|t)|found|realis(?:ed)|realiz(?:ed)|"
        r"noticed|discovered|confirmed|showed|proved)\s+that\b[^.;\n]{0,80}?"
        r"\b(?:is|are|isn't|aren't|does|doesn't|do|don't|can't|cannot|always|never)\b",
    ),
    # Present-tense stative verbs describe how things *are*, not what happened.
    _cue(
        "stative verb",
        _S,
        2.0,
        r"(?<=[\w)'’\"`] )(uses|use|requires|require|depends\s+on|depend\s+on|supports|"
        r"support|contains|includes|owns|own|mirrors|needs|relies\s+on|rely\s+on|"
        r"consists\s+of|belongs\s+to|stores|handles|expects|defaults\s+to|runs\s+on|"
        r"lives\s+in|targets|works|talks\s+to|allows|lacks|provides|exposes|means|"
        r"has|have|follows|costs|ships\s+with|integrates\s+with|is\s+built\s+(?:on|with)|"
        r"is\s+written\s+in|are\s+written\s+in|is\s+based\s+on|is\s+hosted\s+on)\b",
        group=1,
    ),
    # Standing rules and constraints.
    _cue(
        "rule",
        _S,
        2.0,
        r"\b(?:always|never|must|mustn't|should|shouldn't|shall|"
        r"is\s+(?:not\s+)?(?:allowed|required|forbidden)|at\s+least|at\s+most|"
        r"no\s+more\s+than|minimum|maximum|by\s+default|convention|standard|policy|"
        r"only)\b",
    ),
    # "X is a Y", "X means Y": a definition.
    _cue(
        "definition",
        _S,
        2.0,
        r"\b(?:is|are)\s+(?:a|an|the|our|its)\s|\b(?:refers\s+to|stands\s+for|"
        r"is\s+defined\s+as|is\s+short\s+for|also\s+known\s+as|aka)\b",
    ),
    # Recurring or habitual statements are facts about a schedule, not one event.
    _cue(
        "habitual",
        _S,
        1.5,
        r"\b(?:every\s+(?:day|night|morning|evening|week|month|year|hour|minute|time|"
        + _WEEKDAY
        + r")|daily|nightly|weekly|monthly|hourly|usually|typically|generally|"
        r"normally|from\s+now\s+on|going\s+forward|will\s+(?:always\s+)?be)\b",
    ),
    # Passive present ("are formatted", "is managed") states a property.
    _cue(
        "passive present",
        _S,
        1.5,
        r"\b(?:is|are)\s+(?:\w+ly\s+)?([a-z]{2,}ed|written|built|rebuilt|kept|run|"
        r"held|made|done|shown|known|given|taken|set)\b",
        group=1,
    ),
    # A bare present copula is weak evidence on its own: it only tips a tie.
    _cue("present-tense copula", _S, 1.0, r"\b(is|are|isn't|aren't)\b", group=1),
)

# Strongest first, so that when two cues of one type cover the same words the
# more specific one counts and the weaker one is dropped.
_CUES_BY_WEIGHT = tuple(sorted(_CUES, key=lambda c: -c.weight))

_MARKDOWN_NOISE = re.compile(r"(\*\*|__|~~|\[([^\]\n]{0,200})\]\([^)\n]{0,300}\))")


def _strip_markdown(text: str) -> str:
    # Emphasis and links only; list and heading markers are cues in their own right.
    return _MARKDOWN_NOISE.sub(lambda m: m.group(2) or "", text)


class RuleBasedClassifier:
    """Classifies memory content as semantic, episodic or procedural using cues.

    Each cue category (temporal marker, imperative verb, preference, ...) has a
    weight and supports one type. A category's score is its weight for the first
    hit, plus half as much for the second, a quarter for the third, and so on, so
    repetition helps a little but never dominates. The type with the highest total
    wins; confidence grows with that total and with its margin over the runner-up.
    """

    def classify(self, content: str) -> TypeClassification:
        """Classify ``content``.

        Returns a :class:`TypeClassification` with method ``RULE_BASED``, a
        confidence in [0, 1] and a short rationale naming the cues that matched.
        Empty content gives SEMANTIC at 0.0; content without any cue gives
        SEMANTIC at a low confidence (below the usual 0.7 LLM-fallback threshold).
        """
        if not content or not content.strip():
            return TypeClassification(
                MemoryType.SEMANTIC, 0.0, ClassificationMethod.RULE_BASED, "empty content"
            )
        text = content.strip()
        if len(text) > _MAX_CHARS:
            # Cut at whitespace so the last word is not mangled into a false cue.
            parts = text[:_MAX_CHARS].rsplit(None, 1)
            text = parts[0]
        text = _strip_markdown(text)

        scores: dict[MemoryType, float] = {_S: 0.0, _E: 0.0, _P: 0.0}
        # (contribution, label, quoted text) per category, for the rationale.
        found: dict[MemoryType, list[tuple[float, str, str]]] = {_S: [], _E: [], _P: []}
        # Spans already counted for each type. At most _MAX_HITS_PER_CATEGORY per
        # cue are kept, so checking against them is constant work per match.
        taken: dict[MemoryType, list[tuple[int, int]]] = {_S: [], _E: [], _P: []}

        for cue in _CUES_BY_WEIGHT:
            hits: list[str] = []
            spans = taken[cue.type]
            for m in cue.pattern.finditer(text):
                if cue.accept is not None and not cue.accept(text, m):
                    continue
                # Alternations may leave the cue group unset; fall back to the match.
                group = cue.group if m.group(cue.group) is not None else 0
                start, end = m.span(group)
                if any(start < e and s < end for s, e in spans):
                    continue  # the same words already counted as a stronger cue
                hits.append(m.group(group))
                spans.append((start, end))
                if len(hits) >= _MAX_HITS_PER_CATEGORY:
                    break
            if hits:
                contribution = cue.weight * sum(_DECAY**i for i in range(len(hits)))
                scores[cue.type] += contribution
                quoted = " ".join(hits[0].split()).lower() if cue.quote else ""
                found[cue.type].append((contribution, cue.label, quoted))

        return self._decide(scores, found)

    @staticmethod
    def _decide(
        scores: dict[MemoryType, float],
        found: dict[MemoryType, list[tuple[float, str, str]]],
    ) -> TypeClassification:
        # Ties resolve in this order: SEMANTIC is the safe default for a store of
        # facts, then PROCEDURAL, then EPISODIC.
        ranked = sorted((_S, _P, _E), key=lambda t: scores[t], reverse=True)
        winner, runner_up = ranked[0], ranked[1]
        top, second = scores[winner], scores[runner_up]
        if top <= 0.0:
            return TypeClassification(
                MemoryType.SEMANTIC,
                _NO_CUE_CONFIDENCE,
                ClassificationMethod.RULE_BASED,
                "no strong cues; defaulting to semantic",
            )
        evidence = 1.0 - math.exp(-top / _EVIDENCE_SCALE)
        dominance = (top - second) / top  # 1.0 when unopposed, 0.0 on a tie
        confidence = _BASE + _SPAN * evidence * (0.25 + 0.75 * dominance)
        confidence = max(0.0, min(_MAX_CONFIDENCE, confidence))

        cues = sorted(found[winner], key=lambda c: c[0], reverse=True)[:3]
        rationale = " + ".join(
            f"{label} '{quoted}'" if quoted else label for _, label, quoted in cues
        )
        if second > 0.0:
            rationale += f" (outweighing {runner_up.value} cues)"
        return TypeClassification(
            winner, round(confidence, 4), ClassificationMethod.RULE_BASED, rationale
        )


_SHARED = RuleBasedClassifier()


def classify(content: str) -> TypeClassification:
    """Classify ``content`` with a shared :class:`RuleBasedClassifier`."""
    return _SHARED.classify(content)
