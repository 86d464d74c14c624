"""The bolt listeners: each acknowledges within milliseconds and hands the message to the conversation.

Slack never sends an acknowledged event again, so a question is journaled before it is acknowledged and marked
done once answered; what a killed process left open is answered when the next one starts (`replay`).

A file is an upload when it is sent to the bot in a DM, or shared in a channel by a message that mentions the
bot. One share arrives as several events (a `message` of subtype `file_share`, an `app_mention`, `file_shared`),
in any order: the first to claim the file indexes it and confirms in the share's thread.

Every listener the manifest declares is here (tests/test_manifest.py checks them against each other).
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from adapters.conversation import Conversation, ShowHelp, parse
from adapters.intents import Reply
from adapters.prompts import example_questions
from adapters.slack import inbound
from adapters.slack.inbound import Thread
from adapters.slack.outbox import Outbox
from adapters.slack.blocks import SlackMessage
from adapters.slack.render import FEEDBACK, FEEDBACK_DOWN, FEEDBACK_UP, read_feedback, render
from adapters.slack.uploads import SlackFiles, share_in
from core.models import Asker
from core.storage import Journal

logger = logging.getLogger(__name__)

Listener = Callable[..., Awaitable[None]]
# Questions a killed process left unanswered are answered on restart, unless the asker has long moved on.
REPLAY_MAX_AGE_S = 3600.0
# A response_url accepts replies for 30 minutes only.
COMMAND_REPLAY_MAX_AGE_S = 1800.0


class Listeners:
    """`streaming`: see `Outbox`."""

    def __init__(self, conversation: Conversation, client: AsyncWebClient, journal: Journal | None, *,
                 streaming: bool = False):
        self._conversation = conversation
        self._client = client
        self._outbox = Outbox(client, streaming=streaming)
        self._files = SlackFiles(client)
        self._journal = journal
        # A thread of its own, so that a slow disk holds up neither the event loop nor the core's threads.
        self._journal_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gdpr-journal")
        # Strong references: the event loop keeps only weak ones to running tasks.
        self._tasks: set[asyncio.Task] = set()

    @property
    def events(self) -> dict[str, Listener]:
        """The listener of each event type (`message` takes every message.* subscription)."""
        return {"app_mention": self._on_mention, "message": self._on_message, "file_shared": self._on_file_shared,
                "app_home_opened": self._on_home_opened, "assistant_thread_started": self._on_assistant_thread_started}

    @property
    def commands(self) -> dict[str, Listener]:
        return {"/gdpr": self._on_command}

    @property
    def actions(self) -> dict[str, Listener]:
        """The listener of each action id the bot's messages carry, and of those its older messages carry."""
        return {FEEDBACK: self._on_feedback, FEEDBACK_UP: self._on_legacy_feedback,
                FEEDBACK_DOWN: self._on_legacy_feedback}

    def register(self, app: AsyncApp) -> None:
        for event, listener in self.events.items():
            app.event(event)(listener)
        for command, listener in self.commands.items():
            app.command(command)(listener)
        for action, listener in self.actions.items():
            app.action(action)(listener)
        # Last: bolt answers 404 to an event without a listener and Slack then retries it for hours.
        app.event(re.compile(".*"))(self._acknowledge_only)

    # --- listeners ---------------------------------------------------------------------------------------------

    async def _acknowledge_only(self, ack: AsyncAck) -> None:
        await ack()

    async def _on_mention(self, ack: AsyncAck, body: dict, event: dict, context: AsyncBoltContext) -> None:
        if inbound.from_a_bot(event) or not inbound.answerable(event):
            await ack()
        elif event.get("files"):
            await ack()
            self._receive_files(event, context)
        else:
            await self._accept(ack, body, event, context)

    async def _on_message(self, ack: AsyncAck, body: dict, event: dict, context: AsyncBoltContext) -> None:
        if inbound.from_a_bot(event) or not inbound.answerable(event):
            await ack()
        elif event.get("files"):
            await ack()
            # Not every share that mentions the bot comes as app_mention too, so this one is looked at as well.
            if event.get("channel_type") == "im" or inbound.mentions(event, context.bot_user_id):
                self._receive_files(event, context)
        elif event.get("channel_type") != "im" or event.get("subtype"):
            await ack()  # channel messages arrive only for thread context; a question there comes as app_mention
        else:
            await self._accept(ack, body, event, context)

    async def _on_file_shared(self, ack: AsyncAck, event: dict, context: AsyncBoltContext) -> None:
        await ack()
        channel, file_id = event.get("channel_id") or "", event.get("file_id")
        # In a channel a file is for the bot only when its message mentions the bot, which this event cannot
        # tell; those shares come as message events too. DM channel ids start with "D".
        if channel.startswith("D") and file_id:
            asker = Asker(platform="slack", workspace=context.team_id, channel=channel, user=event.get("user_id"))
            self._spawn(self._index_shared_file(file_id, channel, asker))

    async def _on_home_opened(self, ack: AsyncAck, event: dict) -> None:
        """Slack's agent view: the bot's DM was opened. Its suggested prompts are pinned there."""
        await ack()
        if event.get("tab") == "messages" and event.get("channel") and event.get("user"):
            self._spawn(self._suggest(event["channel"], event["user"]))

    async def _on_assistant_thread_started(self, ack: AsyncAck, event: dict) -> None:
        """Slack's older assistant view: a new assistant thread, which gets the prompts of its own."""
        await ack()
        thread = event.get("assistant_thread") or {}
        if thread.get("channel_id") and thread.get("thread_ts") and thread.get("user_id"):
            self._spawn(self._suggest(thread["channel_id"], thread["user_id"], thread["thread_ts"]))

    async def _on_command(self, ack: AsyncAck, command: dict) -> None:
        message = inbound.command(command)
        if isinstance(parse(message.text), ShowHelp):
            # Needs no core and no response_url: the reply is the acknowledgement itself.
            replies = _Collected()
            await self._conversation.handle(message, replies)
            await ack(text="\n".join(m.text for m in replies.messages), response_type="ephemeral")
            return
        if not isinstance(command.get("response_url"), str):
            logger.warning("Ignoring a /gdpr command without a response_url")
            await ack()
            return
        # Slash commands are never redelivered, so each is a message of its own.
        key = f"command:{uuid.uuid4().hex}"
        await self._journal_add(key, "command", {"command": command, "accepted_at": time.time()})
        await ack()
        self._answer_command(key, command)

    async def _on_feedback(self, ack: AsyncAck, body: dict, action: dict) -> None:
        await ack()
        clicked = read_feedback(action.get("value") or "")
        if clicked is None:
            logger.warning("Ignoring a feedback click with the value %r", action.get("value"))
            return
        request_id, helpful = clicked
        self._spawn(self._feedback(request_id, helpful, inbound.action_asker(body), body.get("response_url")))

    async def _on_legacy_feedback(self, ack: AsyncAck, body: dict, action: dict) -> None:
        await ack()
        helpful = action["action_id"] == FEEDBACK_UP
        self._spawn(self._feedback(action.get("value", ""), helpful, inbound.action_asker(body),
                                   body.get("response_url")))

    # --- answering ----------------------------------------------------------------------------------------------

    async def _accept(self, ack: AsyncAck, body: dict, event: dict, context: AsyncBoltContext) -> None:
        """Journal a first delivery before acknowledging it: once acknowledged, Slack never sends it again. A
        delivery that cannot be journaled raises (JournalUnavailable), is not acknowledged, and its retry is taken."""
        keys = inbound.delivery_keys(body, event)
        identity = {"team_id": context.team_id, "bot_user_id": context.bot_user_id, "bot_id": context.bot_id}
        key = inbound.message_key(event)
        payload = {"event": event, "context": identity, "accepted_at": time.time()}
        if self._journal is None:
            first = self._conversation.deliveries.claim(*keys)
        else:
            first = await asyncio.get_running_loop().run_in_executor(self._journal_thread, partial(
                self._journal.accept, self._conversation.deliveries, keys, key, event["type"], payload))
        await ack()
        if first:
            self._answer_in_thread(key, event, context)

    def _answer_in_thread(self, key: str, event: dict, context: AsyncBoltContext) -> None:
        thread, message = inbound.question(event, context, self._client)
        replies = self._outbox.thread(thread, message.asker)
        self._spawn(self._journaled(key, self._conversation.handle(message, replies)))

    def _answer_command(self, key: str, command: dict) -> None:
        replies = self._outbox.command(command["response_url"], command.get("user_id"))
        self._spawn(self._journaled(key, self._conversation.handle(inbound.command(command), replies)))

    async def _suggest(self, channel: str, user: str, thread_ts: str | None = None) -> None:
        questions = example_questions(await inbound.user_language(self._client, user))
        await self._outbox.suggest(channel, questions, thread_ts)

    async def _feedback(self, request_id: str, helpful: bool, asker: Asker, response_url: str | None) -> None:
        reply = await self._conversation.feedback(request_id, helpful=helpful, asker=asker)
        if response_url:
            await self._outbox.respond(response_url, render(reply))

    # --- uploads ------------------------------------------------------------------------------------------------

    def _receive_files(self, event: dict, context: AsyncBoltContext) -> None:
        thread, asker = inbound.thread_of(event), inbound.event_asker(event, context)
        for file in event["files"]:
            if self._conversation.deliveries.claim(inbound.file_key(file["id"], thread.channel)):
                self._spawn(self._index(file, thread, asker))

    async def _index_shared_file(self, file_id: str, channel: str, asker: Asker) -> None:
        file = await self._files.info(file_id)
        share = share_in(file, channel) if file else None
        if file is None or share is None:
            # Nothing to index and no thread to confirm in; the share's message event may still bring it.
            logger.warning("No details for file %s shared in %s", file_id, channel)
            return
        # Claimed only now, so a failed files.info leaves the file to the message event.
        if self._conversation.deliveries.claim(inbound.file_key(file_id, channel)):
            ts, thread_ts = share
            await self._index(file, Thread(channel, ts, thread_ts or ts), asker)

    async def _index(self, file: dict, thread: Thread, asker: Asker) -> None:
        message = inbound.upload(thread, asker, await self._files.attachment(file))
        await self._conversation.handle(message, self._outbox.thread(thread))

    # --- questions a killed process left unanswered --------------------------------------------------------------

    def replay(self) -> None:
        """Answer, through the usual paths, what the journal holds: accepted, then the process died. A shared
        journal is looked at again every `takeover_interval_s`, for what a replica that died leaves behind."""
        if self._journal is None:
            return
        self._replay_open_items(self._journal.open_items())
        if self._journal.takeover_interval_s is not None:
            self._spawn(self._take_over_periodically(self._journal, self._journal.takeover_interval_s))

    async def _take_over_periodically(self, journal: Journal, interval_s: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            self._replay_open_items(await loop.run_in_executor(self._journal_thread, journal.open_items))

    def _replay_open_items(self, items: list[tuple[str, str, dict]]) -> None:
        for key, kind, payload in items:
            if self._journal.takeover_interval_s is None:
                # Done before answering: a question that killed the process must not kill every restart too (a
                # shared journal counts the hand-outs of each entry itself).
                self._journal.done(key)
            try:
                self._replay_one(key, kind, payload)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                logger.error("Skipping journal entry %s that cannot be answered (%s: %s)", key, type(exc).__name__, exc)

    def _replay_one(self, key: str, kind: str, payload: dict) -> None:
        age_s = time.time() - float(payload.get("accepted_at", 0))
        max_age_s = COMMAND_REPLAY_MAX_AGE_S if kind == "command" else REPLAY_MAX_AGE_S
        if age_s > max_age_s:
            logger.warning("Not answering %s accepted %.0f s ago by a previous process: too old", key, age_s)
            return
        if kind == "command":
            if not isinstance(payload["command"]["response_url"], str):
                raise ValueError("the command has no response_url")
            logger.info("Answering %s, accepted but never answered by a previous process", key)
            self._answer_command(key, payload["command"])
            return
        event = payload["event"]
        if not inbound.answerable(event):
            raise ValueError("the event has no channel or ts")
        logger.info("Answering %s, accepted but never answered by a previous process", key)
        # Claimed, so a redelivery of an event the dead process never acknowledged is not answered twice.
        self._conversation.deliveries.claim(key)
        self._answer_in_thread(key, event, AsyncBoltContext(payload["context"]))

    async def _journaled(self, key: str, answering: Awaitable[None]) -> None:
        """`answering`, then the question is done: cancelled or failed, it stays open for the next start."""
        await answering
        if self._journal is not None:
            await asyncio.get_running_loop().run_in_executor(self._journal_thread, self._journal.done, key)

    async def _journal_add(self, key: str, kind: str, payload: dict) -> None:
        """On disk when this returns (raises JournalUnavailable otherwise)."""
        if self._journal is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._journal_thread, partial(self._journal.add, key, kind, payload))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Background Slack task failed", exc_info=task.exception())


class _Collected:
    """Replies kept for the acknowledgement of a slash command, instead of being sent."""

    def __init__(self) -> None:
        self.messages: list[SlackMessage] = []

    async def send(self, reply: Reply) -> None:
        self.messages += render(reply)

    @asynccontextmanager
    async def working(self, file_name: str | None = None) -> AsyncIterator[None]:
        yield
