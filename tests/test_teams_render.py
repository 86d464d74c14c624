"""Rendering of answers as Teams messages: [n] markers, the citation entity, the source card."""
from __future__ import annotations

import json

from adapters.teams_render import (
    ABSTENTION,
    MAX_ABSTRACT_CHARS,
    MAX_CITATIONS,
    RELATED_HEADER,
    render_answer,
    shorten,
)
from core.models import Answer, Citation, Passage, Statement
from tests.fake_service import ART_33_1, ART_33_1_URL

ART_34_URL = "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#art_34"


def _citation(label: str, quote: str, url: str = ART_33_1_URL, kind: str = "regulation") -> Citation:
    return Citation(label, label, quote, url, "en", kind)  # type: ignore[arg-type]


def _answer(statements: tuple[Statement, ...], citations: tuple[Citation, ...], **extra) -> Answer:
    return Answer("q", False, statements, citations, (), "extractive", "req-1", **extra)


BREACH = _answer(
    (Statement("Notify the authority within 72 hours.", (0,)),
     Statement("Tell the data subjects when the risk is high.", (0, 1))),
    (_citation("Art. 33(1)", ART_33_1), _citation("Art. 34(1)", "the controller shall communicate", ART_34_URL)),
)


def _claims(answer: Answer, *, with_card: bool = False) -> list[dict]:
    (entity,) = render_answer(answer, with_card=with_card).entities
    return entity.get("citation", [])


def test_statements_carry_1_based_markers_for_their_citations() -> None:
    text = render_answer(BREACH, with_card=False).text
    assert text == "Notify the authority within 72 hours. [1]\n\nTell the data subjects when the risk is high. [1][2]"


def test_citation_entity_has_one_claim_per_citation_with_label_link_and_quote() -> None:
    (entity,) = render_answer(BREACH, with_card=False).entities
    assert entity["type"] == "https://schema.org/Message"
    assert entity["@type"] == "Message" and entity["@context"] == "https://schema.org"
    assert entity["additionalType"] == ["AIGeneratedContent"]
    first, second = entity["citation"]
    assert (first["@type"], first["position"], second["position"]) == ("Claim", 1, 2)
    assert first["appearance"]["@type"] == "DigitalDocument"
    assert first["appearance"]["name"] == "Art. 33(1)"
    assert first["appearance"]["url"] == ART_33_1_URL
    assert second["appearance"]["abstract"] == "the controller shall communicate"


def test_long_quotes_are_cut_at_a_word_boundary_within_160_characters() -> None:
    abstract = _claims(BREACH)[0]["appearance"]["abstract"]
    assert len(abstract) <= MAX_ABSTRACT_CHARS
    assert abstract.endswith("…")
    kept = abstract.removesuffix("…")
    assert ART_33_1.startswith(kept) and ART_33_1[len(kept)] in " ,"


def test_shorten() -> None:
    assert shorten("short  quote\n", 160) == "short quote"
    assert shorten("alpha beta gamma", 12) == "alpha beta…"
    assert shorten("x" * 30, 10) == "x" * 9 + "…"


def test_at_most_20_citations_in_the_entity_and_all_of_them_in_the_card() -> None:
    citations = tuple(_citation(f"Art. {n}", f"quote {n}") for n in range(1, 26))
    answer = _answer((Statement("Many provisions apply.", tuple(range(25))),), citations)
    reply = render_answer(answer, with_card=False)
    assert [c["position"] for c in reply.entities[0]["citation"]] == list(range(1, MAX_CITATIONS + 1))
    (card,) = reply.cards  # Teams would drop the rest, so the card lists them even where citations render
    assert "[25] [Art. 25]" in json.dumps(card)


def test_card_fallback_lists_each_source_linked_with_its_quote() -> None:
    (card,) = render_answer(BREACH, with_card=True).cards
    assert card["type"] == "AdaptiveCard"
    texts = [block["text"] for block in card["body"]]
    assert f"[1] [Art. 33(1)]({ART_33_1_URL})" in texts
    assert f"[2] [Art. 34(1)]({ART_34_URL})" in texts
    assert f"“{ART_33_1}”" in texts
    assert render_answer(BREACH, with_card=False).cards == ()


def test_uploaded_documents_are_grouped_apart_from_the_regulation() -> None:
    answer = _answer(
        (Statement("Our policy says 48 hours.", (0,)), Statement("The GDPR says 72 hours.", (1,))),
        (_citation("Breach policy.pdf, p. 3", "within 48 hours", "", kind="document"),
         _citation("Art. 33(1)", "not later than 72 hours")),
    )
    reply = render_answer(answer, with_card=True)
    texts = [block["text"] for block in reply.cards[0]["body"]]
    regulation = texts.index("GDPR (Regulation (EU) 2016/679)")
    documents = texts.index("From your organisation's documents")
    assert regulation < texts.index(f"[2] [Art. 33(1)]({ART_33_1_URL})") < documents
    assert texts.index("[1] Breach policy.pdf, p. 3") > documents
    document_claim, regulation_claim = reply.entities[0]["citation"]
    assert "url" not in document_claim["appearance"]
    assert document_claim["appearance"]["keywords"] != regulation_claim["appearance"]["keywords"]


def test_abstention_says_so_and_lists_related_provisions_as_not_an_answer() -> None:
    related = Passage("Art. 33(1)", "Art. 33(1)", ART_33_1, ART_33_1_URL, "en", 0.4)
    answer = Answer("q", True, (Statement(ABSTENTION, ()),), (), (related,), "extractive", "req-2",
                    related=(related, related))
    reply = render_answer(answer, with_card=True)
    assert reply.text.startswith(f"**{ABSTENTION}**")
    assert reply.text.count(ABSTENTION) == 1
    assert reply.text.endswith(f"{RELATED_HEADER} [Art. 33(1)]({ART_33_1_URL})")
    assert "citation" not in reply.entities[0]
    assert reply.cards == ()


def test_notice_is_shown_and_feedback_buttons_are_enabled() -> None:
    notice = "The language model was unavailable; extractive answer shown."
    reply = render_answer(_answer(BREACH.statements, BREACH.citations, notice=notice), with_card=False)
    assert reply.text.endswith(f"_{notice}_")
    assert reply.channel_data == {"feedbackLoopEnabled": True}
