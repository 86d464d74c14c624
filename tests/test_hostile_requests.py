"""Hostile and malformed requests, over real HTTP (issue 18, items 6 and 7): what anyone can send to the bot's
endpoints gets a 4xx and no traceback, and the bot sends requests (replies, downloads, redirects) only where the
platform keeps its services and files."""
from __future__ import annotations

import hashlib
import hmac
import logging
import time

import pytest
from aiohttp import ClientSession, web

from adapters import wording
from adapters.conversation import Conversation
from adapters.intents import DownloadFailed
from adapters.teams.hosts import file_url_policy, service_url_policy
from adapters.web import download
from evals.fake_bot_connector import file_attachment
from evals.fake_slack import SIGNING_SECRET, LoopbackSlack, event_body, file_share, mention
from tests.fake_service import FakeAnswerService, FakeDocuments
from tests.helpers import bounded
from tests.test_teams import PERSONAL_CHAT, personal_message, running_bot

scenario = bounded(timeout_s=30)
ADMIN = "U0ADMIN01"
DM = "D00000001"


def _signed_bytes(body: bytes) -> dict[str, str]:
    """Slack's signature over raw bytes (`sign` takes text)."""
    timestamp = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest}"}


JSON, FORM = "application/json", "application/x-www-form-urlencoded"
GOOD_EVENT = event_body(mention("When must a breach be notified?", ts="1700000000.000900"))
NOT_UTF8 = b'{"type": "event_callback", "x": "\xff\xfe"}'
# body, how it is signed (None: not at all), content type; Slack would answer each with a 4xx.
SLACK_HOSTILE = {
    "non-numeric timestamp": (GOOD_EVENT.encode(), lambda _: {"X-Slack-Request-Timestamp": "soon",
                                                              "X-Slack-Signature": "v0=0"}, JSON),
    "malformed JSON, unsigned": (b"{not json", None, JSON),
    "malformed JSON, signed": (b"{not json", _signed_bytes, JSON),
    "payload=notjson, signed": (b"payload=notjson", _signed_bytes, FORM),
    "non-UTF-8 bytes, signed": (NOT_UTF8, _signed_bytes, JSON),
    "an event that is a string, signed": (b'{"type": "event_callback", "event": "x"}', _signed_bytes, JSON),
    "an event that is a list, signed": (b'{"type": "event_callback", "event": [1]}', _signed_bytes, JSON),
    "a body that is a list, signed": (b"[1, 2]", _signed_bytes, JSON),
}


@pytest.mark.parametrize("body, signed, content_type", SLACK_HOSTILE.values(), ids=SLACK_HOSTILE.keys())
@scenario
async def test_slack_answers_malformed_requests_400_or_401_without_a_traceback(body, signed, content_type, caplog):
    service = FakeAnswerService()
    headers = {"Content-Type": content_type, **(signed(body) if signed else {})}
    async with LoopbackSlack(service) as slack:
        with caplog.at_level(logging.ERROR):
            async with ClientSession() as http, http.post(slack.events_url, data=body, headers=headers) as response:
                assert response.status in (400, 401), await response.text()
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
        # The bot is unharmed: the next genuine mention is answered.
        status, _ = await slack.post(GOOD_EVENT)
        assert status == 200
        await slack.fake.wait_for("chat.postMessage")
        assert [a.question for a in service.asked] == ["When must a breach be notified?"]


@scenario
async def test_a_slack_file_redirected_off_slack_is_not_followed_and_gets_the_same_reply_as_a_failed_download():
    elsewhere: list[dict] = []

    async def record(request: web.Request) -> web.Response:
        elsewhere.append(dict(request.headers))
        return web.Response(body=b"%PDF-1.7", content_type="application/pdf")

    trap = web.AppRunner(web.Application())
    trap.app.router.add_get("/{tail:.*}", record)
    await trap.setup()
    site = web.TCPSite(trap, "127.0.0.1", 0)
    await site.start()
    trap_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/loot.pdf"
    conversation = Conversation(FakeAnswerService(), FakeDocuments({ADMIN}))
    try:
        async with LoopbackSlack(FakeAnswerService(), conversation=conversation) as slack:
            moved = slack.fake.add_file("FMOVED", "Moved.pdf", b"", user=ADMIN, channel=DM, ts="1700000001.000100",
                                        redirect_to=trap_url)
            await slack.post(event_body(file_share([moved], channel=DM, ts="1700000001.000100", user=ADMIN)))
            missing = slack.fake.add_file("FGONE", "Moved.pdf", b"", user=ADMIN, channel=DM, ts="1700000002.000100")
            missing["url_private_download"] = missing["url_private_download"].replace("FGONE", "FNOWHERE")
            await slack.post(event_body(file_share([missing], channel=DM, ts="1700000002.000100", user=ADMIN)))
            refused, failed = await slack.fake.wait_for("chat.postMessage", 2, timeout_s=10)
        assert elsewhere == []  # neither the request nor the bot token left Slack
        assert refused.params["text"] == failed.params["text"]
        assert refused.params["text"].startswith(":warning: I couldn't download Moved.pdf from Slack.")
    finally:
        await trap.cleanup()


# --- the shared download --------------------------------------------------------------------------------------


@scenario
async def test_every_redirect_of_a_download_is_vetted_before_it_is_requested():
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(f"{request.url.port}{request.path}")
        if request.path == "/moved":
            raise web.HTTPFound("/file.pdf")
        if request.path == "/away":
            raise web.HTTPFound(request.query["to"])
        if request.path == "/loop":
            raise web.HTTPFound("/loop")
        return web.Response(body=b"%PDF-1.7 data", content_type="application/pdf")

    runners, ports = [], []
    for _ in range(2):
        runner = web.AppRunner(web.Application())
        runner.app.router.add_get("/{tail:.*}", handle)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        ports.append(site._server.sockets[0].getsockname()[1])
    vetted, other = ports

    def allowed(url: str) -> bool:
        return url.startswith(f"http://127.0.0.1:{vetted}/")

    try:
        assert await download(f"http://127.0.0.1:{vetted}/moved", 100, allowed) == b"%PDF-1.7 data"
        hits.clear()
        with pytest.raises(DownloadFailed, match="not a file host"):
            await download(f"http://127.0.0.1:{vetted}/away?to=http://127.0.0.1:{other}/file.pdf", 100, allowed)
        assert hits == [f"{vetted}/away"]  # the other host was never asked
        with pytest.raises(DownloadFailed, match="redirects"):
            await download(f"http://127.0.0.1:{vetted}/loop", 100, allowed)
        with pytest.raises(DownloadFailed, match="not a file host"):
            await download(f"http://127.0.0.1:{other}/file.pdf", 100, allowed)
    finally:
        for runner in runners:
            await runner.cleanup()


# --- Teams: where replies and downloads may go ----------------------------------------------------------------


@pytest.mark.parametrize("service_url", [
    "https://smba.trafficmanager.net/emea/", "https://attacker.example/", "http://169.254.169.254/latest/",
    "http://10.0.0.7:3978/", "http://localhost@attacker.example/",
])
@bounded(timeout_s=20)
async def test_without_credentials_teams_replies_to_no_service_url_but_loopback(service_url):
    async with running_bot() as bot:
        response = await bot.post(personal_message(service_url, "When must a breach be notified?"))
        assert response.status == 400
        assert bot.service.asked == [] and bot.connector.sent == []
        # The Emulator's loopback serviceUrl is still answered.
        assert (await bot.post(personal_message(bot.connector.url, "When must a breach be notified?"))).status == 200
        await bot.answer(PERSONAL_CHAT)


def test_with_credentials_replies_go_only_to_the_bot_frameworks_services():
    allowed = service_url_policy(authenticated=True)
    for url in ("https://smba.trafficmanager.net/amer/", "https://smba.infra.gcc.teams.microsoft.com/",
                "https://webchat.botframework.com/", "https://europe.directline.botframework.com/",
                "http://localhost:52000/"):  # the Emulator, which needs the credentials too
        assert allowed(url), url
    for url in ("http://smba.trafficmanager.net/amer/", "https://smba.trafficmanager.net.attacker.example/",
                "https://botframework.com.attacker.example/", "https://attacker.example/",
                "https://10.0.0.7/", "https://smba.trafficmanager.net:bad/", "not a url"):
        assert not allowed(url), url
    assert not service_url_policy(authenticated=False)("https://smba.trafficmanager.net/amer/")


def test_teams_files_come_only_from_teams_file_hosts_and_loopback_only_without_credentials():
    with_credentials, local = file_url_policy(authenticated=True), file_url_policy(authenticated=False)
    sharepoint = "https://contoso-my.sharepoint.com/personal/dana/_layouts/15/download.aspx?UniqueId=1&tempauth=x"
    assert with_credentials(sharepoint) and with_credentials("https://graph.microsoft.com/v1.0/drives/1/items/2")
    for url in ("http://contoso-my.sharepoint.com/x.pdf", "https://sharepoint.com.attacker.example/x.pdf",
                "https://attacker.example/x.pdf", "http://127.0.0.1:8080/x.pdf", "https://[::1]/x.pdf",
                "file:///etc/passwd"):
        assert not with_credentials(url), url
    assert local("http://127.0.0.1:8080/x.pdf") and local("http://localhost:8080/x.pdf")
    assert not local(sharepoint) and not local("https://attacker.example/x.pdf")


@scenario
async def test_a_teams_file_off_the_file_hosts_or_redirected_off_them_gets_the_same_reply_as_a_failed_download():
    async with running_bot(documents=FakeDocuments({"aad-user-1"})) as bot:
        attachments = {
            "off the hosts": file_attachment("Policy.pdf", "https://attacker.example/Policy.pdf"),
            "redirected off them": file_attachment(
                "Policy.pdf", bot.connector.serve_redirect("Policy.pdf", "http://169.254.169.254/latest/meta-data/")),
            "failed": file_attachment("Policy.pdf", f"{bot.connector.url}files/no-such-file/Policy.pdf"),
        }
        texts = {}
        for n, (case, attachment) in enumerate(attachments.items()):
            activity = personal_message(bot.connector.url, None, f"file-{n}") | {"attachments": [attachment]}
            assert (await bot.post(activity)).status == 200
            replies = await bot.connector.wait_for(lambda a: a.type == "message", count=n + 1)
            texts[case] = replies[-1].text
        assert set(texts.values()) == {wording.not_downloaded("Policy.pdf", "teams")}
        assert bot.connector.downloads == []


TEAMS_HOSTILE = {
    "non-UTF-8 bytes": b'{"type": "message", "text": "\xff\xfe"}',
    "arrays nested 100,000 deep": b'{"type": "message", "text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


@pytest.mark.parametrize("body", TEAMS_HOSTILE.values(), ids=TEAMS_HOSTILE.keys())
@bounded(timeout_s=20)
async def test_teams_answers_malformed_bodies_400_without_a_traceback(body, caplog):
    async with running_bot() as bot:
        with caplog.at_level(logging.ERROR):
            assert (await bot.post(body)).status == 400
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
        assert bot.service.asked == []

