"""Load benchmark for the Slack adapter: N signed app_mention events at once against the real bolt app.

Measures how fast every event is acknowledged (Slack's limit: 3 s), that each question gets exactly one
answer, the latency from sending the event to Slack receiving chat.postMessage (p50/p95), and the latency to the
first visible sign of work (the assistant status, a stream's start or the progress reaction; p50/p95).

    run(args)                # the real AnswerService, as bot.wiring builds it
    run(args, service=svc)   # any AnswerService
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict

from core.service import AnswerService
from evals.fake_slack import Call, LoopbackSlack, event_body, mention
from evals.metrics import percentile

ACK_LIMIT_S = 3.0
LOAD_CHANNEL = "CLOAD0001"
# The calls that first show an asker the bot is working on their question.
SIGNS_OF_WORK = ("assistant.threads.setStatus", "chat.startStream", "reactions.add")
QUESTIONS = (
    "When must a personal data breach be notified to the supervisory authority?",
    "What is personal data?",
    "Who must appoint a data protection officer?",
    "When is consent required for processing personal data?",
    "What rights does a data subject have to erasure?",
    "What must a record of processing activities contain?",
    "When is a data protection impact assessment required?",
    "Can personal data be transferred to a third country?",
    "What are the maximum administrative fines?",
    "What information must be given when data is collected from the data subject?",
)


def run(args: argparse.Namespace, service: AnswerService | None = None) -> dict:
    """Run the benchmark (`args.n` events, default 50) and print and return its figures."""
    n = getattr(args, "n", None) or 50
    timeout_s = getattr(args, "timeout", None) or max(60.0, n * 2.0)
    result = asyncio.run(_benchmark(service or _real_service(), n, timeout_s))
    print(_summary(result))
    return result


def _real_service() -> AnswerService:
    from bot.settings import load_settings
    from bot.wiring import Components

    return Components(load_settings()).service


async def _benchmark(service: AnswerService, n: int, timeout_s: float) -> dict:
    async with LoopbackSlack(service) as slack:
        # Warm-up (not measured): bolt's first auth.test and the core's first-use loading.
        await slack.post(event_body(mention(QUESTIONS[0], channel="CWARMUP01", ts="1600000000.000001")))
        await slack.fake.wait_for("chat.postMessage", timeout_s=timeout_s)

        threads = [f"1700000000.{i:06d}" for i in range(n)]
        bodies = [
            event_body(mention(QUESTIONS[i % len(QUESTIONS)], channel=LOAD_CHANNEL, ts=ts, user=f"U{i:08d}"))
            for i, ts in enumerate(threads)
        ]
        started = time.monotonic()
        sent_at: dict[str, float] = {}

        async def send(ts: str, body: str) -> tuple[int, float]:
            sent_at[ts] = time.monotonic()
            status, _ = await slack.post(body)
            return status, time.monotonic() - sent_at[ts]

        acks = await asyncio.gather(*(send(ts, body) for ts, body in zip(threads, bodies)))
        await _wait_for_replies(slack, set(threads), timeout_s)
        await asyncio.sleep(0.5)  # a duplicate answer would arrive right after the first
        posts_by_thread: dict[str, list[Call]] = defaultdict(list)
        for call in slack.fake.calls_to("chat.postMessage", _in_load):
            posts_by_thread[call.params.get("thread_ts", "")].append(call)
        wall_s = time.monotonic() - started
        first_signs = _first_signs_of_work(slack.fake.calls)

    ack_s = [elapsed for _, elapsed in acks]
    latencies = [min(c.at for c in posts_by_thread[ts]) - sent_at[ts] for ts in threads if posts_by_thread[ts]]
    sign_latencies = [first_signs[ts] - sent_at[ts] for ts in threads if ts in first_signs]
    answers = {ts: _answers_in(posts_by_thread[ts]) for ts in threads}
    return {
        "n": n,
        "acked_200": sum(status == 200 for status, _ in acks),
        "all_acked_within_3s": all(status == 200 and s < ACK_LIMIT_S for status, s in acks),
        "max_ack_ms": round(max(ack_s) * 1000, 1),
        "p50_ack_ms": round(percentile(ack_s, 50) * 1000, 1),
        "answered_exactly_once": sum(count == 1 for count in answers.values()),
        "unanswered": sum(count == 0 for count in answers.values()),
        "answered_more_than_once": sum(count > 1 for count in answers.values()),
        "apologies_or_rejections": sum(
            1 for ts in threads if posts_by_thread[ts] and not any(c.ends_an_answer for c in posts_by_thread[ts])
        ),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
        "p95_ms": round(percentile(latencies, 95) * 1000, 1) if latencies else None,
        "max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "p50_first_sign_ms": round(percentile(sign_latencies, 50) * 1000, 1) if sign_latencies else None,
        "p95_first_sign_ms": round(percentile(sign_latencies, 95) * 1000, 1) if sign_latencies else None,
        "wall_s": round(wall_s, 2),
    }


def _in_load(params: dict) -> bool:
    return params.get("channel") == LOAD_CHANNEL


def _first_signs_of_work(calls: list[Call]) -> dict[str, float]:
    """When each load thread first showed a sign of work, by its thread_ts."""
    first: dict[str, float] = {}
    for call in calls:
        params = call.params
        # setStatus names the channel `channel_id`; a reaction names its message `timestamp` (the mention's ts).
        if call.method not in SIGNS_OF_WORK or params.get("channel_id", params.get("channel")) != LOAD_CHANNEL:
            continue
        thread = params.get("thread_ts") or params.get("timestamp")
        if thread:
            first[thread] = min(call.at, first.get(thread, call.at))
    return first


async def _wait_for_replies(slack: LoopbackSlack, threads: set[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        replied = {c.params.get("thread_ts") for c in slack.fake.calls_to("chat.postMessage", _in_load)}
        if threads <= replied:
            return
        await asyncio.sleep(0.05)


def _answers_in(posts: list[Call]) -> int:
    """An answer may span several messages but has one feedback footer; a rejection/apology is one message."""
    footers = sum(c.ends_an_answer for c in posts)
    return footers if footers else len(posts)


def _summary(result: dict) -> str:
    return (
        f"slack-load: {result['n']} mentions · acked {result['acked_200']}/{result['n']} "
        f"(max {result['max_ack_ms']} ms, within 3 s: {result['all_acked_within_3s']}) · "
        f"answered exactly once {result['answered_exactly_once']}/{result['n']} · "
        f"event→chat.postMessage p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms · "
        f"event→first sign of work p50 {result['p50_first_sign_ms']} ms, p95 {result['p95_first_sign_ms']} ms\n"
        + json.dumps(result)
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options, for `python -m evals.run_eval slack-load` and for this module's own CLI."""
    parser.add_argument("--n", type=int, default=50, help="concurrent app_mention events (default 50)")
    parser.add_argument("--timeout", type=float, help="seconds to wait for all answers (default max(60, 2n))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
