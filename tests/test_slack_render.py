"""What Slack users see: escaping, the look of answers vs abstentions, and splitting within Slack's limits."""
from __future__ import annotations

import json
import re

from adapters import wording
from adapters.intents import AdminsOnly, AdminAction, Answered, Declined, Failed, Indexed, NoSuchDocument, Task
from adapters.slack.inbound import to_plain
from adapters.slack.blocks import MAX_BLOCKS, MAX_MARKDOWN_CHARS, MAX_MESSAGE_CHARS, MAX_TEXT_CHARS, SlackMessage
from adapters.slack.render import FEEDBACK, escape, read_feedback, render, render_text
from core.models import Abstention, AbstentionReason, Answer, Citation, Mode, Notice, Passage, Statement
from core.references import Missing, NoSuchProvision, ProvisionRef
from tests.fake_service import record

URL = "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#033.001"
HOSTILE = "<!channel> <!here|here> <!everyone> <@U12345678> @here a < b & c > d <https://evil.example|click>"


def _answer(statements=(), *, abstention=None, related=(), notices=(), question="q?") -> Answer:
    return Answer(question=question, statements=tuple(statements), retrieved=(), mode=Mode.EXTRACTIVE,
                  request_id="req-1", abstention=abstention, related=tuple(related), notices=tuple(notices))


def _citation(label: str, quote: str, *, kind="regulation", url=URL) -> Citation:
    return Citation(label, label, quote, url, "en", kind)


def _texts(message: SlackMessage) -> list[str]:
    """Every markdown, mrkdwn or plain text in the message's blocks, in order."""
    texts = []
    for block in message.blocks:
        if "text" in block:
            texts.append(block["text"] if isinstance(block["text"], str) else block["text"]["text"])
        for element in block.get("elements", []):
            if "text" in element:
                texts.append(element["text"] if isinstance(element["text"], str) else element["text"]["text"])
    return texts


def _everything(messages: list[SlackMessage]) -> str:
    return "\n".join(m.text + "\n" + "\n".join(_texts(m)) for m in messages)


# --- escaping ---------------------------------------------------------------------------------------------


def test_escape_neutralises_broadcasts_mentions_and_markup():
    escaped = escape(HOSTILE)
    assert "<" not in escaped and ">" not in escaped
    assert "&lt;!channel&gt;" in escaped and "&lt;@U12345678&gt;" in escaped
    assert "a &lt; b &amp; c &gt; d" in escaped
    assert "@here" not in escaped  # the bare broadcast carries a zero-width space
    assert "@\u200bhere" in escaped


def test_model_and_user_text_cannot_ping_or_link_in_a_rendered_answer():
    answer = _answer([Statement(HOSTILE, (_citation("Art. 33(1)", HOSTILE),))], question=HOSTILE,
                     notices=[Notice.LLM_UNVERIFIED])
    messages = render(Answered(answer), asked_by="U00000001")
    everything = _everything(messages)
    assert "<!" not in everything
    assert re.findall(r"<@\w+", everything) == ["<@U00000001"] * everything.count("<@U00000001")
    assert "<https://evil" not in everything and "](https://evil" not in everything
    assert all(link.startswith("<https://eur-lex") for link in re.findall(r"<http[^>]*>", everything))
    [statement] = [b["text"] for m in messages for b in m.blocks if b["type"] == "markdown"]
    # In markdown the hostile text is characters: entities for Slack's <…> forms, escaped link and emphasis syntax,
    # no bare broadcast, and a zero-width space that keeps a client from linking the bare URL.
    assert "&lt;\\!channel&gt;" in statement and "&lt;@U12345678&gt;" in statement and "@here" not in statement
    assert "&lt;https\u200b://evil.example\\|click&gt;" in statement
    # verbatim: Slack must not auto-link names or parse mentions in what we echo
    for message in messages:
        for block in message.blocks:
            if block["type"] == "section":
                assert block["text"]["verbatim"] is True


def test_file_names_and_document_reasons_are_escaped_in_replies():
    hostile = record(filename="<!channel>.pdf", uploader="<!here>")
    for reply in (Indexed(hostile), NoSuchDocument("<@U1>.pdf"), Failed("abc", Task.INDEXING, "<!channel>.pdf")):
        assert "<!" not in _everything(render(reply)) and "<@U1" not in _everything(render(reply))


def test_to_plain_turns_slack_encoding_into_what_the_person_typed():
    text = "<@UBOT00001> Does <@U123|alice> need consent &amp; a DPIA for <https://x.example/a|this> in <#C1|legal>?"
    assert to_plain(text, bot_user_id="UBOT00001") == "Does @alice need consent & a DPIA for this in #legal?"
    assert to_plain("&lt;script&gt; <!here>") == "<script> @here"


def test_non_http_links_render_as_plain_labels():
    citation = _citation("Policy.pdf, p. 2", "q", kind="document", url="javascript:alert(1)")
    assert "javascript" not in _everything(render(Answered(_answer([Statement("See the policy.", (citation,))]))))


# --- the look of answers and abstentions -------------------------------------------------------------------------


def test_answer_shows_statements_linked_labels_quotes_source_and_feedback():
    answer = _answer([Statement("Notify within 72 hours.", (_citation("Art. 33(1)", "not later than 72 hours"),))])
    [message] = render(Answered(answer))
    # The model's sentence reads as markdown and links the provision it rests on to its paragraph on EUR-Lex.
    assert message.blocks[0] == {"type": "markdown", "text": f"Notify within 72 hours. ([Art. 33(1)]({URL}))"}
    texts = _texts(message)
    assert f"*<{URL}|Art. 33(1)>*\n>not later than 72 hours" in texts
    assert wording.SOURCE_LINE in texts
    assert wording.DECLINED_HEADER not in _everything([message])
    [feedback] = [b for b in message.blocks if b["type"] == "context_actions"]
    [buttons] = feedback["elements"]
    assert buttons["type"] == "feedback_buttons" and buttons["action_id"] == FEEDBACK
    assert read_feedback(buttons["positive_button"]["value"]) == ("req-1", True)
    assert read_feedback(buttons["negative_button"]["value"]) == ("req-1", False)
    assert message.text.startswith("Notify within 72 hours. [Art. 33(1)]\nArt. 33(1): “not later than 72 hours”")


def test_an_extractive_statement_is_its_quote_under_the_linked_label():
    [message] = render(Answered(_answer([Statement(None, (_citation("Art. 33(1)", "not later than 72 hours"),))])))
    assert _texts(message)[0] == f"*<{URL}|Art. 33(1)>*\n>not later than 72 hours"
    assert message.text == "Art. 33(1): “not later than 72 hours”"


def test_abstention_looks_different_says_why_and_lists_related_provisions_as_not_an_answer():
    related = Passage("Art. 33(1)", "Art. 33(1)", "…", URL, "en", 0.4)
    answer = _answer(abstention=Abstention(AbstentionReason.NATIONAL_LAW), related=[related, related])
    [message] = render(Declined(answer))
    texts = _texts(message)
    assert texts[0] == f":grey_question: *{wording.DECLINED_HEADER}*"
    assert texts[1] == wording.REASONS[AbstentionReason.NATIONAL_LAW]
    assert f"{wording.RELATED_HEADER} <{URL}|Art. 33(1)>" in texts
    assert not any(t.startswith("*<") for t in texts)  # no citation quotes
    assert message.text.startswith(f"{wording.DECLINED_HEADER}.")


def test_a_provision_that_does_not_exist_is_named():
    missing = NoSuchProvision(ProvisionRef(104), Missing.ARTICLE, 99)
    answer = _answer(abstention=Abstention(AbstentionReason.NO_SUCH_PROVISION, (missing,)))
    assert "The GDPR has 99 articles: there is no Article 104." in _texts(render(Declined(answer))[0])


def test_document_citations_come_after_the_regulation_under_their_own_header():
    answer = _answer([Statement("Both apply.", (_citation("Records.pdf, p. 7", "we keep records", kind="document", url=""),
                                                _citation("Art. 30(1)", "Each controller shall maintain a record")))])
    [message] = render(Answered(answer))
    texts = _texts(message)
    header = next(i for i, t in enumerate(texts) if wording.DOCUMENTS_HEADER in t)
    assert texts.index(f"*<{URL}|Art. 30(1)>*\n>Each controller shall maintain a record") < header
    assert texts[header + 1] == "*Records.pdf, p. 7*\n>we keep records"


def test_notices_are_shown_as_context_lines():
    [message] = render(Answered(_answer([Statement("x", ())], notices=[Notice.LLM_UNAVAILABLE])))
    contexts = [b["elements"][0]["text"] for b in message.blocks if b["type"] == "context"]
    assert f":information_source: {wording.NOTICES[Notice.LLM_UNAVAILABLE]}" in contexts


def test_short_replies_are_one_message_with_the_fallback_set():
    message = render_text("Please try again in 3 s.")
    assert message.text == "Please try again in 3 s." and _texts(message) == ["Please try again in 3 s."]
    [refusal] = render(AdminsOnly(AdminAction.REMOVE))
    assert refusal.text.startswith("Sorry, only the bot's admins can remove documents.")


# --- splitting ------------------------------------------------------------------------------------------------


def test_a_very_long_answer_is_split_into_messages_within_slacks_limits_never_mid_quote():
    citations = [_citation(f"Art. {i}(1)", f"quote {i} " + "lorem ipsum dolor " * 140) for i in range(30)]
    citations.append(_citation("Art. 99(9)", "giant " * 750))  # one quote longer than a section can hold
    statements = [Statement(f"Statement {i}: " + "the controller shall " * 25, (citations[i % 30],)) for i in range(80)]
    statements.append(Statement("And the giant one.", (citations[-1],)))
    messages = render(Answered(_answer(statements)))

    assert len(messages) > 3
    for message in messages:
        assert 0 < len(message.text) <= 3000
        assert len(message.blocks) <= MAX_BLOCKS
        assert len(json.dumps(message.blocks, ensure_ascii=False)) <= MAX_MESSAGE_CHARS < 13_000
        assert sum(len(b["text"]) for b in message.blocks if b["type"] == "markdown") <= MAX_MARKDOWN_CHARS
        assert all(len(t) <= MAX_TEXT_CHARS for t in _texts(message))
    for citation in citations:
        [home] = [m for m in messages if f"|{citation.label}>" in _everything([m])]
        quoted = [t for t in _texts(home) if t.startswith(">") or f"|{citation.label}>" in t]
        lines = [line[1:] for t in quoted for line in t.split("\n") if line.startswith(">")]
        body = " ".join(lines)
        assert re.sub(r"\s+", " ", citation.quote).strip() in re.sub(r"\s+", " ", body)
    # the statements stay in order, and the footer closes the last message only
    first_words = [t.split(":")[0] for m in messages for t in _texts(m) if t.startswith("Statement")]
    assert first_words == sorted(first_words, key=lambda w: int(w.split()[1]))
    assert [i for i, m in enumerate(messages) if any(b["type"] == "context_actions" for b in m.blocks)] == [
        len(messages) - 1]


def test_a_long_statement_line_is_cut_at_a_space():
    [message] = render(Answered(_answer([Statement("word " * 1000, ())])))[:1]
    texts = _texts(message)
    assert all(len(t) <= MAX_TEXT_CHARS for t in texts)
    assert all(not t.endswith("wor") for t in texts)


def test_a_quote_too_long_for_any_message_is_split_at_blocks_and_stays_quoted():
    messages = render(Answered(_answer([Statement("x", (_citation("Art. 99(9)", "giant " * 3000),))])))
    quote_texts = [t for m in messages for t in _texts(m) if "giant" in t]
    assert len({id(m) for m in messages if any("giant" in t for t in _texts(m))}) > 1
    assert all(line.startswith(">") for t in quote_texts for line in t.split("\n"))
    assert sum(t.count("giant") for t in quote_texts) == 3000


def test_model_markdown_in_a_statement_stays_text():
    hostile = "[click](https://evil.example) **loud** `code`\n# Big\n- item, see www.evil.example or a@evil.example"
    [message] = render(Answered(_answer([Statement(hostile, (_citation("Art. 33(1)", "q"),))])))
    [statement] = [b["text"] for b in message.blocks if b["type"] == "markdown"]
    for markup in ("[click](", "**loud**", "`code`", "\n# Big", "\n- item", "https://evil", "www.evil", "a@evil"):
        assert markup not in statement
    assert statement.startswith("\\[click\\]\\(https\u200b://evil.example\\) \\*\\*loud\\*\\*")


def test_a_source_shows_its_heading_after_the_linked_label():
    citation = Citation("Art. 33(1)", "Art. 33(1)", "not later than 72 hours", URL, "en",
                        title="Notification of a personal data breach to the <supervisory> authority")
    [message] = render(Answered(_answer([Statement(None, (citation,))])))
    assert _texts(message)[0] == (f"*<{URL}|Art. 33(1)>* · Notification of a personal data breach to the "
                                  "&lt;supervisory&gt; authority\n>not later than 72 hours")
