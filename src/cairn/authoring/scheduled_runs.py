"""`cairn.schedule_workflow`: start a detached run of a workflow, now or at a later time.

pyworkflow's spelling, called inside a workflow with or without `await`. Outside a run
there is no engine to start it with: `engine.start(workflow, run_at=...)` does that.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from cairn import start_times
from cairn.authoring import context, usage
from cairn.errors import InvalidArguments, NotInRun
from cairn.names import check_name

OUTSIDE_A_RUN = (
    "cairn.schedule_workflow() works in workflow code only; outside a run, use "
    "`await engine.start(workflow, run_at=...)` (or `client.start(workflow, run_at=...)`)"
)


@usage.checked("cairn.schedule_workflow")
def schedule_workflow(
    workflow: Any,
    /,
    *args: Any,
    run_at: Any = None,
    delay: Any = None,
    run_id: str | None = None,
    **kwargs: Any,
) -> Awaitable[str]:
    """Start a run of `workflow` that begins at `run_at`, after `delay`, or now.

    A durable operation of the calling workflow, and an alternative to a very long sleep:
    the new run is stored at once as PENDING until its time, and it is detached: it
    outlives this run and is not cancelled with it. The call is recorded once: a replay
    returns the same id and starts nothing again (nor does a crash between the start and
    its record: the id is derived from this run's id and the call). The parent's history
    shows the start (kind `schedule`), and the new run names this one as its parent.

    It takes effect at the call, awaited or not: in an async workflow it returns an
    awaitable of the new run's id, which may be ignored (pyworkflow's
    `schedule_workflow(annual_review, run_at="2026-01-01")`); the run writes it before it
    finishes, parks, continues as new or fails. In a sync workflow it returns the id.

    Args:
        workflow: A @cairn.workflow.
        *args: Its positional arguments.
        run_at: When it may start: a datetime, a date, or ISO 8601 text ("2026-01-01",
            "2026-01-01T09:30:00+01:00"). A date means its midnight UTC; a datetime or
            text without an offset is taken as UTC. A time past starts it now.
        delay: Or how long from now: a duration ("365d", "1h30m", seconds, a timedelta).
        run_id: The new run's id (default: derived from this run's id and the call). A
            run that already has it is the one returned, as with `engine.start`.
        **kwargs: Its keyword arguments (none may be called run_at, delay or run_id).

    Returns:
        The new run's id: awaitable in async workflows, the value in sync ones.

    Raises:
        NotInRun: Outside workflow code (use `await engine.start(workflow, run_at=...)`).
        ValueError: Both `run_at` and `delay`, a bad duration or unreadable `run_at` text.
        InvalidArguments: Arguments that do not fit the workflow (a TypeError).
        TransientWorkflow: `workflow` (or the calling one) is transient (durable=False).
    """
    from cairn.authoring.definitions import definition_of

    found = definition_of(workflow)
    if found is None:
        raise InvalidArguments(f"cairn.schedule_workflow needs a @cairn.workflow, got {workflow!r}")
    if run_id is not None:
        check_name(run_id, "scheduled run_id")
    # Bad times fail here, in or out of a run, before anything is recorded.
    start_times.start_at(0.0, delay, run_at, caller="cairn.schedule_workflow")
    if context.in_run() is None:
        raise NotInRun(OUTSIDE_A_RUN)
    ctx = context.current("cairn.schedule_workflow()")
    return ctx.schedule_workflow(found, args, kwargs, run_id, run_at, delay)  # type: ignore[no-any-return]
