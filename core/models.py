"""The typed things that travel between corpus, core and adapters."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from core.references import NoSuchProvision
from corpus.provision import Provision

SourceKind = Literal["regulation", "document"]


@dataclass(frozen=True)
class Passage:
    """A retrieved unit with its score: a provision, or a page chunk of an uploaded document."""

    source_id: str  # provision id ("Art. 33(1)") or document chunk id
    label: str  # what the user sees: "Art. 33(1)" or "Records.pdf, p. 7"
    text: str
    url: str
    lang: str
    score: float
    kind: SourceKind = "regulation"
    title: str = ""  # the provision's heading, or the document section's heading ("" if none)


@dataclass(frozen=True)
class Citation:
    """A verified quote: `quote` occurs in the stored text of `source_id`; label, title and link come from the
    corpus or the document library, never from a model."""

    source_id: str
    label: str  # "Art. 33(1)", "Retention.pdf, p. 2"
    quote: str
    url: str
    lang: str
    kind: SourceKind = "regulation"
    title: str = ""  # the provision's heading, or the document section's heading ("" if none)


@dataclass(frozen=True)
class Statement:
    """One point of the answer and the verified citations it rests on. `text` is the model's own sentence,
    shown only once verified against its quote; None where the quote speaks for itself (extractive answers,
    or a model sentence that could not be checked)."""

    text: str | None
    citations: tuple[Citation, ...]


class AbstentionReason(Enum):
    """Why an answer is declined: a value each adapter words in its own way."""

    NO_SUCH_PROVISION = "no-such-provision"  # names an article, paragraph or point the Regulation does not have
    NOT_COVERED = "not-covered"  # nothing in the Regulation answers it (the generic reason)
    NATIONAL_LAW = "national-law"  # a Member State's own rule
    PUBLISHED_ELSEWHERE = "published-elsewhere"  # a list or register the Commission, Board or authorities keep
    CASE_LAW_OR_GUIDANCE = "case-law-or-guidance"
    OTHER_LAW = "other-law"
    FACTS_AND_FIGURES = "facts-and-figures"  # events, statistics, who holds an office
    PRODUCTS_AND_IT = "products-and-it"
    DRAFTING = "drafting"
    MISUSE = "misuse"
    OFF_TOPIC = "off-topic"
    OPINION = "opinion"
    UNSUPPORTED_LANGUAGE = "unsupported-language"  # written in a language the Regulation is not published in


@dataclass(frozen=True)
class Abstention:
    reason: AbstentionReason
    missing: tuple[NoSuchProvision, ...] = ()  # for NO_SUCH_PROVISION: each reference and what exists instead


class Notice(Enum):
    """Something the asker should know about how the answer was made."""

    LLM_UNAVAILABLE = "llm-unavailable"  # the model failed: the Regulation is quoted directly
    LLM_UNVERIFIED = "llm-unverified"  # none of the model's statements survived verification: quoted directly
    ONLY_DOCUMENTS = "only-documents"  # the Regulation does not cover it: what follows is the organisation's


class Stage(Enum):
    """How far an answer has got, for the platforms that show it while the asker waits (each words it its own way)."""

    SEARCHING = "searching"  # the Regulation, and the workspace's documents, are searched
    GENERATING = "generating"  # an answer is drafted from what was found
    VERIFYING = "verifying"  # every quote of the draft is looked for in the stored text it cites


class Mode(Enum):
    EXTRACTIVE = "extractive"
    LLM = "llm"


@dataclass(frozen=True)
class Turn:
    """An earlier message of the same thread."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class Asker:
    """Who asked, where: recorded in the audit trail and used for fair-use limits and document scope."""

    platform: str = "cli"  # "slack" | "teams" | "cli"
    workspace: str | None = None
    channel: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class Answer:
    """What the core returns: values only, no wording. `abstention` set: declined, and why."""

    question: str
    statements: tuple[Statement, ...]
    retrieved: tuple[Passage, ...]
    mode: Mode
    request_id: str
    abstention: Abstention | None = None
    related: tuple[Passage, ...] = ()  # shown with a declined answer, as related provisions (not an answer)
    notices: tuple[Notice, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def abstained(self) -> bool:
        return self.abstention is not None

    @property
    def citations(self) -> tuple[Citation, ...]:
        """Every citation of the answer, once, in the order the statements cite them."""
        return tuple(dict.fromkeys(c for s in self.statements for c in s.citations))


__all__ = [
    "Abstention", "AbstentionReason", "Answer", "Asker", "Citation", "Mode", "Notice", "Passage", "Provision",
    "SourceKind", "Stage", "Statement", "Turn",
]
