"""Where every write of a PostgresStore starts: its shape picks its path, here and only here.

A caller says how many rounds its program needs, if it knows (`Rounds`); the program's
first request then decides:

- alone: a program that may need a second round runs in its own explicit transaction
  (`connections.run_alone`), as does one whose first request is native SQL;
- lone: one row-count statement with no wake-up to send, while nothing is queued and a
  lane is free, commits at once through libpq (`Writer.lone`, `fast_path`): the whole cost
  of a step of a run alone;
- group commit: any other one-round write is a shot (`Writer.commit`), committed at once on
  a free lane, else in the next batch with everything queued beside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from cairn.store._wakeups import WakeSignal
from cairn.store.postgres import connections, dialect, write_shapes
from cairn.store.postgres.connections import Db
from cairn.store.postgres.group_commit import LOST, Writer
from cairn.store.postgres.shots import Shot
from cairn.store.postgres.write_shapes import Make
from cairn.store.programs.base import Program, Sql

T = TypeVar("T")

Rounds = Literal["many", "one", "unknown"]
"""What the caller knows of a program: it may need several rounds ("many"), it is one
round ("one"), or it does not know ("unknown": a trial on throw-away copies decides)."""


class Writes:
    """The one entry of a PostgresStore's writes (module docstring)."""

    def __init__(
        self, db: Db, writer: Writer, bulk: dict[str, dialect.Bulk], signal: WakeSignal
    ) -> None:
        self._db = db
        self._writer = writer
        self._bulk = bulk
        self._signal = signal

    async def write(self, make: Make, wake: float | None = None, *, rounds: Rounds) -> Any:
        """Commit the program `make()` builds by its path; its outcome (or its exception).

        `wake`: after the commit, runs may be claimable at that time (0.0: now).
        """
        if rounds == "many":
            return await self.alone(make, wake)
        started = None
        ambiguous = False
        request: connections.Request | None
        if rounds == "unknown":
            request = write_shapes.one_round(make)
        elif (started := write_shapes.first_request(make)) is None:
            request = None
        else:
            request = started[1]
            lone = write_shapes.lone_statement(request) if wake is None else None
            # The writer answers None when it is busy or has no connection yet, and LOST
            # when the connection died once the statement was sent: the program (still
            # waiting for its first answer) then goes the group-commit way.
            if lone is not None and (count := await self._writer.lone(*lone)) is not None:
                if count == LOST:
                    ambiguous = True  # it may have committed before the reply was lost
                else:
                    done = write_shapes.outcome(started[0], count)
                    if isinstance(done, BaseException):
                        raise done
                    return done
        if request is None:
            return await self.alone(make, wake)
        bulk = None
        if isinstance(request, Sql) and not request.lock:
            bulk = self._bulk.get(request.text)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        params = request.params if isinstance(request, Sql) else ()
        return await self._writer.commit(
            Shot(make, future, wake, bulk, params, started=started, ambiguous=ambiguous)
        )

    async def alone(self, make: Callable[[], connections.Program[T]], wake: float | None) -> T:
        """Run the program alone in its own transaction, then pass on its wake-up."""
        outcome = await connections.run_alone(self._db, make, wake)
        if wake is not None:
            self._signal.at(wake)
        return outcome

    async def started_alone(
        self, program: Program[T], make: Callable[[], Program[T]], wake: float | None
    ) -> T:
        """`alone` for a program already started by its caller (it read its name)."""
        return await self.alone(write_shapes.first_then(program, make), wake)
