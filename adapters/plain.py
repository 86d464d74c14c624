"""An answer as plain text: what the terminal prints, and what a thread remembers the bot said."""
from __future__ import annotations

from adapters import wording
from core.models import Answer, Passage, Statement


def render_plain(answer: Answer) -> str:
    """Each statement with its verified quotes and links; a declined answer says why; notices last."""
    lines: list[str] = []
    if answer.abstention is not None:
        lines.append(f"{wording.DECLINED_HEADER}. {wording.declined(answer.abstention.reason, answer.abstention.missing)}")
    for statement in answer.statements:
        lines += _statement_lines(statement)
    if answer.related:
        lines.append(f"{wording.RELATED_HEADER} " + ", ".join(f"{p.label} <{p.url}>" for p in unique_related(answer)))
    lines += [f"({wording.NOTICES[n]})" for n in answer.notices]
    lines.append(wording.SOURCE_LINE)
    return "\n".join(lines)


def unique_related(answer: Answer) -> tuple[Passage, ...]:
    """The related provisions to show, each once (the first of a provision's passages), on every platform."""
    unique: dict[str, Passage] = {}
    for passage in answer.related:
        unique.setdefault(passage.source_id, passage)
    return tuple(unique.values())


def _statement_lines(statement: Statement) -> list[str]:
    lines = [] if statement.text is None else [statement.text]
    for citation in statement.citations:
        heading = f"{citation.label} — {citation.title}" if citation.title else citation.label
        if citation.kind == "document":
            heading += f" ({wording.DOCUMENTS_HEADER.lower()})"
        lines += [heading, f"    “{citation.quote}”"] + ([f"    {citation.url}"] if citation.url else [])
    return lines


__all__ = ["render_plain", "unique_related"]
