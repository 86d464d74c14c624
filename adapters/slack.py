"""The Slack adapter: a slack-bolt AsyncApp that acknowledges at once and answers in the background.

HTTP mode serves `/slack/events` (signature-verified by bolt) and `GET /healthz` on aiohttp; Socket Mode is
used when an app-level token is configured. Everything Slack-specific stays here and in `slack_render`;
the core is reached only through `AnswerService`, and uploaded PDFs through `Documents`.

A file is an upload when it is sent to the bot in a DM, or shared in a channel by a message that mentions the
bot. One share arrives as several events (a `message` of subtype `file_share`, an `app_mention`, `file_shared`),
in any order: the first to claim the file indexes it and confirms in the share's thread.
"""
from __future__ import annotations

import asyncio
import logging
import re
import signal
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Awaitable, Callable, Iterable, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.download import DownloadFailed, download
from adapters.pending import JournalUnavailable, PendingJournal
from adapters.slack_render import (
    FEEDBACK_DOWN,
    FEEDBACK_UP,
    FORGET_USAGE,
    HELP_TEXT,
    UPLOADS_DISABLED,
    SlackMessage,
    download_failed_text,
    escape,
    forgotten_text,
    indexed_text,
    render_answer,
    render_document_list,
    render_text,
    to_plain,
    too_large_text,
)
from bot.settings import Settings, SettingsError
from core.library import DocumentRejected, Documents, DocumentsVerb, NotAllowed, documents_command
from core.models import Asker, Turn
from core.service import AnswerService, QuestionRejected

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
STATUS_TEXT = "Searching the Regulation…"
UPLOAD_STATUS_TEXT = "Reading {name}…"
PROGRESS_REACTION = "mag"
# The core is synchronous and CPU-bound, so it runs on threads of its own: aiohttp resolves Slack's hostname
# on the loop's default executor, which a backlog of questions must not starve.
CORE_THREADS = 4
# Threads can be long; the core only needs the recent context.
MAX_HISTORY_TURNS = 20
HISTORY_FETCH_LIMIT = 200
# Questions a killed process left unanswered are answered on restart, unless the asker has long moved on.
REPLAY_MAX_AGE_S = 3600.0
# A response_url accepts replies for 30 minutes only.
COMMAND_REPLAY_MAX_AGE_S = 1800.0
PENDING_JOURNAL_NAME = "slack_pending.sqlite3"

HealthDetails = Callable[[], Mapping[str, object]]
T = TypeVar("T")


def build_slack_app(settings: Settings, service: AnswerService, *, documents: Documents | None = None,
                    journal: PendingJournal | None = None) -> AsyncApp:
    """The bolt app with every listener registered; works for HTTP mode and Socket Mode alike.

    Without `documents`, uploads and the `docs`/`forget` commands are answered that uploads are not enabled.
    With a `journal`, each question is journaled until answered, and the questions a previous process accepted
    but never answered are answered now, so build the app inside the running event loop.
    """
    if not settings.slack_bot_token:
        raise SettingsError("Missing setting SLACK_BOT_TOKEN: the bot token (xoxb-…) is required for Slack")
    retry_handlers = _retry_handlers()
    client = AsyncWebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_url or AsyncWebClient.BASE_URL,
        retry_handlers=retry_handlers,
    )
    # An empty signing secret (Socket Mode) makes every HTTP request fail verification, which is the safe side.
    # process_before_response: bolt would otherwise acknowledge an event before its listener runs, so a
    # question could be acknowledged (and never re-sent by Slack) before it is journaled. Every listener
    # acknowledges within milliseconds and answers in the background.
    app = AsyncApp(client=client, signing_secret=settings.slack_signing_secret or "", name="gdpr-bot",
                   process_before_response=True)
    listeners = _Listeners(service, client, retry_handlers, documents, journal)
    listeners.register(app)
    listeners.replay()
    return app


def make_web_app(
    app: AsyncApp,
    *,
    extra_routes: Iterable[web.RouteDef] = (),
    health: HealthDetails | None = None,
    serve_events: bool = True,
) -> web.Application:
    """aiohttp app: `POST /slack/events` (when `serve_events`), `GET /healthz`, and any `extra_routes`.

    `health` adds details (index status, …) to the healthz JSON.
    """

    async def events(request: web.Request) -> web.Response:
        bolt_response = await app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(bolt_response)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **(health() if health else {})})

    web_app = web.Application()
    routes = [web.get("/healthz", healthz), *extra_routes]
    if serve_events:
        routes.append(web.post(EVENTS_PATH, events))
    web_app.add_routes(routes)
    return web_app


def run_slack(
    settings: Settings,
    service: AnswerService,
    port: int = 3000,
    *,
    extra_routes: Sequence[web.RouteDef] = (),
    health: HealthDetails | None = None,
    documents: Documents | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM: Socket Mode when SLACK_APP_TOKEN is set, else HTTP mode on `port`.

    Accepted questions are journaled under the data directory, so a killed process answers them on restart.
    """
    journal = PendingJournal(settings.data_dir / PENDING_JOURNAL_NAME)
    serving = serve_slack(settings, service, port, extra_routes=extra_routes, health=health, documents=documents,
                          journal=journal)
    try:
        asyncio.run(_until_terminated(serving))
    except KeyboardInterrupt:
        logger.info("Slack adapter stopped")
    finally:
        journal.close()


async def serve_slack(
    settings: Settings,
    service: AnswerService,
    port: int,
    *,
    host: str = "0.0.0.0",
    extra_routes: Sequence[web.RouteDef] = (),
    health: HealthDetails | None = None,
    documents: Documents | None = None,
    journal: PendingJournal | None = None,
) -> None:
    """`run_slack` as a coroutine: serves until cancelled.

    In Socket Mode `/healthz` (and `extra_routes`) are still served on `port`, so container health checks
    and metrics scraping work the same in both modes. `journal`: see `build_slack_app`.
    """
    _check_mode_settings(settings)
    app = build_slack_app(settings, service, documents=documents, journal=journal)
    socket_mode = settings.slack_app_token is not None
    runner = web.AppRunner(make_web_app(app, extra_routes=extra_routes, health=health, serve_events=not socket_mode))
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    handler = AsyncSocketModeHandler(app, settings.slack_app_token) if socket_mode else None
    try:
        if handler is not None:
            await handler.connect_async()
            logger.info("Slack Socket Mode connected; /healthz on port %d", port)
        else:
            logger.info("Slack HTTP mode: listening on port %d at %s", port, EVENTS_PATH)
        await asyncio.Event().wait()
    finally:
        if handler is not None:
            await handler.close_async()
        await runner.cleanup()


def _check_mode_settings(settings: Settings) -> None:
    if not settings.slack_app_token and not settings.slack_signing_secret:
        raise SettingsError(
            "Missing setting SLACK_SIGNING_SECRET: HTTP mode verifies Slack's request signatures "
            "(or set SLACK_APP_TOKEN for Socket Mode)"
        )


async def _until_terminated(serving: Awaitable[None]) -> None:
    """Run `serving`, cancelling it cleanly on SIGTERM (how containers are stopped)."""
    task = asyncio.ensure_future(serving)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        logger.info("Slack adapter stopped")


def _retry_handlers() -> list[AsyncRetryHandler]:
    # Passing handlers replaces slack_sdk's default (connection errors only), so keep that one too.
    return [AsyncConnectionErrorRetryHandler(), AsyncRateLimitErrorRetryHandler(max_retry_count=3)]


@dataclass(frozen=True)
class _Conversation:
    """Where a question was asked and where its answer goes."""

    channel: str
    message_ts: str  # the question's own message: progress reaction, end of the history
    thread_ts: str | None  # where to reply; None = top level of a DM
    asker: Asker

    @property
    def is_follow_up(self) -> bool:
        """Asked inside an existing thread, whose earlier turns give the question its context."""
        return self.thread_ts not in (None, self.message_ts)


class _RecentKeys:
    """Keys seen in the last `ttl_s` seconds, bounded in size: Slack retries within minutes."""

    def __init__(self, ttl_s: float = 3600.0, max_keys: int = 50_000):
        self._ttl_s = ttl_s
        self._max_keys = max_keys
        self._seen: OrderedDict[str, float] = OrderedDict()

    def claim(self, *keys: str) -> bool:
        """True for the first caller with any of `keys`; all of them count as seen afterwards."""
        now = time.monotonic()
        while self._seen and (len(self._seen) > self._max_keys or self._oldest() < now - self._ttl_s):
            self._seen.popitem(last=False)
        first = not any(key in self._seen for key in keys)
        for key in keys:
            self._seen[key] = now
            self._seen.move_to_end(key)
        return first

    def forget(self, *keys: str) -> None:
        for key in keys:
            self._seen.pop(key, None)

    def _oldest(self) -> float:
        return next(iter(self._seen.values()))


class _Listeners:
    def __init__(self, service: AnswerService, client: AsyncWebClient, retry_handlers: list[AsyncRetryHandler],
                 documents: Documents | None, journal: PendingJournal | None):
        self._service = service
        self._documents = documents
        self._journal = journal
        self._client = client
        self._retry_handlers = retry_handlers
        self._recent = _RecentKeys()
        self._core = ThreadPoolExecutor(max_workers=CORE_THREADS, thread_name_prefix="gdpr-core")
        self._journal_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gdpr-journal")
        # Strong references: the event loop keeps only weak ones to running tasks.
        self._tasks: set[asyncio.Task] = set()
        # `/gdpr <first word> …`: adding a subcommand is one entry here.
        self._subcommands: dict[str, Callable[[AsyncAck, dict, str], Awaitable[None]]] = {
            "help": self._command_help,
            "docs": partial(self._command_documents, "docs"),
            "forget": partial(self._command_documents, "forget"),
        }

    def register(self, app: AsyncApp) -> None:
        app.event("app_mention")(self._on_mention)
        app.event("message")(self._on_message)
        app.event("file_shared")(self._on_file_shared)
        app.command("/gdpr")(self._on_command)
        app.action(FEEDBACK_UP)(self._on_feedback)
        app.action(FEEDBACK_DOWN)(self._on_feedback)
        # Last: bolt answers 404 to an event without a listener and Slack then retries it for hours.
        app.event(re.compile(".*"))(self._acknowledge_only)

    # --- listeners -------------------------------------------------------------------------------------

    async def _acknowledge_only(self, ack: AsyncAck) -> None:
        await ack()

    async def _on_mention(self, ack: AsyncAck, body: dict, event: dict, context: AsyncBoltContext) -> None:
        if _from_a_bot(event) or not _answerable_event(event):
            await ack()
            return
        if event.get("files"):
            await ack()
            self._receive_files(event, context)
            return
        await self._accept_question(ack, body, event, context)

    async def _on_message(self, ack: AsyncAck, body: dict, event: dict, context: AsyncBoltContext) -> None:
        if _from_a_bot(event) or not _answerable_event(event):
            await ack()
            return
        if event.get("files"):
            await ack()
            # Not every share that mentions the bot comes as app_mention too, so this one is looked at as well.
            if event.get("channel_type") == "im" or _mentions(event, context.bot_user_id):
                self._receive_files(event, context)
            return
        # Channel messages arrive only for thread context; a question there comes as app_mention.
        if event.get("channel_type") != "im" or event.get("subtype"):
            await ack()
            return
        await self._accept_question(ack, body, event, context)

    async def _on_file_shared(self, ack: AsyncAck, event: dict, context: AsyncBoltContext) -> None:
        await ack()
        channel, file_id = event.get("channel_id") or "", event.get("file_id")
        # In a channel a file is for the bot only when its message mentions the bot, which this event cannot
        # tell; those shares come as message events too. DM channel ids start with "D".
        if channel.startswith("D") and file_id:
            asker = Asker(platform="slack", workspace=context.team_id, channel=channel, user=event.get("user_id"))
            self._spawn(self._index_shared_file(file_id, channel, asker))

    async def _on_command(self, ack: AsyncAck, command: dict) -> None:
        text = to_plain(command.get("text") or "")
        first, _, rest = text.partition(" ")
        handler = self._subcommands.get(first.lower())
        if handler is not None:
            await handler(ack, command, rest.strip())
        else:
            await self._command_ask(ack, command, text)

    async def _on_feedback(self, ack: AsyncAck, body: dict, action: dict) -> None:
        await ack()
        asker = Asker(
            platform="slack",
            workspace=(body.get("team") or {}).get("id"),
            channel=(body.get("channel") or {}).get("id"),
            user=(body.get("user") or {}).get("id"),
        )
        helpful = action["action_id"] == FEEDBACK_UP
        self._spawn(self._record_feedback(action.get("value", ""), helpful, asker, body.get("response_url")))

    # --- slash command -----------------------------------------------------------------------------------

    async def _command_help(self, ack: AsyncAck, command: dict, rest: str) -> None:
        await ack(text=HELP_TEXT, response_type="ephemeral")

    async def _command_ask(self, ack: AsyncAck, command: dict, text: str) -> None:
        _, question = _private_flag(text)
        if not question:
            await self._command_help(ack, command, "")
            return
        if not isinstance(command.get("response_url"), str):
            logger.warning("Ignoring a /gdpr command without a response_url")
            await ack()
            return
        # Slash commands are never redelivered, so each is a question of its own.
        key = f"command:{uuid.uuid4().hex}"
        await self._journal_add(key, "command", {"command": command, "accepted_at": time.time()})
        await ack()
        self._answer_command_later(key, command)

    def _answer_command_later(self, key: str, command: dict) -> None:
        private, question = _private_flag(to_plain(command.get("text") or ""))
        answering = self._answer_command(command["response_url"], question, _command_asker(command), private)
        self._spawn(self._journaled(key, answering))

    async def _command_documents(self, verb: DocumentsVerb, ack: AsyncAck, command: dict, rest: str) -> None:
        await ack()
        self._spawn(self._answer_documents_command(command["response_url"], verb, rest, _command_asker(command)))

    async def _answer_documents_command(self, response_url: str, verb: DocumentsVerb, argument: str,
                                        asker: Asker) -> None:
        webhook = AsyncWebhookClient(response_url, retry_handlers=self._retry_handlers)
        for message in await self._documents_reply(verb, argument, asker):
            await _send(webhook, message, "ephemeral")

    async def _answer_command(self, response_url: str, question: str, asker: Asker, private: bool) -> None:
        # response_url works in channels the bot is not a member of, and can answer privately.
        webhook = AsyncWebhookClient(response_url, retry_handlers=self._retry_handlers)
        try:
            answer = await self._in_core(self._service.ask, question, asker=asker)
        except QuestionRejected as exc:
            await _send(webhook, render_text(escape(str(exc))), "ephemeral")
            return
        except Exception:
            await _send(webhook, _apology(), "ephemeral")
            return
        visibility = "ephemeral" if private else "in_channel"
        for message in render_answer(answer, asked_by=None if private else asker.user, question=question):
            await _send(webhook, message, visibility)

    # --- threads and DMs -----------------------------------------------------------------------------------

    async def _accept_question(self, ack: AsyncAck, body: dict, event: dict, context: AsyncBoltContext) -> None:
        """Journal a first delivery before acknowledging it: once acknowledged, Slack never sends it again."""
        if not self._first_delivery(body, event):
            await ack()
            return
        identity = {"team_id": context.team_id, "bot_user_id": context.bot_user_id, "bot_id": context.bot_id}
        key = _message_key(event)
        try:
            await self._journal_add(key, event["type"], {"event": event, "context": identity,
                                                         "accepted_at": time.time()})
        except JournalUnavailable:
            self._recent.forget(*self._delivery_keys(body, event))  # so that Slack's retry is taken
            raise
        await ack()
        self._ask_in_thread(key, event, context)

    def _first_delivery(self, body: dict, event: dict) -> bool:
        """Slack retries (same event_id) and the app_mention + message pair (same channel+ts) answer once."""
        return self._recent.claim(*self._delivery_keys(body, event))

    @staticmethod
    def _delivery_keys(body: dict, event: dict) -> list[str]:
        keys = [_message_key(event)]
        if body.get("event_id"):
            keys.append(f"event:{body['event_id']}")
        return keys

    def _ask_in_thread(self, key: str, event: dict, context: AsyncBoltContext) -> None:
        # A mention is answered in a thread; a DM at the top level unless it was asked in a thread.
        thread_ts = event.get("thread_ts") or (event["ts"] if event["type"] == "app_mention" else None)
        conversation = _Conversation(
            channel=event["channel"],
            message_ts=event["ts"],
            thread_ts=thread_ts,
            asker=Asker(platform="slack", workspace=context.team_id or event.get("team"),
                        channel=event["channel"], user=event.get("user")),
        )
        question = to_plain(event.get("text") or "", bot_user_id=context.bot_user_id)
        answering = self._answer_in_thread(conversation, question, context.bot_user_id, context.bot_id)
        self._spawn(self._journaled(key, answering))

    async def _answer_in_thread(self, conv: _Conversation, question: str, bot_user_id: str | None,
                                bot_id: str | None) -> None:
        if not question:
            await self._post(conv, [render_text(HELP_TEXT)])
            return
        command = documents_command(question)
        if command is not None:
            await self._post(conv, await self._documents_reply(*command, conv.asker))
            return
        clear_progress = await self._show_progress(conv)
        try:
            history = await self._history(conv, bot_user_id, bot_id) if conv.is_follow_up else ()
            try:
                answer = await self._in_core(self._service.ask, question, history=history, asker=conv.asker)
                messages = render_answer(answer)
            except QuestionRejected as exc:
                messages = [render_text(escape(str(exc)))]
            except Exception:
                messages = [_apology()]
            await self._post(conv, messages)
        finally:
            await clear_progress()

    async def _show_progress(self, conv: _Conversation, status: str = STATUS_TEXT) -> Callable[[], Awaitable[None]]:
        """The assistant status where Slack offers it, else a reaction; returns how to clear it."""

        async def nothing() -> None:
            return None

        # The status belongs to a thread and clears itself when we reply there; a top-level DM reply has none.
        if conv.thread_ts:
            try:
                await self._client.assistant_threads_setStatus(
                    channel_id=conv.channel, thread_ts=conv.thread_ts, status=status
                )
                return nothing
            except SlackApiError as exc:
                logger.debug("assistant.threads.setStatus refused (%s); using a reaction", exc.response.get("error"))
        try:
            await self._client.reactions_add(channel=conv.channel, timestamp=conv.message_ts, name=PROGRESS_REACTION)
        except SlackApiError as exc:
            logger.warning("Could not add the progress reaction: %s", exc.response.get("error"))
            return nothing

        async def remove_reaction() -> None:
            try:
                await self._client.reactions_remove(
                    channel=conv.channel, timestamp=conv.message_ts, name=PROGRESS_REACTION
                )
            except SlackApiError as exc:
                logger.warning("Could not remove the progress reaction: %s", exc.response.get("error"))

        return remove_reaction

    async def _history(self, conv: _Conversation, bot_user_id: str | None, bot_id: str | None) -> tuple[Turn, ...]:
        """The thread's earlier messages as turns; without them the question is still answered."""
        try:
            response = await self._client.conversations_replies(
                channel=conv.channel, ts=conv.thread_ts, limit=HISTORY_FETCH_LIMIT
            )
        except SlackApiError as exc:
            logger.warning("Could not read the thread history: %s", exc.response.get("error"))
            return ()
        turns = []
        for message in response.get("messages") or []:
            if float(message.get("ts", "0")) >= float(conv.message_ts):
                continue
            own = (bot_id is not None and message.get("bot_id") == bot_id) or (
                bot_user_id is not None and message.get("user") == bot_user_id
            )
            text = to_plain(message.get("text") or "", bot_user_id=bot_user_id)
            if text:
                turns.append(Turn(role="assistant" if own else "user", text=text))
        return tuple(turns[-MAX_HISTORY_TURNS:])

    async def _post(self, conv: _Conversation, messages: list[SlackMessage]) -> None:
        try:
            for message in messages:
                await self._client.chat_postMessage(
                    channel=conv.channel, thread_ts=conv.thread_ts, text=message.text, blocks=list(message.blocks),
                    unfurl_links=False, unfurl_media=False,
                )
        except SlackApiError:
            # Most likely a message Slack refused (blocks); a plain apology still tells the asker.
            reference = _reference()
            logger.exception("Posting the answer failed (reference %s)", reference)
            try:
                await self._client.chat_postMessage(
                    channel=conv.channel, thread_ts=conv.thread_ts, text=_apology_text(reference)
                )
            except SlackApiError:
                logger.exception("Posting the apology failed too (reference %s)", reference)

    # --- uploaded documents ------------------------------------------------------------------------------

    def _receive_files(self, event: dict, context: AsyncBoltContext) -> None:
        channel = event["channel"]
        asker = Asker(platform="slack", workspace=context.team_id or event.get("team"), channel=channel,
                      user=event.get("user"))
        conversation = _Conversation(channel, event["ts"], event.get("thread_ts") or event["ts"], asker)
        for file in event["files"]:
            if self._recent.claim(_file_key(file["id"], channel)):
                self._spawn(self._index(file, conversation))

    async def _index_shared_file(self, file_id: str, channel: str, asker: Asker) -> None:
        file = await self._file_info(file_id)
        share = _share_in(file, channel) if file else None
        if file is None or share is None:
            # Nothing to index and no thread to confirm in; the share's message event may still bring it.
            logger.warning("No details for file %s shared in %s", file_id, channel)
            return
        # Claimed only now, so a failed files.info leaves the file to the message event.
        if self._recent.claim(_file_key(file_id, channel)):
            ts, thread_ts = share
            await self._index(file, _Conversation(channel, ts, thread_ts or ts, asker))

    async def _index(self, file: dict, conv: _Conversation) -> None:
        """Index one shared file and confirm, or say why not, in the share's thread."""
        if self._documents is None:
            await self._post(conv, [render_text(UPLOADS_DISABLED)])
            return
        if "url_private_download" not in file:  # e.g. shares from other organisations name only the id
            file = await self._file_info(file["id"]) or file
        name = file.get("name") or file.get("title") or file["id"]
        clear_progress = await self._show_progress(conv, UPLOAD_STATUS_TEXT.format(name=name))
        try:
            try:
                message = render_text(await self._upload_reply(self._documents, file, name, conv.asker))
            except Exception:
                message = _apology(f"indexing {name}")
            await self._post(conv, [message])
        finally:
            await clear_progress()

    async def _upload_reply(self, documents: Documents, file: dict, name: str, asker: Asker) -> str:
        # Decided before anything is downloaded: a non-admin's file is never fetched.
        try:
            documents.require_admin(asker)
        except NotAllowed as exc:
            return escape(str(exc))
        size = file.get("size")
        if isinstance(size, int) and size > documents.max_bytes:
            return too_large_text(name, documents.max_bytes)
        url = file.get("url_private_download") or ""
        if not _on_slack(url, self._client.base_url):
            logger.warning("Not downloading file %s from %r: not a Slack URL", file["id"], url)
            return download_failed_text(name)
        try:
            data = await self._download(url, documents.max_bytes + 1)
        except DownloadFailed as exc:
            logger.warning("Downloading file %s failed: %s", file["id"], exc)
            return download_failed_text(name)
        try:
            record = await self._in_core(documents.add, data, name, asker=asker)
        except (NotAllowed, DocumentRejected) as exc:
            return escape(str(exc))
        return indexed_text(record)

    async def _download(self, url: str, limit: int) -> bytes:
        return await download(url, limit, {"Authorization": f"Bearer {self._client.token}"})

    async def _file_info(self, file_id: str) -> dict | None:
        try:
            response = await self._client.files_info(file=file_id)
        except SlackApiError as exc:
            logger.warning("files.info for %s refused: %s", file_id, exc.response.get("error"))
            return None
        return response.get("file")

    async def _documents_reply(self, verb: DocumentsVerb, argument: str, asker: Asker) -> list[SlackMessage]:
        """`docs` lists the workspace's documents; `forget <file name>` removes one (admins only)."""
        if self._documents is None:
            return [render_text(UPLOADS_DISABLED)]
        try:
            if verb == "docs":
                return render_document_list(await self._in_core(self._documents.list, asker))
            if not argument:
                return [render_text(FORGET_USAGE)]
            removed = await self._in_core(self._documents.forget, argument, asker=asker)
        except NotAllowed as exc:
            return [render_text(escape(str(exc)))]
        except Exception:
            return [_apology(f"running `{verb}`")]
        return [render_text(forgotten_text(argument, removed))]

    # --- feedback --------------------------------------------------------------------------------------------

    async def _record_feedback(self, request_id: str, helpful: bool, asker: Asker, response_url: str | None) -> None:
        try:
            await self._in_core(self._service.record_feedback, request_id, helpful=helpful, asker=asker)
            reply = "Thanks for the feedback — it has been recorded."
        except Exception:
            reference = _reference()
            logger.exception("Recording feedback for %s failed (reference %s)", request_id, reference)
            reply = _apology_text(reference)
        if response_url:
            await _send(AsyncWebhookClient(response_url, retry_handlers=self._retry_handlers), render_text(reply),
                        "ephemeral")

    # --- questions a killed process left unanswered -------------------------------------------------------------

    def replay(self) -> None:
        """Answer, through the usual paths, what the journal holds: accepted, then the process died."""
        if self._journal is None:
            return
        for key, kind, payload in self._journal.open_items():
            # Done before answering: a question that killed the process must not kill every restart too.
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
            self._answer_command_later(key, payload["command"])
            return
        event = payload["event"]
        if not _answerable_event(event):
            raise ValueError("the event has no channel or ts")
        logger.info("Answering %s, accepted but never answered by a previous process", key)
        # Claimed, so a redelivery of an event the dead process never acknowledged is not answered twice.
        self._recent.claim(key)
        self._ask_in_thread(key, event, AsyncBoltContext(payload["context"]))

    async def _journaled(self, key: str, answering: Awaitable[None]) -> None:
        """`answering`, then the question is done: cancelled or failed, it stays open for the next start."""
        await answering
        if self._journal is not None:
            await asyncio.get_running_loop().run_in_executor(self._journal_thread, self._journal.done, key)

    async def _journal_add(self, key: str, kind: str, payload: dict) -> None:
        """On disk when this returns (raises JournalUnavailable otherwise), written on a thread of its own so
        that a slow disk holds up neither the event loop nor the core's threads."""
        if self._journal is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._journal_thread, partial(self._journal.add, key, kind, payload))

    # --- plumbing ----------------------------------------------------------------------------------------------

    async def _in_core(self, function: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._core, partial(function, *args, **kwargs))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Background Slack task failed", exc_info=task.exception())


def _from_a_bot(event: dict) -> bool:
    return bool(event.get("bot_id")) or event.get("subtype") == "bot_message"


def _mentions(event: dict, bot_user_id: str | None) -> bool:
    return bot_user_id is not None and f"<@{bot_user_id}>" in (event.get("text") or "")


def _answerable_event(event: dict) -> bool:
    """Whether the event says where it was asked. One without a channel and ts has nowhere to be answered:
    it is acknowledged (so that Slack does not send it again) and never journaled."""
    answerable = isinstance(event.get("channel"), str) and bool(event["channel"]) and isinstance(event.get("ts"), str)
    if not answerable:
        logger.warning("Ignoring a %s event without channel or ts", event.get("type"))
    return answerable


def _message_key(event: dict) -> str:
    return f"message:{event.get('channel')}:{event.get('ts')}"


def _command_asker(command: dict) -> Asker:
    return Asker(platform="slack", workspace=command.get("team_id"), channel=command.get("channel_id"),
                 user=command.get("user_id"))


def _file_key(file_id: str, channel: str) -> str:
    # The same file shared again in another conversation is a new upload there.
    return f"file:{file_id}:{channel}"


def _share_in(file: dict, channel: str) -> tuple[str, str | None] | None:
    """(ts, thread_ts) of the file's latest share in `channel`, from files.info's `shares`."""
    shares = [s for by_channel in (file.get("shares") or {}).values() for s in by_channel.get(channel, ())]
    if not shares:
        return None
    latest = max(shares, key=lambda share: float(share.get("ts", 0)))
    return latest["ts"], latest.get("thread_ts")


def _on_slack(url: str, api_base_url: str) -> bool:
    """Whether `url` is on the Web API's host or under it (files.slack.com for slack.com, the fake's host and port
    when SLACK_API_URL points at one): the bot token is sent nowhere else."""
    target, api = urlsplit(url), urlsplit(api_base_url)
    host, api_host = target.hostname or "", api.hostname or ""
    try:
        same_port = target.port == api.port
    except ValueError:  # a malformed port
        return False
    return bool(api_host) and target.scheme == api.scheme and same_port and (
        host == api_host or host.endswith("." + api_host))


def _private_flag(text: str) -> tuple[bool, str]:
    first, _, rest = text.partition(" ")
    if first in ("-p", "--private"):
        return True, rest.strip()
    return False, text.strip()


def _reference() -> str:
    return uuid.uuid4().hex[:8]


def _apology_text(reference: str, doing: str = "answering") -> str:
    return (f":warning: Sorry, something went wrong while {escape(doing)}. Please try again later "
            f"(reference `{reference}`).")


def _apology(doing: str = "answering") -> SlackMessage:
    """Called inside an `except` block: logs the traceback under the reference shown to the user."""
    reference = _reference()
    logger.exception("Failed while %s (reference %s)", doing, reference)
    return render_text(_apology_text(reference, doing))


async def _send(webhook: AsyncWebhookClient, message: SlackMessage, response_type: str) -> None:
    response = await webhook.send(
        text=message.text, blocks=list(message.blocks), response_type=response_type, replace_original=False
    )
    if response.status_code != 200:
        logger.error("response_url answered %d: %s", response.status_code, response.body)


__all__ = ["EVENTS_PATH", "HealthDetails", "build_slack_app", "make_web_app", "run_slack", "serve_slack"]
