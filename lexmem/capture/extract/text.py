"""Text helpers: trigger phrases, chit-chat, sentence segmentation, and the small rewrites
that make a statement read well in a later session (capitalisation, third person,
clipping, titles)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lexmem.capture.extract.thresholds import (
    AFFIRMATION_MAX_WORDS,
    AFFIRMATION_READ,
    CHITCHAT_MAX_WORDS,
    MAX_CODE_LINES,
    MAX_OUT,
    MAX_SENTENCES,
    MAX_TEXT,
    SHORT_READ,
    TITLE_LIMIT,
)

__all__ = ["TRIGGER_PATTERNS", "is_chitchat", "trigger_phrases"]

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
    text = _norm_quotes(text[:MAX_TEXT])
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
    norm = _norm_quotes(text.strip()[:SHORT_READ]).lower()
    if trigger_phrases(norm):
        return False
    words = _WORD.findall(norm)
    if not words:
        return True  # emoji, punctuation, numbers only
    if _META_QUESTION.match(norm.strip(" .!")):
        return True
    return len(words) <= CHITCHAT_MAX_WORDS and all(w in _FILLER for w in words)


def _is_affirmation(text: str) -> bool:
    """A short yes (confirms the agent's proposal), without a "but" or "instead"."""
    norm = _norm_quotes(text.strip()[:AFFIRMATION_READ]).lower()
    if not _AFFIRM.match(norm) or len(_WORD.findall(norm)) > AFFIRMATION_MAX_WORDS:
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


def _bound_text(text: str, limit: int = MAX_OUT) -> str:
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
        return _clip(f"{prefix}: {body}", TITLE_LIMIT)
    return _clip(body, TITLE_LIMIT)


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
    text = _norm_quotes(text[:MAX_TEXT])
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
            if len(code) < MAX_CODE_LINES:
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
        if len(out) > MAX_SENTENCES:
            break
    return out


def _restore(text: str, saved: list[str]) -> str:
    return _TOKEN.sub(lambda m: saved[int(m.group(1))], text)
