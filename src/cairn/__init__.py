"""cairn: a durable workflow engine for Python."""

from __future__ import annotations

from cairn.authoring.hook import Hook
from cairn.authoring.primitives import (
    check_cancelled,
    continue_as_new,
    create_hook,
    current_run,
    deprecate_patch,
    emit,
    human_task,
    patched,
    progress,
    set_columns,
    shield,
    sleep,
    sleep_until,
    start_child,
    wait_for_event,
)
from cairn.authoring.queues import Queue
from cairn.authoring.registry import Registry
from cairn.authoring.retry import Retry
from cairn.authoring.schedules import schedule
from cairn.authoring.step import run_step, step
from cairn.authoring.workflow import chain, workflow
from cairn.client import Client, ClientRunHandle
from cairn.errors import (
    CairnError,
    Cancelled,
    ChildFailed,
    ConfigError,
    DuplicateRun,
    DuplicateSchedule,
    EventTimeout,
    FatalError,
    HookNotFound,
    InvalidName,
    InvalidSubmission,
    NonDeterminismError,
    NotInRun,
    PoisonRun,
    RetryableError,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunNotFound,
    ScheduleNotFound,
    SchemaTooNew,
    SerializationError,
    StepFailed,
    StepTimeout,
    StoreError,
    StoreRefused,
    StoreUnavailable,
    TaskNotFound,
)
from cairn.models import History, HistoryEntry, RunInfo, RunPage, RunStatus, RunSummary
from cairn.runtime.engine import Engine
from cairn.runtime.handle import RunHandle
from cairn.runtime.schedules import ScheduleInfo
from cairn.runtime.tasks import TaskInfo

__version__ = "0.1.0"

__all__ = [
    "CairnError",
    "Cancelled",
    "ChildFailed",
    "Client",
    "ClientRunHandle",
    "ConfigError",
    "DuplicateRun",
    "DuplicateSchedule",
    "Engine",
    "EventTimeout",
    "FatalError",
    "History",
    "HistoryEntry",
    "Hook",
    "HookNotFound",
    "InvalidName",
    "InvalidSubmission",
    "NonDeterminismError",
    "NotInRun",
    "PoisonRun",
    "Queue",
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
    "ScheduleInfo",
    "ScheduleNotFound",
    "SchemaTooNew",
    "SerializationError",
    "StepFailed",
    "StepTimeout",
    "StoreError",
    "StoreRefused",
    "StoreUnavailable",
    "TaskInfo",
    "TaskNotFound",
    "chain",
    "check_cancelled",
    "continue_as_new",
    "create_hook",
    "current_run",
    "deprecate_patch",
    "emit",
    "human_task",
    "patched",
    "progress",
    "run_step",
    "schedule",
    "set_columns",
    "shield",
    "sleep",
    "sleep_until",
    "start_child",
    "step",
    "wait_for_event",
    "workflow",
]
