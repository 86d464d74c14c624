"""Speed and memory: retrieval per question (warm), index build from scratch, warm start, peak RSS."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.settings import load_settings
from bot.wiring import Components
from evals.metrics import Question, percentile

REPO = Path(__file__).resolve().parent.parent


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def retrieval_times(components: Components, questions: list[Question], rounds: int) -> list[float]:
    retriever = components.retriever
    for q in questions[:10]:
        retriever.run(q.question)
    times = []
    for _ in range(rounds):
        for q in questions:
            started = time.perf_counter()
            retriever.run(q.question)
            times.append(time.perf_counter() - started)
    return times


def cold_and_warm_start(settings) -> dict:
    with tempfile.TemporaryDirectory() as data_dir:
        fresh = load_settings(GDPRBOT_DATA_DIR=data_dir, GDPR_SOURCE_DIR=str(settings.source_dir or ""),
                              GDPRBOT_EMBEDDING_MODEL=settings.embedding_model)
        cold = Components(fresh)
        started = time.perf_counter()
        cold.embedder.model_id
        model_load = time.perf_counter() - started
        started = time.perf_counter()
        cold.dense_index()
        build = time.perf_counter() - started

        warm = Components(fresh)
        started = time.perf_counter()
        warm.embedder.model_id
        warm_model_load = time.perf_counter() - started
        started = time.perf_counter()
        warm.prepare()
        warm_start = time.perf_counter() - started
    return {"model_load_s": round(model_load, 2), "index_build_s": round(build, 2),
            "warm_start_model_load_s": round(warm_model_load, 2), "warm_start_beyond_model_s": round(warm_start, 2)}


def ask_peak_rss_mb() -> float:
    """Peak resident memory of a whole `python -m bot ask` process answering one question."""
    process = subprocess.Popen([sys.executable, "-m", "bot", "ask", "How quickly must a personal data breach be reported?"],
                               cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"python -m bot ask exited with {process.returncode}")
    return round(usage.ru_maxrss / 1024, 1)


def measure(components: Components, questions: list[Question], rounds: int = 3) -> dict:
    # First, while this process is small: a forked child's peak RSS includes the parent's pages it
    # held before exec, so measured later it would report this process's size, not the bot's.
    peak_rss_mb = ask_peak_rss_mb()
    times = retrieval_times(components, questions, rounds)
    return {
        "questions": len(questions), "rounds": rounds,
        "retrieval_p50_ms": _ms(statistics.median(times)), "retrieval_p95_ms": _ms(percentile(times, 95)),
        **cold_and_warm_start(components.settings),
        "bot_ask_peak_rss_mb": peak_rss_mb,
    }
