"""Fair use: token buckets per user and per workspace, so one asker or one team cannot starve the others.

A bucket holds up to `burst` tokens and refills at `rate_per_min`; a question takes one token from its
user's bucket and one from its workspace's. `FairUse` counts in this process and keeps only the most
recently used buckets (a bucket idle long enough to be evicted has refilled anyway, so forgetting it
changes nothing); `SharedFairUse` keeps them in a store every replica shares, so that a burst spread
over replicas is limited once.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from core.models import Asker
from core.service import RateLimited
from core.storage.base import BucketLimit, BucketStore, StorageUnavailable

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class _Buckets:
    def __init__(self, rate_per_min: float, burst: int, max_buckets: int):
        self.limit = BucketLimit("", rate_per_min / 60, burst)
        self.max_buckets = max_buckets
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def refilled(self, key: tuple[str, ...], now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.limit.burst), now)
            if len(self._buckets) > self.max_buckets:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = self.limit.refilled(bucket.tokens, now - bucket.updated)
            bucket.updated = now
        return bucket

    def wait_s(self, bucket: _Bucket) -> float:
        """Seconds until `bucket` holds a whole token again."""
        return self.limit.wait_s(bucket.tokens)


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


class SharedFairUse:
    """The same limits, on buckets in a store every replica shares (`BucketStore.take` is atomic)."""

    def __init__(self, store: BucketStore, user_rate_per_min: float, user_burst: int, workspace_rate_per_min: float,
                 workspace_burst: int):
        self.store = store
        self.user_rate_per_s = user_rate_per_min / 60
        self.user_burst = user_burst
        self.workspace_rate_per_s = workspace_rate_per_min / 60
        self.workspace_burst = workspace_burst

    def check(self, asker: Asker) -> None:
        """Take one token from the asker's and their workspace's bucket, or raise RateLimited taking none. When the
        store cannot be reached the question is let through (and logged): fairness is not worth a refusal."""
        workspace_key = [asker.platform, asker.workspace or ""]
        buckets = [BucketLimit(json.dumps(["user", *workspace_key, asker.user or ""]), self.user_rate_per_s,
                               self.user_burst),
                   BucketLimit(json.dumps(["workspace", *workspace_key]), self.workspace_rate_per_s,
                               self.workspace_burst)]
        try:
            wait_s = self.store.take(buckets)
        except StorageUnavailable:
            log.exception("fair-use buckets unavailable; the question is let through")
            return
        if wait_s > 0:
            raise RateLimited(wait_s)
