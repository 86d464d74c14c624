from core.followup import contextualise
from core.models import Turn

HISTORY = (Turn("user", "How quickly must a controller report a personal data breach?"),
           Turn("assistant", "Art. 33(1) — …"))


def test_a_follow_up_is_searched_with_the_previous_question():
    query = contextualise("and for processors?", HISTORY)
    assert query.startswith("How quickly must a controller report") and query.endswith("and for processors?")


def test_a_self_contained_question_changes_the_subject():
    question = "What are the conditions for consent given by a child in relation to online services?"
    assert contextualise(question, HISTORY) == question


def test_no_history_no_context():
    assert contextualise("and for processors?", ()) == "and for processors?"


def test_the_follow_up_reaches_the_processor_provision(service):
    answer = service.ask("and what about processors?", history=HISTORY)
    assert "Art. 33(2)" in [c.label for c in answer.citations]
