"""`python -m evals.run_eval replicas` on a tiny slice: two real bot processes on one Postgres and one Chroma
server (about 30 s, most of it the two start-ups)."""
from __future__ import annotations

from pathlib import Path

import pytest

from evals import replicas


@pytest.fixture(scope="module")
def prepared_data_dir(components) -> Path:
    components.prepare()  # the replicas must find the corpus and the index built, not build them themselves
    return components.settings.data_dir


def test_events_spread_over_two_replica_processes_are_answered_once_each(prepared_data_dir):
    result = replicas.run(rate=4.0, duration_s=2.0, data_dir=prepared_data_dir)

    assert result["events_sent"] == result["acked"] == result["answers_posted"] == 8, result
    assert result["lost"] == 0 and result["answered_twice"] == 0, result
    assert result["retries_sent"] >= 1 and result["audit_rows"] == result["answers_posted"]
    assert result["passed"], f"{result['checks']}; see {result['bot_logs']}"
