"""Cancel, pause and resume as a person asks for them: `cairn runs ...` and the HTTP API.

RunControl's verbs (what Engine and Client call) answer a finished run with its status
and change nothing. A command someone typed or a button someone pressed is told instead:
a verb the run can no longer take (cancelling a COMPLETED run, pausing a finished one)
is RunFinished and changes nothing, while a request a worker acts on later (cancelling a
RUNNING run) is answered at once with the run as it is now (its `control` set).
"""

from __future__ import annotations

from cairn.errors import RunFinished
from cairn.models import RunStatus
from cairn.runtime.control import RunControl
from cairn.store.records import RunRecord


async def cancel(control: RunControl, run_id: str) -> RunRecord:
    """Cancel; the run as it is now. RunFinished for a run that ended otherwise."""
    status = await control.cancel(run_id)
    if status.finished and status is not RunStatus.CANCELLED:
        raise RunFinished(run_id, f"{status.value}; nothing to cancel")
    return await control.record(run_id)


async def pause(control: RunControl, run_id: str) -> RunRecord:
    """Pause at the next durable point; the run as it is now. RunFinished if finished."""
    status = await control.pause(run_id)
    if status.finished:
        raise RunFinished(run_id, f"{status.value}; nothing to pause")
    return await control.record(run_id)


async def resume(control: RunControl, run_id: str) -> tuple[RunRecord, RunRecord]:
    """Resume a paused run (or withdraw a pause request); the run before and after.

    RunFinished for a finished run.
    """
    before = await control.record(run_id)
    if RunStatus(before.status).finished:
        raise RunFinished(run_id, f"{before.status}; nothing to resume")
    await control.resume(run_id)
    return before, await control.record(run_id)
