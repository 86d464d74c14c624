"""A local stand-in for Slack, for the adapter's tests and the load benchmark.

`FakeSlack` is the Web API, `response_url`s, file downloads and a Socket Mode WebSocket, on loopback: it
records every call, answers like Slack (messages refused over Slack's block limits; streams that expire; the
assistant status and suggested prompts; users' locales), and returns 429 with Retry-After or `ok: false` errors on
demand.
The payload builders and `sign()` play Slack's other side: correctly signed Events API, slash-command
and interactivity requests.
`LoopbackSlack` wires the real bolt app to both, on free loopback ports.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Callable
from urllib.parse import parse_qsl, quote, urlencode

from aiohttp import ClientSession, WSMsgType, web

from adapters.conversation import Conversation
from adapters.slack import EVENTS_PATH, SlackConfig, build_slack_app, make_web_app
from core.library import Documents
from core.service import AnswerService
from core.storage import Journal

BOT_USER_ID = "UBOT00001"
BOT_ID = "BBOT00001"
TEAM_ID = "T00000001"
BOT_TOKEN = "xoxb-fake-token"
SIGNING_SECRET = "fake-signing-secret"
POLL_S = 0.02
QUIET_S = 0.5  # a duplicate answer, or one to an ignored event, arrives well within this
STREAM_TTL_S = 300.0  # Slack ends a message's streaming state after about five minutes
# Slack's limits on a message's blocks (see adapters.slack.blocks), and the errors it answers beyond them.
MAX_BLOCKS, MAX_TEXT_CHARS, MAX_MARKDOWN_CHARS, MAX_MESSAGE_CHARS = 50, 3000, 12_000, 13_000
MAX_PROMPTS = 4


@dataclass(frozen=True)
class Call:
    """One request the fake received: a Web API method, "response_url", or "file_download"."""

    method: str
    params: dict
    status: int
    at: float  # time.monotonic()

    @property
    def ends_an_answer(self) -> bool:
        """An answer's last message carries the 👍/👎 buttons; rejections and apologies carry none."""
        return any(block.get("type") == "context_actions" for block in self.params.get("blocks") or [])


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._rate_limits: dict[str, deque[int]] = defaultdict(deque)
        self._errors: dict[str, str] = {}
        self._messages: list[dict] = []
        self._files: dict[str, dict] = {}
        self._file_bytes: dict[str, bytes] = {}
        self._redirects: dict[str, str] = {}
        self._ts = itertools.count(1)
        self._streams: dict[tuple[str, str], float | None] = {}  # (channel, ts) → started at, None once stopped
        self._stream_ttl_s = STREAM_TTL_S
        self._locales: dict[str, str] = {}
        self._runner: web.AppRunner | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self.base_url = ""

    # --- control ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.add_routes([
            web.route("*", "/api/{method}", self._api),
            web.post("/response/{key}", self._response_url),
            web.get("/files-pri/{team_file}/download/{name}", self._download),
            web.get("/socket-mode", self._socket_mode),
        ])
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{_bound_port(site)}"

    async def stop(self) -> None:
        for socket in self._sockets:
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    def response_url(self) -> str:
        return f"{self.base_url}/response/{uuid.uuid4().hex}"

    def rate_limit(self, method: str, retry_after_s: int = 1, times: int = 1) -> None:
        """The next `times` calls of `method` get 429 with `Retry-After: retry_after_s`."""
        self._rate_limits[method].extend([retry_after_s] * times)

    def fail(self, method: str, error: str) -> None:
        """Every call of `method` answers `{"ok": false, "error": error}`, as Slack does."""
        self._errors[method] = error

    def expire_streams_after(self, seconds: float) -> None:
        """Streams end `seconds` after they started (Slack: about five minutes), as if nothing had been appended."""
        self._stream_ttl_s = seconds

    def set_locale(self, user: str, locale: str) -> None:
        """What users.info reports as `user`'s locale (by default en-US)."""
        self._locales[user] = locale

    def message(self, channel: str, ts: str) -> dict:
        """The message as it stands: posted, streamed, stopped or updated."""
        [message] = [m for m in self._messages if m["channel"] == channel and m["ts"] == ts]
        return message

    def bot_messages(self, channel: str, thread_ts: str) -> list[dict]:
        """What the bot posted or streamed in the thread, as it stands, oldest first."""
        return sorted((m for m in self._messages if m["channel"] == channel and m["thread_ts"] == thread_ts
                       and m.get("bot_id") == BOT_ID), key=lambda m: float(m["ts"]))

    def add_message(self, channel: str, ts: str, text: str, *, user: str | None = None, bot_id: str | None = None,
                    thread_ts: str | None = None) -> None:
        """A message that conversations.replies will return (as if a person or bot had posted it)."""
        message = {"type": "message", "ts": ts, "text": text, "channel": channel, "thread_ts": thread_ts or ts}
        message |= {"user": user} if user else {}
        message |= {"bot_id": bot_id} if bot_id else {}
        self._messages.append(message)

    def add_file(self, file_id: str, name: str, data: bytes, *, user: str, channel: str, ts: str,
                 thread_ts: str | None = None, size: int | None = None, filetype: str = "pdf",
                 mimetype: str = "application/pdf", redirect_to: str | None = None) -> dict:
        """A file `user` shared in `channel` with the message `ts`: its `url_private_download` (on this fake)
        serves `data` to the bot token (or, with `redirect_to`, answers 302 there), and files.info describes it.
        Returns the file object as message events carry it; `size` overrides the size Slack reports."""
        url = f"{self.base_url}/files-pri/{TEAM_ID}-{file_id}/download/{quote(name)}"
        file = {"id": file_id, "name": name, "title": name, "filetype": filetype, "mimetype": mimetype,
                "size": len(data) if size is None else size, "user": user, "mode": "hosted", "is_external": False,
                "url_private": url.replace("/download/", "/"), "url_private_download": url}
        share = {"ts": ts, "channel_name": "general", "team_id": TEAM_ID}
        share |= {"thread_ts": thread_ts} if thread_ts else {}
        visibility = "private" if channel.startswith(("D", "G")) else "public"
        self._files[file_id] = file | {"shares": {visibility: {channel: [share]}}}
        self._file_bytes[file_id] = data
        if redirect_to is not None:
            self._redirects[file_id] = redirect_to
        return file

    async def push_envelope(self, payload: dict, envelope_type: str = "events_api") -> str:
        """Deliver `payload` over every Socket Mode connection, as Slack does; returns the envelope id."""
        envelope_id = uuid.uuid4().hex
        for socket in self._sockets:
            await socket.send_json({"envelope_id": envelope_id, "type": envelope_type, "payload": payload,
                                    "accepts_response_payload": envelope_type != "events_api", "retry_attempt": 0})
        return envelope_id

    async def wait_for_socket(self, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._sockets and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        assert self._sockets, "no Socket Mode connection"

    # --- inspection --------------------------------------------------------------------------------------

    def calls_to(self, method: str, where: Callable[[dict], bool] = lambda _: True) -> list[Call]:
        return [c for c in self.calls if c.method == method and c.status == 200 and where(c.params)]

    async def wait_for(self, method: str, count: int = 1, *, where: Callable[[dict], bool] = lambda _: True,
                       timeout_s: float = 5.0) -> list[Call]:
        """Poll until `count` successful calls of `method` (matching `where`) arrived; AssertionError if not."""
        deadline = time.monotonic() + timeout_s
        while True:
            calls = self.calls_to(method, where)
            if len(calls) >= count or time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_S)
        assert len(calls) >= count, f"expected {count} {method} call(s), got {len(calls)}: {self.calls}"
        return calls

    async def assert_no_more(self, method: str, count: int = 0, *, where: Callable[[dict], bool] = lambda _: True,
                             window_s: float = QUIET_S) -> None:
        """Once the expected `count` calls of `method` arrived (see `wait_for`): none more within `window_s`.
        Fails as soon as one more arrives."""
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            calls = self.calls_to(method, where)
            assert len(calls) <= count, f"expected no more than {count} {method} call(s), got {len(calls)}: {calls}"
            await asyncio.sleep(POLL_S)

    # --- handlers ----------------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        if self._rate_limits[method]:
            retry_after = self._rate_limits[method].popleft()
            self.calls.append(Call(method, params, 429, time.monotonic()))
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(retry_after)})
        self.calls.append(Call(method, params, 200, time.monotonic()))
        if method in self._errors:
            return web.json_response({"ok": False, "error": self._errors[method]})
        return web.json_response(self._answer(method, params))

    def _answer(self, method: str, params: dict) -> dict:
        if method == "auth.test":
            return {"ok": True, "url": "https://fake.slack.test/", "team": "Fake", "user": "gdpr-bot",
                    "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID}
        if method in ("chat.postMessage", "chat.update", "chat.stopStream") and _refusal(params.get("blocks")):
            return {"ok": False, "error": _refusal(params.get("blocks"))}
        if method in ("chat.postMessage", "chat.startStream"):
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            self.add_message(params["channel"], ts, params.get("text", ""), user=BOT_USER_ID, bot_id=BOT_ID,
                             thread_ts=params.get("thread_ts"))
            self.message(params["channel"], ts)["blocks"] = params.get("blocks") or []
            if method == "chat.startStream":
                self._streams[(params["channel"], ts)] = time.monotonic()
            return {"ok": True, "channel": params["channel"], "ts": ts, "message": {"text": params.get("text")}}
        if method in ("chat.appendStream", "chat.stopStream"):
            key = (params["channel"], params["ts"])
            if key not in self._streams:
                return {"ok": False, "error": "message_not_found"}
            started = self._streams[key]
            if started is None or time.monotonic() - started > self._stream_ttl_s:
                return {"ok": False, "error": "message_not_in_streaming_state"}
            if method == "chat.stopStream":
                self._streams[key] = None
                self.message(*key)["blocks"] = params.get("blocks") or []
            return {"ok": True, "channel": params["channel"], "ts": params["ts"]}
        if method == "chat.update":
            if not [m for m in self._messages if (m["channel"], m["ts"]) == (params["channel"], params["ts"])]:
                return {"ok": False, "error": "message_not_found"}
            self.message(params["channel"], params["ts"]).update(text=params.get("text", ""),
                                                                 blocks=params.get("blocks") or [])
            return {"ok": True, "channel": params["channel"], "ts": params["ts"]}
        if method == "assistant.threads.setSuggestedPrompts":
            prompts = params.get("prompts") or []
            if not 0 < len(prompts) <= MAX_PROMPTS or not all(p.get("title") and p.get("message") for p in prompts):
                return {"ok": False, "error": "invalid_arguments"}
        if method == "users.info":
            locale = {"locale": self._locales.get(params.get("user"), "en-US")} if params.get("include_locale") else {}
            return {"ok": True, "user": {"id": params.get("user"), "name": "someone", **locale}}
        if method == "apps.connections.open":
            return {"ok": True, "url": self.base_url.replace("http://", "ws://") + "/socket-mode"}
        if method == "files.info":
            if params.get("file") not in self._files:
                return {"ok": False, "error": "file_not_found"}
            return {"ok": True, "file": self._files[params["file"]]}
        if method == "conversations.replies":
            thread = [m for m in self._messages if m["channel"] == params["channel"] and m["thread_ts"] == params["ts"]]
            return {"ok": True, "messages": sorted(thread, key=lambda m: float(m["ts"])), "has_more": False}
        return {"ok": True}

    async def _response_url(self, request: web.Request) -> web.Response:
        self.calls.append(Call("response_url", await request.json(), 200, time.monotonic()))
        return web.Response(text="ok")

    async def _download(self, request: web.Request) -> web.Response:
        """A file's bytes for the bot token; anyone else gets Slack's sign-in page, as Slack does."""
        file_id = request.match_info["team_file"].removeprefix(f"{TEAM_ID}-")
        authorized = request.headers.get("Authorization") == f"Bearer {BOT_TOKEN}"
        found = file_id in self._file_bytes
        status = 200 if found else 404
        self.calls.append(Call("file_download", {"file": file_id, "authorized": authorized}, status, time.monotonic()))
        if not found:
            return web.Response(status=404, text="not found")
        if not authorized:
            return web.Response(text="<html><body>Sign in to Slack</body></html>", content_type="text/html")
        if file_id in self._redirects:
            raise web.HTTPFound(self._redirects[file_id])
        return web.Response(body=self._file_bytes[file_id], content_type="application/pdf")

    async def _socket_mode(self, request: web.Request) -> web.WebSocketResponse:
        """Socket Mode: say hello, then record each acknowledgement the app sends back."""
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_json({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A00000001"}})
        async for frame in socket:
            if frame.type == WSMsgType.TEXT:
                self.calls.append(Call("socket_mode_ack", json.loads(frame.data), 200, time.monotonic()))
        self._sockets.remove(socket)
        return socket


async def _params(request: web.Request) -> dict:
    params = dict(request.query)
    if request.content_type == "application/json":
        params |= await request.json()
    elif request.can_read_body:
        params |= dict(parse_qsl(await request.text()))
    if isinstance(params.get("blocks"), str):
        params["blocks"] = json.loads(params["blocks"])
    return params


def _refusal(blocks: list[dict] | None) -> str | None:
    """The error Slack answers to a message with these blocks, or None when it takes them."""
    blocks = blocks or []
    texts = [b["text"]["text"] for b in blocks if isinstance(b.get("text"), dict)]
    markdown = sum(len(b["text"]) for b in blocks if b.get("type") == "markdown")
    if len(blocks) > MAX_BLOCKS or any(len(t) > MAX_TEXT_CHARS for t in texts) or markdown > MAX_MARKDOWN_CHARS:
        return "invalid_blocks"
    if len(json.dumps(blocks, ensure_ascii=False)) > MAX_MESSAGE_CHARS:
        return "msg_blocks_too_long"
    return None


def _bound_port(site: web.TCPSite) -> int:
    return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


# --- Slack's side of the conversation -------------------------------------------------------------------


def sign(body: str, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends: `v0=` HMAC-SHA256 over `v0:{timestamp}:{body}` with the signing secret."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}


def event_body(event: dict, *, event_id: str | None = None, team: str | None = None) -> str:
    """An Events API envelope (JSON) around `event`, from workspace `team` (by default the event's own)."""
    team = team or event.get("team") or TEAM_ID
    return json.dumps({
        "token": "unused", "team_id": team, "api_app_id": "A00000001", "type": "event_callback",
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}", "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": BOT_USER_ID, "is_bot": True}],
        "event": event,
    })


def mention(text: str, *, channel: str = "C00000001", ts: str, user: str = "U00000001",
            thread_ts: str | None = None, team: str = TEAM_ID) -> dict:
    event = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER_ID}> {text}", "ts": ts,
             "channel": channel, "team": team, "event_ts": ts}
    return event | ({"thread_ts": thread_ts} if thread_ts else {})


def home_opened(*, user: str = "U00000001", channel: str = "D00000001", tab: str = "messages") -> dict:
    """`user` opening the bot's App Home on `tab`: with Slack's agent view, "messages" is opening the bot's DM."""
    return {"type": "app_home_opened", "user": user, "channel": channel, "tab": tab, "event_ts": f"{time.time():.6f}"}


def assistant_thread_started(*, user: str = "U00000001", channel: str = "D00000001", thread_ts: str) -> dict:
    """`user` starting a thread in Slack's older assistant view."""
    return {"type": "assistant_thread_started", "event_ts": f"{time.time():.6f}",
            "assistant_thread": {"user_id": user, "channel_id": channel, "thread_ts": thread_ts,
                                 "context": {"channel_id": "C00000001", "team_id": TEAM_ID}}}


def file_share(files: list[dict], *, channel: str, ts: str, user: str = "U00000001", text: str = "",
               thread_ts: str | None = None, team: str = TEAM_ID) -> dict:
    """The `message` event (subtype file_share) of `user` sharing `files`; DM channel ids start with "D"."""
    event = {"type": "message", "subtype": "file_share", "user": user, "text": text, "files": files,
             "upload": True, "ts": ts, "channel": channel, "team": team, "event_ts": ts,
             "channel_type": "im" if channel.startswith("D") else "channel"}
    return event | ({"thread_ts": thread_ts} if thread_ts else {})


def file_shared(file_id: str, *, channel: str, user: str = "U00000001") -> dict:
    """The `file_shared` event of the same share: only ids, the rest is for files.info."""
    return {"type": "file_shared", "channel_id": channel, "file_id": file_id, "user_id": user,
            "file": {"id": file_id}, "event_ts": f"{time.time():.6f}"}


def command_body(text: str, *, response_url: str, channel: str = "C00000001", user: str = "U00000001",
                 team: str = TEAM_ID) -> str:
    """A `/gdpr` slash-command request (form-encoded)."""
    return urlencode({
        "token": "unused", "team_id": team, "team_domain": "fake", "channel_id": channel,
        "channel_name": "general", "user_id": user, "user_name": "asker", "command": "/gdpr", "text": text,
        "api_app_id": "A00000001", "response_url": response_url, "trigger_id": "1.2.3",
    })


def button_body(action_id: str, value: str, *, response_url: str, channel: str = "C00000001",
                user: str = "U00000002", element: str = "button") -> str:
    """A block_actions request for a click on a button, or on one of the `feedback_buttons` (form-encoded
    `payload`); `value` is the clicked button's."""
    payload = {
        "type": "block_actions", "team": {"id": TEAM_ID, "domain": "fake"}, "user": {"id": user},
        "api_app_id": "A00000001", "token": "unused", "trigger_id": "1.2.3", "response_url": response_url,
        "channel": {"id": channel, "name": "general"}, "container": {"type": "message", "channel_id": channel},
        "actions": [{"type": element, "action_id": action_id, "block_id": "b1", "value": value,
                     "action_ts": str(time.time())}],
    }
    return urlencode({"payload": json.dumps(payload)})


class LoopbackSlack:
    """The real bolt app in HTTP mode and a `FakeSlack`, each on a free loopback port.

        async with LoopbackSlack(service) as slack:
            status, _ = await slack.post(event_body(mention("…", ts="1.1")))

    `conversation` replaces the one made of `service` and `documents`; `streaming` streams answers (LLM mode).
    """

    def __init__(self, service: AnswerService, *, signing_secret: str = SIGNING_SECRET,
                 documents: Documents | None = None, journal: Journal | None = None,
                 conversation: Conversation | None = None, streaming: bool = False):
        self.conversation = conversation or Conversation(service, documents)
        self.journal = journal
        self._streaming = streaming
        self.fake = FakeSlack()
        self._signing_secret = signing_secret
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self.events_url = ""

    async def __aenter__(self) -> LoopbackSlack:
        await self.fake.start()
        config = SlackConfig(bot_token=BOT_TOKEN, signing_secret=self._signing_secret, api_url=self.fake.api_url,
                             streaming=self._streaming)
        web_app = make_web_app(build_slack_app(config, self.conversation, journal=self.journal),
                               signing_secret=self._signing_secret)
        self._runner = web.AppRunner(web_app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{_bound_port(site)}"
        self.events_url = self.base_url + EVENTS_PATH
        self._session = ClientSession()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.fake.stop()

    async def post(self, body: str, *, headers: dict[str, str] | None = None,
                   content_type: str | None = None) -> tuple[int, str]:
        """POST a signed request to /slack/events (unless `headers` carry their own signature)."""
        assert self._session is not None
        content_type = content_type or ("application/json" if body.startswith("{") else
                                        "application/x-www-form-urlencoded")
        all_headers = {"Content-Type": content_type} | (headers if headers is not None else sign(body))
        async with self._session.post(self.events_url, data=body.encode(), headers=all_headers) as response:
            return response.status, await response.text()

    async def get(self, path: str) -> tuple[int, str]:
        assert self._session is not None
        async with self._session.get(self.base_url + path) as response:
            return response.status, await response.text()


__all__ = [
    "BOT_ID", "BOT_TOKEN", "BOT_USER_ID", "Call", "FakeSlack", "LoopbackSlack", "SIGNING_SECRET", "TEAM_ID",
    "assistant_thread_started", "button_body", "command_body", "event_body", "file_share", "file_shared",
    "home_opened", "mention", "sign",
]
