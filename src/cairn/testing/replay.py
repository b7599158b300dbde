"""replay(history, workflow): run workflow code against a recorded history, offline.

Use it in tests (with golden histories checked in as JSON) to learn, before deploying,
whether changed workflow code still replays the runs already in flight.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cairn.authoring import context
from cairn.authoring.context import RunContext
from cairn.authoring.hook import Hook
from cairn.authoring.workflow import WorkflowDef
from cairn.core import journal
from cairn.errors import EventTimeout, StepFailed
from cairn.models import History, HistoryEntry, RunInfo
from cairn.store.records import StepRecord


class _ReachedNewWork(BaseException):
    """The code went past the end of the history without diverging."""


def replay(
    history: History | list[HistoryEntry],
    workflow: WorkflowDef[Any, Any],
    *args: Any,
    **kwargs: Any,
) -> None:
    """Replay `workflow` against `history`; NonDeterminismError if the code drifted.

    The input defaults to the one the history records (`History.args`/`kwargs`). Replay
    stops without error where the history ends (a run still in flight).
    """
    if not args and not kwargs and isinstance(history, History):
        args, kwargs = history.args, history.kwargs
    run = _ReplayRun(list(history), workflow)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(run.execute(args, kwargs))
        except BaseException as exc:  # carried back to the caller's thread
            errors.append(exc)

    # A thread of its own, so replay() works inside a running event loop (async tests).
    thread = threading.Thread(target=target, name="cairn-replay")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


class _ReplayRun(RunContext):
    def __init__(self, entries: list[HistoryEntry], workflow: WorkflowDef[Any, Any]) -> None:
        self.workflow = workflow
        self.entries = {e.key: e for e in entries}
        self.journal = journal.Journal(
            [
                StepRecord("replay", e.seq, e.key, e.kind, e.name, e.status, e.attempts, None, None)
                for e in entries
            ]
        )

    async def execute(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        token = context.enter(self)
        try:
            if self.workflow.is_async:
                await self.workflow.fn(*args, **kwargs)
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

    async def _take(self, name: str, kind: str, met: str) -> HistoryEntry:
        key = self.journal.next_key(name)
        if self.journal.take(key, kind) is None:
            await self.journal.check_new_work(met)
            raise _ReachedNewWork()
        entry = self.entries[key]
        if entry.status == "failed":
            raise StepFailed.from_dict(entry.error or {})
        if entry.status == "timeout":
            raise EventTimeout(f"{kind} {name!r} timed out")
        if entry.status == "waiting":
            raise _ReachedNewWork()
        return entry

    def _deliver(self, coro: Any) -> Any:
        # Like LiveRun.deliver: a sync workflow's thread blocks until the coroutine is done.
        if threading.get_ident() == self._loop_thread:
            return coro
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def call_step(self, step: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        async def go() -> Any:
            return (await self._take(step.name, "step", f"started step {step.name!r}")).result

        return self._deliver(go())

    def call_inline(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retries: Any,
        timeout: Any,
    ) -> Any:
        async def go() -> Any:
            return (await self._take(name, "step", f"started step {name!r}")).result

        return self._deliver(go())

    def call_child(
        self, workflow: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        async def go() -> Any:
            entry = await self._take(
                f"~child:{workflow.name}", "child", f"started child {workflow.name!r}"
            )
            outcome = entry.result if isinstance(entry.result, dict) else {}
            return outcome.get("result")

        return self._deliver(go())

    def sleep(self, seconds: float) -> Any:
        return self._deliver(self._take(journal.SLEEP, "sleep", "started a sleep"))

    def sleep_until(self, when: datetime) -> Any:
        return self._deliver(self._take(journal.SLEEP, "sleep", "started a sleep"))

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        async def go() -> Any:
            try:
                entry = await self._take(
                    f"~event:{name}", "event", f"started waiting for event {name!r}"
                )
            except EventTimeout:
                from cairn.core.waits import MISSING

                if default is MISSING:
                    raise
                return default
            return entry.result

        return self._deliver(go())

    def create_hook(self, name: str, timeout: float | None) -> Any:
        async def go() -> Hook:
            entry = await self._take(f"~hook:{name}", "hook", f"created hook {name!r}")

            async def payload() -> Any:
                return entry.result

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
            entry = await self._take(f"~task:{name}", "task", f"created human task {name!r}")
            if isinstance(form, type) and hasattr(form, "model_validate"):
                return form.model_validate(entry.result)
            return entry.result

        return self._deliver(go())

    def set_columns(self, values: dict[str, Any]) -> None:
        return None

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        return None

    def check_cancelled(self) -> None:
        return None
