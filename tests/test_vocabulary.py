"""Each lay→Regulation mapping on its own: the lay wording in, the Regulation's term out."""
import pytest

from core.vocabulary import expand


@pytest.mark.parametrize("lay, term", [
    ("we got hacked", "personal data breach"),
    ("customer files leaked", "personal data breach"),
    ("do we tell the regulator", "supervisory authority"),
    ("can they make us delete it", "erasure"),
    ("their address is wrong", "rectification"),
    ("an algorithm decides", "automated individual decision-making"),
    ("I want to complain", "lodge a complaint"),
    ("our cloud vendor", "processor"),
    ("what's the max fine", "administrative fines"),
    ("our users are kids", "child"),
    ("send data to the USA", "third country"),
    ("do we need a DPO", "data protection officer"),
    ("how long can we keep the data", "storage limitation"),
    ("CCTV in the shop", "publicly accessible area"),
    ("our employees' data", "employment"),
])
def test_lay_term_maps_to_the_regulation(lay, term):
    assert term in expand(lay)


def test_no_lay_term_no_expansion():
    assert expand("Xyz qwerty") == ""


def test_us_as_a_pronoun_is_not_the_united_states():
    assert "third country" not in expand("Can a customer make us delete their data?")
