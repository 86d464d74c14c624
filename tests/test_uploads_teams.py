"""Document uploads through the Teams adapter: real PDFs, the real core and document library, the aiohttp app on
loopback, replies and file downloads served by the fake Bot Connector."""
from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters import wording
from adapters.conversation import Conversation
from adapters.intents import Help
from adapters.teams import TeamsConfig, build_teams_app
from adapters.teams.render import render
from core.assistant import Assistant
from core.library import Documents, too_large
from core.models import Asker
from evals.fake_bot_connector import FakeBotConnector, SentActivity, file_attachment
from tests.helpers import bounded
from tests.pdfs import (
    INVOICES,
    QUESTION,
    encrypted_pdf,
    page_text,
    png_bytes,
    scanned_pdf,
    text_pdf,
)

BOT_ID = "28:gdpr-bot"
ADMIN = "aad-admin-1"
MEMBER = "aad-member-1"
PERSONAL_CHAT = "a:personal-chat-1"
CHANNEL_THREAD = "19:general@thread.tacv2;messageid=1700000000001"
WAIT_S = 20.0  # indexing embeds the document; the first question in a session warms the retriever


# --- the bot on loopback -----------------------------------------------------------------------------------------


scenario = bounded(timeout_s=60)


@dataclass
class Bot:
    url: str
    connector: FakeBotConnector
    http: aiohttp.ClientSession

    async def send(self, activity: dict[str, Any]) -> None:
        async with self.http.post(f"{self.url}/api/messages", json=activity) as response:
            assert response.status == 200

    async def replies(self, conversation_id: str, count: int = 1) -> list[SentActivity]:
        return await self.connector.wait_for(
            lambda a: a.type == "message" and a.conversation_id == conversation_id, count=count, timeout=WAIT_S)

    async def reply_to(self, activity: dict[str, Any]) -> SentActivity:
        """The bot's one reply to `activity`."""
        conversation = activity["conversation"]["id"]
        before = len([a for a in self.connector.sent if a.type == "message" and a.conversation_id == conversation])
        await self.send(activity)
        return (await self.replies(conversation, before + 1))[-1]


@asynccontextmanager
async def running_bot(assistant: Assistant, documents: Documents | None) -> AsyncIterator[Bot]:
    async with FakeBotConnector() as connector, aiohttp.ClientSession() as http:
        runner = web.AppRunner(build_teams_app(TeamsConfig(), Conversation(assistant, documents)), access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        try:
            yield Bot(f"http://127.0.0.1:{sock.getsockname()[1]}", connector, http)
        finally:
            await runner.cleanup()


def personal(bot: Bot, tenant: str, text: str | None = None, *, user: str = ADMIN,
             attachments: list[dict] | None = None) -> dict[str, Any]:
    activity = {
        "type": "message", "id": f"m{len(bot.connector.sent)}", "channelId": "msteams",
        "serviceUrl": bot.connector.url,
        "from": {"id": f"29:{user}", "name": "Dana", "aadObjectId": user},
        "recipient": {"id": BOT_ID, "name": "GDPR Bot"},
        "conversation": {"id": PERSONAL_CHAT, "conversationType": "personal", "tenantId": tenant},
        "channelData": {"tenant": {"id": tenant}},
    }
    if text is not None:
        activity["text"] = text
    if attachments:
        activity["attachments"] = attachments
    return activity


def channel_question(bot: Bot, tenant: str) -> dict[str, Any]:
    mention = "<at>GDPR Bot</at>"
    return personal(bot, tenant, f"{mention} {QUESTION}", user=MEMBER) | {
        "conversation": {"id": CHANNEL_THREAD, "conversationType": "channel", "isGroup": True, "tenantId": tenant},
        "entities": [{"type": "mention", "text": mention, "mentioned": {"id": BOT_ID, "name": "GDPR Bot"}}],
        "channelData": {"tenant": {"id": tenant}, "team": {"id": "team-1"}},
    }


async def upload(bot: Bot, tenant: str, name: str, data: bytes, *, user: str = ADMIN) -> str:
    attachment = file_attachment(name, bot.connector.serve_file(name, data))
    return (await bot.reply_to(personal(bot, tenant, user=user, attachments=[attachment]))).text


def card_quotes(answer: SentActivity) -> dict[str, str]:
    """Label → quote of each source in the answer's card, under the document group only."""
    [card] = answer.activity["attachments"]
    texts = [block["text"] if "text" in block else "".join(i["text"] for i in block["inlines"])
             for block in card["content"]["body"]]
    group = wording.DOCUMENTS_HEADER
    documents = texts[texts.index(group) + 1:] if group in texts else []
    return {label.split("] ", 1)[1]: quote.strip("“”") for label, quote in zip(documents[::2], documents[1::2])}


# --- the whole life of a document ---------------------------------------------------------------------------------


@scenario
async def test_admin_upload_is_indexed_quoted_in_the_tenant_listed_and_forgotten(assistant, documents):
    tenant, data = "tenant-uploads-1", text_pdf()
    async with running_bot(assistant, documents) as bot:
        confirmation = await upload(bot, tenant, "Retention.pdf", data)
        [record] = documents.list(Asker("teams", tenant))
        assert confirmation == f"Indexed Retention.pdf: 3 pages, {record.passages} passages"
        assert (record.pages, record.uploader) == (3, ADMIN)
        assert bot.connector.downloads == ["Retention.pdf"]
        assert [a.type for a in bot.connector.sent] == ["typing", "message"]

        answer = await bot.reply_to(channel_question(bot, tenant))
        quotes = card_quotes(answer)
        assert INVOICES in quotes["Retention.pdf, p. 2"]
        assert " ".join(quotes["Retention.pdf, p. 2"].split()) in page_text(data, 2)
        claims = {c["appearance"]["name"]: c["appearance"] for c in answer.activity["entities"][0]["citation"]}
        assert claims["Retention.pdf, p. 2"]["keywords"] == ["Organisation document"]
        assert any(a["keywords"] == ["GDPR"] for a in claims.values())  # the Regulation is quoted too, apart

        elsewhere = await bot.reply_to(channel_question(bot, "tenant-uploads-99"))
        assert "Retention.pdf" not in json.dumps(elsewhere.activity)

        listing = (await bot.reply_to(personal(bot, tenant, "docs", user=MEMBER))).text
        assert f"- Retention.pdf: 3 pages, {record.passages} passages · added by {ADMIN} on " in listing
        refused = (await bot.reply_to(personal(bot, tenant, "forget Retention.pdf", user=MEMBER))).text
        assert refused.startswith("Sorry, only the bot's admins can remove documents.")
        assert (await bot.reply_to(personal(bot, tenant, "forget Retention.pdf"))).text == "Removed Retention.pdf."
        assert (await bot.reply_to(personal(bot, tenant, "forget Retention.pdf"))).text == (
            "No document named Retention.pdf.")

        after = await bot.reply_to(channel_question(bot, tenant))
        assert card_quotes(after) == {} and "Retention.pdf" not in json.dumps(after.activity)
        assert (await bot.reply_to(personal(bot, tenant, "docs"))).text.startswith("No documents have been added")


# --- refusals --------------------------------------------------------------------------------------------------------


@scenario
async def test_upload_by_a_non_admin_is_politely_refused_and_not_indexed(assistant, documents):
    tenant = "tenant-uploads-2"
    async with running_bot(assistant, documents) as bot:
        reply = await upload(bot, tenant, "Retention.pdf", text_pdf(), user=MEMBER)
        assert reply.startswith("Sorry, only the bot's admins can add documents.")
        assert bot.connector.downloads == []  # refused before anything was fetched
        assert documents.list(Asker("teams", tenant)) == []
        assert "Retention.pdf" not in json.dumps((await bot.reply_to(channel_question(bot, tenant))).activity)


@pytest.mark.parametrize("name, make, reason", [
    ("Scan.pdf", scanned_pdf, "Scan.pdf has no extractable text; it looks like a scanned document."),
    ("Salaries.pdf", encrypted_pdf, "Salaries.pdf is password-protected; upload a copy without a password."),
    ("Chart.pdf", png_bytes, "Chart.pdf is not a PDF file."),
], ids=["scanned", "encrypted", "png-named-pdf"])
@scenario
async def test_unusable_files_are_refused_with_the_reason(assistant, documents, name, make, reason):
    tenant = f"tenant-uploads-3-{name}"
    async with running_bot(assistant, documents) as bot:
        assert (await upload(bot, tenant, name, make())).startswith(reason)
        assert documents.list(Asker("teams", tenant)) == []


@scenario
async def test_a_file_over_the_size_limit_is_refused(assistant, components):
    tenant = "tenant-uploads-4"
    small = Documents(components.documents.library, {ADMIN}, max_bytes=1000, max_pages=500)
    async with running_bot(assistant, small) as bot:
        reply = await upload(bot, tenant, "Retention.pdf", text_pdf())
        assert reply == too_large("Retention.pdf", 1000)
        assert small.list(Asker("teams", tenant)) == []


@scenario
async def test_a_file_that_cannot_be_downloaded_is_reported(assistant, documents):
    tenant = "tenant-uploads-5"
    async with running_bot(assistant, documents) as bot:
        missing = file_attachment("Gone.pdf", f"{bot.connector.url}files/no-such-file/Gone.pdf")
        not_https = file_attachment("Plain.pdf", "http://files.example.com/Plain.pdf")
        for attachment in (missing, not_https):
            reply = await bot.reply_to(personal(bot, tenant, attachments=[attachment]))
            assert reply.text == f"I couldn't download {attachment['name']} from Teams. Please send it again."
        assert bot.connector.downloads == [] and documents.list(Asker("teams", tenant)) == []


@scenario
async def test_without_documents_uploads_and_commands_say_they_are_not_enabled(assistant):
    async with running_bot(assistant, None) as bot:
        assert await upload(bot, "tenant-uploads-6", "Retention.pdf", text_pdf()) == (
            "Document uploads are not enabled on this bot.")
        docs = await bot.reply_to(personal(bot, "tenant-uploads-6", "docs"))
        assert docs.text == "Document uploads are not enabled on this bot." and bot.connector.downloads == []


@scenario
async def test_usage_hint_tells_how_to_list_add_and_forget_documents(assistant, documents):
    async with running_bot(assistant, documents) as bot:
        hint = (await bot.reply_to(personal(bot, "tenant-uploads-7"))).text
        assert hint == render(Help(), with_card=False).text and "`docs`" in hint and "`forget <file name>`" in hint
