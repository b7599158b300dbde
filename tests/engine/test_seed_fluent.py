"""Coming from fluent chains: `cairn.Workflow(name).then(cairn.Step(...))`, as written.

Stages, class-based steps, branches, options; on both stores, through the one core.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock

from .kit import WAIT, Gate, Kit
from .seeds import chain_elsewhere, finish


async def fetch_order(order_id: str) -> dict[str, Any]:
    return {"id": order_id, "total": 120 if order_id.startswith("big") else 15}


def send_letter(order: dict[str, Any]) -> str:
    return f"letter for {order['id']}"


async def test_fluent__the_letters_chain_as_written(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    def flaky_letter(order: dict[str, Any]) -> str:
        calls["send-letter"] += 1
        if calls["send-letter"] < 3:
            raise ConnectionError("printer jammed")
        return send_letter(order)

    workflow = cairn.Workflow("letters", registry=kit.registry)
    workflow.then(cairn.Step("fetch-order", fetch_order)).then(
        cairn.Step("send-letter", flaky_letter, options={"num_retries": 3, "interval_seconds": 0})
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, "o-1")
        assert await run.result(timeout=WAIT) == "letter for o-1"
        history = await engine.history(run.run_id)
        listed = await engine.list_runs(workflow=workflow)
    assert [(h.key, h.attempts) for h in history] == [("fetch-order#1", 1), ("send-letter#1", 3)]
    assert history[1].input == {"args": [{"id": "o-1", "total": 15}], "kwargs": {}}
    assert [r.run_id for r in listed] == [run.run_id]


class Charge(cairn.Step):
    """A class-based step: its class name names it, its attributes set its options."""

    options = {"max_attempts": 2, "interval_seconds": 0}

    async def execute(self, order: dict[str, Any]) -> dict[str, Any]:
        return {**order, "charged": order["total"]}


class Refund(cairn.Step):
    name = "refund-card"
    timeout = "30 seconds"

    def execute(self, order: dict[str, Any]) -> dict[str, Any]:
        return {**order, "refunded": True}


async def test_fluent__class_based_steps_and_branches(kit: Kit) -> None:
    def is_big(order: dict[str, Any]) -> bool:
        return bool(order["total"] > 100)

    workflow = (
        cairn.Workflow("fluent.checkout", registry=kit.registry)
        .then(fetch_order)
        .branch(is_big, then=[Charge(), Refund], otherwise=None)
        .then(lambda order: sorted(order), name="fields")
    )

    async with kit.engine() as engine:
        big = await engine.start(workflow, "big-1")
        small = await engine.start(workflow, "small-1")
        assert await big.result(timeout=WAIT) == ["charged", "id", "refunded", "total"]
        assert await small.result(timeout=WAIT) == ["id", "total"]
        big_keys = [h.key for h in await engine.history(big.run_id)]
        small_keys = [h.key for h in await engine.history(small.run_id)]
    assert big_keys == ["fetch_order#1", "Charge#1", "refund-card#1", "fields#1"]
    assert small_keys == ["fetch_order#1", "fields#1"]
    assert Charge().retry.max_attempts == 2 and Charge().timeout is None
    assert (Refund().name, Refund().timeout) == ("refund-card", 30)


async def test_fluent__stages_of_every_kind(kit: Kit) -> None:
    @cairn.step(name="fluent.double")
    async def double(n: int) -> int:
        return n * 2

    @kit.workflow("fluent.child")
    async def child(n: int) -> int:
        return n + 1

    workflow = (
        cairn.Workflow("fluent.kinds", registry=kit.registry)
        .then(double)
        .then(double, name="double-again", retries=cairn.Retry(max_attempts=1))
        .then(child)
        .branch(lambda n: n > 100, then=child, otherwise=[double, double])
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, 5)
        assert await run.result(timeout=WAIT) == 84  # ((5*2*2)+1)*2*2
        history = await engine.history(run.run_id)
    assert [(h.kind, h.key) for h in history] == [
        ("step", "fluent.double#1"),
        ("step", "double-again#1"),
        ("child", "~child:fluent.child#1"),
        ("step", "fluent.double#2"),
        ("step", "fluent.double#3"),
    ]
    assert isinstance(workflow, cairn.Workflow) and [type(s).__name__ for s in workflow.stages][
        :2
    ] == ["StepDef", "Step"]


async def test_fluent__a_recovered_chain_does_not_repeat_finished_stages(
    kit: Kit, gate: Gate
) -> None:
    calls: Counter[str] = Counter()

    async def first(order_id: str) -> str:
        calls["first"] += 1
        return order_id.upper()

    async def second(order: str) -> str:
        calls["second"] += 1
        await gate()  # the first engine closes here
        return f"{order}!"

    workflow = (
        cairn.Workflow("fluent.resume", registry=kit.registry)
        .then(cairn.Step("first", first))
        .branch(lambda order: order.startswith("O"), then=cairn.Step("second", second))
    )

    engine = kit.engine()
    await engine.open()
    run = await engine.start(workflow, "o-9", run_id="fluent-resume")
    await gate.hold(engine)
    async with kit.engine() as again:
        assert await (await again.get(run.run_id)).result(timeout=WAIT) == "O-9!"
    assert calls == {"first": 1, "second": 2}  # second was in flight at the close


async def test_fluent__a_workflow_stage_failure_and_the_steps_class(kit: Kit) -> None:
    class OutOfStock(Exception):
        pass

    def reserve(item: str) -> str:
        raise LookupError(f"{item} is out of stock")

    workflow = cairn.Workflow("fluent.fails", registry=kit.registry).then(
        cairn.Step("reserve", reserve, retries=1)
    )

    @kit.workflow("fluent.caller")
    async def caller() -> str:
        try:
            await cairn.run_step("warm-up", lambda: None)
            return str(await workflow("pen"))
        except cairn.ChildFailed as exc:
            return exc.error_type

    async with kit.engine() as engine:
        run = await engine.start(workflow, "pen")
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
        assert info.value.error_type == "builtins.LookupError"
        assert await (await engine.start(caller)).result(timeout=WAIT) == "builtins.LookupError"
    assert OutOfStock.__name__ == "OutOfStock"


async def test_fluent__bad_chains_are_named(kit: Kit) -> None:
    empty = cairn.Workflow("fluent.empty", registry=kit.registry)
    with pytest.raises(TypeError, match=r"workflow 'fluent.empty': a stage must be a cairn.Step"):
        empty.then(42)
    with pytest.raises(TypeError, match=r"branch needs a predicate function, got 'yes'"):
        empty.branch("yes", then=send_letter)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"branch then= is an empty list"):
        empty.branch(bool, then=[])
    with pytest.raises(TypeError, match=r"cairn.Step needs a function: cairn.Step"):
        cairn.Step("nothing")
    with pytest.raises(ValueError, match=r"step 'x': unknown key 'retry' in options \(known: "):
        cairn.Step("x", send_letter, options={"retry": 3})
    with pytest.raises(ValueError, match=r"retries= and options=.* both set its retries"):
        cairn.Step("x", send_letter, retries=2, options={"num_retries": 3})
    with pytest.raises(TypeError, match=r"apply to steps; stage 'fluent.empty' is a workflow"):
        cairn.Workflow("fluent.outer", registry=kit.registry).then(empty, retries=3)
    with pytest.raises(ValueError, match=r"workflow name 'fluent.empty' is already registered"):
        chain_elsewhere("fluent.empty", kit.registry)
    with pytest.raises(TypeError, match=r"cairn.Workflow needs a name string, got None"):
        cairn.Workflow(None)  # type: ignore[arg-type]

    async with kit.engine() as engine:
        run = await engine.start(empty, 1)
        with pytest.raises(cairn.RunFailed, match=r"has no stages: add them with \.then"):
            await run.result(timeout=WAIT)


async def test_fluent__outside_a_run_a_step_is_a_plain_call() -> None:
    assert await cairn.Step("fetch-order", fetch_order)("o-5") == {"id": "o-5", "total": 15}
    assert Refund()({"id": "r"}) == {"id": "r", "refunded": True}
    assert repr(Charge()) == "Charge('Charge')"


async def test_fluent__three_small_steps_and_only_the_failing_one_retried(kit: Kit) -> None:
    # The chain of seed 000's first page: three one-action stages, the last with nothing
    # but `num_retries`; its retries wait the default backoff and repeat it alone.
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    async def load_invoice(invoice_id: str) -> dict[str, Any]:
        calls["load"] += 1
        return {"id": invoice_id}

    def write_reminder(invoice: dict[str, Any]) -> str:
        calls["write"] += 1
        return f"please pay {invoice['id']}"

    async def post_reminder(text: str) -> str:
        calls["post"] += 1
        if calls["post"] < 4:
            raise ConnectionError("mail gateway down")
        return f"posted: {text}"

    workflow = cairn.Workflow("reminders", registry=kit.registry)
    workflow.then(cairn.Step("load-invoice", load_invoice)).then(
        cairn.Step("write-reminder", write_reminder)
    ).then(cairn.Step("post-reminder", post_reminder, options={"num_retries": 3}))

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(workflow, "inv-9")
        assert await finish(engine, clock, run, tick=5) == "posted: please pay inv-9"
        history = await engine.history(run.run_id)
    assert [(h.key, h.attempts) for h in history] == [
        ("load-invoice#1", 1),
        ("write-reminder#1", 1),
        ("post-reminder#1", 4),
    ]
    assert calls == {"load": 1, "write": 1, "post": 4}


class ChargeAmount(cairn.Step):
    async def execute(self, order_id: str, amount: int) -> dict[str, Any]:
        return {"id": order_id, "amount": amount}


async def test_fluent__a_start_that_does_not_fit_the_first_stage_is_refused(kit: Kit) -> None:
    # As with @cairn.workflow: arguments the first stage cannot take are refused at the
    # start, naming the chain, and nothing is stored (they used to fail the first stage's
    # attempts one by one, as a retried TypeError).
    letters = cairn.Workflow("letters.fit", registry=kit.registry)
    letters.then(cairn.Step("fetch-order", fetch_order)).then(send_letter)
    charges = cairn.Workflow("charges.fit", registry=kit.registry).then(ChargeAmount())
    async with kit.engine() as engine:
        with pytest.raises(cairn.InvalidArguments, match=r"workflow 'letters.fit' \(order_id"):
            await engine.start(letters)
        with pytest.raises(cairn.InvalidArguments, match=r"'charges.fit'.*amount"):
            await engine.start(charges, "o-1")
        assert list(await engine.list_runs()) == []
        run = await engine.start(letters, "o-2")
        assert await run.result(timeout=WAIT) == "letter for o-2"
        # A value of the wrong type is named, as for any workflow's arguments.
        with pytest.raises(cairn.InvalidArguments, match=r"'amount': expected int, got '12'"):
            await engine.start(charges, "o-3", amount="12")
        charge = await engine.start(charges, "o-3", amount=12)
        assert await charge.result(timeout=WAIT) == {"id": "o-3", "amount": 12}
