"""Fair use: a short burst is fine, sustained asking is slowed, per user and per workspace."""
from __future__ import annotations

import threading

import pytest

from adapters import wording
from bot.settings import Settings
from core.fair_use import FairUse
from core.models import Asker
from core.service import RateLimited


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _limits(clock: _Clock, *, user: tuple[float, int] = (6, 3), workspace: tuple[float, int] = (600, 50),
            max_buckets: int = 10_000) -> FairUse:
    return FairUse(*user, *workspace, clock=clock, max_buckets=max_buckets)


def test_a_burst_is_allowed_then_limited_with_the_time_to_the_next_token() -> None:
    limits = _limits(_Clock())  # 6/min: a token every 10 s
    asker = Asker("slack", "T1", "C1", "U1")
    for _ in range(3):
        limits.check(asker)
    with pytest.raises(RateLimited) as refused:
        limits.check(asker)
    assert refused.value.retry_after_s == pytest.approx(10.0)
    assert "Please try again in 10 s." in wording.rejected(refused.value)


def test_buckets_refill_over_time_up_to_the_burst() -> None:
    clock = _Clock()
    limits = _limits(clock)
    asker = Asker("slack", "T1", "C1", "U1")
    for _ in range(3):
        limits.check(asker)
    clock.now += 4
    with pytest.raises(RateLimited) as refused:
        limits.check(asker)
    assert refused.value.retry_after_s == pytest.approx(6.0)  # a refusal takes no token
    clock.now += 6
    limits.check(asker)
    clock.now += 3600
    for _ in range(3):
        limits.check(asker)
    with pytest.raises(RateLimited):
        limits.check(asker)


def test_users_are_limited_apart_but_share_their_workspace_cap() -> None:
    limits = _limits(_Clock(), user=(6, 2), workspace=(60, 5))
    for user in ("U1", "U2"):
        for _ in range(2):
            limits.check(Asker("slack", "T1", None, user))
    limits.check(Asker("slack", "T1", None, "U3"))
    with pytest.raises(RateLimited) as refused:
        limits.check(Asker("slack", "T1", None, "U4"))
    assert refused.value.retry_after_s == pytest.approx(1.0)  # the workspace's next token, 60/min
    limits.check(Asker("slack", "T2", None, "U4"))  # another workspace is untouched
    limits.check(Asker("teams", "T1", None, "U4"))  # so is the same id on another platform


def test_an_asker_without_workspace_or_user_is_limited_by_its_own_key() -> None:
    limits = _limits(_Clock())
    for _ in range(3):
        limits.check(Asker())
    with pytest.raises(RateLimited):
        limits.check(Asker())


def test_only_the_most_recently_used_buckets_are_kept() -> None:
    clock = _Clock()
    limits = _limits(clock, max_buckets=100)
    for i in range(1000):
        limits.check(Asker("slack", f"T{i}", None, f"U{i}"))
    assert len(limits.users) == 100 and len(limits.workspaces) == 100
    for _ in range(2):
        limits.check(Asker("slack", "T999", None, "U999"))
    with pytest.raises(RateLimited):  # a recent bucket was kept, not reset
        limits.check(Asker("slack", "T999", None, "U999"))


def test_concurrent_checks_never_hand_out_more_than_the_burst() -> None:
    limits = _limits(_Clock(), user=(1, 1000), workspace=(1, 1000))
    allowed: list[int] = []

    def ask(user: int) -> None:
        for _ in range(300):
            try:
                limits.check(Asker("slack", "T1", None, f"U{user}"))
                allowed.append(user)
            except RateLimited:
                pass

    threads = [threading.Thread(target=ask, args=(u,)) for u in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(allowed) == 1000


def test_the_default_settings_allow_a_workspace_burst_and_cap_a_single_user() -> None:
    default = {name: field.default for name, field in Settings.model_fields.items()}  # not the environment's
    clock = _Clock()
    limits = FairUse(default["user_rate_per_min"], default["user_burst"], default["workspace_rate_per_min"],
                     default["workspace_burst"], clock=clock)
    for user in range(10):  # ten colleagues asking within the same second
        limits.check(Asker("slack", "T1", None, f"U{user}"))
    answered = 0
    for _ in range(600):  # one user asking every second for ten minutes
        clock.now += 1
        try:
            limits.check(Asker("slack", "T1", None, "U0"))
            answered += 1
        except RateLimited:
            pass
    assert answered <= default["user_burst"] + default["user_rate_per_min"] * 10
