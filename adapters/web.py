"""What the HTTP adapters share: the bounded download of uploaded files from vetted hosts only, and `GET /healthz`."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import urljoin

import aiohttp
from aiohttp import web

from adapters.intents import DownloadFailed

DOWNLOAD_TIMEOUT_S = 120.0
DOWNLOAD_CHUNK_BYTES = 64 * 1024
MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
HealthDetails = Callable[[], Mapping[str, object]]
UrlPolicy = Callable[[str], bool]


async def download(url: str, limit: int, allowed: UrlPolicy, headers: dict[str, str] | None = None) -> bytes:
    """At most `limit` bytes of the file: one past the size limit is enough for the core to refuse it.

    `allowed` vets the URL and every redirect before anything is sent there (the platform's own file hosts):
    a redirect must not take the request, or the token in `headers`, anywhere else.
    """
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for _ in range(MAX_REDIRECTS + 1):
                if not allowed(url):
                    raise DownloadFailed(f"not a file host of the platform: {url!r}")
                async with session.get(url, headers=headers, allow_redirects=False) as response:
                    if response.status in REDIRECT_STATUSES and "Location" in response.headers:
                        url = urljoin(url, response.headers["Location"])
                        continue
                    return await _body(response, limit)
            raise DownloadFailed(f"more than {MAX_REDIRECTS} redirects")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # ValueError: a URL aiohttp cannot use
        raise DownloadFailed(repr(exc)) from exc


async def _body(response: aiohttp.ClientResponse, limit: int) -> bytes:
    # Without access (Slack without files:read) the server sends its sign-in page, not an error status.
    if response.status != 200 or response.content_type == "text/html":
        raise DownloadFailed(f"HTTP {response.status}, {response.content_type}")
    data = bytearray()
    async for chunk in response.content.iter_chunked(DOWNLOAD_CHUNK_BYTES):
        data += chunk
        if len(data) >= limit:
            break
    return bytes(data[:limit])


def healthz(health: HealthDetails | None) -> web.RouteDef:
    """`GET /healthz`: 200 with `{"status": "ok"}` and `health()`'s details (index status, …), for probes."""

    async def handle(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **(health() if health else {})})

    return web.get("/healthz", handle)


__all__ = ["DownloadFailed", "HealthDetails", "UrlPolicy", "download", "healthz"]
