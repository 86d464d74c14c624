"""Bounded file downloads for uploads, shared by the Slack and Teams adapters."""
from __future__ import annotations

import aiohttp

DOWNLOAD_TIMEOUT_S = 120.0
DOWNLOAD_CHUNK_BYTES = 64 * 1024


class DownloadFailed(Exception):
    pass


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
