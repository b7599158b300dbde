"""Rolling deploys: a run started under another version of its workflow's code.

A worker whose code cannot replay such a run hands it back (signals.OtherVersion) while
a live worker of the run's version may take it; with none, the run fails. What a worker
executes, and in which version, is in its row (runtime/executing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cairn.core.signals import OtherVersion
from cairn.errors import CairnError, NonDeterminismError
from cairn.observability import logcontext
from cairn.store.programs import workers as worker_ops

if TYPE_CHECKING:
    from cairn.authoring.definitions import WorkflowDef
    from cairn.core.run_env import RunEnv
    from cairn.store.records import RunRecord

log = logcontext.logger("cairn.executor")


def elsewhere(
    run: RunRecord,
    workflow: WorkflowDef[..., object],
    leave: Callable[[BaseException], BaseException],
) -> Callable[[NonDeterminismError], BaseException] | None:
    """What a divergence of `run` becomes under this code (Journal.elsewhere), or None.

    None (the run fails) unless both the run and the code have a version, and they differ.
    """
    started, code = run.version, workflow.version
    if started is None or code is None or started == code:
        return None
    return lambda error: leave(OtherVersion(run.workflow, started, code, error))


async def unserved(env: RunEnv, run_id: str, other: OtherVersion) -> CairnError | None:
    """What fails a run handed back for its version if no live worker runs that version."""
    read = worker_ops.version_served(other.workflow, other.run_version, env.owner)
    if await env.store.read(read):
        return None
    log.error("run %s: %s", run_id, failure := other.failure())
    return failure
