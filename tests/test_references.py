"""One parser for provision references in every official language, resolved against what exists."""
import pytest

from core.references import Missing, NoSuchProvision, ProvisionRef, Structure, find_references, missing_provisions, \
    referenced_provisions

IDS = ["Art. 4(7)", "Art. 5(1)", "Art. 6(1)", "Art. 10", "Art. 17(1)", "Art. 17(2)", "Art. 17(3)", "Art. 33(1)",
       "Art. 33(2)", "Art. 33(3)", "Art. 33(4)", "Art. 33(5)", "Art. 83(5)", "Art. 99(1)", "Art. 99(2)"]
POINTS = {"Art. 6(1)": ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"], "Art. 5(1)": ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]}
STRUCTURE = Structure(IDS, POINTS)


@pytest.mark.parametrize("question, expected", [
    ("What does Article 17(1) say?", ["Art. 17(1)"]),
    ("Art. 4(7)", ["Art. 4(7)"]),
    ("Artikel 33 Absatz 1", ["Art. 33(1)"]),
    ("l’article 17, paragraphe 1", ["Art. 17(1)"]),
    ("What is in Article 5(1)(f)?", ["Art. 5(1)"]),
    ("show me 83(5)", ["Art. 83(5)"]),
    ("Article 10 GDPR", ["Art. 10"]),
    ("Article 17", ["Art. 17(1)", "Art. 17(2)", "Art. 17(3)"]),
    ("Articles 10 and 17(2)", ["Art. 10", "Art. 17(2)"]),
])
def test_named_provisions_are_found(question, expected):
    assert referenced_provisions(question, STRUCTURE) == expected


@pytest.mark.parametrize("text, expected", [
    ("Art. 6 Abs. 1 lit. f DSGVO", "Art. 6(1)(f)"), ("article 6, paragraphe 1, point f)", "Art. 6(1)(f)"),
    ("artículo 6, apartado 1, letra f)", "Art. 6(1)(f)"), ("articolo 6, paragrafo 1, lettera f)", "Art. 6(1)(f)"),
    ("artigo 6.º, n.º 1, alínea f)", "Art. 6(1)(f)"), ("artikel 6, lid 1, sub f", "Art. 6(1)(f)"),
    ("art. 6 ust. 1 lit. f RODO", "Art. 6(1)(f)"), ("artikel 6, stk. 1, litra f", "Art. 6(1)(f)"),
    ("6 artiklan 1 kohdan f alakohta", "Art. 6(1)(f)"), ("artikli 6 lõike 1 punkt f", "Art. 6(1)(f)"),
    ("6. cikk (1) bekezdés f) pont", "Art. 6(1)(f)"), ("6 straipsnio 1 dalies f punktas", "Art. 6(1)(f)"),
    ("6. panta 1. punkta f) apakšpunkts", "Art. 6(1)(f)"), ("čl. 6 odst. 1 písm. f)", "Art. 6(1)(f)"),
    ("článok 6 ods. 1 písm. f)", "Art. 6(1)(f)"), ("člen 6(1)(f)", "Art. 6(1)(f)"), ("33. člen", "Art. 33"),
    ("članak 6. stavak 1. točka (f)", "Art. 6(1)(f)"), ("член 6, параграф 1, буква е)", "Art. 6(1)(е)"),
    ("άρθρο 6 παράγραφος 1 στοιχείο στ)", "Art. 6(1)(στ)"), ("articolul 6 alineatul (1) litera (f)", "Art. 6(1)(f)"),
    ("Airteagal 6(1)(f)", "Art. 6(1)(f)"), ("Artikolu 6(1)(f)", "Art. 6(1)(f)"), ("Art 6.1.f GDPR", "Art. 6(1)(f)"),
])
def test_reference_forms_of_every_official_language(text, expected):
    assert [str(r.ref) for r in find_references(text)] == [expected]


@pytest.mark.parametrize("text, expected", [
    ("What does paragraph 6 of Article 33 say?", ["Art. 33(6)"]),
    ("O que diz o n.º 6 do artigo 33.º do RGPD?", ["Art. 33(6)"]),
    ("¿Qué dice el apartado 6 del artículo 33?", ["Art. 33(6)"]),
    ("Cosa prevede la lettera f) del paragrafo 1 dell'articolo 6?", ["Art. 6(1)(f)"]),
    ("le paragraphe 6 de l'article 33", ["Art. 33(6)"]),
    ("Absatz 6 des Artikels 33", ["Art. 33(6)"]),
    ("alineatul (6) al articolului 33", ["Art. 33(6)"]),
    ("παράγραφος 6 του άρθρου 33", ["Art. 33(6)"]),
    ("point (z) of Article 6(1)", ["Art. 6(1)(z)"]),
    ("art. 6 ust. 1 lit. f i art. 9 ust. 2", ["Art. 6(1)(f)", "Art. 9(2)"]),
    ("Article 6 paragraph 1 and Article 9 paragraph 2", ["Art. 6(1)", "Art. 9(2)"]),
    ("Does paragraph 2 of our policy meet Article 6?", ["Art. 6"]),
])
def test_a_paragraph_or_point_written_before_its_article(text, expected):
    assert [str(r.ref) for r in find_references(text)] == expected


def test_lists_and_ranges_of_articles():
    assert [str(r.ref) for r in find_references("Articles 15 to 18 and Articles 77, 78 and 79")] == [
        "Art. 15", "Art. 16", "Art. 17", "Art. 18", "Art. 77", "Art. 78", "Art. 79"]


@pytest.mark.parametrize("question", [
    "within 72 hours", "Is part 3 of our policy compliant?", "What is a controller?",
    "What are the conditions for consent (2)?", "We answered 2 (2) requests", "the artist 5 (2)", "in 2019 (2)",
])
def test_no_reference_no_provision(question):
    assert find_references(question) == []


@pytest.mark.parametrize("question, missing", [
    ("What does Article 104 say?", NoSuchProvision(ProvisionRef(104), Missing.ARTICLE, 8)),  # 8 articles in IDS
    ("Art. 33(7)", NoSuchProvision(ProvisionRef(33, 7), Missing.PARAGRAPH, 5)),
    ("Artikel 10 Absatz 2", NoSuchProvision(ProvisionRef(10, 2), Missing.PARAGRAPH, 0)),
    ("Art. 6 Abs. 1 lit. g", NoSuchProvision(ProvisionRef(6, 1, "g"), Missing.POINT, 6)),
    ("Art. 17(1)(a)", NoSuchProvision(ProvisionRef(17, 1, "a"), Missing.POINT, 0)),
])
def test_a_reference_to_a_provision_that_does_not_exist_says_what_exists(question, missing):
    assert missing_provisions(question, STRUCTURE) == [missing]
    assert referenced_provisions(question, STRUCTURE) == []


def test_points_in_another_alphabet_resolve_by_the_language_s_own_labels():
    greek = {"Art. 6(1)": ["α)", "β)", "γ)", "δ)", "ε)", "στ)"]}
    assert missing_provisions("άρθρο 6 παράγραφος 1 στοιχείο στ)", STRUCTURE, greek) == []
    assert missing_provisions("άρθρο 6 παράγραφος 1 στοιχείο ζ)", STRUCTURE, greek)[0].missing is Missing.POINT
