"""The storage layer against a real Chroma server (`chroma run`) through HttpClient."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.dense import Entry, VectorCollection, open_chroma


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    port = free_port()
    process = subprocess.Popen([chroma, "run", "--path", str(tmp_path_factory.mktemp("chroma")), "--host",
                                "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            client = open_chroma(Path("unused"), "127.0.0.1", port)
            client.heartbeat()
            break
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("chroma run did not start")
            time.sleep(0.3)
    yield port
    process.terminate()
    process.wait(timeout=20)


def test_collection_with_explicit_embeddings_add_query_reopen(chroma_server, components):
    client = open_chroma(Path("unused"), "127.0.0.1", chroma_server)
    entries = [Entry("Art. 33(1)", "text", "notify the supervisory authority of a personal data breach within 72 hours"),
               Entry("Art. 17(1)", "text", "the right to obtain erasure of personal data without undue delay")]
    collection = VectorCollection(client, components.embedder, "server-test")
    assert collection.ensure(entries) is True
    hits = collection.search(components.embedder.embed_one("we got hacked, when do we tell the regulator?"))
    assert max(hits["text"], key=hits["text"].get) == "Art. 33(1)"

    reopened = VectorCollection(open_chroma(Path("unused"), "127.0.0.1", chroma_server), components.embedder,
                                "server-test")
    assert reopened.ensure(entries) is False and reopened.size == 2
    stored = client.get_collection("server-test")
    assert stored.metadata["model"] == components.embedder.model_id
