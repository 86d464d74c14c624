from core.lemmas import LEMMATISED, lemma_file, table, texts_of
from core.text import char_ngrams, find_verbatim, fold, tokenize, words
from corpus.guide import Guides


def test_references_are_single_units():
    tokens = tokenize("What does Article 17(1) say? And Art. 4(7), and 83(5)?", "en")
    assert {"art17_1", "art4_7", "art83_5"} <= set(tokens)
    assert "17" not in tokens and "1" not in tokens


def test_paragraph_words_join_the_reference_in_other_languages():
    assert "art33_1" in tokenize("Was regelt Artikel 33 Absatz 1?", "de")
    assert "art33_1" in tokenize("¿Qué dice el artículo 33, apartado 1?", "es")


def test_grouped_numbers_are_one_token():
    assert "20000000" in tokenize("up to 20 000 000 EUR", "en")
    assert "20000000" in tokenize("bis zu 20.000.000 EUR", "de")


def test_case_and_accents_fold_and_words_stem_per_language():
    assert tokenize("Controllers", "en") == tokenize("controller", "en")
    assert tokenize("Löschung", "de") == tokenize("loschung", "de")
    assert tokenize("données", "fr") == tokenize("donnée", "fr")


def test_languages_without_a_snowball_stemmer_join_inflected_forms_through_their_lemma_tables():
    assert tokenize("spracúvania osobných údajov", "sk") == tokenize("spracúvanie osobné údaje", "sk")
    assert tokenize("obdelave osebnih podatkov", "sl") == tokenize("obdelava osebni podatki", "sl")
    assert tokenize("personas datu apstrādes", "lv") == tokenize("personas dati apstrāde", "lv")
    assert tokenize("на личните данни", "bg") == tokenize("на лични данни", "bg")
    assert tokenize("il-ipproċessar tad-data", "mt") == ["il-ipprocessar", "tad-data"]  # no table: folded words


def test_the_committed_lemma_tables_are_what_the_builder_writes(components):
    store = components.store  # builds the corpus on first use
    for lang in LEMMATISED:
        texts = texts_of(lang, store.corpus_dir, Guides())
        assert table(lang, texts, words) == lemma_file(lang).read_text("utf-8"), (
            f"corpus/lemmas/{lang}.tsv is stale: run python -m core.lemmas")


def test_char_ngrams_join_compounds():
    shared = set(char_ngrams("boete")) & set(char_ngrams("geldboeten"))
    assert {"boet", "oete"} <= shared


def test_fold_ignores_typographic_quotes_and_whitespace():
    assert fold("‘controller’  means\n the") == "'controller' means the"


def test_find_verbatim_returns_the_stored_span():
    text = "the controller shall ‘without undue delay’ and,\nwhere feasible, not later than 72 hours"
    assert find_verbatim("Shall 'without undue delay' and, where", text) == "shall ‘without undue delay’ and,\nwhere"
    assert find_verbatim("not later than 73 hours", text) is None
