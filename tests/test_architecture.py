"""The layer rule of DESIGN.md, and the public surface of the core."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import lexmem

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_CORE = ("PySide6", "qasync", "ui", "shiboken6")
HEAVY = ("lancedb", "pyarrow", "fastembed", "duckdb", "onnxruntime", "numpy", "PySide6")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_never_imports_the_desktop_layer() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(imported_modules(p) & set(FORBIDDEN_IN_CORE))
        for p in (ROOT / "lexmem").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_lexmem_and_its_light_modules_loads_nothing_heavy() -> None:
    code = (
        "import sys, lexmem, lexmem.models, lexmem.config, lexmem.errors, lexmem.locks, "
        "lexmem.capture.chunker, lexmem.capture.classify\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_cli_module_imports_nothing_heavy_until_a_command_needs_it() -> None:
    code = f"import sys, lexmem.cli\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_names_are_exactly_all() -> None:
    assert sorted(lexmem.__all__) == sorted(
        [
            "Changes", "Lexmem", "LexmemError", "Memory", "MemoryContext", "MemoryFilter", "MemoryLink",
            "MemorySource", "MemoryStatus", "MemoryType", "TypeClassification", "__version__",
        ]
    )  # fmt: skip
    for name in lexmem.__all__:
        assert getattr(lexmem, name) is not None


def test_each_core_module_declares_its_public_names() -> None:
    for path in sorted((ROOT / "lexmem").glob("*.py")):
        if path.name == "__main__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = [
            n
            for n in tree.body
            if isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "__all__" for t in n.targets)
        ]
        assert declared, f"{path.name} has no __all__"


def test_the_desktop_layer_uses_the_cores_public_api_not_its_store() -> None:
    """DESIGN.md: ``ui/`` calls ``Lexmem``'s methods, never the store or the journal."""
    offenders = []
    for path in (ROOT / "ui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            reaches_store = (
                isinstance(node, ast.Attribute)
                and node.attr in ("store", "searcher", "journal")
                and (
                    (isinstance(node.value, ast.Name) and node.value.id == "lm")
                    or (isinstance(node.value, ast.Attribute) and node.value.attr == "lm")
                )
            )
            builds_journal = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("Journal", "MemoryStore")
            )
            if reaches_store or builds_journal:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_no_import_cycle_in_the_core_nor_in_any_of_its_packages() -> None:
    """DESIGN.md: no import cycles. Function-level imports count (they are edges all the same);
    imports under ``TYPE_CHECKING`` do not (they never run)."""
    import grimp

    graph = grimp.build_graph("lexmem", exclude_type_checking_imports=True)
    packages = [
        "lexmem",
        *sorted(
            ".".join(("lexmem", *p.parent.relative_to(ROOT / "lexmem").parts))
            for p in (ROOT / "lexmem").rglob("__init__.py")
            if p.parent != ROOT / "lexmem"
        ),
    ]
    cycles = {package: graph.nominate_cycle_breakers(package) for package in packages}
    assert {p: sorted(edges) for p, edges in cycles.items() if edges} == {}
