"""InboxEvent, the TypedDict of inbox events: declared for type checkers only (the hook
imports no ``typing``), and kept equal to what make_event and validate_event produce."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from lexmem.capture import inbox
from lexmem.capture.inbox import make_event, new_event_id, now_iso, validate_event


def _declared() -> tuple[set[str], set[str]]:
    """InboxEvent's (required, optional) keys, read from the module's source."""
    tree = ast.parse(Path(inbox.__file__).read_text(encoding="utf-8"))
    [cls] = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "InboxEvent"]
    required, optional = set(), set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ann = node.annotation
            optional_key = (
                isinstance(ann, ast.Subscript)
                and isinstance(ann.value, ast.Name)
                and ann.value.id == "NotRequired"
            )
            (optional if optional_key else required).add(node.target.id)
    return required, optional


def test_make_event_writes_every_declared_key_but_the_writers() -> None:
    required, optional = _declared()
    # ``speaker`` is written only when given (old events have none).
    assert set(make_event("prompt", "hi")) == (required | optional) - {"_seq", "speaker"}
    assert set(make_event("prompt", "hi", speaker="Ann")) == (required | optional) - {"_seq"}


def test_validate_event_returns_the_required_keys_of_a_minimal_event() -> None:
    required, _ = _declared()
    event = validate_event(
        {
            "event_id": new_event_id(),
            "session_id": "s",
            "event_type": "prompt",
            "timestamp": now_iso(),
        }
    )
    assert set(event) == required


def test_the_name_exists_at_run_time_without_typing() -> None:
    code = (
        "import sys\n"
        "from lexmem.capture.inbox import InboxEvent\n"
        "print(InboxEvent is dict, 'typing' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
