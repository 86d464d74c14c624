"""Fair use: token buckets per user and per workspace, so one asker or one team cannot starve the others.

A bucket holds up to `burst` tokens and refills at `rate_per_min`; a question takes one token from its
user's bucket and one from its workspace's. Only the most recently used buckets are kept: a bucket
idle long enough to be evicted has refilled anyway, so forgetting it changes nothing.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from core.models import Asker
from core.service import RateLimited


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class _Buckets:
    def __init__(self, rate_per_min: float, burst: int, max_buckets: int):
        self.rate_per_s = rate_per_min / 60
        self.burst = burst
        self.max_buckets = max_buckets
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def refilled(self, key: tuple[str, ...], now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            if len(self._buckets) > self.max_buckets:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) * self.rate_per_s)
            bucket.updated = now
        return bucket

    def wait_s(self, bucket: _Bucket) -> float:
        """Seconds until `bucket` holds a whole token again."""
        return max(0.0, (1.0 - bucket.tokens) / self.rate_per_s)


class FairUse:
    def __init__(self, user_rate_per_min: float, user_burst: int, workspace_rate_per_min: float,
                 workspace_burst: int, *, clock: Callable[[], float] = time.monotonic, max_buckets: int = 10_000):
        self.clock = clock
        self.users = _Buckets(user_rate_per_min, user_burst, max_buckets)
        self.workspaces = _Buckets(workspace_rate_per_min, workspace_burst, max_buckets)
        self._lock = threading.Lock()

    def check(self, asker: Asker) -> None:
        """Take one token from the asker's and their workspace's bucket, or raise RateLimited taking none."""
        workspace_key = (asker.platform, asker.workspace or "")
        user_key = (*workspace_key, asker.user or "")
        with self._lock:
            now = self.clock()
            user = self.users.refilled(user_key, now)
            workspace = self.workspaces.refilled(workspace_key, now)
            if user.tokens < 1 or workspace.tokens < 1:
                raise RateLimited(max(self.users.wait_s(user), self.workspaces.wait_s(workspace)))
            user.tokens -= 1
            workspace.tokens -= 1
