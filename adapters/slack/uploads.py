"""Slack's files: what a share names, files.info for what it leaves out, and the download that sends the bot
token only to Slack's own file host."""
from __future__ import annotations

import logging
from urllib.parse import urlsplit

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.intents import Attachment
from adapters.web import download

logger = logging.getLogger(__name__)


class SlackFiles:
    def __init__(self, client: AsyncWebClient):
        self._client = client

    async def info(self, file_id: str) -> dict | None:
        try:
            response = await self._client.files_info(file=file_id)
        except SlackApiError as exc:
            logger.warning("files.info for %s refused: %s", file_id, exc.response.get("error"))
            return None
        return response.get("file")

    async def attachment(self, file: dict) -> Attachment:
        """The shared file as the conversation takes it: nothing is downloaded until it calls `fetch`."""
        if "url_private_download" not in file:  # e.g. shares from other organisations name only the id
            file = await self.info(file["id"]) or file
        url = file.get("url_private_download") or ""
        client = self._client

        async def fetch(limit: int) -> bytes:
            # Every redirect is vetted too: the token goes to Slack's own hosts only.
            return await download(url, limit, lambda target: on_slack(target, client.base_url),
                                  {"Authorization": f"Bearer {client.token}"})

        size = file.get("size")
        return Attachment(file.get("name") or file.get("title") or file["id"], size if isinstance(size, int) else None,
                          fetch)


def share_in(file: dict, channel: str) -> tuple[str, str | None] | None:
    """(ts, thread_ts) of the file's latest share in `channel`, from files.info's `shares`."""
    shares = [s for by_channel in (file.get("shares") or {}).values() for s in by_channel.get(channel, ())]
    if not shares:
        return None
    latest = max(shares, key=lambda share: float(share.get("ts", 0)))
    return latest["ts"], latest.get("thread_ts")


def on_slack(url: str, api_base_url: str) -> bool:
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
