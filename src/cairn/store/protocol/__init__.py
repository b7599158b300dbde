"""The one storage interface: `Backend`, what a database provides to run operations.

Every store operation is a program (store/programs/, see base.py) that callers hand to
`store.write` or `store.read`; a backend runs them, waits for work, heartbeats on a side
channel and opens step transactions (backend.py).

Writes that the engine acknowledges to a workflow (a step outcome, a finished run) are
committed before the call returns. Backends may share one commit among concurrent callers.
"""

from __future__ import annotations

from typing import Protocol

from cairn.store.protocol.backend import Backend
from cairn.store.protocol.journal import StepTransaction
from cairn.store.protocol.lifecycle import Health
from cairn.store.protocol.workers import SideChannel

__all__ = ["Backend", "Health", "LeaseLost", "SideChannel", "StepTransaction", "Store"]


class LeaseLost(Exception):
    """The run is no longer held by this lease (taken over or claimed again); nothing written."""


class Store(Backend, Protocol):
    """What the engine holds: a backend (persistence for runs, journals and workers)."""
