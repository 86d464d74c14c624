"""What adapters call for uploaded documents: admins add and forget, everyone in the workspace lists."""
from __future__ import annotations

import uuid
from collections.abc import Collection

from core.documents import DocumentLibrary, DocumentRecord
from core.models import Asker
from corpus.documents import (DEFAULT_MAX_CHARS, DEFAULT_MAX_PASSAGES, DEFAULT_PARSE_MEMORY_MB, DEFAULT_PARSE_TIMEOUT_S,
                              DocumentRejected, ingest_pdf, too_large)

__all__ = ["DocumentRecord", "DocumentRejected", "Documents", "NotAllowed", "too_large"]


class NotAllowed(Exception):
    """The asker may not do this; `str(exc)` is the polite reply."""


def _scope(asker: Asker) -> str:
    return f"{asker.platform}:{asker.workspace or ''}"


class Documents:
    def __init__(self, library: DocumentLibrary, admins: Collection[str], *, max_bytes: int, max_pages: int,
                 max_chars: int = DEFAULT_MAX_CHARS, max_passages: int = DEFAULT_MAX_PASSAGES,
                 parse_timeout_s: float = DEFAULT_PARSE_TIMEOUT_S, parse_memory_mb: int = DEFAULT_PARSE_MEMORY_MB):
        self.library = library
        self.admins = frozenset(admins)
        self.max_bytes = max_bytes
        self.max_pages = max_pages
        self.max_chars = max_chars
        self.max_passages = max_passages
        self.parse_timeout_s = parse_timeout_s
        self.parse_memory_mb = parse_memory_mb

    def is_admin(self, asker: Asker) -> bool:
        return bool(asker.user) and asker.user in self.admins

    def require_admin(self, asker: Asker, action: str = "add documents") -> None:
        """Raises NotAllowed unless the asker may add (or remove) documents: checked before any download."""
        if not self.is_admin(asker):
            raise NotAllowed(f"Sorry, only the bot's admins can {action}. Ask one of them, or your IT team, "
                             "to add you to GDPRBOT_ADMINS.")

    def add(self, data: bytes, filename: str, *, asker: Asker) -> DocumentRecord:
        """Index a PDF for the asker's workspace. Raises NotAllowed or DocumentRejected (nothing indexed)."""
        self.require_admin(asker)
        document = ingest_pdf(data, filename, max_bytes=self.max_bytes, max_pages=self.max_pages,
                              max_chars=self.max_chars, max_passages=self.max_passages,
                              timeout_s=self.parse_timeout_s, memory_mb=self.parse_memory_mb)
        return self.library.add(_scope(asker), document, uploader=asker.user or "", upload_id=uuid.uuid4().hex[:12])

    def list(self, asker: Asker) -> list[DocumentRecord]:
        return self.library.list(_scope(asker))

    def forget(self, filename: str, *, asker: Asker) -> DocumentRecord | None:
        self.require_admin(asker, "remove documents")
        return self.library.forget(_scope(asker), filename)

    def search(self, query: str, asker: Asker, k: int, min_similarity: float):
        return self.library.search(_scope(asker), query, k, min_similarity)
