"""`python -m evals.run_eval memory`: what a `python -m bot ask` process costs, measured from outside.

- one question: peak RSS and wall time of `python -m bot ask "…"`;
- start-up: wall time of `python -m bot ask < /dev/null` (corpus, indexes and model loaded, nothing asked);
- a batch: N questions spanning every official language (round-robin over the visible sets) piped through
  one `python -m bot ask --json`: peak RSS, every question answered, the slowest question after start.
Each process is measured on its own rusage (os.wait4), so this process's size never leaks into the figures.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import zip_longest
from pathlib import Path

from evals.metrics import Question

REPO = Path(__file__).resolve().parent.parent
ONE_QUESTION = "How quickly must a personal data breach be reported?"
BARS = {"one_question_peak_rss_mb": 700, "batch_peak_rss_mb": 750, "batch_slowest_question_ms": 1000}


def _bot_ask(args: list[str], stdin_path: str | None = None) -> tuple[float, float, str]:
    """(peak RSS in MB, wall seconds, stdout) of one `python -m bot ask …` process."""
    with open(stdin_path or os.devnull, "rb") as stdin, tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "bot", "ask", *args], cwd=REPO, stdin=stdin, stdout=out,
                                   stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"python -m bot ask {' '.join(args)} exited with {os.waitstatus_to_exitcode(status)}")
        out.seek(0)
        return usage.ru_maxrss / 1024, wall, out.read().decode("utf-8")


def spanning_languages(questions: list[Question], n: int) -> list[Question]:
    """`n` questions taken in turn from each language, so every language is asked early and often."""
    by_lang: dict[str, list[Question]] = {}
    for q in questions:
        by_lang.setdefault(q.lang, []).append(q)
    interleaved = [q for row in zip_longest(*by_lang.values()) for q in row if q is not None]
    return interleaved[:n]


def measure(questions: list[Question], n: int = 300, rounds: int = 3) -> dict:
    one = [_bot_ask([ONE_QUESTION]) for _ in range(rounds)]
    startup = [_bot_ask([])[1] for _ in range(rounds)]
    batch = spanning_languages(questions, n)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as lines:
        lines.write("".join(q.question.replace("\n", " ") + "\n" for q in batch))
    try:
        rss, wall, out = _bot_ask(["--json"], lines.name)
    finally:
        os.unlink(lines.name)
    answers = [json.loads(line) for line in out.splitlines()]
    latencies = [a["timings_ms"]["total"] for a in answers if "timings_ms" in a]
    result = {
        "one_question_peak_rss_mb": round(statistics.median(r for r, _, _ in one), 1),
        "one_question_wall_s": round(statistics.median(w for _, w, _ in one), 2),
        "startup_wall_s": round(statistics.median(startup), 2),
        "batch_questions": len(batch), "batch_languages": len({q.lang for q in batch}),
        "batch_answered": len(latencies), "batch_errors": [a["error"] for a in answers if "error" in a][:5],
        "batch_peak_rss_mb": round(rss, 1), "batch_wall_s": round(wall, 1),
        "batch_median_question_ms": round(statistics.median(latencies), 1) if latencies else None,
        "batch_slowest_question_ms": round(max(latencies), 1) if latencies else None,
        "rounds": rounds,
    }
    result["bars"] = {name: {"bar": bar, "met": result[name] is not None and result[name] <= bar}
                      for name, bar in BARS.items()}
    return result
