"""RunEnv: what executing a run needs from the process around it (engine or worker)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from cairn import config
from cairn.authoring.registry import Registry
from cairn.clock import Clock
from cairn.core.futile_wakes import FutileWakes
from cairn.core.tenure import Tenure
from cairn.observability.hooks import Observer
from cairn.serialization import Serializer
from cairn.store.protocol import Store
from cairn.store.records import StepRecord


@dataclass(slots=True)
class RunEnv:
    """What executing a run needs from the process around it."""

    store: Store
    clock: Clock
    serializer: Serializer
    registry: Registry
    owner: str
    loop: asyncio.AbstractEventLoop
    threads: ThreadPoolExecutor
    workflow_threads: ThreadPoolExecutor
    # Called when this run creates work for workers (a child run), to look for it now.
    on_new_work: Callable[[], None] | None = None
    # Called after each step outcome commits (cairn.testing's crash injection).
    commit_hook: Callable[[StepRecord], None] | None = None
    # Called just before a transaction step's checkpoint commits with the user's writes
    # (crash tests stop a process there: core/transaction_steps.py).
    before_commit: Callable[[StepRecord], None] | None = None
    # How long this worker may trust it still holds its runs (None: always; tests).
    tenure: Tenure | None = None
    # Metrics and traces (cairn.observability); None: nothing is observed, at no cost.
    observer: Observer | None = None
    # This process's count of each run's wake-ups without progress (None: not counted).
    futile: FutileWakes | None = None
    # True on the engine of transient runs, whose store lives in this process's memory:
    # only there may a run start a transient child (see runtime/transient.py).
    ephemeral: bool = False
    # The application's databases and tag provider, for the ready steps (cairn.steps).
    resources: config.Resources = field(default_factory=config.Resources)
    # How large a value and how long a history may grow (see cairn/limits.py).
    limits: config.Limits = field(default_factory=config.Limits)
