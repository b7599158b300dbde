"""Workflows written for `cairn worker`, served unchanged as Lambda handlers by the tests.

The counters live outside the runs (module globals the tests reset) so that "ran once"
is seen from outside the checkpointing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass

from aws_durable_execution_sdk_python.exceptions import InvocationError
from pydantic import BaseModel

import cairn

calls: Counter[str] = Counter()
# A step named here fails that many times before it succeeds.
failures: Counter[str] = Counter()


class Crash(InvocationError):
    """The invocation dies (out of memory, say): Lambda invokes the handler again."""


crash_after: set[str] = set()


@dataclass(frozen=True)
class Receipt:
    order: str
    cents: int


@cairn.step(name="aws_flows.reserve")
def reserve(order: str) -> int:
    calls["reserve"] += 1
    return 1250


@cairn.step(name="aws_flows.charge", retries=cairn.Retry(max_attempts=3, delay="2s"))
async def charge(order: str, cents: int) -> Receipt:
    calls["charge"] += 1
    if failures["charge"] > 0:
        failures["charge"] -= 1
        raise ConnectionError(f"payment service unavailable for {order}")
    return Receipt(order, cents)


@cairn.workflow(name="aws_flows.process_order")
async def process_order(order: str) -> dict[str, object]:
    cents = await reserve(order)
    if "reserve" in crash_after:
        crash_after.discard("reserve")
        raise Crash("simulated crash after the step 'reserve'")
    receipt = await charge(order, cents)
    cairn.progress("charged", current=1, total=2)
    await cairn.sleep("1h")
    return {"order": receipt.order, "cents": receipt.cents, "receipt": receipt}


@cairn.step(name="aws_flows.flaky", retries=2)
def flaky() -> str:
    calls["flaky"] += 1
    raise ValueError("still broken")


@cairn.workflow(name="aws_flows.gives_up")
def gives_up() -> str:
    try:
        flaky()
    except ValueError as exc:  # the step's own class, as under cairn worker
        assert isinstance(exc, cairn.StepFailed)
        return f"{exc.step_name} failed after {exc.attempts} attempts: {exc.error_message}"
    return "unreachable"


@cairn.workflow(name="aws_flows.keeps_traceback")
def keeps_traceback() -> str:
    try:
        flaky()
    except cairn.StepFailed as exc:
        return exc.traceback  # as stored: the user's frames
    return "unreachable"


@cairn.workflow(name="aws_flows.approval")
async def approval(amount: int) -> dict[str, object]:
    hook = await cairn.create_hook("manager")
    await notify(hook.token)
    decision = await hook
    note = await cairn.wait_for_event("note", timeout="1d", default="none")
    return {"amount": amount, "decision": decision, "note": note}


@cairn.step(name="aws_flows.notify")
def notify(token: str) -> None:
    calls["notify"] += 1


@cairn.workflow(name="aws_flows.double")
async def double(n: int) -> int:
    return await add(n, n)


@cairn.step(name="aws_flows.add")
def add(a: int, b: int) -> int:
    calls["add"] += 1
    return a + b


@cairn.workflow(name="aws_flows.parent")
async def parent(n: int) -> list[int]:
    first = await double(n)
    rest = await asyncio.gather(add(first, 1), add(first, 2))
    return [first, *rest]


@cairn.workflow(name="aws_flows.uses")
async def uses(feature: str) -> object:
    if feature == "emit":
        return await cairn.emit("order.created", {})
    if feature == "start_child":
        return await cairn.start_child(double, 1)
    if feature == "continue_as_new":
        cairn.continue_as_new(feature)
    if feature == "receive":
        return await cairn.receive("inbox")
    if feature == "step_queue":
        return await cairn.run_step("remote", add, 1, 2, queue="gpu")
    if feature == "schedule_workflow":  # pyworkflow's, instead of a year's sleep
        return await cairn.schedule_workflow(double, 1, run_at="2030-01-01")
    if feature == "stream":
        return await streams()
    return None


@cairn.step(name="aws_flows.streams")
async def streams() -> None:
    await cairn.stream("tokens").write("hello")


@cairn.workflow(name="aws_flows.review")
def review(title: str) -> dict[str, object]:
    values = cairn.human_task(
        "review",
        title=title,
        data={"title": title},
        form={"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}},
    )
    cairn.set_columns(title=title)
    return {"values": values, "run": cairn.current_run().workflow}


@cairn.step(name="aws_flows.slow", timeout="1s", retries=1)
async def slow() -> None:
    await asyncio.sleep(30)


@cairn.workflow(name="aws_flows.times_out")
async def times_out() -> str:
    try:
        await slow()
    except cairn.StepTimeout as exc:
        return f"timed out: {exc.step_name}"
    return "unreachable"


@cairn.workflow(name="aws_flows.failing_child")
async def failing_child() -> None:
    await gives_up_loudly()


@cairn.workflow(name="aws_flows.gives_up_loudly")
def gives_up_loudly() -> None:
    raise LookupError("no such order")


@cairn.workflow(name="aws_flows.catches_child")
async def catches_child() -> str:
    try:
        await failing_child()
    except cairn.ChildFailed as exc:
        return str(exc)
    return "unreachable"


@cairn.step(name="aws_flows.key")
def key() -> str:
    step = cairn.current_step()
    return (
        f"{step.key}@{step.attempt}:{step.idempotency_key == cairn.current_step().idempotency_key}"
    )


@cairn.workflow(name="aws_flows.together")
async def together() -> list[object]:
    # A wait and a step gathered: the step runs once the wait is over (turns, in order).
    first, second, third = await asyncio.gather(cairn.sleep("10s"), key(), cairn.sleep("20s"))
    run = cairn.current_run()
    return [first, second, third, run.run_id, run.workflow, run.started_at.isoformat()]


@cairn.workflow(name="aws_flows.sync_hook")
def sync_hook() -> object:
    hook = cairn.create_hook("callback", timeout="1h")
    notify(hook.token)
    return hook.wait()


@cairn.transaction(name="aws_flows.record")
def record(conn: object, order: str) -> None:
    raise AssertionError("never runs on Lambda")


@cairn.workflow(name="aws_flows.uses_transaction")
async def uses_transaction() -> None:
    await record("o-1")


@cairn.workflow(name="aws_flows.impatient")
async def impatient() -> object:
    return await cairn.wait_for_event("late", timeout="1s", default="none")


@cairn.workflow(name="aws_flows.strict")
async def strict() -> object:
    return await cairn.wait_for_event("late", timeout="1s")


class Decision(BaseModel):
    approved: bool
    by: str


@cairn.workflow(name="aws_flows.typed_hook")
async def typed_hook() -> str:
    hook = await cairn.create_hook("decision", schema=Decision)
    decision = await hook
    assert isinstance(decision, Decision)
    return f"{decision.by}: {decision.approved}"


@cairn.workflow(name="aws_flows.napping_child")
async def napping_child(n: int) -> int:
    await cairn.sleep("1h")
    return await add(n, 1)


@cairn.workflow(name="aws_flows.waits_for_child")
def waits_for_child() -> list[int]:
    # A sync parent, an async child that sleeps: the invocation suspends inside the child.
    return [napping_child(1), napping_child(2)]


@cairn.step(name="aws_flows.validate")
def validate(data: dict[str, str]) -> dict[str, str]:
    if "email" not in data:
        raise cairn.FatalError("Email is required")
    return data


@cairn.workflow(name="aws_flows.signup")
async def signup(data: dict[str, str]) -> dict[str, str]:
    return await validate(data)


@cairn.workflow(name="aws_flows.signs_up_a_child")
async def signs_up_a_child() -> dict[str, str]:
    return await signup({})
