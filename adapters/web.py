"""What the HTTP adapters share: the bounded download of uploaded files, and `GET /healthz`."""
from __future__ import annotations

from collections.abc import Callable, Mapping

import aiohttp
from aiohttp import web

from adapters.intents import DownloadFailed

DOWNLOAD_TIMEOUT_S = 120.0
DOWNLOAD_CHUNK_BYTES = 64 * 1024
HealthDetails = Callable[[], Mapping[str, object]]


async def download(url: str, limit: int, headers: dict[str, str] | None = None) -> bytes:
    """At most `limit` bytes of the file: one past the size limit is enough for the core to refuse it."""
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url, headers=headers) as response:
            # Without access (Slack without files:read) the server sends its sign-in page, not an error status.
            if response.status != 200 or response.content_type == "text/html":
                raise DownloadFailed(f"HTTP {response.status}, {response.content_type}")
            data = bytearray()
            async for chunk in response.content.iter_chunked(DOWNLOAD_CHUNK_BYTES):
                data += chunk
                if len(data) >= limit:
                    break
            return bytes(data[:limit])
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise DownloadFailed(repr(exc)) from exc


def healthz(health: HealthDetails | None) -> web.RouteDef:
    """`GET /healthz`: 200 with `{"status": "ok"}` and `health()`'s details (index status, …), for probes."""

    async def handle(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **(health() if health else {})})

    return web.get("/healthz", handle)


__all__ = ["DownloadFailed", "HealthDetails", "download", "healthz"]
