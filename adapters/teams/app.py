"""Microsoft Teams: the aiohttp app serving `POST /api/messages` (authenticated by the Bot Framework SDK) and
`GET /healthz`; what a message means and how it is answered is the conversation's (`adapters.conversation`)."""
from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal

from aiohttp import web
from botbuilder.core import serializer_helper
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity, ActivityTypes, DeliveryModes
from botframework.connector.auth import AuthenticateRequestResult, BotFrameworkAuthentication
from msrest.serialization import Model

from adapters.conversation import Conversation
from adapters.teams.bot import GdprTeamsBot
from adapters.teams.hosts import file_url_policy, service_url_policy
from adapters.web import HealthDetails, UrlPolicy, healthz

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024  # inbound activities are a few KB; nothing near this is a chat message
# An activity nests under ten deep. Past this, json.loads would recurse to the interpreter's limit, and a
# finaliser that the collector runs down there fails while its own error is being formatted.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
SHUTDOWN_GRACE_S = 10.0


@dataclass(frozen=True)
class TeamsConfig:
    """The Bot Framework credentials; `bot.wiring` builds it from the settings, which check that they are
    consistent. No app id: the SDK's unauthenticated mode (the Emulator on loopback). `streaming`: answers in
    personal chats are streamed (LLM mode)."""

    app_id: str | None = None
    app_password: str | None = None
    app_type: Literal["MultiTenant", "SingleTenant", "UserAssignedMSI"] = "MultiTenant"
    tenant_id: str | None = None
    streaming: bool = False


@dataclass(frozen=True)
class _SdkConfig:
    """The attribute names ConfigurationBotFrameworkAuthentication reads."""

    APP_ID: str | None
    APP_PASSWORD: str | None
    APP_TYPE: str
    APP_TENANTID: str | None


class _MessagesEndpoint:
    """POST /api/messages: parses and authenticates the activity itself (CloudAdapter.process answers
    500 to malformed JSON and tokens), then runs the turn through the CloudAdapter."""

    def __init__(self, auth: BotFrameworkAuthentication, adapter: CloudAdapter, bot: GdprTeamsBot,
                 service_urls: UrlPolicy) -> None:
        self._auth = auth
        self._adapter = adapter
        self._bot = bot
        self._service_urls = service_urls
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
        if not self._service_urls(activity.service_url):
            # Replies go to the serviceUrl the activity names: never to one that is not the Bot Framework's.
            logger.warning("Teams activity refused: serviceUrl %r is not a Bot Framework service", activity.service_url)
            raise web.HTTPBadRequest(text="The serviceUrl is not a Bot Framework service this bot replies to.")
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
    if _nesting_depth(body) > MAX_JSON_DEPTH:
        raise web.HTTPBadRequest(text=f"The body nests deeper than {MAX_JSON_DEPTH} levels.")
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


def _nesting_depth(body: bytes) -> int:
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(accumulate(1 if b in b"[{" else -1 for b in brackets), default=0)


def build_teams_app(config: TeamsConfig, conversation: Conversation, *,
                    extra_routes: Iterable[web.AbstractRouteDef] = (), health: HealthDetails | None = None
                    ) -> web.Application:
    """The aiohttp app serving `POST /api/messages` and `GET /healthz` (plus `extra_routes`)."""
    # MultiTenant without an id is the SDK's "authentication disabled" mode.
    sdk = _SdkConfig(config.app_id, config.app_password, config.app_type if config.app_id else "MultiTenant",
                     config.tenant_id)
    auth = ConfigurationBotFrameworkAuthentication(sdk)
    authenticated = bool(config.app_id)
    bot = GdprTeamsBot(conversation, file_url_policy(authenticated), streaming=config.streaming)
    endpoint = _MessagesEndpoint(auth, CloudAdapter(auth), bot, service_url_policy(authenticated))
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/api/messages", endpoint.handle)
    app.add_routes([healthz(health), *extra_routes])
    app.on_cleanup.append(endpoint.drain)
    return app


def run_teams(config: TeamsConfig, conversation: Conversation, host: str, port: int, *,
              extra_routes: Iterable[web.AbstractRouteDef] = (), health: HealthDetails | None = None) -> None:
    """Serve the Teams bot until interrupted (the settings refuse to serve without credentials beyond loopback)."""
    app = build_teams_app(config, conversation, extra_routes=extra_routes, health=health)
    if not config.app_id:
        logger.warning("Teams adapter running without credentials: requests are not authenticated")
    logger.info("Teams adapter listening on http://%s:%d/api/messages", host, port)
    web.run_app(app, host=host, port=port, print=None)
