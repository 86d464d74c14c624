"""Build the GDPR corpus: one `gdpr_<lang>.jsonl` per language from the consolidated Formex XML.

    python -m corpus.build_gdpr_corpus [--source DIR] [--out DIR] [--lang en,de,...] [--check]

The consolidated text (CELEX 02016R0679-20160504) is used because it carries the 2018 corrigendum;
the OJ publication and its EUR-Lex HTML still print the superseded wording. One record per article
paragraph with its points inlined, one per Art. 4 definition, one per article without numbered
paragraphs; `corpus/formex.py` documents how the text is rendered.

Every language is parsed and checked before anything is written, and files are moved into place
only once all are written, so a failed check leaves `--out` as it was. `--check` rebuilds in memory
and compares byte for byte with `--out`.

Its length is the sanity checks, one per property of the official text the corpus relies on; they are read
together with the build they guard.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from corpus.provision import Provision
from corpus import BUILD_COMMAND, CORPUS_VERSION, LANGUAGES, corpus_file, version_file
from corpus.formex import DEFINITIONS_ARTICLE, FormexError, ParsedAct, parse_consolidated
from corpus.formex_download import CELLAR_URL, DownloadError, fetch_consolidated

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "corpus"
DEFAULT_OUT = Path("data/corpus")
FORMEX_DIR = Path("formex/consolidated-02016R0679-20160504")

# Paragraphs per article, Art. 1 to 99 (0: the article has no numbered paragraphs; Art. 4 counts
# its definitions). All 24 language versions share this structure; it gives the 414 provision ids
# every language must produce, in this order, so that ids align across languages.
STRUCTURE = (
    3, 4, 3, 26, 2, 4, 4, 3, 4, 0, 2, 8, 4, 5, 4, 0, 3, 3, 0, 4, 6, 4, 2, 3, 3, 3, 5, 10, 0, 5,
    0, 4, 5, 4, 11, 5, 7, 6, 2, 11, 6, 8, 9, 0, 9, 5, 3, 0, 6, 0, 4, 6, 4, 2, 3, 6, 4, 6, 0, 12,
    9, 7, 0, 8, 6, 4, 0, 6, 2, 4, 2, 2, 2, 2, 6, 2, 2, 4, 2, 2, 3, 6, 9, 2, 3, 0, 0, 3, 4, 2,
    2, 5, 3, 2, 0, 0, 5, 0, 2,
)
EXPECTED_IDS = tuple(
    f"Art. {article}" if count == 0 else f"Art. {article}({paragraph})"
    for article, count in enumerate(STRUCTURE, start=1)
    for paragraph in range(1, max(count, 1) + 1)
)
# Definitions whose points (a), (b) ... must survive the split of Art. 4.
DEFINITIONS_WITH_POINTS = ("Art. 4(16)", "Art. 4(22)", "Art. 4(23)")

# How Art. 99(2) ends in each language: the application date, 25 May 2018, as printed (Hungarian
# puts the verb after it). A truncated last article, or one running into the signatures, fails.
APPLICATION_DATE = {
    "bg": "25 май 2018 година.", "cs": "25. května 2018.", "da": "25. maj 2018.", "de": "25. Mai 2018.",
    "el": "25 Μαΐου 2018.", "en": "25 May 2018.", "es": "25 de mayo de 2018.", "et": "25. maist 2018.",
    "fi": "25 päivästä toukokuuta 2018.", "fr": "25 mai 2018.", "ga": "25 Bealtaine 2018.",
    "hr": "25. svibnja 2018.", "hu": "2018. május 25-től kell alkalmazni.", "it": "25 maggio 2018.",
    "lt": "2018 m. gegužės 25 d.", "lv": "2018. gada 25. maija.", "mt": "25 ta' Mejju 2018.",
    "nl": "25 mei 2018.", "pl": "25 maja 2018 r.", "pt": "25 de maio de 2018.", "ro": "25 mai 2018.",
    "sk": "25.mája 2018.", "sl": "25. maja 2018.", "sv": "25 maj 2018.",
}
# The signature block of the act as published in OJ L 119 ("Done at Brussels, ...", "For the
# European Parliament"); the consolidated files drop it, so any trace means a mis-parse.
SIGNATORIES = ("Schulz", "Hennis-Plasschaert")
SIGNATURES = {
    "bg": ("Съставено в Брюксел", "За Европейския парламент"),
    "cs": ("V Bruselu dne", "Za Evropský parlament"),
    "da": ("Udfærdiget i Bruxelles", "På Europa-Parlamentets vegne"),
    "de": ("Geschehen zu Brüssel", "Im Namen des Europäischen Parlaments"),
    "el": ("Βρυξέλλες, 27", "Για το Ευρωπαϊκό Κοινοβούλιο"),
    "en": ("Done at Brussels", "For the European Parliament"),
    "es": ("Hecho en Bruselas", "Por el Parlamento Europeo"),
    "et": ("Brüssel, 27", "Euroopa Parlamendi nimel"),
    "fi": ("Tehty Brysselissä", "Euroopan parlamentin puolesta"),
    "fr": ("Fait à Bruxelles", "Par le Parlement européen"),
    "ga": ("Arna dhéanamh in Strasbourg", "Thar ceann Pharlaimint na hEorpa"),
    "hr": ("Sastavljeno u Bruxellesu", "Za Europski parlament"),
    "hu": ("Kelt Brüsszelben", "az Európai Parlament részéről"),
    "it": ("Fatto a Bruxelles", "Per il Parlamento europeo"),
    "lt": ("Priimta Briuselyje", "Europos Parlamento vardu"),
    "lv": ("Briselē, 2016", "Eiropas Parlamenta vārdā"),
    "mt": ("Magħmul fi Brussell", "Għall-Parlament Ewropew"),
    "nl": ("Gedaan te Brussel", "Voor het Europees Parlement"),
    "pl": ("Sporządzono w Brukseli", "W imieniu Parlamentu Europejskiego"),
    "pt": ("Feito em Bruxelas", "Pelo Parlamento Europeu"),
    "ro": ("Adoptat la Bruxelles", "Pentru Parlamentul European"),
    "sk": ("V Bruseli 27", "Za Európsky parlament"),
    "sl": ("V Bruslju", "Za Evropski parlament"),
    "sv": ("Utfärdad i Bryssel", "På Europaparlamentets vägnar"),
}
# The corrigendum every language's consolidation must apply, and wording only its corrections have
# (the OJ text reads "Article 9 and personal data" and, in DE, "gemäß Artikel 51 zuständigen").
CORRIGENDUM = "32016R0679R(02)"
CORRECTED_WORDING = {
    "en": ("Art. 37(1)", "pursuant to Article 9 or personal data"),
    "de": ("Art. 33(1)", "gemäß Artikel 55 zuständigen Aufsichtsbehörde"),
}
_MARKUP = re.compile(r"<\s*/?\s*[A-Za-z!?]|&#?\w+;")


class CorpusError(Exception):
    """The build cannot go on; the message is one line naming the file and what is wrong."""


# --- sanity checks: each returns what is wrong, or None ------------------------------------------

def _check_article_count(act: ParsedAct, lang: str) -> str | None:
    found = list(dict.fromkeys(p.article for p in act.provisions))
    expected = list(range(1, len(STRUCTURE) + 1))
    if found == expected:
        return None
    missing = [f"Art. {n}" for n in expected if n not in found]
    detail = f"missing {', '.join(missing)}" if missing else "articles out of order"
    return f"found {len(found)} articles, expected {len(expected)} ({detail})"


def _check_definitions(act: ParsedAct, lang: str) -> str | None:
    count = sum(1 for p in act.provisions if p.article == DEFINITIONS_ARTICLE)
    expected = STRUCTURE[DEFINITIONS_ARTICLE - 1]
    return None if count == expected else f"Art. 4 has {count} definitions, expected {expected}"


def _check_ids(act: ParsedAct, lang: str) -> str | None:
    ids = [p.id for p in act.provisions]
    if ids == list(EXPECTED_IDS):
        return None
    duplicates = sorted({i for i in ids if ids.count(i) > 1}, key=ids.index)
    if duplicates:
        return f"{duplicates[0]} occurs {ids.count(duplicates[0])} times"
    for position, (found, expected) in enumerate(zip(ids, EXPECTED_IDS), start=1):
        if found != expected:
            return f"provision {position} is {found}, expected {expected}"
    return f"{len(ids)} provisions, expected {len(EXPECTED_IDS)}"


def _check_definition_points(act: ParsedAct, lang: str) -> str | None:
    texts = {p.id: p.text for p in act.provisions}
    for ident in DEFINITIONS_WITH_POINTS:
        labels = act.points.get(ident, ())
        if len(labels) < 2 or not all(label in texts.get(ident, "") for label in labels[:2]):
            return f"{ident} lacks its points (a) and (b) (found {list(labels)})"
    return None


def _check_not_empty(act: ParsedAct, lang: str) -> str | None:
    for p in act.provisions:
        for field in ("text", "title", "chapter"):
            if not getattr(p, field).strip():
                return f"{p.id} has an empty {field}"
    return None


def _check_no_foreign_text(act: ParsedAct, lang: str) -> str | None:
    """Nothing from outside the articles: signatures, the closing formula, footnotes, markup."""
    foreign = [("signature", s) for s in SIGNATURES[lang] + SIGNATORIES]
    foreign += [("closing formula", act.closing)] if act.closing else []
    foreign += [("footnote text", note) for note in act.footnotes]
    for p in act.provisions:
        for kind, snippet in foreign:
            if snippet in p.text:
                return f"{p.id} contains {kind} {snippet[:60]!r}"
        if _MARKUP.search(p.text):
            return f"{p.id} contains markup or script {_MARKUP.search(p.text).group(0)!r}"
    return None


def _check_application_date(act: ParsedAct, lang: str) -> str | None:
    last = next((p for p in act.provisions if p.id == "Art. 99(2)"), None)
    ending = APPLICATION_DATE[lang]
    if last is None or not last.text.endswith(ending):
        tail = last.text[-40:] if last else "nothing"
        return f"Art. 99(2) does not end with the application date {ending!r} (ends {tail!r})"
    return None


def _check_corrected(act: ParsedAct, lang: str) -> str | None:
    if CORRIGENDUM not in act.corrigenda:
        return f"the file does not declare the corrigendum {CORRIGENDUM}: not the corrected consolidation"
    if lang in CORRECTED_WORDING:
        ident, wording = CORRECTED_WORDING[lang]
        text = next((p.text for p in act.provisions if p.id == ident), "")
        if wording not in text:
            return f"{ident} lacks the corrected wording {wording!r}"
    return None


CHECKS: tuple[tuple[str, Callable[[ParsedAct, str], str | None]], ...] = (
    ("article count", _check_article_count),
    ("definitions", _check_definitions),
    ("provision ids", _check_ids),
    ("definition points", _check_definition_points),
    ("empty provision", _check_not_empty),
    ("foreign text", _check_no_foreign_text),
    ("application date", _check_application_date),
    ("corrected wording", _check_corrected),
)


def verify(act: ParsedAct, lang: str, source: str) -> None:
    for name, check in CHECKS:
        problem = check(act, lang)
        if problem:
            raise CorpusError(f"{source}: check '{name}' failed: {problem}")


# --- building ------------------------------------------------------------------------------------

def source_file(source: Path, lang: str) -> Path:
    return source / FORMEX_DIR / f"gdpr-consolidated-{lang}.xml"


def parse_verified(data: bytes, lang: str, source: str) -> ParsedAct:
    try:
        act = parse_consolidated(data, lang)
    except FormexError as exc:
        raise CorpusError(f"{source}: {exc}") from None
    verify(act, lang, source)
    return act


def serialise(provisions: Iterable[Provision]) -> bytes:
    """One JSON object per line, keys in the order of `Provision`'s fields."""
    lines = (json.dumps(dataclasses.asdict(p), ensure_ascii=False) + "\n" for p in provisions)
    return "".join(lines).encode("utf-8")


def build(source: Path, langs: Iterable[str]) -> dict[str, bytes]:
    """The file content per language; raises CorpusError before returning anything if one fails."""
    built = {}
    for lang in langs:
        path = source_file(source, lang)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CorpusError(f"{path}: cannot read the source: {exc.strerror}") from None
        built[lang] = serialise(parse_verified(data, lang, str(path)).provisions)
    return built


def write_all(files: dict[str, bytes], out: Path) -> None:
    """Write every file beside its target, then rename them all into place."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=out))
    targets = {lang: corpus_file(out, lang) for lang in files}
    try:
        for lang, content in files.items():
            (staging / targets[lang].name).write_bytes(content)
        for target in targets.values():
            os.replace(staging / target.name, target)
        # Last: the version marks the files as complete and current.
        (staging / "VERSION").write_text(CORPUS_VERSION + "\n", "utf-8")
        os.replace(staging / "VERSION", version_file(out))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def differing_file(files: dict[str, bytes], out: Path) -> Path | None:
    for lang, content in files.items():
        target = corpus_file(out, lang)
        if not target.is_file() or target.read_bytes() != content:
            return target
    version = version_file(out)
    if not version.is_file() or version.read_text("utf-8").strip() != CORPUS_VERSION:
        return version
    return None


# --- sources -------------------------------------------------------------------------------------

def resolve_source(source: Path | None, out: Path, langs: list[str], may_download: bool) -> Path:
    """--source if given; else the shared copy beside the repo; else a cache under the data dir,
    downloaded from the Publications Office when incomplete (never for --check)."""
    if source is not None:
        if not source.is_dir():
            raise CorpusError(f"{source}: source directory does not exist")
        return source
    if DEFAULT_SOURCE.is_dir():
        return DEFAULT_SOURCE
    cache = out.parent / "sources"
    missing = [lang for lang in langs if not source_file(cache, lang).is_file()]
    if missing and not may_download:
        raise CorpusError(f"{source_file(cache, missing[0])}: no source to check against; run {BUILD_COMMAND}")
    if missing:
        download(cache, missing)
    return cache


def download(cache: Path, langs: list[str]) -> None:
    for position, lang in enumerate(langs, start=1):
        print(f"Downloading the consolidated GDPR ({lang}, {position}/{len(langs)}) from {CELLAR_URL}",
              file=sys.stderr, flush=True)
        try:
            data = fetch_consolidated(lang)
        except DownloadError as exc:
            raise CorpusError(str(exc)) from None
        parse_verified(data, lang, f"{CELLAR_URL} ({lang})")
        target = source_file(cache, lang)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        os.replace(partial, target)


# --- command line --------------------------------------------------------------------------------

def _languages(value: str) -> list[str]:
    if value == "all":
        return list(LANGUAGES)
    asked = {code.strip().lower() for code in value.split(",") if code.strip()}
    unknown = sorted(asked - set(LANGUAGES))
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"unknown language(s) {', '.join(unknown) or value!r}; "
                                         f"expected some of {','.join(LANGUAGES)}")
    return [lang for lang in LANGUAGES if lang in asked]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=BUILD_COMMAND.removeprefix("python -m "), description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=None,
                        help=f"directory holding {FORMEX_DIR}/ (default: {DEFAULT_SOURCE} if it exists, "
                             "else a copy downloaded to <out>/../sources)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})")
    parser.add_argument("--lang", type=_languages, default=list(LANGUAGES),
                        help="comma-separated ISO 639-1 codes (default: all 24)")
    parser.add_argument("--check", action="store_true",
                        help="rebuild in memory and compare with --out byte for byte; write nothing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    try:
        source = resolve_source(args.source, args.out, args.lang, may_download=not args.check)
        files = build(source, args.lang)
        if args.check:
            stale = differing_file(files, args.out)
            if stale is not None:
                raise CorpusError(f"{stale}: differs from the corpus built from {source}; rebuild with {BUILD_COMMAND}")
            print(f"{len(files)} corpus files in {args.out} match {source}")
            return 0
        write_all(files, args.out)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or args.out}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"Wrote {len(files)} corpus file(s) of {len(EXPECTED_IDS)} provisions each to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
