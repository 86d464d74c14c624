"""Fetch the consolidated GDPR Formex from the Publications Office (CELLAR), for machines that have
no copy of the sources. Only the transport lives here; the builder verifies what comes back.

CELLAR serves the Formex 4 manifestation of a CELEX work by content negotiation: the package is a
zip whose act file has the root element CONS.ACT (the rest is the DOC manifest). Languages are
asked for with their ISO 639-2 code.
"""
from __future__ import annotations

import io
import zipfile
from urllib.error import URLError
from urllib.request import Request, urlopen

CONSOLIDATED_CELEX = "02016R0679-20160504"
CELLAR_URL = f"https://publications.europa.eu/resource/celex/{CONSOLIDATED_CELEX}"
TIMEOUT_S = 60

ISO_639_2 = {
    "bg": "bul", "cs": "ces", "da": "dan", "de": "deu", "el": "ell", "en": "eng", "es": "spa", "et": "est",
    "fi": "fin", "fr": "fra", "ga": "gle", "hr": "hrv", "hu": "hun", "it": "ita", "lt": "lit", "lv": "lav",
    "mt": "mlt", "nl": "nld", "pl": "pol", "pt": "por", "ro": "ron", "sk": "slk", "sl": "slv", "sv": "swe",
}


class DownloadError(RuntimeError):
    """The Publications Office could not be reached or sent something other than the act."""


def fetch_consolidated(lang: str) -> bytes:
    """The CONS.ACT XML of the consolidated GDPR in `lang` (ISO 639-1)."""
    request = Request(CELLAR_URL, headers={
        "Accept": "application/zip;mtype=fmx4",
        "Accept-Language": ISO_639_2[lang],
        "User-Agent": "gdpr-bot corpus builder (+https://eur-lex.europa.eu)",
    })
    try:
        with urlopen(request, timeout=TIMEOUT_S) as response:
            payload = response.read()
    except (URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DownloadError(f"could not download {CELLAR_URL} ({lang}): {reason}") from None
    return act_from_package(payload, lang)


def act_from_package(payload: bytes, lang: str) -> bytes:
    """Pick the act out of a Formex package; a bare XML answer is taken as the act itself."""
    if not zipfile.is_zipfile(io.BytesIO(payload)):
        if payload.lstrip().startswith(b"<"):
            return payload
        raise DownloadError(f"{CELLAR_URL} ({lang}) answered with neither a Formex zip nor XML")
    with zipfile.ZipFile(io.BytesIO(payload)) as package:
        for name in sorted(package.namelist()):
            if name.endswith(".xml"):
                member = package.read(name)
                if b"<CONS.ACT" in member[:4096]:
                    return member
    raise DownloadError(f"{CELLAR_URL} ({lang}): the Formex package holds no consolidated act (CONS.ACT)")
