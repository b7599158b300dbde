"""Cancel, pause, resume and fork as a person asks for them: the CLI, HTTP API and MCP tools.

RunControl's verbs (what Engine and Client call) answer a finished run with its status
and change nothing. A command someone typed or a button someone pressed is told instead:
a verb the run can no longer take (cancelling a COMPLETED run, pausing a finished one)
is RunFinished and changes nothing, while a request a worker acts on later (cancelling a
RUNNING run) is answered at once with the run as it is now (its `control` set).
A run that continued as new names the newest run of its chain, the one to steer.
"""

from __future__ import annotations

from cairn.errors import RunFinished
from cairn.models import RunStatus
from cairn.runtime.control import RunControl
from cairn.runtime.handle import RunHandle
from cairn.store.records import RunRecord

# A continue_as_new chain followed to its newest run, at most (as events follow it).
_MAX_CHAIN_HOPS = 10_000


async def cancel(control: RunControl, run_id: str) -> RunRecord:
    """Cancel; the run as it is now. RunFinished for a run that ended otherwise."""
    status = await control.cancel(run_id)
    if status.finished and status is not RunStatus.CANCELLED:
        raise await finished(control, run_id, status, "cancel")
    return await control.record(run_id)


async def pause(control: RunControl, run_id: str) -> RunRecord:
    """Pause at the next durable point; the run as it is now. RunFinished if finished."""
    status = await control.pause(run_id)
    if status.finished:
        raise await finished(control, run_id, status, "pause")
    return await control.record(run_id)


async def finished(control: RunControl, run_id: str, status: RunStatus, verb: str) -> RunFinished:
    """The RunFinished of `verb` on a finished run; a CONTINUED one names its newest run.

    `cairn runs cancel` of a chain's first run is a cancel meant for the run the chain
    goes on as: the error says which run that is (RunFinished.newest), or that the
    chain has ended too.
    """
    if status is not RunStatus.CONTINUED:
        return RunFinished(run_id, f"{status.value}; nothing to {verb}")
    newest = await control.record(run_id)
    for _ in range(_MAX_CHAIN_HOPS):
        if newest.continued_to is None or newest.status != RunStatus.CONTINUED:
            break
        newest = await control.record(newest.continued_to)
    now = RunStatus(newest.status).value
    return RunFinished(run_id, status.value, newest=newest.run_id, now=now)


async def resume(control: RunControl, run_id: str) -> tuple[RunRecord, RunRecord]:
    """Resume a paused run (or withdraw a pause request); the run before and after.

    RunFinished for a finished run.
    """
    before = await control.record(run_id)
    if RunStatus(before.status).finished:
        raise await finished(control, run_id, RunStatus(before.status), "resume")
    await control.resume(run_id)
    return before, await control.record(run_id)


async def fork(control: RunControl, run_id: str, from_step: int, *, by: str | None) -> RunHandle:
    """Fork at history entry `from_step`; ValueError naming the run's entries if it has none.

    RunControl.fork takes any seq (the entries before it are reused); a person who names
    an entry the run does not have has mistyped it, and nothing is started.
    """
    seqs = [entry.seq for entry in await control.history(run_id)]
    if from_step not in seqs:
        span = f"{min(seqs)} to {max(seqs)}" if seqs else "none yet"
        raise ValueError(f"run {run_id!r} has no history entry {from_step} (its entries: {span})")
    return await control.fork(run_id, from_step, by=by)
