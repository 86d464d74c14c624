"""Rendering of replies as Teams messages: [n] markers, the citation entity, the source card, escaping."""
from __future__ import annotations

import json

from adapters import wording
from adapters.intents import Answered, Declined, Indexed
from adapters.teams.render import (
    MAX_ABSTRACT_CHARS,
    MAX_CITATIONS,
    escape,
    fallback_text,
    render,
    shorten,
)
from core.models import Abstention, AbstentionReason, Answer, Citation, Mode, Notice, Passage, Statement
from tests.fake_service import ART_33_1, ART_33_1_URL, record

ART_34_URL = "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#art_34"
HOSTILE = "[click](https://evil.example) **loud** _x_ <at>Everyone</at> `code` ~gone~ www.evil.example a@evil.example"


def _citation(label: str, quote: str, url: str = ART_33_1_URL, kind: str = "regulation") -> Citation:
    return Citation(label, label, quote, url, "en", kind)  # type: ignore[arg-type]


def _answer(statements: tuple[Statement, ...], **extra) -> Answer:
    return Answer(question="q", statements=statements, retrieved=(), mode=Mode.EXTRACTIVE, request_id="req-1", **extra)


ART_33 = _citation("Art. 33(1)", ART_33_1)
ART_34 = _citation("Art. 34(1)", "the controller shall communicate", ART_34_URL)
BREACH = _answer((Statement("Notify the authority within 72 hours.", (ART_33,)),
                  Statement("Tell the data subjects when the risk is high.", (ART_33, ART_34))))


def _claims(answer: Answer, *, with_card: bool = False) -> list[dict]:
    (entity,) = render(Answered(answer), with_card=with_card).entities
    return entity.get("citation", [])


def _card_texts(card: dict) -> list[str]:
    return [block["text"] if "text" in block else "".join(i["text"] for i in block["inlines"]) for block in card["body"]]


def test_statements_carry_1_based_markers_for_their_citations() -> None:
    text = render(Answered(BREACH), with_card=False).text
    assert text == "Notify the authority within 72 hours. [1]\n\nTell the data subjects when the risk is high. [1][2]"


def test_an_extractive_statement_is_its_quote_with_its_marker() -> None:
    text = render(Answered(_answer((Statement(None, (ART_34,)),))), with_card=False).text
    assert text == "“the controller shall communicate” [1]"


def test_citation_entity_has_one_claim_per_citation_with_label_link_and_quote() -> None:
    (entity,) = render(Answered(BREACH), with_card=False).entities
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
    reply = render(Answered(_answer((Statement("Many provisions apply.", citations),))), with_card=False)
    assert [c["position"] for c in reply.entities[0]["citation"]] == list(range(1, MAX_CITATIONS + 1))
    (card,) = reply.cards  # Teams would drop the rest, so the card lists them even where citations render
    assert "[25] [Art. 25]" in json.dumps(card)


def test_card_fallback_lists_each_source_linked_with_its_quote() -> None:
    (card,) = render(Answered(BREACH), with_card=True).cards
    assert card["type"] == "AdaptiveCard"
    texts = _card_texts(card)
    assert f"[1] [Art. 33(1)]({ART_33_1_URL})" in texts
    assert f"[2] [Art. 34(1)]({ART_34_URL})" in texts
    assert f"“{ART_33_1}”" in texts
    assert render(Answered(BREACH), with_card=False).cards == ()


def test_uploaded_documents_are_grouped_apart_from_the_regulation() -> None:
    answer = _answer((Statement("Our policy says 48 hours.", (_citation("Breach policy.pdf, p. 3", "within 48 hours", "",
                                                                        kind="document"),)),
                      Statement("The GDPR says 72 hours.", (_citation("Art. 33(1)", "not later than 72 hours"),))))
    reply = render(Answered(answer), with_card=True)
    texts = _card_texts(reply.cards[0])
    regulation = texts.index(wording.REGULATION_HEADER)
    documents = texts.index(wording.DOCUMENTS_HEADER)
    assert regulation < texts.index(f"[2] [Art. 33(1)]({ART_33_1_URL})") < documents
    assert texts.index("[1] Breach policy.pdf, p. 3") > documents
    document_claim, regulation_claim = reply.entities[0]["citation"]
    assert "url" not in document_claim["appearance"]
    assert document_claim["appearance"]["keywords"] != regulation_claim["appearance"]["keywords"]


def test_abstention_says_so_and_why_and_lists_related_provisions_as_not_an_answer() -> None:
    related = Passage("Art. 33(1)", "Art. 33(1)", ART_33_1, ART_33_1_URL, "en", 0.4)
    answer = _answer((), abstention=Abstention(AbstentionReason.OTHER_LAW), related=(related, related))
    reply = render(Declined(answer), with_card=True)
    assert reply.text.startswith(f"**{wording.DECLINED_HEADER}.**\n\n{wording.REASONS[AbstentionReason.OTHER_LAW]}")
    assert reply.text.count(wording.DECLINED_HEADER) == 1
    assert reply.text.endswith(f"{wording.RELATED_HEADER} [Art. 33(1)]({ART_33_1_URL})")
    assert "citation" not in reply.entities[0]
    assert reply.cards == ()


def test_notices_are_shown_and_feedback_buttons_are_enabled() -> None:
    reply = render(Answered(_answer(BREACH.statements, notices=(Notice.LLM_UNAVAILABLE,))), with_card=False)
    assert reply.text.endswith(f"_{wording.NOTICES[Notice.LLM_UNAVAILABLE]}_")
    assert reply.channel_data == {"feedbackLoopEnabled": True}


def test_model_and_document_text_never_becomes_markup_or_a_live_link() -> None:
    hostile = _citation("Art. 33(1)", HOSTILE)
    answer = _answer((Statement(HOSTILE, (hostile,)), Statement(None, (hostile,))))
    reply = render(Answered(answer), with_card=True)
    for text in (reply.text, fallback_text(Answered(answer))):
        assert "[click](" not in text and "**loud**" not in text and "<at>" not in text and "`code`" not in text
        assert "https://evil" not in text and "www.evil" not in text and "a@evil" not in text
    assert "\\[click\\]\\(https\u200b://evil.example\\)" in reply.text
    # In the card the quote is a text run, which Teams never reads as markdown.
    [quote] = [b for b in reply.cards[0]["body"] if b["type"] == "RichTextBlock"][:1]
    assert quote["inlines"] == [{"type": "TextRun", "text": f"“{HOSTILE}”", "isSubtle": True}]
    assert "\\_" in render(Indexed(record(filename="my_policy.pdf")), with_card=False).text


def test_escape_keeps_plain_text_readable() -> None:
    assert escape("Art. 33(1) applies - within 72 hours.") == "Art. 33\\(1\\) applies - within 72 hours."
    assert escape("- a\n1. b") == "\\- a\n1\\. b"
