"""Steps inside and outside runs: async and sync, sync workflows, run_step and chain."""

from __future__ import annotations

import asyncio
import threading

import pytest

import cairn

from .kit import WAIT, Gate, Kit


async def test_step__async_and_sync_steps_in_async_workflow(kit: Kit) -> None:
    calls: list[str] = []

    @kit.step("double")
    async def double(x: int) -> int:
        calls.append("double")
        return 2 * x

    @kit.step("add_one")
    def add_one(x: int) -> int:
        calls.append("add_one")
        return x + 1

    @kit.workflow("steps.mixed")
    async def mixed(x: int) -> int:
        return await add_one(await double(x))

    async with kit.engine() as engine:
        run = await engine.start(mixed, 20)
        assert await run.result(timeout=WAIT) == 41
        assert await run.status() == cairn.RunStatus.COMPLETED
        history = await engine.history(run.run_id)
    assert calls == ["double", "add_one"]
    assert [(h.key, h.kind, h.status, h.result) for h in history] == [
        ("double#1", "step", "completed", 40),
        ("add_one#1", "step", "completed", 41),
    ]


async def test_step__sync_step_runs_in_a_thread(kit: Kit) -> None:
    threads: dict[str, int] = {}

    @kit.step("where_am_i")
    def where_am_i() -> str:
        threads["step"] = threading.get_ident()
        return threading.current_thread().name

    @kit.workflow("steps.thread")
    async def thread_wf() -> str:
        threads["workflow"] = threading.get_ident()
        return await where_am_i()

    async with kit.engine() as engine:
        run = await engine.start(thread_wf)
        name = await run.result(timeout=WAIT)
    assert threads["step"] != threads["workflow"] == threading.get_ident()
    assert name.startswith("cairn-step")


async def test_step__sync_workflow_runs_in_a_thread_and_steps_block(kit: Kit) -> None:
    seen: dict[str, object] = {}

    @kit.step("sync_inc")
    def sync_inc(x: int) -> int:
        return x + 1

    @kit.step("async_dbl")
    async def async_dbl(x: int) -> int:
        return 2 * x

    @kit.workflow("steps.sync_workflow")
    def sync_wf(x: int) -> int:
        seen["thread"] = threading.current_thread().name
        a = sync_inc(x)  # a plain value: the call blocks until the step is committed
        b = async_dbl(a)  # an async step blocks the same way
        seen["types"] = (type(a), type(b))
        cairn.sleep(0)  # primitives block too
        c = cairn.run_step("inline_sync", lambda v: v + 100, b)
        seen["run"] = cairn.current_run().workflow
        return int(c)

    async with kit.engine() as engine:
        run = await engine.start(sync_wf, 1)
        assert await run.result(timeout=WAIT) == 104
        history = await engine.history(run.run_id)
    assert str(seen["thread"]).startswith("cairn-workflow")
    assert seen["types"] == (int, int)
    assert seen["run"] == "steps.sync_workflow"
    assert [h.key for h in history] == ["sync_inc#1", "async_dbl#1", "~sleep#1", "inline_sync#1"]


async def test_run_step__inline_step_is_durable_with_its_name(kit: Kit) -> None:
    calls: list[int] = []

    def charge(amount: int, *, currency: str) -> str:
        calls.append(amount)
        if len(calls) == 1:
            raise cairn.RetryableError("card network busy")
        return f"{amount} {currency}"

    async def fetch(n: int) -> list[int]:
        return list(range(n))

    @kit.workflow("steps.inline")
    async def inline() -> list[object]:
        charged = await cairn.run_step(
            "charge", charge, 5, currency="EUR", retries=cairn.Retry(delay=0, max_delay=0)
        )
        again = await cairn.run_step("charge", charge, 6, currency="EUR", timeout="5s")
        fetched = await cairn.run_step("fetch", fetch, 3)
        return [charged, again, fetched]

    async with kit.engine() as engine:
        run = await engine.start(inline)
        assert await run.result(timeout=WAIT) == ["5 EUR", "6 EUR", [0, 1, 2]]
        history = await engine.history(run.run_id)
    assert calls == [5, 5, 6]
    assert [(h.key, h.name, h.attempts) for h in history] == [
        ("charge#1", "charge", 2),
        ("charge#2", "charge", 1),
        ("fetch#1", "fetch", 1),
    ]


async def test_run_step__bad_name_raises_in_workflow(kit: Kit) -> None:
    @kit.workflow("steps.inline_bad_name")
    async def bad_name() -> str:
        try:
            await cairn.run_step("", len, "x")
        except ValueError as exc:
            return str(exc)
        return "no error"

    async with kit.engine() as engine:
        run = await engine.start(bad_name)
        assert "name must be a non-empty string" in await run.result(timeout=WAIT)


async def test_chain__each_step_gets_the_previous_result(engine: cairn.Engine) -> None:
    # cairn.chain registers in the default registry, which the `engine` fixture uses.
    @cairn.step()
    async def chain_parse(text: str) -> int:
        return int(text)

    @cairn.step()
    def chain_square(x: int) -> int:
        return x * x

    @cairn.step()
    async def chain_describe(x: int) -> str:
        return f"squared: {x}"

    flow = cairn.chain("tests.engine.chain_flow", chain_parse, chain_square, chain_describe)
    run = await engine.start(flow, "12")
    assert await run.result(timeout=WAIT) == "squared: 144"
    history = await engine.history(run.run_id)
    assert [h.result for h in history] == [12, 144, "squared: 144"]
    with pytest.raises(cairn.NotInRun):
        flow("12")


def test_chain__rejects_what_is_not_a_step() -> None:
    with pytest.raises(TypeError, match=r"is not a @cairn\.step"):
        cairn.chain("tests.engine.bad_chain", len)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one step"):
        cairn.chain("tests.engine.empty_chain")


async def test_step__outside_a_run_is_a_plain_call(offline_kit: Kit) -> None:
    @offline_kit.step("plain_sync")
    def plain_sync(x: int) -> int:
        return x + 1

    @offline_kit.step("plain_async")
    async def plain_async(x: int) -> int:
        return x * 3

    assert plain_sync(1) == 2
    assert await plain_async(2) == 6
    assert plain_sync.__name__ == "plain_sync"


def test_workflow__outside_a_run_raises_not_in_run(offline_kit: Kit) -> None:
    @offline_kit.workflow("steps.not_in_run")
    async def not_in_run(x: int) -> int:
        return x

    with pytest.raises(cairn.NotInRun, match=r"engine\.start") as info:
        not_in_run(1)
    assert "'steps.not_in_run'" in str(info.value)
    assert isinstance(info.value, cairn.CairnError)


@pytest.mark.parametrize(
    "call",
    [
        lambda: cairn.run_step("x", len, "abc"),
        lambda: cairn.sleep("1s"),
        lambda: cairn.current_run(),
        lambda: cairn.check_cancelled(),
    ],
    ids=["run_step", "sleep", "current_run", "check_cancelled"],
)
async def test_primitives__outside_a_run_raise_not_in_run(call: object) -> None:
    with pytest.raises(cairn.NotInRun, match=r"engine\.start"):
        result = call()  # type: ignore[operator]
        if hasattr(result, "__await__"):
            await result


async def test_step__called_inside_a_step_is_a_plain_call(kit: Kit) -> None:
    @kit.step("inner")
    def inner(x: int) -> int:
        return x + 1

    @kit.step("outer")
    def outer(x: int) -> int:
        return inner(inner(x))

    @kit.workflow("steps.nested")
    async def nested(x: int) -> int:
        return await outer(x)

    async with kit.engine() as engine:
        run = await engine.start(nested, 1)
        assert await run.result(timeout=WAIT) == 3
        assert [h.key for h in await engine.history(run.run_id)] == ["outer#1"]


async def test_sync_workflow__engine_close_cancels_its_step_and_stops_its_thread(
    kit: Kit, gate: Gate
) -> None:
    log: list[str] = []
    thread_done = threading.Event()

    @kit.step("held")
    async def held() -> str:
        try:
            return await gate()
        except asyncio.CancelledError:
            log.append("step cancelled")
            raise

    @kit.step("after")
    def after(value: str) -> str:
        log.append(f"after {value}")
        return value

    @kit.workflow("steps.sync_close")
    def sync_close() -> str:
        try:
            try:
                value = held()
            except Exception as exc:  # user code must not be able to swallow the handback
                log.append(f"workflow caught {type(exc).__name__}")
                value = "caught"
            return after(value)
        finally:
            thread_done.set()

    first = kit.engine()
    await first.open()
    run = await first.start(sync_close)
    await gate.hold(first)
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, thread_done.wait, WAIT)
    assert log == ["step cancelled"]  # nothing ran on behalf of the closed engine

    thread_done.clear()
    async with kit.engine() as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == "through"
    assert log == ["step cancelled", "after through"]
