"""`python -m evals.run_eval faults` end to end (issue 18): every probe of the real bot processes passes. About a
minute: a Slack bot, a Teams bot and two terminal runs on the session's index."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_fault_probe_passes(components, data_dir):
    components.prepare()  # the session's index, so the bots do not build one
    result = subprocess.run([sys.executable, "-m", "evals.run_eval", "faults", "--json", "--data-dir", str(data_dir)],
                            cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    failed = [probe for probe in report["probes"] if not probe["passed"]]
    assert not failed and report["passed"] and result.returncode == 0, (failed, result.stderr[-2000:])
    assert len(report["probes"]) == 11
