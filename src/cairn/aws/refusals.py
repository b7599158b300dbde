"""What has no meaning on AWS Lambda, each refused by name with what to do instead.

A workflow's own options are checked when `cairn.aws.handler` wraps it (and when it is
called as a child); the primitives at their call. Nothing is silently ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cairn.errors import Unsupported

HOST = "AWS Lambda (cairn.aws)"

_INSTEAD = {
    "cairn.start_child()": "await the child workflow's call instead (a child context)",
    "cairn.continue_as_new()": "loop inside the workflow, or start a new execution from a step",
    "cairn.receive()": "wait for one event at a time with cairn.wait_for_event()",
    "cairn.emit()": "invoke the other function from a step (boto3), or call it as a child",
    "cairn.schedule_workflow()": "schedule a new execution with EventBridge Scheduler, from "
    "a step, or sleep until then",
    "cairn.stream()": "Lambda keeps no streams: return the chunks, or send them from the step",
}


def refused(feature: str) -> Unsupported:
    """The Unsupported error for `feature` (a primitive such as "cairn.emit()")."""
    return Unsupported(feature, HOST, _INSTEAD.get(feature, ""))


def step_queue(step: str, queue: str) -> Unsupported:
    """A step queue: there are no workers serving queues on Lambda."""
    return Unsupported(
        f"the step queue of step {step!r} (queue={queue!r})",
        HOST,
        "its attempts run in the function; drop queue= or call it from a step that invokes "
        "another function",
    )


def transaction(step: str) -> Unsupported:
    """A transaction step: its writes commit with its checkpoint in cairn's database."""
    return Unsupported(
        f"the transaction step {step!r} (@cairn.transaction)",
        HOST,
        "there is no cairn database; write from a @cairn.step, idempotently",
    )


def isolation(step: str) -> Unsupported:
    """isolation='process': the attempt runs in the function's own process."""
    return Unsupported(
        f"isolation='process' of step {step!r}", HOST, "each attempt runs in the function"
    )


def check_schedules(workflow: str, schedules: Iterable[Any]) -> None:
    """Unsupported for a `cairn.schedule` of `workflow`: nothing fires its ticks on Lambda."""
    for schedule in schedules:
        if schedule.workflow == workflow:
            raise Unsupported(
                f"the schedule {schedule.id!r} of workflow {workflow!r} (cairn.schedule)",
                HOST,
                "schedule the function with EventBridge Scheduler, and declare the schedule "
                "in a module only cairn worker imports",
            )


def check_workflow(workflow: Any) -> None:
    """Unsupported for an option of `workflow` that has no meaning on Lambda."""
    name = workflow.name
    if workflow.queue is not None:
        raise Unsupported(
            f"the queue of workflow {name!r} (queue={workflow.queue!r})",
            HOST,
            "Lambda's concurrency settings limit executions",
        )
    if workflow.on is not None:
        raise Unsupported(
            f"the event trigger of workflow {name!r} (on={workflow.on!r})",
            HOST,
            "an EventBridge rule or another function invokes it",
        )
    if workflow.timeout is not None:
        raise Unsupported(
            f"the timeout of workflow {name!r} ({workflow.timeout:g}s)",
            HOST,
            "set the function's DurableConfig ExecutionTimeout",
        )
    if not workflow.durable:
        raise Unsupported(
            f"the transient workflow {name!r} (durable=False)",
            HOST,
            "call it from a plain Lambda handler",
        )
    if workflow.names_are_cache_keys:
        raise Unsupported(
            f"step names as cache keys (the WorkflowEntrypoint {name!r})",
            HOST,
            "operations are matched by their order",
        )
