"""The JSON answer of a verb that steers a run, as `cairn runs ... --json` and the API give it.

What cancel, pause and resume refuse is decided by the verbs (runtime/steering.py).
"""

from __future__ import annotations

from typing import Any

from cairn.store.records import RunRecord


def action_dict(run: RunRecord, action: str) -> dict[str, Any]:
    """The JSON answer of a verb: the run's status now and the request a worker has yet to see."""
    return {"run_id": run.run_id, "action": action, "status": run.status, "requested": run.control}
