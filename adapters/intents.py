"""The values a conversation takes and gives: the `Message` a platform makes of what arrived, and the `Reply`
intents it renders and sends through its `Channel`. No wording: each platform words a reply its own way, with
`adapters.wording`."""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, Union

from adapters.plain import unique_related
from core.documents import DocumentRecord
from core.models import AbstentionReason, Answer, Asker, Passage, Stage, Turn
from core.references import NoSuchProvision
from core.service import QuestionRejected

History = Callable[[], Awaitable[Sequence[Turn]]]
ShowProgress = Callable[[Stage], Awaitable[None]]


class DownloadFailed(Exception):
    """An attachment's file could not be fetched."""


@dataclass(frozen=True)
class Attachment:
    """A file sent with a message. `fetch(limit)` downloads at most `limit` bytes (raising DownloadFailed); it is
    called only once the sender may add documents and the announced size is within the limit."""

    name: str
    size: int | None
    fetch: Callable[[int], Awaitable[bytes]]


@dataclass(frozen=True)
class Message:
    text: str  # as typed, without the platform's markup or the bot's own mention
    asker: Asker
    key: str  # the thread: where the conversation remembers earlier turns when the platform keeps none
    history: History | None = None  # the platform's own record of the thread's earlier turns
    attachments: tuple[Attachment, ...] = ()
    private: bool = False  # the answer is for the asker's eyes only (Slack's `/gdpr -p`)
    delivery: str | None = None  # the platform's id of this message, the same on every redelivery of it


async def no_history() -> tuple[Turn, ...]:
    """For messages that stand alone (slash commands, lines of a batch)."""
    return ()


# --- what the bot replies -------------------------------------------------------------------------------------------


class Task(Enum):
    """What the bot was doing when it failed."""

    ANSWERING = "answering"
    INDEXING = "indexing"
    LISTING = "listing"
    FORGETTING = "forgetting"
    FEEDBACK = "feedback"


class AdminAction(Enum):
    ADD = "add"
    REMOVE = "remove"


@dataclass(frozen=True)
class Answered:
    answer: Answer
    private: bool = False


@dataclass(frozen=True)
class Declined:
    answer: Answer  # with its abstention; its request id takes feedback like any answer
    private: bool = False

    @property
    def reason(self) -> AbstentionReason:
        assert self.answer.abstention is not None
        return self.answer.abstention.reason

    @property
    def missing(self) -> tuple[NoSuchProvision, ...]:
        assert self.answer.abstention is not None
        return self.answer.abstention.missing

    @property
    def related(self) -> tuple[Passage, ...]:
        return unique_related(self.answer)


@dataclass(frozen=True)
class Rejected:
    reason: QuestionRejected  # EmptyQuestion, RateLimited, QuestionTooLong: values each platform words


@dataclass(frozen=True)
class Failed:
    reference: str  # shown to the user; the traceback is logged under it
    task: Task
    subject: str = ""  # what it was about: the file being indexed or removed, the answer given feedback


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class DocumentList:
    records: tuple[DocumentRecord, ...]  # oldest first


@dataclass(frozen=True)
class Forgotten:
    record: DocumentRecord


@dataclass(frozen=True)
class NoSuchDocument:
    filename: str


@dataclass(frozen=True)
class FileNameMissing:
    pass


@dataclass(frozen=True)
class UploadsDisabled:
    pass


@dataclass(frozen=True)
class AdminsOnly:
    action: AdminAction


@dataclass(frozen=True)
class Indexed:
    record: DocumentRecord


@dataclass(frozen=True)
class UploadRefused:
    filename: str
    reason: str  # the ingestion's own reason ("X.pdf is password-protected; …"): shown as is, escaped


@dataclass(frozen=True)
class NotDownloaded:
    filename: str


@dataclass(frozen=True)
class FeedbackRecorded:
    pass


@dataclass(frozen=True)
class FeedbackNotFound:
    pass


Reply = Union[Answered, Declined, Rejected, Failed, Help, DocumentList, Forgotten, NoSuchDocument, FileNameMissing,
              UploadsDisabled, AdminsOnly, Indexed, UploadRefused, NotDownloaded, FeedbackRecorded, FeedbackNotFound]


class Channel(Protocol):
    """Where the replies to one message go, as the platform delivers them."""

    async def send(self, reply: Reply) -> None: ...

    def working(self, file_name: str | None = None) -> AbstractAsyncContextManager[ShowProgress | None]:
        """Shows that the bot is searching the Regulation (or reading `file_name`) while the block runs. Yields
        where each stage of an answer is shown as it begins, or None where the platform shows no stages."""
        ...


__all__ = [
    "AdminAction", "AdminsOnly", "Answered", "Attachment", "Channel", "Declined", "DocumentList", "DownloadFailed",
    "Failed", "FeedbackNotFound", "FeedbackRecorded", "FileNameMissing", "Forgotten", "Help", "History", "Indexed",
    "Message", "NoSuchDocument", "NotDownloaded", "Rejected", "Reply", "ShowProgress", "Task", "UploadRefused",
    "UploadsDisabled", "no_history",
]
