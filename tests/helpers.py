"""Small helpers shared by the adapter tests."""
from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from contextlib import contextmanager

from core.assistant import Assistant
from core.audit import AuditLog
from core.extractive import ExtractiveGenerator
from core.llm import GroqGenerator, chat_groq
from evals.fake_llm import FakeLLM, Reply


def bounded(timeout_s: float):
    """Decorator: run an async test body on its own event loop, failing fast on a hang."""

    def decorate(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            asyncio.run(asyncio.wait_for(test(*args, **kwargs), timeout=timeout_s))

        return run

    return decorate


# What the LLM-mode tests ask, and statements to script the model with: one whose quote is in Art. 33(1), one whose
# quote is not (it must never be shown).
QUESTION = "How quickly must a personal data breach be reported?"
VERIFIED = {"text": ("The controller must notify the supervisory authority within 72 hours of becoming aware of "
                     "the breach."),
            "source": "Art. 33(1)",
            "quote": ("the controller shall without undue delay and, where feasible, not later than 72 hours after "
                      "having become aware of it, notify the personal data breach to the supervisory authority")}
UNVERIFIED = {"text": "Late notification is fined with exactly 50 million euros.", "source": "Art. 33(1)",
              "quote": "a fine of 50 000 000 EUR for every late notification"}


@contextmanager
def llm_mode(components, replies: list[Reply], audit: AuditLog | None = None) -> Iterator[Assistant]:
    """The assistant in LLM mode, the model played by a local OpenAI-compatible fake."""
    with FakeLLM(replies) as llm:
        generator = GroqGenerator(chat_groq("test-key", "llama-test", llm.url, 10.0), ExtractiveGenerator(),
                                  sleep=lambda _: None)
        yield Assistant(components.retriever, generator, components.abstention, verifier=components.verifier,
                        fallback=ExtractiveGenerator(), audit=audit)
