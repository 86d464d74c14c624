"""The bot's own words, in English: every sentence a platform shows that does not come from the Regulation
or a document. Each platform formats them (mrkdwn, Teams markdown, plain text) and escapes what it fills in
(file names, user ids); translating the bot means translating this one file.

Code spans (`docs`) are written here because Slack, Teams and the terminal all show backticks as code.
"""
from __future__ import annotations

from core.models import AbstentionReason, Notice, Stage
from core.references import Missing, NoSuchProvision
from core.service import EmptyQuestion, QuestionRejected, QuestionTooLong, RateLimited

DECLINED_HEADER = "The Regulation doesn't cover this"
RELATED_HEADER = "Related provisions (not an answer):"
DOCUMENTS_HEADER = "From your organisation's documents"
REGULATION_HEADER = "GDPR (Regulation (EU) 2016/679)"
SOURCES_HEADER = "Sources"
# Teams shows these in the citation pop-up, where a keyword has at most 28 characters.
REGULATION_KEYWORD = "GDPR"
DOCUMENT_KEYWORD = "Organisation document"
SOURCE_LINE = "Source: Regulation (EU) 2016/679, consolidated text incl. 2018 corrigendum · not legal advice"
FEEDBACK_HELPFUL = "Helpful"
FEEDBACK_NOT_HELPFUL = "Not helpful"
FEEDBACK_HELPFUL_LABEL = "This answer was helpful"
FEEDBACK_NOT_HELPFUL_LABEL = "This answer was not helpful"
FEEDBACK_RECORDED = "Thanks for the feedback — it has been recorded."
FEEDBACK_NOT_FOUND = "I couldn't find that answer any more, so the feedback was not recorded."
SEARCHING = "Searching the Regulation…"
# Slack rotates these under the status while the bot works.
LOADING_MESSAGES = (
    "Searching the Regulation…",
    "Reading the provisions that apply…",
    "Checking every quote against the Regulation…",
    "Linking each provision to EUR-Lex…",
)
# The stages of an answer as Slack's plan and Teams' progress bar show them while the asker waits.
PLAN_TITLE = "Answering from the Regulation"
STAGES = {
    Stage.SEARCHING: "Searching the Regulation…",
    Stage.GENERATING: "Drafting the answer…",
    Stage.VERIFYING: "Checking the quotes against the Regulation…",
}
UPLOADS_DISABLED = "Document uploads are not enabled on this bot."
FILE_NAME_MISSING = "Which document? Use `forget <file name>`, e.g. `forget Retention policy.pdf`; `docs` lists them."
OFFICIAL_LANGUAGES = ("Bulgarian, Croatian, Czech, Danish, Dutch, English, Estonian, Finnish, French, German, Greek, "
                      "Hungarian, Irish, Italian, Latvian, Lithuanian, Maltese, Polish, Portuguese, Romanian, Slovak, "
                      "Slovenian, Spanish or Swedish")

HELP_LEAD = "I answer questions about the GDPR (Regulation (EU) 2016/679)."
HELP_ABOUT = ("Every answer quotes the Regulation and links to EUR-Lex, or says plainly that the Regulation doesn't "
              "cover the question. Not legal advice.")
# What each platform offers, one point each: the lead is shown first, in bold where the platform has bold.
HELP = {
    "slack": (
        "Mention me in a channel with your question: I answer in the thread, and later mentions in that thread keep "
        "its context.",
        "Send me a direct message.",
        "`/gdpr <question>` answers in the channel; `/gdpr -p <question>` answers only you.",
        "`/gdpr docs` (or a mention of me with `docs`) lists your organisation's documents, which answers in this "
        "workspace may quote.",
        "Admins add a PDF by sending it to me in a direct message, or by sharing it in a channel with a mention of "
        "me. `/gdpr forget <file name>` (or a mention with `forget <file name>`) removes one.",
        "`/gdpr help` shows this message.",
    ),
    "teams": (
        "Ask me in a personal chat, or mention me in a channel or group chat, e.g. \"When must a personal data breach "
        "be notified?\" Follow-up questions keep the conversation's context.",
        "Type `docs` to list your organisation's documents, which answers may quote.",
        "Admins add a PDF by sending it to me in a personal chat; `forget <file name>` removes one.",
        "`help` shows this message.",
    ),
    "cli": (
        "Type a question; follow-up questions keep the conversation's context.",
        "Your organisation's documents are added, listed and removed in Slack or Teams.",
        "An empty line or Ctrl-D quits.",
    ),
}
NO_DOCUMENTS = {
    "slack": ("No documents have been added in this workspace yet. Admins add a PDF by sending it to me in a direct "
              "message, or by sharing it in a channel with a mention of me."),
    "teams": "No documents have been added yet. Admins add a PDF by sending it to me in a personal chat.",
    "cli": "No documents have been added yet.",
}
NOT_DOWNLOADED = {
    "slack": ("I couldn't download {name} from Slack. Please share it again; if this keeps happening, the app may be "
              "missing the `files:read` scope."),
    "teams": "I couldn't download {name} from Teams. Please send it again.",
    "cli": "I couldn't read {name}.",
}

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
# What the bot was doing when something failed, for the apology ("while indexing Retention.pdf").
DOING = {
    "answering": "answering",
    "indexing": "indexing {subject}",
    "listing": "listing the documents",
    "forgetting": "removing {subject}",
    "feedback": "recording your feedback",
}
ADMIN_ACTIONS = {"add": "add documents", "remove": "remove documents"}


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


def rejected(exc: QuestionRejected) -> str:
    """Why a question was not answered at all."""
    if isinstance(exc, RateLimited):
        return (f"You're asking faster than I can fairly answer everyone. Please try again in "
                f"{max(1, round(exc.retry_after_s))} s.")
    if isinstance(exc, QuestionTooLong):
        return f"That message is {exc.length} characters long; please keep questions under {exc.limit} characters."
    if isinstance(exc, EmptyQuestion):
        return "Please ask a question about the GDPR, e.g. “How quickly must a breach be reported?”"
    return "I can't answer that message."


def apology(reference: str, task: str = "answering", subject: str = "") -> str:
    """`reference` and `subject` as the platform shows them (escaped, in code style…)."""
    doing = DOING[task].format(subject=subject)
    return f"Sorry, something went wrong while {doing}. Please try again later (reference {reference})."


def admins_only(action: str) -> str:
    return (f"Sorry, only the bot's admins can {ADMIN_ACTIONS[action]}. Ask one of them, or your IT team, to add you "
            "to GDPRBOT_ADMINS.")


def reading(name: str) -> str:
    return f"Reading {name}…"


def asked(who: str) -> str:
    return f"{who} asked:"


def counts(pages: int, passages: int) -> str:
    return f"{_plural(pages, 'page')}, {_plural(passages, 'passage')}"


def indexed(name: str, pages: int, passages: int) -> str:
    """The confirmation of an upload: "Indexed X.pdf: 3 pages, 5 passages"."""
    return f"Indexed {name}: {counts(pages, passages)}"


def forgotten(name: str) -> str:
    return f"Removed {name}."


def no_such_document(name: str) -> str:
    return f"No document named {name}."


def not_downloaded(name: str, platform: str) -> str:
    return NOT_DOWNLOADED[platform].format(name=name)


def documents_header(count: int, platform: str) -> str:
    where = " in this workspace" if platform == "slack" else ""
    return f"({count}), which answers{where} may quote:"


def document_line(name: str, pages: int, passages: int, uploader: str, date: str) -> str:
    return f"{name}: {counts(pages, passages)} · added by {uploader} on {date}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


__all__ = [
    "DECLINED_HEADER", "DOCUMENTS_HEADER", "FEEDBACK_NOT_FOUND", "FEEDBACK_RECORDED", "FILE_NAME_MISSING", "HELP",
    "HELP_ABOUT", "HELP_LEAD", "LOADING_MESSAGES", "NO_DOCUMENTS", "NOTICES", "PLAN_TITLE", "REASONS",
    "REGULATION_HEADER", "RELATED_HEADER", "SEARCHING", "SOURCE_LINE", "SOURCES_HEADER", "STAGES", "UPLOADS_DISABLED",
    "admins_only", "apology", "asked", "declined", "document_line", "documents_header", "forgotten", "indexed",
    "no_such_document", "no_such_provision", "not_downloaded", "reading", "rejected",
]
