"""Provision references as people write them in the 24 official languages: one parser, one formatter.

`find_references("Art. 6 Abs. 1 lit. f DSGVO")` → `[Reference(ProvisionRef(6, 1, "f"), span)]`. The parser
knows the article word before the number ("Article 33(1)", "Artikel 33 Absatz 1", "čl. 33 odst. 1",
"άρθρο 33 παράγραφος 1", "articolul 33 alineatul (1)") and after it ("33 artiklan 1 kohta", "33. cikk (1)
bekezdés", "33. panta 1. punkts", "33 straipsnio 1 dalis", "33. člen"), paragraphs and points in the same
orders or before the article ("paragraph 6 of Article 33", "n.º 6 do artigo 33.º"), lists and ranges of
articles ("Articles 13 and 14", "Articles 15 to 22"), and the solid shorthand "83(5)". A number in
parentheses on its own ("(2)") is never a reference, nor an article of another act ("Article 29 of
Directive 95/46/EC", "Article 16 TFEU").

`Structure` knows what exists, so that a reference resolves to the provision ids it names, or to what is
missing ("Article 33 has 5 paragraphs").
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

ARTICLES = 99
_LETTER = r"(?:στ|[a-zα-ωа-яј])"
# The article word when it comes before the number, in every official language (and the usual abbreviations).
_ARTICLE_BEFORE = (
    r"art(?:icle|icles|ikel|ikels|iklen|ikkel|ikli|iklid|íc?ulos?|iculos?|igos?|icol[oi]|icolul|icolului|icolele|ykuł|ykuły|ykul|"
    r"ykułu|ikolu|ikoli|\.)?s?|airteagal|airt\.|άρθρ(?:ο|ου|α|ων)|άρθ\.|член|чл\.|čl(?:an(?:a)?k|ank[ua]|en[au]?|\.)|"
    r"článek|článku|článok|článkov|članka|člena"
)
# The article word after the number: Finnish, Hungarian, Latvian, Lithuanian, Slovenian.
_ARTICLE_AFTER = r"artikla\w*|cikk\w*|pant[as]\w*|straipsn\w*|člen\w*"
_PARAGRAPH_BEFORE = (
    r"paragraphs?|para\.?|par\.?|paragraphe|paragrafo|paragrafu|paragrafen|absatz|abs\.?|apartado|apdo\.?|lid|ustęp|"
    r"ust\.?|stycket|stycke|punkt|stk\.?|odstavec|odstavce|odst\.?|odsek|ods\.?|stavak|stavka|st\.|alínea|alineatul|"
    r"alin\.?|n\.?\s?º|nr\.?|no\.?|kohta|lõige|lõike|lg\.?|παράγραφος|παραγράφου|παρ\.|параграф|пар\.|mír|paragrafu"
)
_PARAGRAPH_AFTER = r"bekezdés\w*|kohd\w*|kohta\w*|dal(?:is|ies|ys|į)|daļ\w*|punkt\w*|lõi\w*|odstav\w*"
_POINT_BEFORE = (
    r"points?|point|lit\.?|litera|literă|letra|lettera|lett\.?|alínea|buchstabe|buchst\.?|sub|punt|písm\.?|"
    r"písmeno|písmena|točka|točke|toč\.?|t\.|буква|б\.|στοιχείο|στοιχ\.|litra|punktas|punkts|punkt|pkt\.?|lk\.?"
)
_POINT_AFTER = r"pont\w*|alakoh\w*|punkt\w*|apakšpunkt\w*|alapunkt\w*"
_AND = r"(?:,|and|und|et|y|e|en|och|og|i|a|ja|ir|és|un|u|și|и|και|agus|&)"
_TO = r"(?:to|bis|à|a|al|till|til|do|až|-|–|ig|iki|līdz|έως|до|go|sa|sal)"

_NUMBER = r"(?P<article>\d{1,3})(?!\d)(?:\s*\.?\s*[ºo°](?!\w)|\.(?!\d))?"
_PARAGRAPH = (
    r"(?:\s*\(\s*(?P<p1>\d{1,2})\s*\)(?:\s*(?:" + _PARAGRAPH_AFTER + r"))?"  # 33(1), 33 (1), (1) bekezdés
    r"|\.(?P<p2>\d{1,2})(?!\d)"  # 33.1
    r"|\s*,?\s*(?:" + _PARAGRAPH_BEFORE + r")\s*\(?\s*(?P<p3>\d{1,2})\s*\)?\.?(?!\d)"  # Absatz 1, alin. (1)
    r"|\s*,?\s*\(?(?P<p4>\d{1,2})\)?\s*\.?\s*(?:" + _PARAGRAPH_AFTER + r"))"  # (1) bekezdés, 1 kohdan
)
_POINT = (
    r"(?:\s*\(\s*(?P<q1>" + _LETTER + r")\s*\)"  # (f)
    r"|\s*,?\s*(?:" + _POINT_BEFORE + r")\s*\(?\s*(?P<q2>" + _LETTER + r")\s*\)?(?!\w)"  # lit. f, point (f)
    r"|\s*,?\s*\(?(?P<q3>" + _LETTER + r")\)?\s*(?:" + _POINT_AFTER + r")"  # f) pont, f alakohta
    r"|[\s.]+(?P<q4>" + _LETTER + r")\)"  # 6.1 f)
    r"|\.(?P<q5>" + _LETTER + r")(?!\w))"  # 6.1.f
)
_TAIL = r"(?:" + _PARAGRAPH + r"(?:" + _POINT + r")?)?"
# Up to two short words between a paragraph or point and its article: "of", "de l'", "dell'", "του", "от".
_OF = r"\s*,?\s+(?:[^\W\d]{1,4}(?:['’]\s*|\s+)){0,2}"
_BEFORE = re.compile(
    r"(?<![\w])(?:" + _ARTICLE_BEFORE + r")\s*\.?\s*" + _NUMBER + _TAIL
    + r"(?P<more>(?:\s*" + _AND + r"\s*\d{1,3}(?![\d(]))+|\s*" + _TO + r"\s*\d{1,3}(?![\d(]))?",
    re.IGNORECASE)
# The paragraph (and point) before the article: "paragraph 6 of Article 33", "n.º 6 do artigo 33.º",
# "point (f) of Article 6(1)", "lettera f) del paragrafo 1 dell'articolo 6".
_FIRST = re.compile(
    r"(?<![\w])(?=(?:" + _POINT_BEFORE + r"|" + _PARAGRAPH_BEFORE + r")\W)"
    r"(?:(?:" + _POINT_BEFORE + r")\s*\(?\s*(?P<q6>" + _LETTER + r")\s*\)?(?!\w)" + _OF + r")?"
    r"(?:(?:" + _PARAGRAPH_BEFORE + r")\s*\(?\s*(?P<p5>\d{1,2})\s*\)?\.?(?!\d)" + _OF + r")?"
    r"(?:" + _ARTICLE_BEFORE + r")\s*\.?\s*" + _NUMBER + _TAIL,
    re.IGNORECASE)
_AFTER = re.compile(r"(?<![\w.])" + _NUMBER + r"\s*\.?\s*(?:" + _ARTICLE_AFTER + r")" + _TAIL, re.IGNORECASE)
# The shorthand "83(5)", "6(1)(f)": only written solid, so that a numbered list item "(2)" is never one.
_COMPACT = re.compile(r"(?<![\w.(/-])(?P<article>\d{1,2})\((?P<p1>\d{1,2})\)(?:\((?P<q1>" + _LETTER + r")\))?(?![\w(])",
                      re.IGNORECASE)
# A reference followed by another act names that act's article ("Article 29 of Directive 95/46/EC",
# "Article 16 TFEU", "the Article 29 Working Party"), not this Regulation's.
_OTHER_ACT = re.compile(
    r"\s*(?:\w{1,4}\s+){0,2}(?:directive|richtlinie|directiva|direttiva|diretiva|directivă|richtlijn|direktiv\w*|"
    r"dyrektyw\w*|směrnic\w*|smernic\w*|irányelv\w*|direktīv\w*|direktyv\w*|direktiiv\w*|οδηγ[ίι]\w*|директив\w*|"
    r"treoir\w*|working party|arbeitsgruppe|groupe de travail|grupo de trabajo|gruppo di lavoro|werkgroep|"
    r"tfeu|teu|aeuv|euv|tfue|vweu|ΣΛΕΕ|ДФЕС|SFEU|ZFEU|EUTF|EUT-|charter|charta|charte|carta|handvest|"
    r"regulation\s*\((?:ec|eec|eu)\)\s*(?:no\.?\s*)?(?!2016/679)\d+/\d+|"
    r"verordnung\s*\((?:eg|ewg|eu)\)\s*(?:nr\.?\s*)?(?!2016/679)\d+/\d+)",
    re.IGNORECASE)
_MORE_NUMBERS = re.compile(r"\d{1,3}")
_RANGE = re.compile(r"\s*" + _TO + r"\s*\d", re.IGNORECASE)
MAX_RANGE = 20


@dataclass(frozen=True, order=True)
class ProvisionRef:
    """A provision as referred to: an article, optionally a paragraph (Art. 4: a definition) and a point."""

    article: int
    paragraph: int | None = None
    point: str | None = None  # the point's letter as written, lower case: "f", "στ", "б"

    def __str__(self) -> str:
        text = f"Art. {self.article}"
        if self.paragraph is not None:
            text += f"({self.paragraph})"
        if self.point is not None:
            text += f"({self.point})"
        return text

    @classmethod
    def from_id(cls, provision_id: str) -> ProvisionRef:
        """The reference a corpus id stands for: "Art. 33(1)" → ProvisionRef(33, 1)."""
        match = re.fullmatch(r"Art\. (\d{1,3})(?:\((\d{1,2})\))?", provision_id)
        if match is None:
            raise ValueError(f"not a provision id: {provision_id!r}")
        return cls(int(match.group(1)), int(match.group(2)) if match.group(2) else None)


@dataclass(frozen=True)
class Reference:
    ref: ProvisionRef
    span: tuple[int, int]  # where in the text it was written


def find_references(text: str) -> list[Reference]:
    """Every provision the text refers to, in the order written (a list or range of articles gives each)."""
    matches = {pattern: list(pattern.finditer(text)) for pattern in (_FIRST, _BEFORE, _AFTER, _COMPACT)}
    others = [m for pattern in (_BEFORE, _AFTER, _COMPACT) for m in matches[pattern]]
    # A paragraph or point right after a reference belongs to it ("Art. 6 Abs. 1 lit. f und Art. 9 Abs. 2").
    matches[_FIRST] = [m for m in matches[_FIRST] if not any(o.start() < m.start() <= o.end() + 3 for o in others)]
    found: list[Reference] = []
    taken: list[tuple[int, int]] = []
    for match in (m for pattern_matches in matches.values() for m in pattern_matches):
        if any(start < match.end() and match.start() < end for start, end in taken):
            continue
        taken.append(match.span())
        if _OTHER_ACT.match(text, match.end()):
            continue
        found.extend(Reference(ref, match.span()) for ref in _refs(match))
    return sorted(found, key=lambda r: r.span)


def _refs(match: re.Match) -> list[ProvisionRef]:
    groups = match.groupdict()
    article = int(match.group("article"))
    paragraph = next((int(groups[g]) for g in ("p5", "p1", "p2", "p3", "p4") if groups.get(g)), None)
    point = next((groups[g].lower() for g in ("q6", "q1", "q2", "q3", "q4", "q5") if groups.get(g)), None)
    refs = [ProvisionRef(article, paragraph, point)]
    more = groups.get("more")
    if more:
        numbers = [int(n) for n in _MORE_NUMBERS.findall(more)]
        if _RANGE.match(more) and numbers and article < numbers[0] <= article + MAX_RANGE:
            refs += [ProvisionRef(n) for n in range(article + 1, numbers[0] + 1)]
        elif not _RANGE.match(more):
            refs += [ProvisionRef(n) for n in numbers]
    return refs


class Missing(Enum):
    """What a reference names that the Regulation does not have."""

    ARTICLE = "article"  # after Article 99
    PARAGRAPH = "paragraph"  # after the article's last paragraph (or an article without numbered paragraphs)
    POINT = "point"  # after the paragraph's last point (or a paragraph without points)


@dataclass(frozen=True)
class NoSuchProvision:
    """A reference to a provision that does not exist, and what exists instead."""

    ref: ProvisionRef
    missing: Missing
    existing: int  # articles in the Regulation, paragraphs in the article, or points in the paragraph


class Structure:
    """Which articles, paragraphs and points exist (from the corpus): references resolve against it."""

    def __init__(self, provision_ids: Sequence[str], points: dict[str, Sequence[str]]):
        """`points`: provision id → the printed labels of its points in one language ("(a)", "α)", "б)")."""
        self.ids = list(provision_ids)
        self._paragraphs: dict[int, list[str]] = {}
        for pid in self.ids:
            self._paragraphs.setdefault(ProvisionRef.from_id(pid).article, []).append(pid)
        self._points = {pid: [_letter(label) for label in labels] for pid, labels in points.items()}

    def resolve(self, ref: ProvisionRef, point_labels: dict[str, Sequence[str]] | None = None
                ) -> list[str] | NoSuchProvision:
        """The provision ids `ref` names (an article: all of its provisions), or what is missing.
        `point_labels` are the asker's language's labels, for letters of other alphabets ("στ", "б")."""
        provisions = self._paragraphs.get(ref.article)
        if provisions is None:
            return NoSuchProvision(ref, Missing.ARTICLE, len(self._paragraphs))
        if ref.paragraph is None:
            return list(provisions)
        numbered = [pid for pid in provisions if "(" in pid]
        pid = f"Art. {ref.article}({ref.paragraph})"
        if pid not in numbered:
            return NoSuchProvision(ref, Missing.PARAGRAPH, len(numbered))
        if ref.point is not None:
            letters = [self._points.get(pid, [])]
            if point_labels and pid in point_labels:
                letters.append([_letter(label) for label in point_labels[pid]])
            if not any(ref.point in known for known in letters):
                return NoSuchProvision(ref, Missing.POINT, len(letters[0]))
        return [pid]


def _letter(label: str) -> str:
    return label.strip("() .").lower()


def referenced_provisions(text: str, structure: Structure) -> list[str]:
    """The existing provision ids the text names, in the order named, each once."""
    ids: list[str] = []
    for reference in find_references(text):
        resolved = structure.resolve(reference.ref)
        if isinstance(resolved, list):
            ids.extend(pid for pid in resolved if pid not in ids)
    return ids


def missing_provisions(text: str, structure: Structure, point_labels: dict[str, Sequence[str]] | None = None
                       ) -> list[NoSuchProvision]:
    """The references in the text to provisions that do not exist."""
    return [r for r in (structure.resolve(ref.ref, point_labels) for ref in find_references(text))
            if isinstance(r, NoSuchProvision)]


def reference_tokens(refs: Iterable[ProvisionRef]) -> list[str]:
    """BM25 tokens for references: the article, and the paragraph where one is named ("art33", "art33_1")."""
    tokens: list[str] = []
    for ref in refs:
        tokens.append(f"art{ref.article}")
        if ref.paragraph is not None:
            tokens.append(f"art{ref.article}_{ref.paragraph}")
    return tokens


__all__ = ["Missing", "NoSuchProvision", "ProvisionRef", "Reference", "Structure", "find_references",
           "missing_provisions", "reference_tokens", "referenced_provisions"]
