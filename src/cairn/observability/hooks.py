"""The hooks the engine calls while observing: an Observer, and the scopes it hands out.

An engine observes only when given one (metrics, tracing, or both); otherwise each hook
the core holds is None and the core does no work for it. Hooks are told facts only and
must not raise; they never see a step that is replayed from the journal.
"""

from __future__ import annotations

from typing import Protocol

from cairn.store.records import RunRecord


class StepScope(Protocol):
    """One attempt of a step's own code; exactly one of its methods is called, once."""

    def succeeded(self) -> None:
        """The attempt returned (its result is not yet committed)."""

    def failed(self, exc: BaseException, timed_out: bool) -> None:
        """The attempt raised `exc` (or ran past its timeout: `timed_out`)."""

    def interrupted(self) -> None:
        """The attempt was abandoned while running (the engine closed, the run moved)."""


class RunScope(Protocol):
    """One attempt of a run, from the moment it executes to how it ended."""

    def step(self, key: str, name: str, attempt: int) -> StepScope:
        """A new attempt of step `key` begins (called in the context its code runs in)."""
        ...

    def parked(self, status: str, wake_at: float | None, waiting_for: str | None) -> None:
        """The run parks: SLEEPING, WAITING or PAUSED, until `wake_at` or `waiting_for`."""

    def futile(self, wakes: int) -> None:
        """The run parks again without progress: its `wakes`-th such wake-up in a minute."""

    def ended(self, status: str | None, error: str | None) -> None:
        """The attempt is over: a run status (None: handed back) and the stored error."""


class Observer(Protocol):
    """What an engine reports to: metrics, traces, or several at once (`Observers`)."""

    def run(self, run: RunRecord, first: bool) -> RunScope:
        """An attempt of `run` begins executing here; `first`: the run's very first one.

        The attempt of its first claim (fence 1), even if a worker without the key hands
        it back and the run's `attempt` is taken back: no later attempt is first.

        Called in the context the workflow's code runs in, before it runs.
        """
        ...

    def queued_step(
        self,
        run: RunRecord,
        key: str,
        name: str,
        attempt: int,
        queue: str,
        *,
        sent_in: str | None = None,
    ) -> StepScope:
        """An attempt of step `key` of `run`, sent to step queue `queue`, executes here.

        The attempt a worker serving a step queue claimed (its run waits elsewhere);
        called in the context the step's code runs in, before it runs. `sent_in`: the
        trace context of the run's attempt that sent it, as stored (None: untraced).
        """
        ...

    def claimed(self, runs: list[RunRecord], due: dict[str, float], now: float) -> None:
        """This worker claimed `runs` at `now`; `due` says when each became due."""

    def fired(self, workflow: str, lag: float) -> None:
        """This engine fired a schedule tick of `workflow`, `lag` seconds after its time."""

    def poisoned(self, workflow: str) -> None:
        """This worker ended a run of `workflow` FAILED, past its max_recoveries, unexecuted."""


class Observers:
    """Several observers as one."""

    def __init__(self, observers: list[Observer]) -> None:
        self.observers = observers

    def run(self, run: RunRecord, first: bool) -> RunScope:
        """Every observer's scope, as one."""
        return _RunScopes([o.run(run, first) for o in self.observers])

    def queued_step(
        self,
        run: RunRecord,
        key: str,
        name: str,
        attempt: int,
        queue: str,
        *,
        sent_in: str | None = None,
    ) -> StepScope:
        """Every observer's scope, as one."""
        return _StepScopes(
            [o.queued_step(run, key, name, attempt, queue, sent_in=sent_in) for o in self.observers]
        )

    def claimed(self, runs: list[RunRecord], due: dict[str, float], now: float) -> None:
        """Tell every observer."""
        for observer in self.observers:
            observer.claimed(runs, due, now)

    def fired(self, workflow: str, lag: float) -> None:
        """Tell every observer."""
        for observer in self.observers:
            observer.fired(workflow, lag)

    def poisoned(self, workflow: str) -> None:
        """Tell every observer."""
        for observer in self.observers:
            observer.poisoned(workflow)


def combine(observers: list[Observer]) -> Observer | None:
    """None for none, the observer itself for one, else `Observers`."""
    if not observers:
        return None
    if len(observers) == 1:
        return observers[0]
    return Observers(observers)


class _RunScopes:
    __slots__ = ("scopes",)

    def __init__(self, scopes: list[RunScope]) -> None:
        self.scopes = scopes

    def step(self, key: str, name: str, attempt: int) -> StepScope:
        return _StepScopes([s.step(key, name, attempt) for s in self.scopes])

    def parked(self, status: str, wake_at: float | None, waiting_for: str | None) -> None:
        for scope in self.scopes:
            scope.parked(status, wake_at, waiting_for)

    def futile(self, wakes: int) -> None:
        for scope in self.scopes:
            scope.futile(wakes)

    def ended(self, status: str | None, error: str | None) -> None:
        # In reverse: a scope that set a context (a span) restores it last-in, first-out.
        for scope in reversed(self.scopes):
            scope.ended(status, error)


class _StepScopes:
    __slots__ = ("scopes",)

    def __init__(self, scopes: list[StepScope]) -> None:
        self.scopes = scopes

    def succeeded(self) -> None:
        for scope in reversed(self.scopes):
            scope.succeeded()

    def failed(self, exc: BaseException, timed_out: bool) -> None:
        for scope in reversed(self.scopes):
            scope.failed(exc, timed_out)

    def interrupted(self) -> None:
        for scope in reversed(self.scopes):
            scope.interrupted()
