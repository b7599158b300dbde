from __future__ import annotations

import dataclasses
import pickle
import random
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.authoring.retry import Retry, coerce, next_delay


def test_retry__defaults() -> None:
    policy = Retry()
    assert (policy.max_attempts, policy.delay, policy.backoff, policy.max_delay, policy.jitter) == (
        3,
        "1s",
        2.0,
        "1m",
        0.1,
    )
    assert policy.delay_seconds == 1.0
    assert policy.max_delay_seconds == 60.0


@pytest.mark.parametrize(
    ("delay", "max_delay", "delay_seconds", "max_delay_seconds"),
    [
        ("250ms", "1h", 0.25, 3600.0),
        (2, 10.5, 2.0, 10.5),
        (timedelta(seconds=3), timedelta(minutes=1), 3.0, 60.0),
        (0, 0, 0.0, 0.0),
    ],
)
def test_retry__durations_parsed(
    delay: Any, max_delay: Any, delay_seconds: float, max_delay_seconds: float
) -> None:
    policy = Retry(delay=delay, max_delay=max_delay)
    assert policy.delay == delay
    assert policy.delay_seconds == delay_seconds
    assert policy.max_delay_seconds == max_delay_seconds


def test_retry__equal_when_durations_equal() -> None:
    assert Retry(delay="1s", max_delay="1m") == Retry(delay=1, max_delay=timedelta(minutes=1))
    assert hash(Retry(delay="1s")) == hash(Retry(delay=1.0))
    assert Retry(delay="2s") != Retry(delay="1s")
    assert Retry(max_attempts=2) != Retry()


def test_retry__repr_shows_what_was_given() -> None:
    assert repr(Retry(max_attempts=5, delay="2s")) == (
        "Retry(max_attempts=5, delay='2s', backoff=2.0, max_delay='1m', jitter=0.1)"
    )


def test_retry__frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Retry().max_attempts = 5  # type: ignore[misc]


def test_retry__replace_and_pickle() -> None:
    policy = dataclasses.replace(Retry(), delay="5s")
    assert policy.delay_seconds == 5.0
    assert pickle.loads(pickle.dumps(policy)) == policy


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_attempts": 0}, "max_attempts: 0"),
        ({"max_attempts": -1}, "max_attempts: -1"),
        ({"max_attempts": 2.0}, "max_attempts: 2.0"),
        ({"max_attempts": True}, "max_attempts: True"),
        ({"max_attempts": "3"}, "max_attempts: '3'"),
        ({"backoff": 0.5}, "backoff: 0.5"),
        ({"backoff": float("inf")}, "backoff: inf"),
        ({"backoff": float("nan")}, "backoff: nan"),
        ({"backoff": "2"}, "backoff: '2'"),
        ({"jitter": -0.1}, "jitter: -0.1"),
        ({"jitter": 1.5}, "jitter: 1.5"),
        ({"jitter": None}, "jitter: None"),
        ({"delay": "5x"}, "Retry delay: '5x'"),
        ({"delay": -1}, "Retry delay: -1"),
        ({"max_delay": "soon"}, "Retry max_delay: 'soon'"),
        ({"delay": "5m"}, "max_delay: '1m' is shorter than delay '5m'"),
    ],
)
def test_retry__bad_value_raises_naming_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        Retry(**kwargs)
    assert message in str(info.value)


def test_retry__boundary_values_accepted() -> None:
    policy = Retry(max_attempts=1, backoff=1, jitter=0, delay=0, max_delay=0)
    assert policy.max_attempts == 1
    assert Retry(jitter=1).jitter == 1


def test_coerce__none_is_default() -> None:
    assert coerce(None) == Retry()


def test_coerce__int_is_max_attempts() -> None:
    assert coerce(5) == Retry(max_attempts=5)
    assert coerce(1).max_attempts == 1


def test_coerce__policy_passes_through() -> None:
    policy = Retry(max_attempts=7)
    assert coerce(policy) is policy


@pytest.mark.parametrize("value", ["3", 2.5, True, [3], {"max_attempts": 3}])
def test_coerce__bad_type_raises(value: Any) -> None:
    with pytest.raises(TypeError, match=f"invalid retries: {value!r}".replace("[", r"\[")):
        coerce(value)


@pytest.mark.parametrize("value", [0, -3])
def test_coerce__bad_int_raises(value: int) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        coerce(value)


def test_next_delay__exponential_without_jitter() -> None:
    policy = Retry(max_attempts=6, delay="1s", backoff=3.0, max_delay="1h", jitter=0)
    assert [next_delay(policy, n) for n in range(1, 7)] == [1.0, 3.0, 9.0, 27.0, 81.0, None]


def test_next_delay__capped_at_max_delay() -> None:
    policy = Retry(max_attempts=10, delay="1s", backoff=2.0, max_delay="10s", jitter=0)
    assert [next_delay(policy, n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_next_delay__no_backoff_is_constant() -> None:
    policy = Retry(max_attempts=4, delay="5s", backoff=1, jitter=0)
    assert [next_delay(policy, n) for n in range(1, 5)] == [5.0, 5.0, 5.0, None]


def test_next_delay__none_after_max_attempts() -> None:
    policy = Retry(max_attempts=3)
    assert next_delay(policy, 2) is not None
    assert next_delay(policy, 3) is None
    assert next_delay(policy, 4) is None


def test_next_delay__single_attempt_never_retries() -> None:
    assert next_delay(Retry(max_attempts=1), 1) is None
    assert next_delay(Retry(max_attempts=1), 1, retry_after=5.0) is None


def test_next_delay__zero_delay() -> None:
    assert next_delay(Retry(delay=0, jitter=0.5), 1) == 0.0


def test_next_delay__huge_attempt_does_not_overflow() -> None:
    policy = Retry(max_attempts=100_000, backoff=10, jitter=0)
    assert next_delay(policy, 50_000) == 60.0


def test_next_delay__seeded_rng_is_deterministic() -> None:
    policy = Retry(max_attempts=10)
    first = [next_delay(policy, n, rng=random.Random(42)) for n in range(1, 10)]
    second = [next_delay(policy, n, rng=random.Random(42)) for n in range(1, 10)]
    assert first == second
    assert first[0] == pytest.approx(1.0 * random.Random(42).uniform(0.9, 1.1))


def test_next_delay__jitter_varies_with_rng() -> None:
    policy = Retry(max_attempts=3, jitter=0.5)
    rng = random.Random(1)
    delays = {next_delay(policy, 1, rng=rng) for _ in range(20)}
    assert len(delays) > 1


@settings(database=None, max_examples=300)
@given(
    attempt=st.integers(min_value=1, max_value=60),
    delay=st.floats(min_value=0, max_value=100),
    backoff=st.floats(min_value=1, max_value=10),
    jitter=st.floats(min_value=0, max_value=1),
    seed=st.integers(),
)
def test_next_delay__within_jitter_bounds(
    attempt: int, delay: float, backoff: float, jitter: float, seed: int
) -> None:
    policy = Retry(
        max_attempts=100, delay=delay, backoff=backoff, max_delay=max(delay, 300), jitter=jitter
    )
    result = next_delay(policy, attempt, rng=random.Random(seed))
    assert result is not None
    base = min(policy.delay_seconds * backoff ** (attempt - 1), policy.max_delay_seconds)
    assert base * (1 - jitter) - 1e-9 <= result <= base * (1 + jitter) + 1e-9
    assert 0 <= result <= policy.max_delay_seconds * (1 + jitter)


def test_next_delay__retry_after_used_exactly() -> None:
    policy = Retry(max_attempts=3, max_delay="10s")
    assert next_delay(policy, 1, retry_after=42.5) == 42.5
    assert next_delay(policy, 1, retry_after=0.0) == 0.0
    assert next_delay(policy, 2, retry_after=timedelta(minutes=2)) == 120.0
    assert next_delay(policy, 3, retry_after=1.0) is None


def test_next_delay__negative_retry_after_is_now() -> None:
    assert next_delay(Retry(), 1, retry_after=-5) == 0.0


@pytest.mark.parametrize("attempt", [0, -1])
def test_next_delay__attempt_counts_from_one(attempt: int) -> None:
    with pytest.raises(ValueError, match="attempt must be >= 1"):
        next_delay(Retry(), attempt)
