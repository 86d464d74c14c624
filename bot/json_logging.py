"""Logging setup: one JSON object per line for log shippers, or the plain format for a terminal.

The request id travels in a context variable, so every line logged while answering one question carries
it without threading it through each call. Context variables follow asyncio tasks but not new threads:
code that hands work to a thread pool binds the id again there (or passes `extra={"request_id": ...}`).
"""
from __future__ import annotations

import json as json_module
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import TextIO

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}


@contextmanager
def bind_request_id(request_id: str) -> Iterator[None]:
    token = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = _request_id.get()
        if request_id is not None:
            entry["request_id"] = request_id
        entry.update((key, value) for key, value in record.__dict__.items() if key not in _STANDARD)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an unserialisable `extra` value must not lose the line.
        return json_module.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str, json: bool, *, stream: TextIO | None = None) -> None:
    """Replace the root logger's handlers with one writing to `stream` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if json else logging.Formatter(PLAIN_FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
