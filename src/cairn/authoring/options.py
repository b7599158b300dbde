"""The retry spellings of the systems cairn users come from, each mapped to one `Retry`.

DBOS-style `options={...}` (and the fluent product's `num_retries`), pyworkflow's
`max_retries=`/`retry_delay=`, and Cloudflare's step `config={"retries": ..., "timeout": ...}`.
Everything is checked where it is written (at decoration time); executing a step never
looks at these spellings again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cairn import durations
from cairn.authoring.retry import Retry
from cairn.errors import InvalidArguments, InvalidValue

__all__ = ["OPTION_KEYS", "from_cloudflare", "resolve"]

OPTION_KEYS = (
    "backoff_rate",
    "interval_seconds",
    "max_attempts",
    "num_retries",
    "retries_allowed",
    "timeout",
)
"""The keys `options=` takes: DBOS's words, plus `num_retries` and `timeout`."""

_CLOUDFLARE_KEYS = ("retries", "timeout")
_CLOUDFLARE_RETRY_KEYS = ("backoff", "delay", "limit")
_CLOUDFLARE_BACKOFF = {"constant": 1.0, "exponential": 2.0}
_PYWORKFLOW_DELAYS = {"fixed": 1.0, "exponential": 2.0}  # the backoff factor of each
# The seeds do not cap their waits the way Retry.max_delay does: the cap is raised so that
# their schedule is kept, up to this (a week).
_LONGEST_CAP = 7 * 24 * 3600.0


def resolve(
    where: str,
    *,
    retries: Retry | int | None,
    timeout: Any,
    options: Mapping[str, Any] | None = None,
    max_retries: int | None = None,
    retry_delay: Any = None,
) -> tuple[Retry | int | None, Any]:
    """The one retry policy and timeout a step's arguments spell, whichever system's words.

    Args:
        where: The step, as errors name it (``"step 'charge'"``).
        retries: cairn's own spelling.
        timeout: cairn's own timeout.
        options: DBOS words (``retries_allowed``, ``max_attempts``, ``interval_seconds``,
            ``backoff_rate``), ``num_retries`` (retries after the first attempt) and
            ``timeout``.
        max_retries: pyworkflow: retries after the first attempt.
        retry_delay: pyworkflow: ``"fixed"``, ``"exponential"`` or a duration (fixed).

    Returns:
        ``(retries, timeout)`` in cairn's terms, for `@cairn.step` to take as usual.

    Raises:
        ValueError: An unknown key, a bad value, or two spellings of the same thing.
        TypeError: ``options`` is not a dict.
    """
    spelled = []
    if retries is not None:
        spelled.append("retries=")
    if max_retries is not None or retry_delay is not None:
        spelled.append("max_retries=/retry_delay=")
    option_retry = None
    if options is not None:
        option_retry, option_timeout = _from_options(where, options)
        if option_retry is not None:
            spelled.append(f"options={dict(options)!r}")
        if option_timeout is not None:
            if timeout is not None:
                raise InvalidValue(
                    f"{where}: timeout= and options['timeout'] both set its timeout; use one"
                )
            timeout = option_timeout
    if len(spelled) > 1:
        raise InvalidValue(f"{where}: {' and '.join(spelled)} both set its retries; use one")
    if option_retry is not None:
        return option_retry, timeout
    if max_retries is not None or retry_delay is not None:
        return _from_pyworkflow(where, max_retries, retry_delay), timeout
    return retries, timeout


def from_cloudflare(where: str, config: Mapping[str, Any] | None) -> tuple[Retry | None, Any]:
    """The retry policy and timeout of a Cloudflare step config.

    ``{"retries": {"limit": 5, "delay": "1 second", "backoff": "exponential"},
    "timeout": "15 minutes"}``: ``limit`` counts retries after the first attempt,
    ``backoff`` is ``"constant"`` or ``"exponential"``, and a number for ``delay`` or
    ``timeout`` is seconds.

    Returns:
        ``(retry, timeout in seconds)``; None for what the config leaves out (cairn's
        default).

    Raises:
        ValueError: An unknown key or a bad value, named with the known ones.
        TypeError: ``config`` or its ``retries`` is not a dict.
    """
    if config is None:
        return None, None
    _check_keys(where, "config", config, _CLOUDFLARE_KEYS)
    timeout = config.get("timeout")
    if timeout is not None:
        timeout = _seconds(where, "config['timeout']", timeout)
    spec = config.get("retries")
    if spec is None:
        return None, timeout
    _check_keys(where, "config['retries']", spec, _CLOUDFLARE_RETRY_KEYS)
    attempts = 3
    if "limit" in spec:
        attempts = _count(where, "config['retries']['limit']", spec["limit"], least=0) + 1
    delay = _seconds(where, "config['retries']['delay']", spec.get("delay", 1.0))
    backoff_name = spec.get("backoff", "exponential")
    backoff = _CLOUDFLARE_BACKOFF.get(backoff_name) if isinstance(backoff_name, str) else None
    if backoff is None:
        raise InvalidValue(
            f"{where}: config['retries']['backoff'] {backoff_name!r} is not supported "
            '(use "constant" or "exponential", or cairn.Retry(delay=..., backoff=FACTOR))'
        )
    return _policy(attempts, delay, backoff), timeout


def _from_options(where: str, options: Mapping[str, Any]) -> tuple[Retry | None, Any]:
    """DBOS-style options: the policy (None if no retry key is given) and the timeout."""
    _check_keys(where, "options", options, OPTION_KEYS)
    if "max_attempts" in options and "num_retries" in options:
        raise InvalidValue(
            f"{where}: options 'max_attempts' and 'num_retries' both count its attempts; use one"
        )
    allowed = options.get("retries_allowed")
    if allowed is not None and not isinstance(allowed, bool):
        raise InvalidValue(
            f"{where}: options['retries_allowed'] must be True or False, got {allowed!r}"
        )
    attempts = None
    if "max_attempts" in options:
        attempts = _count(where, "options['max_attempts']", options["max_attempts"], least=1)
    elif "num_retries" in options:
        attempts = _count(where, "options['num_retries']", options["num_retries"], least=0) + 1
    if allowed is False:
        if attempts is not None and attempts > 1:
            raise InvalidValue(
                f"{where}: options['retries_allowed'] is False but the options ask for "
                f"{attempts} attempts; drop one of them"
            )
        attempts = 1
    shaped = "interval_seconds" in options or "backoff_rate" in options
    if attempts is None and allowed is None and not shaped:
        return None, options.get("timeout")
    delay = _seconds(where, "options['interval_seconds']", options.get("interval_seconds", 1.0))
    backoff = options.get("backoff_rate", 2.0)
    if not _is_real(backoff) or not 1 <= backoff < math.inf:
        raise InvalidValue(
            f"{where}: options['backoff_rate'] must be a number >= 1, got {backoff!r}"
        )
    return _policy(attempts or 3, delay, float(backoff)), options.get("timeout")


def _from_pyworkflow(where: str, max_retries: int | None, retry_delay: Any) -> Retry:
    """The policy of pyworkflow's ``max_retries`` (default 3) and ``retry_delay`` ("fixed")."""
    retries = 3 if max_retries is None else _count(where, "max_retries", max_retries, least=0)
    if retry_delay is None:
        retry_delay = "fixed"
    if isinstance(retry_delay, str) and retry_delay.strip().lower() in _PYWORKFLOW_DELAYS:
        return _policy(retries + 1, 1.0, _PYWORKFLOW_DELAYS[retry_delay.strip().lower()])
    if isinstance(retry_delay, list | tuple):
        raise InvalidValue(
            f"{where}: retry_delay as a list of waits is not supported; use "
            '"fixed", "exponential" or one duration, or cairn.Retry(delay=..., backoff=...)'
        )
    try:
        delay = durations.seconds(retry_delay, what=f"retry_delay of {where}")
    except ValueError:
        raise InvalidValue(
            f'{where}: retry_delay {retry_delay!r} is not supported; use "fixed", '
            '"exponential" or a duration such as "30s" (or cairn.Retry(delay=..., backoff=...))'
        ) from None
    return _policy(retries + 1, delay, 1.0)


def _policy(attempts: int, delay: float, backoff: float) -> Retry:
    """A Retry whose cap never shortens the schedule the seed system would keep."""
    longest = delay
    if attempts > 2 and backoff > 1:
        try:
            longest = delay * backoff ** (attempts - 2)
        except OverflowError:
            longest = math.inf
    cap = max(delay, min(max(60.0, longest), _LONGEST_CAP))
    return Retry(max_attempts=attempts, delay=delay, backoff=backoff, max_delay=cap)


def _check_keys(where: str, what: str, given: Any, known: tuple[str, ...]) -> None:
    if not isinstance(given, Mapping):
        raise InvalidArguments(f"{where}: {what} must be a dict, got {given!r}")
    for key in given:
        if key not in known:
            raise InvalidValue(
                f"{where}: unknown key {key!r} in {what} (known: {', '.join(known)})"
            )


def _count(where: str, what: str, value: Any, *, least: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise InvalidValue(f"{where}: {what} must be a whole number >= {least}, got {value!r}")
    return value


def _seconds(where: str, what: str, value: Any) -> float:
    return durations.seconds(value, what=f"{what} of {where}")


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
