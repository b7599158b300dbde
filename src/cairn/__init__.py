"""cairn: a durable workflow engine for Python."""

from __future__ import annotations

from cairn.authoring.primitives import check_cancelled, current_run, sleep, sleep_until
from cairn.authoring.registry import Registry
from cairn.authoring.retry import Retry
from cairn.authoring.step import run_step, step
from cairn.authoring.workflow import chain, workflow
from cairn.errors import (
    CairnError,
    Cancelled,
    ChildFailed,
    ConfigError,
    DuplicateRun,
    EventTimeout,
    FatalError,
    HookNotFound,
    InvalidSubmission,
    NonDeterminismError,
    NotInRun,
    PoisonRun,
    RetryableError,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunNotFound,
    SchemaTooNew,
    SerializationError,
    StepFailed,
    StepTimeout,
    StoreError,
    TaskNotFound,
)
from cairn.models import HistoryEntry, RunInfo, RunPage, RunStatus, RunSummary
from cairn.runtime.engine import Engine
from cairn.runtime.handle import RunHandle

__version__ = "0.1.0"

__all__ = [
    "CairnError",
    "Cancelled",
    "ChildFailed",
    "ConfigError",
    "DuplicateRun",
    "Engine",
    "EventTimeout",
    "FatalError",
    "HistoryEntry",
    "HookNotFound",
    "InvalidSubmission",
    "NonDeterminismError",
    "NotInRun",
    "PoisonRun",
    "Registry",
    "Retry",
    "RetryableError",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunHandle",
    "RunInfo",
    "RunNotFound",
    "RunPage",
    "RunStatus",
    "RunSummary",
    "SchemaTooNew",
    "SerializationError",
    "StepFailed",
    "StepTimeout",
    "StoreError",
    "TaskNotFound",
    "chain",
    "check_cancelled",
    "current_run",
    "run_step",
    "sleep",
    "sleep_until",
    "step",
    "workflow",
]
