"""bench/locomo.py's weight selection: leave one conversation out over a grid.

The held-out figure is what issue-level targets are judged by, so the procedure
itself is tested on hand-made scores whose right answer is known."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def locomo() -> ModuleType:
    # Loaded by path; the module puts bench/ on sys.path for its _common import, which
    # is taken off again: bench/ui.py would shadow the ui package for later tests.
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("locomo_bench", BENCH / "locomo.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def _score(hit: float) -> dict[str, float]:
    return {"r@5": hit, "r@10": hit, "hit@10": hit, "ndcg@10": hit, "mrr": hit}


def test_each_conversation_is_scored_with_the_pick_of_the_others(locomo: ModuleType) -> None:
    # "a" wins everywhere but on c3, where only "b" finds anything. Held out, c3 is
    # scored with "a" (the others' pick), so its win does not count; in-sample, "a"
    # is chosen (2 + 2 + 0 against 0 + 0 + 2).
    conversation_of = {
        "c1#0": "c1",
        "c1#1": "c1",
        "c2#0": "c2",
        "c2#1": "c2",
        "c3#0": "c3",
        "c3#1": "c3",
    }
    categories = dict.fromkeys(conversation_of, 4)
    scores = {
        "a": {k: _score(0.0 if k.startswith("c3") else 1.0) for k in conversation_of},
        "b": {k: _score(1.0 if k.startswith("c3") else 0.0) for k in conversation_of},
    }
    out = locomo.select_held_out(scores, conversation_of, categories)
    assert out["picks"] == {"c1": "a", "c2": "a", "c3": "a"}
    assert out["chosen"] == "a"
    assert out["held_out"]["overall"]["r@10"] == pytest.approx(100 * 4 / 6, abs=0.01)
    assert out["in_sample"]["overall"]["r@10"] == pytest.approx(100 * 4 / 6, abs=0.01)
    assert out["gap_in_sample_minus_held_out"]["r@10"] == 0


def test_a_choice_that_only_fits_its_own_conversation_shows_as_a_gap(locomo: ModuleType) -> None:
    # "fit" is perfect on c1 and middling elsewhere; "plain" is steady. In-sample the
    # pick is "fit" (its c1 carries it); held out, c1 gets "plain" (best on c2 + c3),
    # and the gap says how much the in-sample figure flattered.
    keys = {f"c{c}#{i}": f"c{c}" for c in (1, 2, 3) for i in range(4)}
    categories = dict.fromkeys(keys, 1)
    scores = {
        "plain": {k: _score(0.5) for k in keys},
        "fit": {
            k: _score(1.0 if v == "c1" else (0.5 if k.endswith(("0", "1")) else 0.25))
            for k, v in keys.items()
        },
    }
    out = locomo.select_held_out(scores, keys, categories)
    assert out["chosen"] == "fit"
    assert out["picks"]["c1"] == "plain"
    assert out["held_out"]["overall"]["r@10"] < out["in_sample"]["overall"]["r@10"]
    assert out["gap_in_sample_minus_held_out"]["r@10"] > 0
    assert out["held_out"]["by_category"]["1"]["name"] == "multi-hop"


def test_adversarial_questions_do_not_choose(locomo: ModuleType) -> None:
    keys = {"c1#0": "c1", "c1#1": "c1", "c2#0": "c2", "c2#1": "c2"}
    categories = {"c1#0": 4, "c1#1": 5, "c2#0": 4, "c2#1": 5}
    scores = {
        "a": {k: _score(1.0 if categories[k] == 4 else 0.0) for k in keys},
        "b": {k: _score(0.0 if categories[k] == 4 else 1.0) for k in keys},
    }
    out = locomo.select_held_out(scores, keys, categories)
    assert out["chosen"] == "a" and set(out["picks"].values()) == {"a"}
    assert out["held_out"]["overall"]["n"] == 2


def test_the_grid_names_every_combination_and_holds_the_shipped_weights(locomo: ModuleType) -> None:
    from lexmem.store.fusion import Fusion

    configs = locomo.grid_configurations({"keyword": (0.8, 1.0), "speaker": (0.2, 0.4)})
    assert list(configs) == [
        "keyword=0.8,speaker=0.2", "keyword=0.8,speaker=0.4",
        "keyword=1,speaker=0.2", "keyword=1,speaker=0.4",
    ]  # fmt: skip
    shipped = Fusion()
    assert any(
        all(getattr(shipped, k) == v for k, v in values.items())
        for values in locomo.grid_configurations().values()
    ), "Fusion's defaults must be one of the combinations bench/locomo.py chooses from"


def test_no_configurations_is_a_clear_error(locomo: ModuleType) -> None:
    with pytest.raises(locomo.BenchError, match="no configurations"):
        locomo.select_held_out({}, {"c1#0": "c1"}, {"c1#0": 1})
