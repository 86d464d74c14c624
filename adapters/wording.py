"""The bot's own words, in English: every sentence a platform shows that does not come from the Regulation
or a document. Each platform formats them (mrkdwn, Teams markdown, plain text); translating the bot means
translating this one file.
"""
from __future__ import annotations

from core.models import AbstentionReason, Notice
from core.references import Missing, NoSuchProvision
from core.service import EmptyQuestion, QuestionRejected, QuestionTooLong, RateLimited

DECLINED_HEADER = "The Regulation doesn't cover this"
RELATED_HEADER = "Related provisions (not an answer):"
DOCUMENTS_HEADER = "From your organisation's documents"
SOURCE_LINE = "Source: Regulation (EU) 2016/679, consolidated text incl. 2018 corrigendum · not legal advice"
OFFICIAL_LANGUAGES = ("Bulgarian, Croatian, Czech, Danish, Dutch, English, Estonian, Finnish, French, German, Greek, "
                      "Hungarian, Irish, Italian, Latvian, Lithuanian, Maltese, Polish, Portuguese, Romanian, Slovak, "
                      "Slovenian, Spanish or Swedish")

REASONS = {
    AbstentionReason.NOT_COVERED: "Nothing in the Regulation's articles answers this.",
    AbstentionReason.NATIONAL_LAW: "This asks for a national rule: the GDPR leaves it to each Member State's own law.",
    AbstentionReason.PUBLISHED_ELSEWHERE: ("This asks for a list or register the Regulation does not contain: the "
                                           "Commission, the Board or the supervisory authorities publish it."),
    AbstentionReason.CASE_LAW_OR_GUIDANCE: ("This asks what a court or a guideline said: the Regulation's articles "
                                            "contain neither case law nor guidance."),
    AbstentionReason.OTHER_LAW: "This asks about another law; I answer from the GDPR's articles only.",
    AbstentionReason.FACTS_AND_FIGURES: ("This asks for facts from the world (events, figures, who holds an office): "
                                         "the Regulation does not contain them."),
    AbstentionReason.PRODUCTS_AND_IT: "This asks about a product or an IT task, which the Regulation does not cover.",
    AbstentionReason.DRAFTING: ("I don't draft documents; ask me what the Regulation requires one to contain, and I'll "
                                "quote the provisions."),
    AbstentionReason.MISUSE: "I can't help with that.",
    AbstentionReason.OFF_TOPIC: "I only answer questions about the GDPR.",
    AbstentionReason.OPINION: "This asks for an opinion or a forecast, which the Regulation's text cannot give.",
    AbstentionReason.UNSUPPORTED_LANGUAGE: f"I answer in the EU's official languages: please ask in {OFFICIAL_LANGUAGES}.",
}
NOTICES = {
    Notice.LLM_UNAVAILABLE: "The language model was unavailable, so this answer quotes the Regulation directly.",
    Notice.LLM_UNVERIFIED: ("The language model's answer could not be checked against the Regulation, so this answer "
                            "quotes the Regulation directly."),
    Notice.ONLY_DOCUMENTS: "The Regulation doesn't cover this; what follows comes only from your organisation's documents.",
}


def no_such_provision(missing: NoSuchProvision) -> str:
    """"The GDPR has 99 articles: there is no Article 104." and the like."""
    ref = missing.ref
    if missing.missing is Missing.ARTICLE:
        return f"The GDPR has {missing.existing} articles: there is no Article {ref.article}."
    if missing.missing is Missing.PARAGRAPH:
        if missing.existing == 0:
            return f"Article {ref.article} has no numbered paragraphs, so there is no Article {ref.article}({ref.paragraph})."
        unit = "definitions" if ref.article == 4 else "paragraphs"
        return (f"Article {ref.article} has {missing.existing} {unit}: there is no Article "
                f"{ref.article}({ref.paragraph}).")
    if missing.existing == 0:
        return f"Article {ref.article}({ref.paragraph}) has no lettered points, so there is no point ({ref.point})."
    return (f"Article {ref.article}({ref.paragraph}) has {missing.existing} points: there is no point ({ref.point}).")


def declined(reason: AbstentionReason, missing: tuple[NoSuchProvision, ...] = ()) -> str:
    """The one line that says why an answer is declined."""
    if reason is AbstentionReason.NO_SUCH_PROVISION:
        return " ".join(no_such_provision(m) for m in missing)
    return REASONS[reason]


def rejected(exc: QuestionRejected, max_chars: int | None = None) -> str:
    """Why a question was not answered at all."""
    if isinstance(exc, RateLimited):
        return (f"You're asking faster than I can fairly answer everyone. Please try again in "
                f"{max(1, round(exc.retry_after_s))} s.")
    if isinstance(exc, QuestionTooLong):
        return f"That message is {exc.length} characters long; please keep questions under {exc.limit} characters."
    if isinstance(exc, EmptyQuestion):
        return "Please ask a question about the GDPR, e.g. “How quickly must a breach be reported?”"
    return "I can't answer that message."


def apology(reference: str, doing: str = "answering") -> str:
    return f"Sorry, something went wrong while {doing}. Please try again later (reference {reference})."


__all__ = ["DECLINED_HEADER", "DOCUMENTS_HEADER", "NOTICES", "REASONS", "RELATED_HEADER", "SOURCE_LINE", "apology",
           "declined", "no_such_provision", "rejected"]
