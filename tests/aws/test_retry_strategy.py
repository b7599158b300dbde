"""A step's cairn Retry as the SDK's retry strategy: the same decisions, in whole seconds."""

from __future__ import annotations

import pytest

from .conftest import needs_sdk

needs_sdk()

import cairn
from cairn.aws import steps


def decide(policy: cairn.Retry, error: Exception, attempts: int) -> int | None:
    """Seconds to the next attempt, or None for no retry."""
    decision = steps.strategy(policy)(error, attempts)
    return decision.delay_seconds if decision.should_retry else None


def test_strategy__follows_the_policys_backoff_rounded_up_to_whole_seconds():
    policy = cairn.Retry(max_attempts=4, delay="1.5s", backoff=2, jitter=0)
    assert [decide(policy, ValueError("x"), n) for n in (1, 2, 3, 4)] == [2, 3, 6, None]


def test_strategy__a_delay_under_a_second_is_one_second():
    assert decide(cairn.Retry(delay="10ms", jitter=0), ValueError("x"), 1) == 1


def test_strategy__retry_after_sets_the_delay():
    error = cairn.RetryableError("busy", retry_after="90s")
    assert decide(cairn.Retry(jitter=0), error, 1) == 90


@pytest.mark.parametrize(
    "error", [cairn.FatalError("no"), cairn.InvalidArguments("wrong call")], ids=str
)
def test_strategy__fatal_and_usage_errors_are_not_retried(error):
    assert decide(cairn.Retry(max_attempts=5), error, 1) is None
