"""Waiting for runs to end: RunControl's wait and result, and this process's worker's part."""

from __future__ import annotations

import asyncio
from typing import Any

from cairn import blobs
from cairn.codecs import coded
from cairn.core.executor import Outcome
from cairn.errors import PoisonRun, RunCancelled, RunFailed
from cairn.models import RunStatus
from cairn.runtime.local_executor import LocalExecutor
from cairn.runtime.run_reading import RunReader
from cairn.serialization import Serializer
from cairn.store.records import RunRecord


class RunWaiter:
    """Wait for runs and answer their results; a run ending here wakes its waiters at once."""

    def __init__(
        self, reader: RunReader, *, serializer: Serializer, local: LocalExecutor | None
    ) -> None:
        self.reader = reader
        self.serializer = serializer
        # This process's worker, if it executes runs: the Engine sets it once it has one.
        self.local = local
        self._waiters: dict[str, list[asyncio.Future[Outcome | None]]] = {}

    def wake_local(self) -> None:
        """Let this process's worker pick up a run that just became due."""
        if self.local is not None:
            self.local.wake()

    def notify_finished(self, run_id: str, ended: Outcome | None = None) -> None:
        """Wake local waiters of `run_id` (called by the worker when a run stops).

        `ended` is how the run ended, as committed by this process's worker: waiters of a
        finished run then answer without reading it back.
        """
        for future in self._waiters.pop(run_id, ()):
            if not future.done():
                future.set_result(ended)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> RunRecord:
        """Wait until the run is finished; local completions wake at once, others by polling."""
        ended = await self._wait(run_id, timeout)
        return await self.reader.record(run_id) if isinstance(ended, Outcome) else ended

    async def _wait(self, run_id: str, timeout: float | None) -> RunRecord | Outcome:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        delay = 0.01
        while True:
            future: asyncio.Future[Outcome | None] = loop.create_future()
            self._waiters.setdefault(run_id, []).append(future)
            # A run executing here announces its end here: no need to ask the database.
            local = self.local is not None and self.local.executing(run_id)
            if not local:
                run = await self.reader.record(run_id)
                if RunStatus(run.status).finished:
                    self._discard(run_id, future)
                    return run
            wait_for: float | None = None if local else delay
            if deadline is not None:
                left = deadline - loop.time()
                wait_for = left if wait_for is None else min(wait_for, left)
                if wait_for <= 0:
                    self._discard(run_id, future)
                    raise TimeoutError(f"run {run_id!r} did not finish within {timeout}s")
            try:
                if wait_for is None:  # woken by this process's worker: no timer to set
                    ended = await future
                else:
                    async with asyncio.timeout(wait_for):
                        ended = await future
                if ended is not None and _final(ended):
                    return ended
            except TimeoutError:
                self._discard(run_id, future)
            if not local:
                delay = min(delay * 2, 0.5)

    def _discard(self, run_id: str, future: asyncio.Future[Outcome | None]) -> None:
        waiters = self._waiters.get(run_id)
        if waiters and future in waiters:
            waiters.remove(future)
            if not waiters:
                del self._waiters[run_id]

    async def result(self, run_id: str, *, timeout: float | None = None) -> Any:
        """The run's result once finished; RunFailed / RunCancelled otherwise."""
        if timeout is None:
            deadline = left = None
        else:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
        while True:
            if deadline is not None:
                left = max(0.0, deadline - loop.time())
            run = await self._wait(run_id, left)
            if isinstance(run, Outcome):
                return await self._answer_async(run_id, run.status, run.result, run.error)
            if run.status != RunStatus.CONTINUED.value or run.continued_to is None:
                return await self._answer_async(run.run_id, run.status, run.result, run.error)
            run_id = run.continued_to  # the chain's final result is the answer

    def outcome(self, run: RunRecord) -> Any:
        """The result of a finished run, or the error it ended with, raised."""
        return self._answer(run.run_id, run.status, run.result, run.error)

    async def _answer_async(
        self, run_id: str, status: str | None, result: str | None, error: str | None
    ) -> Any:
        """`_answer` on the caller's loop: an offloaded result is fetched in a thread."""
        if status == _COMPLETED and result is not None:
            return await blobs.loads_async(self.serializer, result)
        return self._answer(run_id, status, result, error)

    def _answer(
        self, run_id: str, status: str | None, result: str | None, error: str | None
    ) -> Any:
        if status == _COMPLETED:
            return None if result is None else self.serializer.loads(result)
        if status == _CANCELLED:
            raise RunCancelled(run_id=run_id)
        data = coded.unseal_json(self.serializer, error) or {}
        kind = PoisonRun if data.get("type") == "cairn.errors.PoisonRun" else RunFailed
        raise kind(
            f"run {run_id!r} failed: {data.get('message', '')}",
            run_id=run_id,
            error_type=data.get("cause_type") or data.get("type", ""),
            error_message=data.get("message", ""),
            traceback=data.get("traceback", ""),
        )


def _final(ended: Outcome) -> bool:
    """True if how a run ended, as its worker committed it, alone answers `result()`."""
    if ended.status == _FAILED:
        return ended.error is not None  # a poisoned run's error is only in the database
    # A continued run's answer is its successor's.
    return ended.status in _ANSWERED


# A member's `.value` is a Python-level property: read once here for the hot paths.
_COMPLETED, _CANCELLED, _FAILED = (
    s.value for s in (RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED)
)
_ANSWERED = (_COMPLETED, _CANCELLED)
