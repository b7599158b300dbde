"""What has no meaning on Lambda is refused by name; bad events and payloads are named too."""

from __future__ import annotations

import json
import logging

import pytest

from .conftest import needs_sdk

needs_sdk()

import cairn
import cairn.aws
from cairn.authoring.schedules import make_schedule
from cairn.authoring.workflow import make_workflow

from . import flows
from .conftest import result_of


@pytest.mark.parametrize(
    ("feature", "named"),
    [
        ("emit", "cairn.emit() is not supported on AWS Lambda"),
        ("start_child", "cairn.start_child() is not supported on AWS Lambda"),
        ("continue_as_new", "cairn.continue_as_new() is not supported on AWS Lambda"),
        ("receive", "cairn.receive() is not supported on AWS Lambda"),
        ("step_queue", "the step queue of step 'remote' (queue='gpu') is not supported"),
        ("schedule_workflow", "cairn.schedule_workflow() is not supported on AWS Lambda"),
    ],
)
def test_refused__at_the_call_the_execution_fails_naming_the_feature(lambda_runner, feature, named):
    runner = lambda_runner(cairn.aws.handler(flows.uses))
    outcome = runner.run(input=json.dumps({"feature": feature}), execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.Unsupported"
    assert named in outcome.error.message
    assert "\n" not in outcome.error.message


def test_refused__a_stream_in_a_step_fails_the_step_at_once_naming_it(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.uses))
    outcome = runner.run(input=json.dumps({"feature": "stream"}), execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.StepFailed"  # raised in the step's code
    assert outcome.error.message.startswith(
        "step 'aws_flows.streams' failed after 1 attempt(s): cairn.errors.Unsupported: "
        "cairn.stream() is not supported on AWS Lambda (cairn.aws); Lambda keeps no streams"
    )
    assert outcome.get_step("aws_flows.streams").attempt == 1  # a usage error: not retried


def test_refused__a_transaction_step_there_is_no_cairn_database(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.uses_transaction))
    outcome = runner.run(input="{}", execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.Unsupported"
    assert "the transaction step 'aws_flows.record' (@cairn.transaction)" in outcome.error.message


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"queue": "payments"}, "the queue of workflow 'aws_refused' (queue='payments')"),
        ({"on": "order.created"}, "the event trigger of workflow 'aws_refused'"),
        ({"timeout": "1h"}, "the timeout of workflow 'aws_refused' (3600s)"),
        ({"durable": False}, "the transient workflow 'aws_refused' (durable=False)"),
    ],
)
def test_refused__a_workflow_option_when_the_handler_is_made(options, named):
    registry = cairn.Registry()

    async def aws_refused() -> None:
        return None

    workflow = make_workflow(aws_refused, name="aws_refused", reg=registry, **options)
    with pytest.raises(cairn.aws.Unsupported, match="is not supported on AWS Lambda") as caught:
        cairn.aws.handler(workflow)
    assert named in str(caught.value)


def test_refused__a_schedule_of_the_workflow_when_the_handler_is_made():
    registry = cairn.Registry()

    async def aws_nightly() -> None:
        return None

    workflow = make_workflow(aws_nightly, name="aws_nightly", reg=registry)
    make_schedule(workflow, cron="0 2 * * *", id="nightly", reg=registry)
    with pytest.raises(cairn.aws.Unsupported) as caught:
        cairn.aws.handler(workflow, registry=registry)
    assert str(caught.value).startswith(
        "the schedule 'nightly' of workflow 'aws_nightly' (cairn.schedule) is not supported "
        "on AWS Lambda (cairn.aws); schedule the function with EventBridge Scheduler"
    )
    cairn.aws.handler(workflow, registry=cairn.Registry())  # elsewhere: no schedule


def test_handler__refuses_what_is_not_a_workflow():
    with pytest.raises(TypeError, match=r"cairn.aws.handler needs a @cairn.workflow"):
        cairn.aws.handler(flows.add)


@pytest.mark.parametrize(
    ("event", "named"),
    [
        ("[1, 2]", "must be a JSON object of its keyword arguments, got list"),
        ('{"amount": 1}', "order"),  # a missing argument, named by cairn's argument check
    ],
)
def test_event__that_does_not_fit_fails_the_execution_naming_it(lambda_runner, event, named):
    runner = lambda_runner(cairn.aws.handler(flows.process_order))
    outcome = runner.run(input=event, execution_timeout=60)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.InvalidArguments"
    assert named in outcome.error.message
    assert flows.calls["reserve"] == 0


def test_human_task__the_values_fit_the_form_and_the_task_is_logged(lambda_runner, caplog):
    caplog.set_level(logging.INFO)
    runner = lambda_runner(cairn.aws.handler(flows.review))
    arn = runner.run_async(input=json.dumps({"title": "Refund o-1"}), execution_timeout=60)
    token = runner.wait_for_callback(arn, name="task:review", timeout=30)
    runner.send_callback_success(token, json.dumps({"ok": True}).encode())
    outcome = runner.wait_for_result(arn, timeout=30)
    assert result_of(outcome) == {"values": {"ok": True}, "run": "aws_flows.review"}
    told = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cairn: ")]
    assert any(f"callback id {token}" in m and "Refund o-1" in m for m in told), told
    assert sum("columns" in m for m in told) == 1  # logged once, not again on replay


def test_human_task__values_that_do_not_fit_the_form_fail_naming_the_field(lambda_runner):
    runner = lambda_runner(cairn.aws.handler(flows.review))
    arn = runner.run_async(input=json.dumps({"title": "Refund o-2"}), execution_timeout=60)
    token = runner.wait_for_callback(arn, name="task:review", timeout=30)
    runner.send_callback_success(token, json.dumps({"ok": "yes"}).encode())
    outcome = runner.wait_for_result(arn, timeout=30)
    assert outcome.error is not None
    assert outcome.error.type == "cairn.errors.InvalidSubmission"
    assert "ok:" in outcome.error.message
