"""The side channel: a connection of its own for a heartbeat thread (see Backend)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from cairn.store.records import (
    Beat,
    WorkerRecord,
)


class SideChannel(Protocol):
    """A connection of its own, for one thread: heartbeats that go on when the loop is busy.

    Every method blocks the calling thread (never an event loop) and may raise StoreError.
    """

    def beat(
        self,
        worker: WorkerRecord,
        let_go: Sequence[tuple[str, int]] = (),
        stopped: Callable[[], bool] | None = None,
    ) -> Beat:
        """Heartbeat `worker` by the database's clock (see `workers.beat`, `stopped` too)."""
        ...

    def close(self) -> None:
        """Disconnect."""
        ...
