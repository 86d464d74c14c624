"""The stages an answer reports while it is being made: what Slack and Teams show the asker meanwhile."""
from __future__ import annotations

import pytest

from core.models import Stage
from core.service import EmptyQuestion


def test_an_answer_is_searched_drafted_and_verified_in_that_order(components):
    stages: list[Stage] = []
    answer = components.assistant().ask("When must a personal data breach be notified?", progress=stages.append)
    assert not answer.abstained
    assert stages == [Stage.SEARCHING, Stage.GENERATING, Stage.VERIFYING]


def test_a_question_the_regulation_does_not_cover_is_only_searched(components):
    stages: list[Stage] = []
    answer = components.assistant().ask("Which football club won the Champions League in 2019?",
                                        progress=stages.append)
    assert answer.abstained and stages == [Stage.SEARCHING]


def test_a_rejected_question_reports_no_stage(components):
    stages: list[Stage] = []
    with pytest.raises(EmptyQuestion):
        components.assistant().ask("   ", progress=stages.append)
    assert stages == []
