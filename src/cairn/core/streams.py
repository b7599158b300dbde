"""Durable streams of a live run: `cairn.stream(name)` writers, buffered and batched.

A step's chunks are buffered and appended in batches (a commit per batch, after a short
linger), flushed when the stream is closed and when the step attempt ends, before its
outcome is committed: a completed step's chunks are all stored. A failed attempt's
chunks are voided with a reset item; an attempt whose worker died is voided by the next
one, or by the end of the run if it is cancelled or fails first. A run's stream writes
take turns (a lock of its live attempt), so steps running at once may share a stream.
Workflow code's writes are counted per stream, so a replay writes none again (nor
stores their values). A chunk the blob store does not take for now is waited out, as a
step's result is (core/durable.py `stored`). Readers: runtime/streams.py. The contract:
docs/explanation/streams.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from cairn.authoring import context
from cairn.blobs import BlobUnwritable
from cairn.core import durable
from cairn.errors import StoreError
from cairn.names import check_name
from cairn.observability import logcontext
from cairn.store.programs import streams as stream_ops
from cairn.store.protocol import LeaseLost

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView
    from cairn.core.run_env import RunEnv

log = logcontext.logger("cairn.executor")

LINGER = 0.0
"""Seconds a step's first buffered chunk waits for others to share its commit: none
beyond the current turn of the event loop (chunks written meanwhile, and while a commit
is under way, share the next one)."""
MAX_BATCH = 1000
"""Chunks a commit takes at most; a writer that has more waits for the commit."""


class StreamWriters:
    """The stream writers of one live attempt of a run (a collaborator of LiveRun)."""

    def __init__(self, live: LiveView) -> None:
        self.live = live
        self._steps: dict[tuple[str, str, int], _StepWriter] = {}
        self._workflow: dict[str, _WorkflowWriter] = {}

    def open(self, name: str) -> Stream:
        """The stream `name` for the code running now: a step's attempt, or workflow code."""
        check_name(name, "stream name")
        frame = context.step_frame()
        if frame is None:
            writer = self._workflow.get(name)
            if writer is None:
                writer = self._workflow[name] = _WorkflowWriter(self.live, name)
            return Stream(self.live, writer)
        _step, key, attempt = frame
        found = self._steps.get((name, key, attempt))
        if found is None:
            found = self._steps[(name, key, attempt)] = _StepWriter(self.live, name, key, attempt)
        return Stream(self.live, found)

    async def finish(self, key: str, attempt: int) -> None:
        """Store what step `key`'s attempt buffered (it succeeded; its outcome is next)."""
        for (name, k, n), writer in list(self._steps.items()):
            if (k, n) == (key, attempt):
                await writer.flush()
                del self._steps[(name, k, n)]

    async def fail(self, key: str, attempt: int) -> None:
        """Void what step `key`'s attempt wrote: it failed (a reset if anything was stored)."""
        stored = False
        for (name, k, n), writer in list(self._steps.items()):
            if (k, n) == (key, attempt):
                stored |= await writer.abandon()
                del self._steps[(name, k, n)]
        if stored:
            await void(self.live, key, attempt, own=True)

    def discard(self, key: str, attempt: int) -> None:
        """Forget step `key`'s attempt's buffers (it ends without a verdict: it unwinds)."""
        for (name, k, n), writer in list(self._steps.items()):
            if (k, n) == (key, attempt):
                writer.drop()
                del self._steps[(name, k, n)]


async def void(live: LiveView, key: str, attempt: int, *, own: bool) -> None:
    """Reset step `key`'s chunks: this attempt's (`own`), or the dead attempts' before it."""
    async with live.attempt.stream_writes:
        await _void(live, key, attempt, own=own)


async def _void(live: LiveView, key: str, attempt: int, *, own: bool) -> None:
    run = live.run
    op = stream_ops.void_attempt(
        live.lease,
        run.run_id,
        key,
        attempt=attempt,
        claim=run.attempt,
        own=own,
        now=live.env.clock.now(),
    )
    for name in await live.env.store.write(op):
        live.env.store.stream_bells().ring(run.run_id, name)


@contextlib.asynccontextmanager
async def unfinished_voided(env: RunEnv, live: LiveView) -> AsyncIterator[None]:
    """`void_unfinished`, then the run's end (the body) before any other stream write.

    A step still running in another branch writes after the end, and is fenced out.
    """
    async with live.attempt.stream_writes:
        await void_unfinished(env, live)
        yield


async def void_unfinished(env: RunEnv, live: durable.Attempt) -> None:
    """Reset the chunks of steps the run ends without (cancelled or failed after a takeover).

    Their attempts' workers died and no attempt of those steps runs again to reset them.
    A store failure here leaves them (the run's end, next, meets the same failure).
    """
    run = live.run
    store = env.store
    try:
        if not await store.read(stream_ops.unfinished_writers(run.run_id)):
            return
        op = stream_ops.void_unfinished(live.lease, run.run_id, now=env.clock.now())
        for name in await store.write(op):
            store.stream_bells().ring(run.run_id, name)
    except (LeaseLost, StoreError) as exc:
        log.warning("run %s: dead attempts' stream chunks not reset: %s", run.run_id, exc)


async def _append(live: LiveView, op: Any, name: str, key: str, attempt: int, last: int) -> None:
    """Commit the append `op`, whose last item is the writer's number `last`.

    If its fate is unknown (the connection was lost at its commit, and a resend stored
    nothing: see append_stream), the stream says whether its items are in.
    """
    store = live.env.store
    try:
        await store.write(op)
    except StoreError as exc:
        if not getattr(exc, "unknown", False):
            raise
        run = live.run
        lookup = stream_ops.appended(run.run_id, name, key, attempt, run.attempt, last)
        if not await store.read(lookup):
            raise


class _StepWriter:
    """Chunks of one stream written by one attempt of one step, buffered."""

    def __init__(self, live: LiveView, name: str, key: str, attempt: int) -> None:
        self.live = live
        self.name = name
        self.key = key
        self.attempt = attempt
        self.buffer: list[tuple[str, str | None]] = []
        self.stored = False  # something was appended (the first append voids dead ones)
        self.appended = 0  # items appended (they are numbered from 1)
        self.closed = False
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None  # a flush the timer started
        self._failure: BaseException | None = None

    async def add(self, kind: str, value: str | None) -> None:
        if self._failure is not None:
            raise self._failure
        if self.closed:
            raise ValueError(f"stream {self.name!r} is closed; it takes no more chunks")
        self.buffer.append((kind, value))
        if kind == "close":
            self.closed = True
            await self.flush()
        elif len(self.buffer) >= MAX_BATCH:
            await self.flush()
        elif self._timer is None:
            self._timer = self.live.env.loop.call_later(LINGER, self._linger_over)

    def _linger_over(self) -> None:
        self._timer = None
        self._flushing = self.live.env.loop.create_task(self._flush_in_background())

    async def _flush_in_background(self) -> None:
        try:
            await self.flush()
        except Exception as exc:  # the step's next write or its end raises it
            self._failure = exc

    async def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            while self.buffer:
                batch, self.buffer = self.buffer[:MAX_BATCH], self.buffer[MAX_BATCH:]
                await self._append(batch)

    async def _append(self, batch: list[tuple[str, str | None]]) -> None:
        live = self.live
        run = live.run
        async with live.attempt.stream_writes:
            if not self.stored and (run.attempt > 1 or self.attempt > 1):
                # The attempts of this step whose workers died are void first (in the
                # run's first claim, its step's first attempt has none before it).
                await _void(live, self.key, self.attempt, own=False)
            op = stream_ops.append_stream(
                live.lease,
                run.run_id,
                self.name,
                batch,
                step_key=self.key,
                attempt=self.attempt,
                claim=run.attempt,
                base=self.appended,
                now=live.env.clock.now(),
            )
            await _append(live, op, self.name, self.key, self.attempt, self.appended + len(batch))
        self.stored = True
        self.appended += len(batch)
        live.env.store.stream_bells().ring(run.run_id, self.name)

    def drop(self) -> bool:
        """Forget the buffer; True if anything of this attempt was stored."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.buffer.clear()
        return self.stored

    async def abandon(self) -> bool:
        """`drop`, once a flush under way has ended (so that a reset comes after it)."""
        self.drop()
        async with self._lock:
            return self.stored


class _WorkflowWriter:
    """Workflow code's writes to one stream: each committed at once, once per run."""

    def __init__(self, live: LiveView, name: str) -> None:
        self.live = live
        self.name = name
        self.count = 0  # writes met in this execution, replayed ones included
        self.known: int | None = None  # writes stored before this execution

    async def add(self, kind: str, value: Any) -> None:
        """Append `value` (a chunk's value, stored here; None for a close) once per run."""
        live = self.live
        run = live.run
        self.count += 1
        if self.known is None:
            self.known = await live.env.store.read(
                stream_ops.workflow_writes(run.run_id, self.name)
            )
        if self.count <= self.known:
            return  # a replay: stored when the run first came here
        await live.point(f"{stream_ops.WORKFLOW_KEY}:{self.name}#{self.count}")
        text = None
        if kind == "chunk":
            what = chunk_of(self.name)
            try:
                text = live.env.serializer.dumps(value, what=what)
            except BlobUnwritable:  # waited out; a cancel or hand back is met at the point
                text = await durable.stored(live, live.env, value, what, live.interrupts.asked)
        op = stream_ops.append_stream(
            live.lease,
            run.run_id,
            self.name,
            [(kind, text)],
            step_key=stream_ops.WORKFLOW_KEY,
            attempt=self.count,
            claim=run.attempt,
            at_seq=live.journal.next_seq - 1,
            base=0,  # one item per write: its occurrence (`attempt`) tells them apart
            now=live.env.clock.now(),
        )
        async with live.attempt.stream_writes:
            await _append(live, op, self.name, stream_ops.WORKFLOW_KEY, self.count, 1)
        live.env.store.stream_bells().ring(run.run_id, self.name)

    async def flush(self) -> None:
        """Nothing is buffered: each write commits."""


class Stream:
    """A run's named durable stream, as `cairn.stream(name)` returns it.

    `await write(value)` and `await close()` in async code; `write_sync(value)` and
    `close_sync()` in a sync step (or sync workflow). A value is anything the run's
    serializer stores (JSON values, text).
    """

    def __init__(self, live: LiveView, writer: _StepWriter | _WorkflowWriter) -> None:
        self._live = live
        self._writer = writer

    @property
    def name(self) -> str:
        """The stream's name."""
        return self._writer.name

    def write(self, value: Any) -> Any:
        """Append `value` (an awaitable; a sync workflow's call blocks instead)."""
        writer = self._writer
        if isinstance(writer, _WorkflowWriter):
            return self._live.deliver(writer.add("chunk", value))
        try:
            text = self._live.env.serializer.dumps(value, what=chunk_of(self.name))
        except BlobUnwritable:
            return self._waited(writer, value)
        return writer.add("chunk", text)

    def close(self) -> Any:
        """Mark the stream complete: its readers end (an awaitable, as `write`)."""
        return self._deliver(self._writer.add("close", None))

    def write_sync(self, value: Any) -> None:
        """`write` from a sync step's thread: returns once the chunk is buffered."""
        writer = self._writer
        if isinstance(writer, _WorkflowWriter):
            self._blocking(writer.add("chunk", value))
            return
        try:
            text = self._live.env.serializer.dumps(value, what=chunk_of(self.name))
        except BlobUnwritable:
            self._blocking(self._waited(writer, value))
            return
        self._blocking(writer.add("chunk", text))

    async def _waited(self, writer: _StepWriter, value: Any) -> None:
        """Buffer a step's chunk the blob store did not take, once it takes it (waited out).

        A cancel meanwhile stops the step's code there (Cancelled, as `check_cancelled()`
        in it does); a hand back ends the attempt.
        """
        live = self._live
        interrupts = live.interrupts

        def given_up() -> bool:
            interrupts.stop_step()
            return interrupts.handing_back

        text = await durable.stored(live, live.env, value, chunk_of(self.name), given_up)
        await writer.add("chunk", text)

    def close_sync(self) -> None:
        """`close` from a sync step's thread: returns once the stream is stored complete."""
        self._blocking(self._writer.add("close", None))

    def _deliver(self, coro: Any) -> Any:
        if isinstance(self._writer, _WorkflowWriter):
            return self._live.deliver(coro)
        return coro

    def _blocking(self, coro: Any) -> None:
        loop = self._live.env.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError(
                f"stream {self.name!r}: write_sync/close_sync are for sync steps; "
                "await write()/close() in async code"
            )
        asyncio.run_coroutine_threadsafe(coro, loop).result()


def chunk_of(name: str) -> str:
    """What a chunk of stream `name` is called in errors and in what its run waits for."""
    return f"chunk of stream {name!r}"
