"""The Slack app: a slack-bolt AsyncApp served over HTTP (`/slack/events`, signature-verified before anything is
parsed) or Socket Mode, with `GET /healthz` on aiohttp either way.

Everything Slack-specific stays in this package; what a message means and how it is answered is the
conversation's (`adapters.conversation`).
"""
from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from adapters.conversation import Conversation
from adapters.slack.listeners import Listeners
from adapters.slack.outbox import retry_handlers
from adapters.web import HealthDetails, healthz
from core.storage import Journal

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


@dataclass(frozen=True)
class SlackConfig:
    """What the Slack app needs to run; `bot.wiring` builds it from the settings, which check that HTTP mode has a
    signing secret."""

    bot_token: str
    signing_secret: str | None = None  # HTTP mode
    app_token: str | None = None  # Socket Mode, when set
    api_url: str | None = None  # another Web API (a fake, in tests)
    streaming: bool = False  # answers are streamed (LLM mode); extractive ones come as one message each


def build_slack_app(config: SlackConfig, conversation: Conversation, *, journal: Journal | None = None) -> AsyncApp:
    """The bolt app with every listener registered; works for HTTP mode and Socket Mode alike.

    With a `journal`, each question is journaled until answered, and the questions a previous process accepted
    but never answered are answered now, so build the app inside the running event loop.
    """
    client = AsyncWebClient(token=config.bot_token, base_url=config.api_url or AsyncWebClient.BASE_URL,
                            retry_handlers=retry_handlers())
    # An empty signing secret (Socket Mode) makes every HTTP request fail verification, which is the safe side.
    # process_before_response: bolt would otherwise acknowledge an event before its listener runs, so a
    # question could be acknowledged (and never re-sent by Slack) before it is journaled. Every listener
    # acknowledges within milliseconds and answers in the background.
    app = AsyncApp(client=client, signing_secret=config.signing_secret or "", name="gdpr-bot",
                   process_before_response=True)
    listeners = Listeners(conversation, client, journal, streaming=config.streaming)
    listeners.register(app)
    listeners.replay()
    return app


class _Events:
    """`POST /slack/events`: the signature is checked on the raw bytes before anything is parsed, and what bolt
    cannot parse is answered 400 here; bolt would answer both with a 500 and a traceback."""

    def __init__(self, app: AsyncApp, signing_secret: str | None):
        self._app = app
        # No secret (Socket Mode): every HTTP request fails verification, which is the safe side.
        self._verifier = SignatureVerifier(signing_secret) if signing_secret else None

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        text = self._verified_text(raw, request.headers)
        try:
            bolt_request = AsyncBoltRequest(body=text, query=request.query_string, headers=request.headers)
        except Exception:  # json.loads, and bolt's field extraction on bodies of unexpected shapes
            raise web.HTTPBadRequest(text="The body is not a Slack request.") from None
        if not isinstance(bolt_request.body, dict) or not isinstance(bolt_request.body.get("event", {}), dict):
            raise web.HTTPBadRequest(text="The body is not a Slack request.")
        return await to_aiohttp_response(await self._app.async_dispatch(bolt_request))

    def _verified_text(self, raw: bytes, headers: Mapping[str, str]) -> str:
        timestamp, signature = headers.get("X-Slack-Request-Timestamp", ""), headers.get("X-Slack-Signature")
        if self._verifier is None or not (timestamp.isascii() and timestamp.isdigit()) or not signature:
            raise web.HTTPUnauthorized(text="Invalid request signature.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:  # Slack signs UTF-8 text only
            raise web.HTTPBadRequest(text="The body is not UTF-8 text.") from None
        if not self._verifier.is_valid(text, timestamp, signature):
            raise web.HTTPUnauthorized(text="Invalid request signature.")
        return text


def make_web_app(app: AsyncApp, *, signing_secret: str | None = None, extra_routes: Iterable[web.RouteDef] = (),
                 health: HealthDetails | None = None, serve_events: bool = True) -> web.Application:
    """aiohttp app: `POST /slack/events` (when `serve_events`, verified with `signing_secret`), `GET /healthz`, and
    any `extra_routes`."""
    web_app = web.Application()
    routes = [healthz(health), *extra_routes]
    if serve_events:
        routes.append(web.post(EVENTS_PATH, _Events(app, signing_secret).handle))
    web_app.add_routes(routes)
    return web_app


def run_slack(config: SlackConfig, conversation: Conversation, port: int = 3000, *,
              extra_routes: Sequence[web.RouteDef] = (), health: HealthDetails | None = None,
              journal: Journal | None = None) -> None:
    """Serve until SIGINT/SIGTERM: Socket Mode when an app token is configured, else HTTP mode on `port`.

    Accepted questions are kept in `journal` until answered, so a killed process (or, with a shared journal, another
    replica) answers them.
    """
    serving = serve_slack(config, conversation, port, extra_routes=extra_routes, health=health, journal=journal)
    try:
        asyncio.run(_until_terminated(serving))
    except KeyboardInterrupt:
        logger.info("Slack adapter stopped")


async def serve_slack(config: SlackConfig, conversation: Conversation, port: int, *, host: str = "0.0.0.0",
                      extra_routes: Sequence[web.RouteDef] = (), health: HealthDetails | None = None,
                      journal: Journal | None = None) -> None:
    """`run_slack` as a coroutine: serves until cancelled.

    In Socket Mode `/healthz` (and `extra_routes`) are still served on `port`, so container health checks
    and metrics scraping work the same in both modes. `journal`: see `build_slack_app`.
    """
    app = build_slack_app(config, conversation, journal=journal)
    socket_mode = config.app_token is not None
    runner = web.AppRunner(make_web_app(app, signing_secret=config.signing_secret, extra_routes=extra_routes,
                                        health=health, serve_events=not socket_mode))
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    handler = AsyncSocketModeHandler(app, config.app_token) if socket_mode else None
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


async def _until_terminated(serving: Awaitable[None]) -> None:
    """Run `serving`, cancelling it cleanly on SIGTERM (how containers are stopped)."""
    task = asyncio.ensure_future(serving)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        logger.info("Slack adapter stopped")
