"""When the Regulation does not answer: decided on retrieval evidence, before any generation.

Fused scores cannot tell an adequacy-list question from a transfer question (they retrieve the same
provisions just as confidently), so the decision rests on two other kinds of evidence:
- what is asked: things the Regulation's text cannot contain by nature (another law, a court ruling,
  guidance or lists published elsewhere, events and figures after 2016, product or IT advice, small talk);
- how close the question is to anything in the Regulation at all: the best cosine similarity of an
  English question to a provision or its guide (the model is English, so other languages rely on the
  first kind alone).
A question that names a provision is always answered. Threshold and patterns were chosen with
`python -m evals.run_eval abstention` on the visible set (see README).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.retrieval import Retrieval

# "fine" as users write it in the official languages they ask in most.
_FINE = r"fined?|penalt\w*|bu(ß|ss)geld\w*|geldbu(ß|ss)e\w*|amendes?|multas?|boetes?|kar[ay]|sanzion\w*|sanci[oó]n\w*|coimas?|b[öo]ter"
_COMPANIES = (r"meta|facebook|google|amazon|tiktok|microsoft|apple|whatsapp|instagram|uber|clearview|h&m|"
              r"british airways|marriott|linkedin|twitter|spotify|yahoo|equifax")

# Each pattern is a kind of question, written for the kind, not for particular evaluation questions.
OUT_OF_SCOPE: dict[str, str] = {
    "another law": (
        r"\b(ccpa|cpra|california|hipaa|coppa|ferpa|glba|pipeda|lgpd|pipl|appi|popia|fadp|nfadp|dpdp|pdpa|"
        r"uk gdpr|data protection act 2018|e-?privacy (directive|regulation)|directive 2002/58|ai act|"
        r"artificial intelligence act|digital services act|digital markets act|nis ?2|dora|data act|"
        r"data governance act|cookie law|pci[- ]?dss|sox|sarbanes|iso ?27001|bdsg|ttdsg|lopdgdd|lopd|"
        r"loi informatique|codice (della )?privacy|uavg|privacy shield|data privacy framework|swiss|brazil\w*|"
        r"chin(a|ese) (law|privacy)|us states?|state privacy laws?|american law)\b"),
    "case law or guidance": (
        r"\b(schrems|cjeu|court of justice|ecj|judgment|judgement|ruling|ruled|case c-\d+|c-\d+/\d+|"
        r"landmark case|precedent|planet ?49|fashion id|google spain|urteil|arr[êe]t|sentencia|sentenza|"
        r"guidelines?|leitlinien|lignes directrices|wp ?29|article 29 working party)\b"),
    "a list or office published elsewhere": (
        r"\b(which|what|list( of)?) (countries|nations|states|jurisdictions)\b.*\b(adequa|approved|safe)|"
        r"\badequacy decisions? (list|so far|currently|exist)|\blist of (adequate|approved|certified)|"
        r"\bwho (is|are) (the )?(current|present|new)\b|\b(current|present) (chair|head|president|commissioner|supervisor)|"
        r"\b(phone|telephone) number of (the|a|an)\b|\b(e-?mail|postal) address of (the|a|an)\b|\bopening hours\b"),
    "events or figures": (
        r"\b20(1[7-9]|2\d)\b|\b(largest|biggest|highest|record|latest|recent|most recent|most) (gdpr )?"
        r"(fine|penalt|sanction)s?\b|\b(issued|imposed|handed out) the most\b|\bhow many (gdpr )?"
        r"(complaints|fines|breaches|cases)\b|\b(" + _FINE + r")\b.*\b(" + _COMPANIES + r")\b|\b(" + _COMPANIES +
        r")\b.*\b(" + _FINE + r")\b|\b(news|this year|last year|so far)\b|\bstill valid\b|"
        r"\btypically cost|\bhow much does .* cost\b"),
    "product or IT advice": (
        r"\b(which|what|best|recommend\w*|good) ([\w-]+ )?(tool|software|vendor|platform|cmp|consent management platform|"
        r"firewall|antivirus|product|library|plugin|provider|siem)s?\b.*\b(should|to use|to buy|do you recommend)|"
        r"\bhow (do|can|to) (i |we )?(configure|set up|install|reset|change) (my |our |the )?"
        r"(firewall|password|router|server|laptop|account|slack|teams|vpn)"),
    "small talk": (
        r"\b(weather|recipe|football|stock price|bitcoin|horoscope|movie|song|lyrics|capital of|"
        r"wetter|rezept|m[ée]t[ée]o|recette|receta|ricetta|weerbericht|pogoda|przepis|tempo amanh[ãa])\b"),
}
_OUT_OF_SCOPE = {kind: re.compile(pattern, re.IGNORECASE) for kind, pattern in OUT_OF_SCOPE.items()}


@dataclass(frozen=True)
class Decision:
    abstain: bool
    reason: str


class AbstentionPolicy:
    def __init__(self, min_similarity: float = 0.42):
        if not 0 <= min_similarity < 1:
            raise ValueError("min_similarity is a cosine similarity in [0, 1)")
        self.min_similarity = min_similarity

    def decide(self, question: str, retrieval: Retrieval) -> Decision:
        if retrieval.referenced:
            return Decision(False, "names a provision")
        for kind, pattern in _OUT_OF_SCOPE.items():
            if pattern.search(question):
                return Decision(True, f"asks about {kind}")
        if not retrieval.passages:
            return Decision(True, "nothing retrieved")
        if retrieval.similarity is not None and retrieval.similarity < self.min_similarity:
            return Decision(True, f"nothing in the Regulation is close ({retrieval.similarity:.2f} < {self.min_similarity})")
        return Decision(False, "close enough to the Regulation")
