"""What a start checks before anything is stored: the workflow's name and its arguments."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pydantic
import pytest
from tests.engine.intercept import intercept

import cairn
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.testing import TestEngine

from .kit import WAIT, Kit


class Tier(enum.Enum):
    GOLD = "gold"
    SILVER = "silver"


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    amount: Decimal


class Customer(pydantic.BaseModel):
    name: str
    since: date


def orders(kit: Kit) -> dict[str, Any]:
    """Workflows `orders.*` in the kit's registry; `seen` holds what each run received."""
    seen: dict[str, Any] = {}

    @kit.workflow("orders.process")
    async def process(order_id: str, amount: Decimal, due: date | None = None) -> str:
        seen[order_id] = (amount, due)
        return order_id

    @kit.workflow("orders.typed")
    async def typed(
        when: datetime,
        ref: uuid.UUID,
        tier: Tier,
        lines: list[Line],
        customer: Customer,
        tags: tuple[str, ...] = (),
    ) -> None:
        seen["typed"] = (when, ref, tier, lines, customer, tags)

    return {"seen": seen, "process": process, "typed": typed}


async def test_start__an_unknown_name_is_refused_naming_the_closest_known_ones(
    kit: Kit,
) -> None:
    orders(kit)
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.UnknownWorkflow) as caught:
            await engine.start("orders.procss", "o-1", 1)
        with pytest.raises(cairn.UnknownWorkflow, match=r"'orders\.process'"):
            await engine.start("process", "o-1", 1)  # unqualified
        assert list(await engine.list_runs()) == []  # nothing stored
    assert caught.value.workflow == "orders.procss"
    assert caught.value.suggestions[0] == "orders.process"
    assert "allow_unknown=True" in str(caught.value)
    assert "7 days" in str(caught.value)
    assert isinstance(caught.value, LookupError)


async def test_start__allow_unknown_queues_the_run_for_workers_to_come(kit: Kit) -> None:
    async with kit.engine(workers=0) as engine:
        run = await engine.start("later.flow", 1, allow_unknown=True)
        assert await run.status() == cairn.RunStatus.PENDING
        stored = await engine.store.read(run_ops.get_run(run.run_id))
    assert stored is not None and stored.workflow == "later.flow"


async def test_start__a_name_only_another_live_worker_knows_is_accepted(kit: Kit) -> None:
    remote = kit.fresh()

    @remote.workflow("remote.double")
    async def double(x: int) -> int:
        return 2 * x

    async with remote.engine(), kit.engine(workers=0) as queuer:
        run = await queuer.start("remote.double", 21)
        assert await run.result(timeout=WAIT) == 42
        with pytest.raises(cairn.UnknownWorkflow, match=r"did you mean 'remote\.double'"):
            await queuer.start("remote.dubble", 21)


async def test_start__names_of_workers_gone_stay_known_for_the_window(kit: Kit) -> None:
    remote = kit.fresh()

    @remote.workflow("remote.stopped")
    async def stopped() -> None:
        return None

    @remote.workflow("remote.crashed")
    async def crashed() -> None:
        return None

    async with remote.engine():
        pass  # registered, then stopped cleanly: its row in workers is gone
    async with kit.engine(workers=0) as queuer:
        assert [w.worker_id for w in await queuer.store.read(worker_ops.list_workers())] == []
        await queuer.start("remote.stopped")
    # A worker found dead is remembered as of its last heartbeat.
    dying = remote.engine()
    await dying.open()
    await dying._die()
    dead = [w.worker_id for w in await dying.store.read(worker_ops.list_workers())]
    await dying.store.write(worker_ops.expire_workers(dead))
    await dying.store.close()
    async with kit.engine(workers=0) as queuer:
        await queuer.start("remote.crashed")
    async with kit.engine(workers=0, known_workers_window=0) as strict:
        with pytest.raises(cairn.UnknownWorkflow, match="last 0 seconds"):
            await strict.start("remote.stopped")


async def test_start__a_known_name_is_not_read_again_for_every_start(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = kit.fresh()

    @remote.workflow("remote.burst")
    async def burst() -> None:
        return None

    async with remote.engine(workers=1), kit.engine(workers=0) as queuer:
        reads = 0

        async def counted(within: float) -> set[str] | None:
            nonlocal reads
            reads += 1
            return await known_workflows(within)

        kind = worker_ops.known_workflows
        known_workflows, _ = intercept(queuer.store, kind, counted, via="read")
        for _ in range(3):
            await queuer.start("remote.burst")
        assert reads == 1
        for _ in range(2):  # an unknown name is always looked up afresh
            with pytest.raises(cairn.UnknownWorkflow):
                await queuer.start("remote.bust")
        assert reads == 3


async def test_start__arguments_are_converted_to_the_annotated_types(kit: Kit) -> None:
    flows = orders(kit)
    async with kit.engine() as engine:
        first = await engine.start(flows["process"], "o-1", 59.90, "2024-05-01")
        second = await engine.start("orders.process", "o-2", "10.50", due=None)
        third = await engine.start(
            "orders.typed",
            "2024-05-01T10:00:00+02:00",
            "12345678-1234-5678-1234-567812345678",
            "GOLD",
            [{"sku": "a", "amount": 1.5}],
            {"name": "ann", "since": "2020-01-31"},
            tags=["x", "y"],
        )
        for run in (first, second, third):
            await run.result(timeout=WAIT)
        history = await engine.history(first.run_id)
    seen = flows["seen"]
    assert seen["o-1"] == (Decimal("59.9"), date(2024, 5, 1))
    assert seen["o-2"] == (Decimal("10.50"), None)
    when, ref, tier, lines, customer, tags = seen["typed"]
    assert when == datetime.fromisoformat("2024-05-01T10:00:00+02:00")
    assert ref == uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert tier is Tier.GOLD
    assert lines == [Line("a", Decimal("1.5"))]
    assert customer == Customer(name="ann", since=date(2020, 1, 31))
    assert tags == ("x", "y")
    assert history.args == ("o-1", Decimal("59.9"), date(2024, 5, 1))  # stored converted


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("o-1",), {}, "missing a required argument: 'amount'"),
        (("o-1", 1, None, 4), {}, "too many positional arguments"),
        (("o-1", 1), {"retry": 5}, "unexpected keyword argument 'retry'"),
        (("o-1", 1), {"idempotency_key": "k"}, "unexpected keyword argument 'idempotency_key'"),
        (("o-1", "12,50"), {}, "argument 'amount': expected Decimal, got '12,50'"),
        (("o-1", 1, "soon"), {}, "argument 'due': expected date | None, got 'soon'"),
        ((42, 1), {}, "argument 'order_id': expected str, got 42 (int)"),
    ],
)
async def test_start__arguments_that_do_not_fit_are_refused_before_anything_is_stored(
    kit: Kit, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    flows = orders(kit)
    async with kit.engine() as engine:
        with pytest.raises(TypeError, match=r"workflow 'orders\.process'") as caught:
            await engine.start(flows["process"], *args, **kwargs)
        assert list(await engine.list_runs()) == []
    assert message in str(caught.value)
    assert isinstance(caught.value, cairn.InvalidArguments)
    if "retry" in kwargs:
        assert "own options are" in str(caught.value)
        assert caught.value.parameter == "retry"


async def test_start__nested_values_that_do_not_fit_are_named_by_their_path(kit: Kit) -> None:
    orders(kit)
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.InvalidArguments, match=r"argument 'lines\[1\].amount'"):
            await engine.start(
                "orders.typed",
                "2024-05-01T10:00:00",
                str(uuid.uuid4()),
                "gold",
                [{"sku": "a", "amount": 1}, {"sku": "b", "amount": "x"}],
                {"name": "ann", "since": "2020-01-31"},
            )
        with pytest.raises(cairn.InvalidArguments, match="not one of 'gold', 'silver'"):
            await engine.start("orders.typed", "2024-05-01", str(uuid.uuid4()), "bronze", [], {})
        with pytest.raises(cairn.InvalidArguments, match="since: Input should be a valid date"):
            await engine.start(
                "orders.typed",
                "2024-05-01",
                str(uuid.uuid4()),
                "gold",
                [],
                {"name": "ann", "since": "later"},
            )


async def test_start__an_existing_run_id_returns_that_run_whatever_the_arguments(
    kit: Kit,
) -> None:
    flows = orders(kit)
    async with kit.engine(workers=0) as engine:
        first = await engine.start(flows["process"], "o-1", 1, run_id="same")
        again = await engine.start(flows["process"], "o-1", run_id="same")
        other = await engine.start("orders.gone", run_id="same")
    assert first == again == other


async def test_start__untyped_or_unresolvable_parameters_are_left_alone(kit: Kit) -> None:
    got: list[Any] = []

    @kit.workflow("loose.flow")
    async def loose(a, b: Any, c: NotImportableHere, *rest, **extra) -> None:  # type: ignore[no-untyped-def,name-defined]  # noqa: F821
        got.extend([a, b, c, rest, extra])

    async with kit.engine() as engine:
        run = await engine.start(loose, "1.5", {"x": 1}, [1], 2, 3, k="v")
        await run.result(timeout=WAIT)
    assert got == ["1.5", {"x": 1}, [1], (2, 3), {"k": "v"}]


async def test_client__checks_names_and_arguments_like_the_engine(kit: Kit) -> None:
    flows = orders(kit)
    async with kit.engine(workers=0):
        pass  # the schema exists

    def use_client() -> tuple[Any, ...]:
        with cairn.Client(kit.url, registry=kit.registry) as client:
            run = client.start("orders.process", "o-1", "12.50")
            with pytest.raises(cairn.UnknownWorkflow, match=r"did you mean 'orders\.process'"):
                client.start("orders.proces", "o-1", 1)
            with pytest.raises(TypeError, match="unexpected keyword argument 'retry'"):
                client.start(flows["process"], "o-1", 1, retry=3)
            with pytest.raises(ValueError, match="run_at is not an ISO 8601 date or date-time"):
                client.start(flows["process"], "o-1", 1, run_at="2030-02-30")
            later = client.start(flows["process"], "o-1", 1, run_at="2030-01-01")
            assert later.status() == cairn.RunStatus.PENDING
            queued = client.start("elsewhere.flow", allow_unknown=True)
            return run.run_id, queued.status(), client.history(run.run_id)

    run_id, status, history = await asyncio.to_thread(use_client)
    assert status == cairn.RunStatus.PENDING
    assert history.args == ("o-1", Decimal("12.50"))
    assert run_id


async def test_test_engine__checks_names_and_arguments(kit: Kit) -> None:
    flows = orders(kit)
    async with TestEngine(registry=kit.registry) as env:
        run = await env.start("orders.process", "o-1", "3.10", "2024-02-29")
        await run.result(timeout=WAIT)
        with pytest.raises(cairn.UnknownWorkflow):
            await env.start("orders.nope")
        with pytest.raises(TypeError):
            await env.start(flows["process"], "o-1")
    assert flows["seen"]["o-1"] == (Decimal("3.10"), date(2024, 2, 29))


async def test_start_child__arguments_are_checked_and_converted(kit: Kit) -> None:
    got: list[Any] = []

    @kit.workflow("family.child")
    async def child(amount: Decimal) -> str:
        got.append(amount)
        return str(amount)

    @kit.workflow("family.parent")
    async def parent() -> list[str]:
        done = [await child("1.10")]
        try:
            await child(1, 2)
        except TypeError as exc:
            done.append(f"refused: {exc}")
        return done

    async with kit.engine() as engine:
        run = await engine.start(parent, run_id="fam")
        result = await run.result(timeout=WAIT)
        runs = [r.run_id for r in await engine.list_runs()]
    assert got == [Decimal("1.10")]
    assert result[0] == "1.10"
    assert "too many positional arguments" in result[1]
    assert sorted(runs) == ["fam", "fam/family.child#1"]


async def test_schedules_create__an_unknown_workflow_or_bad_arguments_are_refused(
    kit: Kit,
) -> None:
    orders(kit)
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.UnknownWorkflow, match=r"did you mean 'orders\.process'"):
            await engine.schedules.create("s1", "orders.procss", every="1h")
        with pytest.raises(cairn.InvalidArguments, match="missing a required argument"):
            await engine.schedules.create("s2", "orders.process", every="1h", args=["o-1"])
        info = await engine.schedules.create(
            "s3", "orders.process", every="1h", args=["o-1", "2.50"]
        )
        later = await engine.schedules.create(
            "s4", "elsewhere.flow", every="1h", allow_unknown=True
        )
        assert [s.id for s in await engine.schedules.list()] == ["s3", "s4"]
    assert info.args == ("o-1", Decimal("2.50"))
    assert later.workflow == "elsewhere.flow"
