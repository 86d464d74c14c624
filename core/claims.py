"""Does a model's sentence say what its quote says? The checkable parts of a claim, checked.

A quote that is verbatim proves only that the Regulation says the quote. What the model writes around it
("Controllers never have to notify a breach") must not add what the quote does not hold. Checked here, in
every official language:
- numbers: every number in the sentence (digits, with "million"-like scale words) is in the quote;
- negation: every word that negates or makes optional ("never", "nicht", "pas", "optional") is in the quote
  next to the same word as in the sentence: the "not" of "not later than 72 hours" supports no "does not have
  to notify";
- actors: every actor the sentence names (controller, processor, data subject, supervisory authority,
  recipient, third party, representative: the Regulation's own defined terms in that language) is named
  in the quote too.
What this cannot catch: a sentence that uses only the quote's own numbers, actors and negations but relates
them wrongly ("the authority notifies the controller"), or that states a duty as a mere possibility without a
negation ("controllers may notify"). Such a sentence is still shown beside its quote. What it refuses although
true: a negation worded otherwise than in the quote ("is not required" for "shall not be required"); the
quote is then shown without the sentence.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.references import find_references
from core.text import tokenize

# Words that negate or make optional what a rule requires, per official language (lower case).
NEGATIONS: Mapping[str, frozenset[str]] = {lang: frozenset(words.split()) for lang, words in {
    "bg": "не няма никога без незадължително", "cs": "ne nikdy není nemusí nesmí bez nepovinné volitelné",
    "da": "ikke aldrig ingen intet uden valgfri frivillig", "de": "nicht nie niemals kein keine keinen ohne optional freiwillig",
    "el": "δεν μη ποτέ χωρίς προαιρετικό προαιρετική", "en": "not no never none without optional voluntary cannot can't "
    "doesn't don't isn't aren't needn't", "es": "no nunca ningún ninguna sin opcional voluntario",
    "et": "ei mitte kunagi ilma vabatahtlik", "fi": "ei eikä koskaan ilman vapaaehtoinen valinnainen",
    "fr": "ne pas jamais aucun aucune sans facultatif facultative", "ga": "ní níl níor gan riamh roghnach",
    "hr": "ne nije nikad nikada bez neobavezno", "hu": "nem nincs soha nélkül nélküli opcionális önkéntes",
    "it": "non mai nessun nessuna senza facoltativo facoltativa", "lt": "ne nėra niekada be neprivaloma",
    "lv": "ne nav nekad bez neobligāti", "mt": "ma mhux qatt mingħajr fakultattiv",
    "nl": "niet nooit geen zonder optioneel vrijwillig", "pl": "nie nigdy bez żaden żadna opcjonalne dobrowolne",
    "pt": "não nunca nenhum nenhuma sem opcional facultativo", "ro": "nu niciodată fără niciun nicio opțional facultativ",
    "sk": "nie nikdy nie je nemusí bez nepovinné", "sl": "ne nikoli brez neobvezno", "sv": "inte aldrig ingen inget utan valfri frivillig",
}.items()}
# Scale words after a number ("20 million"): value multiplier, in the forms the official languages use.
_SCALES = {"thousand": 1e3, "million": 1e6, "millions": 1e6, "millionen": 1e6, "mio": 1e6, "millones": 1e6,
           "milioni": 1e6, "miljoen": 1e6, "miljoner": 1e6, "miljoonaa": 1e6, "milhões": 1e6, "milioane": 1e6,
           "milionów": 1e6, "miliónov": 1e6, "milijona": 1e6, "milijuna": 1e6, "millió": 1e6, "milijonų": 1e6,
           "miljoni": 1e6, "miljon": 1e6, "милиона": 1e6, "εκατομμύρια": 1e6, "m": 1e6, "billion": 1e9}
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:[ \u00a0\u202f.,]\d{3})+|\d+(?:[.,]\d+)?)(?:\s*([^\W\d_]+))?")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "hundred": 100}
_QUOTED_TERM = re.compile(r"[‘'\"„«‚“]\s*([^’'\"“”»«‘]{3,60}?)\s*[’'\"“”»«‘]")
# The Art. 4 definitions whose terms name who does what.
ACTOR_DEFINITIONS = ("Art. 4(1)", "Art. 4(7)", "Art. 4(8)", "Art. 4(9)", "Art. 4(10)", "Art. 4(17)", "Art. 4(21)")


@dataclass(frozen=True)
class Unsupported:
    what: str  # "number", "negation", "actor"
    detail: str


def numbers(text: str) -> set[float]:
    """The numbers a text states, references to provisions left out ("Article 33(1)" is not a 33)."""
    for reference in sorted({r.span for r in find_references(text)}, reverse=True):
        text = text[:reference[0]] + " " + text[reference[1]:]
    found = set()
    for digits, word in _NUMBER.findall(text):
        grouped = re.sub(r"[ \u00a0\u202f.,](?=\d{3}\b)", "", digits)
        try:
            value = float(grouped.replace(",", "."))
        except ValueError:
            continue
        found.add(value * _SCALES.get((word or "").lower(), 1))
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in _NUMBER_WORDS:
            found.add(float(_NUMBER_WORDS[word]))
    return found


def actor_terms(definitions: Iterable[str], lang: str) -> tuple[tuple[str, ...], ...]:
    """The quoted defined terms of the actor definitions, as token sequences in `lang`."""
    terms = []
    for text in definitions:
        for term in _QUOTED_TERM.findall(text):
            tokens = tuple(tokenize(term, lang))
            if tokens and tokens not in terms:
                terms.append(tokens)
    return tuple(terms)


def _contains(tokens: Sequence[str], term: Sequence[str]) -> bool:
    n = len(term)
    return any(tuple(tokens[i:i + n]) == tuple(term) for i in range(len(tokens) - n + 1))


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)?", text.lower())


def _negated(words: Sequence[str], negations: frozenset[str], lang: str, *, quote: bool) -> set[tuple[str, str]]:
    """Each negation with the word it stands next to (stemmed): the word after it, or before it at the end of a
    sentence ("… is optional"); in a quote, either."""
    pairs = set()
    for i, word in enumerate(words):
        if word not in negations:
            continue
        after, before = words[i + 1:i + 2], words[max(0, i - 1):i]
        for neighbour in (after + before if quote else after or before):
            pairs.add((word, "".join(tokenize(neighbour, lang))))
        if not after and not before:
            pairs.add((word, ""))
    return pairs


def unsupported(statement: str, quote: str, lang: str, actors: Sequence[Sequence[str]] = ()) -> list[Unsupported]:
    """What the statement claims that its quote does not support (empty: nothing found)."""
    problems = [Unsupported("number", f"{value:g}") for value in sorted(numbers(statement) - numbers(quote))]
    negations = NEGATIONS.get(lang, NEGATIONS["en"])
    added = _negated(_words(statement), negations, lang, quote=False) - _negated(_words(quote), negations, lang,
                                                                                 quote=True)
    if added:
        problems.append(Unsupported("negation", ", ".join(sorted(" ".join(pair) for pair in added))))
    statement_tokens, quote_tokens = tokenize(statement, lang), tokenize(quote, lang)
    for term in actors:
        if _contains(statement_tokens, term) and not _contains(quote_tokens, term):
            problems.append(Unsupported("actor", " ".join(term)))
    return problems
