"""Operations load test: the real bot as a subprocess in Slack HTTP mode, against a `FakeSlack` on loopback.

Sends N signed app_mention events spread evenly over a duration and checks what an operator relies on:
no 5xx, every mention answered exactly once, one audit row per answer, `/metrics` agreeing, latency from
event to chat.postMessage, peak memory, and a clean exit on SIGTERM. With `kill_at`, the bot is SIGKILLed
once that many answers were posted and restarted: the audit db must pass `PRAGMA integrity_check`, keep
every row committed before the kill, and the restarted bot must answer the mentions it acknowledged but never
answered before the kill (from its journal of pending questions), then new ones.

    python -m evals.ops_load [--n 500] [--duration 60] [--kill-at 200] [--data-dir DIR]

The bot runs on the data dir's built index (default: the repo's `data/`), in extractive mode: GROQ_API_KEY
is not passed on, since the test measures the bot on loopback, not a remote LLM. Fair-use limits come
from the environment (defaults otherwise) and are reported with the figures.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from aiohttp import ClientError, ClientSession, ClientTimeout
from prometheus_client.parser import text_string_to_metric_families

from adapters import wording
from adapters.conversation import CORE_THREADS
from bot.settings import REPO_ROOT, Settings
from core.service import RateLimited
from evals.fake_slack import (
    BOT_TOKEN,
    SIGNING_SECRET,
    Call,
    FakeSlack,
    event_body,
    mention,
    sign,
)
from evals.metrics import percentile
from evals.slack_load import QUESTIONS

HEALTH_TIMEOUT_S = 180.0  # a data dir without an index is built on start (about a minute)
ANSWER_TIMEOUT_S = 120.0  # after the last mention was sent
REQUEST_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 20.0
# A duplicate answer, or a post the killed bot sent just before dying, arrives right after the others.
SETTLE_S = 0.5
POLL_S = 0.05
AFTER_RESTART = 5
RATE_LIMITED_TEXT = wording.rejected(RateLimited(1)).split(".")[0]
APOLOGY_TEXT = wording.apology("").split(" while")[0]
FAIR_USE_SETTINGS = {"GDPRBOT_USER_RATE_PER_MIN": "user_rate_per_min", "GDPRBOT_USER_BURST": "user_burst",
                     "GDPRBOT_WORKSPACE_RATE_PER_MIN": "workspace_rate_per_min",
                     "GDPRBOT_WORKSPACE_BURST": "workspace_burst"}


class BotFailed(Exception):
    """The bot subprocess did not become healthy; the message names its log."""


@dataclass
class Mention:
    ts: str
    user: str
    question: str
    sent_at: float | None = None  # time.monotonic(), comparable with `Call.at`
    status: int | None = None  # None: no HTTP response (refused, reset, timed out)
    ack_s: float | None = None


class BotProcess:
    """`python -m bot PLATFORM --port N` (slack or teams) on a free port, its output in `log_path`; `wrap` is a
    command prefix it runs under (e.g. strace)."""

    def __init__(self, env: dict[str, str], log_path: Path, platform: str = "slack", wrap: Sequence[str] = ()):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "wb")  # noqa: SIM115 - outlives __init__, closed by close()
        self.proc = subprocess.Popen([*wrap, sys.executable, "-m", "bot", platform, "--port", str(self.port)],
                                     cwd=REPO_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    async def wait_healthy(self, http: ClientSession) -> float:
        """Seconds until `GET /healthz` answered 200."""
        started = time.monotonic()
        while time.monotonic() - started < HEALTH_TIMEOUT_S:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise BotFailed(f"the bot exited with {code} before it was healthy; see {self.log_path}")
            try:
                async with http.get(self.url + "/healthz", timeout=ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        return round(time.monotonic() - started, 2)
            except (ClientError, TimeoutError):
                pass  # not listening yet
            await asyncio.sleep(0.25)
        raise BotFailed(f"the bot was not healthy within {HEALTH_TIMEOUT_S:.0f} s; see {self.log_path}")

    def peak_rss_mb(self) -> float:
        """VmHWM: the most resident memory the process ever had."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
        raise BotFailed(f"no VmHWM for pid {self.proc.pid}")

    async def kill(self) -> None:
        self.proc.kill()
        await asyncio.to_thread(self.proc.wait, STOP_TIMEOUT_S)

    async def stop(self) -> dict:
        """SIGTERM as a container runtime would, SIGKILL if it does not exit in time."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            # In a thread: the fake Slack on this loop must keep answering the bot while it shuts down.
            code = await asyncio.to_thread(self.proc.wait, STOP_TIMEOUT_S)
            killed = False
        except subprocess.TimeoutExpired:
            await self.kill()
            code, killed = self.proc.returncode, True
        return {"exit_code": code, "clean_exit": code == 0 and not killed,
                "stop_s": round(time.monotonic() - started, 2)}

    def close(self) -> None:
        """Never leave the bot running, whatever failed."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        self._log.close()


@dataclass
class LoadContext:
    fake: FakeSlack
    http: ClientSession
    channel: str
    data_dir: Path
    env: dict[str, str]
    log_dir: Path

    def start_bot(self, name: str) -> BotProcess:
        return BotProcess(self.env, self.log_dir / f"{name}.log")

    def replies(self) -> dict[str, list[Call]]:
        """The bot's chat.postMessage calls in the load channel, by thread."""
        by_thread: dict[str, list[Call]] = defaultdict(list)
        for call in self.fake.calls_to("chat.postMessage", lambda p: p.get("channel") == self.channel):
            by_thread[call.params.get("thread_ts", "")].append(call)
        return by_thread

    def answers_posted(self) -> int:
        return sum(_footers(posts) for posts in self.replies().values())


# --- the load ----------------------------------------------------------------------------------------------


def _mentions(first: int, count: int) -> list[Mention]:
    # A distinct user per mention keeps the per-user limit out of it: the workspace limit is the one under test.
    base = int(time.time())
    return [Mention(ts=f"{base}.{i:06d}", user=f"ULOAD{i:06d}", question=QUESTIONS[i % len(QUESTIONS)])
            for i in range(first, first + count)]


async def _post(ctx: LoadContext, url: str, m: Mention) -> None:
    body = event_body(mention(m.question, channel=ctx.channel, ts=m.ts, user=m.user))
    headers = {"Content-Type": "application/json", **sign(body)}
    m.sent_at = time.monotonic()
    try:
        async with ctx.http.post(url, data=body.encode(), headers=headers) as response:
            await response.read()
            m.status = response.status
    except (ClientError, TimeoutError):
        m.status = None
    m.ack_s = time.monotonic() - m.sent_at


async def _send_spread(ctx: LoadContext, bot: BotProcess, mentions: list[Mention], duration_s: float,
                       stop: asyncio.Event) -> list[Mention]:
    """Send `mentions` evenly over `duration_s` without waiting for acks; returns those sent before `stop`."""
    gap = duration_s / len(mentions)
    started = time.monotonic()
    posts = []
    for i, m in enumerate(mentions):
        await asyncio.sleep(max(0.0, started + i * gap - time.monotonic()))
        if stop.is_set():
            break
        posts.append(asyncio.create_task(_post(ctx, bot.url + "/slack/events", m)))
    await asyncio.gather(*posts)
    return mentions[:len(posts)]


async def _wait_for_replies(ctx: LoadContext, sent: list[Mention]) -> None:
    """Until every acknowledged mention got its final reply (an answer or a rejection), bounded."""
    pending = {m.ts for m in sent if m.status == 200}
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while time.monotonic() < deadline:
        replies = ctx.replies()
        if all(_outcome(replies.get(ts, [])) not in ("unanswered", "other_reply") for ts in pending):
            break
        await asyncio.sleep(POLL_S)
    await asyncio.sleep(SETTLE_S)


async def _kill_when_answered(ctx: LoadContext, bot: BotProcess, kill_at: int, stop: asyncio.Event,
                              timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while ctx.answers_posted() < kill_at and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    stop.set()
    peak_rss_mb = bot.peak_rss_mb()
    await bot.kill()
    await asyncio.sleep(SETTLE_S)
    return {"answers_before_kill": ctx.answers_posted(), "peak_rss_mb": peak_rss_mb}


# --- figures -------------------------------------------------------------------------------------------------


def _footers(posts: list[Call]) -> int:
    return sum(c.ends_an_answer for c in posts)


def _outcome(posts: list[Call]) -> str:
    answers = _footers(posts)
    if answers:
        return "answered_once" if answers == 1 else "duplicated"
    if not posts:
        return "unanswered"
    text = " ".join(c.params.get("text") or "" for c in posts)
    if RATE_LIMITED_TEXT in text:
        return "rate_limited"
    if APOLOGY_TEXT in text:
        return "apologies"
    return "other_reply"  # e.g. the first part of an answer whose footer has not arrived yet


def _percentile_ms(values: list[float], pct: float) -> float | None:
    return round(percentile(values, pct) * 1000, 1) if values else None


def _figures(sent: list[Mention], replies: dict[str, list[Call]]) -> dict:
    statuses = [m.status for m in sent]
    outcomes = Counter(_outcome(replies.get(m.ts, [])) for m in sent)
    acks = [m.ack_s for m in sent if m.status is not None and m.ack_s is not None]
    latencies = [min(c.at for c in replies[m.ts]) - m.sent_at for m in sent
                 if replies.get(m.ts) and m.sent_at is not None]
    return {
        "sent": len(sent),
        "http_2xx": sum(s is not None and 200 <= s < 300 for s in statuses),
        "http_5xx": sum(s is not None and s >= 500 for s in statuses),
        "http_other": sum(s is not None and not 200 <= s < 300 and s < 500 for s in statuses),
        "no_response": statuses.count(None),
        "ack_p50_ms": _percentile_ms(acks, 50),
        "ack_max_ms": _percentile_ms(acks, 100),
        **{key: outcomes[key] for key in ("answered_once", "unanswered", "duplicated", "rate_limited", "apologies",
                                          "other_reply")},
        "answers_posted": sum(_footers(replies.get(m.ts, [])) for m in sent),
        "latency_p50_ms": _percentile_ms(latencies, 50),
        "latency_p95_ms": _percentile_ms(latencies, 95),
        "latency_max_ms": _percentile_ms(latencies, 100),
    }


def _audit_connection(data_dir: Path) -> sqlite3.Connection:
    # Read-only: the check must not create, lock or repair the bot's database.
    return sqlite3.connect(Settings(GDPRBOT_DATA_DIR=data_dir).audit_path.resolve().as_uri() + "?mode=ro", uri=True)


def _audit_rows(data_dir: Path, channel: str) -> int:
    conn = _audit_connection(data_dir)
    try:
        return conn.execute("SELECT count(*) FROM answers WHERE channel = ?", (channel,)).fetchone()[0]
    finally:
        conn.close()


def _integrity_check(data_dir: Path) -> str:
    conn = _audit_connection(data_dir)
    try:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


async def _questions_counter(ctx: LoadContext, bot: BotProcess) -> float:
    """`gdprbot_questions_total` over all platforms, parsed as Prometheus would."""
    async with ctx.http.get(bot.url + "/metrics") as response:
        text = await response.text()
    return sum(sample.value for family in text_string_to_metric_families(text) if family.name == "gdprbot_questions"
               for sample in family.samples if sample.name == "gdprbot_questions_total")


async def _final_figures(ctx: LoadContext, bot: BotProcess, sent: list[Mention]) -> dict:
    """The figures of the load `sent` to `bot`, read while it still runs, then how it stopped."""
    figures = _figures(sent, ctx.replies())
    figures["audit_rows"] = _audit_rows(ctx.data_dir, ctx.channel)
    figures["metrics_questions_total"] = await _questions_counter(ctx, bot)
    figures["peak_rss_mb"] = bot.peak_rss_mb()
    return figures | await bot.stop()


# --- the runs --------------------------------------------------------------------------------------------------


async def _steady(ctx: LoadContext, n: int, duration_s: float) -> dict:
    bot = ctx.start_bot("bot")
    try:
        startup_s = await bot.wait_healthy(ctx.http)
        sent = await _send_spread(ctx, bot, _mentions(0, n), duration_s, asyncio.Event())
        await _wait_for_replies(ctx, sent)
        load = await _final_figures(ctx, bot, sent)
    finally:
        bot.close()
    checks = {
        "no_5xx": load["http_5xx"] == 0,
        "all_acked": load["http_2xx"] == n,
        "answered_exactly_once": load["answered_once"] == n,
        "audit_rows_equal_answers": load["audit_rows"] == load["answers_posted"],
        "metrics_equal_answers": load["metrics_questions_total"] == load["answers_posted"],
        "clean_exit": load["clean_exit"],
    }
    return {"startup_s": startup_s, "load": load, "checks": checks}


async def _killed_and_restarted(ctx: LoadContext, n: int, duration_s: float, kill_at: int) -> dict:
    first = ctx.start_bot("bot-killed")
    try:
        startup_s = await first.wait_healthy(ctx.http)
        stop = asyncio.Event()
        sent, kill = await asyncio.gather(
            _send_spread(ctx, first, _mentions(0, n), duration_s, stop),
            _kill_when_answered(ctx, first, kill_at, stop, duration_s + ANSWER_TIMEOUT_S),
        )
    finally:
        first.close()
    load_replies = ctx.replies()
    load = _figures(sent, load_replies)
    # Read before the restart: the restarted bot answers journaled questions at once, adding rows of its own.
    kill["integrity_check"] = _integrity_check(ctx.data_dir)
    kill["audit_rows_after_restart"] = rows = _audit_rows(ctx.data_dir, ctx.channel)
    kill["committed_rows_lost"] = max(0, kill["answers_before_kill"] - rows)
    # Committed then killed before posting: audited, not seen by the asker until the restart answers again.
    kill["audited_not_posted"] = max(0, rows - kill["answers_before_kill"])
    # Acknowledged to Slack, so never redelivered: only the bot's journal of pending questions can answer them.
    unanswered = [m for m in sent if m.status == 200 and not load_replies.get(m.ts)]
    kill["acked_unanswered_at_kill"] = len(unanswered)

    second = ctx.start_bot("bot-restarted")
    try:
        kill["restart_s"] = await second.wait_healthy(ctx.http)
        await _wait_for_replies(ctx, unanswered)
        replies = ctx.replies()
        kill["acked_never_answered"] = sum(not replies.get(m.ts) for m in unanswered)
        kill["answered_by_restart"] = sum(_footers(replies.get(m.ts, [])) - _footers(load_replies.get(m.ts, []))
                                          for m in sent)
        kill["duplicated_by_restart"] = sum(_outcome(replies.get(m.ts, [])) == "duplicated" for m in sent)
        rows = _audit_rows(ctx.data_dir, ctx.channel)
        again = await _send_spread(ctx, second, _mentions(n, AFTER_RESTART), 1.0, asyncio.Event())
        await _wait_for_replies(ctx, again)
        after = await _final_figures(ctx, second, again)
    finally:
        second.close()
    checks = {
        "no_5xx": load["http_5xx"] == 0 and after["http_5xx"] == 0,
        "killed_after_kill_at_answers": kill["answers_before_kill"] >= kill_at,
        "integrity_ok": kill["integrity_check"] == "ok",
        "no_committed_row_lost": kill["committed_rows_lost"] == 0,
        "no_acked_question_lost": kill["acked_never_answered"] == 0,
        # At least once, not exactly once: an answer posted just before the kill whose journal entry was not yet
        # closed is answered again by the restart. That window holds at most the answers in flight at once.
        "no_duplicates": load["duplicated"] == 0 and after["duplicated"] == 0
        and kill["duplicated_by_restart"] <= CORE_THREADS,
        "serves_after_restart": after["answered_once"] == AFTER_RESTART,
        "audit_rows_after_restart_equal_answers": after["audit_rows"] - rows == after["answers_posted"],
        "metrics_equal_answers_after_restart": (after["metrics_questions_total"]
                                                == after["answers_posted"] + kill["answered_by_restart"]),
        "clean_exit": after["clean_exit"],
    }
    return {"startup_s": startup_s, "load": load, "kill": kill, "after_restart": after, "checks": checks}


def _bot_env(api_url: str, data_dir: Path) -> dict[str, str]:
    # No SLACK_APP_TOKEN: HTTP mode. No GROQ_API_KEY: loopback only, and the bot's capacity is under test.
    env = {k: v for k, v in os.environ.items() if k not in ("SLACK_APP_TOKEN", "GROQ_API_KEY")}
    return env | {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": api_url,
                  "GDPRBOT_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}


def _fair_use(env: dict[str, str]) -> dict:
    """The limits the bot runs with, and which of them were set explicitly rather than left at their default."""
    defaults = {field: Settings.model_fields[field].default for field in FAIR_USE_SETTINGS.values()}
    limits = {field: type(defaults[field])(env.get(var, defaults[field])) for var, field in FAIR_USE_SETTINGS.items()}
    return limits | {"overridden": sorted(var for var in FAIR_USE_SETTINGS if var in env)}


async def _run(n: int, duration_s: float, data_dir: Path, kill_at: int | None) -> dict:
    fake = FakeSlack()
    await fake.start()
    try:
        async with ClientSession(timeout=ClientTimeout(total=REQUEST_TIMEOUT_S)) as http:
            env = _bot_env(fake.api_url, data_dir)
            ctx = LoadContext(fake, http, f"CLOAD{uuid.uuid4().hex[:8].upper()}", data_dir, env,
                              Path(tempfile.mkdtemp(prefix="gdprbot-ops-load-")))
            header = {"n": n, "duration_s": duration_s, "kill_at": kill_at, "channel": ctx.channel,
                      "data_dir": str(data_dir), "bot_logs": str(ctx.log_dir), "fair_use": _fair_use(env)}
            if kill_at is None:
                result = header | await _steady(ctx, n, duration_s)
            else:
                result = header | await _killed_and_restarted(ctx, n, duration_s, kill_at)
    finally:
        await fake.stop()
    return result | {"passed": all(result["checks"].values())}


def run(n: int = 500, duration_s: float = 60, data_dir: str | Path | None = None, kill_at: int | None = None) -> dict:
    """Run the load test, print a one-line summary and the JSON, and return the figures."""
    if n < 1 or duration_s <= 0:
        raise ValueError("n must be at least 1 and duration_s positive")
    if kill_at is not None and not 1 <= kill_at <= n:
        raise ValueError(f"kill_at must be between 1 and n ({n})")
    result = asyncio.run(_run(n, duration_s, Path(data_dir or REPO_ROOT / "data").resolve(), kill_at))
    print(_summary(result))
    print(json.dumps(result))
    return result


def _summary(result: dict) -> str:
    load = result["load"]
    final = result.get("after_restart", load)
    limits = ", ".join(result["fair_use"]["overridden"]) or "defaults"
    parts = [
        f"ops-load: {load['sent']}/{result['n']} mentions over {result['duration_s']} s",
        f"5xx {load['http_5xx']}",
        (f"answered once {load['answered_once']} (unanswered {load['unanswered']}, duplicated {load['duplicated']}, "
         f"slow-down {load['rate_limited']}, apologies {load['apologies']})"),
        f"p50 {load['latency_p50_ms']} ms p95 {load['latency_p95_ms']} ms max {load['latency_max_ms']} ms",
    ]
    if "kill" in result:
        kill = result["kill"]
        parts += [(f"SIGKILL after {kill['answers_before_kill']} answers: integrity {kill['integrity_check']}, "
                   f"audit rows {kill['audit_rows_after_restart']}, committed rows lost {kill['committed_rows_lost']}, "
                   f"acked unanswered at the kill {kill['acked_unanswered_at_kill']}, answered by the restart "
                   f"{kill['answered_by_restart']} (of them answered before the kill too: {kill['duplicated_by_restart']}), "
                   f"never answered {kill['acked_never_answered']}"),
                  f"after restart answered once {final['answered_once']}/{final['sent']}"]
    else:
        parts.append(f"audit rows {load['audit_rows']}/{load['answers_posted']} answers")
    parts += [f"peak RSS {final['peak_rss_mb']} MB", f"SIGTERM {'clean' if final['clean_exit'] else 'NOT clean'}",
              f"fair-use limits: {limits}", "PASS" if result["passed"] else
              "FAIL: " + ", ".join(name for name, ok in result["checks"].items() if not ok)]
    return " · ".join(parts)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


RUN_ARGS = ("n", "duration_s", "data_dir", "kill_at")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options whose `dest`s are `run()`'s parameters: `run(**{k: getattr(args, k) for k in RUN_ARGS})`."""
    parser.add_argument("--n", type=int, default=500, help="app_mention events to send (default 500)")
    parser.add_argument("--duration", dest="duration_s", type=float, default=60.0,
                        help="seconds to spread them over (default 60)")
    parser.add_argument("--data-dir", type=Path, help="GDPRBOT_DATA_DIR of the bot (default: the repo's data/)")
    parser.add_argument("--kill-at", type=int, help="SIGKILL the bot after this many answers, then restart it")



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.ops_load", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return 0 if run(**{k: getattr(args, k) for k in RUN_ARGS})["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
