"""In-process stores: what one process may forget when it stops (the terminal's chat, redelivery claims that die
with the process whose deliveries they were)."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque

from core.models import Turn

HISTORY_TURNS = 6  # earlier messages (questions and answers) remembered per thread
MAX_THREADS_REMEMBERED = 5000
MAX_TRACKED_ANSWERS = 10_000  # sent answers whose feedback buttons can still be mapped to a request id
CLAIM_TTL_S = 3600.0  # platforms retry within minutes (Slack: at once, after 1 and after 5 minutes)


class Deliveries:
    """The one rule for redeliveries on every platform: a key (a message's, a file share's) seen in the last
    `ttl_s` seconds is a duplicate. Platforms retry within minutes; the bound keeps memory flat."""

    def __init__(self, ttl_s: float = CLAIM_TTL_S, max_keys: int = 50_000):
        self._ttl_s = ttl_s
        self._max_keys = max_keys
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, *keys: str) -> bool:
        """True for the first caller with any of `keys`; all of them count as seen afterwards."""
        with self._lock:
            now = time.monotonic()
            while self._seen and (len(self._seen) > self._max_keys
                                  or next(iter(self._seen.values())) < now - self._ttl_s):
                self._seen.popitem(last=False)
            first = not any(key in self._seen for key in keys)
            for key in keys:
                self._seen[key] = now
                self._seen.move_to_end(key)
            return first

    def release(self, *keys: str) -> None:
        """Forget `keys`, so that the platform's next delivery is taken (this one could not be accepted)."""
        with self._lock:
            for key in keys:
                self._seen.pop(key, None)


class MemoryThreads:
    """The last few turns of each recent thread, least recently used threads forgotten."""

    def __init__(self, turns: int = HISTORY_TURNS, threads: int = MAX_THREADS_REMEMBERED):
        self._turns = turns
        self._threads_max = threads
        self._threads: OrderedDict[str, deque[Turn]] = OrderedDict()
        self._lock = threading.Lock()

    def history(self, key: str) -> tuple[Turn, ...]:
        with self._lock:
            return tuple(self._threads.get(key, ()))

    def remember(self, key: str, question: str, answer: str) -> None:
        with self._lock:
            thread = self._threads.pop(key, None) or deque(maxlen=self._turns)
            thread.extend((Turn("user", question), Turn("assistant", answer)))
            self._threads[key] = thread
            while len(self._threads) > self._threads_max:
                self._threads.popitem(last=False)


class MemorySentAnswers:
    """Which request id each recently sent answer has (least recently used forgotten)."""

    def __init__(self, capacity: int = MAX_TRACKED_ANSWERS) -> None:
        self._capacity = capacity
        self._ids: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, message_id: str) -> str | None:
        with self._lock:
            if message_id in self._ids:
                self._ids.move_to_end(message_id)
            return self._ids.get(message_id)

    def put(self, message_id: str, request_id: str) -> None:
        with self._lock:
            self._ids[message_id] = request_id
            self._ids.move_to_end(message_id)
            while len(self._ids) > self._capacity:
                self._ids.popitem(last=False)


__all__ = ["CLAIM_TTL_S", "Deliveries", "HISTORY_TURNS", "MemorySentAnswers", "MemoryThreads"]
