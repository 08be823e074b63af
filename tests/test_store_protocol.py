"""The store's boundary: each backend has every operation of :mod:`lexmem.store.protocol`,
with the protocol's signature, and the backend's failures leave the store as typed errors
that the CLI maps by type."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import shared_model
from store_backends import backend_classes, only, open_core

from lexmem.cli import cli
from lexmem.embedder import Embedder
from lexmem.errors import LexmemError, StoreDamagedError, StoreError, StoreIOError
from lexmem.store.lance import store_failure
from lexmem.store.protocol import JournalBackend, MemoryBackend, SearchBackend, members


def mismatches(cls: type, protocol: type) -> list[str]:
    """What ``cls`` lacks of ``protocol``, or has with another signature (parameter names,
    kinds, defaults and annotations). Properties may also be instance attributes: those
    are checked on an opened store."""
    problems = []
    for name, wanted in members(protocol).items():
        if wanted is None:
            continue
        found = getattr(cls, name, None)
        if not callable(found):
            problems.append(f"{cls.__name__} has no {name}")
            continue
        have = inspect.signature(found)
        if [_shape(p) for p in have.parameters.values()] != [
            _shape(p) for p in wanted.parameters.values()
        ]:
            problems.append(f"{cls.__name__}.{name}{have} is not {name}{wanted}")
        elif str(have.return_annotation) != str(wanted.return_annotation) and not (
            str(wanted.return_annotation) == "Self"
            and str(have.return_annotation) in {c.__name__ for c in cls.__mro__}
        ):
            problems.append(
                f"{cls.__name__}.{name} returns {have.return_annotation}, "
                f"not {wanted.return_annotation}"
            )
    return problems


def _shape(p: inspect.Parameter) -> tuple[str, Any, Any, str]:
    return (p.name, p.kind, p.default, str(p.annotation))


def test_each_backend_has_every_operation_of_the_protocol(backend: str) -> None:
    memories, journal, search = backend_classes(backend)
    assert mismatches(memories, MemoryBackend) == []
    assert mismatches(journal, JournalBackend) == []
    assert mismatches(search, SearchBackend) == []


def test_each_backend_has_the_protocols_properties(
    data_home: Path, embedder: Embedder, backend: str
) -> None:
    with open_core(data_home, embedder, backend) as lm:
        for name, signature in members(MemoryBackend).items():
            if signature is None:
                assert hasattr(lm.store, name), name
        assert lm.store.dim == embedder.dim and lm.store.paths.home == data_home
        assert lm.store.stored_space == embedder.space_id and not lm.store.needs_reembed


def test_a_backend_missing_an_operation_or_changing_a_signature_fails() -> None:
    memories, _, _ = backend_classes("lance")

    class Lacking(memories):  # type: ignore[misc,valid-type]
        nearest = None

    class Changed(memories):  # type: ignore[misc,valid-type]
        def count(self, flt: Any = None, *, limit: int = 5) -> int:
            return 0

    assert mismatches(Lacking, MemoryBackend) == ["Lacking has no nearest"]
    assert mismatches(Changed, MemoryBackend)[0].startswith("Changed.count(")


def test_protocol_members_cover_what_the_facade_and_the_service_call() -> None:
    """Spot checks: the operations that replaced queries built outside the store."""
    names = set(members(MemoryBackend))
    assert {"ids_superseded_by", "ids_in_projects", "project_names", "recent_fingerprint",
            "nearest", "archived_before", "digest_columns", "arrow_table"} <= names  # fmt: skip
    assert {"has_audit_entry", "file_hashes_under", "review_queue"} <= set(members(JournalBackend))


# --- typed errors -----------------------------------------------------------------------


def test_lance_failures_become_typed_store_errors() -> None:
    full = RuntimeError(
        "lance error: LanceError(IO): No space left on device (os error 28), "
        "/rust/lance/src/io.rs:12:5"
    )
    io = store_failure(full, "/data/store")
    assert isinstance(io, StoreIOError) and isinstance(io, StoreError)
    assert str(io) == "the store could not be read or written (No space left on device)"
    assert io.path == "/data/store"

    broken = OSError(
        "lance error: Corrupt file /data/store/links.lance/_versions/3.manifest: bad magic, "
        "/rust/src/a.rs:3"
    )
    damaged = store_failure(broken, "/data/store")
    assert isinstance(damaged, StoreDamagedError) and damaged.table == "links"
    cause = "lance error: Corrupt file /data/store/links.lance/_versions/3.manifest: bad magic"
    assert damaged.cause == cause and damaged.path == "/data/store"
    assert str(damaged) == (
        f"the store cannot be read ({cause}): "
        "run `lexmem doctor` to check it and `lexmem doctor --repair` to repair it"
    )
    assert store_failure(ValueError("not ours")) is None
    assert store_failure(StoreError("already ours: lance error")) is None


def test_an_operation_raises_the_typed_error_with_lances_as_its_cause(
    data_home: Path, embedder: Embedder, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    only(backend, "lance")  # LanceDB's error text; postgres: tests/test_pg_store.py
    with open_core(data_home, embedder, backend) as lm:
        table = type(lm.store.table())  # type: ignore[attr-defined]

        def fail(*_: Any, **__: Any) -> Any:
            raise RuntimeError("lance error: LanceError(IO): Read-only file system (os error 30)")

        monkeypatch.setattr(table, "count_rows", fail)
        with pytest.raises(StoreIOError) as err:
            lm.store.count()
        assert isinstance(err.value.__cause__, RuntimeError)
        with pytest.raises(StoreIOError):
            lm.journal.counts()


def test_the_cli_says_a_damaged_store_in_one_line_by_type(
    data_home: Path, embedder: Embedder, backend: str
) -> None:
    only(backend, "lance")  # a damaged LanceDB manifest; postgres: tests/test_pg_store.py
    with open_core(data_home, embedder, backend) as lm:
        lm.remember("The billing service uses PostgreSQL 16.")
        lm.remember("Deploys go out on Thursdays.")
    name = json.loads((data_home / "store" / "meta.json").read_text())["memories_table"]
    versions = (data_home / "store" / f"{name}.lance" / "_versions").glob("*.manifest")
    newest = min(versions, key=lambda p: int(p.stem))
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    with shared_model(embedder):
        result = CliRunner().invoke(cli, ["list"])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("lexmem: error: the store cannot be read (")
    assert line.endswith(
        "run `lexmem doctor` to check it and `lexmem doctor --repair` to repair it"
    )
    assert "internal error" not in line and issubclass(StoreDamagedError, LexmemError)
