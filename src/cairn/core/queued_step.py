"""The run as a step's code sees it on a step-queue worker (runtime/step_worker.py).

A queued step's code must see what it sees where its run executes: `cairn.current_step()`
with the same run id, key, attempt and idempotency key (`cairn.steps.http` sends that
key), `cairn.current_run()`, `cairn.progress()` and `cairn.set_columns()`,
`cairn.check_cancelled()` and the engine's resources. So the worker makes this context
the active run around each attempt, and marks the step's frame as the run's own
executor does (core/attempts.py). What a step's code may not do anywhere (a sleep, a
wait, a child...) it may not do here either: `authoring.context.current` refuses it
with the same NotInRun, naming the step.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from cairn import config
from cairn.authoring import context
from cairn.core.live_attempt import run_info
from cairn.core.run_env import RunEnv
from cairn.core.run_meta import MetaWriter, column_texts, progress_text
from cairn.errors import Cancelled, RunNotFound, Unsupported
from cairn.models import RunInfo
from cairn.observability import logcontext
from cairn.store.records import RunRecord, StepTaskRecord


class QueuedStepRun(context.RunContext):
    """The run of one queued step attempt, as that attempt's code sees it."""

    def __init__(self, env: RunEnv, task: StepTaskRecord, run: RunRecord | None) -> None:
        self.env = env
        self.task = task
        self.run = run
        # Set when the worker stops the attempt (its run ended, another worker took it):
        # check_cancelled() in a sync step's thread then stops it too.
        self.stopped = False
        self._meta: MetaWriter | None = None
        self._loop_thread = threading.get_ident()

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Make this the active run, in the frame of the attempt's step, meanwhile."""
        task = self.task
        run_token = context.enter(self)
        step_token = context.mark_in_step((task.step, task.key, task.attempt))
        log_token = None
        if self.run is not None:
            log_token = logcontext.enter_run(
                self.run.run_id, self.run.workflow, max(self.run.attempt, 1)
            )
        try:
            yield
        finally:
            if log_token is not None:
                logcontext.leave_run(log_token)
            context.unmark_in_step(step_token)
            context.leave(run_token)

    def info(self) -> RunInfo:
        """Facts about the run (read when the attempt was claimed)."""
        if self.run is None:
            raise RunNotFound(self.task.run_id)
        return run_info(self.run)

    def resources(self) -> config.Resources:
        """The worker's databases and tag provider (see `cairn.config.resources`)."""
        return self.env.resources

    def check_cancelled(self) -> None:
        """Raise Cancelled once the worker stopped this attempt."""
        if self.stopped:
            raise Cancelled(
                f"step {self.task.step!r} attempt {self.task.attempt} was stopped: its run "
                "ended, or another worker of the queue took the attempt over"
            )

    def stream(self, name: str) -> Any:
        """Refused: a queued step's worker does not hold the run its chunks would fence on."""
        raise Unsupported(
            "cairn.stream()",
            f"a step queue (step {self.task.step!r} on queue {self.task.queue!r})",
            "stream from a step without queue=, or from workflow code",
        )

    def set_columns(self, values: dict[str, Any]) -> None:
        """Store searchable facts about the run (in the background, as a local step)."""
        changed = column_texts(values)
        if changed:
            self._write_meta(changed, None)

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        """Store the run's progress (in the background, as a local step)."""
        self._write_meta(None, progress_text(message, current, total, self.env.clock.now()))

    def _write_meta(self, columns: dict[str, str] | None, progress: str | None) -> None:
        if self._meta is None:
            self._meta = MetaWriter(self.env.store, self.task.run_id, self.env.clock.now)
        if threading.get_ident() == self._loop_thread:
            self._meta.add(columns, progress)
        else:  # a sync step's thread
            self.env.loop.call_soon_threadsafe(self._meta.add, columns, progress)

    async def flush(self) -> None:
        """Wait for the columns and progress written so far (before the report goes)."""
        if self._meta is not None:
            await self._meta.flush()
