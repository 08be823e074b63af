"""Tests for lexmem.capture.classify, the rule-based memory-type classifier (seed 001)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lexmem.capture.classify import RuleBasedClassifier, classify
from lexmem.models import ClassificationMethod, MemoryType, TypeClassification

LLM_FALLBACK_THRESHOLD = 0.7
DATA = Path(__file__).parent / "data" / "classify_labelled.tsv"
HELD_OUT_MARKER = "# held-out"
TYPES = (MemoryType.SEMANTIC, MemoryType.EPISODIC, MemoryType.PROCEDURAL)


def _load_labelled() -> list[tuple[MemoryType, str, bool]]:
    """Rows of (label, sentence, held_out). Rows after the marker are held out."""
    rows: list[tuple[MemoryType, str, bool]] = []
    held_out = False
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            held_out = held_out or line.startswith(HELD_OUT_MARKER)
            continue
        label, sentence = line.split("\t", 1)
        # A literal "\n" in the file stands for a line break (markdown lists).
        rows.append((MemoryType(label), sentence.replace("\\n", "\n"), held_out))
    return rows


LABELLED = _load_labelled()


def _assert_valid(result: TypeClassification) -> None:
    assert isinstance(result, TypeClassification)
    assert result.type in TYPES
    assert result.method is ClassificationMethod.RULE_BASED
    assert 0.0 <= result.confidence <= 1.0
    assert result.rationale


# --------------------------------------------------------------- spec scenarios


def test_scenario_semantic_fact() -> None:
    result = classify("The project uses PostgreSQL for data storage")
    assert result.type is MemoryType.SEMANTIC
    assert result.confidence >= LLM_FALLBACK_THRESHOLD


def test_scenario_episodic_event() -> None:
    result = classify("Last week we debugged the authentication module")
    assert result.type is MemoryType.EPISODIC
    assert result.method is ClassificationMethod.RULE_BASED
    assert result.confidence >= LLM_FALLBACK_THRESHOLD
    # The rationale names the cues that decided it.
    assert result.rationale is not None
    assert "last week" in result.rationale
    assert "debugged" in result.rationale


def test_scenario_procedural_steps() -> None:
    result = classify("To deploy, first run 'npm build', then 'npm deploy'")
    assert result.type is MemoryType.PROCEDURAL
    assert result.confidence >= LLM_FALLBACK_THRESHOLD


def test_scenario_ambiguous_triggers_llm_fallback() -> None:
    result = classify("Important information about the system")
    assert result.confidence < LLM_FALLBACK_THRESHOLD


# --------------------------------------------------------------- labelled set


def _confusion_table(pairs: list[tuple[MemoryType, MemoryType]]) -> str:
    counts = Counter(pairs)
    width = max(len(t.value) for t in TYPES) + 2
    lines = ["gold \\ predicted".ljust(18) + "".join(t.value.rjust(width) for t in TYPES)]
    for gold in TYPES:
        cells = "".join(str(counts[(gold, pred)]).rjust(width) for pred in TYPES)
        lines.append(gold.value.ljust(18) + cells)
    return "\n".join(lines)


def _accuracy(pairs: list[tuple[MemoryType, MemoryType]]) -> float:
    return sum(gold is pred for gold, pred in pairs) / len(pairs)


def test_labelled_set_is_large_and_balanced() -> None:
    assert len(LABELLED) >= 90
    per_type = Counter(label for label, _, _ in LABELLED)
    for mtype in TYPES:
        assert per_type[mtype] >= len(LABELLED) // 4, per_type
    held_out = [row for row in LABELLED if row[2]]
    # The held-out part is the final third of the file.
    assert len(held_out) * 3 >= len(LABELLED)
    assert all(row[2] for row in LABELLED[-len(held_out) :])


def test_labelled_accuracy() -> None:
    whole: list[tuple[MemoryType, MemoryType]] = []
    held_out: list[tuple[MemoryType, MemoryType]] = []
    misses: list[str] = []
    for label, sentence, is_held_out in LABELLED:
        result = classify(sentence)
        _assert_valid(result)
        whole.append((label, result.type))
        if is_held_out:
            held_out.append((label, result.type))
        if result.type is not label:
            misses.append(f"  {label.value} -> {result.type.value}: {sentence!r}")

    whole_acc, held_acc = _accuracy(whole), _accuracy(held_out)
    print()
    print(f"accuracy: whole set {whole_acc:.3f} ({len(whole)}), held-out {held_acc:.3f}")
    print(_confusion_table(whole))
    print("held-out:")
    print(_confusion_table(held_out))
    if misses:
        print("misclassified:\n" + "\n".join(misses))

    assert whole_acc >= 0.85
    assert held_acc >= 0.80


# --------------------------------------------------------------- behaviour


def test_module_function_matches_class() -> None:
    text = "Run `make test` before pushing"
    assert classify(text) == RuleBasedClassifier().classify(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User prefers dark mode", MemoryType.SEMANTIC),
        ("Always use tabs", MemoryType.SEMANTIC),
        ("On March 3 the deploy failed", MemoryType.EPISODIC),
        ("Yesterday I fixed the flaky test", MemoryType.EPISODIC),
        ("We discovered the cache was stale after the release", MemoryType.EPISODIC),
        ("Run `make test` before pushing", MemoryType.PROCEDURAL),
        ("How to rotate the keys: revoke the old key, then issue a new one", MemoryType.PROCEDURAL),
    ],
)
def test_spec_examples(text: str, expected: MemoryType) -> None:
    assert classify(text).type is expected


def test_no_cue_defaults_to_low_confidence_semantic() -> None:
    result = classify("Notes regarding the quarterly roadmap")
    assert result.type is MemoryType.SEMANTIC
    assert result.confidence <= 0.4
    assert result.rationale is not None
    assert "no strong cues" in result.rationale


def test_confidence_is_capped() -> None:
    text = (
        "To release: first run `make build`, then run `make test`, next tag the commit, "
        "and finally push the tag.\n1. Build\n2. Test\n3. Tag"
    )
    result = classify(text)
    assert result.type is MemoryType.PROCEDURAL
    assert result.confidence <= 0.95


def test_conflicting_cues_lower_confidence() -> None:
    clear = classify("Yesterday we fixed the login bug")
    mixed = classify("Yesterday we fixed the login bug; the service uses Redis and must stay up")
    assert clear.type is MemoryType.EPISODIC
    assert mixed.confidence < clear.confidence


def test_rationale_mentions_outweighed_type() -> None:
    result = classify("Yesterday I ran `npm audit fix` and it upgraded the lockfile")
    assert result.type is MemoryType.EPISODIC
    assert result.rationale is not None
    assert "procedural" in result.rationale


# --------------------------------------------------------------- edge cases


@pytest.mark.parametrize("text", ["", " ", "   \n\t  "])
def test_empty_and_whitespace(text: str) -> None:
    result = classify(text)
    assert result.type is MemoryType.SEMANTIC
    assert result.confidence == 0.0
    assert result.method is ClassificationMethod.RULE_BASED


def test_very_long_text() -> None:
    # 20,000 words. Matching is linear and reads a bounded head of the text, so
    # this is fast; the test checks the result, not the wall time.
    sentence = "Last week we debugged the authentication module and fixed the token refresh. "
    words_per_sentence = len(sentence.split())
    text = sentence * (20_000 // words_per_sentence + 1)
    assert len(text.split()) >= 20_000
    result = classify(text)
    _assert_valid(result)
    assert result.type is MemoryType.EPISODIC


def test_very_long_text_without_punctuation() -> None:
    # No sentence breaks anywhere: bounded patterns must not scan to the end from
    # every position.
    result = classify(" ".join(["alpha"] * 20_000))
    assert result.type is MemoryType.SEMANTIC
    assert result.confidence <= 0.4


def test_mixed_case() -> None:
    result = classify("LAST WEEK WE DEBUGGED THE AUTHENTICATION MODULE")
    assert result.type is MemoryType.EPISODIC
    assert result.confidence >= LLM_FALLBACK_THRESHOLD


def test_markdown_list_of_steps() -> None:
    text = "## Release\n\n- **Bump** the version\n- Tag the commit\n- Push the tag"
    assert classify(text).type is MemoryType.PROCEDURAL


def test_markdown_emphasis_does_not_hide_cues() -> None:
    result = classify("The user **prefers** [dark mode](https://example.com/themes).")
    assert result.type is MemoryType.SEMANTIC
    assert result.confidence >= LLM_FALLBACK_THRESHOLD


@pytest.mark.parametrize(
    "text",
    [
        "Gestern haben wir den Fehler im Cache behoben.",
        "数据库使用 PostgreSQL 存储数据。",
        "Пользователь предпочитает тёмную тему.",
        "🚀🔥 ✨",
    ],
)
def test_non_english_and_unicode(text: str) -> None:
    result = classify(text)
    _assert_valid(result)
    # No English cue means no basis for a confident rule-based answer.
    assert result.confidence < LLM_FALLBACK_THRESHOLD


def test_unicode_does_not_break_english_cues() -> None:
    result = classify("Yesterday we fixed the café’s menu renderer — naïve UTF-8 handling 🙈")
    assert result.type is MemoryType.EPISODIC


def test_code_only_python() -> None:
    result = classify("def add(a: int, b: int) -> int:\n    return a + b\n")
    _assert_valid(result)


def test_code_only_shell_block() -> None:
    result = classify("```bash\nnpm ci\nnpm run build\n```")
    assert result.type is MemoryType.PROCEDURAL


def test_code_only_json() -> None:
    result = classify('{"theme": "dark", "fontSize": 14}')
    _assert_valid(result)
