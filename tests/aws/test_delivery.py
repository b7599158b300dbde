"""Lambda's deliveries: an invocation delivered twice, at once or again later, and one that dies.

Lambda delivers an invocation at least once, so the same invocation input can reach the
handler twice; the second copy carries the operations as they were when it was sent. A
step that completed since must not run again: its start is checkpointed before its code
runs, and the service refuses the stale copy's checkpoint.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .conftest import needs_sdk

needs_sdk()

import cairn
import cairn.aws

from . import flows
from .conftest import result_of

ORDER = json.dumps({"order": "o-1"})


def test_redelivery__a_completed_step_does_not_run_again(lambda_runner):
    served = cairn.aws.handler(flows.process_order)
    copies: list[Any] = []

    def delivered_twice(event: Any, context: Any) -> Any:
        first = served(event, context)
        if not copies:  # the first invocation reaches the function again, after it ended
            copies.append(served(event, context))
        return first

    outcome = lambda_runner(delivered_twice).run(input=ORDER, execution_timeout=60)
    assert result_of(outcome)["cents"] == 1250
    assert copies and copies[0]["Status"] != "SUCCEEDED"  # the stale copy did nothing
    assert flows.calls["reserve"] == 1 and flows.calls["charge"] == 1


def test_redelivery__two_copies_at_once_run_each_step_once(lambda_runner):
    served = cairn.aws.handler(flows.process_order)
    together = threading.Barrier(2)
    copies: list[Any] = []

    def delivered_at_once(event: Any, context: Any) -> Any:
        if copies:
            return served(event, context)
        copies.append("delivered twice")

        def copy() -> None:
            together.wait()
            try:
                copies.append(served(event, context))
            except Exception as exc:  # a failed invocation, as Lambda would record it
                copies.append(exc)

        other = threading.Thread(target=copy)
        other.start()
        together.wait()
        try:
            return served(event, context)
        finally:
            other.join()

    outcome = lambda_runner(delivered_at_once).run(input=ORDER, execution_timeout=60)
    assert result_of(outcome)["cents"] == 1250
    assert flows.calls["reserve"] == 1 and flows.calls["charge"] == 1


class Killed(BaseException):
    """The invocation's process dies inside the step (kill -9, out of memory)."""


killed_in: set[str] = set()


@cairn.step(name="aws_delivery.fragile", retries=1)
def fragile(order: str) -> str:
    flows.calls["fragile"] += 1
    if order in killed_in:
        killed_in.discard(order)
        raise Killed
    return f"done {order}"


@cairn.workflow(name="aws_delivery.dies_in_a_step", max_recoveries=1)
async def dies_in_a_step(order: str) -> str:
    return await fragile(order)


def _dying(served: Any) -> Any:
    def invoke(event: Any, context: Any) -> Any:
        try:
            return served(event, context)
        except Killed:
            raise flows.Crash("the invocation died in a step") from None

    return invoke


def test_death_in_a_step__the_attempt_is_retried_even_without_retries(lambda_runner):
    killed_in.add("o-1")  # retries=1: one attempt, yet a death is no failure of the step
    served = _dying(cairn.aws.handler(dies_in_a_step))
    outcome = lambda_runner(served).run(input=ORDER, execution_timeout=60)
    assert result_of(outcome) == "done o-1"
    assert flows.calls["fragile"] == 2 and not killed_in


def test_death_in_a_step__past_max_recoveries_the_step_fails_naming_it(lambda_runner):
    served = cairn.aws.handler(dies_in_a_step)

    def dies_every_time(event: Any, context: Any) -> Any:
        killed_in.add("o-1")
        return _dying(served)(event, context)

    outcome = lambda_runner(dies_every_time).run(input=ORDER, execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.StepFailed"
    assert outcome.error.message == (
        "step 'aws_delivery.fragile' failed after 2 attempt(s): "
        "aws_durable_execution_sdk_python.exceptions.StepInterruptedError: the invocation "
        "died in each attempt (killed, out of memory or out of time), more often than the "
        "workflow's max_recoveries allows"
    )
    assert flows.calls["fragile"] == 2  # one attempt, one recovery (max_recoveries=1)
