"""Declining on evidence, not on words: the real retriever, the committed abstention model, every language."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from core.abstain import AbstentionModel, AbstentionPolicy, ModelMismatch, Strictness, features
from core.models import AbstentionReason
from core.references import Missing

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def policy(components):
    return components.abstention


@pytest.fixture(scope="module")
def answers(components):
    """The answer pipeline without fair-use limits: these tests ask many questions at once."""
    return components.assistant()


def decide(policy, retriever, question):
    return policy.decide(question, retriever.run(question))


@pytest.mark.parametrize("question, missing, existing", [
    ("What does Article 104 say about fines?", Missing.ARTICLE, 99),
    ("What must be reported under Article 33(7)?", Missing.PARAGRAPH, 5),
    ("Was regelt Artikel 33 Absatz 6 DSGVO?", Missing.PARAGRAPH, 5),
    ("Que prévoit l'article 6, paragraphe 1, point g) du RGPD ?", Missing.POINT, 6),
    ("Co stanowi art. 17 ust. 4 RODO?", Missing.PARAGRAPH, 3),
    ("Τι ορίζει το άρθρο 6 παράγραφος 1 στοιχείο ζ);", Missing.POINT, 6),
    ("Mitä 120 artikla sanoo?", Missing.ARTICLE, 99),
    ("Mit mond a 10. cikk (2) bekezdés?", Missing.PARAGRAPH, 0),
    ("What is defined in Article 4(27)?", Missing.PARAGRAPH, 26),
    ("O que diz o n.º 6 do artigo 33.º do RGPD sobre notificações tardias?", Missing.PARAGRAPH, 5),
    ("¿Qué establece el apartado 4 del artículo 17 del RGPD?", Missing.PARAGRAPH, 3),
])
def test_a_provision_that_does_not_exist_is_declined_naming_what_exists(policy, retriever, question, missing, existing):
    abstention = decide(policy, retriever, question)
    assert abstention is not None and abstention.reason is AbstentionReason.NO_SUCH_PROVISION
    assert [(m.missing, m.existing) for m in abstention.missing] == [(missing, existing)]


def test_the_no_such_provision_answer_quotes_nothing_and_lists_what_the_article_has(answers):
    answer = answers.ask("What does Article 33(7) require?")
    assert answer.abstention.reason is AbstentionReason.NO_SUCH_PROVISION and answer.citations == ()
    assert [p.source_id for p in answer.related] == ["Art. 33(1)", "Art. 33(2)", "Art. 33(3)"]


@pytest.mark.parametrize("question, expected", [
    ("What does Article 17(3) say?", "Art. 17(3)"),
    ("Art. 83(5)", "Art. 83(5)"),
    ("Co mówi art. 28 ust. 3 RODO?", "Art. 28(3)"),
])
def test_a_question_naming_an_existing_provision_is_answered_with_it(answers, question, expected):
    answer = answers.ask(question)
    assert not answer.abstained and answer.citations[0].source_id == expected


# Kinds of words a blocklist refused on, in questions the Regulation's articles do answer.
TRAPS = {
    "a non-EU country": ("Does the GDPR apply to a Canadian firm that tracks EU visitors?", {"Art. 3(2)"}),
    "another law": ("How does the GDPR relate to Directive 95/46/EC, which it replaced?", {"Art. 94(1)", "Art. 94(2)"}),
    "a year": ("Is the one-month deadline for access requests still the rule in 2026?", {"Art. 12(3)"}),
    "the Working Party": ("What replaced the Article 29 Working Party's role?", {"Art. 94(2)", "Art. 68(1)"}),
    "a court": ("Can a court judgment from a third country oblige us to hand over personal data?", {"Art. 48"}),
    "the regulator's decision": ("Can we challenge a fine from the supervisory authority before a court?",
                                 {"Art. 78(1)"}),
    "guidelines": ("Who issues guidelines on how the GDPR should be applied across the EU?", {"Art. 70(1)"}),
    "the highest fine": ("What is the highest fine for not complying with an order of the supervisory authority?",
                         {"Art. 83(6)"}),
}


@pytest.mark.parametrize("kind", sorted(TRAPS))
def test_a_trap_word_does_not_decline_an_answerable_question(answers, kind):
    question, expected = TRAPS[kind]
    answer = answers.ask(question)
    assert not answer.abstained, (kind, answer.abstention)
    assert expected & {c.source_id for c in answer.citations}, (kind, [c.source_id for c in answer.citations])


@pytest.mark.parametrize("question, reason", [
    ("Which countries currently have an adequacy decision from the Commission?", AbstentionReason.PUBLISHED_ELSEWHERE),
    ("Které země mají v současnosti rozhodnutí Komise o odpovídající ochraně?", AbstentionReason.PUBLISHED_ELSEWHERE),
    ("Ποιες χώρες έχουν σήμερα απόφαση επάρκειας της Επιτροπής;", AbstentionReason.PUBLISHED_ELSEWHERE),
    ("Write me a privacy policy for my online shop.", AbstentionReason.DRAFTING),
    ("这是什么规定？", AbstentionReason.UNSUPPORTED_LANGUAGE),
])
def test_unanswerable_questions_are_declined_in_every_language_with_their_reason(policy, retriever, question, reason):
    abstention = decide(policy, retriever, question)
    assert abstention is not None and abstention.reason in (reason, AbstentionReason.NOT_COVERED)


@pytest.mark.parametrize("question, reason", [
    ("Who is the current chair of the European Data Protection Board?", AbstentionReason.FACTS_AND_FIGURES),
    ("What is the age of digital consent in Germany?", AbstentionReason.NATIONAL_LAW),
])
def test_a_question_plainly_of_one_kind_is_told_that_reason(policy, retriever, question, reason):
    abstention = decide(policy, retriever, question)
    assert abstention is not None and abstention.reason == reason


def test_an_llm_is_spared_only_what_the_classifier_is_sure_of(components, retriever):
    model = components.abstention.model
    assert model.thresholds["llm"] <= model.thresholds["extractive"]
    question = "How long may a web shop keep the invoices of its customers?"
    retrieval = retriever.run(question)
    p = model.answerable(features(retrieval))
    between = replace(model, thresholds={"extractive": p + 0.01, "llm": p - 0.01})
    assert AbstentionPolicy(components.store, between, Strictness.EXTRACTIVE).decide(question, retrieval) is not None
    assert AbstentionPolicy(components.store, between, Strictness.LLM).decide(question, retrieval) is None


def test_a_model_trained_for_another_embedding_model_is_refused_with_how_to_retrain(components):
    with pytest.raises(ModelMismatch, match="python -m evals.train_abstention"):
        AbstentionPolicy(components.store, AbstentionModel.load(), embedding_model="BAAI/bge-small-en-v1.5")


def test_training_refuses_questions_of_a_kind_held_out_for_dev_or_test(tmp_path):
    from evals.train_abstention import training_questions

    def row(id_, split, kind):
        return json.dumps({"id": id_, "question": "Who is the data protection officer of Acme?", "lang": "en",
                           "expected": [], "answerable": False, "category": "person", "kind": kind, "split": split})

    evaluation, material = tmp_path / "abstention.jsonl", tmp_path / "abstention_train.jsonl"
    evaluation.write_text(row("a", "train", "office-holder") + "\n" + row("b", "test", "company-dpo-name") + "\n")
    material.write_text(row("c", "train", "office-holder") + "\n")
    assert [q.id for q in training_questions(evaluation, material)] == ["a", "c"]
    material.write_text(row("c", "train", "company-dpo-name") + "\n")
    with pytest.raises(SystemExit, match="company-dpo-name"):
        training_questions(evaluation, material)


# Retraining reads some 4,000 questions through retrieval: about 3 minutes on a quiet 2-core machine, twice that
# on a busy one.
RETRAINING_TIMEOUT = 1200


@pytest.mark.timeout(RETRAINING_TIMEOUT)
def test_the_committed_model_is_the_one_training_produces(components, data_dir):
    components.prepare()
    result = subprocess.run([sys.executable, "-m", "evals.train_abstention", "--check"], cwd=REPO, capture_output=True,
                            text=True, timeout=RETRAINING_TIMEOUT, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                         "GDPRBOT_DATA_DIR": str(data_dir)})
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
