"""Every eval command the README quotes runs, on a small slice, in a copy holding only what `git ls-files`
lists: a figure in the README can never rest on a file that is not in the repository."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
# `python -m evals.run_eval …` in backticks, with any VAR=value settings before it.
QUOTED = re.compile(r"`((?:[A-Z][A-Z0-9_]*=\S+ )*python -m evals\.run_eval [^`]+)`")
# Appended to each command (argparse keeps the last value), so that it runs in seconds.
SLICES = {
    "retrieval": ["--limit", "2"], "latency": ["--limit", "2", "--rounds", "1"], "abstention": ["--limit", "4"],
    "citations": ["--limit", "2"], "answers": ["--limit", "2"], "memory": ["--limit", "2", "--n", "6", "--rounds", "1"],
    "slack-load": ["--n", "3"], "ops-load": ["--n", "6", "--duration", "2"], "documents": ["--pages", "2"],
    "replicas": ["--rate", "4", "--duration", "2"], "faults": [],
}
# The evals that start bot processes of their own take the session's index instead of building one each.
OWN_PROCESSES = {"ops-load", "replicas", "faults"}
KILL_SLICE = ["--kill-at", "3"]


def quoted_commands() -> list[str]:
    return sorted({" ".join(m.split()) for m in QUOTED.findall(README)})


def test_the_readme_quotes_the_eval_commands_behind_its_figures():
    subcommands = {shlex.split(c)[shlex.split(c).index("evals.run_eval") + 1] for c in quoted_commands()}
    assert {"retrieval", "abstention", "citations", "latency", "memory", "documents", "faults", "replicas"} <= subcommands
    assert subcommands <= set(SLICES), f"add a slice for {subcommands - set(SLICES)}"


@pytest.fixture(scope="module")
def tracked_copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clean-clone")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (REPO / name).is_file():
            (root / "repo" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / "repo" / name)
    (root / "shared").symlink_to(REPO.parent / "shared")
    return root / "repo"


@pytest.mark.parametrize("command", quoted_commands())
def test_each_quoted_eval_command_runs_on_the_tracked_files(command, tracked_copy, components, data_dir):
    components.prepare()
    words = shlex.split(command)
    start = words.index("python")
    settings = dict(w.split("=", 1) for w in words[:start])
    args = words[start + 3:]
    sliced = args + SLICES[args[0]] + (KILL_SLICE if "--kill-at" in args else [])
    if args[0] in OWN_PROCESSES:
        sliced += ["--data-dir", str(data_dir)]
    result = subprocess.run([sys.executable, "-m", "evals.run_eval", *sliced], cwd=tracked_copy, capture_output=True,
                            text=True, timeout=420, env={**os.environ, **settings, "HF_HUB_OFFLINE": "1",
                                                         "GDPRBOT_DATA_DIR": str(data_dir)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip()
