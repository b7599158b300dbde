"""The one storage interface: `Backend`, plus the method groups not yet made operations.

See store/programs/base.py for operations and docs/explanation/architecture.md for the
groups that remain.

Writes that the engine acknowledges to a workflow (a step outcome, a finished run) are
committed before the call returns. Backends may share one commit among concurrent callers.
"""

from __future__ import annotations

from typing import Protocol

from cairn.store.protocol.backend import Backend
from cairn.store.protocol.journal import StepTransaction
from cairn.store.protocol.lifecycle import Health
from cairn.store.protocol.workers import SideChannel, WorkerStore

__all__ = ["Backend", "Health", "LeaseLost", "SideChannel", "StepTransaction", "Store"]


class LeaseLost(Exception):
    """The run is no longer held by this lease (taken over or claimed again); nothing written."""


class Store(
    Backend,
    WorkerStore,
    Protocol,
):
    """Persistence for runs, their journals, and the workers that execute them."""
