"""One conversation for every platform: an incoming message in, typed reply intents out.

Slack, Teams and the terminal only turn what arrives into a `Message`, and render and send the `Reply` values
(`adapters.intents`) this hands their `Channel`. What a message means (`help`, `docs`, `forget <file name>`, a
shared file, a question), who may change the documents, how the core is called, how a failure is reported and
what counts as a redelivery are decided here once, so that the platforms cannot drift apart.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TypeVar, Union

from adapters.intents import (
    AdminAction,
    AdminsOnly,
    Answered,
    Attachment,
    Channel,
    Declined,
    DocumentList,
    DownloadFailed,
    Failed,
    FeedbackNotFound,
    FeedbackRecorded,
    FileNameMissing,
    Forgotten,
    Help,
    Indexed,
    Message,
    NoSuchDocument,
    NotDownloaded,
    Rejected,
    Reply,
    ShowProgress,
    Task,
    UploadRefused,
    UploadsDisabled,
)
from adapters.plain import render_plain
from core.library import DocumentRejected, Documents, NotAllowed, too_large
from core.models import Asker, Stage
from core.service import AnswerService, QuestionRejected
from core.storage import DeliveryClaims, SentAnswers, ThreadMemory
from core.storage.memory import Deliveries, MemorySentAnswers, MemoryThreads

logger = logging.getLogger(__name__)

# The core is synchronous and CPU-bound, so it runs on threads of its own: aiohttp resolves hostnames on the
# loop's default executor, which a backlog of questions must not starve.
CORE_THREADS = 4
T = TypeVar("T")


# --- what a message asks for -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShowHelp:
    pass


@dataclass(frozen=True)
class ListDocuments:
    pass


@dataclass(frozen=True)
class ForgetDocument:
    filename: str  # "" when the command names none


@dataclass(frozen=True)
class AskQuestion:
    question: str


Command = Union[ShowHelp, ListDocuments, ForgetDocument, AskQuestion]


def parse(text: str) -> Command:
    """The first word decides, wherever it was typed (`/gdpr docs x`, `@bot docs x`, a DM): `help`, `docs` and
    `forget <file name>` are commands, an empty message asks for help, anything else is a question."""
    words = text.split(maxsplit=1)
    if not words:
        return ShowHelp()
    verb = words[0].lower()
    if verb == "help":
        return ShowHelp()
    if verb == "docs":
        return ListDocuments()
    if verb == "forget":
        return ForgetDocument(words[1].strip() if len(words) > 1 else "")
    return AskQuestion(text.strip())


def request_id(delivery: str) -> str:
    """The request id of the answer to a delivered message: the same on every delivery and every replica, so that an
    answer made again (the replica that made it died before posting it) replaces the first in the audit trail."""
    return hashlib.sha256(delivery.encode()).hexdigest()[:16]


class _Stages:
    """The stages the core reports on its thread, shown on the channel in the order they began."""

    def __init__(self, show: ShowProgress):
        self._show = show
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Stage | None] = asyncio.Queue()
        self._showing = self._loop.create_task(self._show_in_order())

    def report(self, stage: Stage) -> None:
        """The core's progress callback, called on a core thread: it must not wait for the platform."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, stage)

    async def shown(self) -> None:
        """Returns once every stage reported so far has been shown (the core has returned: no more come)."""
        self._queue.put_nowait(None)
        await self._showing

    async def _show_in_order(self) -> None:
        while (stage := await self._queue.get()) is not None:
            try:
                await self._show(stage)
            except Exception:  # progress is a courtesy: the answer still goes out
                logger.exception("Showing the %s stage failed", stage.value)


class Conversation:
    """Turns messages into replies. Without `documents`, shared files and the document commands are answered that
    uploads are not enabled.

    What it keeps beyond one message comes from `core.storage` (in memory by default, which suits the terminal):
    `deliveries` (the redelivery rule), `thread_memory` (for platforms that keep no history) and `sent_answers`
    (the answer each sent message carries, for platforms whose feedback buttons report only the message)."""

    def __init__(self, service: AnswerService, documents: Documents | None = None, *, threads: int = CORE_THREADS,
                 deliveries: DeliveryClaims | None = None, thread_memory: ThreadMemory | None = None,
                 sent_answers: SentAnswers | None = None):
        self._service = service
        self._documents = documents
        self.deliveries = deliveries or Deliveries()
        self.sent_answers = sent_answers or MemorySentAnswers()
        self._memory = thread_memory or MemoryThreads()
        self._core = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gdpr-core")

    async def handle(self, message: Message, channel: Channel) -> None:
        """Reply to `message` on `channel`: files are indexed, else the text is a command or a question."""
        if message.attachments:
            for attachment in message.attachments:
                await self._receive(attachment, message.asker, channel)
            return
        command = parse(message.text)
        if isinstance(command, AskQuestion):
            async with channel.working() as show:
                await channel.send(await self.answer(message, command.question, show))
            return
        await channel.send(await self._command(command, message.asker))

    async def answer(self, message: Message, question: str | None = None, show: ShowProgress | None = None) -> Reply:
        """`message` answered as `question`, by default its whole text whatever the first word (a line of a batch
        is always a question); `show` is told each stage of the answer as it begins."""
        question = message.text if question is None else question
        return await self._reply(Task.ANSWERING, "", self._ask(message, question, show))

    async def feedback(self, request_id: str, *, helpful: bool, asker: Asker) -> Reply:
        return await self._reply(Task.FEEDBACK, request_id, self._record_feedback(request_id, helpful, asker))

    async def _ask(self, message: Message, question: str, show: ShowProgress | None) -> Reply:
        if message.history:
            history = await message.history()
        else:
            history = await self._run(self._memory.history, message.key)
        stages = _Stages(show) if show is not None else None
        try:
            answer = await self._run(self._service.ask, question, history=tuple(history), asker=message.asker,
                                     request_id=request_id(message.delivery) if message.delivery else None,
                                     progress=stages.report if stages else None)
        except QuestionRejected as exc:
            return Rejected(exc)
        finally:
            if stages is not None:
                await stages.shown()
        if message.history is None:
            # Remembered before it is sent, so that a follow-up arriving right after the answer already sees it.
            await self._run(self._memory.remember, message.key, question, render_plain(answer))
        return Declined(answer, message.private) if answer.abstained else Answered(answer, message.private)

    async def _record_feedback(self, request_id: str, helpful: bool, asker: Asker) -> Reply:
        known = await self._run(self._service.record_feedback, request_id, helpful=helpful, asker=asker)
        return FeedbackRecorded() if known else FeedbackNotFound()

    async def _command(self, command: Command, asker: Asker) -> Reply:
        if isinstance(command, ShowHelp):
            return Help()
        if self._documents is None:
            return UploadsDisabled()
        if isinstance(command, ListDocuments):
            return await self._reply(Task.LISTING, "", self._list(self._documents, asker))
        assert isinstance(command, ForgetDocument)
        if not command.filename:
            return FileNameMissing()
        return await self._reply(Task.FORGETTING, command.filename, self._forget(self._documents, command, asker))

    async def _list(self, documents: Documents, asker: Asker) -> Reply:
        return DocumentList(tuple(await self._run(documents.list, asker)))

    async def _forget(self, documents: Documents, command: ForgetDocument, asker: Asker) -> Reply:
        if not documents.is_admin(asker):
            return AdminsOnly(AdminAction.REMOVE)
        try:
            removed = await self._run(documents.forget, command.filename, asker=asker)
        except NotAllowed:
            return AdminsOnly(AdminAction.REMOVE)
        return Forgotten(removed) if removed is not None else NoSuchDocument(command.filename)

    async def _receive(self, attachment: Attachment, asker: Asker, channel: Channel) -> None:
        if self._documents is None:
            await channel.send(UploadsDisabled())
            return
        async with channel.working(attachment.name):
            work = self._index(self._documents, attachment, asker)
            await channel.send(await self._reply(Task.INDEXING, attachment.name, work))

    async def _index(self, documents: Documents, attachment: Attachment, asker: Asker) -> Reply:
        # Decided before anything is downloaded: a non-admin's file is never fetched.
        if not documents.is_admin(asker):
            return AdminsOnly(AdminAction.ADD)
        if attachment.size is not None and attachment.size > documents.max_bytes:
            return UploadRefused(attachment.name, too_large(attachment.name, documents.max_bytes))
        try:
            data = await attachment.fetch(documents.max_bytes + 1)  # one byte over is enough for the core to refuse
        except DownloadFailed as exc:
            logger.warning("Downloading %s failed: %s", attachment.name, exc)
            return NotDownloaded(attachment.name)
        try:
            return Indexed(await self._run(documents.add, data, attachment.name, asker=asker))
        except NotAllowed:
            return AdminsOnly(AdminAction.ADD)
        except DocumentRejected as exc:
            return UploadRefused(attachment.name, exc.reason)

    async def _reply(self, task: Task, subject: str, work: Awaitable[Reply]) -> Reply:
        """The one turn-error path: whatever fails becomes a Failed reply, its traceback logged under the reference
        the user is shown."""
        try:
            return await work
        except Exception:
            reference = uuid.uuid4().hex[:8]
            logger.exception("Failed while %s %s(reference %s)", task.value, f"{subject} " if subject else "", reference)
            return Failed(reference, task, subject)

    async def _run(self, function: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._core, partial(function, *args, **kwargs))


__all__ = ["AskQuestion", "Command", "Conversation", "Deliveries", "ForgetDocument", "ListDocuments", "ShowHelp",
           "parse", "request_id"]
