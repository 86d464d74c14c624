"""Document uploads through the Slack adapter: real PDFs, the real core and document library, the bolt app on
loopback with signed events in and the fake Web API (which also serves the files) out."""
from __future__ import annotations

import json
import re

import pytest

from core.library import too_large
from core.models import Asker
from evals.fake_slack import (
    BOT_USER_ID,
    FakeSlack,
    LoopbackSlack,
    command_body,
    event_body,
    file_share,
    file_shared,
    mention,
)
from tests.helpers import bounded
from tests.pdfs import (
    FACT_QUESTION,
    INVOICES,
    QUESTION,
    encrypted_pdf,
    page_text,
    png_bytes,
    scanned_pdf,
    text_pdf,
)

ADMIN = "U0ADMIN01"
MEMBER = "U00000001"
CHANNEL = "C00000001"
DM = "D0ADMIN01"
SHARE_TS = "1700000000.000100"
WAIT_S = 20.0  # indexing embeds the document; the first question in a session warms the retriever


# --- fixtures and helpers -------------------------------------------------------------------------------------


scenario = bounded(timeout_s=60)


def in_thread(ts: str):
    return lambda params: params.get("thread_ts") == ts


def all_text(params: dict) -> str:
    return params.get("text", "") + json.dumps(params.get("blocks", []), ensure_ascii=False)


def document_quotes(params: dict) -> list[tuple[str, str]]:
    """(label, quote) of each document citation, from the message's fallback text."""
    return re.findall(r"^(\S+\.pdf, pp?\. [\d–]+): “(.+?)”$", params["text"], re.MULTILINE)


async def posts_in(slack: LoopbackSlack, ts: str, count: int = 1) -> list[str]:
    return [c.params["text"] for c in await slack.fake.wait_for("chat.postMessage", count, where=in_thread(ts),
                                                                   timeout_s=WAIT_S)]


async def ask(slack: LoopbackSlack, team: str, ts: str, question: str = QUESTION) -> dict:
    await slack.post(event_body(mention(question, ts=ts, team=team), team=team))
    [answer] = await slack.fake.wait_for("chat.postMessage", where=in_thread(ts), timeout_s=WAIT_S)
    return answer.params


async def command(slack: LoopbackSlack, text: str, team: str, user: str = ADMIN) -> str:
    """The text of the (single) response to `/gdpr <text>`."""
    before = len(slack.fake.calls_to("response_url"))
    status, _ = await slack.post(command_body(text, response_url=slack.fake.response_url(), user=user, team=team))
    assert status == 200
    replies = await slack.fake.wait_for("response_url", before + 1, timeout_s=WAIT_S)
    assert replies[-1].params["response_type"] == "ephemeral"
    return replies[-1].params["text"]


async def share_in_dm(slack: LoopbackSlack, team: str, name: str, data: bytes, *, user: str = ADMIN,
                      file_id: str = "F0000001", size: int | None = None) -> str:
    """`user` sends a file to the bot; returns the bot's one reply in the share's thread."""
    file = slack.fake.add_file(file_id, name, data, user=user, channel=DM, ts=SHARE_TS, size=size)
    await slack.post(event_body(file_share([file], channel=DM, ts=SHARE_TS, user=user, team=team), team=team))
    await slack.post(event_body(file_shared(file_id, channel=DM, user=user), team=team))
    [reply] = await posts_in(slack, SHARE_TS)
    return reply


# --- the whole life of a document ---------------------------------------------------------------------------------


@scenario
async def test_admin_upload_in_a_channel_is_indexed_once_quoted_listed_and_forgotten(assistant, documents):
    team, data = "TUPSLACK01", text_pdf()
    async with LoopbackSlack(assistant, documents=documents) as slack:
        file = slack.fake.add_file("F0000001", "Retention.pdf", data, user=ADMIN, channel=CHANNEL, ts=SHARE_TS)
        share = file_share([file], channel=CHANNEL, ts=SHARE_TS, user=ADMIN, team=team,
                           text=f"<@{BOT_USER_ID}> our retention policy")
        as_mention = {k: v for k, v in share.items() if k not in ("subtype", "channel_type")} | {"type": "app_mention"}
        # One share, three events; Slack also retries the first when the ack is late.
        for event in (share, as_mention, file_shared("F0000001", channel=CHANNEL, user=ADMIN), share):
            assert (await slack.post(event_body(event, team=team)))[0] == 200

        [confirmation] = await posts_in(slack, SHARE_TS)
        [record] = documents.list(Asker("slack", team))
        assert confirmation == f"Indexed Retention.pdf: 3 pages, {record.passages} passages"
        assert (record.filename, record.pages, record.uploader) == ("Retention.pdf", 3, ADMIN)
        await slack.fake.assert_no_more("chat.postMessage", 1, where=in_thread(SHARE_TS))
        [download] = slack.fake.calls_to("file_download")
        assert download.params == {"file": "F0000001", "authorized": True}

        answer = await ask(slack, team, "1700000000.000200")
        quotes = document_quotes(answer)
        assert quotes and quotes[0][0] == "Retention.pdf, p. 2"
        assert " ".join(quotes[0][1].split()) in page_text(data, 2) and INVOICES in quotes[0][1]
        assert "From your organisation's documents" in all_text(answer)
        assert re.search(r"^Art\. \d+", answer["text"], re.MULTILINE)  # the Regulation is quoted too, apart
        fact = await ask(slack, team, "1700000000.000250", FACT_QUESTION)
        assert "The Regulation doesn't cover this" in all_text(fact)
        assert INVOICES in " ".join(all_text(fact).split()) and not re.search(r"^Art\. \d+", fact["text"], re.MULTILINE)

        elsewhere = await ask(slack, "TUPSLACK99", "1700000000.000300")
        assert "Retention.pdf" not in all_text(elsewhere)

        listing = await command(slack, "docs", team, user=MEMBER)
        assert re.search(rf"• Retention\.pdf: 3 pages, {record.passages} passages · added by <@{ADMIN}> on "
                         rf"\d{{4}}-\d\d-\d\d", listing)
        refused = await command(slack, "forget Retention.pdf", team, user=MEMBER)
        assert refused.startswith("Sorry, only the bot's admins can remove documents.")
        assert await command(slack, "forget Retention.pdf", team) == "Removed Retention.pdf."
        assert await command(slack, "forget Retention.pdf", team) == "No document named Retention.pdf."
        assert documents.list(Asker("slack", team)) == []

        after = await ask(slack, team, "1700000000.000400")
        assert "Retention.pdf" not in all_text(after) and re.search(r"^Art\. \d+", after["text"], re.MULTILINE)
        assert (await command(slack, "docs", team)).startswith("No documents have been added")


@scenario
async def test_dm_upload_announced_by_file_shared_first_is_indexed_once_and_managed_by_dm(assistant, documents):
    team = "TUPSLACK02"
    async with LoopbackSlack(assistant, documents=documents) as slack:
        file = slack.fake.add_file("F0000002", "Retention.pdf", text_pdf(), user=ADMIN, channel=DM, ts=SHARE_TS)
        # file_shared alone names no thread: the bot reads it from files.info's shares.
        await slack.post(event_body(file_shared("F0000002", channel=DM, user=ADMIN), team=team))
        await slack.post(event_body(file_share([file], channel=DM, ts=SHARE_TS, user=ADMIN, team=team), team=team))
        [confirmation] = await posts_in(slack, SHARE_TS)
        assert confirmation.startswith("Indexed Retention.pdf: 3 pages, ")
        await slack.fake.assert_no_more("chat.postMessage", 1)
        assert len(slack.fake.calls_to("file_download")) == 1
        assert slack.fake.calls_to("files.info", lambda p: p.get("file") == "F0000002")

        dm = {"type": "message", "channel_type": "im", "channel": DM, "user": ADMIN, "team": team}
        for count, (text, ts) in enumerate([("docs", "1700000000.000200"),
                                             ("forget retention.pdf", "1700000000.000300")], start=2):
            await slack.post(event_body(dm | {"text": text, "ts": ts}, team=team))
            await slack.fake.wait_for("chat.postMessage", count, timeout_s=WAIT_S)
        listing, removed = [c.params["text"] for c in slack.fake.calls_to("chat.postMessage")[1:]]
        assert "• Retention.pdf: 3 pages" in listing and removed == "Removed Retention.pdf."


# --- refusals --------------------------------------------------------------------------------------------------------


@scenario
async def test_upload_by_a_non_admin_is_politely_refused_and_not_indexed(assistant, documents):
    team = "TUPSLACK03"
    async with LoopbackSlack(assistant, documents=documents) as slack:
        file = slack.fake.add_file("F0000003", "Retention.pdf", text_pdf(), user=MEMBER, channel=CHANNEL,
                                   ts=SHARE_TS)
        await slack.post(event_body(file_share([file], channel=CHANNEL, ts=SHARE_TS, user=MEMBER, team=team,
                                               text=f"<@{BOT_USER_ID}> please add this"), team=team))
        [reply] = await posts_in(slack, SHARE_TS)
        assert reply.startswith("Sorry, only the bot's admins can add documents.")
        assert slack.fake.calls_to("file_download") == []  # refused before anything was fetched
        assert documents.list(Asker("slack", team)) == []
        assert "Retention.pdf" not in all_text(await ask(slack, team, "1700000000.000200"))


@pytest.mark.parametrize("name, make, reason", [
    ("Scan.pdf", scanned_pdf, "Scan.pdf has no extractable text; it looks like a scanned document."),
    ("Salaries.pdf", encrypted_pdf, "Salaries.pdf is password-protected; upload a copy without a password."),
    ("Chart.pdf", png_bytes, "Chart.pdf is not a PDF file."),
], ids=["scanned", "encrypted", "png-named-pdf"])
@scenario
async def test_unusable_files_are_refused_with_the_reason(assistant, documents, name, make, reason):
    team = f"TUPSLACK04-{name}"
    async with LoopbackSlack(assistant, documents=documents) as slack:
        reply = await share_in_dm(slack, team, name, make())
        assert reply.startswith(reason)
        assert documents.list(Asker("slack", team)) == []


@scenario
async def test_a_file_over_the_size_limit_is_refused_before_downloading(assistant, documents):
    team = "TUPSLACK05"
    async with LoopbackSlack(assistant, documents=documents) as slack:
        reply = await share_in_dm(slack, team, "Huge.pdf", text_pdf(), size=documents.max_bytes + 1)
        assert reply == too_large("Huge.pdf", documents.max_bytes)
        assert slack.fake.calls_to("file_download") == [] and documents.list(Asker("slack", team)) == []


@scenario
async def test_without_documents_uploads_and_commands_say_they_are_not_enabled(assistant):
    async with LoopbackSlack(assistant) as slack:
        assert await share_in_dm(slack, "TUPSLACK06", "Retention.pdf", text_pdf()) == (
            "Document uploads are not enabled on this bot.")
        assert await command(slack, "docs", "TUPSLACK06") == "Document uploads are not enabled on this bot."
        assert slack.fake.calls_to("file_download") == []


# --- what is not an upload -----------------------------------------------------------------------------------------


@scenario
async def test_channel_shares_without_a_mention_and_the_bots_own_shares_are_ignored(assistant, documents):
    team = "TUPSLACK07"
    async with LoopbackSlack(assistant, documents=documents) as slack:
        channel_file = slack.fake.add_file("F0000007", "Minutes.pdf", text_pdf(), user=ADMIN, channel=CHANNEL,
                                           ts=SHARE_TS)
        own_file = slack.fake.add_file("F0000008", "Report.pdf", text_pdf(), user=BOT_USER_ID, channel=DM,
                                       ts="1700000000.000200")
        events = [
            file_share([channel_file], channel=CHANNEL, ts=SHARE_TS, user=ADMIN, team=team, text="minutes attached"),
            file_shared("F0000007", channel=CHANNEL, user=ADMIN),
            file_share([own_file], channel=DM, ts="1700000000.000200", user=BOT_USER_ID, team=team),
            file_shared("F0000008", channel=DM, user=BOT_USER_ID),
        ]
        for event in events:
            assert (await slack.post(event_body(event, team=team)))[0] == 200
        await slack.fake.assert_no_more("chat.postMessage")
        assert slack.fake.calls_to("file_download") == []
        assert documents.list(Asker("slack", team)) == []


@scenario
async def test_the_bot_token_is_not_sent_to_a_file_url_outside_slack(assistant, documents):
    team = "TUPSLACK08"
    elsewhere = FakeSlack()
    await elsewhere.start()
    try:
        async with LoopbackSlack(assistant, documents=documents) as slack:
            file = elsewhere.add_file("F0000009", "Retention.pdf", text_pdf(), user=ADMIN, channel=DM, ts=SHARE_TS)
            await slack.post(event_body(file_share([file], channel=DM, ts=SHARE_TS, user=ADMIN, team=team),
                                        team=team))
            [reply] = await posts_in(slack, SHARE_TS)
            assert reply.startswith(":warning: I couldn't download Retention.pdf from Slack.")
            assert elsewhere.calls == [] and documents.list(Asker("slack", team)) == []
    finally:
        await elsewhere.stop()


@scenario
async def test_help_tells_how_to_list_add_and_forget_documents(assistant, documents):
    async with LoopbackSlack(assistant, documents=documents) as slack:
        status, body = await slack.post(command_body("help", response_url=slack.fake.response_url()))
        help_text = json.loads(body)["text"]
        assert status == 200 and "/gdpr docs" in help_text and "/gdpr forget <file name>" in help_text
        assert "direct message" in help_text


@scenario
async def test_a_dm_upload_and_a_mentioned_channel_upload_are_answered_the_same_way(assistant, documents):
    replies = []
    for n, (channel, text) in enumerate(((DM, ""), (CHANNEL, f"<@{BOT_USER_ID}> for the library"))):
        team = f"TUPSLACK-same-{n}"
        async with LoopbackSlack(assistant, documents=documents) as slack:
            file = slack.fake.add_file(f"F00007{n}", "Retention.pdf", text_pdf(), user=ADMIN, channel=channel,
                                       ts=SHARE_TS)
            await slack.post(event_body(file_share([file], channel=channel, ts=SHARE_TS, user=ADMIN, team=team,
                                                   text=text), team=team))
            [reply] = await slack.fake.wait_for("chat.postMessage", where=in_thread(SHARE_TS), timeout_s=WAIT_S)
            replies.append((reply.params["channel"], reply.params["text"]))
    assert replies == [(DM, "Indexed Retention.pdf: 3 pages, 3 passages"),
                       (CHANNEL, "Indexed Retention.pdf: 3 pages, 3 passages")]


@scenario
async def test_a_file_shared_in_a_channel_without_a_mention_is_not_indexed(assistant, documents):
    team = "TUPSLACK-unmentioned"
    async with LoopbackSlack(assistant, documents=documents) as slack:
        file = slack.fake.add_file("F0000081", "Retention.pdf", text_pdf(), user=ADMIN, channel=CHANNEL, ts=SHARE_TS)
        status, _ = await slack.post(event_body(file_share([file], channel=CHANNEL, ts=SHARE_TS, user=ADMIN, team=team,
                                                           text="here is the policy"), team=team))
        assert status == 200
        await slack.post(event_body(file_shared("F0000081", channel=CHANNEL, user=ADMIN), team=team))
        answer = await ask(slack, team, "1700000000.000900")  # answered after both events were handled
        assert slack.fake.calls_to("file_download") == [] and documents.list(Asker("slack", team)) == []
        assert "Retention.pdf" not in all_text(answer)
