"""RunHandle: a reference to one run, from any process."""

from __future__ import annotations

from typing import Any, Protocol

from cairn.models import EventDelivery, RunStatus, RunSummary


class RunOperations(Protocol):
    """What a handle asks of RunControl; its verbs' module makes handles without importing it."""

    async def describe(self, run_id: str) -> RunSummary:
        """RunControl.describe."""
        ...

    async def status(self, run_id: str) -> RunStatus:
        """RunControl.status."""
        ...

    async def result(self, run_id: str, *, timeout: float | None = None) -> Any:
        """RunControl.result."""
        ...

    async def cancel(self, run_id: str) -> RunStatus:
        """RunControl.cancel."""
        ...

    async def pause(self, run_id: str) -> RunStatus:
        """RunControl.pause."""
        ...

    async def resume(self, run_id: str) -> RunStatus:
        """RunControl.resume."""
        ...

    async def send_event(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """RunControl.send_event."""
        ...


class RunHandle:
    """A run by id. Cheap to create; every method asks the database."""

    __slots__ = ("_control", "run_id")

    def __init__(self, control: RunOperations, run_id: str) -> None:
        self._control = control
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunHandle) and other.run_id == self.run_id

    def __hash__(self) -> int:
        return hash(self.run_id)

    async def describe(self) -> RunSummary:
        """The run's summary: status, version, `continued_from` / `continued_to`, ..."""
        return await self._control.describe(self.run_id)

    async def status(self) -> RunStatus:
        """The run's current status."""
        return await self._control.status(self.run_id)

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to finish and return its result.

        Raises:
            RunFailed: the run ended FAILED.
            RunCancelled: the run ended CANCELLED.
            TimeoutError: `timeout` seconds passed first.
        """
        return await self._control.result(self.run_id, timeout=timeout)

    async def cancel(self) -> RunStatus:
        """Cancel this run."""
        return await self._control.cancel(self.run_id)

    async def pause(self) -> RunStatus:
        """Pause this run at its next durable point."""
        return await self._control.pause(self.run_id)

    async def resume(self) -> RunStatus:
        """Resume this run if paused."""
        return await self._control.resume(self.run_id)

    async def send_event(
        self, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Send event `name` to this run (see `Engine.send_event`)."""
        return await self._control.send_event(
            self.run_id, name, payload, idempotency_key=idempotency_key
        )
