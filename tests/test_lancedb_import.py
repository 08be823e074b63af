"""The store imports LanceDB without the REST client of Lance Namespace
(:mod:`lexmem.store.lancedb_import`), and the client is still there, whole, for whatever
reads it.

Each test runs in a fresh interpreter: what a process has imported is the point."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Modules that only the package's deferred ``__init__`` imports: none may be loaded by the
# store's own work.
_CLIENT_ONLY = (
    "lance_namespace_urllib3_client.api",
    "lance_namespace_urllib3_client.api_client",
    "lance_namespace_urllib3_client.configuration",
    "lance_namespace_urllib3_client.rest",
    "urllib3",
)


ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, tmp_path: Path) -> str:
    # This checkout's lexmem, whatever the folder the interpreter was installed from.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_store_does_real_work_without_loading_the_namespace_client(tmp_path: Path) -> None:
    code = f"""
        import sys
        from pathlib import Path

        import lexmem
        from lexmem.config import Paths
        from lexmem.models import Memory, MemoryLink
        from lexmem.store.backup import create_backup
        from lexmem.store.journal import Journal
        from lexmem.store.lance import MemoryFilter, MemoryStore
        from lexmem.store.repair import check_tables
        from lexmem.store.search import Searcher

        def lexmem_root():
            return str(Path(lexmem.__file__).resolve().parent.parent)

        class Vectors:  # the embedder's one method the searcher calls
            def embed_one(self, text):
                return [float(len(text) % 7 + 1), 1.0, 0.5, 0.25]

        assert lexmem_root() == {str(ROOT)!r}
        paths = Paths(Path({str(tmp_path / "data")!r}))
        paths.ensure()
        store = MemoryStore(paths, dim=4, space_id="test").open()
        words = ["postgres database", "stripe payments", "redis cache", "dark mode font"]
        mems = store.store_many([
            Memory(content=w, embedding=[float(i + 1), 1.0, 0.5, 0.25])
            for i, w in enumerate(words)
        ])
        store.edit(mems[0].id, content="postgres 16 database")  # an update of a row
        store.store_link(MemoryLink(from_id=mems[0].id, to_id=mems[1].id, link_type="related"))
        Journal(store).ensure()
        hits = Searcher(store, Vectors()).search("postgres", record_access=True)
        # Both legs ran on LanceDB: the full-text index and the vectors.
        assert [h.memory.content for h in hits.hits if h.bm25_rank] == ["postgres 16 database"]
        assert all(h.vector_rank for h in hits.hits), hits
        assert store.nearest([1.0, 1.0, 0.5, 0.25], MemoryFilter(), 2)
        assert store.count() == 4
        assert check_tables(paths).state == "ok", check_tables(paths)
        create_backup(paths)
        assert "lancedb" in sys.modules
        print(",".join(m for m in {_CLIENT_ONLY!r} if m in sys.modules))
        """
    assert _run(code, tmp_path) == ""


def test_the_deferred_client_loads_whole_on_first_use(tmp_path: Path) -> None:
    code = """
        import sys
        from lexmem.store.lancedb_import import import_lancedb

        lancedb = import_lancedb()
        client = sys.modules["lance_namespace_urllib3_client"]
        assert "lance_namespace_urllib3_client.api_client" not in sys.modules
        import lance_namespace_urllib3_client
        from lance_namespace_urllib3_client import ApiClient, Configuration, TableApi

        assert lance_namespace_urllib3_client is client
        assert lance_namespace_urllib3_client.__version__
        assert type(client).__name__ == "module"  # a plain module once loaded
        api = TableApi(ApiClient(Configuration(host="http://localhost:1")))
        assert callable(api.describe_table)
        # LanceDB's own namespace paths, on a directory namespace.
        ns = lancedb.connect_namespace("dir", {"root": "ns"})
        ns.create_table("t", data=[{"x": 1}])
        assert list(ns.table_names()) == ["t"]
        print("ok")
        """
    assert _run(code, tmp_path) == "ok"
