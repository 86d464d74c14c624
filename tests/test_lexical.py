"""BM25 as sparse postings: the same scores as rank-bm25, built once, ready for every language at start."""
from __future__ import annotations

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from core.lexical import BM25, LexicalIndexes
from core.text import char_ngrams, tokenize
from corpus.guide import Guides

QUERIES = ("How quickly must a personal data breach be notified?", "right to erasure", "processor processor contract",
           "Art. 83(5) fines 20 000 000 EUR", "zzz no such words")


def test_scores_equal_rank_bm25_on_the_english_provisions(components):
    documents = [f"{p.title}. {p.text}" for p in components.store.provisions("en")]
    for tokens_of in (lambda text: tokenize(text, "en"), char_ngrams):
        corpus = [tokens_of(d) for d in documents]
        ours, reference = BM25.build(corpus), BM25Okapi(corpus)
        for query in QUERIES:
            assert np.allclose(ours.scores(tokens_of(query)), reference.get_scores(tokens_of(query)), rtol=1e-5, atol=1e-6)


def test_an_empty_corpus_and_an_empty_query_score_zero():
    assert BM25.build([[], []]).scores(["data"]).tolist() == [0.0, 0.0]
    assert BM25.build([["data"]]).scores([]).tolist() == [0.0]


def test_every_served_language_is_ready_after_opening(components):
    indexes = components.retriever.lexical
    for lang in components.store.languages:
        scores = indexes.language(lang).word_scores(components.store.get("Art. 33(1)", lang).text)
        assert int(np.argmax(scores)) == components.store.position["Art. 33(1)"]


def test_stored_indexes_are_reused_and_rebuilt_when_their_sources_change(components, tmp_path):
    store = components.store
    guides_dir = tmp_path / "guides"
    guides_dir.mkdir()
    (guides_dir / "en_1.jsonl").write_text('{"id": "Art. 33(1)", "asks": ["When do we tell the regulator?"]}\n')
    guides = Guides(guides_dir)
    first = LexicalIndexes.open(store, guides, tmp_path / "lexical")
    header = tmp_path / "lexical" / "lexical-en.json"
    stamp = header.read_text()
    LexicalIndexes.open(store, guides, tmp_path / "lexical")
    assert header.read_text() == stamp  # reused, not rebuilt
    (guides_dir / "en_1.jsonl").write_text('{"id": "Art. 17(1)", "asks": ["When do we tell the regulator?"]}\n')
    rebuilt = LexicalIndexes.open(store, guides, tmp_path / "lexical")
    assert header.read_text() != stamp
    position = store.position
    assert np.argmax(first.guide("en").word_scores("tell the regulator")) == position["Art. 33(1)"]
    assert np.argmax(rebuilt.guide("en").word_scores("tell the regulator")) == position["Art. 17(1)"]


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_stored_index_is_rebuilt(components, tmp_path, damage):
    store = components.store
    guides = Guides(tmp_path / "no guides")
    LexicalIndexes.open(store, guides, tmp_path)
    data = next(tmp_path.glob("lexical-en-*.bin"))
    if damage == "truncate":
        data.write_bytes(data.read_bytes()[:100])
    else:
        (tmp_path / "lexical-en.json").write_text("not json")
    reopened = LexicalIndexes.open(store, guides, tmp_path)
    assert np.argmax(reopened.language("en").word_scores("personal data breach notification")) > 0
