"""A local stand-in for the Bot Connector service: records every activity a bot POSTs to it (messages, typing
indicators, and the streamed updates and final messages of Teams streaming, each with its streaminfo entity).

Point an incoming activity's `serviceUrl` at `FakeBotConnector.url` and the Teams adapter replies
here instead of to Microsoft. It also serves files at download URLs, as Teams does for the files a user
sends the bot (`serve_file`, `file_attachment`). Serves on loopback only; used by the adapter tests and
the evals.
"""
from __future__ import annotations

import asyncio
import itertools
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote

from aiohttp import web

POLL_INTERVAL_S = 0.02
QUIET_S = 0.5  # a duplicate reply arrives well within this
FILE_DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"


def file_attachment(name: str, download_url: str, file_type: str = "pdf") -> dict[str, Any]:
    """The attachment Teams puts in a message when a user sends the bot a file (personal chats)."""
    return {"contentType": FILE_DOWNLOAD_INFO, "name": name, "contentUrl": f"https://contoso.sharepoint.com/{name}",
            "content": {"downloadUrl": download_url, "uniqueId": "1150d938-8870-4044-9f17-8ab0c7bb4a3c",
                        "fileType": file_type}}


@dataclass(frozen=True)
class SentActivity:
    """One activity as the bot sent it, with where it was addressed."""

    conversation_id: str
    reply_to_id: str | None
    activity: dict[str, Any]
    authorization: str | None
    id: str
    accepted: bool = True

    @property
    def type(self) -> str | None:
        return self.activity.get("type")

    @property
    def text(self) -> str:
        return self.activity.get("text") or ""

    @property
    def stream_info(self) -> dict[str, Any] | None:
        """The streaminfo entity of a streamed update or of a stream's final message; None outside a stream."""
        return next((e for e in self.activity.get("entities") or [] if e.get("type") == "streaminfo"), None)


class FakeBotConnector:
    """`async with FakeBotConnector() as connector:` serves on a free loopback port at `connector.url`.

    `reject` plays Teams refusing a message it finds invalid (it answers 400 to the whole activity
    over one field): activities it matches are recorded with `accepted=False` and get a 400.
    """

    def __init__(self, reject: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.sent: list[SentActivity] = []
        self.downloads: list[str] = []  # the names of the files served, in order
        self._files: dict[str, bytes] = {}
        self._redirects: dict[str, str] = {}
        self._file_keys = itertools.count(1)
        self._reject = reject
        self.url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v3/conversations/{conversation_id}/activities", self._receive)
        app.router.add_post("/v3/conversations/{conversation_id}/activities/{reply_to_id}", self._receive)
        app.router.add_get("/files/{key}/{name}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeBotConnector:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def serve_file(self, name: str, data: bytes) -> str:
        """A download URL for `data` on this connector (call after `start`), like Teams' pre-authorised ones."""
        key = f"file-{next(self._file_keys)}"
        self._files[key] = data
        return f"{self.url}files/{key}/{quote(name)}"

    def serve_redirect(self, name: str, location: str) -> str:
        """A download URL on this connector that answers 302 to `location` (a file host moved, or a trap)."""
        key = f"redirect-{next(self._file_keys)}"
        self._redirects[key] = location
        return f"{self.url}files/{key}/{quote(name)}"

    async def wait_for(
        self, predicate: Callable[[SentActivity], bool] = lambda _: True, *, count: int = 1, timeout: float = 5.0
    ) -> list[SentActivity]:
        """The first `count` recorded activities matching `predicate`, waiting at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            matching = [sent for sent in self.sent if predicate(sent)]
            if len(matching) >= count:
                return matching[:count]
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"expected {count} matching activities within {timeout} s; received "
                    f"{[(s.type, s.text[:60]) for s in self.sent]}"
                )
            await asyncio.sleep(POLL_INTERVAL_S)

    async def assert_no_more(self, predicate: Callable[[SentActivity], bool] = lambda _: True, *, count: int = 0,
                             window_s: float = QUIET_S) -> None:
        """Once the expected `count` activities matching `predicate` arrived (see `wait_for`): none more within
        `window_s`. Fails as soon as one more arrives."""
        deadline = time.monotonic() + window_s
        while time.monotonic() < deadline:
            matching = [sent for sent in self.sent if predicate(sent)]
            assert len(matching) <= count, (
                f"expected no more than {count} matching activities; received {[(s.type, s.text[:60]) for s in matching]}")
            await asyncio.sleep(POLL_INTERVAL_S)

    async def _receive(self, request: web.Request) -> web.Response:
        activity = await request.json()
        sent = SentActivity(
            conversation_id=request.match_info["conversation_id"],
            reply_to_id=request.match_info.get("reply_to_id"),
            activity=activity,
            authorization=request.headers.get("Authorization"),
            id=f"sent-{next(self._ids)}",
            accepted=not (self._reject and self._reject(activity)),
        )
        self.sent.append(sent)
        if not sent.accepted:
            return web.json_response({"error": {"code": "BadArgument", "message": "Activity rejected"}}, status=400)
        return web.json_response({"id": sent.id})

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["key"] in self._redirects:
            raise web.HTTPFound(self._redirects[request.match_info["key"]])
        data = self._files.get(request.match_info["key"])
        if data is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["name"])
        return web.Response(body=data, content_type="application/octet-stream")


__all__ = ["FILE_DOWNLOAD_INFO", "FakeBotConnector", "SentActivity", "file_attachment"]
