"""Prometheus metrics for the `/metrics` endpoint, in a registry of their own so tests and processes don't share state.

`gdprbot_questions_total` counts answered questions (abstentions included); errors and rate-limited
questions are counted apart. The p50/p95 gauges come from the last `window` answers, computed at scrape
time, for dashboards that cannot compute quantiles from the histogram.
"""
from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

LATENCY_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0)


class Metrics:
    def __init__(self, *, window: int = 1000):
        self.registry = CollectorRegistry()
        self.questions = Counter("gdprbot_questions", "Questions answered (abstentions included)", ["platform"],
                                 registry=self.registry)
        self.abstentions = Counter("gdprbot_abstentions", "Questions the Regulation does not answer", ["platform"],
                                   registry=self.registry)
        self.errors = Counter("gdprbot_errors", "Questions that failed with an error", ["platform"],
                              registry=self.registry)
        self.rate_limited = Counter("gdprbot_rate_limited", "Questions refused by the fair-use limits", ["platform"],
                                    registry=self.registry)
        self.audit_write_failures = Counter("gdprbot_audit_write_failures",
                                            "Audit rows the store did not take at once (spooled, or lost)",
                                            registry=self.registry)
        self.latency = Histogram("gdprbot_answer_latency_seconds", "Time to answer a question",
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.index = Info("gdprbot_index", "The corpus and embedding model being served", registry=self.registry)
        self._recent: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()
        for quantile, name in ((0.5, "p50"), (0.95, "p95")):
            Gauge(f"gdprbot_answer_latency_{name}_seconds", f"{name} answer latency over the last {window} answers",
                  registry=self.registry).set_function(lambda q=quantile: self.latency_quantile(q))

    def observe_answer(self, platform: str, latency_s: float, abstained: bool) -> None:
        self.questions.labels(platform).inc()
        if abstained:
            self.abstentions.labels(platform).inc()
        self.latency.observe(latency_s)
        with self._lock:
            self._recent.append(latency_s)

    def observe_error(self, platform: str) -> None:
        self.errors.labels(platform).inc()

    def observe_rate_limited(self, platform: str) -> None:
        self.rate_limited.labels(platform).inc()

    def observe_audit_write_failure(self) -> None:
        """Pass as `AuditLog(on_failure=...)`."""
        self.audit_write_failures.inc()

    def watch_health(self, parts: Mapping[str, Callable[[], Mapping]]) -> None:
        """`gdprbot_degraded{part=…}` (1 when a part's health is not ok) and the audit rows waiting in the spool,
        read from each part's health at scrape time."""
        degraded = Gauge("gdprbot_degraded", "1 while a part of the bot's storage is degraded", ["part"],
                         registry=self.registry)
        for name, health in parts.items():
            degraded.labels(name).set_function(lambda health=health: 0.0 if health().get("ok", True) else 1.0)
        if "audit" in parts:
            audit = parts["audit"]
            Gauge("gdprbot_audit_spooled_rows", "Audit rows waiting in the spool for the store",
                  registry=self.registry).set_function(lambda: float(audit().get("spooled", 0)))
            Gauge("gdprbot_audit_lost_rows", "Audit rows not even the spool could keep, since the start",
                  registry=self.registry).set_function(lambda: float(audit().get("lost", 0)))

    def set_index_info(self, corpus_version: str, model: str) -> None:
        self.index.info({"corpus_version": corpus_version, "model": model})

    def latency_quantile(self, q: float) -> float:
        """Nearest-rank quantile of the recent latencies; NaN (no data) before the first answer."""
        with self._lock:
            recent = sorted(self._recent)
        if not recent:
            return math.nan
        return recent[max(0, math.ceil(q * len(recent)) - 1)]

    def render(self) -> tuple[bytes, str]:
        """Body and Content-Type for an HTTP `/metrics` response."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
