"""Lay wording → the Regulation's wording.

Users say "we got hacked" and "the regulator"; the Regulation says "personal data breach" and
"supervisory authority". BM25 cannot bridge that gap on its own, so a matched lay term appends the
Regulation's terms to the query. The table is general GDPR vocabulary (what a DPO would translate in
their head), not phrasing taken from evaluation questions; each entry is tested in tests/test_vocabulary.py.
"""
from __future__ import annotations

import re

# (lay pattern, Regulation terms). Patterns are matched on the lower-cased question at word starts.
ENGLISH: tuple[tuple[str, str], ...] = (
    (r"hack|leak|breach|stolen|ransomware|cyber ?attack|lost (a |the |our )?(laptop|usb|phone|device)|compromis|intrusion|exposed",
     "personal data breach notify supervisory authority"),
    (r"regulator|watchdog|\bdpa\b|data protection authorit|\bico\b|\bcnil\b|authorit",
     "supervisory authority"),
    (r"delet|eras|wipe|remove (my|their|his|her|our) data|forget|purge", "erasure right to erasure"),
    (r"correct|fix (my|their|wrong)|inaccurate|incorrect|wrong|outdated|typo", "rectification inaccurate"),
    (r"copy of (my|their|his|her|the) data|what data (do )?(you|they|we) (have|hold)|see (my|their) data|access request|\bdsar\b|\bsar\b",
     "right of access data subject obtain confirmation copy"),
    (r"download (my|their)|export (my|their)|move (my|their) data|switch provider|take (my|their) data|portab",
     "data portability structured commonly used machine-readable format transmit"),
    (r"algorithm|automat|\bai\b|machine learning|computer decides|robot|credit scor|scoring",
     "automated individual decision-making profiling solely automated processing"),
    (r"profil", "profiling"),
    (r"complain|report (them|a company|an organisation)", "lodge a complaint supervisory authority"),
    (r"sue|compensat|damages|lawsuit|court", "compensation damage judicial remedy"),
    (r"vendor|supplier|contractor|outsourc|service provider|cloud provider|third[- ]party provider|saas|hosting",
     "processor contract processing on behalf of the controller"),
    (r"sub-?contract|sub-?processor", "another processor sub-processor engage"),
    (r"\bfine|penalt|sanction|how much (can|could|will)|maximum (fine|penalty)|get fined",
     "administrative fines"),
    (r"consent|opt[- ]?in|permission|agree|tick ?box|checkbox", "consent"),
    (r"withdraw|revoke|take back|opt[- ]?out|change (my|their) mind", "withdraw consent"),
    (r"object|stop (using|processing)|direct marketing|marketing|newsletter|spam",
     "right to object direct marketing"),
    (r"child|kid|minor|teen|under 1[3-8]|parent", "child parental responsibility information society services"),
    (r"health|medical|patient|biometric|genetic|religio|ethnic|racial|sexual|trade union|political|fingerprint|face recognition|facial",
     "special categories of personal data health genetic biometric"),
    (r"criminal|conviction|offence|police record|background check", "criminal convictions and offences"),
    (r"abroad|outside the eu|outside europe|third countr|transfer|\busa\b|united states|china|india|overseas",
     "transfer third country international organisation adequacy appropriate safeguards"),
    (r"standard contractual|\bsccs?\b|model clauses", "standard data protection clauses"),
    (r"binding corporate|\bbcrs?\b|group of companies|intra-?group", "binding corporate rules group of undertakings"),
    (r"\bdpo\b|privacy officer|data protection officer", "data protection officer designation"),
    (r"\bdpia\b|impact assessment|\bpia\b|risk assessment|high risk", "data protection impact assessment high risk"),
    (r"privacy notice|privacy policy|tell (people|users|customers|them)|inform|transparen",
     "information to be provided to the data subject transparent"),
    (r"encrypt|pseudonym|secur|password|firewall|protect (the )?data", "security of processing appropriate technical and organisational measures encryption pseudonymisation"),
    (r"record(s)? of|inventory|log of processing|documentation|\bropa\b", "records of processing activities"),
    (r"how long|retention|retain|keep (the |their |personal )?data|storage period|store data",
     "storage limitation kept no longer than necessary"),
    (r"legitimate interest|legal basis|lawful basis|allowed to process|legal ground|justify", "lawfulness of processing legitimate interests"),
    (r"minimi|only (the )?data (we|you) need|collect less|too much data", "data minimisation adequate relevant limited"),
    (r"purpose|reuse|re-use|secondary use|other use", "purpose limitation further processing compatible"),
    (r"cctv|camera|video surveillance|public (space|area)", "systematic monitoring publicly accessible area"),
    (r"track|monitor|surveil|cookie|online behaviour|behavioral|behavioural", "monitoring of behaviour"),
    (r"journalis|press|media|blog|freedom of expression", "freedom of expression and information journalistic purposes"),
    (r"employ|staff|worker|hr\b|human resources|workplace|job applicant", "employment context"),
    (r"research|scientific|statistic|archiv|historical", "archiving purposes in the public interest scientific or historical research statistical purposes"),
    (r"church|religious (body|bodies|association)", "churches and religious associations"),
    (r"social security|national id|identification number|passport number|ssn", "national identification number"),
    (r"joint|together with another (company|controller)|co-?controller", "joint controllers"),
    (r"representative|not established in the (eu|union)|non-eu (company|business)|outside the eu.*(company|business)",
     "representative of controllers or processors not established in the Union"),
    (r"certif|seal|trust ?mark", "certification mechanisms data protection seals and marks"),
    (r"code of conduct|industry code", "codes of conduct"),
    (r"european data protection board|\bedpb\b", "Board European Data Protection Board"),
    (r"lead authority|one[- ]stop|main establishment|cross[- ]border", "lead supervisory authority main establishment cross-border processing"),
    (r"anonymi|anonymous", "anonymous information identifiable natural person"),
    (r"territor|apply to (us|my company|companies)|does (the )?gdpr apply|scope", "territorial scope material scope"),
    (r"household|personal use|private use|purely personal", "purely personal or household activity"),
    (r"restrict|freeze|pause (the )?processing|block", "restriction of processing"),
    (r"dead|deceased", "natural persons"),
    (r"by design|by default|privacy by", "data protection by design and by default"),
    (r"identity|verify (who|the identity)|prove who", "identity of the data subject reasonable doubts additional information"),
    (r"respond|reply|deadline|how (long|quickly|fast|soon)|within (a|one) month|time limit|days",
     "without undue delay within one month"),
    (r"tell (the )?(customers|users|people|individuals|affected)|notify (the )?(customers|users|individuals|affected)",
     "communication of a personal data breach to the data subject"),
    (r"powers? of|investigat|audit|inspect", "investigative powers corrective powers"),
    (r"independen", "independence"),
    (r"free of charge|charge (a )?fee|cost money|have to pay", "free of charge reasonable fee"),
)

_COMPILED = tuple((re.compile(r"(?<![\w])(?:" + pattern + ")", re.IGNORECASE), terms) for pattern, terms in ENGLISH)


def expand(question: str) -> str:
    """The Regulation's terms for the lay terms in `question` (empty when none match)."""
    seen: list[str] = []
    for pattern, terms in _COMPILED:
        if pattern.search(question) and terms not in seen:
            seen.append(terms)
    return " ".join(seen)
