"""An answer in LLM mode, streamed: while the model writes, the thread shows a plan of what the bot is doing
(chat.startStream / chat.appendStream task updates: searching the Regulation, drafting, checking the quotes), which
is provisional by its look and never holds a word of the draft; the verified answer is published in
chat.stopStream's final blocks. Slack lets a stream expire after about five minutes: then the streamed message is
replaced with chat.update."""
from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.models.messages.chunk import PlanUpdateChunk, TaskUpdateChunk
from slack_sdk.web.async_chat_stream import AsyncChatStream
from slack_sdk.web.async_client import AsyncWebClient

from adapters import wording
from adapters.slack.blocks import SlackMessage
from adapters.slack.inbound import Thread
from core.models import Asker, Stage

logger = logging.getLogger(__name__)

# What Slack answers to an append or a stop once a stream has expired.
EXPIRED = "message_not_in_streaming_state"


class AnswerStream:
    """One answer's stream in its thread, started by the first stage shown."""

    def __init__(self, client: AsyncWebClient, thread: Thread, recipient: Asker):
        self._client = client
        self._thread = thread
        self._recipient = recipient
        self._stream: AsyncChatStream | None = None
        self._stage: Stage | None = None
        self._refused = False  # Slack would not start one: the answer is posted as a message of its own
        self._expired = False

    @property
    def started(self) -> bool:
        return self._stream is not None and self._stream.ts is not None

    async def show(self, stage: Stage) -> None:
        """The plan with `stage` in progress and the one before it done."""
        if self._refused or self._expired:
            return
        chunks = ([self._task(self._stage, "complete")] if self._stage else []) + [self._task(stage, "in_progress")]
        self._stage = stage
        try:
            if self._stream is None:
                self._stream = await self._client.chat_stream(
                    channel=self._thread.channel, thread_ts=self._thread.thread_ts, task_display_mode="plan",
                    recipient_team_id=self._recipient.workspace, recipient_user_id=self._recipient.user)
                chunks.insert(0, PlanUpdateChunk(title=wording.PLAN_TITLE))
            await self._stream.append(chunks=chunks)
        except SlackApiError as exc:
            error = exc.response.get("error")
            if not self.started:
                self._refused = True
                logger.warning("chat.startStream refused (%s); the answer will be posted without a stream", error)
            elif error == EXPIRED:
                self._expired = True
            else:
                logger.warning("chat.appendStream refused (%s)", error)

    async def finish(self, message: SlackMessage, *, failed: bool = False) -> bool:
        """Publish `message` (the verified answer's first message, or an apology when `failed`) as the streamed
        message's final form. False when neither the stream nor chat.update took it: post it then."""
        assert self._stream is not None and self._stream.ts is not None and self._stage is not None
        if not self._expired:
            try:
                await self._stream.stop(chunks=[self._task(self._stage, "error" if failed else "complete")],
                                        blocks=list(message.blocks))
                return True
            except SlackApiError as exc:
                error = exc.response.get("error")
                if error != EXPIRED:
                    logger.warning("chat.stopStream refused (%s); replacing the streamed message", error)
        try:
            await self._client.chat_update(channel=self._thread.channel, ts=self._stream.ts, text=message.text,
                                           blocks=list(message.blocks))
            return True
        except SlackApiError as exc:
            logger.error("chat.update of the streamed message refused (%s); posting the answer",
                         exc.response.get("error"))
            return False

    @staticmethod
    def _task(stage: Stage, status: str) -> TaskUpdateChunk:
        return TaskUpdateChunk(id=stage.value, title=wording.STAGES[stage], status=status)


__all__ = ["EXPIRED", "AnswerStream"]
