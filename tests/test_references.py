import pytest

from core.references import referenced_provisions

IDS = ["Art. 4(7)", "Art. 5(1)", "Art. 10", "Art. 17(1)", "Art. 17(2)", "Art. 17(3)", "Art. 33(1)", "Art. 83(5)"]


@pytest.mark.parametrize("question, expected", [
    ("What does Article 17(1) say?", ["Art. 17(1)"]),
    ("Art. 4(7)", ["Art. 4(7)"]),
    ("Artikel 33 Absatz 1", ["Art. 33(1)"]),
    ("l’article 17, paragraphe 1", ["Art. 17(1)"]),
    ("What is in Article 5(1)(f)?", ["Art. 5(1)"]),
    ("show me 83(5)", ["Art. 83(5)"]),
    ("Article 10 GDPR", ["Art. 10"]),
    ("Article 17", ["Art. 17(1)", "Art. 17(2)", "Art. 17(3)"]),
])
def test_named_provisions_are_found(question, expected):
    assert referenced_provisions(question, IDS) == expected


@pytest.mark.parametrize("question", [
    "within 72 hours", "Is part 3 of our policy compliant?", "What is a controller?", "Article 120",
])
def test_no_reference_no_provision(question):
    assert referenced_provisions(question, IDS) == []
