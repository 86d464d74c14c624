"""When the Regulation does not answer: decided on evidence, before any generation, in every language.

In order:
1. a question naming a provision the Regulation does not have (Article 104, Article 33(7), Art. 6(1)(g)) is
   declined with what exists instead; a question naming an existing provision is answered;
2. a question written in a script no official language uses is declined, saying which languages are served;
3. a classifier learned from labelled questions (`evals/data/abstention*.jsonl`, trained by
   `python -m evals.train_abstention`) weighs what the question asks for (the embedding of its English
   reading, and the words and word pairs of that reading) against how close the Regulation is (similarities,
   fused scores, how much of the question the provisions' words cover). Its classes are "answerable" and the
   kinds of question the articles cannot answer; the most likely kind is the reason given. A mention of a law, a
   country, a year or a court is not evidence either way: the training set holds such words in both classes.
The threshold depends on what follows: extractive answers decline at the threshold chosen on the dev split;
an LLM, which gives its own not-in-the-sources verdict, is only spared what the classifier is sure of.
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from pathlib import Path

import numpy as np

from core.models import Abstention, AbstentionReason
from core.provisions import ProvisionStore
from core.references import missing_provisions
from core.retrieval import Retrieval

MODEL_FILE = Path(__file__).parent / "abstention_model.json"
# The labelled questions the model was trained on, embedded beside the Regulation: how close a question is to
# known unanswerable and answerable ones is evidence too (written by evals.train_abstention).
EXEMPLARS_FILE = Path(__file__).parent / "abstention_exemplars.jsonl"
EXEMPLAR_KIND = "exemplar"
EXEMPLAR_NEIGHBOURS = 3
# The scalar evidence the classifier reads, in this order, after the embedding.
EVIDENCE_FEATURES = ("similarity_text", "similarity_guide", "similarity_title", "top_score", "margin",
                     "log_tokens", "known_share", "top_share", "english", "near_unanswerable", "near_answerable")
# The training set's categories of unanswerable questions, and the reason each is given as.
REASONS = {
    "person": AbstentionReason.FACTS_AND_FIGURES, "statistic": AbstentionReason.FACTS_AND_FIGURES,
    "events-news": AbstentionReason.FACTS_AND_FIGURES, "national-rule": AbstentionReason.NATIONAL_LAW,
    "list-elsewhere": AbstentionReason.PUBLISHED_ELSEWHERE, "case-law": AbstentionReason.CASE_LAW_OR_GUIDANCE,
    "guidance-content": AbstentionReason.CASE_LAW_OR_GUIDANCE, "other-law": AbstentionReason.OTHER_LAW,
    "product-fact": AbstentionReason.PRODUCTS_AND_IT, "technical-howto": AbstentionReason.PRODUCTS_AND_IT,
    "drafting": AbstentionReason.DRAFTING, "misuse": AbstentionReason.MISUSE, "off-topic": AbstentionReason.OFF_TOPIC,
    "opinion-prediction": AbstentionReason.OPINION, "nonexistent-provision": AbstentionReason.NOT_COVERED,
}
# Below this probability the reason is not named: "nothing in the Regulation answers this". A wrong reason misleads
# more than the generic one, so the share was chosen on dev (`run_eval abstention`, the reasons of the declined
# questions) among 0.5, 0.6 and 0.7, of the reason or of its most likely kind alone, as the one naming the most right
# reasons with at least 4 of 5 named right: the reason's share at 0.7 named 16 right and 4 wrong; the kind's alone at
# 0.5, as before, 21 right and 8 wrong.
MIN_REASON_SHARE = 0.7
# Scripts the official languages are written in; a question mostly in others is in no official language.
OFFICIAL_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")
MIN_OFFICIAL_SCRIPT_SHARE = 0.5


class Strictness(Enum):
    """Who decides after the classifier: nobody (extractive answers), or a model that can say not-in-sources."""

    EXTRACTIVE = "extractive"
    LLM = "llm"


class ModelMismatch(RuntimeError):
    """The abstention model was trained with another embedding model; the message says how to retrain."""


@dataclass(frozen=True)
class Features:
    """What the classifier reads about a question."""

    values: np.ndarray  # the embedding of its English reading, then the EVIDENCE_FEATURES
    reading: str  # its English reading, whose words and word pairs are weighed too


_READING_WORD = re.compile(r"\w\w+")


def reading_terms(reading: str) -> list[str]:
    """The words and adjacent word pairs of an English reading: "how many", "who heads" say what is asked for
    more sharply than a few embedding axes, in every language, since other languages' questions are read
    through their lexicons into English words."""
    words = _READING_WORD.findall(reading.lower())
    return words + [f"{a} {b}" for a, b in zip(words, words[1:])]


@dataclass(frozen=True)
class AbstentionModel:
    """Two logistic regressions, as evals.train_abstention fits them: one decides (answerable or not) over the
    standardised [embedding's principal axes, evidence] and the TF-IDF of the reading's terms, the other names the
    kind of question it is when declined, from the standardised inputs alone. The embedding enters through a few
    axes of the training questions' own variation: read whole, its 384 dimensions let the model learn the training
    kinds' wording rather than what they ask for."""

    embedding_mean: np.ndarray
    embedding_axes: np.ndarray  # axes × embedding dimensions
    mean: np.ndarray
    scale: np.ndarray
    decision: np.ndarray  # weights of P(answerable); the last element is the intercept
    categories: tuple[str, ...]
    category_weights: np.ndarray  # categories × (features + 1)
    reading_terms: tuple[str, ...]  # the terms of the readings' vocabulary
    reading_idf: np.ndarray  # their inverse document frequencies
    reading_weights: np.ndarray  # and their weights in P(answerable)
    thresholds: dict[str, float]  # by Strictness value: declined when P(answerable) is below it
    embedding_model: str

    @classmethod
    def load(cls, path: Path = MODEL_FILE) -> AbstentionModel:
        data = json.loads(Path(path).read_text("utf-8"))
        return cls(np.array(data["embedding_mean"]), np.array(data["embedding_axes"]), np.array(data["mean"]),
                   np.array(data["scale"]), np.array(data["decision"]), tuple(data["categories"]),
                   np.array(data["category_weights"]), tuple(data["reading_terms"]), np.array(data["reading_idf"]),
                   np.array(data["reading_weights"]), dict(data["thresholds"]), data["embedding_model"])

    def to_json(self) -> dict:
        return {"embedding_mean": self.embedding_mean.tolist(), "embedding_axes": self.embedding_axes.tolist(),
                "mean": self.mean.tolist(), "scale": self.scale.tolist(), "decision": self.decision.tolist(),
                "categories": list(self.categories), "category_weights": self.category_weights.tolist(),
                "reading_terms": list(self.reading_terms), "reading_idf": self.reading_idf.tolist(),
                "reading_weights": self.reading_weights.tolist(), "thresholds": self.thresholds,
                "embedding_model": self.embedding_model}

    @cached_property
    def _term_position(self) -> dict[str, int]:
        return {term: i for i, term in enumerate(self.reading_terms)}

    def inputs(self, features: np.ndarray) -> np.ndarray:
        """`features` (embedding, evidence) as the regressions read them: projected, then standardised."""
        embedding, evidence = features[:-len(EVIDENCE_FEATURES)], features[-len(EVIDENCE_FEATURES):]
        projected = np.concatenate([self.embedding_axes @ (embedding - self.embedding_mean), evidence])
        return (projected - self.mean) / self.scale

    def reading_tfidf(self, reading: str) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the reading's known terms and their TF-IDF, as scikit-learn's TfidfVectorizer
        (sublinear tf, L2-normalised) computes it."""
        counts = Counter(t for t in reading_terms(reading) if t in self._term_position)
        if not counts:
            return np.zeros(0, dtype=int), np.zeros(0)
        positions = np.array([self._term_position[t] for t in counts])
        values = (1.0 + np.log(np.array(list(counts.values()), dtype=float))) * self.reading_idf[positions]
        return positions, values / np.linalg.norm(values)

    def answerable(self, features: Features) -> float:
        """P(answerable)."""
        x = np.append(self.inputs(features.values), 1.0)
        positions, tfidf = self.reading_tfidf(features.reading)
        return float(1.0 / (1.0 + np.exp(-(x @ self.decision + tfidf @ self.reading_weights[positions]))))

    def category_probabilities(self, features: Features) -> dict[str, float]:
        x = np.append(self.inputs(features.values), 1.0)
        logits = self.category_weights @ x
        exp = np.exp(logits - logits.max())
        return dict(zip(self.categories, (exp / exp.sum()).tolist()))


@dataclass(frozen=True)
class Exemplar:
    id: str
    question: str
    lang: str
    answerable: bool
    kind: str

    @property
    def key(self) -> str:
        """How its entry is named in the dense index: the class, the kind of question, the id."""
        return f"{'a' if self.answerable else 'u'}|{self.kind}|{self.id}"


def load_exemplars(path: Path = EXEMPLARS_FILE) -> list[Exemplar]:
    if not Path(path).is_file():
        return []
    with open(path, encoding="utf-8") as lines:
        return [Exemplar(**json.loads(line)) for line in lines if line.strip()]


def _nearest(similarities: dict[str, float], label: str, exclude_kind: str | None) -> float:
    """Mean similarity of the closest exemplars of a class, leaving out those of one kind (training)."""
    found = sorted((s for key, s in similarities.items()
                    if key.startswith(label + "|") and key.split("|", 2)[1] != exclude_kind), reverse=True)
    return float(np.mean(found[:EXEMPLAR_NEIGHBOURS])) if found else 0.0


def features(retrieval: Retrieval, exclude_kind: str | None = None) -> Features:
    """What the classifier reads about a question: its English reading, that reading's embedding and the scalar
    evidence. `exclude_kind`: training only, so that a question is not judged by the exemplars of its own kind."""
    evidence = retrieval.evidence
    scalars = {
        "similarity_text": evidence.similarity_text, "similarity_guide": evidence.similarity_guide,
        "similarity_title": evidence.similarity_title, "top_score": evidence.top_score, "margin": evidence.margin,
        "log_tokens": float(np.log1p(evidence.tokens)), "known_share": evidence.known_share,
        "top_share": evidence.top_share, "english": float(retrieval.lang == "en"),
        "near_unanswerable": _nearest(evidence.exemplars, "u", exclude_kind),
        "near_answerable": _nearest(evidence.exemplars, "a", exclude_kind),
    }
    vector = evidence.vector if evidence.vector is not None else np.zeros(0)
    return Features(np.concatenate([vector, [scalars[name] for name in EVIDENCE_FEATURES]]), evidence.english)


def official_script_share(text: str) -> float:
    """Share of the letters of `text` in the scripts the official languages use (1.0 without letters)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 1.0
    return sum(unicodedata.name(c, "").startswith(OFFICIAL_SCRIPTS) for c in letters) / len(letters)


class AbstentionPolicy:
    def __init__(self, store: ProvisionStore, model: AbstentionModel, strictness: Strictness = Strictness.EXTRACTIVE,
                 embedding_model: str | None = None):
        if embedding_model is not None and embedding_model != model.embedding_model:
            raise ModelMismatch(
                f"The abstention model was trained with the embedding model {model.embedding_model!r}, not "
                f"{embedding_model!r}; train one for it with: python -m evals.train_abstention")
        self.store = store
        self.model = model
        self.strictness = strictness
        self.threshold = model.thresholds[strictness.value]

    def with_strictness(self, strictness: Strictness) -> AbstentionPolicy:
        return AbstentionPolicy(self.store, self.model, strictness)

    def decide(self, question: str, retrieval: Retrieval) -> Abstention | None:
        """None: answer it. Otherwise the reason it is declined."""
        missing = missing_provisions(question, self.store.structure, self.store.point_labels(retrieval.lang))
        if missing:
            return Abstention(AbstentionReason.NO_SUCH_PROVISION, tuple(missing))
        if retrieval.referenced:
            return None
        if official_script_share(question) < MIN_OFFICIAL_SCRIPT_SHARE:
            return Abstention(AbstentionReason.UNSUPPORTED_LANGUAGE)
        if retrieval.evidence is None or not retrieval.passages:
            return Abstention(AbstentionReason.NOT_COVERED)
        values = features(retrieval)
        if self.model.answerable(values) >= self.threshold:
            return None
        return Abstention(self.reason(values))

    def reason(self, values: Features) -> AbstentionReason:
        """The reason most of the kinds' probability points to (a person and a statistic are both facts and figures),
        if the classifier is fairly sure of it."""
        shares: Counter[AbstentionReason] = Counter()
        for category, probability in self.model.category_probabilities(values).items():
            shares[REASONS.get(category, AbstentionReason.NOT_COVERED)] += probability
        reason, share = shares.most_common(1)[0]
        return reason if share >= MIN_REASON_SHARE else AbstentionReason.NOT_COVERED
