"""Small helpers shared by the adapter tests."""
from __future__ import annotations

import asyncio
import functools

from core.assistant import Assistant
from core.library import Documents


def bounded(timeout_s: float):
    """Decorator: run an async test body on its own event loop, failing fast on a hang."""

    def decorate(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            asyncio.run(asyncio.wait_for(test(*args, **kwargs), timeout=timeout_s))

        return run

    return decorate


def with_documents(components, admin: str) -> tuple[Documents, Assistant]:
    """The real assistant on the session's index, with `admin` allowed to add documents."""
    documents = Documents(components.documents.library, {admin}, max_bytes=20 * 1024 * 1024, max_pages=500)
    return documents, Assistant(components.retriever, components.generator, documents=documents)
