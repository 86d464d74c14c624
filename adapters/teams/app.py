"""Microsoft Teams adapter: Bot Framework activities in, cited answers out.

Every Bot Framework type stays in this module (and the pure JSON in `teams_render`), so moving to
another SDK touches only these two files. The core is reached through `AnswerService` alone, and uploaded
PDFs through `Documents`: files sent to the bot are indexed for the tenant, `docs` lists them and
`forget <file name>` removes one.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Iterable, TypeVar
from urllib.parse import urlsplit

from aiohttp import web
from botbuilder.core import (
    ActivityHandler,
    CardFactory,
    InvokeResponse,
    TurnContext,
    serializer_helper,
)
from botbuilder.integration.aiohttp import (
    CloudAdapter,
    ConfigurationBotFrameworkAuthentication,
)
from botbuilder.schema import (
    Activity,
    ActivityTypes,
    DeliveryModes,
    Entity,
    TextFormatTypes,
)
from botframework.connector import Channels
from botframework.connector.auth import (
    AuthenticateRequestResult,
    BotFrameworkAuthentication,
)
from msrest.serialization import Model

from adapters.download import DownloadFailed, download
from adapters.teams_render import (
    FORGET_USAGE,
    UPLOADS_DISABLED,
    USAGE_HINT,
    Reply,
    apology,
    document_list_text,
    download_failed_text,
    forgotten_text,
    indexed_text,
    render_answer,
)
from bot.settings import Settings, SettingsError
from core.library import DocumentRejected, Documents, DocumentsVerb, NotAllowed, documents_command
from core.models import Asker, Turn
from core.service import AnswerService, QuestionRejected

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024  # inbound activities are a few KB; nothing near this is a chat message
HISTORY_TURNS = 6  # earlier messages (questions and answers) passed to the core as a thread's context
MAX_CONVERSATIONS = 5000
MAX_TRACKED_ANSWERS = 10_000  # sent answers whose feedback buttons can still be mapped to a request id
SHUTDOWN_GRACE_S = 10.0
FEEDBACK_INVOKE = "message/submitAction"
# Teams renders the citation entity in personal and group chats but not in channels.
NATIVE_CITATION_CONVERSATIONS = frozenset({"personal", "groupChat"})
FILE_DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"


K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A dict that forgets its least recently used entries beyond `capacity`."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)


class _ThreadMemory:
    """The last few turns of each recent conversation, so follow-ups keep their context."""

    def __init__(self, turns: int = HISTORY_TURNS, conversations: int = MAX_CONVERSATIONS) -> None:
        self._turns = turns
        self._threads: _Lru[str, deque[Turn]] = _Lru(conversations)

    def history(self, conversation_id: str) -> tuple[Turn, ...]:
        return tuple(self._threads.get(conversation_id) or ())

    def remember(self, conversation_id: str, question: str, answer: str) -> None:
        thread = self._threads.get(conversation_id) or deque(maxlen=self._turns)
        thread.extend((Turn("user", question), Turn("assistant", answer)))
        self._threads.put(conversation_id, thread)


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


@dataclass(frozen=True)
class _SharedFile:
    name: str
    download_url: str  # pre-authorised and short-lived: fetched without credentials




class GdprTeamsBot(ActivityHandler):
    """Answers messages in channels, group chats and personal chats; records feedback-button clicks; indexes
    the files sent to it. Without `documents`, files and document commands are answered that uploads are not
    enabled."""

    def __init__(self, service: AnswerService, documents: Documents | None = None) -> None:
        self._service = service
        self._documents = documents
        self._memory = _ThreadMemory()
        self._answers: _Lru[str, str] = _Lru(MAX_TRACKED_ANSWERS)

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        files = _shared_files(activity)
        if files:
            await self._index_files(turn_context, files)
            return
        question = _question_text(activity)
        if not question:
            await turn_context.send_activity(_message(Reply(USAGE_HINT)))
            return
        command = documents_command(question)
        if command is not None:
            reply = await self._documents_reply(*command, _asker(activity))
            await turn_context.send_activity(_message(Reply(reply)))
            return
        # Sent explicitly: the SDK's ShowTypingMiddleware waits 0.5 s first, so fast answers got none.
        await turn_context.send_activity(Activity(type=ActivityTypes.typing))
        conversation_id = activity.conversation.id
        try:
            answer = await asyncio.to_thread(
                self._service.ask, question, history=self._memory.history(conversation_id), asker=_asker(activity)
            )
        except QuestionRejected as exc:
            await turn_context.send_activity(_message(Reply(str(exc))))
            return
        except Exception:
            reference = uuid.uuid4().hex[:8]
            logger.exception("Answering a Teams message failed (reference %s)", reference)
            await turn_context.send_activity(_message(Reply(apology(reference))))
            return
        # Remembered before sending so a follow-up arriving right after the answer already sees it.
        self._memory.remember(conversation_id, question, answer.text)
        reply = render_answer(answer, with_card=not _shows_native_citations(activity))
        try:
            sent = await turn_context.send_activity(_message(reply))
        except Exception:
            # Teams refuses a whole message over one field it rejects (a citation, the card); the core's
            # plain rendering still carries every statement with its verbatim quotes.
            logger.exception("Sending answer %s failed; retrying as plain text", answer.request_id)
            sent = await turn_context.send_activity(_message(Reply(answer.text)))
        if sent is not None and sent.id:
            self._answers.put(sent.id, answer.request_id)

    async def _index_files(self, turn_context: TurnContext, files: list[_SharedFile]) -> None:
        await turn_context.send_activity(Activity(type=ActivityTypes.typing))
        asker = _asker(turn_context.activity)
        for file in files:
            await turn_context.send_activity(_message(Reply(await self._upload_reply(file, asker))))

    async def _upload_reply(self, file: _SharedFile, asker: Asker) -> str:
        if self._documents is None:
            return UPLOADS_DISABLED
        try:
            # Decided before anything is downloaded: a non-admin's file is never fetched.
            self._documents.require_admin(asker)
            data = await _download(file.download_url, self._documents.max_bytes + 1)
            record = await asyncio.to_thread(self._documents.add, data, file.name, asker=asker)
        except DownloadFailed as exc:
            logger.warning("Downloading %s failed: %s", file.name, exc)
            return download_failed_text(file.name)
        except (NotAllowed, DocumentRejected) as exc:
            return str(exc)
        except Exception:
            return _logged_apology(f"indexing {file.name}")
        return indexed_text(record)

    async def _documents_reply(self, verb: DocumentsVerb, argument: str, asker: Asker) -> str:
        """`docs` lists the tenant's documents; `forget <file name>` removes one (admins only)."""
        if self._documents is None:
            return UPLOADS_DISABLED
        try:
            if verb == "docs":
                return document_list_text(await asyncio.to_thread(self._documents.list, asker))
            if not argument:
                return FORGET_USAGE
            removed = await asyncio.to_thread(self._documents.forget, argument, asker=asker)
        except NotAllowed as exc:
            return str(exc)
        except Exception:
            return _logged_apology(f"running {verb}")
        return forgotten_text(argument, removed)

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
            # Answers are mapped in memory only; after a restart or eviction the click cannot be attributed.
            logger.warning("Feedback on unknown Teams message %r not recorded", activity.reply_to_id)
            return InvokeResponse(status=200)
        try:
            await asyncio.to_thread(
                self._service.record_feedback, request_id, helpful=reaction == "like", asker=_asker(activity)
            )
        except Exception:
            logger.exception("Recording feedback for %s failed (reference %s)", request_id, uuid.uuid4().hex[:8])
            return InvokeResponse(status=500)
        return InvokeResponse(status=200)


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


def _shared_files(activity: Activity) -> list[_SharedFile]:
    """Files sent with the message. Teams sends them to bots in personal chats (manifest: supportsFiles)."""
    files = []
    for attachment in activity.attachments or []:
        content = attachment.content if isinstance(attachment.content, dict) else {}
        url = content.get("downloadUrl")
        if attachment.content_type == FILE_DOWNLOAD_INFO and isinstance(url, str) and url:
            files.append(_SharedFile(attachment.name or "document", url))
    return files


def _may_download(url: str) -> bool:
    """HTTPS, or plain HTTP on loopback (the Emulator and local tests)."""
    parts = urlsplit(url)
    return parts.scheme == "https" or (parts.scheme == "http" and _is_loopback(parts.hostname or ""))


async def _download(url: str, limit: int) -> bytes:
    if not _may_download(url):
        raise DownloadFailed(f"not an HTTPS URL: {url!r}")
    return await download(url, limit)


def _logged_apology(doing: str) -> str:
    """Called inside an `except` block: logs the traceback under the reference shown to the user."""
    reference = uuid.uuid4().hex[:8]
    logger.exception("Failed while %s in Teams (reference %s)", doing, reference)
    return apology(reference, doing)


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


def _shows_native_citations(activity: Activity) -> bool:
    conversation_type = activity.conversation.conversation_type if activity.conversation else None
    return activity.channel_id == Channels.ms_teams and conversation_type in NATIVE_CITATION_CONVERSATIONS


def _message(reply: Reply) -> Activity:
    return Activity(
        type=ActivityTypes.message,
        text=reply.text,
        text_format=TextFormatTypes.markdown,
        entities=[_RawEntity(entity) for entity in reply.entities] or None,
        attachments=[CardFactory.adaptive_card(card) for card in reply.cards] or None,
        channel_data=reply.channel_data,
    )


class _MessagesEndpoint:
    """POST /api/messages: parses and authenticates the activity itself (CloudAdapter.process answers
    500 to malformed JSON and tokens), then runs the turn through the CloudAdapter."""

    def __init__(self, auth: BotFrameworkAuthentication, adapter: CloudAdapter, bot: GdprTeamsBot) -> None:
        self._auth = auth
        self._adapter = adapter
        self._bot = bot
        self._turns: set[asyncio.Task[None]] = set()

    async def handle(self, request: web.Request) -> web.Response:
        activity = await _read_activity(request)
        try:
            authenticated = await self._auth.authenticate_request(activity, request.headers.get("Authorization", ""))
        except Exception as exc:  # the SDK signals bad tokens with PermissionError, PyJWT errors, KeyError…
            logger.warning("Unauthorized Teams request rejected (%s: %s)", type(exc).__name__, exc)
            raise web.HTTPUnauthorized() from None
        if not activity.type or not activity.service_url or not (activity.conversation and activity.conversation.id):
            raise web.HTTPBadRequest(text="An activity needs type, serviceUrl and conversation.id.")
        if activity.type == ActivityTypes.message and activity.delivery_mode != DeliveryModes.expect_replies:
            # Answered in the background: the connector expects an acknowledgement within 15 s and an
            # answer may take longer; the reply goes out through the connector, not this response.
            self._start(self._run_turn(authenticated, activity))
            return web.Response(status=200)
        invoke_response = await self._run_turn(authenticated, activity)
        if invoke_response is None:
            return web.Response(status=200)
        body = invoke_response.body
        if body is None:
            return web.Response(status=invoke_response.status)
        # serializer_helper takes only msrest models; expectReplies bodies are already plain dicts.
        return web.json_response(serializer_helper(body) if isinstance(body, Model) else body,
                                 status=invoke_response.status)

    def _run_turn(self, authenticated: AuthenticateRequestResult, activity: Activity) -> Awaitable[Any]:
        return self._adapter.process_activity(authenticated, activity, self._bot.on_turn)

    def _start(self, turn: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(_logged(turn))
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)

    async def drain(self, _app: web.Application) -> None:
        """On shutdown, let answers in progress reach their conversations for a moment."""
        if not self._turns:
            return
        _, pending = await asyncio.wait(self._turns, timeout=SHUTDOWN_GRACE_S)
        for task in pending:
            task.cancel()


async def _logged(turn: Awaitable[Any]) -> None:
    try:
        await turn
    except Exception:
        logger.exception("A Teams turn failed outside the answer path (e.g. the connector was unreachable)")


async def _read_activity(request: web.Request) -> Activity:
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(text="Expected Content-Type: application/json.")
    body = await request.read()  # raises 413 beyond the app's client_max_size
    try:
        payload = json.loads(body)
    except ValueError:
        raise web.HTTPBadRequest(text="The body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise web.HTTPBadRequest(text="The body must be a JSON object (an activity).")
    try:
        return Activity().deserialize(payload)
    except Exception:  # msrest raises DeserializationError and, for some shapes, TypeError/AttributeError
        raise web.HTTPBadRequest(text="The body is not a valid activity.") from None


@dataclass(frozen=True)
class _SdkConfig:
    """The attribute names ConfigurationBotFrameworkAuthentication reads."""

    APP_ID: str | None
    APP_PASSWORD: str | None
    APP_TYPE: str
    APP_TENANTID: str | None


def _sdk_config(settings: Settings) -> _SdkConfig:
    app_id = settings.microsoft_app_id
    if not app_id:
        if settings.microsoft_app_password or settings.microsoft_app_tenant_id:
            raise SettingsError(
                "Invalid setting MICROSOFT_APP_ID: required when a Microsoft app password or tenant is set"
            )
        # MultiTenant without an id is the SDK's "authentication disabled" mode (Emulator on loopback).
        return _SdkConfig(None, None, "MultiTenant", None)
    app_type = settings.microsoft_app_type
    if app_type != "UserAssignedMSI" and not settings.microsoft_app_password:
        raise SettingsError("Invalid setting MICROSOFT_APP_PASSWORD: required when MICROSOFT_APP_ID is set")
    if app_type != "MultiTenant" and not settings.microsoft_app_tenant_id:
        raise SettingsError(f"Invalid setting MICROSOFT_APP_TENANT_ID: required for MICROSOFT_APP_TYPE={app_type}")
    return _SdkConfig(app_id, settings.microsoft_app_password, app_type, settings.microsoft_app_tenant_id)


def build_teams_app(
    settings: Settings,
    service: AnswerService,
    *,
    extra_routes: Iterable[web.AbstractRouteDef] | None = None,
    documents: Documents | None = None,
    health: Callable[[], dict] | None = None,
) -> web.Application:
    """The aiohttp app serving `POST /api/messages` and `GET /healthz` (plus `extra_routes`);
    `health` adds details (index status, …) to the healthz JSON."""

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **(health() if health else {})})

    auth = ConfigurationBotFrameworkAuthentication(_sdk_config(settings))
    endpoint = _MessagesEndpoint(auth, CloudAdapter(auth), GdprTeamsBot(service, documents))
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/api/messages", endpoint.handle)
    app.router.add_get("/healthz", healthz)
    if extra_routes:
        app.add_routes(extra_routes)
    app.on_cleanup.append(endpoint.drain)
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_teams(settings: Settings, service: AnswerService, host: str, port: int, *,
              documents: Documents | None = None, extra_routes: Iterable[web.AbstractRouteDef] | None = None,
              health: Callable[[], dict] | None = None) -> None:
    """Serve the Teams bot until interrupted. Raises SettingsError (one line) rather than expose an
    unauthenticated bot beyond loopback."""
    if not settings.microsoft_app_id and not _is_loopback(host) and not settings.teams_allow_unauthenticated_remote:
        raise SettingsError(
            f"Refusing to serve Teams on {host} without MICROSOFT_APP_ID/MICROSOFT_APP_PASSWORD; "
            "use a loopback host or set TEAMS_ALLOW_UNAUTHENTICATED_REMOTE=true"
        )
    app = build_teams_app(settings, service, documents=documents, extra_routes=extra_routes, health=health)
    if not settings.microsoft_app_id:
        logger.warning("Teams adapter running without credentials: requests are not authenticated")
    logger.info("Teams adapter listening on http://%s:%d/api/messages", host, port)
    web.run_app(app, host=host, port=port, print=None)


__all__ = ["GdprTeamsBot", "build_teams_app", "run_teams"]
