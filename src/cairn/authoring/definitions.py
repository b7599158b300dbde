"""What the registry holds and a run calls: StepDef and WorkflowDef.

The decorators that make and register them sit above the registry (`@cairn.step` in
authoring/step.py, `@cairn.workflow` in authoring/workflow.py); these classes register
nothing, so the registry (authoring/registry.py) holds them by their types and imports
no decorator. Calling one inside a run asks the run's context (authoring/context.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

from cairn.authoring import context
from cairn.authoring.retry import Retry
from cairn.errors import NotInRun

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(eq=False)
class StepDef(Generic[P, R]):
    """A registered step. Calling it inside a run executes it durably."""

    name: str
    fn: Callable[P, R]
    retry: Retry
    timeout: float | None
    is_async: bool
    # False: the run's history keeps no input for this step (it takes secrets, say).
    keep_input: bool = True
    # A step queue: its attempts execute on the workers serving it, not where the run is
    # (see core/remote_steps.py). Not a workflow queue (cairn.Queue): no limits apply.
    queue: str | None = None
    # "process": each attempt runs in a child process, killed at the timeout (sync steps
    # only; see core/isolated_steps.py). "thread": in a worker thread, as by default.
    isolation: str = "thread"
    # What its result is called in a SerializationError: made once, not at every call.
    result_what: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.result_what = f"result of step {self.name!r}"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the step: durably inside a run, as a plain call outside one (or in a step)."""
        if context.step_frame() is None:  # context.active(), inlined: called for every step
            ctx = context.in_run()
            if ctx is not None:
                result: R = ctx.call_step(self, args, kwargs)
                return result
        return self.fn(*args, **kwargs)


# Executes a transient workflow called outside any run (`await quick(...)`) and returns
# its result. Installed by runtime/direct_calls.py: this layer cannot import the runtime.
TransientRunner = Callable[["WorkflowDef[Any, Any]", tuple[Any, ...], dict[str, Any]], Any]
_transient_runner: TransientRunner | None = None


def install_transient_runner(runner: TransientRunner) -> None:
    """Set how a transient workflow called outside a run executes (runtime/direct_calls.py)."""
    global _transient_runner
    _transient_runner = runner


@dataclass(eq=False)
class WorkflowDef(Generic[P, R]):
    """A registered workflow.

    Start it with `engine.start`; inside a run, calling it starts a child run and waits
    for its result.
    """

    name: str
    fn: Callable[P, R]
    queue: str | None
    on: str | None
    timeout: float | None
    version: str | None
    max_recoveries: int
    is_async: bool
    # False: a transient workflow (pyworkflow's `durable=False`): its runs execute in the
    # process that starts them and keep their history in memory only.
    durable: bool = True
    # True: step names are cache keys (Cloudflare's rule, declared by WorkflowEntrypoint):
    # a durable call whose key the history lacks runs and is recorded, where a strict
    # workflow fails with NonDeterminismError; `cairn check --db` reports such runs.
    names_are_cache_keys: bool = False

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Inside a run: start this workflow as a child run and wait for its result.

        Outside a run, a transient workflow (durable=False) runs now, in this process,
        and the call returns its result (awaitable when the workflow is async); a durable
        one raises NotInRun.
        """
        if context.in_run() is None:
            if not self.durable and _transient_runner is not None:
                result: R = _transient_runner(self, args, kwargs)
                return result
            raise NotInRun(
                f"workflow {self.name!r} was called outside a run; "
                f"start it with `await engine.start({self.fn.__name__}, ...)`"
            )
        ctx = context.current(f"workflow {self.name!r} (a child run)")
        child: R = ctx.call_child(self, args, kwargs)
        return child


def definition_of(target: Any) -> WorkflowDef[Any, Any] | None:
    """The workflow `target` is: a WorkflowDef itself, or what one is declared by.

    A `cairn.WorkflowEntrypoint` subclass (and anything else that declares a workflow)
    carries its definition as `__cairn_workflow__`. None for anything else.
    """
    if isinstance(target, WorkflowDef):
        return target
    found = getattr(target, "__cairn_workflow__", None)
    return found if isinstance(found, WorkflowDef) else None
