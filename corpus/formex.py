"""Turn the consolidated Formex 4 XML of the GDPR (CONS.ACT) into `Provision` records.

Pure functions over bytes: no file or network access, so the builder, its `--check` and the
tests all see exactly the same text.

Rendering conventions (the builder's output documents them by being built here):
- every run of whitespace, including the no-break spaces the Formex uses unevenly (EN Art. 83(4)
  has one between "10 000 000" and "EUR", Art. 83(5) has a plain space), becomes one ASCII space,
  so a quote a user types matches the stored text;
- blocks (subparagraphs, a lead-in and its points, nested sub-points) are joined by one space, in
  document order, each point keeping its printed label ("(a)", "a)", "α)");
- tagged numbers (`FT TYPE="NUMBER"`) are grouped in threes with a space, as the Official Journal
  prints them in every language ("20 000 000");
- quotation marks come from the `CODE` attribute of `QUOT.START`/`QUOT.END` (U+2018/U+2019 in EN,
  U+201E/U+201C in DE, guillemets in FR ...);
- footnotes and processing instructions (page breaks, the CLG.MDFO/MDFC correction markers) are
  dropped; the corrected wording they bracket is kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from lxml import etree

from corpus.provision import Provision

DEFINITIONS_ARTICLE = 4
EURLEX_URL = "https://eur-lex.europa.eu/legal-content/{lang}/TXT/HTML/?uri=CELEX:32016R0679#{anchor}"


def eurlex_url(lang: str, article: int, paragraph: int | None) -> str:
    """The provision on EUR-Lex in `lang`: the paragraph's own anchor ("033.001" = Art. 33(1)) where the
    article has numbered paragraphs, else the article ("art_10"; Art. 4's definitions have no anchors)."""
    anchor = f"{article:03d}.{paragraph:03d}" if paragraph is not None else f"art_{article}"
    return EURLEX_URL.format(lang=lang.upper(), anchor=anchor)

# Elements printed on a line of their own: they need a space around them once flattened; the
# rest (HT, DATE, QUOT.*, ...) is inline and must not gain one.
_BLOCKS = frozenset({
    "ALINEA", "P", "LIST", "ITEM", "NP", "NO.P", "TXT", "DLIST", "DLIST.ITEM", "PREFIX", "TERM",
    "DEFINITION", "PARAG", "NO.PARAG",
})
# Superscripts print as ordinal indicators in ES/FR/PT ("n.º", "artigo 6.º"); others stay plain ("1er").
_SUPERSCRIPT = {"o": "º", "a": "ª"}
_ROMAN = re.compile(r"[IVXLC]+\.?")
# Greek capitals carry no tonos, so lower-casing "ΚΕΦΑΛΑΙΟ" cannot restore the accent by itself.
_ACCENTED = {"Κεφαλαιο": "Κεφάλαιο"}
_NUMBER_LABEL = re.compile(r"\(?(\d+)[.)]?")
_EM_DASH = "\u2014"


class FormexError(ValueError):
    """The XML is not a consolidated GDPR in the expected Formex shape; the message says where."""


@dataclass(frozen=True)
class ParsedAct:
    """What one language file yields: the provisions plus the facts the sanity checks need."""

    provisions: tuple[Provision, ...]
    points: dict[str, tuple[str, ...]]  # provision id -> printed labels of its points, in order
    footnotes: tuple[str, ...]  # text of every footnote and of the OJ references inside them
    closing: str  # the formula after the last article ("This Regulation shall be binding ...")
    corrigenda: tuple[str, ...]  # CELEX numbers of the corrigenda the consolidation applies


def parse_consolidated(data: bytes, lang: str) -> ParsedAct:
    root = _parse_xml(data)
    if root.tag != "CONS.ACT":
        raise FormexError(f"root element is <{root.tag}>, expected the consolidated act <CONS.ACT>")
    terms = _one(root, "CONS.DOC/ENACTING.TERMS")
    provisions: list[Provision] = []
    points: dict[str, tuple[str, ...]] = {}
    for chapter, section, article in _articles(terms):
        for provision, labels in _article_provisions(article, lang, chapter, section):
            provisions.append(provision)
            points[provision.id] = labels
    return ParsedAct(
        provisions=tuple(provisions),
        points=points,
        footnotes=tuple(_footnotes(terms)),
        closing=" ".join(_render(e) for e in root.iterfind("CONS.DOC/FINAL")),
        corrigenda=tuple((e.text or "").strip() for e in root.iterfind(".//GR.CORRIG/CORRIG/BIB.DATA/NO.CELEX")),
    )


def _parse_xml(data: bytes) -> etree._Element:
    # PIs go at parse time: libxml2 then merges the text around them, so no tail is lost.
    parser = etree.XMLParser(remove_pis=True, remove_comments=True, resolve_entities=False, no_network=True)
    try:
        return etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise FormexError(f"not well-formed XML: {exc}") from None


def _one(parent: etree._Element, path: str) -> etree._Element:
    found = parent.find(path)
    if found is None:
        raise FormexError(f"no <{path}> in <{parent.tag}>")
    return found


def _articles(terms: etree._Element) -> Iterator[tuple[str, str | None, etree._Element]]:
    """Yield (chapter, section, ARTICLE): chapters are the top DIVISIONs, sections the nested ones."""
    for chapter in terms.iterfind("DIVISION"):
        chapter_heading = _heading(chapter, chapter=True)
        for child in chapter:
            if child.tag == "ARTICLE":
                yield chapter_heading, None, child
            elif child.tag == "DIVISION":
                section_heading = _heading(child, chapter=False)
                for article in child.iterfind("ARTICLE"):
                    yield chapter_heading, section_heading, article


def _heading(division: etree._Element, chapter: bool) -> str:
    number = _render(_one(division, "TITLE/TI"))
    name = _render(_one(division, "TITLE/STI"))
    return f"{_sentence_case(number) if chapter else number} {_EM_DASH} {name}"


def _sentence_case(label: str) -> str:
    """'CHAPTER IV' -> 'Chapter IV', 'I. FEJEZET' -> 'I. fejezet': the OJ prints chapter labels in
    capitals, sections in sentence case; both are given in sentence case with the numeral intact."""
    words = [w if _ROMAN.fullmatch(w) else w.lower() for w in label.split()]
    if words:
        words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(_ACCENTED.get(w, w) for w in words)


def _article_provisions(article: etree._Element, lang: str, chapter: str, section: str | None
                        ) -> Iterator[tuple[Provision, tuple[str, ...]]]:
    number = _article_number(article)
    title = _render(_one(article, "STI.ART"))
    body = [c for c in article if c.tag not in ("TI.ART", "STI.ART")]
    kinds = {c.tag for c in body}

    def provision(paragraph: str | None, text: str, labels: tuple[str, ...]
                  ) -> tuple[Provision, tuple[str, ...]]:
        ident = f"Art. {number}" if paragraph is None else f"Art. {number}({paragraph})"
        url = eurlex_url(lang, number, None if paragraph is None or number == DEFINITIONS_ARTICLE else int(paragraph))
        return Provision(ident, number, paragraph, lang, title, chapter, section, text, url, labels), labels

    if number == DEFINITIONS_ARTICLE:
        for position, text, labels in _definitions(body):
            yield provision(str(position), text, labels)
    elif kinds == {"PARAG"}:
        for position, parag in enumerate(body, start=1):
            _expect_number(_one(parag, "NO.PARAG"), position, f"Art. {number} paragraph")
            parts = [c for c in parag if c.tag != "NO.PARAG"]
            yield provision(str(position), _render_all(parts), _labels(parts))
    elif kinds == {"ALINEA"}:
        yield provision(None, _render_all(body), _labels(body))
    else:
        raise FormexError(f"Art. {number}: unexpected content {sorted(kinds)}, expected PARAG or ALINEA")


def _article_number(article: etree._Element) -> int:
    # The ARTICLE identifier is trusted; paragraph identifiers are not (NL Art. 3(1) says 032.001).
    identifier = article.get("IDENTIFIER", "")
    if not identifier.isdigit():
        raise FormexError(f"ARTICLE with IDENTIFIER {identifier!r}, expected a number")
    return int(identifier)


def _definitions(body: list[etree._Element]) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(number, text, point labels) per definition. The number is left out of the text so that each
    starts with the quoted term. 16 languages tag definitions LIST/ITEM/NP, the other 8
    DLIST/DLIST.ITEM with PREFIX, TERM and DEFINITION."""
    where = f"Art. {DEFINITIONS_ARTICLE}"
    lists = [e for alinea in body for e in alinea if e.tag in ("LIST", "DLIST")]
    if len(lists) != 1:
        raise FormexError(f"{where}: expected one list of definitions, found {len(lists)}")
    separator = lists[0].get("SEPARATOR", ":")
    # "term: definition" but "term – definition": only punctuation attaches to the term.
    glue = separator if separator in ".,:;" else f" {separator}"
    for position, item in enumerate(lists[0], start=1):
        if item.tag == "ITEM":
            np = _one(item, "NP")
            _expect_number(_one(np, "NO.P"), position, f"{where} definition")
            parts = [c for c in np if c.tag != "NO.P"]
            yield position, _render_all(parts), _labels(parts)
        elif item.tag == "DLIST.ITEM":
            _expect_number(_one(item, "PREFIX"), position, f"{where} definition")
            definition = _one(item, "DEFINITION")
            text = f"{_render(_one(item, 'TERM'))}{glue} {_render(definition)}"
            yield position, text, _labels([definition])
        else:
            raise FormexError(f"{where}: unexpected <{item.tag}> among the definitions")


def _expect_number(label: etree._Element, position: int, what: str) -> None:
    printed = (label.text or "").strip()
    match = _NUMBER_LABEL.fullmatch(printed)
    if match is None or int(match.group(1)) != position:
        raise FormexError(f"{what} {position} is labelled {printed!r}")


def _labels(parts: Iterable[etree._Element]) -> tuple[str, ...]:
    return tuple(_render(no) for part in parts for no in part.iter("NO.P"))


def _render_all(parts: Iterable[etree._Element]) -> str:
    return " ".join(text for text in map(_render, parts) if text)


def _footnotes(terms: etree._Element) -> Iterator[str]:
    for note in terms.iter("NOTE"):
        yield _render(note)
        yield from (_render(ref) for ref in note.iter("REF.DOC.OJ"))


def _render(element: etree._Element) -> str:
    """The printed text of an element, footnotes left out, whitespace normalised."""
    return " ".join("".join(_pieces(element)).split())


def _pieces(element: etree._Element) -> Iterator[str]:
    yield element.text or ""
    for child in element:
        yield from _child_pieces(child)
        yield child.tail or ""


def _child_pieces(child: etree._Element) -> Iterator[str]:
    tag = child.tag
    if tag == "NOTE":
        return
    if tag in ("QUOT.START", "QUOT.END"):
        yield _quote(child)
    elif tag == "FT" and child.get("TYPE") == "NUMBER":
        yield _group_thousands(child)
    elif tag == "HT" and child.get("TYPE") == "SUP":
        text = "".join(_pieces(child))
        yield _SUPERSCRIPT.get(text, text)
    elif tag in _BLOCKS:
        yield " "
        if tag == "ITEM" and child.getparent().get("TYPE") == "DASH":
            yield f"{_EM_DASH} "
        yield from _pieces(child)
        yield " "
    else:
        yield from _pieces(child)


def _quote(mark: etree._Element) -> str:
    code = mark.get("CODE", "")
    if not re.fullmatch(r"[0-9A-Fa-f]{4}", code):
        raise FormexError(f"<{mark.tag}> with CODE {code!r}, expected a 4-digit hex code point")
    return chr(int(code, 16))


def _group_thousands(number: etree._Element) -> str:
    digits = (number.text or "").strip()
    if not digits.isdigit():
        raise FormexError(f"<FT TYPE=\"NUMBER\"> holds {digits!r}, expected digits")
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
    return " ".join(groups)
