"""A workflow served as an AWS Lambda durable function: ``python examples/aws_lambda.py``.

Deployed, the function's handler is ``aws_lambda.handler``. Run as a script, it runs on
the AWS testing SDK's local runner (no AWS account): the hour's sleep is skipped, and the
approval is sent from outside with the callback id the workflow waits on.
"""

from __future__ import annotations

import json

import cairn
import cairn.aws


@cairn.step(retries=cairn.Retry(max_attempts=5, delay="2s"))
async def charge(order: str, cents: int) -> str:
    return f"receipt-{order}-{cents}"


@cairn.workflow(name="process_order")
async def process_order(order: str, cents: int) -> dict[str, object]:
    receipt = await charge(order, cents)
    await cairn.sleep("1h")  # the service's wait: no compute meanwhile
    approval = await cairn.wait_for_event("approval", timeout="2d")
    return {"receipt": receipt, "approval": approval}


handler = cairn.aws.handler(process_order)


if __name__ == "__main__":
    from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner

    with DurableFunctionTestRunner(handler=handler) as runner:
        arn = runner.run_async(input=json.dumps({"order": "o-1", "cents": 1250}))
        token = runner.wait_for_callback(arn, name="event:approval")
        runner.send_callback_success(token, json.dumps({"by": "ana"}).encode())
        outcome = runner.wait_for_result(arn)
        print(outcome.status.value, outcome.result)
