"""ReplayRun: workflow code run against a recorded history, offline.

Nothing executes and nothing is written: each durable call returns its recorded outcome,
and the replay stops where the history ends. `cairn.testing.replay()` and the pre-deploy
check (`engine.check`, `cairn check --db`) share it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cairn import step_failures
from cairn.authoring import context
from cairn.authoring.context import RunContext
from cairn.authoring.definitions import WorkflowDef
from cairn.authoring.hook import Hook
from cairn.core import (
    journal,
    mailbox,
    patches,
    pending_starts,
    remote_steps,
    scheduled_starts,
    waits,
)
from cairn.errors import ChildFailed, StepFailed
from cairn.models import HistoryEntry, RunInfo, RunStatus
from cairn.store.records import StepRecord


class _ReachedNewWork(BaseException):
    """The code went past the end of the history without diverging."""


class ReplayRun(RunContext):
    """Workflow code run against a recorded history: nothing executes, nothing is written.

    Shared by `replay()` and the pre-deploy check (`engine.check`, `cairn check --db`).
    `execute` returns where the history ends; a drift raises NonDeterminismError.
    """

    def __init__(self, entries: list[HistoryEntry], workflow: WorkflowDef[Any, Any]) -> None:
        self.workflow = workflow
        # What a retry took out of the journal is kept for people, not replayed.
        # Nor are the reports of a queued step's attempts: the step's own entry is its outcome.
        entries = [e for e in entries if not e.superseded and e.kind != remote_steps.REMOTE]
        self.entries = {e.key: e for e in entries}
        # Each patch id the code asked about: False if this run predates it.
        self.patches: dict[str, bool] = {}
        self.journal = journal.Journal(
            [
                StepRecord("replay", e.seq, e.key, e.kind, e.name, e.status, e.attempts, None, None)
                for e in entries
            ],
            cache_keys=workflow.names_are_cache_keys,
        )
        self.scheduled = pending_starts.PendingStarts()

    async def execute(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        token = context.enter(self)
        try:
            if self.workflow.is_async:
                await pending_starts.settled(self.scheduled, self.workflow.fn(*args, **kwargs))
            else:
                ctx = contextvars.copy_context()
                await asyncio.to_thread(ctx.run, self.workflow.fn, *args, **kwargs)
            self.journal.check_finished("returned")
        except _ReachedNewWork:
            return
        except StepFailed:
            self.journal.check_finished("failed")
        finally:
            context.leave(token)

    def info(self) -> RunInfo:
        return RunInfo("replay", self.workflow.name, 1, datetime.now(UTC))

    async def _take(
        self, counted: str, kind: str, name: str, default: Any = context.MISSING
    ) -> HistoryEntry | Any:
        """The recorded entry of the next `kind` operation counted as `counted`.

        A timed-out wait gives what a live one gives (`default`, else EventTimeout).
        """
        key = self.journal.next_key(counted)
        if self.journal.take(key, kind) is None:
            await self.journal.check_new_work(journal.started(kind, key))
            raise _ReachedNewWork()
        entry = self.entries[key]
        if entry.status == "failed":
            raise step_failures.from_dict(entry.error or {})
        if entry.status == "timeout":
            return waits.timed_out(kind, name, default)
        if entry.status == "waiting":
            raise _ReachedNewWork()
        return entry

    def _deliver(self, coro: Any) -> Any:
        # Like LiveAttempt.deliver: a sync workflow's thread blocks until the coroutine is done.
        if threading.get_ident() == self._loop_thread:
            return coro
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def call_step(self, step: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        async def go() -> Any:
            return (await self._take(step.name, "step", step.name)).result

        return self._deliver(go())

    def call_inline(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retries: Any,
        timeout: Any,
        queue: str | None = None,
    ) -> Any:
        async def go() -> Any:
            return (await self._take(name, "step", name)).result

        return self._deliver(go())

    def call_child(
        self, workflow: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        async def go() -> Any:
            return await (await self._start_child(workflow)).result()

        return self._deliver(go())

    def start_child(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        detached: bool,
    ) -> Any:
        return self._deliver(self._start_child(workflow))

    async def _start_child(self, workflow: WorkflowDef[Any, Any]) -> _RecordedChild:
        key = self.journal.next_key(journal.op_name("child", workflow.name))
        if self.journal.take(key, "child") is None:
            await self.journal.check_new_work(journal.started("child", key))
            raise _ReachedNewWork()
        return _RecordedChild(self, self.entries[key])

    def emit(self, event_type: str, payload: Any, key: str | None) -> Any:
        async def go() -> Any:
            entry = await self._take(journal.op_name("emit", event_type), "emit", event_type)
            return entry.result

        return self._deliver(go())

    def schedule_workflow(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        run_at: Any,
        delay: Any,
    ) -> Any:
        kind = scheduled_starts.KIND
        key = self.journal.next_key(journal.op_name(kind, workflow.name))

        async def reached() -> str:
            await self.journal.check_new_work(journal.started(kind, key))
            raise _ReachedNewWork()

        def started() -> str:
            facts = self.entries[key].result
            return str(facts.get("run_id", "")) if isinstance(facts, dict) else ""

        if threading.get_ident() != self._loop_thread:  # a sync workflow's thread

            async def go() -> str:
                return started() if self.journal.take(key, kind) is not None else await reached()

            return self._deliver(go())
        # As in a live run: taken at the call, awaited or not (see core/scheduled_starts.py).
        if self.journal.take(key, kind) is None:
            return self.scheduled.add(self._loop, reached())
        done: asyncio.Future[str] = self._loop.create_future()
        done.set_result(started())
        return pending_starts.ScheduledRun(done)

    def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        raise _ReachedNewWork()  # the run ends here; its successor has a history of its own

    def sleep(self, seconds: float, name: str | None = None) -> Any:
        return self._deliver(self._take(journal.sleep_name(name), "sleep", name or "sleep"))

    def sleep_until(self, when: datetime, name: str | None = None) -> Any:
        return self._deliver(self._take(journal.sleep_name(name), "sleep", name or "sleep"))

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        async def go() -> Any:
            counted = journal.op_name("event", name)
            entry = await self._take(counted, "event", name, default)
            if not isinstance(entry, HistoryEntry):
                return entry
            finished = entry.finished_at
            self.received_at = None if finished is None else finished.timestamp()
            return entry.result

        return self._deliver(go())

    def receive(self, topic: str, max_messages: int, timeout: float | None) -> Any:
        async def go() -> Any:
            entry = await self._take(mailbox.key_name(topic), mailbox.KIND, topic, [])
            return list(entry.result or []) if isinstance(entry, HistoryEntry) else entry

        return self._deliver(go())

    def create_hook(self, name: str, timeout: float | None, schema: Any) -> Any:
        async def go() -> Hook:
            entry = await self._take(journal.op_name("hook", name), "hook", name)

            async def payload() -> Any:
                return waits.as_model(schema, entry.result)

            return Hook(name, "", None, payload)

        return self._deliver(go())

    def human_task(
        self,
        name: str,
        title: str,
        data: Any,
        form: Any,
        assignee: str | None,
        timeout: float | None,
    ) -> Any:
        async def go() -> Any:
            entry = await self._take(journal.op_name("task", name), "task", name)
            return waits.as_model(form, entry.result)

        return self._deliver(go())

    def set_columns(self, values: dict[str, Any]) -> None:
        return None

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        return None

    def check_cancelled(self) -> None:
        return None

    def stream(self, name: str) -> Any:
        """A stream that writes nothing: a replay never writes (core/streams.py)."""
        return _Unwritten(self._deliver)

    def patched(self, change_id: str) -> bool:
        key = patches.key_of(self.journal, change_id)
        new_path, _ = patches.decide(self.journal, key)
        self.patches[change_id] = self.patches.get(change_id, True) and new_path
        return new_path

    def deprecate_patch(self, change_id: str) -> None:
        if not self.patched(change_id):
            raise patches.predates(change_id)


class _RecordedChild:
    """A child handle in a replay: the recorded outcomes of its waits (see ChildHandle)."""

    def __init__(self, replay: ReplayRun, entry: HistoryEntry) -> None:
        self._replay = replay
        self._entry = entry
        self._timeouts = 0
        outcome = entry.result if isinstance(entry.result, dict) else {}
        self.run_id = str(outcome.get("run_id") or outcome.get("child_id") or "")

    async def result(self, timeout: float | None = None) -> Any:
        recorded = self._replay.journal
        entry = self._entry
        if self._timeouts:
            key = f"{entry.key}@{self._timeouts + 1}"
            if recorded.take(key, "child") is None:
                await recorded.check_new_work(journal.waited_again(key))
                raise _ReachedNewWork()
            entry = self._replay.entries[key]
        base, hop = entry.key, 0
        while True:
            if entry.status == "timeout":
                self._timeouts += 1
                raise TimeoutError(f"child {entry.name!r} did not finish in time")
            outcome = entry.result if isinstance(entry.result, dict) else {}
            status = outcome.get("status")
            if entry.status == "waiting" or status is None:
                raise _ReachedNewWork()
            if status == RunStatus.COMPLETED.value:
                return outcome.get("result")
            if status != RunStatus.CONTINUED.value:
                error = outcome.get("error")
                raise ChildFailed(f"child {entry.name!r} ended {status}: {error}")
            hop += 1  # followed to its successor, under a key of its own
            if recorded.take(f"{base}>{hop}", "child") is None:
                raise _ReachedNewWork()
            entry = self._replay.entries[f"{base}>{hop}"]


class _Unwritten:
    """`cairn.stream` in an offline replay: its writes and close do nothing."""

    def __init__(self, deliver: Any) -> None:
        self._deliver = deliver

    def write(self, value: Any) -> Any:
        return self._deliver(_nothing())

    def close(self) -> Any:
        return self._deliver(_nothing())

    def write_sync(self, value: Any) -> None:
        return None

    def close_sync(self) -> None:
        return None


async def _nothing() -> None:
    return None
