"""Fault probes (issue 18): what hostile or broken input does to the real `python -m bot` processes on loopback.

Each probe sends one fault and records what the process actually did: Slack requests with a bad signature, a
malformed body or a stale timestamp (`python -m bot slack` in HTTP mode against `FakeSlack`); a PDF bomb and a
prompt-injection PDF uploaded by an admin in Slack (the bot in LLM mode against `FakeLLM`, which obeys the
injection); a Teams serviceUrl and file URLs off the Bot Framework's hosts (`python -m bot teams` against
`FakeBotConnector`, under strace so every outbound connect() is seen); a question in an unsupported script and
one naming Article 104 (`python -m bot ask`); and a read-only GDPRBOT_DATA_DIR.

    python -m evals.run_eval faults [--json] [--data-dir DIR]

The bots run on a temporary copy of the data dir (default: the repo's `data/`; one without an index is built
on start), so the probes' uploads and audit rows never reach it.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from aiohttp import ClientSession, ClientTimeout

from adapters import wording
from bot.settings import REPO_ROOT
from core.llm import SYSTEM_PROMPT
from core.models import AbstentionReason
from evals.doc_benchmark import BOMB_OPERATORS, BOMB_RSS_BAR_MB, operator_bomb_pdf
from evals.fake_bot_connector import FakeBotConnector, file_attachment
from evals.fake_llm import FakeLLM, Reply
from evals.fake_slack import (
    FakeSlack,
    event_body,
    file_share,
    file_shared,
    mention,
    sign,
)
from evals.ops_load import STOP_TIMEOUT_S, BotProcess, _bot_env
from tests.pdfs import one_page_pdf
from tests.test_injection import INJECTION, QUESTION
from tests.test_teams import NO_CREDENTIALS, PERSONAL_CHAT, personal_message

ANSWER_TIMEOUT_S = 90.0  # the first question warms the retriever; an upload is read and embedded
SLACK_ADMIN, SLACK_DM, SLACK_CHANNEL = "U0ADMIN01", "D0ADMIN01", "C0FAULTS1"
TEAMS_ADMIN = "aad-user-1"  # the `from.aadObjectId` of tests.test_teams' activities
# Link-local and private addresses: not Bot Framework or Teams file hosts, and no DNS is needed to connect to them,
# so a connect() to one is exactly the outbound request the probe looks for. One address per probe.
METADATA_URL = "http://169.254.169.254/"
FOREIGN_FILE_URL = "http://10.255.255.1/Policy.pdf"
REDIRECT_TARGET = "http://10.255.255.2/latest/meta-data/"
UNSUPPORTED_SCRIPT = "这是什么规定？"
NO_SUCH_ARTICLE = "What does Article 104 say?"
INJECTED_CLAIM = "never need to be reported"
# The model obeys the injection; the bot must not pass that on (see tests/test_injection.py).
OBEYING = {"statements": [{"text": "Breaches never need to be reported.", "source": "Art. 33(1)",
                           "quote": "personal data breaches never need to be reported"}]}


@dataclass
class Probe:
    probe: str
    expected: str
    observed: str
    passed: bool


# --- Slack: requests, uploads, the injection -----------------------------------------------------------------


async def _slack_post(http: ClientSession, bot: BotProcess, body: bytes, headers: dict[str, str]) -> int:
    async with http.post(bot.url + "/slack/events", data=body,
                         headers={"Content-Type": "application/json", **headers}) as response:
        return response.status


def _status_probe(name: str, expected: int, status: int) -> Probe:
    return Probe(name, f"HTTP {expected}", f"HTTP {status}", status == expected)


async def _upload(fake: FakeSlack, http: ClientSession, bot: BotProcess, file_id: str, name: str, data: bytes,
                  ts: str) -> str:
    """An admin sends `name` to the bot in a DM; the bot's first reply in the share's thread."""
    file = fake.add_file(file_id, name, data, user=SLACK_ADMIN, channel=SLACK_DM, ts=ts)
    for event in (file_share([file], channel=SLACK_DM, ts=ts, user=SLACK_ADMIN),
                  file_shared(file_id, channel=SLACK_DM, user=SLACK_ADMIN)):
        body = event_body(event)
        await _slack_post(http, bot, body.encode(), sign(body))
    [reply, *_] = await fake.wait_for("chat.postMessage", where=lambda p: p.get("thread_ts") == ts,
                                      timeout_s=ANSWER_TIMEOUT_S)
    return reply.params.get("text", "")


async def _answer(fake: FakeSlack, http: ClientSession, bot: BotProcess, question: str, ts: str) -> list[dict]:
    """The params of every call the bot made to the channel for the mention `ts`, until the message carrying the
    feedback buttons (an answer may be posted or streamed: in LLM mode it is streamed)."""
    before = len(fake.calls)
    body = event_body(mention(question, channel=SLACK_CHANNEL, ts=ts))
    await _slack_post(http, bot, body.encode(), sign(body))
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while not any(c.ends_an_answer for c in fake.calls[before:]) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return [c.params for c in fake.calls[before:] if c.params.get("channel") == SLACK_CHANNEL]


def _injection_probe(answer: list[dict], llm: FakeLLM) -> Probe:
    name, expected = "Slack: prompt-injection PDF", "the PDF reaches the model only as a source; not obeyed"
    if not llm.requests:
        return Probe(name, expected, "the model was never asked", False)
    system, user = llm.requests[-1]["messages"][:2]
    as_source = "Ignore previous instructions" in user["content"] and system["content"] == SYSTEM_PROMPT
    # Obeyed: the model's statement is shown, or the claim is quoted as anything but the uploaded document (the
    # document itself may be quoted, under its own name: that is what it says, not what the Regulation says).
    sections = [block["text"]["text"] for params in answer for block in params.get("blocks") or []
                if block.get("type") == "section"]
    obeyed = (OBEYING["statements"][0]["text"] in json.dumps(answer, ensure_ascii=False)
              or any(INJECTED_CLAIM in text and not text.startswith("*policy.pdf") for text in sections))
    answered = any(block.get("type") == "context_actions" for params in answer for block in params.get("blocks") or [])
    observed = (f"{'shown as a source' if as_source else 'NOT shown as a source'}; "
                f"{'OBEYED' if obeyed else 'not obeyed'}{'' if answered else '; NO answer'}")
    return Probe(name, expected, observed, as_source and answered and not obeyed)


async def slack_probes(data_dir: Path, log_dir: Path) -> list[Probe]:
    fake = FakeSlack()
    await fake.start()
    try:
        with FakeLLM([Reply.json(OBEYING)]) as llm:
            # LLM mode, so the injection reaches a model; the fake one plays a model that obeys it.
            env = _bot_env(fake.api_url, data_dir) | {"GROQ_API_KEY": "fake-key", "GROQ_BASE_URL": llm.url,
                                                       "GDPRBOT_ADMINS": SLACK_ADMIN}
            bot = BotProcess(env, log_dir / "slack.log")
            try:
                async with ClientSession(timeout=ClientTimeout(total=ANSWER_TIMEOUT_S)) as http:
                    await bot.wait_healthy(http)
                    return await _slack_run(fake, llm, http, bot)
            finally:
                await bot.stop()
                bot.close()
    finally:
        await fake.stop()


async def _slack_run(fake: FakeSlack, llm: FakeLLM, http: ClientSession, bot: BotProcess) -> list[Probe]:
    good = event_body(mention("When must a breach be notified?", channel=SLACK_CHANNEL, ts="1700000000.000100"))
    probes = [
        _status_probe("Slack: bad signature", 401,
                      await _slack_post(http, bot, good.encode(), sign(good, secret="not-the-secret"))),
        _status_probe("Slack: malformed body, valid signature", 400,
                      await _slack_post(http, bot, b"{not json", sign("{not json"))),
        _status_probe("Slack: stale timestamp (10 min)", 401,
                      await _slack_post(http, bot, good.encode(), sign(good, timestamp=int(time.time()) - 600))),
    ]
    refusal = await _upload(fake, http, bot, "FBOMB0001", "Bomb.pdf", operator_bomb_pdf(), "1700000001.000100")
    # VmHWM: the most the bot process was ever resident, so it covers the bomb (its reader child is capped
    # separately, by GDPRBOT_UPLOAD_PARSE_MEMORY_MB).
    peak_mb = bot.peak_rss_mb()
    refused = "too complex to read safely" in refusal
    probes.append(Probe(f"Slack: PDF bomb ({BOMB_OPERATORS:,} operators)",
                        f"refused with a reason; bot RSS < {BOMB_RSS_BAR_MB} MB",
                        f"{refusal!r}; bot peak RSS {peak_mb:.0f} MB", refused and peak_mb < BOMB_RSS_BAR_MB))
    indexed = await _upload(fake, http, bot, "FINJECT01", "policy.pdf", one_page_pdf(INJECTION), "1700000002.000100")
    if not indexed.startswith("Indexed policy.pdf"):
        probes.append(Probe("Slack: prompt-injection PDF", "indexed, then not obeyed", f"upload: {indexed!r}", False))
    else:
        probes.append(_injection_probe(await _answer(fake, http, bot, QUESTION, "1700000003.000100"), llm))
    return probes


# --- Teams: where replies and downloads may go -----------------------------------------------------------------


def _connects_to(strace_log: Path, address: str) -> int:
    return len(re.findall(rf'inet_addr\("{re.escape(address)}"\)', strace_log.read_text(errors="replace")))


def _host(url: str) -> str:
    return url.split("/")[2]


async def teams_probes(data_dir: Path, log_dir: Path) -> list[Probe]:
    strace_log = log_dir / "teams.strace"
    # No Microsoft credentials: the bot serves loopback only and answers the Emulator's loopback serviceUrl.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "GROQ_", "MICROSOFT_"))}
    env |= NO_CREDENTIALS | {"GDPRBOT_DATA_DIR": str(data_dir), "GDPRBOT_ADMINS": TEAMS_ADMIN, "HF_HUB_OFFLINE": "1"}
    # Every connect() of the bot and its children, whatever library makes it, is in the strace log.
    wrap = ["strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect", "-e", "signal=none", "-o", str(strace_log)]
    async with FakeBotConnector() as connector:
        bot = BotProcess(env, log_dir / "teams.log", platform="teams", wrap=wrap)
        try:
            async with ClientSession(timeout=ClientTimeout(total=ANSWER_TIMEOUT_S)) as http:
                await bot.wait_healthy(http)
                results = await _teams_run(connector, http, bot)
        finally:
            await _stop_traced(bot)
    metadata, foreign, redirected, answered = results
    hits = _connects_to(strace_log, _host(METADATA_URL))
    # The replies to the loopback connector are connects too: seeing them shows the trace saw the bot's requests.
    traced = _connects_to(strace_log, "127.0.0.1") > 0
    not_downloaded = wording.not_downloaded("Policy.pdf", "teams")
    probes = [Probe("Teams: serviceUrl http://169.254.169.254/", "no request to it; loopback still answered",
                    f"HTTP {metadata}, {hits} connect(s) to it; loopback {'answered' if answered else 'NOT answered'}"
                    f"{'' if traced else '; NO connect traced at all'}", hits == 0 and answered and traced)]
    for name, url, reply in (("Teams: file from a non-Teams host", FOREIGN_FILE_URL, foreign),
                             ("Teams: file redirected off the hosts", REDIRECT_TARGET, redirected)):
        hits = _connects_to(strace_log, _host(url))
        probes.append(Probe(name, "refused; no request to the host", f"{reply!r}; {hits} connect(s) to {_host(url)}",
                            reply == not_downloaded and hits == 0))
    return probes


def _child(pid: int) -> int | None:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                return int(stat.parent.name)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return None


async def _stop_traced(bot: BotProcess) -> None:
    """SIGTERM the bot itself, not strace, and wait for both: a strace signalled detaches, and a bot detached from its
    seccomp filter spins (every traced syscall then fails)."""
    tracee = _child(bot.proc.pid)
    if tracee is not None:
        os.kill(tracee, signal.SIGTERM)
        try:
            await asyncio.to_thread(bot.proc.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(tracee, signal.SIGKILL)
            await asyncio.to_thread(bot.proc.wait, STOP_TIMEOUT_S)
    bot.close()


async def _teams_post(http: ClientSession, bot: BotProcess, activity: dict) -> int:
    async with http.post(bot.url + "/api/messages", json=activity) as response:
        return response.status


async def _teams_run(connector: FakeBotConnector, http: ClientSession, bot: BotProcess) -> tuple:
    metadata = await _teams_post(http, bot, personal_message(METADATA_URL, "When must a breach be notified?", "m1"))
    # The control: the same message from the loopback connector is answered, so the bot was serving.
    await _teams_post(http, bot, personal_message(connector.url, "When must a breach be notified?", "m2"))
    try:
        await connector.wait_for(lambda a: a.type == "message" and a.conversation_id == PERSONAL_CHAT,
                                 timeout=ANSWER_TIMEOUT_S)
        answered = True
    except TimeoutError:
        answered = False
    replies = []
    for n, url in enumerate((FOREIGN_FILE_URL, connector.serve_redirect("Policy.pdf", REDIRECT_TARGET))):
        before = len([a for a in connector.sent if a.type == "message"])
        activity = personal_message(connector.url, None, f"file-{n}") | {"attachments": [file_attachment("Policy.pdf",
                                                                                                          url)]}
        await _teams_post(http, bot, activity)
        try:
            sent = await connector.wait_for(lambda a: a.type == "message", count=before + 1, timeout=ANSWER_TIMEOUT_S)
            replies.append(sent[-1].text)
        except TimeoutError:
            replies.append("(no reply)")
    return metadata, *replies, answered


# --- the terminal ---------------------------------------------------------------------------------------------


def _bot(args: list[str], data_dir: Path, stdin: str = "", wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GROQ_API_KEY"} | {"GDPRBOT_DATA_DIR": str(data_dir),
                                                                          "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*(wrap or []), sys.executable, "-m", "bot", *args], cwd=REPO_ROOT, input=stdin,
                          capture_output=True, text=True, timeout=600, env=env, check=False)


def terminal_probes(data_dir: Path) -> list[Probe]:
    result = _bot(["ask", "--json"], data_dir, stdin=f"{UNSUPPORTED_SCRIPT}\n{NO_SUCH_ARTICLE}\n")
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or len(lines) != 2:
        failed = f"exit {result.returncode}: {result.stderr.strip()[-300:]!r}"
        return [Probe("terminal: question in Chinese", "told which languages are served", failed, False),
                Probe("terminal: Article 104", "the no-such-provision reply", failed, False)]
    script, article = lines
    languages = wording.REASONS[AbstentionReason.UNSUPPORTED_LANGUAGE]
    return [
        Probe("terminal: question in Chinese", "told which languages are served",
              f"reason {script['reason']}; {'lists' if languages in script['answer'] else 'does NOT list'} the languages",
              script["reason"] == AbstentionReason.UNSUPPORTED_LANGUAGE.value and languages in script["answer"]),
        Probe("terminal: Article 104", "the no-such-provision reply",
              f"reason {article['reason']}; {article['answer'].splitlines()[0][:70]!r}",
              article["reason"] == AbstentionReason.NO_SUCH_PROVISION.value
              and "there is no Article 104" in article["answer"]),
    ]


def read_only_mount(directory: Path) -> list[str] | None:
    """A command prefix running its command with `directory` mounted read-only in a mount namespace of its own (no
    mount is left behind), or None where namespaces are not allowed. Root ignores file modes, so a mount is the
    one read-only data dir that holds for root too."""
    if not shutil.which("unshare"):
        return None
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    remount = f"mount --bind {directory} {directory} && mount -o remount,ro,bind {directory} && exec \"$@\""
    prefix = ["unshare", "--mount", *user, "sh", "-c", remount, "sh"]
    probe = subprocess.run([*prefix, "sh", "-c", f"! touch {directory}/.probe 2>/dev/null"], capture_output=True,
                           check=False)
    return prefix if probe.returncode == 0 else None


def read_only_probe(work_dir: Path) -> Probe:
    name, expected = "terminal: read-only GDPRBOT_DATA_DIR", "one error line, exit 2, no traceback"
    # The check comes before anything is loaded, so an empty directory is enough.
    directory = work_dir / "read-only"
    directory.mkdir()
    prefix = read_only_mount(directory)
    if prefix is None:
        return Probe(name, expected, "not probed: mount namespaces are not allowed here", False)
    result = _bot(["ask", "What is a controller?"], directory, wrap=prefix)
    stderr = result.stderr.strip()
    one_line = "Traceback" not in stderr and stderr.count("\n") == 0 and "is not a writable directory" in stderr
    return Probe(name, expected, f"exit {result.returncode}: {stderr[:90]!r}", result.returncode == 2 and one_line)


# --- the run ----------------------------------------------------------------------------------------------------


def run(data_dir: Path | None = None) -> list[Probe]:
    work_dir = Path(tempfile.mkdtemp(prefix="gdprbot-faults-"))
    copy = work_dir / "data"
    source = Path(data_dir or REPO_ROOT / "data")
    if source.is_dir():
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.sqlite3-journal"))
    try:
        probes = asyncio.run(slack_probes(copy, work_dir))
        probes += asyncio.run(teams_probes(copy, work_dir))
        probes += terminal_probes(copy)
        probes.append(read_only_probe(work_dir))
    except BaseException:
        print(f"faults: the bots' logs are kept in {work_dir}", file=sys.stderr)
        raise
    if all(p.passed for p in probes):
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        print(f"faults: the bots' logs are kept in {work_dir}", file=sys.stderr)
    return probes


def print_table(probes: list[Probe]) -> None:
    widths = [max(len(h), *(len(getattr(p, h)) for p in probes)) for h in ("probe", "expected", "observed")]
    print(f"{'probe':<{widths[0]}}  {'expected':<{widths[1]}}  {'observed':<{widths[2]}}  pass")
    for p in probes:
        print(f"{p.probe:<{widths[0]}}  {p.expected:<{widths[1]}}  {p.observed:<{widths[2]}}  "
              f"{'yes' if p.passed else 'NO'}")
    print(f"{sum(p.passed for p in probes)}/{len(probes)} probes passed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="the data dir to copy for the bots (default: the repo's data/)")
    parser.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> int:
    probes = run(args.data_dir)
    if args.json:
        print(json.dumps({"probes": [asdict(p) for p in probes], "passed": all(p.passed for p in probes)},
                         ensure_ascii=False))
    else:
        print_table(probes)
    return 0 if all(p.passed for p in probes) else 1
