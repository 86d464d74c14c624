"""The Bot Framework activity handler: Teams activities in, conversation messages out, rendered replies back.

Every Bot Framework type the conversation's messages and replies meet stays here and in `app`, so moving to
another SDK touches only this package.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from botbuilder.core import ActivityHandler, CardFactory, InvokeResponse, TurnContext
from botbuilder.schema import Activity, ActivityTypes, Entity, ResourceResponse, TextFormatTypes
from botframework.connector import Channels

from adapters import wording
from adapters.conversation import Conversation
from adapters.intents import Answered, Attachment, Declined, Failed, FeedbackNotFound, Message, Reply, ShowProgress
from adapters.teams.render import TeamsMessage, fallback_text, render
from adapters.web import UrlPolicy, download
from core.models import Asker, Stage
from core.storage import SentAnswers

logger = logging.getLogger(__name__)

FEEDBACK_INVOKE = "message/submitAction"
# Teams renders the citation entity in personal and group chats but not in channels.
NATIVE_CITATION_CONVERSATIONS = frozenset({"personal", "groupChat"})
FILE_DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"
# Teams streams bot messages in one-on-one chats only.
STREAMING_CONVERSATIONS = frozenset({"personal"})


class GdprTeamsBot(ActivityHandler):
    """Answers messages in channels, group chats and personal chats; records feedback-button clicks; indexes the
    files sent to it."""

    def __init__(self, conversation: Conversation, file_urls: UrlPolicy, *, streaming: bool = False) -> None:
        """`file_urls`: where files may be downloaded from (`adapters.teams.hosts`). `streaming`: answers in
        personal chats show their stages as Teams' informative stream updates (LLM mode, where they take seconds)."""
        self._conversation = conversation
        self._answers = conversation.sent_answers
        self._file_urls = file_urls
        self._streaming = streaming
        # The chats with a stream in progress: Teams allows one per chat at a time.
        self._streaming_chats: set[str] = set()

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        key = f"teams:{activity.conversation.id}"
        if activity.id and not self._conversation.deliveries.claim(f"{key}:{activity.id}"):
            return  # the connector delivered it again
        message = Message(_question_text(activity), _asker(activity), key,
                          attachments=_attachments(activity, self._file_urls))
        streams = self._streaming_chats if self._streaming and _can_stream(activity) else None
        await self._conversation.handle(message, _TurnReplies(turn_context, self._answers, streams))

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse | None:
        activity = turn_context.activity
        if activity.name != FEEDBACK_INVOKE:
            return await super().on_invoke_activity(turn_context)
        value = activity.value if isinstance(activity.value, dict) else {}
        action_value = value.get("actionValue") if isinstance(value.get("actionValue"), dict) else {}
        reaction = action_value.get("reaction")
        if value.get("actionName") != "feedback" or reaction not in ("like", "dislike"):
            return InvokeResponse(status=400)
        request_id = self._answers.get(activity.reply_to_id or "")
        if request_id is None:
            # Sent answers are kept for a month (core.storage); an older click cannot be attributed.
            logger.warning("Feedback on unknown Teams message %r not recorded", activity.reply_to_id)
            return InvokeResponse(status=200)
        reply = await self._conversation.feedback(request_id, helpful=reaction == "like", asker=_asker(activity))
        if isinstance(reply, FeedbackNotFound):
            logger.warning("Feedback on answer %s not recorded: no such answer", request_id)
        return InvokeResponse(status=500 if isinstance(reply, Failed) else 200)


class _TurnReplies:
    """The replies to one activity, sent in its conversation (in a channel, inside the message's thread). With
    `streams` (the chats streaming now), an answer is streamed unless its chat already has a stream."""

    def __init__(self, turn_context: TurnContext, answers: SentAnswers, streams: set[str] | None = None) -> None:
        self._turn = turn_context
        self._answers = answers
        self._streams = streams
        self._stream: _Stream | None = None

    async def send(self, reply: Reply) -> None:
        message = render(reply, with_card=not _shows_native_citations(self._turn.activity))
        # Whatever the reply, it ends an open stream: Teams shows the final message in the stream's place.
        final = self._stream.final_entity() if self._stream is not None and self._stream.started else None
        if not isinstance(reply, (Answered, Declined)):
            await self._turn.send_activity(_activity(message, final))
            return
        try:
            sent = await self._turn.send_activity(_activity(message, final))
        except Exception:
            # Teams refuses a whole message over one field it rejects (a citation, the card); markdown alone still
            # carries every statement with its verbatim quotes.
            logger.exception("Sending answer %s failed; retrying as plain text", reply.answer.request_id)
            sent = await self._turn.send_activity(_activity(TeamsMessage(fallback_text(reply)), final))
        self._remember(sent, reply.answer.request_id)

    def _remember(self, sent: ResourceResponse | None, request_id: str) -> None:
        if sent is not None and sent.id:
            self._answers.put(sent.id, request_id)

    @asynccontextmanager
    async def working(self, file_name: str | None = None) -> AsyncIterator[ShowProgress | None]:
        chat = self._turn.activity.conversation.id
        if file_name is not None or self._streams is None or chat in self._streams:
            # Sent explicitly: the SDK's ShowTypingMiddleware waits 0.5 s first, so fast answers got none.
            await self._turn.send_activity(Activity(type=ActivityTypes.typing))
            yield None
            return
        self._streams.add(chat)
        try:
            self._stream = _Stream(self._turn)
            # Shown at once, as the typing indicator is otherwise: the core reports its first stage only once it runs.
            await self._stream.show(Stage.SEARCHING)
            yield self._stream.show
        finally:
            self._streams.discard(chat)


class _Stream:
    """One answer's Teams stream: informative updates (typing activities Teams shows as a progress bar) naming each
    stage, never a word of the draft; the final message carries only the verified answer (`final_entity`)."""

    def __init__(self, turn_context: TurnContext) -> None:
        self._turn = turn_context
        self._id: str | None = None  # the id Teams gave the first update, which names the stream
        self._sequence = 0
        self._stage: Stage | None = None  # the stage shown last
        self._refused = False  # Teams would not start it: the answer is sent as a message of its own

    @property
    def started(self) -> bool:
        return self._id is not None

    async def show(self, stage: Stage) -> None:
        if self._refused or stage is self._stage:
            return
        self._sequence += 1
        update = {"type": "streaminfo", "streamType": "informative", "streamSequence": self._sequence}
        try:
            sent = await self._turn.send_activity(Activity(type=ActivityTypes.typing, text=wording.STAGES[stage],
                                                           entities=[_RawEntity(self._named(update))]))
        except Exception as exc:  # progress is a courtesy: the answer still goes out
            logger.warning("A Teams stream update was refused (%s: %s)", type(exc).__name__, exc)
            self._refused = not self.started
            return
        self._stage = stage
        if self._id is None:
            if sent is None or not sent.id:
                self._refused = True  # e.g. expectReplies, where nothing is sent until the turn ends
                return
            self._id = sent.id

    def final_entity(self) -> dict[str, Any]:
        self._sequence += 1
        return self._named({"type": "streaminfo", "streamType": "final", "streamSequence": self._sequence})

    def _named(self, entity: dict[str, Any]) -> dict[str, Any]:
        return (entity | {"streamId": self._id}) if self._id is not None else entity


class _RawEntity(Entity):
    """An entity sent with all its properties: the SDK's Entity serializes only `type`, which would
    strip the citations from Teams' AI-generated-content entity."""

    _attribute_map = {
        "type": {"key": "type", "type": "str"},
        "additional_properties": {"key": "", "type": "{object}"},
    }

    def __init__(self, entity: dict[str, Any]) -> None:
        super().__init__(type=entity["type"])
        self.additional_properties = {k: v for k, v in entity.items() if k != "type"}


def _activity(message: TeamsMessage, stream_end: dict[str, Any] | None = None) -> Activity:
    """`stream_end`: the streaminfo entity that makes this message the final one of a stream."""
    entities = [*message.entities, *([stream_end] if stream_end else [])]
    return Activity(
        type=ActivityTypes.message,
        text=message.text,
        text_format=TextFormatTypes.markdown,
        entities=[_RawEntity(entity) for entity in entities] or None,
        attachments=[CardFactory.adaptive_card(card) for card in message.cards] or None,
        channel_data=message.channel_data,
    )


def _question_text(activity: Activity) -> str:
    """The message text without the @mention of this bot (Teams puts "<at>Name</at>" in the text).

    Not TurnContext.remove_recipient_mention: it raises on mention entities lacking "mentioned" or a type.
    """
    text = activity.text or ""
    bot_id = activity.recipient.id if activity.recipient else None
    for entity in activity.entities or []:
        properties = entity.additional_properties or {}
        mentioned = properties.get("mentioned") if isinstance(properties.get("mentioned"), dict) else {}
        mention_text = properties.get("text")
        if (entity.type or "").lower() == "mention" and mentioned.get("id") == bot_id and mention_text:
            text = text.replace(mention_text, " ")
    return " ".join(text.split())


def _attachments(activity: Activity, file_urls: UrlPolicy) -> tuple[Attachment, ...]:
    """Files sent with the message. Teams sends them to bots in personal chats (manifest: supportsFiles), with a
    pre-authorised, short-lived download URL that is fetched without credentials, from Teams' file hosts only."""
    files = []
    for attachment in activity.attachments or []:
        content = attachment.content if isinstance(attachment.content, dict) else {}
        url = content.get("downloadUrl")
        if attachment.content_type == FILE_DOWNLOAD_INFO and isinstance(url, str) and url:
            files.append(Attachment(attachment.name or "document", None, partial(download, url, allowed=file_urls)))
    return tuple(files)


def _asker(activity: Activity) -> Asker:
    channel_data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
    tenant = channel_data.get("tenant") if isinstance(channel_data.get("tenant"), dict) else {}
    team = channel_data.get("team") if isinstance(channel_data.get("team"), dict) else {}
    conversation = activity.conversation
    sender = activity.from_property
    return Asker(
        platform="teams",
        workspace=tenant.get("id") or (conversation.tenant_id if conversation else None) or team.get("id"),
        channel=conversation.id if conversation else None,
        user=(sender.aad_object_id or sender.id) if sender else None,
    )


def _can_stream(activity: Activity) -> bool:
    conversation_type = activity.conversation.conversation_type if activity.conversation else None
    return activity.channel_id == Channels.ms_teams and conversation_type in STREAMING_CONVERSATIONS


def _shows_native_citations(activity: Activity) -> bool:
    conversation_type = activity.conversation.conversation_type if activity.conversation else None
    return activity.channel_id == Channels.ms_teams and conversation_type in NATIVE_CITATION_CONVERSATIONS
