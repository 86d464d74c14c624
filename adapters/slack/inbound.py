"""Slack's side of a message: which events are questions or uploads, what was typed, by whom, where, and the
thread before it, turned into conversation `Message`s."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from slack_bolt.async_app import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.intents import Attachment, Message, no_history
from core.models import Asker, Turn

logger = logging.getLogger(__name__)

# Threads can be long; the core only needs the recent context.
MAX_HISTORY_TURNS = 20
HISTORY_FETCH_LIMIT = 200


@dataclass(frozen=True)
class Thread:
    """Where a message was posted and where its replies go: the thread it is in, or its own. Slack's agent view
    makes each message of a DM the start of a thread, as a mention is in a channel."""

    channel: str
    message_ts: str  # the message's own ts: progress reaction, end of the history
    thread_ts: str  # where to reply

    @property
    def is_follow_up(self) -> bool:
        """Asked inside an existing thread, whose earlier turns give the question its context."""
        return self.thread_ts != self.message_ts

    @property
    def key(self) -> str:
        return f"slack:{self.channel}:{self.thread_ts}"


def from_a_bot(event: dict) -> bool:
    return bool(event.get("bot_id")) or event.get("subtype") == "bot_message"


def mentions(event: dict, bot_user_id: str | None) -> bool:
    return bot_user_id is not None and f"<@{bot_user_id}>" in (event.get("text") or "")


def answerable(event: dict) -> bool:
    """Whether the event says where it was posted. One without a channel and ts has nowhere to be answered: it
    is acknowledged (so that Slack does not send it again) and never journaled."""
    ok = isinstance(event.get("channel"), str) and bool(event["channel"]) and isinstance(event.get("ts"), str)
    if not ok:
        logger.warning("Ignoring a %s event without channel or ts", event.get("type"))
    return ok


def message_key(event: dict) -> str:
    return f"message:{event.get('channel')}:{event.get('ts')}"


def delivery_keys(body: dict, event: dict) -> list[str]:
    """Slack's retries share the event_id, and the app_mention + message pair of one message its channel and ts."""
    keys = [message_key(event)]
    if body.get("event_id"):
        keys.append(f"event:{body['event_id']}")
    return keys


def file_key(file_id: str, channel: str) -> str:
    # The same file shared again in another conversation is a new upload there.
    return f"file:{file_id}:{channel}"


def event_asker(event: dict, context: AsyncBoltContext) -> Asker:
    return Asker(platform="slack", workspace=context.team_id or event.get("team"), channel=event["channel"],
                 user=event.get("user"))


def command_asker(command: dict) -> Asker:
    return Asker(platform="slack", workspace=command.get("team_id"), channel=command.get("channel_id"),
                 user=command.get("user_id"))


def action_asker(body: dict) -> Asker:
    return Asker(platform="slack", workspace=(body.get("team") or {}).get("id"),
                 channel=(body.get("channel") or {}).get("id"), user=(body.get("user") or {}).get("id"))


def thread_of(event: dict) -> Thread:
    """A question (a mention, a DM) is answered and a file share confirmed in the message's thread."""
    return Thread(event["channel"], event["ts"], event.get("thread_ts") or event["ts"])


def question(event: dict, context: AsyncBoltContext, client: AsyncWebClient) -> tuple[Thread, Message]:
    thread = thread_of(event)

    async def history() -> tuple[Turn, ...]:
        if not thread.is_follow_up:
            return ()
        return await thread_history(client, thread, context.bot_user_id, context.bot_id)

    text = to_plain(event.get("text") or "", bot_user_id=context.bot_user_id)
    return thread, Message(text, event_asker(event, context), thread.key, history=history, delivery=message_key(event))


def command(command: dict) -> Message:
    """`/gdpr [-p] …`: each stands alone, with no thread before it."""
    private, text = split_private(to_plain(command.get("text") or ""))
    return Message(text, command_asker(command), f"slack:command:{command.get('channel_id')}", history=no_history,
                   private=private)


def upload(thread: Thread, asker: Asker, attachment: Attachment) -> Message:
    return Message("", asker, thread.key, history=no_history, attachments=(attachment,))


def split_private(text: str) -> tuple[bool, str]:
    first, _, rest = text.partition(" ")
    if first in ("-p", "--private"):
        return True, rest.strip()
    return False, text.strip()


async def user_language(client: AsyncWebClient, user: str) -> str:
    """The language of the user's Slack client ("de" for de-DE), or "en" when Slack does not say."""
    try:
        response = await client.users_info(user=user, include_locale=True)
    except SlackApiError as exc:
        logger.warning("Could not read the user's locale: %s", exc.response.get("error"))
        return "en"
    locale = (response.get("user") or {}).get("locale") or "en"
    return locale.split("-")[0].lower()


async def thread_history(client: AsyncWebClient, thread: Thread, bot_user_id: str | None,
                         bot_id: str | None) -> tuple[Turn, ...]:
    """The thread's earlier messages as turns; without them the question is still answered."""
    try:
        response = await client.conversations_replies(channel=thread.channel, ts=thread.thread_ts,
                                                      limit=HISTORY_FETCH_LIMIT)
    except SlackApiError as exc:
        logger.warning("Could not read the thread history: %s", exc.response.get("error"))
        return ()
    turns = []
    for message in response.get("messages") or []:
        if float(message.get("ts", "0")) >= float(thread.message_ts):
            continue
        own = (bot_id is not None and message.get("bot_id") == bot_id) or (
            bot_user_id is not None and message.get("user") == bot_user_id
        )
        text = to_plain(message.get("text") or "", bot_user_id=bot_user_id)
        if text:
            turns.append(Turn(role="assistant" if own else "user", text=text))
    return tuple(turns[-MAX_HISTORY_TURNS:])


_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_CHANNEL = re.compile(r"<#(C[A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!([a-z]+)(?:\^[^|>]*)?(?:\|([^>]*))?>")
_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")


def to_plain(text: str, *, bot_user_id: str | None = None) -> str:
    """Slack's encoded message text → the plain text a person typed, without the bot's own mention."""

    def mention(m: re.Match[str]) -> str:
        if m.group(1) == bot_user_id:
            return ""
        return "@" + (m.group(2) or m.group(1))

    text = _MENTION.sub(mention, text)
    text = _CHANNEL.sub(lambda m: "#" + (m.group(2) or m.group(1)), text)
    text = _SPECIAL.sub(lambda m: m.group(2) or "@" + m.group(1), text)
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]+", " ", text).strip()
