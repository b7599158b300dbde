"""Client: the synchronous face of RunControl for Flask, Django and scripts.

It runs RunControl on a private event-loop thread and blocks on each call. It queues runs
for workers and never executes them itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator
from datetime import date, datetime
from types import TracebackType
from typing import Any, TypeVar

from cairn import codecs, config
from cairn.authoring.registry import Registry, default_registry
from cairn.clock import SystemClock
from cairn.models import EventDelivery, HistoryEntry, RunPage, RunStatus, RunSummary
from cairn.runtime import streams, value_layers
from cairn.runtime.control import RunControl
from cairn.runtime.tasks import TaskInfo
from cairn.store import open_store

T = TypeVar("T")


class ClientRunHandle:
    """A run seen through a Client; every method blocks."""

    __slots__ = ("_client", "run_id")

    def __init__(self, client: Client, run_id: str) -> None:
        self._client = client
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"ClientRunHandle({self.run_id!r})"

    def status(self) -> RunStatus:
        """The run's current status."""
        return self._client._call(self._client.control.status(self.run_id))

    def describe(self) -> RunSummary:
        """The run's summary: status, version, `continued_from` / `continued_to`, ..."""
        return self._client._call(self._client.control.describe(self.run_id))

    def result(self, timeout: float | None = None) -> Any:
        """Block until the run finishes; its result, or RunFailed/RunCancelled/TimeoutError."""
        return self._client._call(self._client.control.result(self.run_id, timeout=timeout))

    def cancel(self) -> RunStatus:
        """Cancel this run."""
        return self._client.cancel(self.run_id)

    def pause(self) -> RunStatus:
        """Pause this run at its next durable point."""
        return self._client.pause(self.run_id)

    def resume(self) -> RunStatus:
        """Resume this run if paused."""
        return self._client.resume(self.run_id)

    def send_event(
        self, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Send event `name` to this run (see `Client.send_event`)."""
        return self._client.send_event(self.run_id, name, payload, idempotency_key=idempotency_key)


class ClientTasks:
    """The human-task inbox through a Client; every method blocks."""

    __slots__ = ("_client",)

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(
        self,
        status: str | None = "open",
        assignee: str | None = None,
        run_id: str | None = None,
        *,
        descendants: bool = False,
    ) -> list[TaskInfo]:
        """Tasks, oldest first; `status=None` lists every status (see `Engine.tasks.list`)."""
        return self._client._call(
            self._client.control.tasks.list(status, assignee, run_id, descendants=descendants)
        )

    def get(self, task_id: str) -> TaskInfo:
        """One task; TaskNotFound if unknown."""
        return self._client._call(self._client.control.tasks.get(task_id))

    def submit(self, task_id: str, values: Any, *, by: str | None = None) -> TaskInfo:
        """Submit the task's form (InvalidSubmission lists bad fields)."""
        return self._client._call(self._client.control.tasks.submit(task_id, values, by=by))


class Client:
    """A synchronous client: start, inspect and wait for runs that workers execute."""

    def __init__(
        self,
        url: str | None = None,
        *,
        serializer: str = "json",
        registry: Registry | None = None,
        known_workers_window: Any = None,
        codec: codecs.Codec | None = None,
    ) -> None:
        """Open a client on `url` (default: CAIRN_DATABASE_URL, else sqlite:///cairn.db).

        `known_workers_window`: how long after a worker was last seen its workflows can
        still be started by name (default: CAIRN_KNOWN_WORKERS_WINDOW, else "7d").
        `codec`: what stored values pass through, as `Engine(codec=...)` (default: the
        keys of CAIRN_KEYS or CAIRN_KEYS_FILE, if set).
        """
        self.url = config.database_url(url)
        window = config.known_workers_window(known_workers_window)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cairn-client", daemon=True
        )
        self._thread.start()
        store = open_store(self.url)
        self.control = RunControl(
            store,
            clock=SystemClock(),
            serializer=value_layers.stack(serializer, config.limits(), codec, store),
            registry=registry or default_registry,
            known_window=window,
        )
        try:
            self._call(store.open())
        except BaseException:
            self._stop_loop()
            raise
        self._closed = False

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` (a call of `self.control`) on the client's own event-loop thread.

        For async code on another loop (the dashboard serving a Client): await it with
        `asyncio.wrap_future`.
        """
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connection and stop the client's thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self.control.store.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def start(
        self,
        workflow: Any,
        *args: Any,
        delay: Any = None,
        run_at: datetime | date | str | None = None,
        **options: Any,
    ) -> ClientRunHandle:
        """Queue a run for workers (same options as `Engine.start`, `allow_unknown` too).

        Raises:
            UnknownWorkflow: no worker seen lately knows the name (see `Engine.start`).
            InvalidArguments: arguments that do not fit the workflow (a TypeError).
        """
        call = self.control.start(workflow, *args, delay=delay, run_at=run_at, **options)
        handle = self._call(call)
        return ClientRunHandle(self, handle.run_id)

    def get(self, run_id: str) -> ClientRunHandle:
        """A handle on an existing run; RunNotFound if unknown."""
        self._call(self.control.get(run_id))
        return ClientRunHandle(self, run_id)

    def list_runs(self, **filters: Any) -> RunPage:
        """A page of runs (same filters as `Engine.list_runs`)."""
        return self._call(self.control.list_runs(**filters))

    def send_event(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Send an event to a run; it is kept until a wait of the run takes it.

        RunNotFound / RunFinished for a bad target. The answer says whether a wait of
        the run takes it now (see `Engine.send_event`).
        """
        return self._call(
            self.control.send_event(run_id, name, payload, idempotency_key=idempotency_key)
        )

    def emit(
        self, event_type: str, payload: Any = None, *, key: str | None = None
    ) -> list[ClientRunHandle]:
        """Start the workflows subscribed to `event_type` (see `Engine.emit`)."""
        handles = self._call(self.control.emit(event_type, payload, key=key))
        return [ClientRunHandle(self, handle.run_id) for handle in handles]

    def resume_hook(self, token: str, payload: Any = None) -> str:
        """Call a hook once with its token and a payload.

        HookNotFound for an unknown, used or expired token.
        """
        return self._call(self.control.resume_hook(token, payload))

    @property
    def tasks(self) -> ClientTasks:
        """The human-task inbox: `list`, `get`, `submit`."""
        return ClientTasks(self)

    def cancel(self, run_id: str) -> RunStatus:
        """Cancel a run: it ends CANCELLED at its current or next durable point."""
        return self._call(self.control.cancel(run_id))

    def pause(self, run_id: str) -> RunStatus:
        """Pause a run at its next durable point (at once if it sleeps, waits or is queued)."""
        return self._call(self.control.pause(run_id))

    def resume(self, run_id: str) -> RunStatus:
        """Resume a paused run; timers and events that came meanwhile are honoured."""
        return self._call(self.control.resume(run_id))

    def retry(self, run_id: str, *, by: str | None = None) -> ClientRunHandle:
        """Continue a FAILED run from its failed step (completed steps do not run again)."""
        return ClientRunHandle(self, self._call(self.control.retry(run_id, by=by)).run_id)

    def restart(self, run_id: str, *, by: str | None = None) -> ClientRunHandle:
        """Start a new run of the same workflow with the same input.

        It records its source and `by`.
        """
        return ClientRunHandle(self, self._call(self.control.restart(run_id, by=by)).run_id)

    def fork(self, run_id: str, from_step: int, *, by: str | None = None) -> ClientRunHandle:
        """Start a new run reusing the recorded steps before a chosen history entry.

        That entry is `from_step` (see `Engine.fork`).
        """
        handle = self._call(self.control.fork(run_id, from_step, by=by))
        return ClientRunHandle(self, handle.run_id)

    def history(self, run_id: str) -> list[HistoryEntry]:
        """The run's durable operations in order."""
        return self._call(self.control.history(run_id))

    def read_stream(self, run_id: str, name: str, *, after: int | None = None) -> Iterator[Any]:
        """The values of run `run_id`'s stream `name` as they come (see Engine.read_stream)."""
        control = self.control
        values = streams.read_stream(control.store, control.serializer, run_id, name, after=after)
        try:
            while True:
                try:
                    yield self._call(values.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._call(values.aclose())
