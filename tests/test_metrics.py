"""Prometheus metrics: the rendered text parses, and counts and latency quantiles are right."""
from __future__ import annotations

import math
import threading

from prometheus_client.parser import text_string_to_metric_families

from core.metrics import Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, frozenset], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def test_counts_per_platform() -> None:
    metrics = Metrics()
    metrics.observe_answer("slack", 0.5, abstained=False)
    metrics.observe_answer("slack", 0.7, abstained=True)
    metrics.observe_answer("teams", 0.2, abstained=False)
    metrics.observe_error("teams")
    metrics.observe_rate_limited("slack")
    metrics.observe_rate_limited("slack")
    metrics.observe_audit_write_failure()
    samples = _samples(metrics)
    slack, teams = frozenset({("platform", "slack")}), frozenset({("platform", "teams")})
    assert samples["gdprbot_questions_total", slack] == 2
    assert samples["gdprbot_questions_total", teams] == 1
    assert samples["gdprbot_abstentions_total", slack] == 1
    assert ("gdprbot_abstentions_total", teams) not in samples
    assert samples["gdprbot_errors_total", teams] == 1
    assert samples["gdprbot_rate_limited_total", slack] == 2
    assert samples["gdprbot_audit_write_failures_total", frozenset()] == 1
    assert samples["gdprbot_answer_latency_seconds_count", frozenset()] == 3
    assert math.isclose(samples["gdprbot_answer_latency_seconds_sum", frozenset()], 1.4)
    assert samples["gdprbot_answer_latency_seconds_bucket", frozenset({("le", "0.5")})] == 2


def test_p50_and_p95_come_from_the_recent_window() -> None:
    metrics = Metrics(window=100)
    samples = _samples(metrics)
    assert math.isnan(samples["gdprbot_answer_latency_p50_seconds", frozenset()])
    for latency in range(1, 101):
        metrics.observe_answer("slack", float(latency), abstained=False)
    samples = _samples(metrics)
    assert samples["gdprbot_answer_latency_p50_seconds", frozenset()] == 50
    assert samples["gdprbot_answer_latency_p95_seconds", frozenset()] == 95
    for _ in range(100):  # the old latencies leave the window
        metrics.observe_answer("slack", 0.25, abstained=False)
    samples = _samples(metrics)
    assert samples["gdprbot_answer_latency_p95_seconds", frozenset()] == 0.25
    assert samples["gdprbot_answer_latency_seconds_count", frozenset()] == 200


def test_index_info_is_replaced_not_accumulated() -> None:
    metrics = Metrics()
    metrics.set_index_info(corpus_version="2016-679-v1", model="minilm")
    metrics.set_index_info(corpus_version="2016-679-v2", model="minilm")
    info = {labels: value for (name, labels), value in _samples(metrics).items() if name == "gdprbot_index_info"}
    assert info == {frozenset({("corpus_version", "2016-679-v2"), ("model", "minilm")}): 1}


def test_observations_from_many_threads_are_all_counted() -> None:
    metrics = Metrics()

    def answer() -> None:
        for _ in range(500):
            metrics.observe_answer("slack", 0.1, abstained=False)
            metrics.latency_quantile(0.95)

    threads = [threading.Thread(target=answer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _samples(metrics)["gdprbot_questions_total", frozenset({("platform", "slack")})] == 4000


def test_separate_instances_do_not_share_a_registry() -> None:
    Metrics().observe_error("slack")
    assert ("gdprbot_errors_total", frozenset({("platform", "slack")})) not in _samples(Metrics())
