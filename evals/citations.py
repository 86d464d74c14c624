"""Are shown citations honest? Over the visible set: every shown quote verbatim in the cited provision's
stored text, every cited provision among those retrieved, in extractive mode and against a scripted
adversarial LLM (fabricated id, changed number, paraphrase in quote marks, invalid JSON)."""
from __future__ import annotations

import re

from core.assistant import Assistant
from core.extractive import ExtractiveGenerator
from core.llm import GroqGenerator, chat_groq
from evals.fake_llm import FakeLLM, Reply
from evals.metrics import Question

ADVERSARIES = ("fabricated_id", "changed_number", "paraphrase", "invalid_json")


def _check(answer, store) -> tuple[int, int, int]:
    """(shown citations, verbatim in the stored text, cited provision retrieved)."""
    retrieved = {p.source_id for p in answer.retrieved}
    verbatim = sum(1 for c in answer.citations if c.quote in store.get(c.source_id, c.lang).text)
    from_retrieved = sum(1 for c in answer.citations if c.source_id in retrieved)
    return len(answer.citations), verbatim, from_retrieved


def _adversarial_reply(kind: str, answer) -> Reply:
    """What a misbehaving model says, built from what the retriever really returned."""
    top = answer.retrieved[0]
    sentence = top.text[:160]
    if kind == "fabricated_id":
        return Reply.json({"statements": [{"text": "This is settled law.", "source": "Art. 100(1)", "quote": sentence}]})
    if kind == "changed_number":
        digits = re.search(r"\d[\d ]*", top.text)
        if digits:
            original = digits.group(0).strip()
            forged = str(int(original.replace(" ", "")) + 1)
            quote = top.text[max(0, digits.start() - 60): digits.end() + 40].replace(original, forged, 1)
        else:
            quote = sentence.replace("shall", "shall not", 1) if "shall" in sentence else sentence + " within 10 days"
        return Reply.json({"statements": [{"text": "The deadline is strict.", "source": top.source_id, "quote": quote}]})
    if kind == "paraphrase":
        return Reply.json({"statements": [{"text": "In short:", "source": top.source_id,
                                           "quote": "companies must always obey this rule quickly and fully"}]})
    return Reply("I think the answer is yes, according to the GDPR.")


def evaluate_citations(components, questions: list[Question], adversarial_sample: int = 40) -> dict:
    store = components.store
    extractive = Assistant(components.retriever, ExtractiveGenerator(), components.abstention,
                           verifier=components.verifier)
    shown = verbatim = retrieved = 0
    for q in questions:
        answer = extractive.ask(q.question)
        counts = _check(answer, store)
        shown, verbatim, retrieved = shown + counts[0], verbatim + counts[1], retrieved + counts[2]
    result = {"extractive": {"shown": shown, "verbatim_share": verbatim / max(1, shown),
                             "retrieved_share": retrieved / max(1, shown)}}

    sample = [q for q in questions if q.answerable][:adversarial_sample]
    for kind in ADVERSARIES:
        shown = verbatim = retrieved = abstained = 0
        for q in sample:
            reference = extractive.ask(q.question)
            with FakeLLM([_adversarial_reply(kind, reference)]) as llm:
                generator = GroqGenerator(chat_groq("adversary", "fake", llm.url, 5.0), ExtractiveGenerator())
                answer = Assistant(components.retriever, generator, components.abstention,
                                   verifier=components.verifier).ask(q.question)
            counts = _check(answer, store)
            shown, verbatim, retrieved = shown + counts[0], verbatim + counts[1], retrieved + counts[2]
            # An adversarial reply may only survive as the extractive fallback (invalid JSON), never as itself.
            abstained += answer.abstained
        result[kind] = {"questions": len(sample), "shown": shown, "abstained": abstained,
                        "verbatim_share": verbatim / max(1, shown) if shown else 1.0,
                        "retrieved_share": retrieved / max(1, shown) if shown else 1.0}
    return result


