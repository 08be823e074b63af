"""The capture points that arrive as whole events: a correction (a rule from the word diff
between the agent's text and the user's rewrite) and a configuration change (a setting
in natural words)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from lexmem.capture.extract.text import _WS, _clip, _finish, _split_plain
from lexmem.capture.extract.thresholds import (
    C_CONFIG,
    C_CONFIG_NOOP,
    C_CONFIG_SECRET,
    C_CORRECTION_DIFF,
    C_REWRITE,
    DIFF_MAX_EDITS,
    DIFF_MAX_TOKENS,
    DIFF_RULE_MAX_WORDS,
    EDIT_SIMILARITY,
    MAX_TEXT,
    TITLE_LIMIT,
)
from lexmem.capture.extract.tools import _as_text

__all__ = ()  # nothing public: the underscored names are for this package's modules

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
            C_CONFIG_SECRET,
            meta,
        )
    new_bool = _as_bool(new)
    shown = _show_value(new)
    if old == new:
        text, conf = f"User kept {name} set to {shown}.", C_CONFIG_NOOP
    elif (
        isinstance(new, str)
        and new.strip().lower() in ("dark", "light")
        and _THEME_KEY.search(name)
    ):
        text, conf = f"User prefers {new.strip().lower()} mode.", C_CONFIG
    elif isinstance(new, str) and _THEME_KEY.search(name) and not re.search(r"(?i)\bmode\b", name):
        text, conf = f"User prefers the {shown} theme.", C_CONFIG
    elif new_bool is not None and (
        isinstance(new, bool) or _as_bool(old) is not None or old is None
    ):
        text, conf = f"User prefers {name} {'enabled' if new_bool else 'disabled'}.", C_CONFIG
    elif old is None:
        text, conf = f"User prefers {name} set to {shown}.", C_CONFIG
    else:
        text, conf = f"User changed {name} from {_show_value(old)} to {shown}.", C_CONFIG
    title = _clip(f"Setting: {name} → {shown}", TITLE_LIMIT)
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
    a = _diff_tokens(original[:MAX_TEXT])
    b = _diff_tokens(corrected[:MAX_TEXT])
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
    if len(mid_a) > DIFF_MAX_TOKENS or len(mid_b) > DIFF_MAX_TOKENS:
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
    if ratio < EDIT_SIMILARITY or len(ops) > DIFF_MAX_EDITS:
        text = (
            f"User rewrote the agent's text. Agent's version: “{_clip(original, 200)}”. "
            f"User's version: “{_clip(corrected, 300)}”."
        )
        return text, C_REWRITE, "correction-rewrite"
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
        and len(plain.split()) <= DIFF_RULE_MAX_WORDS
        and "," not in plain
    ):
        # A short, simple sentence reads best as the rule itself: "API uses API keys, not OAuth."
        text = _finish(f"{plain}, not {_join_tokens(ops[0][1])}")
        return text, C_CORRECTION_DIFF, "correction-diff"
    text = _finish("; ".join(rules))
    if example:
        text += f" Corrected text: “{_clip(example, 300)}”"
    return text, C_CORRECTION_DIFF, "correction-diff"
