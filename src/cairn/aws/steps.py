"""A cairn step as the SDK's checkpointed step: its attempts, its Retry, its final failure.

Each attempt runs the step's code with the step marked as running (so the primitives
refuse to run inside it and `cairn.current_step()` answers), within its timeout. Its start
is checkpointed before its code runs (the SDK's at-most-once-per-attempt semantics): a
copy of an invocation Lambda delivers twice carries a spent checkpoint token, so the
service refuses that start and a step completed since never runs again. An attempt cut
short by the invocation's death (kill, timeout) is retried a second later, like a crash
recovery under `cairn worker`: the step gets its attempts plus the workflow's
`max_recoveries` in all. A failed
attempt is retried as the step's `cairn.Retry` says, the service waiting out the delay
(whole seconds, at least one: the SDK's rule); `FatalError` and usage errors are not
retried. The final failure reaches the workflow as cairn's StepFailed, combined with the
step's own exception class as under `cairn worker` (see cairn.step_failures).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Any

from aws_durable_execution_sdk_python.config import Duration, StepConfig, StepSemantics
from aws_durable_execution_sdk_python.context import DurableContext
from aws_durable_execution_sdk_python.exceptions import (
    DurableOperationError,
    StepError,
    StepInterruptedError,
)
from aws_durable_execution_sdk_python.retries import RetryDecision
from aws_durable_execution_sdk_python.types import StepContext

from cairn import step_failures, tracebacks
from cairn.authoring import context
from cairn.authoring.retry import Retry, next_delay
from cairn.aws import blocking, codec
from cairn.errors import CairnError, FatalError, RetryableError, StepFailed


class AttemptFailed(DurableOperationError):
    """One attempt of a step failed: what the SDK checkpoints (cairn's facts as its data).

    The service's history shows this class as the error type, and the step's own error
    (`builtins.ValueError: ...`) as the message; its data holds what a replay needs to
    raise the same failure again. `cause` is the step's own exception, read by the retry
    decision of this invocation.
    """

    def __init__(self, cause: Exception, facts: dict[str, Any]) -> None:
        super().__init__(
            f"{facts['error_type']}: {facts['message']}",
            data=json.dumps(facts),
            error_type=facts["error_type"],
        )
        self.cause = cause


class AttemptTimedOut(Exception):
    """A step attempt ran past the step's timeout."""


def run(
    durable: DurableContext,
    name: str,
    key: str,
    call: Callable[[], Any],
    is_async: bool,
    retry: Retry,
    timeout: float | None,
    recoveries: int,
) -> Any:
    """Run `call` (the step's code with its arguments) as the SDK step `name`; its result.

    `recoveries` bounds the retries of attempts the invocation died in (see the module).
    """

    def attempt(step: StepContext) -> Any:
        token = context.mark_in_step((name, key, step.attempt))
        try:
            return _within(call, is_async, timeout, name)
        except Exception as exc:
            raise AttemptFailed(exc, _facts(exc, name, step.attempt)) from exc
        finally:
            context.unmark_in_step(token)

    config = StepConfig(
        retry_strategy=strategy(retry, recoveries),
        step_semantics=StepSemantics.AT_MOST_ONCE_PER_RETRY,
        serdes=codec.SERDES,
    )
    try:
        return durable.step(attempt, name=name, config=config)
    except StepError as exc:
        raise failure(exc, name, retry.max_attempts + recoveries) from None


def _within(call: Callable[[], Any], is_async: bool, timeout: float | None, name: str) -> Any:
    """The attempt's result; AttemptTimedOut once `timeout` seconds pass."""

    def late() -> Exception:
        return AttemptTimedOut(f"step {name!r} ran past its timeout ({timeout:g}s)")

    if is_async:

        async def bounded() -> Any:
            try:
                return await asyncio.wait_for(call(), timeout)
            except TimeoutError:
                raise late() from None

        return blocking.run_to_end(bounded)
    if timeout is None:
        return call()
    return blocking.call_within(call, timeout, late)


def _facts(exc: Exception, name: str, attempt: int) -> dict[str, Any]:
    """What a replay needs to raise this failure again, as step_failures.from_dict reads it."""
    kind = type(exc)
    return {
        "step_name": name,
        "attempts": attempt,
        "error_type": f"{kind.__module__}.{kind.__qualname__}",
        "message": str(exc),
        "traceback": tracebacks.user_traceback(exc),  # the user's frames, as in core/
        "fatal": _fatal(exc),
        "timeout": isinstance(exc, AttemptTimedOut),
        "original": step_failures.keep(exc),
    }


def _fatal(exc: BaseException) -> bool:
    """True for a failure no retry can mend: FatalError, or a usage error of cairn's."""
    return isinstance(exc, FatalError) or (isinstance(exc, CairnError) and exc.usage)


def strategy(policy: Retry, recoveries: int = 0) -> Callable[[Exception, int], RetryDecision]:
    """The SDK retry strategy that follows `policy` (delays rounded up to whole seconds).

    An attempt the invocation died in (StepInterruptedError) did not fail: it is retried
    after a second while the attempts so far stay within `policy`'s and `recoveries` more.
    """

    def decide(error: Exception, attempts_made: int) -> RetryDecision:
        if isinstance(error, StepInterruptedError):
            if attempts_made < policy.max_attempts + recoveries:
                return RetryDecision.retry(Duration(seconds=1))
            return RetryDecision.no_retry()
        cause = error.cause if isinstance(error, AttemptFailed) else error
        if _fatal(cause):
            return RetryDecision.no_retry()
        retry_after = cause.retry_after if isinstance(cause, RetryableError) else None
        delay = next_delay(policy, attempts_made, retry_after=retry_after)
        if delay is None:
            return RetryDecision.no_retry()
        return RetryDecision.retry(Duration(seconds=max(1, math.ceil(delay))))

    return decide


def failure(error: StepError, name: str, most: int) -> StepFailed:
    """The StepFailed (or StepTimeout) for the final failure the SDK raised.

    `most` is how many attempts a step the invocation kept dying in gets (see strategy).
    """
    try:
        facts = json.loads(error.data or "")
    except ValueError:
        facts = None
    if not isinstance(facts, dict):  # not one of ours (the SDK's own, say)
        facts = {
            "step_name": name,
            "attempts": 1,
            "error_type": error.error_type or "",
            "message": error.message or str(error),
        }
        if (error.error_type or "").endswith("StepInterruptedError"):
            facts["attempts"] = most
            facts["message"] = (
                "the invocation died in each attempt (killed, out of memory or out of "
                "time), more often than the workflow's max_recoveries allows"
            )
    return step_failures.from_dict(facts)
