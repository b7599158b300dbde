"""LiveView: a live run as the helpers that run its steps, waits, children and emits see it.

core/live_steps.py's LiveSteps is the one implementation; core/attempts.py, durable.py,
waits.py, children.py, scheduled_starts.py and the others are handed it and type it as
this Protocol, so that LiveSteps can call them without the helpers importing it back.
What is the attempt's (its threads, timers, backoffs, waits deciding, pending starts)
they reach through `attempt`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from cairn.authoring.context import RunContext
from cairn.authoring.definitions import StepDef
from cairn.core.interrupts import Interrupts
from cairn.core.journal import Journal
from cairn.core.live_attempt import LiveAttempt
from cairn.core.run_env import RunEnv
from cairn.core.run_values import RunValues
from cairn.observability.hooks import RunScope
from cairn.store.records import AttemptRecord, Lease, RunRecord, StepRecord


class LiveView(Protocol):
    """The journal cursor of one attempt of one run, and the attempt it belongs to."""

    ctx: RunContext  # the run's RunContext, made active where a step runs
    attempt: LiveAttempt
    env: RunEnv
    run: RunRecord
    lease: Lease
    journal: Journal
    interrupts: Interrupts
    flying: dict[str, tuple[str, int, float]]  # the attempt's steps in flight
    prior_attempts: dict[str, list[AttemptRecord]]
    observed: RunScope | None
    hook_tokens: set[str]
    marks: list[StepRecord]
    journaled: bool
    spawned: bool
    # The JSON serializer's own `dumps` when it alone makes stored texts (else None), and
    # the length up to which its texts are stored as they are (core/common_steps.py).
    dumps_plain: Callable[..., str] | None
    surely_inline: int

    @property
    def values(self) -> RunValues:
        """Every stored value it reads (a missing key hands the run back); made on first use."""
        ...

    @property
    def closed(self) -> bool:
        """True once the attempt is over: nothing of it may write any more."""
        ...

    def deliver(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Hand `coro` to the workflow's code (LiveAttempt.deliver)."""
        ...

    def leave(self, signal: BaseException) -> BaseException:
        """Note that the workflow unwinds with `signal`; returns it (LiveAttempt.leave)."""
        ...

    async def full_step(
        self,
        key: str,
        step: StepDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        target: str | None = None,
    ) -> Any:
        """Run step `key` by the full path: replay, interrupts, queues, every attempt."""
        ...

    async def point(self, key: str) -> None:
        """A durable point: act on a cancel, pause or hand back before new work at `key`."""
        ...

    async def record_cancel(self) -> None:
        """Journal where the cancellation was delivered (once; a no-op before delivery)."""
        ...

    def outcome(self, record: StepRecord) -> Any:
        """The recorded result of a completed operation, or its recorded failure raised."""
        ...

    async def replayed(self, record: StepRecord) -> Any:
        """`outcome`, an offloaded result's blob read in a thread (not on the loop)."""
        ...

    async def commit_step(self, record: StepRecord) -> None:
        """Commit a new outcome; Unwind if the run is not held."""
        ...

    async def commit_attempt(self, record: AttemptRecord) -> None:
        """Commit a failed attempt; Unwind if the run is not held."""
        ...

    async def store_marks(self) -> None:
        """Store the patch markers decided so far, before anything after them."""
        ...
