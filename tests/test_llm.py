"""The LLM path end to end: ChatGroq → a local OpenAI-compatible fake on loopback → verification."""
from __future__ import annotations

import pytest

from adapters.plain import render_plain
from core.assistant import Assistant
from core.extractive import ExtractiveGenerator
from core.llm import GroqGenerator, chat_groq
from core.models import Mode, Notice
from evals.fake_llm import FakeLLM, Reply

QUESTION = "How quickly must a personal data breach be reported?"
GOOD = {"not_in_sources": False, "statements": [{
    "text": "The controller must notify the supervisory authority within 72 hours of becoming aware of the breach.",
    "source": "Art. 33(1)", "quote": "not later than 72 hours after having become aware of it"}]}


@pytest.fixture
def ask(components):
    sleeps: list[float] = []

    def ask_with(replies, timeout_s=5.0, question=QUESTION):
        with FakeLLM(replies) as llm:
            chat = chat_groq("test-key", "llama-test", llm.url, timeout_s)
            generator = GroqGenerator(chat, ExtractiveGenerator(), sleep=sleeps.append)
            answer = Assistant(components.retriever, generator, components.abstention,
                               verifier=components.verifier).ask(question)
            return answer, llm, sleeps

    return ask_with


def test_a_good_answer_keeps_its_verified_citation(ask):
    answer, llm, _ = ask([Reply.json(GOOD)])
    assert not answer.abstained and answer.mode is Mode.LLM and answer.notices == ()
    assert [c.label for c in answer.citations] == ["Art. 33(1)"]
    assert answer.citations[0].url.endswith("#033.001")
    prompt = llm.requests[0]["messages"]
    assert "Never answer from your own knowledge" in prompt[0]["content"]
    assert "source id: Art. 33(1)" in prompt[1]["content"]


def test_a_fabricated_citation_is_removed(ask):
    fabricated = {"statements": [GOOD["statements"][0],
                                 {"text": "Fines for late notification reach 50 million.", "source": "Art. 99(9)",
                                  "quote": "fines of 50 000 000 EUR for late notification"}]}
    answer, _, _ = ask([Reply.json(fabricated)])
    assert [c.label for c in answer.citations] == ["Art. 33(1)"]
    assert "50 million" not in render_plain(answer)


def test_a_misquoted_number_is_removed_and_nothing_left_means_abstain(ask):
    misquoted = {"statements": [{"text": "Within 48 hours.", "source": "Art. 33(1)",
                                 "quote": "not later than 48 hours after having become aware of it"}]}
    answer, _, _ = ask([Reply.json(misquoted)])
    assert answer.abstained and answer.citations == ()


def test_invalid_json_is_retried_once(ask):
    answer, llm, _ = ask([Reply("Sure! The answer is 72 hours."), Reply.json(GOOD)])
    assert len(llm.requests) == 2
    assert not answer.abstained and answer.notices == ()


def test_rate_limits_back_off_honouring_retry_after(ask):
    answer, llm, sleeps = ask([Reply.rate_limited(2), Reply.rate_limited(3), Reply.json(GOOD)])
    assert len(llm.requests) == 3
    assert sleeps == [2.0, 3.0]
    assert not answer.abstained and answer.mode is Mode.LLM


def test_a_timeout_falls_back_to_the_extractive_answer_with_a_notice(ask):
    answer, _, _ = ask([Reply(content="{}", delay_s=3)], timeout_s=0.5)
    assert answer.notices == (Notice.LLM_UNAVAILABLE,)
    assert not answer.abstained and answer.citations[0].label == "Art. 33(1)"


def test_the_not_in_sources_verdict_abstains(ask):
    answer, _, _ = ask([Reply.json({"not_in_sources": True, "statements": []})])
    assert answer.abstained
