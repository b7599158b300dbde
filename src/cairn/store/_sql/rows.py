"""Row <-> record mapping of runs, steps, attempts, workers and executions."""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Sequence
from typing import Any

from cairn.store import texts
from cairn.store.records import (
    ATTEMPT_FIELDS,
    RUN_FIELDS,
    STEP_FIELDS,
    AttemptRecord,
    ExecutionRecord,
    Lease,
    RunRecord,
    StepRecord,
    WorkerRecord,
)


def child_message(run_id: str, status: str, result: str | None, error: str | None) -> str:
    """What a finished child tells its parent (consumed by the parent's wait)."""
    return json.dumps({"run_id": run_id, "status": status, "result": result, "error": error})


_RUN_VALUES = operator.attrgetter(*RUN_FIELDS)


def run_params(run: RunRecord) -> tuple[Any, ...]:
    """The values of `run` in RUN_FIELDS order."""
    values: tuple[Any, ...] = _RUN_VALUES(run)
    return values


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A RunRecord from a row selected with RUN_COLUMNS."""
    return RunRecord(*row)


# A StepRecord's values in STEP_FIELDS order, by one C call.
step_values = operator.attrgetter(*STEP_FIELDS)


def step_params(step: StepRecord, lease: Lease | None = None) -> tuple[Any, ...]:
    """The values of `step` in STEP_FIELDS order; then its run's id and `lease`, if given.

    (With a lease: the parameters of INSERT_STEP_OWNED, built for every step; read by one
    C call rather than field by field.)
    """
    values: tuple[Any, ...] = step_values(step)
    if lease is not None:
        return (*values, step.run_id, lease.owner, lease.fence)
    return values


def step_from_row(row: Sequence[Any]) -> StepRecord:
    """A StepRecord from a row of SELECT_JOURNAL (input None) or SELECT_HISTORY."""
    return StepRecord(*row)


# An attempt's texts come from the step's exception: escaped for the store (see texts).
_ATTEMPT_TEXTS = frozenset({"error_type", "message", "traceback"})


def attempt_params(attempt: AttemptRecord) -> tuple[Any, ...]:
    """The values of `attempt` in ATTEMPT_FIELDS order, its texts escaped."""
    return tuple(
        texts.stored(value) if name in _ATTEMPT_TEXTS else value
        for name in ATTEMPT_FIELDS
        for value in (getattr(attempt, name),)
    )


def attempt_from_row(row: Sequence[Any]) -> AttemptRecord:
    """An AttemptRecord from a row selected with ATTEMPT_COLUMNS, its texts unescaped."""
    attempt = AttemptRecord(*row)
    return dataclasses.replace(
        attempt,
        error_type=texts.loaded(attempt.error_type),
        message=texts.loaded(attempt.message),
        traceback=texts.loaded(attempt.traceback),
    )


def worker_params(worker: WorkerRecord) -> tuple[Any, ...]:
    """The parameters of UPSERT_WORKER for `worker` (its times come from the database)."""
    return (
        worker.worker_id,
        worker.host,
        worker.pid,
        worker.concurrency,
        worker.queues,
        worker.workflows,
        worker.lease,
        worker.process,
        worker.executing,
        worker.versions,
    )


def execution_from_row(row: Sequence[Any]) -> ExecutionRecord:
    """An ExecutionRecord from a row selected with EXECUTION_COLUMNS."""
    return ExecutionRecord(*row)


def worker_from_row(row: Sequence[Any]) -> WorkerRecord:
    """A WorkerRecord from a row selected with WORKER_COLUMNS."""
    return WorkerRecord(*row)
