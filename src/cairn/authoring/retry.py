"""The retry policy of a step, and the pure arithmetic of its delays.

Deciding whether an error is retryable and sleeping between attempts live in ``core``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import timedelta

from cairn import durations
from cairn.errors import InvalidArguments, InvalidValue

__all__ = ["Retry", "coerce", "next_delay"]


@dataclass(frozen=True, slots=True)
class Retry:
    """How often and how patiently a failing step is retried.

    Attempt ``n`` (counting from 1) that fails is followed, while attempts remain, by a wait
    of ``delay * backoff ** (n - 1)``, capped at ``max_delay`` and then spread by ``jitter``.
    ``Retry(max_attempts=1)`` means no retry. Invalid values raise ``ValueError`` naming the
    field, when the policy is built (so at decoration time).

    Two policies are equal when they behave the same: ``Retry(delay="1s") == Retry(delay=1)``.
    """

    max_attempts: int = 3
    """Attempts in all, the first included; at least 1. Default 3."""

    delay: str | float | timedelta = field(default="1s", compare=False)
    """Wait after the first failed attempt, as a duration. Default ``"1s"``."""

    backoff: float = 2.0
    """Factor applied to the wait after each further failure; at least 1. Default 2.0."""

    max_delay: str | float | timedelta = field(default="1m", compare=False)
    """Cap on the wait before jitter, as a duration; at least ``delay``. Default ``"1m"``."""

    jitter: float = 0.1
    """Relative random spread of each wait, from 0 (none) to 1. Default 0.1 (±10%)."""

    delay_seconds: float = field(init=False, repr=False)
    """``delay`` in seconds (derived)."""

    max_delay_seconds: float = field(init=False, repr=False)
    """``max_delay`` in seconds (derived)."""

    def __post_init__(self) -> None:
        max_attempts = self.max_attempts
        if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise InvalidValue(
                f"invalid Retry max_attempts: {max_attempts!r} (must be an int >= 1)"
            )
        if not _is_real(self.backoff) or not 1 <= self.backoff < math.inf:
            raise InvalidValue(f"invalid Retry backoff: {self.backoff!r} (must be a number >= 1)")
        if not _is_real(self.jitter) or not 0 <= self.jitter <= 1:
            raise InvalidValue(
                f"invalid Retry jitter: {self.jitter!r} (must be a number from 0 to 1)"
            )
        delay = durations.seconds(self.delay, what="Retry delay")
        max_delay = durations.seconds(self.max_delay, what="Retry max_delay")
        if max_delay < delay:
            raise InvalidValue(
                f"invalid Retry max_delay: {self.max_delay!r} is shorter than"
                f" delay {self.delay!r} (raise max_delay too)"
            )
        object.__setattr__(self, "delay_seconds", delay)
        object.__setattr__(self, "max_delay_seconds", max_delay)


def coerce(retries: Retry | int | None) -> Retry:
    """Turn a step's ``retries`` argument into a policy.

    Args:
        retries: A policy; an int, meaning ``Retry(max_attempts=retries)``; or None,
            meaning ``Retry()``.

    Returns:
        The policy.

    Raises:
        TypeError: If ``retries`` is of another type.
        ValueError: If ``retries`` is an int below 1.
    """
    if retries is None:
        return _DEFAULT
    if isinstance(retries, Retry):
        return retries
    if isinstance(retries, int) and not isinstance(retries, bool):
        return Retry(max_attempts=retries)
    raise InvalidArguments(
        f"invalid retries: {retries!r} (use cairn.Retry(...), an int of max attempts, or None)"
    )


def next_delay(
    policy: Retry,
    attempt: int,
    *,
    rng: random.Random | None = None,
    retry_after: float | timedelta | None = None,
) -> float | None:
    """Seconds to wait before the next attempt, after ``attempt`` attempts have failed.

    Args:
        policy: The step's retry policy.
        attempt: How many attempts have run and failed, counting from 1.
        rng: Source of jitter; the module's shared generator when None. Pass a seeded
            ``random.Random`` for reproducible delays.
        retry_after: A wait the failure asked for (``RetryableError(retry_after=...)``, an
            HTTP ``Retry-After``). When given it is used as is, neither capped nor jittered:
            the server said when.

    Returns:
        The wait in seconds, never negative and never above ``max_delay * (1 + jitter)``
        unless ``retry_after`` says so; or None when no attempts remain.

    Raises:
        ValueError: If ``attempt`` is below 1.
    """
    if attempt < 1:
        raise InvalidValue(f"attempt must be >= 1, got {attempt!r}")
    if attempt >= policy.max_attempts:
        return None
    if retry_after is not None:
        if isinstance(retry_after, timedelta):
            return max(0.0, retry_after.total_seconds())
        return max(0.0, float(retry_after))
    base = policy.delay_seconds
    if base == 0:
        return 0.0
    try:
        base *= policy.backoff ** (attempt - 1)
    except OverflowError:  # a long run of failures: the cap applies anyway
        base = math.inf
    capped = min(base, policy.max_delay_seconds)
    if policy.jitter:
        uniform = (rng or _RANDOM).uniform
        capped *= uniform(1 - policy.jitter, 1 + policy.jitter)
    return min(max(capped, 0.0), policy.max_delay_seconds * (1 + policy.jitter))


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_DEFAULT = Retry()
_RANDOM = random.Random()
