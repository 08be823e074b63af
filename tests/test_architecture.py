"""The layer rule of DESIGN.md, and the public surface of the core.

Which module may import which is in the import-linter contracts of pyproject.toml
(docs/ARCHITECTURE.md explains them); a test here runs them. What they cannot say is
checked here: what an import costs at run time, that the hook's closure is the standard
library and nothing else, that there is no cycle at any depth, attribute access to the
store from the desktop layer, and every module's declared public names.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import lexmem

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("lancedb", "pyarrow", "fastembed", "duckdb", "onnxruntime", "numpy", "PySide6")


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
    for path in sorted((ROOT / "lexmem").rglob("*.py")):
        if path.name == "__main__.py" or (
            path.name == "__init__.py" and path.parent.name != "lexmem"
        ):
            continue  # a subpackage's __init__ is empty: the hook pays for every line in it
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = [
            n
            for n in tree.body
            if isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "__all__" for t in n.targets)
        ]
        assert declared, f"{path.relative_to(ROOT)} has no __all__"


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

    graph = grimp.build_graph("lexmem", exclude_type_checking_imports=True, cache_dir=None)
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


def test_the_import_contracts_hold() -> None:
    """``lint-imports`` (./dev test runs it too): layers, the desktop layer's imports, the
    store's libraries, the hook's closure. A stale ``ignore_imports`` line fails it too."""
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_hook_and_everything_it_imports_is_standard_library_only() -> None:
    """A forbidden list cannot say "nothing but the standard library": every external
    module the hook command's static closure reaches (lazy imports included) must be one."""
    import grimp

    graph = grimp.build_graph(
        "lexmem", include_external_packages=True, exclude_type_checking_imports=True, cache_dir=None
    )
    reached = {"lexmem.capture.hook"} | graph.find_upstream_modules("lexmem.capture.hook")
    outside = sorted(
        m
        for m in reached
        if not m.startswith("lexmem") and m.split(".")[0] not in sys.stdlib_module_names
    )
    # _sha2 / _sha256: the interpreter's built-in SHA-256 (the digest path, per version).
    assert [m for m in outside if m not in ("_sha2", "_sha256")] == []
    assert not {m for m in reached if m.startswith(("lexmem.store", "lexmem.service"))}


def test_no_test_skips_itself_when_a_required_dependency_is_missing() -> None:
    """A required dependency that cannot load (Qt's libraries missing on a CI machine) must
    fail the tests that need it, not skip them and let the run pass."""
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    required = {
        re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower().replace("_", "-")
        for dep in project["dependencies"]
    }
    modules = {"pyside6-essentials": "PySide6"}  # distributions whose module is named otherwise
    offenders = []
    for path in sorted((root / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                name = str(node.args[0].value).split(".")[0]
                dists = {d for d in required if modules.get(d, d).lower() == name.lower()}
                if dists:
                    offenders.append(f"{path.name}:{node.lineno} skips without {name}")
    assert not offenders, offenders


def test_every_public_exception_of_the_core_is_a_lexmem_error() -> None:
    """One exception root (lexmem.errors): the CLI maps errors by their class, and a
    caller can catch everything lexmem raises on purpose with one ``except``."""
    import importlib
    import inspect
    import pkgutil

    from lexmem.errors import LexmemError

    outside = []
    for info in pkgutil.walk_packages(lexmem.__path__, "lexmem."):
        if info.name in ("lexmem.__main__", "lexmem.hook"):
            continue  # the entry point and the hook's compatibility shim run on import
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not name.startswith("_")
                and not issubclass(obj, LexmemError)
            ):
                outside.append(f"{info.name}.{name}")
    assert not outside, outside


def test_the_store_takes_lexmems_version_from_a_module_below_it() -> None:
    """Nothing under lexmem/store takes a name from the package itself (``from lexmem
    import __version__``: the package's ``__init__`` is the facade's door); a submodule
    named that way is another matter. The version is the wheel's."""
    for path in sorted((ROOT / "lexmem" / "store").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "lexmem" and not node.level:
                for alias in node.names:
                    module = ROOT / "lexmem" / alias.name
                    assert module.is_dir() or module.with_suffix(".py").exists(), (
                        f"{path.relative_to(ROOT)}:{node.lineno} takes {alias.name} from lexmem"
                    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert lexmem.__version__ == project["version"]
