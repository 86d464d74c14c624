"""The small faults of issue 18 (item 8), as a user meets them: the real `python -m bot` process, the real
assistant on the session's index, the terminal's and Slack's own replies."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adapters import terminal, wording
from adapters.conversation import Conversation
from adapters.intents import Answered, Declined, Message, no_history
from adapters.slack.render import FEEDBACK, feedback_value, read_feedback
from core.extractive import ExtractiveGenerator
from core.llm import GroqGenerator, chat_groq
from core.models import AbstentionReason, Asker, Notice
from evals.fake_llm import FakeLLM, Reply
from evals.fake_slack import LoopbackSlack, button_body, event_body, mention
from evals.faults import read_only_mount
from tests.helpers import bounded

REPO = Path(__file__).resolve().parent.parent
ASKER = Asker(platform="cli", user="tester")


def bot(args: list[str], data_dir: Path, *, wrap: list[str] | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*(wrap or []), sys.executable, "-m", "bot", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", "GDPRBOT_DATA_DIR": str(data_dir), **env})


def one_clear_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stderr.strip().count("\n") == 0, result.stderr[-2000:]
    return result.stderr.strip()


def reply_to(conversation: Conversation, question: str):
    return asyncio.run(conversation.answer(Message(question, ASKER, "terminal", history=no_history)))


# --- a data directory that cannot be written ---------------------------------------------------------------------


def test_a_data_dir_that_is_a_file_is_one_clear_line(tmp_path):
    (tmp_path / "data").write_text("not a directory")
    line = one_clear_line(bot(["ask", "What is a controller?"], tmp_path / "data"))
    assert line.startswith(f"error: GDPRBOT_DATA_DIR {tmp_path / 'data'} is not a writable directory")


def test_a_read_only_data_dir_is_one_clear_line_not_a_chroma_traceback(components, data_dir, tmp_path):
    components.prepare()
    built = tmp_path / "built"
    shutil.copytree(data_dir, built, ignore=shutil.ignore_patterns("*.sqlite3-journal"))
    prefix = read_only_mount(built)
    if prefix is None:
        pytest.skip("mount namespaces are not allowed here")
    slack = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "test-secret"}
    for result in (bot(["ask", "What is a controller?"], built, wrap=prefix), bot(["slack"], built, wrap=prefix, **slack)):
        assert one_clear_line(result) == (f"error: GDPRBOT_DATA_DIR {built} is not a writable directory (Read-only file "
                                          "system); the bot keeps its index, audit trail and documents there")


# --- what the other small ones look like to a user -----------------------------------------------------------------


@pytest.mark.parametrize("question", ["这是什么规定？", "個人データの侵害はいつ通知しなければなりませんか？",
                                      "متى يجب الإبلاغ عن خرق البيانات الشخصية؟", "व्यक्तिगत डेटा उल्लंघन की सूचना कब देनी होगी?",
                                      "개인정보 침해는 언제 신고해야 합니까?"])
def test_a_question_in_a_script_no_official_language_uses_is_told_which_languages_are_served(components, question):
    reply = reply_to(Conversation(components.assistant()), question)
    assert isinstance(reply, Declined) and reply.reason is AbstentionReason.UNSUPPORTED_LANGUAGE
    shown = terminal.render(reply)
    assert wording.REASONS[AbstentionReason.UNSUPPORTED_LANGUAGE] in shown and "Bulgarian" in shown
    assert wording.REASONS[AbstentionReason.NOT_COVERED] not in shown


def test_when_every_llm_citation_is_rejected_the_extractive_answer_is_shown_with_a_notice(components):
    rejected = {"statements": [{"text": "Within 48 hours.", "source": "Art. 33(1)",
                                "quote": "not later than 48 hours after having become aware of it"},
                               {"text": "Fines reach 50 million.", "source": "Art. 99(9)", "quote": "fines of 50 million"}]}
    with FakeLLM([Reply.json(rejected)]) as llm:
        generator = GroqGenerator(chat_groq("key", "model", llm.url, 10.0), ExtractiveGenerator())
        assistant = components.assistant()
        assistant.generator, assistant.fallback = generator, components.extractive  # as wired with GROQ_API_KEY
        reply = reply_to(Conversation(assistant), "How quickly must a personal data breach be reported?")
    assert isinstance(reply, Answered) and "Art. 33(1)" in [c.label for c in reply.answer.citations]
    shown = terminal.render(reply)
    assert wording.NOTICES[Notice.LLM_UNVERIFIED] in shown and wording.DECLINED_HEADER not in shown
    assert "48 hours" not in shown and "50 million" not in shown


@bounded(timeout_s=60)
async def test_feedback_for_an_answer_that_does_not_exist_is_not_recorded(audited):
    assistant, audit = audited
    async with LoopbackSlack(assistant) as slack:
        await slack.post(button_body(FEEDBACK, feedback_value("no-such-answer", True), element="feedback_buttons",
                                     response_url=slack.fake.response_url()))
        [unknown] = await slack.fake.wait_for("response_url")
        await slack.post(event_body(mention("What is a controller?", ts="1700000000.000100")))
        [answer] = await slack.fake.wait_for("chat.postMessage", timeout_s=30)
        [footer] = [b for b in answer.params["blocks"] if b["type"] == "context_actions"]
        [buttons] = footer["elements"]
        request_id, _ = read_feedback(buttons["positive_button"]["value"])
        await slack.post(button_body(FEEDBACK, buttons["positive_button"]["value"], element="feedback_buttons",
                                     response_url=slack.fake.response_url()))
        [_, known] = await slack.fake.wait_for("response_url", 2)
    assert unknown.params["text"] == wording.FEEDBACK_NOT_FOUND and known.params["text"] == wording.FEEDBACK_RECORDED
    assert {row["request_id"]: row["feedback"] for row in audit.export()} == {request_id: "up"}


@pytest.mark.parametrize("question", ["What are the conditions for consent (2)?",
                                      "How quickly must a personal data breach be reported (2)?"])
def test_a_trailing_number_in_brackets_is_not_read_as_a_provision(components, question):
    reply = reply_to(Conversation(components.assistant()), question)
    assert isinstance(reply, Answered), terminal.render(reply)
    assert "Art. 2" not in {c.label.split("(")[0] for c in reply.answer.citations}
