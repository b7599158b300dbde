"""The AWS testing SDK's local runner: a handler against a simulated checkpoint service.

Each test module starts with `needs_sdk()`: without the SDK (the dev extra has it) the
module is skipped, saying so; this file imports it only inside its fixtures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest


def needs_sdk() -> None:
    """Skip the calling test module, naming what to install, when the SDK is missing."""
    pytest.importorskip(
        "aws_durable_execution_sdk_python_testing",
        reason="cairn.aws's tests need pip install aws-durable-execution-sdk-python-testing "
        "(in the dev extra)",
    )


@pytest.fixture
def fresh_counters() -> Iterator[None]:
    """The flows' counters and switches, cleared (for every test that runs a handler)."""
    from . import flows

    flows.calls.clear()
    flows.failures.clear()
    flows.crash_after.clear()
    yield


@pytest.fixture
def lambda_runner(
    monkeypatch: pytest.MonkeyPatch, fresh_counters: None
) -> Iterator[Callable[[Any], Any]]:
    """`lambda_runner(handler)`: a local runner (time skipped) for `handler`, closed after."""
    from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner
    from aws_durable_execution_sdk_python_testing.executor import Executor

    # A failed invocation is invoked again after this many real seconds (5): no need here.
    monkeypatch.setattr(Executor, "RETRY_BACKOFF_SECONDS", 0)
    made: list[Any] = []

    def make(handler: Any) -> Any:
        runner = DurableFunctionTestRunner(handler=handler)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.close()
        close_scheduler_loop(runner)


def close_scheduler_loop(runner: Any) -> None:
    """Close the event loop the runner's scheduler leaves open (testing SDK 1.4).

    Its `close()` stops the loop but never closes it: the ResourceWarning of each one
    would fail whichever test the garbage collector happens to run in. Private parts of
    the SDK, so checked: a release that renames them fails here, not at random.
    """
    loop = runner._scheduler._loop
    assert not loop.is_running(), "the testing SDK's scheduler loop still runs after close()"
    loop.close()


def result_of(outcome: Any) -> Any:
    """The handler's result, as JSON data."""
    assert outcome.error is None, outcome.error
    return json.loads(outcome.result)
