"""Nothing reaches a user unless it cites a retrieved provision and quotes it word for word."""
from core.models import Passage
from core.verify import Draft, DraftStatement, Verifier

ART_83_5 = Passage("Art. 83(5)", "Art. 83(5)",
                   "Infringements of the following provisions shall, in accordance with paragraph 2, be subject to "
                   "administrative fines up to 20 000 000 EUR, or in the case of an undertaking, up to 4 % of the total "
                   "worldwide annual turnover of the preceding financial year, whichever is higher:",
                   "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#art_83", "en", 3.0)
RETRIEVED = [ART_83_5]


def verify(draft, retrieved):
    return Verifier().run(draft, retrieved)


def citations(verified):
    return [c for statement in verified.statements for c in statement.citations]


def one(text="The higher tier of fines is 20 million euro.", sources=("Art. 83(5)",),
        quote="administrative fines up to 20 000 000 EUR"):
    return Draft((DraftStatement(text, sources, quote),))


def test_a_good_statement_survives_with_labels_and_links_from_the_store():
    verified = verify(one(), RETRIEVED)
    assert len(verified.statements) == 1
    citation = citations(verified)[0]
    assert (citation.label, citation.url) == ("Art. 83(5)", ART_83_5.url)
    assert citation.quote in ART_83_5.text


def test_citation_to_an_unretrieved_provision_is_dropped():
    verified = verify(one(sources=("Art. 99(9)",)), RETRIEVED)
    assert verified.statements == () and citations(verified) == []


def test_a_changed_number_is_dropped():
    assert verify(one(quote="administrative fines up to 10 000 000 EUR"), RETRIEVED).statements == ()


def test_a_paraphrase_in_quote_marks_is_dropped():
    assert verify(one(quote="fines of up to twenty million euros"), RETRIEVED).statements == ()


def test_a_trivially_short_quote_proves_nothing():
    assert verify(one(quote="EUR"), RETRIEVED).statements == ()


def test_typography_and_whitespace_do_not_matter_but_the_shown_quote_is_the_stored_one():
    verified = verify(one(quote="ADMINISTRATIVE  fines up to 20\u00a0000\u00a0000 EUR"), RETRIEVED)
    assert citations(verified)[0].quote == "administrative fines up to 20 000 000 EUR"


def test_a_statement_naming_a_provision_it_does_not_quote_is_dropped():
    verified = verify(one(text="Under Article 84(1) Member States add penalties."), RETRIEVED)
    assert verified.statements == ()


def test_the_texts_own_quote_marks_stay_in_the_shown_quote():
    definition = Passage("Art. 4(7)", "Art. 4(7)", "‘controller’ means the natural or legal person, public authority",
                         "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#art_4", "en", 3.0)
    draft = Draft((DraftStatement("Art. 4(7) — Definitions", ("Art. 4(7)",), definition.text),))
    assert citations(verify(draft, [definition]))[0].quote == definition.text


def test_a_negation_counts_only_next_to_the_word_it_negates_in_the_quote():
    from core.claims import unsupported

    quote = "not later than 72 hours after having become aware of it, notify the personal data breach"
    assert [p.what for p in unsupported("Breaches do not have to be notified.", quote, "en")] == ["negation"]
    assert unsupported("Notify not later than 72 hours after becoming aware of it.", quote, "en") == []
    german = "Die Meldung an die betroffene Person ist nicht erforderlich, wenn eine der folgenden Bedingungen erfüllt ist"
    assert unsupported("Die Meldung ist nicht erforderlich, wenn eine Bedingung erfüllt ist.", german, "de") == []
    assert [p.what for p in unsupported("Der Verantwortliche muss nicht melden.", german, "de")] == ["negation"]


def test_a_sentence_resting_on_a_document_is_shown_as_the_documents_quote_only():
    policy = Passage("doc:u1:c1", "Policy.pdf, p. 1", "Breaches never need to be reported to anyone at all.", "", "en",
                     1.0, kind="document")
    draft = Draft((DraftStatement("Breaches never need to be reported.", ("doc:u1:c1",), "never need to be reported"),))
    verified = verify(draft, [policy])
    assert [(s.text, s.citations[0].quote) for s in verified.statements] == [(None, "never need to be reported")]
