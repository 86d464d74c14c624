"""Shared fixtures: one real corpus and index per test session (the expensive part: embedding)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def postgres():
    """A throwaway Postgres cluster for the session (skipped where the server is not installed, unless
    GDPRBOT_REQUIRE_POSTGRES is set, as `.ci/run` does)."""
    from evals.servers import PostgresCluster, ServerUnavailable

    try:
        cluster = PostgresCluster()
    except ServerUnavailable as exc:
        if os.environ.get("GDPRBOT_REQUIRE_POSTGRES"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    yield cluster
    cluster.stop()


@pytest.fixture
def database_url(postgres) -> str:
    """A new empty database in the session's cluster, for one test."""
    return postgres.create_database()


@pytest.fixture(scope="session")
def chroma_server():
    """A Chroma server (`chroma run`) on loopback for the session."""
    from evals.servers import ChromaServer

    server = ChromaServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="session")
def components(data_dir):
    """The real assistant's pieces on embedded defaults: built corpus, Chroma on disk, BM25, extractive."""
    from bot.settings import load_settings
    from bot.wiring import Components

    return Components(load_settings(GDPRBOT_DATA_DIR=str(data_dir)))


@pytest.fixture(scope="session")
def retriever(components):
    return components.retriever


@pytest.fixture(scope="session")
def service(components):
    return components.service


@pytest.fixture
def audited(components, tmp_path):
    """The real assistant writing to an audit trail of the test's own, and that trail."""
    from core.audit import AuditLog

    components.retriever
    audit = AuditLog(tmp_path / "audit.sqlite3")
    yield components.assistant(audit=audit), audit
    audit.close()


@pytest.fixture(scope="module")
def documents(components, request):
    """Uploads on the session's index, with the test module's `ADMIN` allowed to add documents."""
    from core.library import Documents

    return Documents(components.documents.library, {request.module.ADMIN}, max_bytes=20 * 1024 * 1024, max_pages=500)


@pytest.fixture(scope="module")
def assistant(components, documents):
    """The real assistant on the session's index, answering from the module's `documents` too."""
    return components.assistant(documents=documents)
