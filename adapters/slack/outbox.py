"""Everything sent to Slack: replies in threads, the progress shown meanwhile (the assistant status, or a
reaction where Slack offers none; an LLM answer's stream), suggested prompts, and replies to slash commands and
buttons through their response_url, retried when Slack asks to slow down."""
from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from collections.abc import Sequence
from contextlib import asynccontextmanager

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters import wording
from adapters.intents import Answered, Declined, Failed, Reply, ShowProgress, Task
from adapters.slack.inbound import Thread
from adapters.slack.blocks import SlackMessage
from adapters.slack.render import render
from adapters.slack.stream import AnswerStream
from core.models import Asker

logger = logging.getLogger(__name__)

PROGRESS_REACTION = "mag"


def retry_handlers() -> list[AsyncRetryHandler]:
    # Passing handlers replaces slack_sdk's default (connection errors only), so keep that one too.
    return [AsyncConnectionErrorRetryHandler(), AsyncRateLimitErrorRetryHandler(max_retry_count=3)]


class Outbox:
    """`streaming`: answers are streamed (LLM mode, where they take seconds); else each is one chat.postMessage."""

    def __init__(self, client: AsyncWebClient, *, streaming: bool = False):
        self._client = client
        self._streaming = streaming

    def thread(self, thread: Thread, asker: Asker | None = None) -> ThreadReplies:
        """The replies in `thread`; an answer to `asker` is streamed when answers are."""
        stream = AnswerStream(self._client, thread, asker) if self._streaming and asker is not None else None
        return ThreadReplies(self, thread, stream)

    def command(self, response_url: str, user: str | None) -> CommandReplies:
        return CommandReplies(self, response_url, user)

    async def post(self, thread: Thread, messages: list[SlackMessage]) -> None:
        try:
            for message in messages:
                await self._client.chat_postMessage(
                    channel=thread.channel, thread_ts=thread.thread_ts, text=message.text, blocks=list(message.blocks),
                    unfurl_links=False, unfurl_media=False,
                )
        except SlackApiError:
            # Most likely a message Slack refused (blocks); a plain apology still tells the asker.
            reference = uuid.uuid4().hex[:8]
            logger.exception("Posting the answer failed (reference %s)", reference)
            [apology] = render(Failed(reference, Task.ANSWERING))
            try:
                await self._client.chat_postMessage(channel=thread.channel, thread_ts=thread.thread_ts,
                                                    text=apology.text)
            except SlackApiError:
                logger.exception("Posting the apology failed too (reference %s)", reference)

    async def respond(self, response_url: str, messages: list[SlackMessage], response_type: str = "ephemeral") -> None:
        """Through the response_url of a slash command or a button: it works in channels the bot is not a member of,
        and can answer privately."""
        webhook = AsyncWebhookClient(response_url, retry_handlers=retry_handlers())
        for message in messages:
            response = await webhook.send(text=message.text, blocks=list(message.blocks), response_type=response_type,
                                          replace_original=False)
            if response.status_code != 200:
                logger.error("response_url answered %d: %s", response.status_code, response.body)

    async def suggest(self, channel: str, questions: Sequence[str], thread_ts: str | None = None) -> None:
        """Pin `questions` where the asker starts: the bot's DM, or (Slack's older assistant view) a new thread."""
        prompts = [{"title": question, "message": question} for question in questions]
        try:
            await self._client.assistant_threads_setSuggestedPrompts(channel_id=channel, thread_ts=thread_ts,
                                                                     prompts=prompts)
        except SlackApiError as exc:
            logger.warning("Could not pin the suggested prompts: %s", exc.response.get("error"))

    @asynccontextmanager
    async def progress(self, thread: Thread, status: str, loading: Sequence[str] = ()) -> AsyncIterator[None]:
        """The assistant status (with `loading` messages rotating under it) where Slack offers it, cleared once the
        block is done; else a reaction, removed then."""
        if await self._set_status(thread, status, loading):
            try:
                yield
            finally:
                await self._set_status(thread, "")
            return
        reaction = {"channel": thread.channel, "timestamp": thread.message_ts, "name": PROGRESS_REACTION}
        try:
            await self._client.reactions_add(**reaction)
        except SlackApiError as exc:
            logger.warning("Could not add the progress reaction: %s", exc.response.get("error"))
            yield
            return
        try:
            yield
        finally:
            try:
                await self._client.reactions_remove(**reaction)
            except SlackApiError as exc:
                logger.warning("Could not remove the progress reaction: %s", exc.response.get("error"))

    async def _set_status(self, thread: Thread, status: str, loading: Sequence[str] = ()) -> bool:
        """An empty `status` clears it."""
        try:
            await self._client.assistant_threads_setStatus(channel_id=thread.channel, thread_ts=thread.thread_ts,
                                                           status=status, loading_messages=list(loading) or None)
            return True
        except SlackApiError as exc:
            logger.debug("assistant.threads.setStatus refused (%s)", exc.response.get("error"))
            return False


class ThreadReplies:
    """The replies to a mention, a DM or a file share, posted in its thread; with a `stream`, an answer is streamed
    there from its first stage on."""

    def __init__(self, outbox: Outbox, thread: Thread, stream: AnswerStream | None = None):
        self._outbox = outbox
        self._thread = thread
        self._stream = stream

    async def send(self, reply: Reply) -> None:
        first, *rest = render(reply)
        if self._stream is not None and self._stream.started:
            if not await self._stream.finish(first, failed=isinstance(reply, Failed)):
                rest.insert(0, first)
        else:
            rest.insert(0, first)
        await self._outbox.post(self._thread, rest)

    @asynccontextmanager
    async def working(self, file_name: str | None = None) -> AsyncIterator[ShowProgress | None]:
        if file_name is not None:
            async with self._outbox.progress(self._thread, wording.reading(file_name)):
                yield None
            return
        async with self._outbox.progress(self._thread, wording.SEARCHING, wording.LOADING_MESSAGES):
            yield self._stream.show if self._stream is not None else None


class CommandReplies:
    """The replies to `/gdpr`: an answer in the channel, with the question above it, unless asked privately;
    everything else only to the asker."""

    def __init__(self, outbox: Outbox, response_url: str, user: str | None):
        self._outbox = outbox
        self._response_url = response_url
        self._user = user

    async def send(self, reply: Reply) -> None:
        if isinstance(reply, (Answered, Declined)) and not reply.private:
            await self._outbox.respond(self._response_url, render(reply, asked_by=self._user), "in_channel")
        else:
            await self._outbox.respond(self._response_url, render(reply))

    @asynccontextmanager
    async def working(self, file_name: str | None = None) -> AsyncIterator[None]:
        yield None  # a slash command has no message of its own to show progress on
