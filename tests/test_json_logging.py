"""JSON logging: one object per line, with the bound request id, extra fields and exceptions."""
from __future__ import annotations

import io
import json
import logging

import pytest

from bot.json_logging import bind_request_id, configure_logging


@pytest.fixture
def stream():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out = io.StringIO()
    yield out
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_json_object_per_line_with_the_basics(stream: io.StringIO) -> None:
    configure_logging("info", json=True, stream=stream)
    logging.getLogger("core.test").info("answered %s", "q1")
    logging.getLogger("core.test").debug("not shown")
    (line,) = _lines(stream)
    assert line["level"] == "INFO" and line["logger"] == "core.test" and line["message"] == "answered q1"
    assert line["time"].endswith("+00:00")
    assert "request_id" not in line


def test_the_bound_request_id_and_extra_fields_are_included(stream: io.StringIO) -> None:
    configure_logging("INFO", json=True, stream=stream)
    log = logging.getLogger("core.test")
    with bind_request_id("req-1"):
        log.warning("dropped statement", extra={"reason": "no quote", "path": object()})
        with bind_request_id("req-2"):
            log.info("nested")
        log.info("explicit wins", extra={"request_id": "req-3"})
    log.info("after")
    first, nested, explicit, after = _lines(stream)
    assert first["request_id"] == "req-1" and first["reason"] == "no quote" and first["path"].startswith("<object")
    assert nested["request_id"] == "req-2"
    assert explicit["request_id"] == "req-3"
    assert "request_id" not in after


def test_exceptions_are_kept_in_the_line(stream: io.StringIO) -> None:
    configure_logging("INFO", json=True, stream=stream)
    try:
        raise ValueError("multi\nline")
    except ValueError:
        logging.getLogger("core.test").exception("failed")
    (line,) = _lines(stream)
    assert line["message"] == "failed"
    assert "ValueError: multi\nline" in line["exception"] and "Traceback" in line["exception"]


def test_reconfiguring_replaces_the_handler_and_plain_text_is_available(stream: io.StringIO) -> None:
    configure_logging("INFO", json=True, stream=io.StringIO())
    configure_logging("INFO", json=False, stream=stream)
    logging.getLogger("core.test").info("hello")
    assert len(logging.getLogger().handlers) == 1
    assert stream.getvalue().rstrip().endswith("INFO core.test: hello")
