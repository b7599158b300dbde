"""cairn.aws.handler on the AWS testing SDK's local runner: steps, retries, waits, children."""

from __future__ import annotations

import json
import os
from datetime import timedelta

from .conftest import needs_sdk

needs_sdk()

import cairn
import cairn.aws
from cairn.testing import TestEngine

from . import flows
from .conftest import result_of

ORDER = json.dumps({"order": "o-1"})


def test_handler__runs_the_workflow_with_the_event_as_its_keyword_arguments(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.process_order))
    outcome = runner.run(input=ORDER, execution_timeout=60)
    result = result_of(outcome)
    assert result["order"] == "o-1" and result["cents"] == 1250
    assert result["receipt"]["__cairn__"] == "dataclass"  # rich values in cairn's tagged JSON
    names = [op.name for op in outcome.operations]
    assert names == ["aws_flows.reserve", "aws_flows.charge", "sleep"]


def test_steps__a_crashed_invocation_replays_completed_steps_without_running_them(
    lambda_runner,
):
    flows.crash_after.add("reserve")  # the first invocation dies after the step completes
    runner = lambda_runner(cairn.aws.handler(flows.process_order))
    outcome = runner.run(input=ORDER, execution_timeout=60)
    assert result_of(outcome)["cents"] == 1250  # the checkpointed result, replayed
    assert flows.calls["reserve"] == 1
    assert not flows.crash_after  # the crash did happen


def test_retries__a_failed_attempt_is_retried_as_the_steps_retry_says(lambda_runner):
    flows.failures["charge"] = 2  # Retry(max_attempts=3): the third attempt succeeds
    runner = lambda_runner(cairn.aws.handler(flows.process_order))
    outcome = runner.run(input=ORDER, execution_timeout=60)
    assert result_of(outcome)["cents"] == 1250
    assert flows.calls["charge"] == 3 and flows.calls["reserve"] == 1
    charge = outcome.get_step("aws_flows.charge")
    assert charge.attempt == 3


def test_retries__exhausted_the_workflow_gets_the_steps_own_exception(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.gives_up))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert result_of(outcome) == "aws_flows.flaky failed after 2 attempts: still broken"
    assert flows.calls["flaky"] == 2  # retries=2: two attempts in all
    # The service's history names the step's own error.
    assert outcome.get_step("aws_flows.flaky").error.message == "builtins.ValueError: still broken"


def test_sleep__an_hour_is_the_services_wait_skipped_by_the_runner(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.process_order))
    outcome = runner.run(input=ORDER, execution_timeout=60)  # an hour would time it out
    wait = outcome.get_wait("sleep")
    assert wait.scheduled_end_timestamp - wait.start_timestamp == timedelta(hours=1)
    assert str(wait.status.value) == "SUCCEEDED"


def test_callbacks__a_hook_and_an_event_completed_from_outside(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.approval))
    arn = runner.run_async(input=json.dumps({"amount": 300}), execution_timeout=60)
    token = runner.wait_for_callback(arn, name="hook:manager", timeout=30)
    runner.send_callback_success(token, json.dumps({"approved": True}).encode())
    note = runner.wait_for_callback(arn, name="event:note", timeout=30)
    runner.send_callback_success(note, json.dumps("ship it").encode())
    outcome = runner.wait_for_result(arn, timeout=30)
    assert result_of(outcome) == {"amount": 300, "decision": {"approved": True}, "note": "ship it"}
    assert flows.calls["notify"] == 1  # the step that handed out the token ran once


def test_child__a_child_workflow_runs_in_a_child_context(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.parent))
    outcome = runner.run(input=json.dumps({"n": 2}), execution_timeout=60)
    assert result_of(outcome) == [4, 5, 6]
    child = outcome.get_context("aws_flows.double")
    assert [op.name for op in child.child_operations] == ["aws_flows.add"]
    # asyncio.gather's branches took their turns, in the order given.
    assert [op.name for op in outcome.operations][1:] == ["aws_flows.add", "aws_flows.add"]


async def test_same_module__runs_unchanged_on_cairns_engine(lambda_runner):
    async with TestEngine() as env:
        run = await env.start(flows.process_order, "o-1")
        await env.advance("1h")
        on_engine = await run.result(timeout=10)
    outcome = lambda_runner(cairn.aws.handler(flows.process_order)).run(
        input=ORDER, execution_timeout=60
    )
    on_lambda = result_of(outcome)
    assert on_engine == {"order": "o-1", "cents": 1250, "receipt": flows.Receipt("o-1", 1250)}
    assert on_lambda["order"] == on_engine["order"] and on_lambda["cents"] == on_engine["cents"]


def test_step_timeout__an_attempt_past_it_fails_as_step_timeout(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.times_out))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert result_of(outcome) == "timed out: aws_flows.slow"


def test_child__its_failure_reaches_the_parent_as_child_failed(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.catches_child))
    outcome = runner.run(input="{}", execution_timeout=60)
    message = result_of(outcome)
    assert message.startswith("child workflow 'aws_flows.failing_child' failed")
    assert "no such order" in message


def test_gather__branches_take_their_turns_and_each_runs_once(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.together))
    arn = runner.run_async(input="{}", execution_timeout=60)
    outcome = runner.wait_for_result(arn, timeout=60)
    first, second, third, run_id, workflow, started_at = result_of(outcome)
    assert (run_id, workflow) == (arn, "aws_flows.together")  # cairn.current_run()
    assert started_at.endswith("+00:00")
    assert (first, third) == (None, None)
    assert second == "aws_flows.key#1@1:True"  # cairn.current_step() inside the step
    names = [op.name for op in outcome.operations]
    assert names == ["sleep", "aws_flows.key", "sleep"]


def test_callbacks__an_event_not_sent_in_time_gives_the_default(lambda_runner):
    # The runner enforces a callback's timeout in real time: one second here.
    runner = lambda_runner(cairn.aws.handler(flows.impatient))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert result_of(outcome) == "none"
    assert outcome.get_callback("event:late").status.value == "TIMED_OUT"


def test_callbacks__a_sync_workflows_hook_blocks_until_called(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.sync_hook))
    arn = runner.run_async(input="{}", execution_timeout=60)
    token = runner.wait_for_callback(arn, name="hook:callback", timeout=30)
    runner.send_callback_success(token, b"[1, 2]")
    assert result_of(runner.wait_for_result(arn, timeout=30)) == [1, 2]


def test_callbacks__a_payload_that_is_not_json_fails_naming_the_wait(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.sync_hook))
    arn = runner.run_async(input="{}", execution_timeout=60)
    token = runner.wait_for_callback(arn, name="hook:callback", timeout=30)
    runner.send_callback_success(token, b"not json")
    outcome = runner.wait_for_result(arn, timeout=30)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.InvalidSubmission"
    assert "the callback payload of hook 'callback' is not JSON" in outcome.error.message


def test_callbacks__an_event_not_sent_in_time_without_a_default_raises_event_timeout(
    lambda_runner,
):
    runner = lambda_runner(cairn.aws.handler(flows.strict))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.EventTimeout"
    assert outcome.error.message.startswith("event 'late' timed out")


def test_callbacks__a_hook_with_a_pydantic_schema_returns_the_model(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.typed_hook))
    arn = runner.run_async(input="{}", execution_timeout=60)
    token = runner.wait_for_callback(arn, name="hook:decision", timeout=30)
    runner.send_callback_success(token, json.dumps({"approved": True, "by": "ana"}).encode())
    assert result_of(runner.wait_for_result(arn, timeout=30)) == "ana: True"


def test_child__a_wait_inside_a_child_suspends_and_resumes_it(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.waits_for_child))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert result_of(outcome) == [2, 3]
    assert flows.calls["add"] == 2  # each child's step ran once, across the invocations
    first = outcome.get_context("aws_flows.napping_child")
    assert [op.name for op in first.child_operations] == ["sleep", "aws_flows.add"]


def test_failure__a_step_failure_ending_the_execution_names_the_step(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.signup))
    outcome = runner.run(input=json.dumps({"data": {}}), execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.StepFailed"
    assert outcome.error.message == (
        "step 'aws_flows.validate' failed after 1 attempt(s): "
        "cairn.errors.FatalError: Email is required"
    )


def test_failure__a_step_failure_ending_a_child_names_the_step(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.signs_up_a_child))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.ChildFailed"
    assert outcome.error.message == (
        "child workflow 'aws_flows.signup' failed: cairn.errors.StepFailed: step "
        "'aws_flows.validate' failed after 1 attempt(s): cairn.errors.FatalError: "
        "Email is required"
    )


def test_failure__a_step_attempts_stored_traceback_holds_the_users_frames_only(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.keeps_traceback))
    stored = result_of(runner.run(input="{}", execution_timeout=60))
    # As under `cairn worker` (cairn.tracebacks): the step's own frame, not cairn's.
    assert 'raise ValueError("still broken")' in stored and ", in flaky" in stored, stored
    assert stored.startswith("Traceback (most recent call last):"), stored
    assert os.path.dirname(cairn.__file__) + os.sep not in stored, stored  # no frame of cairn's
