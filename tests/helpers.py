"""Small helpers shared by the adapter tests."""
from __future__ import annotations

import asyncio
import functools


def bounded(timeout_s: float):
    """Decorator: run an async test body on its own event loop, failing fast on a hang."""

    def decorate(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            asyncio.run(asyncio.wait_for(test(*args, **kwargs), timeout=timeout_s))

        return run

    return decorate

