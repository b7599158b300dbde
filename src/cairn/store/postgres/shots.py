"""A shot: one queued one-round write of PostgreSQL's group commit (see group_commit).

A batch whose connection was lost may have committed before its reply was lost. Its
shots are sent again and are then "ambiguous": success is definitive (a fenced write that
succeeds now cannot have succeeded before), but a failure may only mean that the first
send did it, so it is reported as StoreUnavailable with `unknown` set, never as LeaseLost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cairn.errors import StoreUnavailable
from cairn.store import waits
from cairn.store.postgres import dialect, write_shapes
from cairn.store.postgres.connections import Program, Request


@dataclass(eq=False, slots=True)
class Shot:
    """A queued one-round write; `make` builds a fresh program for each attempt."""

    make: write_shapes.Make
    future: asyncio.Future[Any]
    wake: float | None
    bulk: dialect.Bulk | None = None
    params: Sequence[Any] = ()
    done: bool = False  # settled, or withdrawn: nothing more is done with it
    queued: bool = False  # in the writer's queue, not taken by a lane yet
    sending: bool = False  # on a connection now: its caller can no longer take it back
    started: tuple[Program[Any], Request] | None = None  # made already, for the 1st attempt
    ambiguous: bool = False  # sent before on a connection that was lost (module docstring)
    # The run (id, fence) it is written for, if any: its wait counts as that run's.
    run: tuple[str, int] | None = field(default_factory=waits.on_behalf_of.get)

    def begin(self) -> tuple[Program[Any], Request]:
        """A program for this attempt, and its (first and only) request."""
        if self.started is not None:
            started, self.started = self.started, None
            return started
        program = self.make()
        return program, next(program)

    def settle(self, outcome: Any) -> None:
        """End this write with `outcome` (a result or an exception), once."""
        self.done = True
        if self.future.done():
            return
        if self.ambiguous and isinstance(outcome, Exception):
            if not isinstance(outcome, StoreUnavailable):
                unknown = StoreUnavailable(
                    f"a write was sent again after its connection was lost, and failed "
                    f"({type(outcome).__name__}: {outcome}): the first may have committed",
                    unknown=True,
                )
                unknown.__cause__ = outcome
                outcome = unknown
            else:
                outcome.unknown = True
        if isinstance(outcome, BaseException):
            self.future.set_exception(outcome)
        else:
            self.future.set_result(outcome)
