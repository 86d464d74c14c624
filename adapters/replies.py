"""The one-line replies every platform words alike: only how each escapes what users and PDFs wrote, shows a
reference and marks a warning differs."""
from __future__ import annotations

from collections.abc import Callable

from adapters import wording
from adapters.intents import (
    AdminsOnly,
    Failed,
    FeedbackNotFound,
    FeedbackRecorded,
    FileNameMissing,
    Forgotten,
    Indexed,
    NoSuchDocument,
    NotDownloaded,
    Rejected,
    Reply,
    UploadRefused,
    UploadsDisabled,
)


def _as_typed(text: str) -> str:
    return text


def one_line_reply(reply: Reply, platform: str, *, escape: Callable[[str], str] = _as_typed,
                   code: Callable[[str], str] = _as_typed, warning: str = "") -> str:
    """`reply` in the platform's markup: `escape` for what users and PDFs wrote (and the bot's own sentences that
    quote them), `code` for an error reference, `warning` before what went wrong."""
    match reply:
        case Rejected(reason=reason):
            return escape(wording.rejected(reason))
        case Failed(reference=reference, task=task, subject=subject):
            return warning + wording.apology(code(reference), task.value, escape(subject))
        case Forgotten(record=record):
            return wording.forgotten(escape(record.filename))
        case NoSuchDocument(filename=filename):
            return wording.no_such_document(escape(filename))
        case AdminsOnly(action=action):
            return wording.admins_only(action.value)
        case Indexed(record=record):
            return wording.indexed(escape(record.filename), record.pages, record.passages)
        case UploadRefused(reason=reason):
            return escape(reason)
        case NotDownloaded(filename=filename):
            return warning + wording.not_downloaded(escape(filename), platform)
        case FileNameMissing():
            return wording.FILE_NAME_MISSING
        case UploadsDisabled():
            return wording.UPLOADS_DISABLED
        case FeedbackRecorded():
            return wording.FEEDBACK_RECORDED
        case FeedbackNotFound():
            return wording.FEEDBACK_NOT_FOUND
    raise TypeError(f"not a one-line reply: {reply!r}")


__all__ = ["one_line_reply"]
