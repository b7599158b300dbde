"""The public surface of `cairn`, pinned: a name added or removed must change this file."""

from __future__ import annotations

import inspect
import types
from pathlib import Path

import cairn

PUBLIC = [
    "CairnError",
    "Cancelled",
    "ChildFailed",
    "Client",
    "ClientRunHandle",
    "ConfigError",
    "DuplicateRun",
    "DuplicateSchedule",
    "Engine",
    "EventDelivery",
    "EventTimeout",
    "FatalError",
    "History",
    "HistoryEntry",
    "Hook",
    "HookNotFound",
    "InvalidArguments",
    "InvalidName",
    "InvalidSubmission",
    "InvalidValue",
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
    "Step",
    "StepFailed",
    "StepInfo",
    "StepTimeout",
    "StoreError",
    "StoreRefused",
    "StoreUnavailable",
    "StreamReset",
    "TaskInfo",
    "TaskNotFound",
    "TransientWorkflow",
    "UnknownWorkflow",
    "Workflow",
    "WorkflowEntrypoint",
    "WorkflowEvent",
    "WorkflowStep",
    "chain",
    "check_cancelled",
    "continue_as_new",
    "create_hook",
    "current_run",
    "current_step",
    "deprecate_patch",
    "emit",
    "human_task",
    "patched",
    "progress",
    "receive",
    "run_step",
    "schedule",
    "schedule_workflow",
    "set_columns",
    "shield",
    "sleep",
    "sleep_until",
    "start_child",
    "step",
    "stream",
    "transaction",
    "wait_for_event",
    "workflow",
]

# API.md §1, §2 and §4 name these; they must stay exported whatever else changes.
CONTRACT = {
    "workflow", "step", "run_step", "chain", "Retry", "NotInRun", "SerializationError",
    "NonDeterminismError", "RetryableError", "FatalError", "StepFailed", "StepTimeout",
    "RunFailed", "PoisonRun", "CairnError", "Cancelled", "Engine", "RunHandle", "RunStatus",
    "RunSummary", "RunPage", "HistoryEntry", "RunNotFound", "RunFinished", "RunCancelled",
    "current_run", "Client", "DuplicateRun", "InvalidSubmission", "schedule", "emit",
    "transaction",
}  # fmt: skip


def test_public_api__all_is_pinned() -> None:
    assert cairn.__all__ == PUBLIC


def test_public_api__all_is_sorted_and_unique() -> None:
    assert cairn.__all__ == sorted(set(cairn.__all__))


def test_public_api__every_name_resolves() -> None:
    missing = [name for name in cairn.__all__ if not hasattr(cairn, name)]
    assert missing == []


def test_public_api__nothing_public_outside_all() -> None:
    extra = {
        name
        for name, value in vars(cairn).items()
        if not name.startswith("_")
        and name not in cairn.__all__
        and not isinstance(value, types.ModuleType)
        and name != "annotations"  # from __future__ import annotations
    }
    assert extra == set()


def test_public_api__contract_names_are_exported() -> None:
    assert CONTRACT <= set(cairn.__all__)


def test_public_api__public_names_are_documented() -> None:
    undocumented = [name for name in cairn.__all__ if not inspect.getdoc(getattr(cairn, name))]
    assert undocumented == []


def test_public_api__version() -> None:
    assert isinstance(cairn.__version__, str) and cairn.__version__.count(".") == 2


OBSERVABILITY = ["JsonFormatter", "Metrics", "RunContextFilter", "Tracing", "metrics_app"]


def test_public_api__observability_all_is_pinned() -> None:
    import cairn.observability

    assert cairn.observability.__all__ == OBSERVABILITY
    assert all(inspect.getdoc(getattr(cairn.observability, n)) for n in OBSERVABILITY)


STEPS = [
    "DatabaseError",
    "DatabaseUnavailable",
    "HttpResponse",
    "HttpStatusError",
    "HttpUnavailable",
    "InvalidSQL",
    "NotYet",
    "OpcUaProvider",
    "TagError",
    "TagProvider",
    "TagUnavailable",
    "WaitTimeout",
    "db",
    "http",
    "sleep",
    "tags",
    "wait",
]
STEP_FUNCTIONS = {
    "http": ["delete", "get", "head", "patch", "post", "put", "request"],
    "db": ["dispose", "query", "update"],
    "tags": ["read", "write", "write_confirm"],
    "wait": ["until", "until_tag_equals"],
    "sleep": ["sleep_chunked"],
}


def test_public_api__steps_all_is_pinned() -> None:
    import cairn.steps

    assert cairn.steps.__all__ == STEPS
    assert all(inspect.getdoc(getattr(cairn.steps, name)) for name in STEPS)
    for module, names in STEP_FUNCTIONS.items():
        found = getattr(cairn.steps, module)
        assert all(inspect.getdoc(getattr(found, name)) for name in names), module


TESTING = ["SimulatedCrash", "TestEngine", "replay"]


def test_public_api__testing_all_is_pinned() -> None:
    import cairn.testing

    assert cairn.testing.__all__ == TESTING
    assert all(inspect.getdoc(getattr(cairn.testing, name)) for name in TESTING)


def test_public_api__contrib_pydantic_ai_all_is_pinned() -> None:
    import cairn.contrib.pydantic_ai as agents

    assert agents.__all__ == ["CairnAgent", "workflow_tool"]
    assert all(inspect.getdoc(getattr(agents, name)) for name in agents.__all__)
    documented = (Path(__file__).resolve().parents[1] / "docs/reference/api.md").read_text()
    assert all(f"`{name}" in documented for name in agents.__all__)


def test_public_api__codecs_all_is_pinned() -> None:
    import cairn.codecs as codecs

    assert codecs.__all__ == [
        "Codec",
        "Encrypted",
        "KeyUnavailable",
        "coding",
        "from_env",
        "new_key",
        "parse",
    ]
    assert all(inspect.getdoc(getattr(codecs, name)) for name in codecs.__all__)
    documented = (Path(__file__).resolve().parents[1] / "docs/reference/api.md").read_text()
    assert all(f"`{name}" in documented for name in codecs.__all__)
    assert cairn.codecs is codecs  # `import cairn` is enough for cairn.codecs.Encrypted
