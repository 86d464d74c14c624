"""The GDPR corpus builder: output, spot checks against the printed text, and refusals on broken sources.

All 24 languages are built once per session from the shared sources; the broken-copy tests build
only the language they break. Nothing here touches the network.
"""
from __future__ import annotations

import io
import json
import re
import shutil
import time
import zipfile
from pathlib import Path
from urllib.error import URLError

import pytest
from lxml import html

import corpus.build_gdpr_corpus as builder
import corpus.formex_download as downloader
from corpus import CORPUS_VERSION, LANGUAGES, load_corpus
from corpus.formex import parse_consolidated

SOURCE = builder.DEFAULT_SOURCE
EN_HTML = SOURCE / "eurlex-html" / "32016R0679_EN_eurlex.html"

pytestmark = pytest.mark.skipif(not SOURCE.is_dir(), reason=f"GDPR sources not found at {SOURCE}")

# Paragraphs the 2018 corrigendum changed in EN: the only ones where the corpus may differ from the
# uncorrected EUR-Lex HTML of the OJ publication.
EN_CORRECTED = {
    "Art. 37(1)", "Art. 41(3)", "Art. 41(5)", "Art. 42(7)", "Art. 43(3)", "Art. 43(6)", "Art. 57(1)",
    "Art. 64(1)", "Art. 64(6)", "Art. 64(7)", "Art. 64(8)", "Art. 65(1)", "Art. 69(2)", "Art. 70(1)",
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise URLError("tests never download")
    monkeypatch.setattr(downloader, "urlopen", refuse)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> tuple[Path, float]:
    out = tmp_path_factory.mktemp("corpus")
    started = time.perf_counter()
    assert builder.main(["--source", str(SOURCE), "--out", str(out)]) == 0
    return out, time.perf_counter() - started


@pytest.fixture(scope="session")
def out(built) -> Path:
    return built[0]


@pytest.fixture(scope="session")
def provisions(out):
    """lang -> {id: Provision}"""
    return {lang: {p.id: p for p in load_corpus(lang, out)} for lang in LANGUAGES}


# --- the build -----------------------------------------------------------------------------------

def test_builds_24_files_of_414_provisions_quickly(built):
    out, seconds = built
    files = sorted(p.name for p in out.iterdir() if p.suffix == ".jsonl")
    assert files == [f"gdpr_{lang}.jsonl" for lang in LANGUAGES]
    assert (out / "VERSION").read_text().strip() == CORPUS_VERSION
    for name in files:
        assert len((out / name).read_text(encoding="utf-8").splitlines()) == 414
    assert seconds < 20


def test_second_build_is_byte_identical(out, tmp_path):
    assert builder.main(["--source", str(SOURCE), "--out", str(tmp_path)]) == 0
    for lang in LANGUAGES:
        name = f"gdpr_{lang}.jsonl"
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name


def test_check_passes_on_a_fresh_build(out, capsys):
    assert builder.main(["--source", str(SOURCE), "--out", str(out), "--check"]) == 0


def test_check_names_the_differing_file(out, tmp_path, capsys):
    for lang in ("de", "en"):
        shutil.copy(out / f"gdpr_{lang}.jsonl", tmp_path)
    stale = tmp_path / "gdpr_en.jsonl"
    stale.write_bytes(stale.read_bytes().replace(b"72 hours", b"96 hours"))
    assert builder.main(["--source", str(SOURCE), "--out", str(tmp_path), "--lang", "de,en", "--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(stale) in err and "differs" in err


def test_check_names_a_missing_file(tmp_path, capsys):
    assert builder.main(["--source", str(SOURCE), "--out", str(tmp_path), "--lang", "fr", "--check"]) == 1
    assert str(tmp_path / "gdpr_fr.jsonl") in capsys.readouterr().err


def test_every_line_is_a_provision_in_fixed_key_order(out):
    keys = ["id", "article", "paragraph", "lang", "title", "chapter", "section", "text", "url", "points"]
    for line in (out / "gdpr_el.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert list(record) == keys
        assert record["lang"] == "el"
    assert "\\u" not in (out / "gdpr_el.jsonl").read_text(encoding="utf-8")  # ensure_ascii=False


def test_ids_align_across_languages(provisions):
    english = list(provisions["en"])
    assert len(english) == 414
    assert len({p.article for p in provisions["en"].values()}) == 99
    for lang in LANGUAGES:
        assert list(provisions[lang]) == english, lang


def test_load_corpus_names_the_build_command_when_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"python -m corpus\.build_gdpr_corpus"):
        load_corpus("en", tmp_path)


# --- spot checks ---------------------------------------------------------------------------------

def test_art_33_1_record(provisions):
    p = provisions["en"]["Art. 33(1)"]
    assert "not later than 72 hours" in p.text
    assert (p.article, p.paragraph, p.lang) == (33, "1", "en")
    assert p.title == "Notification of a personal data breach to the supervisory authority"
    assert p.chapter == "Chapter IV — Controller and processor"
    assert p.section == "Section 2 — Security of personal data"
    assert p.url == "https://eur-lex.europa.eu/legal-content/EN/TXT/HTML/?uri=CELEX:32016R0679#033.001"
    assert provisions["de"]["Art. 33(1)"].url.endswith("/DE/TXT/HTML/?uri=CELEX:32016R0679#033.001")


def _anchors_of(html_file: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html_file.read_text(encoding="utf-8", errors="replace")))


@pytest.mark.parametrize("lang, html_file", [("en", "32016R0679_EN_eurlex.html"), ("fr", "32016R0679_FR_eurlex-browser-saved.html"),
                                             ("da", "32016R0679_DA_eurlex.html")])
def test_every_link_lands_on_its_paragraph_or_article_in_the_eurlex_html(provisions, lang, html_file):
    anchors = _anchors_of(SOURCE / "eurlex-html" / html_file)
    for p in provisions[lang].values():
        anchor = p.url.rsplit("#", 1)[1]
        assert anchor in anchors, (p.id, anchor)
        expected = f"{p.article:03d}.{int(p.paragraph):03d}" if p.paragraph and p.article != 4 else f"art_{p.article}"
        assert anchor == expected, p.id


def test_paragraph_anchors_exist_in_every_language_of_the_official_journal(provisions):
    # EUR-Lex renders its HTML from the OJ Formex, whose PARAG identifiers are the paragraph anchors.
    for lang in LANGUAGES:
        formex = (SOURCE / "formex" / "oj-2016-L119" / f"L_2016119{lang.upper()}.01000101.xml").read_text("utf-8")
        paragraphs = set(re.findall(r'<PARAG IDENTIFIER="(\d{3}\.\d{3})"', formex))
        linked = {p.url.rsplit("#", 1)[1] for p in provisions[lang].values() if "#art_" not in p.url}
        assert linked == paragraphs and len(linked) == 372, lang
        assert all(p.url.startswith(f"https://eur-lex.europa.eu/legal-content/{lang.upper()}/") for p in provisions[lang].values())


def test_each_provision_carries_its_point_labels_as_printed(provisions):
    assert provisions["en"]["Art. 6(1)"].points == ("(a)", "(b)", "(c)", "(d)", "(e)", "(f)")
    assert provisions["el"]["Art. 6(1)"].points[-1] == "στ)"
    assert provisions["en"]["Art. 33(1)"].points == ()
    assert all(len(provisions[lang]["Art. 9(2)"].points) == 10 for lang in LANGUAGES)


def test_numbers_are_grouped_as_printed(provisions):
    assert "up to 20 000 000 EUR, or in the case of an undertaking" in provisions["en"]["Art. 83(5)"].text
    assert "10 000 000 EUR" in provisions["en"]["Art. 83(4)"].text  # the source has a no-break space here
    assert "20 000 000 EUR" in provisions["fr"]["Art. 83(6)"].text


def test_whitespace_is_plain_and_single(provisions):
    for lang in ("en", "pl", "fr"):
        for p in provisions[lang].values():
            assert "\u00a0" not in p.text and "  " not in p.text and p.text == p.text.strip(), p.id


def test_definitions_start_with_their_quoted_term(provisions):
    assert provisions["en"]["Art. 4(7)"].text.startswith("‘controller’ means the natural or legal person")
    assert provisions["de"]["Art. 4(7)"].text.startswith("„Verantwortlicher“ die natürliche")
    assert provisions["fr"]["Art. 4(7)"].text.startswith("«responsable du traitement»")
    # DLIST languages: TERM, the list's separator, DEFINITION
    assert provisions["da"]["Art. 4(7)"].text.startswith("»dataansvarlig«: en fysisk")
    assert provisions["et"]["Art. 4(7)"].text.startswith("„vastutav töötleja” – füüsiline")


def test_definitions_keep_their_points(provisions):
    text = provisions["en"]["Art. 4(16)"].text
    assert text.startswith("‘main establishment’ means: (a) as regards a controller")
    assert "; (b) as regards a processor" in text
    assert " (c) a complaint has been lodged" in provisions["en"]["Art. 4(22)"].text
    assert " b) " in provisions["nl"]["Art. 4(23)"].text


def test_points_are_inlined_after_the_lead_in(provisions):
    text = provisions["en"]["Art. 6(1)"].text
    assert text.startswith("Processing shall be lawful only if and to the extent that at least one of the "
                           "following applies: (a) the data subject has given consent")
    assert text.endswith("(f) of the first subparagraph shall not apply to processing carried out by public "
                         "authorities in the performance of their tasks.")
    assert "by: — their parliament; — their government;" in provisions["en"]["Art. 53(1)"].text


@pytest.mark.parametrize("lang, labels", [
    ("fr", ["a)", "b)", "c)", "d)", "e)", "f)"]),
    ("es", ["a)", "b)", "c)", "d)", "e)", "f)"]),
    ("de", ["a)", "b)", "c)", "d)", "e)", "f)"]),
    ("en", ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]),
])
def test_art_17_1_has_points_a_to_f_in_order(provisions, lang, labels):
    text = provisions[lang]["Art. 17(1)"].text
    positions = [text.find(f" {label} ") for label in labels]
    assert -1 not in positions and positions == sorted(positions), positions


def test_corrected_wording(provisions):
    assert "pursuant to Article 9 or personal data" in provisions["en"]["Art. 37(1)"].text
    assert "gemäß Artikel 55 zuständigen" in provisions["de"]["Art. 33(1)"].text


def test_mislabelled_paragraph_identifiers_are_ignored(provisions):
    # NL Art. 3(1) carries IDENTIFIER 032.001, RO Art. 41(3) carries 014.003
    assert provisions["nl"]["Art. 3(1)"].article == 3
    assert "in de Unie" in provisions["nl"]["Art. 3(1)"].text
    assert provisions["ro"]["Art. 41(3)"].article == 41


def test_no_footnotes_signatures_or_recitals(provisions):
    for p in provisions["en"].values():
        assert "OJ L" not in p.text and "Done at Brussels" not in p.text and "Whereas" not in p.text, p.id
    assert provisions["en"]["Art. 4(25)"].text.endswith("of the European Parliament and of the Council;")


def test_application_date_ends_article_99(provisions):
    assert provisions["en"]["Art. 99(2)"].text == "It shall apply from 25 May 2018."
    assert provisions["hu"]["Art. 99(2)"].text.endswith("2018. május 25-től kell alkalmazni.")


def test_chapter_labels_in_each_language(provisions):
    assert provisions["fr"]["Art. 1(1)"].chapter == "Chapitre I — Dispositions générales"
    assert provisions["el"]["Art. 1(1)"].chapter.startswith("Κεφάλαιο I — ")
    assert provisions["hu"]["Art. 1(1)"].chapter.startswith("I. fejezet — ")
    assert provisions["en"]["Art. 10"].section is None and provisions["en"]["Art. 10"].paragraph is None


def test_portuguese_ordinals(provisions):
    # superscript o after a number (<HT TYPE="SUP">o</HT>) is the ordinal indicator
    assert "artigo 6.º, n.º 1, alínea a)" in provisions["pt"]["Art. 8(1)"].text


def test_english_matches_the_eurlex_html_except_where_corrected(provisions):
    """Cross-check the rendering against the OJ's own HTML: the text is identical paragraph by
    paragraph except in the paragraphs the corrigendum changed (the HTML is uncorrected)."""
    page = html.parse(str(EN_HTML)).getroot()
    for marker in page.xpath('//a[starts-with(@id, "ntc")]'):
        marker.drop_tree()  # footnote call-outs; their tail text stays

    def normal(text: str) -> str:
        return re.sub(r"\s+([.,;])", r"\1", " ".join(text.split()))

    differing = set()
    compared = 0
    for div in page.xpath('//div[string-length(@id) = 7 and substring(@id, 4, 1) = "."]'):
        article, paragraph = (int(n) for n in div.get("id").split("."))
        printed = re.sub(r"^\(?\d+\)?\.?\s+", "", normal(div.text_content()))
        ident = f"Art. {article}({paragraph})"
        compared += 1
        if normal(provisions["en"][ident].text) != printed:
            differing.add(ident)
    assert compared == 414 - 26 - 16  # every numbered paragraph
    assert differing == EN_CORRECTED


# --- refusals on broken sources ------------------------------------------------------------------

def _source_text(lang: str) -> str:
    return builder.source_file(SOURCE, lang).read_text(encoding="utf-8")


def _article(xml: str, number: int) -> re.Match:
    return re.search(rf'<ARTICLE IDENTIFIER="{number:03d}">.*?</ARTICLE>\s*', xml, re.S)


def _without_article(xml: str, number: int) -> str:
    found = _article(xml, number)
    return xml[:found.start()] + xml[found.end():]


def _duplicate_paragraph(xml: str, relabel: str | None = None) -> str:
    found = re.search(r'<PARAG IDENTIFIER="033.001">.*?</PARAG>', xml, re.S)
    copy = found.group(0) if relabel is None else re.sub(r"<NO.PARAG>[^<]*", f"<NO.PARAG>{relabel}", found.group(0))
    last = xml.index("</ARTICLE>", found.end())
    return xml[:last] + copy + xml[last:]


def _without_last_definition(xml: str, item: str) -> str:
    # the last definition (26) has no nested points, so its ITEM is the last one opened in Art. 4
    article = _article(xml, 4)
    body = article.group(0)
    start = body.rindex(f"<{item}>")
    end = body.index(f"</{item}>", start) + len(f"</{item}>")
    return xml[:article.start()] + body[:start] + body[end:] + xml[article.end():]


def _without_point_b_of_4_16(xml: str) -> str:
    return re.sub(r"(<NO.P>\(16\)</NO.P>.*?)<ITEM>\s*<NP>\s*<NO.P>\(b\)</NO.P>.*?</ITEM>", r"\1", xml,
                  count=1, flags=re.S)


def _in_art_10(xml: str, extra: str) -> str:
    return xml.replace("official authority.</ALINEA>", f"official authority. {extra}</ALINEA>", 1)


BROKEN = {
    "truncated XML": ("en", lambda x: x[: len(x) // 2], "not well-formed XML"),
    "missing article": ("en", lambda x: _without_article(x, 50), "check 'article count' failed: found 98 "
                                                                  "articles, expected 99 (missing Art. 50)"),
    "duplicated paragraph": ("en", _duplicate_paragraph, "Art. 33 paragraph 6 is labelled '1.'"),
    "extra paragraph": ("en", lambda x: _duplicate_paragraph(x, "6."), "check 'provision ids' failed: provision "
                                                                       "142 is Art. 33(6), expected Art. 34(1)"),
    "missing definition": ("en", lambda x: _without_last_definition(x, "ITEM"), "check 'definitions' failed: "
                                                                           "Art. 4 has 25 definitions"),
    "missing DLIST definition": ("da", lambda x: _without_last_definition(x, "DLIST.ITEM"), "check 'definitions'"),
    "definition without its (b)": ("en", _without_point_b_of_4_16, "check 'definition points' failed: Art. 4(16)"),
    "empty provision": ("en", lambda x: re.sub(r"(<STI.ART>Processing of personal data relating to criminal "
                                               r"convictions and offences</STI.ART>\s*<ALINEA>)[^<]*", r"\1", x),
                        "check 'empty provision' failed: Art. 10 has an empty text"),
    "signature": ("en", lambda x: _in_art_10(x, "Done at Brussels, 27 April 2016."),
                  "check 'foreign text' failed: Art. 10 contains signature 'Done at Brussels'"),
    "German signature": ("de", lambda x: x.replace("Sie gilt ab dem", "Geschehen zu Brüssel am", 1),
                         "check 'foreign text' failed: Art. 99(2) contains signature"),
    "footnote text": ("en", lambda x: _in_art_10(x, "(OJ L 241, 17.9.2015, p. 1)"),
                      "check 'foreign text' failed: Art. 10 contains footnote text 'OJ L 241, 17.9.2015, p. 1'"),
    "script": ("en", lambda x: _in_art_10(x, "&lt;script&gt;alert(1)&lt;/script&gt;"),
               "check 'foreign text' failed: Art. 10 contains markup or script '<s'"),
    "closing formula": ("en", lambda x: _in_art_10(x, "This Regulation shall be binding in its entirety and "
                                                      "directly applicable in all Member States."),
                        "check 'foreign text' failed: Art. 10 contains closing formula"),
    "truncated application date": ("fr", lambda x: re.sub(r'(<PARAG IDENTIFIER="099.002">.*?)<DATE[^>]*>[^<]*</DATE>',
                                                          r"\1", x, count=1, flags=re.S),
                                   "check 'application date' failed: Art. 99(2) does not end with"),
    "uncorrected wording": ("en", lambda x: re.sub(r"Article\s9 or personal data", "Article 9 and personal data", x),
                            "check 'corrected wording' failed: Art. 37(1) lacks the corrected wording"),
    "no corrigendum": ("sv", lambda x: re.sub(r"<GR.CORRIG>.*?</GR.CORRIG>", "", x, flags=re.S),
                       "check 'corrected wording' failed: the file does not declare the corrigendum"),
    "not a consolidation": ("en", lambda x: x.replace("CONS.ACT", "ACT"), "expected the consolidated act"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_source_is_refused_and_nothing_written(case, tmp_path, capsys):
    lang, breaking, message = BROKEN[case]
    broken = builder.source_file(tmp_path / "src", lang)
    broken.parent.mkdir(parents=True)
    broken.write_text(breaking(_source_text(lang)), encoding="utf-8")
    out = tmp_path / "out"

    assert builder.main(["--source", str(tmp_path / "src"), "--out", str(out), "--lang", lang]) == 1

    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"error: {broken}: ")
    assert message in err
    assert not out.exists()


def test_a_refused_build_leaves_the_previous_corpus_untouched(out, tmp_path, capsys):
    previous = tmp_path / "out"
    previous.mkdir()
    for lang in ("de", "en"):
        shutil.copy(out / f"gdpr_{lang}.jsonl", previous)
    before = {p.name: p.read_bytes() for p in previous.iterdir()}
    source = tmp_path / "src"
    for lang in ("de", "en"):  # DE is valid, EN is broken: DE must not be written either
        target = builder.source_file(source, lang)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = _source_text(lang)
        target.write_text(_without_article(text, 99) if lang == "en" else text, encoding="utf-8")
    (previous / "gdpr_de.jsonl").write_bytes(b"stale\n")
    before["gdpr_de.jsonl"] = b"stale\n"

    assert builder.main(["--source", str(source), "--out", str(previous), "--lang", "de,en"]) == 1
    assert {p.name: p.read_bytes() for p in previous.iterdir()} == before


def test_missing_source_file_is_named(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    assert builder.main(["--source", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--lang", "mt"]) == 1
    assert "gdpr-consolidated-mt.xml: cannot read the source" in capsys.readouterr().err


def test_unknown_language_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        builder.main(["--lang", "en,xx"])
    assert exit_.value.code == 2
    assert "xx" in capsys.readouterr().err


# --- no local sources: download and cache --------------------------------------------------------

@pytest.fixture
def no_local_sources(monkeypatch, tmp_path):
    monkeypatch.setattr(builder, "DEFAULT_SOURCE", tmp_path / "nowhere")
    return tmp_path / "data"


def test_downloads_verifies_and_caches_when_no_sources(no_local_sources, monkeypatch, capsys):
    fetched = []
    monkeypatch.setattr(builder, "fetch_consolidated",
                        lambda lang: fetched.append(lang) or builder.source_file(SOURCE, lang).read_bytes())
    out = no_local_sources / "corpus"

    assert builder.main(["--out", str(out), "--lang", "en"]) == 0
    assert "Downloading the consolidated GDPR (en, 1/1)" in capsys.readouterr().err
    cached = builder.source_file(no_local_sources / "sources", "en")
    assert cached.read_bytes() == builder.source_file(SOURCE, "en").read_bytes()

    assert builder.main(["--out", str(out), "--lang", "en", "--check"]) == 0
    assert builder.main(["--out", str(out), "--lang", "en"]) == 0
    assert fetched == ["en"]  # the cache is used from then on


def test_a_bad_download_is_refused_and_not_cached(no_local_sources, monkeypatch, capsys):
    monkeypatch.setattr(builder, "fetch_consolidated",
                        lambda lang: _without_article(_source_text(lang), 7).encode("utf-8"))
    assert builder.main(["--out", str(no_local_sources / "corpus"), "--lang", "en"]) == 1
    assert "check 'article count' failed" in capsys.readouterr().err
    assert not (no_local_sources / "sources" / builder.FORMEX_DIR / "gdpr-consolidated-en.xml").exists()
    assert not (no_local_sources / "corpus").exists()


def test_an_unreachable_publications_office_is_one_line(no_local_sources, capsys):
    assert builder.main(["--out", str(no_local_sources / "corpus"), "--lang", "en"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "Traceback" not in "\n".join(err)


def test_check_never_downloads(no_local_sources, capsys):
    assert builder.main(["--out", str(no_local_sources / "corpus"), "--lang", "en", "--check"]) == 1
    assert "no source to check against" in capsys.readouterr().err


def test_the_act_is_picked_out_of_a_formex_package():
    act = builder.source_file(SOURCE, "en").read_bytes()
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("DOC_1.doc.xml", b'<?xml version="1.0"?><DOC><REF.PHYS FILE="DOC_2.xml"/></DOC>')
        archive.writestr("DOC_2.xml", act)
    assert downloader.act_from_package(package.getvalue(), "en") == act
    assert downloader.act_from_package(act, "en") == act
    with pytest.raises(downloader.DownloadError):
        downloader.act_from_package(b"%PDF-1.7", "en")


def test_parser_is_pure_and_language_tagged():
    act = parse_consolidated(builder.source_file(SOURCE, "ga").read_bytes(), "ga")
    assert {p.lang for p in act.provisions} == {"ga"}
    assert act.provisions[0].url.endswith("/GA/TXT/HTML/?uri=CELEX:32016R0679#001.001")
