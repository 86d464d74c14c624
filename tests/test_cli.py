"""`python -m bot` as a user runs it: real processes, the session's built corpus and index."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(args, data_dir, stdin=None, **env):
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=REPO, input=stdin, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "HF_HUB_OFFLINE": "1", "GDPRBOT_DATA_DIR": str(data_dir), **env})


def test_help_lists_the_subcommands(tmp_path):
    result = run(["--help"], tmp_path)
    assert result.returncode == 0
    for command in ("ask", "chat", "slack", "teams", "index", "audit"):
        assert command in result.stdout


def test_an_invalid_setting_is_one_clear_line(tmp_path):
    result = run(["ask", "What is a controller?"], tmp_path, CHROMA_PORT="not-a-port")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "CHROMA_PORT" in result.stderr
    assert "Traceback" not in result.stderr


def test_ask_reads_questions_from_stdin_and_prints_json(components, data_dir):
    components.prepare()
    questions = ("How quickly must a personal data breach be reported?\n"
                 "Which countries currently have an adequacy decision from the Commission?\n")
    result = run(["ask", "--json"], data_dir, stdin=questions)
    assert result.returncode == 0, result.stderr
    breach, adequacy = [json.loads(line) for line in result.stdout.splitlines()]
    assert breach["citations"][0]["provision"] == "Art. 33(1)"
    assert breach["citations"][0]["quote"] in breach["answer"]
    assert breach["mode"] == "extractive" and breach["abstained"] is False
    assert {"question", "abstained", "answer", "citations", "retrieved", "mode", "timings_ms"} <= breach.keys()
    assert adequacy["abstained"] is True and adequacy["citations"] == []


def test_every_cli_answer_lands_in_the_audit_trail(components, data_dir):
    components.prepare()
    run(["ask", "What is a controller?"], data_dir)
    exported = run(["audit", "--csv"], data_dir)
    assert exported.returncode == 0
    assert "What is a controller?" in exported.stdout and ",cli," in exported.stdout


def test_a_batch_of_500_piped_questions_is_answered_in_full_and_in_order(components, data_dir):
    components.prepare()
    topics = ("a personal data breach", "the right to erasure", "consent", "a data protection officer", "fines")
    questions = [f"Question {n}: what does the GDPR say about {topics[n % len(topics)]}?" for n in range(500)]
    result = run(["ask", "--json"], data_dir, stdin="\n".join(questions) + "\n")
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["question"] for a in answers] == questions
    assert not [a for a in answers if "error" in a]  # no fair-use refusal: the terminal is the operator's


def test_a_line_that_is_not_utf8_is_reported_and_the_batch_goes_on(components, data_dir):
    components.prepare()
    stdin = "What is a controller?\n".encode() + b"\xff\xfe broken\n" + "What is a processor?\n".encode()
    result = subprocess.run([sys.executable, "-m", "bot", "ask", "--json"], cwd=REPO, input=stdin, capture_output=True,
                            timeout=240, env={**os.environ, "HF_HUB_OFFLINE": "1", "GDPRBOT_DATA_DIR": str(data_dir)})
    assert result.returncode == 0
    first, broken, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert first["citations"][0]["provision"] == "Art. 4(7)" and last["citations"][0]["provision"] == "Art. 4(8)"
    assert broken == {"question": None, "error": "line 2 is not UTF-8 text; skipped"}


def test_a_provision_that_does_not_exist_is_one_plain_sentence_in_the_terminal(components, data_dir):
    components.prepare()
    result = run(["ask", "What does Article 104 say?"], data_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("The Regulation doesn't cover this. The GDPR has 99 articles: there is no Article 104.")
