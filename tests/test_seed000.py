"""Seed 000 (MEM-08): its acceptance criteria and Gherkin scenarios, on the real service and store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.models import MemorySource, MemoryType
from lexmem.service.events import MemoryCaptured
from lexmem.service.writer import CaptureService


@pytest.fixture
def service(data_home: Path, embedder: Embedder) -> Iterator[CaptureService]:
    svc = CaptureService(Lexmem.open(data_home, embedder=embedder))
    svc.acquire()
    yield svc
    svc.release()


def test_capture_from_conversation_with_trigger(service: CaptureService) -> None:
    [m] = service.capture_from_conversation(
        "Remember that we use PostgreSQL", "Noted.", conversation_id="c1"
    )
    assert m.type == MemoryType.SEMANTIC and "PostgreSQL" in m.content
    assert m.salience > 0.5 and m.last_reinforced_at is not None  # boosted via reinforcement


def test_capture_user_correction(service: CaptureService) -> None:
    [m] = service.capture_user_correction("API uses OAuth", "API uses API keys")
    assert "API keys" in m.content and m.source == MemorySource.CORRECTION
    assert m.salience > 0.5 and m.last_reinforced_at is not None


def test_a_setting_changed_again_supersedes_its_older_preference(
    service: CaptureService,
) -> None:
    """Dark, then light: one preference stays active, the newer (issue 18, defect 2)."""
    from lexmem.models import MemoryStatus

    [dark] = service.capture_configuration_change("editor.theme", "light", "dark")
    [size] = service.capture_configuration_change("editor.font_size", 12, 14)
    [light] = service.capture_configuration_change("editor.theme", "dark", "light")
    store = service.lm.store
    assert store.get(dark.id).status == MemoryStatus.SUPERSEDED
    assert store.get(dark.id).superseded_by == light.id
    assert store.get(light.id).status == MemoryStatus.ACTIVE
    assert store.get(size.id).status == MemoryStatus.ACTIVE  # another setting: untouched
    # The same setting in another project is that project's own preference.
    [other] = service.capture_configuration_change("editor.theme", "light", "dark", project="shop")
    assert store.get(light.id).status == MemoryStatus.ACTIVE
    assert store.get(other.id).status == MemoryStatus.ACTIVE
    # Back to dark: news again, the light preference gives way; the same again: a repeat.
    [dark_again] = service.capture_configuration_change("editor.theme", "light", "dark")
    assert store.get(light.id).status == MemoryStatus.SUPERSEDED
    assert store.get(dark_again.id).status == MemoryStatus.ACTIVE
    assert service.capture_configuration_change("editor.theme", "light", "dark") == []
    assert store.get(dark_again.id).status == MemoryStatus.ACTIVE


def test_capture_configuration_change(service: CaptureService) -> None:
    [m] = service.capture_configuration_change("theme", "light", "dark")
    assert m.content.rstrip(".") == "User prefers dark mode"
    assert m.type == MemoryType.SEMANTIC and m.source == MemorySource.CONFIGURATION


def test_capture_workflow_pattern(service: CaptureService) -> None:
    actions = [
        {
            "action_type": "command",
            "description": d,
            "timestamp": f"2026-11-22T10:{i * 5:02d}:00+00:00",
        }
        for i, d in enumerate(["run tests", "build", "commit", "push"])
    ]
    [m] = service.capture_workflow_pattern(actions)
    assert m.type == MemoryType.PROCEDURAL
    assert all(step in m.content for step in ("run tests", "build", "commit", "push"))
    spread = [dict(a, timestamp=f"2026-11-22T{10 + i}:00:00+00:00") for i, a in enumerate(actions)]
    assert service.capture_workflow_pattern(spread) == []  # not within 30 minutes
    assert service.capture_workflow_pattern(actions[:2]) == []  # fewer than 3 actions


def test_low_confidence_extractions_are_filtered_and_audited(service: CaptureService) -> None:
    assert (
        service.capture_from_conversation(
            "we might look at caching later", "Sure.", conversation_id="c2"
        )
        == []
    )
    assert service.lm.count() == 0


def test_capture_publishes_memory_captured(service: CaptureService) -> None:
    seen: list[MemoryCaptured] = []
    service.bus.subscribe(seen.append)
    [m] = service.capture_configuration_change("font_size", 12, 14)
    service.capture_search_confirmation("font size", m.id)
    assert [e.source for e in seen] == [
        MemorySource.CONFIGURATION,
        MemorySource.SEARCH_CONFIRMATION,
    ]
    assert seen[0].memory_ids == (m.id,) and service.lm.get(m.id).salience > 0.5
