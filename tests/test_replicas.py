"""Two replicas on shared infrastructure: each its own bolt app (or Teams app), conversation and connection pool,
one real Postgres and one Chroma server between them, driven over HTTP like two processes behind a load balancer."""
from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from adapters import wording
from adapters.conversation import Conversation
from adapters.teams import TeamsConfig, build_teams_app
from core.documents import DocumentLibrary
from core.fair_use import SharedFairUse
from core.library import Documents
from core.models import Asker
from core.service import RateLimited
from core.storage import Storage, postgres_storage
from evals.fake_bot_connector import FakeBotConnector
from evals.fake_slack import LoopbackSlack, event_body, file_share, file_shared, mention, sign
from tests.fake_service import QUOTE, FakeAnswerService
from tests.helpers import bounded
from tests.pdfs import INVOICES, QUESTION, text_pdf

ADMIN = "U0ADMIN01"
TEAM = "TREPLICAS1"
CHANNEL = "C00000001"
DM = "D0ADMIN01"
WAIT_S = 20.0
LEASE_S = 0.5
SLOW_DOWN = wording.rejected(RateLimited(1)).split(".")[0]

scenario = bounded(timeout_s=90)


def in_thread(ts: str):
    return lambda params: params.get("thread_ts") == ts


@asynccontextmanager
async def slack_replica(database_url: str, service=None, *, documents: Documents | None = None,
                        storage: Storage | None = None) -> AsyncIterator[tuple[LoopbackSlack, Storage]]:
    """One replica: its own Storage (pool), Conversation and bolt app with its own fake Slack Web API."""
    storage = storage or postgres_storage(database_url, lease_s=LEASE_S)
    service = service or FakeAnswerService()
    conversation = Conversation(service, documents, deliveries=storage.deliveries, thread_memory=storage.threads,
                                sent_answers=storage.sent_answers)
    try:
        async with LoopbackSlack(service, conversation=conversation, journal=storage.journal("slack")) as slack:
            yield slack, storage
    finally:
        storage.close()


# --- documents -------------------------------------------------------------------------------------------------------


@pytest.fixture
def replica_parts(database_url, chroma_server, components):
    """Per replica: its Storage, and the real assistant with a document library on the shared Chroma server and
    shelves; fair use on the shared buckets."""
    parts = []
    for _ in range(2):
        storage = postgres_storage(database_url, lease_s=LEASE_S)
        library = DocumentLibrary(chroma_server.client(), components.embedder, storage.shelves)
        documents = Documents(library, {ADMIN}, max_bytes=20 * 2**20, max_pages=500)
        assistant = components.assistant(documents=documents,
                                         fair_use=SharedFairUse(storage.buckets, 20, 5, 600, 50))
        parts.append((storage, documents, assistant))
    return parts


@scenario
async def test_a_pdf_uploaded_through_one_replica_is_cited_by_the_other(database_url, replica_parts):
    (storage_a, documents_a, assistant_a), (storage_b, documents_b, assistant_b) = replica_parts
    async with AsyncExitStack() as stack:
        a, _ = await stack.enter_async_context(slack_replica(database_url, assistant_a, documents=documents_a,
                                                             storage=storage_a))
        b, _ = await stack.enter_async_context(slack_replica(database_url, assistant_b, documents=documents_b,
                                                             storage=storage_b))
        file = a.fake.add_file("F0000001", "Retention.pdf", text_pdf(), user=ADMIN, channel=DM, ts="1700000000.000100")
        await a.post(event_body(file_share([file], channel=DM, ts="1700000000.000100", user=ADMIN, team=TEAM),
                                team=TEAM))
        await a.post(event_body(file_shared("F0000001", channel=DM, user=ADMIN), team=TEAM))
        [confirmation] = await a.fake.wait_for("chat.postMessage", where=in_thread("1700000000.000100"),
                                               timeout_s=WAIT_S)
        assert confirmation.params["text"].startswith("Indexed Retention.pdf: 3 pages")
        indexed_at = time.monotonic()

        await b.post(event_body(mention(QUESTION, ts="1700000000.000200", team=TEAM), team=TEAM))
        [answer] = await b.fake.wait_for("chat.postMessage", where=in_thread("1700000000.000200"), timeout_s=WAIT_S)
        assert time.monotonic() - indexed_at < 5.0
        quotes = re.findall(r"^(\S+\.pdf, pp?\. [\d–]+): “(.+?)”$", answer.params["text"], re.MULTILINE)
        assert quotes and quotes[0][0] == "Retention.pdf, p. 2" and INVOICES in quotes[0][1]
        assert [r.filename for r in documents_b.list(Asker("slack", TEAM))] == ["Retention.pdf"]
        # Forgotten through B: A stops citing it at once.
        assert documents_b.forget("retention.pdf", asker=Asker("slack", TEAM, DM, ADMIN)) is not None
        assert documents_a.search(QUESTION, Asker("slack", TEAM), 3, 0.0) == []


# --- fair use ----------------------------------------------------------------------------------------------------


@scenario
async def test_a_users_burst_spread_over_both_replicas_is_limited_once(database_url, replica_parts):
    (storage_a, _, assistant_a), (storage_b, _, assistant_b) = replica_parts
    async with AsyncExitStack() as stack:
        a, _ = await stack.enter_async_context(slack_replica(database_url, assistant_a, storage=storage_a))
        b, _ = await stack.enter_async_context(slack_replica(database_url, assistant_b, storage=storage_b))
        for n in range(10):  # user burst 5, a token every 3 s: one user asking ten times within a few seconds
            await (a, b)[n % 2].post(event_body(mention("What is personal data?", ts=f"1700000001.{n:06d}",
                                                        user="UBURST001", team=TEAM), team=TEAM))
        posts = []
        for slack in (a, b):
            posts += await slack.fake.wait_for("chat.postMessage", 5, timeout_s=WAIT_S)
        slowed = [p for p in posts if SLOW_DOWN in p.params["text"]]
        assert len(posts) == 10 and len(slowed) == 5


# --- redeliveries, killed replicas -----------------------------------------------------------------------------------


@scenario
async def test_a_retry_delivered_to_the_other_replica_is_answered_once(database_url):
    async with slack_replica(database_url) as (a, _), slack_replica(database_url) as (b, _):
        body = event_body(mention("When must a breach be notified?", ts="1700000002.000100"), event_id="EvRETRY01")
        first, retry = await asyncio.gather(
            a.post(body), b.post(body, headers={**sign(body), "X-Slack-Retry-Num": "1",
                                                "X-Slack-Retry-Reason": "http_timeout"}))
        assert first[0] == retry[0] == 200
        await asyncio.sleep(1.0)
        posts = a.fake.calls_to("chat.postMessage") + b.fake.calls_to("chat.postMessage")
        assert len(posts) == 1 and f">{QUOTE}" in json.dumps(posts[0].params)


class _Held(FakeAnswerService):
    """Never answers until released: a replica that accepted a question and died before answering it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def ask(self, question, **kwargs):
        self.release.wait(timeout=60)
        raise RuntimeError("this replica is dead")


@scenario
async def test_a_question_a_killed_replica_accepted_is_answered_by_the_survivor(database_url):
    dead = _Held()
    try:
        async with slack_replica(database_url) as (survivor, _):
            async with slack_replica(database_url, dead) as (doomed, doomed_storage):
                status, _ = await doomed.post(event_body(mention("When must a breach be notified?",
                                                                 ts="1700000003.000100")))
                assert status == 200  # acknowledged: Slack will never send it again
                for _ in range(100):
                    if dead.asked:
                        break
                    await asyncio.sleep(0.02)
                # Killed: its lease is no longer renewed, its app is gone, its answer never comes.
                doomed_storage.journal("slack").close()
            [post] = await survivor.fake.wait_for("chat.postMessage", where=in_thread("1700000003.000100"),
                                                  timeout_s=LEASE_S + 10)
            assert f">{QUOTE}" in json.dumps(post.params)
            await survivor.fake.assert_no_more("chat.postMessage", 1, window_s=LEASE_S * 3)
    finally:
        dead.release.set()


# --- Teams: history and feedback on whichever replica --------------------------------------------------------------


@asynccontextmanager
async def teams_replica(database_url: str, service: FakeAnswerService) -> AsyncIterator[str]:
    storage = postgres_storage(database_url)
    conversation = Conversation(service, deliveries=storage.deliveries, thread_memory=storage.threads,
                                sent_answers=storage.sent_answers)
    runner = web.AppRunner(build_teams_app(TeamsConfig(), conversation), access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/api/messages"
    finally:
        await runner.cleanup()
        storage.close()


def personal(service_url: str, text: str | None, message_id: str, **extra) -> dict:
    return {"type": "message", "id": message_id, "channelId": "msteams", "serviceUrl": service_url,
            "from": {"id": "29:user-1", "aadObjectId": "aad-user-1"}, "recipient": {"id": "28:gdpr-bot"},
            "conversation": {"id": "a:personal-1", "conversationType": "personal", "tenantId": "tenant-1"},
            "channelData": {"tenant": {"id": "tenant-1"}}, **({"text": text} if text is not None else {}), **extra}


@scenario
async def test_teams_history_and_feedback_continue_on_the_other_replica(database_url):
    first_service, second_service = FakeAnswerService(), FakeAnswerService()
    async with FakeBotConnector() as connector, aiohttp.ClientSession() as http:
        async with teams_replica(database_url, first_service) as first:
            await http.post(first, json=personal(connector.url, "When must a breach be notified?", "m1"))
            [answer] = await connector.wait_for(lambda a: a.type == "message")
        # The first replica is gone (restarted, or the balancer sent the thread elsewhere).
        async with teams_replica(database_url, second_service) as second:
            await http.post(second, json=personal(connector.url, "And to whom?", "m2"))
            await connector.wait_for(lambda a: a.type == "message", count=2)
            [follow_up] = second_service.asked
            assert [t.text for t in follow_up.history][:1] == ["When must a breach be notified?"]
            feedback = personal(connector.url, None, "f1", type="invoke", name="message/submitAction",
                                replyToId=answer.id, value={"actionName": "feedback",
                                                            "actionValue": {"reaction": "like"}})
            async with http.post(second, json=feedback) as response:
                assert response.status == 200
            # The second replica never sent that answer: only the shared map knows which answer it was.
            [(request_id, helpful, _)] = second_service.feedback
            assert helpful is True and re.fullmatch(r"[0-9a-f]{12}", request_id)
