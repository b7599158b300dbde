"""Replay: recorded outcomes come back without calling the step; changed code is caught.

Each test runs a workflow on one engine until it is inside `gate`, closes that engine (the
run goes back to the database unfinished), and lets a second engine replay it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass

import pytest

import cairn
from cairn.testing import replay

from .kit import WAIT, Gate, Kit


async def _replay_in_second_engine(
    kit: Kit, first: cairn.Engine, gate: Gate, run_id: str
) -> object:
    await gate.hold(first)
    async with kit.engine() as second:
        handle = await second.get(run_id)
        return await handle.result(timeout=WAIT)


async def test_replay__recorded_outcomes_are_returned_without_calling_the_function(
    kit: Kit, gate: Gate
) -> None:
    calls: Counter[str] = Counter()

    @kit.step("token")
    async def token() -> str:
        calls["token"] += 1
        return uuid.uuid4().hex  # a different value on every call

    @kit.step("add")
    def add(x: int, y: int) -> int:
        calls["add"] += 1
        return x + y

    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    @kit.workflow("replay.basic")
    async def basic() -> dict[str, object]:
        first = await token()
        total = 0
        for i in range(3):
            total = await add(total, i)
        passed = await gate_step()
        return {"token": first, "total": total, "gate": passed}

    first_engine = kit.engine()
    await first_engine.open()
    run = await first_engine.start(basic)
    result = await _replay_in_second_engine(kit, first_engine, gate, run.run_id)

    async with kit.engine(workers=0) as engine:
        history = await engine.history(run.run_id)
    recorded_token = history[0].result
    assert result == {"token": recorded_token, "total": 3, "gate": "through"}
    assert calls == {"token": 1, "add": 3}
    assert gate.calls == 2  # in flight when the first engine closed, so it ran again
    assert [h.key for h in history] == ["token#1", "add#1", "add#2", "add#3", "gate#1"]
    assert [h.seq for h in history] == sorted(h.seq for h in history)


@pytest.mark.parametrize(
    ("changed", "met", "expected"),
    [
        ("renamed", "started step 'c#1'", "step 'a#1'"),
        ("inserted", "started step 'a#2'", "step 'b#1'"),
        ("returned", "returned", "step 'b#1'"),
    ],
)
async def test_replay__changed_code_fails_run_with_non_determinism_error(
    kit: Kit, gate: Gate, changed: str, met: str, expected: str
) -> None:
    calls: Counter[str] = Counter()

    def declare(k: Kit, *, new_code: bool) -> object:
        @k.step("a")
        async def a(x: int) -> int:
            calls["a"] += 1
            return x

        @k.step("b")
        async def b() -> str:
            calls["b"] += 1
            return "b"

        @k.step("c")
        async def c() -> str:
            calls["c"] += 1
            return "c"

        @k.step("gate")
        async def gate_step() -> str:
            return await gate()

        @k.workflow("replay.changing")
        async def changing() -> str:
            if new_code and changed == "renamed":
                await c()  # the new release calls c where a used to be
            elif new_code and changed == "inserted":
                await a(1)
                await a(2)  # a call that the recorded history does not have
            elif new_code and changed == "returned":
                await a(1)
                return "early"  # returns, leaving b#1 unvisited
            else:
                await a(1)
            await b()
            return await gate_step()

        return changing

    old = declare(kit, new_code=False)
    first = kit.engine()
    await first.open()
    run = await first.start(old)  # type: ignore[arg-type]
    await gate.hold(first)

    new_kit = kit.fresh()
    declare(new_kit, new_code=True)
    before = dict(calls)
    async with new_kit.engine() as second:
        handle = await second.get(run.run_id)
        with pytest.raises(cairn.RunFailed) as info:
            await handle.result(timeout=WAIT)
        assert await handle.status() == cairn.RunStatus.FAILED
        [summary] = await second.list_runs(status="FAILED")
    failure = info.value
    assert failure.error_type == "cairn.errors.NonDeterminismError"
    assert met in failure.error_message and expected in failure.error_message
    assert summary.error is not None and summary.error["type"] == failure.error_type
    assert calls == before  # caught before the new operation runs; nothing recorded re-runs
    assert gate.calls == 1


async def test_replay__non_determinism_error_names_both_operations(kit: Kit, gate: Gate) -> None:
    @kit.step("first")
    async def first_step() -> int:
        return 1

    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    @kit.workflow("replay.sleepy")
    async def sleepy() -> str:
        await first_step()
        return await gate_step()

    engine = kit.engine()
    await engine.open()
    run = await engine.start(sleepy)
    await gate.hold(engine)

    new_kit = kit.fresh()
    caught: list[cairn.NonDeterminismError] = []

    @new_kit.workflow("replay.sleepy")
    async def sleepy_v2() -> str:
        try:
            await cairn.sleep(0)  # a durable sleep where the history has a step
        except cairn.NonDeterminismError as exc:
            caught.append(exc)
            raise
        return "unreachable"

    async with new_kit.engine() as second:
        with pytest.raises(cairn.RunFailed):
            await (await second.get(run.run_id)).result(timeout=WAIT)
    [error] = caught
    assert error.met == "started sleep '~sleep#1'"
    assert error.expected == "step 'first#1' (history seq 1)"
    assert "~sleep#1" in str(error) and "first#1" in str(error)


async def test_replay__gather_of_steps_replays_deterministically(kit: Kit, gate: Gate) -> None:
    calls: Counter[str] = Counter()

    @kit.step("fetch")
    async def fetch(i: int) -> str:
        calls[f"fetch {i}"] += 1
        await asyncio.sleep(0.002 * (3 - i))  # finish in the reverse of the call order
        return f"item-{i}-{uuid.uuid4().hex[:6]}"

    async def pipeline(tag: str) -> str:
        loaded = await cairn.run_step(f"load-{tag}", _load, tag, calls)
        return str(await cairn.run_step(f"save-{tag}", _save, loaded, calls))

    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    async def held() -> str:
        await fetch(0)
        return await gate_step()  # new work while the other branch still replays

    @kit.workflow("replay.gather")
    async def gathered() -> list[object]:
        items = await asyncio.gather(fetch(1), fetch(2), fetch(3))
        saved = await asyncio.gather(pipeline("x"), pipeline("y"), pipeline("z"))
        tail = await asyncio.gather(held(), pipeline("w"))
        return [items, saved, tail]

    first = kit.engine()
    await first.open()
    run = await first.start(gathered)
    async with asyncio.timeout(WAIT):
        await gate.entered.wait()
    async with kit.engine(workers=0) as reader, asyncio.timeout(WAIT):
        # The gate can be entered before pipeline w's last step has committed: wait for
        # it, so that everything but the gate step is on record before the replay.
        while "save-w#1" not in (
            before := {h.key: h.result for h in await reader.history(run.run_id)}
        ):
            await asyncio.sleep(0.005)
    result = await _replay_in_second_engine(kit, first, gate, run.run_id)

    items, saved, tail = result  # type: ignore[misc]
    assert items == [before["fetch#1"], before["fetch#2"], before["fetch#3"]]
    assert saved == [before[f"save-{t}#1"] for t in "xyz"]
    assert tail == ["through", before["save-w#1"]]
    assert set(calls.values()) == {1}
    assert len(calls) == 4 + 2 * 4  # four fetches, a load and a save per pipeline


async def _load(tag: str, calls: Counter[str]) -> str:
    calls[f"load {tag}"] += 1
    await asyncio.sleep(0.001 * (ord("z") - ord(tag)))
    return f"{tag}-{uuid.uuid4().hex[:6]}"


def _save(loaded: str, calls: Counter[str]) -> str:
    calls[f"save {loaded[0]}"] += 1
    return loaded.upper()


async def test_replay__loop_calls_are_separate_keys(kit: Kit) -> None:
    calls: list[int] = []

    @kit.step("tick")
    def tick(i: int) -> int:
        calls.append(i)
        return i

    @kit.workflow("replay.loop")
    async def loop() -> int:
        return sum([await tick(i) for i in range(4)] + [await tick(0)])

    async with kit.engine() as engine:
        run = await engine.start(loop)
        assert await run.result(timeout=WAIT) == 6
        history = await engine.history(run.run_id)
    assert calls == [0, 1, 2, 3, 0]  # identical calls are two executions
    assert [h.key for h in history] == [f"tick#{n}" for n in range(1, 6)]


async def test_replay__step_results_are_the_same_values_as_on_first_execution(
    kit: Kit, gate: Gate
) -> None:
    @dataclass
    class Local:  # a class replay cannot import: it comes back as a dict of its fields
        sku: str

    @kit.step("shapes")
    def shapes() -> list[object]:
        return [Local("sku-1"), Counter(a=1), OrderedDict(b=2), (1, 2)]

    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    seen: list[list[str]] = []

    @kit.workflow("replay.shapes")
    async def shaped() -> list[str]:
        values = await shapes()
        seen.append([type(v).__name__ for v in values])
        await gate_step()
        return seen[-1]

    first = kit.engine()
    await first.open()
    run = await first.start(shaped)
    await _replay_in_second_engine(kit, first, gate, run.run_id)
    # The workflow sees the stored form on first execution too, so a recovery cannot
    # change what its code computes.
    assert seen[0] == seen[1] == ["dict", "dict", "dict", "tuple"]


@pytest.mark.parametrize(
    ("new_work", "met"),
    [
        ("event", "started waiting for event '~event:approval#1'"),
        ("sleep", "started sleep '~sleep#1'"),
        ("emit", "emitted event '~emit:shipped#1'"),
    ],
)
async def test_replay__live_and_offline_replays_name_a_divergence_alike(
    kit: Kit, gate: Gate, new_work: str, met: str
) -> None:
    # `cairn check --db` and `cairn.testing.replay` must say what a live run would say.
    @kit.step("first")
    async def first_step() -> int:
        return 1

    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    @kit.workflow("replay.alike")
    async def alike() -> str:
        await first_step()
        return await gate_step()

    engine = kit.engine()
    await engine.open()
    run = await engine.start(alike)
    await gate.hold(engine)  # the engine goes away with `gate` in flight

    new_kit = kit.fresh()
    caught: list[cairn.NonDeterminismError] = []
    async with new_kit.engine(workers=0) as reader:
        history = await reader.history(run.run_id)

    @new_kit.workflow("replay.alike")
    async def alike_v2() -> str:
        try:
            if new_work == "event":
                await cairn.wait_for_event("approval", timeout=60)
            elif new_work == "sleep":
                await cairn.sleep(0)
            else:
                await cairn.emit("shipped", {})
        except cairn.NonDeterminismError as exc:
            caught.append(exc)
            raise
        return "unreachable"

    with pytest.raises(cairn.NonDeterminismError) as offline:
        await asyncio.to_thread(replay, history, alike_v2)
    async with new_kit.engine() as second:
        with pytest.raises(cairn.RunFailed):
            await (await second.get(run.run_id)).result(timeout=WAIT)

    replayed, live = caught  # the code saw the offline replay's error first, then the run's
    assert replayed is offline.value
    assert live.met == replayed.met == met
    assert live.expected == replayed.expected == "step 'first#1' (history seq 1)"
