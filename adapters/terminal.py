"""The terminal: plain-text and JSON answers, a batch of questions from stdin, an interactive chat."""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

from adapters import wording
from adapters.conversation import Conversation
from adapters.intents import (
    Answered,
    Declined,
    DocumentList,
    Help,
    Message,
    Reply,
    no_history,
)
from adapters.plain import render_plain
from adapters.replies import one_line_reply
from core.models import Answer, Asker

CHAT_THREAD = "terminal"


def render(reply: Reply) -> str:
    """Any reply as the terminal prints it."""
    match reply:
        case Answered(answer=answer) | Declined(answer=answer):
            return render_plain(answer) + "\n"
        case Help():
            return "\n".join([f"{wording.HELP_LEAD} {wording.HELP_ABOUT}", *(f"- {p}" for p in wording.HELP["cli"])])
        case DocumentList(records=()):
            return wording.NO_DOCUMENTS["cli"]
        case DocumentList(records=records):
            lines = [f"- {wording.document_line(r.filename, r.pages, r.passages, r.uploader, r.uploaded_at[:10])}"
                     for r in records]
            return "\n".join([f"{wording.DOCUMENTS_HEADER} {wording.documents_header(len(records), 'cli')}", *lines])
    return one_line_reply(reply, "cli")


def answer_json(answer: Answer) -> dict:
    return {
        "request_id": answer.request_id,
        "question": answer.question,
        "abstained": answer.abstained,
        "reason": answer.abstention.reason.value if answer.abstention else None,
        "answer": render_plain(answer),
        "citations": [{"provision": c.label, "quote": c.quote, "url": c.url, "lang": c.lang, "kind": c.kind}
                      for c in answer.citations],
        "related": [{"provision": p.label, "url": p.url} for p in answer.related],
        "retrieved": [{"provision": p.label, "score": round(p.score, 4)} for p in answer.retrieved],
        "mode": answer.mode.value,
        "notices": [n.value for n in answer.notices],
        "timings_ms": {k: round(v, 1) for k, v in answer.timings_ms.items()},
    }


class NotText(ValueError):
    """A line of stdin that is not UTF-8 text: reported, and the batch goes on."""


def stdin_lines(stream: TextIO = sys.stdin) -> Iterator[str | NotText]:
    for number, raw in enumerate(stream.buffer, 1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            yield NotText(f"line {number} is not UTF-8 text; skipped")


def answer_lines(conversation: Conversation, questions: Iterable[str | NotText], asker: Asker, as_json: bool,
                 out: TextIO = sys.stdout) -> int:
    """Every line answered as a question of its own, in order: the terminal is the operator's, so no line is
    ever refused for fair use."""
    return asyncio.run(_answer_lines(conversation, questions, asker, as_json, out))


async def _answer_lines(conversation: Conversation, questions: Iterable[str | NotText], asker: Asker, as_json: bool,
                        out: TextIO) -> int:
    for question in questions:
        if isinstance(question, NotText):
            print(json.dumps({"question": None, "error": str(question)}) if as_json else str(question), file=out,
                  flush=True)
            continue
        if not question.strip():
            continue
        reply = await conversation.answer(Message(question, asker, CHAT_THREAD, history=no_history))
        if not as_json:
            print(render(reply), file=out, flush=True)
        elif isinstance(reply, (Answered, Declined)):
            print(json.dumps(answer_json(reply.answer), ensure_ascii=False), file=out, flush=True)
        else:
            print(json.dumps({"question": question, "error": render(reply)}, ensure_ascii=False), file=out, flush=True)
    return 0


class _Printer:
    def __init__(self, out: TextIO):
        self._out = out

    async def send(self, reply: Reply) -> None:
        print(render(reply), file=self._out, flush=True)

    def working(self, file_name: str | None = None) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()


def chat(conversation: Conversation, asker: Asker, *, read: Callable[[str], str] = input,
         out: TextIO = sys.stdout) -> int:
    """Until an empty line or end of input; follow-ups keep the conversation's context."""
    print("Ask about the GDPR (empty line or Ctrl-D to quit).", file=out)
    printer = _Printer(out)
    while True:
        try:
            text = read("you> ").strip()
        except EOFError:
            print(file=out)
            return 0
        if not text:
            return 0
        asyncio.run(conversation.handle(Message(text, asker, CHAT_THREAD), printer))
