"""The on-disk cache of text embeddings: ``.npz`` chunks of (16-byte text hash, vector) pairs.

One folder per model. Each chunk is written atomically and fsynced (`atomic_write`) and carries a
SHA-256 of its contents. Reading the folder skips nothing silently: a chunk that cannot be read
back (truncated by a crash, altered, foreign, of another dimension) is named in a RuntimeWarning
and removed, so its vectors are computed again when next needed; temporaries of killed writers are
removed. Loading never unpickles.
"""

from __future__ import annotations

import hashlib
import io
import uuid
import warnings
from pathlib import Path

import numpy as np

from .state.atomic import atomic_write, remove_stale_temporaries

__all__ = ["read_cache", "write_chunk"]


def _chunk_digest(hashes: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    digest = hashlib.sha256(hashes.tobytes())
    digest.update(f"{vectors.shape}".encode())
    digest.update(vectors.tobytes())
    return np.frombuffer(digest.digest(), dtype=np.uint8)


def _read_chunk(path: Path, dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(hashes [n, 16] uint8, vectors [n, dim] float32) of one cache chunk; ValueError (or the zip /
    npy reader's error) if the file is damaged: wrong entries, shapes, non-finite values, checksum."""
    with np.load(path, allow_pickle=False) as data:
        hashes, vectors = data["hashes"], data["vectors"]
        stored = data["sha256"] if "sha256" in data.files else None  # chunks of older versions have none
    if hashes.dtype != np.uint8 or hashes.ndim != 2 or hashes.shape[1] != 16:
        raise ValueError(f"hashes have dtype {hashes.dtype} and shape {hashes.shape}, expected uint8 [n, 16]")
    if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[0] != hashes.shape[0]:
        raise ValueError(f"vectors have dtype {vectors.dtype} and shape {vectors.shape} for {len(hashes)} hashes")
    if dim is not None and vectors.shape[1] != dim:
        raise ValueError(f"vectors have dimension {vectors.shape[1]}, the model's is {dim}")
    if stored is not None and not np.array_equal(stored, _chunk_digest(hashes, vectors)):
        raise ValueError("checksum mismatch: the chunk changed after it was written")
    if not np.isfinite(vectors).all():
        raise ValueError("vectors contain NaN/inf")
    return hashes, vectors


def read_cache(folder: Path, dim: int | None) -> dict[bytes, np.ndarray]:
    """hash -> vector for every readable chunk of `folder`; damaged chunks are warned about and removed."""
    cache: dict[bytes, np.ndarray] = {}
    if not folder.is_dir():
        return cache
    remove_stale_temporaries(folder, every_name=True)
    for chunk in sorted(folder.glob("chunk-*.npz")):
        try:
            hashes, vectors = _read_chunk(chunk, dim)
        except FileNotFoundError:  # removed by another process meanwhile
            continue
        except Exception as err:  # truncated, altered or foreign: drop it, recompute later
            warnings.warn(
                f"embedding cache chunk {chunk} is unreadable ({type(err).__name__}: {err}); "
                "removed it, its vectors will be recomputed",
                RuntimeWarning,
                stacklevel=4,
            )
            try:
                chunk.unlink(missing_ok=True)
            except OSError:  # a read-only cache: skip the chunk, keep going
                pass
            continue
        for h, v in zip(hashes, vectors):
            cache[h.tobytes()] = v
    return cache


def write_chunk(folder: Path, hashes: list[bytes], vectors: np.ndarray) -> None:
    """Write one new chunk (a fresh name, so concurrent writers never collide)."""
    table = np.frombuffer(b"".join(hashes), dtype=np.uint8).reshape(len(hashes), 16)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, hashes=table, vectors=vectors, sha256=_chunk_digest(table, vectors))
    atomic_write(folder / f"chunk-{uuid.uuid4().hex}.npz", buffer.getvalue())
