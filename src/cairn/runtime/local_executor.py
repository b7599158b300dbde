"""This process's worker, as RunControl sees it: a slot held for a run started here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cairn.store.records import RunRecord


@dataclass(slots=True)  # not frozen: one per run started here; treat as read-only
class Reservation:
    """A slot held for a run started in this process.

    `owner` is stored with the run; `epoch` is the worker's tenure epoch before the run
    was stored (see core/tenure.py).
    """

    owner: str
    epoch: int


class LocalExecutor(Protocol):
    """A worker in this process that can execute a run the moment it is started."""

    def reserve(self) -> Reservation | None:
        """Hold a slot for a run about to be stored; None if full or stopping."""
        ...

    def release(self, reservation: Reservation) -> None:
        """Give back a slot reserved for a run that was not created."""
        ...

    def launch(self, run: RunRecord, reservation: Reservation) -> None:
        """Execute a run stored with a reserved slot."""
        ...

    def wake(self) -> None:
        """Look for claimable runs now (a waiting run just received a message)."""
        ...

    def deliver(self, run_id: str, control: str | None) -> None:
        """Pass a cancel/pause/resume request to a run executing in this process."""
        ...

    def executing(self, run_id: str) -> bool:
        """True while the run executes in this process (its end will be announced here)."""
        ...
