"""The real bot as a subprocess under a small load, and killed mid-load (evals/ops_load.py, scaled down for CI).

Each run starts its own bot process (8–15 s) and uses a fresh load channel, so audit rows of other tests
in the shared data dir do not count.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from evals import ops_load

N, DURATION_S, KILL_AT = 30, 5.0, 10


@pytest.fixture(scope="module")
def prepared_data_dir(components) -> Path:
    components.prepare()  # the subprocess must find the corpus and the index built, not build them itself
    return components.settings.data_dir


def test_every_mention_is_answered_once_audited_and_counted(prepared_data_dir):
    result = ops_load.run(n=N, duration_s=DURATION_S, data_dir=prepared_data_dir)
    load = result["load"]

    assert load["http_5xx"] == 0 and load["http_2xx"] == N, load
    assert load["answered_once"] == N, load
    assert load["audit_rows"] == load["answers_posted"] == N
    assert load["metrics_questions_total"] == N
    assert load["clean_exit"], f"see {result['bot_logs']}"
    assert result["passed"], result["checks"]


def test_a_killed_bot_keeps_its_committed_audit_rows_and_serves_again(prepared_data_dir):
    result = ops_load.run(n=N, duration_s=DURATION_S, data_dir=prepared_data_dir, kill_at=KILL_AT)
    kill, after = result["kill"], result["after_restart"]

    assert kill["answers_before_kill"] >= KILL_AT
    assert result["load"]["sent"] < N, "the kill came after the load, not during it"
    assert kill["integrity_check"] == "ok"
    assert kill["audit_rows_after_restart"] >= kill["answers_before_kill"]
    assert after["answered_once"] == after["sent"] == ops_load.AFTER_RESTART
    assert result["passed"], result["checks"]
