import pytest

from core.language import detect_language


@pytest.mark.parametrize("question, lang", [
    ("How quickly must a personal data breach be reported?", "en"),
    ("Wie schnell muss eine Datenpanne gemeldet werden?", "de"),
    ("Qu’est-ce qu’un sous-traitant ?", "fr"),
    ("¿Cuánto tiempo tengo para notificar una brecha de seguridad?", "es"),
    ("Wat is de maximale boete?", "nl"),
    ("Czy muszę wyznaczyć inspektora ochrony danych?", "pl"),
])
def test_language_of_a_question(question, lang):
    assert detect_language(question) == lang


def test_unsure_means_the_default():
    assert detect_language("Art. 4(7)") == "en"
    assert detect_language("DPO?", default="en") == "en"
