"""The typed things that travel between corpus, core and adapters."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from corpus.provision import Provision

SourceKind = Literal["regulation", "document"]
Mode = Literal["extractive", "llm"]


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


@dataclass(frozen=True)
class Citation:
    """A verified quote: `quote` occurs in the stored text of `source_id`."""

    source_id: str
    label: str
    quote: str
    url: str
    lang: str
    kind: SourceKind = "regulation"


@dataclass(frozen=True)
class Statement:
    """One sentence of the answer and the citations (indexes into Answer.citations) it rests on."""

    text: str
    citations: tuple[int, ...]


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
    question: str
    abstained: bool
    statements: tuple[Statement, ...]
    citations: tuple[Citation, ...]
    retrieved: tuple[Passage, ...]
    mode: Mode
    request_id: str
    related: tuple[Passage, ...] = ()
    notice: str | None = None  # e.g. "The language model was unavailable; extractive answer shown."
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Plain-text rendering: each statement with its verified quotes; related provisions last."""
        lines: list[str] = []
        for statement in self.statements:
            lines.append(statement.text)
            for i in statement.citations:
                citation = self.citations[i]
                lines.append(f"  > “{citation.quote}” ({citation.label})")
        if self.related:
            lines.append("Related provisions (not an answer): " + ", ".join(p.label for p in self.related))
        if self.notice:
            lines.append(self.notice)
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "request_id": self.request_id,
            "question": self.question,
            "abstained": self.abstained,
            "answer": self.text,
            "citations": [
                {"provision": c.label, "quote": c.quote, "url": c.url, "lang": c.lang, "kind": c.kind}
                for c in self.citations
            ],
            "related": [{"provision": p.label, "url": p.url} for p in self.related],
            "retrieved": [{"provision": p.label, "score": round(p.score, 4)} for p in self.retrieved],
            "mode": self.mode,
            "notice": self.notice,
            "timings_ms": {k: round(v, 1) for k, v in self.timings_ms.items()},
        }


__all__ = [
    "Answer", "Asker", "Citation", "Mode", "Passage", "Provision", "SourceKind", "Statement", "Turn",
]
