"""The steps a worker has in flight, as its heartbeat stores them in `workers.executing`.

Written by the worker with each heartbeat (no write of its own per step), read by people
(`cairn runs show`, the run page) and by the worker that takes a run over from a dead
one, which records each step the dead one had in flight as an interrupted attempt. A
step that began after the last heartbeat is not in it: what it shows is a little late,
never invented.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cairn.store.records import INTERRUPTED, AttemptRecord


@dataclass(frozen=True, slots=True)
class InFlightStep:
    """One step attempt executing for a run held under `fence` (see Lease)."""

    run_id: str
    fence: int
    key: str
    name: str
    attempt: int
    started_at: float


def interrupted(
    step: InFlightStep, *, execution: int, worker: str, now: float, why: str
) -> AttemptRecord:
    """The attempt `step` was, interrupted at `now`: `worker` ran it and `why` it stopped."""
    return AttemptRecord(
        run_id=step.run_id,
        key=step.key,
        attempt=step.attempt,
        error_type=INTERRUPTED,
        message=(
            f"worker {worker} {why} while attempt {step.attempt} of step {step.name!r} ran; "
            "it may have run in part or in full"
        ),
        traceback="",
        failed_at=now,
        retry_at=None,
        started_at=step.started_at,
        execution=execution,
        outcome=INTERRUPTED,
        worker=worker,
    )


def encode(steps: Iterable[InFlightStep]) -> str | None:
    """The `workers.executing` text for `steps`; None when there are none."""
    runs: dict[str, dict[str, Any]] = {}
    for step in steps:
        run = runs.setdefault(step.run_id, {"fence": step.fence, "steps": []})
        run["steps"].append(
            {
                "key": step.key,
                "name": step.name,
                "attempt": step.attempt,
                "started_at": step.started_at,
            }
        )
    return json.dumps(runs, separators=(",", ":"), sort_keys=True) if runs else None


def decode(text: str | None, run_id: str, fence: int) -> list[InFlightStep]:
    """The steps `text` lists for `run_id` held under `fence`; [] if none or unreadable.

    Steps of an older hold of the run (another fence) are left out: they ended before
    the run was claimed again.
    """
    if not text:
        return []
    try:
        run = json.loads(text).get(run_id)
        if not isinstance(run, dict) or run.get("fence") != fence:
            return []
        return [
            InFlightStep(
                run_id,
                fence,
                str(step["key"]),
                str(step["name"]),
                int(step["attempt"]),
                float(step["started_at"]),
            )
            for step in run.get("steps", ())
        ]
    except (ValueError, TypeError, KeyError, AttributeError):
        return []  # written by another version, or damaged: it is only a hint
