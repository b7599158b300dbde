"""Durable streams: written by steps and workflow code, read in order, reset on failure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.errors import NotInRun
from cairn.testing import replay

from .kit import WAIT, Kit


async def _read_all(engine: cairn.Engine, run_id: str, name: str = "tokens") -> list[Any]:
    async def collect() -> list[Any]:
        return [value async for value in engine.read_stream(run_id, name)]

    return await asyncio.wait_for(collect(), WAIT)


async def test_stream__step_chunks_read_in_order_until_closed(kit: Kit) -> None:
    @kit.step("generate")
    async def generate(n: int) -> int:
        stream = cairn.stream("tokens")
        for i in range(n):
            await stream.write({"token": i})
        await stream.write("done")
        await stream.close()
        return n

    @kit.workflow("streams.closed")
    async def flow(n: int) -> int:
        return await generate(n)

    async with kit.engine() as engine:
        run = await engine.start(flow, 1500, run_id="s-1")
        values = await _read_all(engine, "s-1")
        assert await run.result(timeout=WAIT) == 1500
    assert values == [{"token": i} for i in range(1500)] + ["done"]


async def test_stream__reader_started_first_sees_chunks_live_and_ends_with_the_run(
    kit: Kit,
) -> None:
    release = asyncio.Event()

    @kit.step("slow")
    async def slow() -> None:
        stream = cairn.stream("tokens")
        await stream.write("first")
        await release.wait()
        await stream.write("second")

    @kit.workflow("streams.live")
    async def flow() -> str:
        await slow()
        return "ok"

    async with kit.engine() as engine:
        await engine.start(flow, run_id="s-2")
        values = engine.read_stream("s-2", "tokens")
        assert await asyncio.wait_for(anext(values), WAIT) == "first"
        release.set()
        assert await asyncio.wait_for(anext(values), WAIT) == "second"
        with pytest.raises(StopAsyncIteration):  # not closed: it ends with the run
            await asyncio.wait_for(anext(values), WAIT)


async def test_stream__failed_attempt_is_reset_and_the_retry_streams_again(kit: Kit) -> None:
    tries: list[int] = []

    @kit.step("flaky", retries=cairn.Retry(max_attempts=2, delay=0))
    async def flaky() -> str:
        tries.append(1)
        stream = cairn.stream("tokens")
        await stream.write(f"try {len(tries)}")
        if len(tries) == 1:
            await asyncio.sleep(0.05)  # let the chunk be stored before the failure
            raise ConnectionError("model went away")
        await stream.close()
        return "ok"

    @kit.workflow("streams.retried")
    async def flow() -> str:
        return await flaky()

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-3")
        assert await run.result(timeout=WAIT) == "ok"
        values = await _read_all(engine, "s-3")
    assert values == ["try 1", cairn.StreamReset(attempt=1, step_key="flaky#1"), "try 2"]


async def test_stream__a_step_failing_for_good_is_reset_and_readers_end(kit: Kit) -> None:
    @kit.step("doomed", retries=cairn.Retry(max_attempts=1))
    async def doomed() -> None:
        await cairn.stream("tokens").write("partial")
        await asyncio.sleep(0.05)  # stored before the failure
        raise cairn.FatalError("the model refused")

    @kit.workflow("streams.failed")
    async def flow() -> None:
        await doomed()

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-8")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        values = await _read_all(engine, "s-8")
    assert values == ["partial", cairn.StreamReset(attempt=1, step_key="doomed#1")]


async def test_stream__workflow_code_writes_once_whatever_the_replays(kit: Kit) -> None:
    @kit.workflow("streams.workflow_code")
    async def flow() -> str:
        stream = cairn.stream("status")
        await stream.write("started")
        approved = await cairn.wait_for_event("approval")  # parks: the next attempt replays
        await stream.write(f"approved: {approved}")
        await stream.close()
        return "ok"

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-4")
        values = engine.read_stream("s-4", "status")
        assert await asyncio.wait_for(anext(values), WAIT) == "started"
        await engine.send_event("s-4", "approval", True)
        assert await run.result(timeout=WAIT) == "ok"
        rest = [value async for value in values]
    assert rest == ["approved: True"]


async def test_stream__an_offline_replay_writes_nothing(kit: Kit) -> None:
    @kit.step("said")
    async def said(word: str) -> str:
        await cairn.stream("tokens").write(word)
        return word

    @kit.workflow("streams.replayed")
    async def flow() -> str:
        await cairn.stream("tokens").write("from the workflow")
        return await said("hi")

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-7")
        await run.result(timeout=WAIT)
        replay(await engine.history("s-7"), flow)
        assert await _read_all(engine, "s-7") == ["from the workflow", "hi"]


async def test_stream__sync_step_writes_with_write_sync(kit: Kit) -> None:
    @kit.step("sync_gen")
    def sync_gen() -> int:
        stream = cairn.stream("tokens")
        for i in range(3):
            stream.write_sync(i)
        stream.close_sync()
        return 3

    @kit.workflow("streams.sync")
    def flow() -> int:
        return sync_gen()

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-5")
        assert await run.result(timeout=WAIT) == 3
        assert await _read_all(engine, "s-5") == [0, 1, 2]


async def test_stream__fork_keeps_the_completed_steps_streams(kit: Kit) -> None:
    @kit.step("speak")
    async def speak(word: str) -> str:
        await cairn.stream("tokens").write(word)
        return word

    @kit.workflow("streams.forked")
    async def flow() -> list[str]:
        return [await speak("one"), await speak("two")]

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-6")
        await run.result(timeout=WAIT)
        fork = await engine.fork("s-6", 2)  # keeps step 1, runs step 2 again
        await fork.result(timeout=WAIT)
        assert await _read_all(engine, fork.run_id) == ["one", "two"]
        assert await _read_all(engine, "s-6") == ["one", "two"]


async def test_stream__the_sync_client_reads_it_live(kit: Kit) -> None:
    release = asyncio.Event()

    @kit.step("told")
    async def told() -> None:
        stream = cairn.stream("tokens")
        await stream.write("first")
        await release.wait()
        await stream.write("second")
        await stream.close()

    @kit.workflow("streams.client")
    async def flow() -> None:
        await told()

    async with kit.engine() as engine:
        await engine.start(flow, run_id="s-9")
        loop = asyncio.get_running_loop()

        def from_a_script() -> list[Any]:
            seen = []
            with cairn.Client(kit.url, registry=kit.registry) as client:
                for value in client.read_stream("s-9", "tokens"):
                    seen.append(value)
                    loop.call_soon_threadsafe(release.set)
                with pytest.raises(cairn.RunNotFound):
                    next(iter(client.read_stream("nobody", "tokens")))
            return seen

        assert await asyncio.wait_for(asyncio.to_thread(from_a_script), WAIT) == [
            "first",
            "second",
        ]


def test_stream__outside_a_run_raises_not_in_run() -> None:
    with pytest.raises(NotInRun):
        cairn.stream("tokens")


class _Narrate(cairn.Step):
    """A class step that streams."""

    name = "narrate"

    async def execute(self, words: list[str]) -> int:
        stream = cairn.stream("tokens")
        for word in words:
            await stream.write(word)
        await stream.close()
        return len(words)


async def test_stream__a_class_step_streams_like_a_decorated_one(kit: Kit) -> None:
    @kit.workflow("streams.class_step")
    async def flow() -> int:
        return int(await _Narrate()(["once", "upon", "a time"]))

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-10")
        assert await run.result(timeout=WAIT) == 3
        assert await _read_all(engine, "s-10") == ["once", "upon", "a time"]


async def test_stream__a_queued_step_is_refused_naming_the_feature(kit: Kit) -> None:
    @kit.step("render", queue="gpu", retries=cairn.Retry(max_attempts=1))
    async def render() -> None:
        await cairn.stream("tokens").write("frame")

    @kit.workflow("streams.queued")
    async def flow() -> None:
        await render()

    async with kit.engine(step_queues=["gpu"]) as engine:
        run = await engine.start(flow, run_id="s-11")
        with pytest.raises(cairn.RunFailed) as failed:
            await run.result(timeout=WAIT)
        assert await _read_all(engine, "s-11") == []
    message = str(failed.value)
    assert "cairn.stream() is not supported on a step queue (step 'render' on queue 'gpu')" in (
        message
    ), message


async def test_stream__two_steps_at_once_writing_one_stream_both_store_every_chunk(
    kit: Kit,
) -> None:
    @kit.step("chorus")
    async def chorus(voice: str, n: int) -> int:
        stream = cairn.stream("tokens")
        for i in range(n):
            await stream.write(f"{voice}{i}")
            if i % 7 == 0:
                await asyncio.sleep(0)  # let the other voice's commit interleave
        return n

    @kit.workflow("streams.chorus")
    async def flow(n: int) -> list[int]:
        return list(await asyncio.gather(chorus("a", n), chorus("b", n), chorus("c", n)))

    async with kit.engine() as engine:
        run = await engine.start(flow, 300, run_id="s-12")
        assert await run.result(timeout=WAIT) == [300, 300, 300]
        run2 = await engine.start(flow, 300, run_id="s-13")
        assert await run2.result(timeout=WAIT) == [300, 300, 300]
        values = await _read_all(engine, "s-12")
    for voice in "abc":  # each voice's chunks, in its order, none lost, no reset
        assert [v for v in values if v[0] == voice] == [f"{voice}{i}" for i in range(300)]
    assert len(values) == 900


async def test_stream__retry_of_a_failed_run_streams_the_step_again_after_its_reset(
    kit: Kit,
) -> None:
    tries: list[int] = []

    @kit.step("once_doomed", retries=cairn.Retry(max_attempts=1))
    async def once_doomed() -> str:
        tries.append(1)
        stream = cairn.stream("tokens")
        await stream.write(f"try {len(tries)}")
        if len(tries) == 1:
            await asyncio.sleep(0.05)  # stored before the failure
            raise ConnectionError("the model went away")
        await stream.close()
        return "ok"

    @kit.workflow("streams.retried_run")
    async def flow() -> str:
        return await once_doomed()

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-14")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        assert await _read_all(engine, "s-14") == [
            "try 1",
            cairn.StreamReset(attempt=1, step_key="once_doomed#1"),
        ]
        again = await engine.retry("s-14")
        assert await again.result(timeout=WAIT) == "ok"
        values = await _read_all(engine, "s-14")
    assert values == ["try 1", cairn.StreamReset(attempt=1, step_key="once_doomed#1"), "try 2"]


async def test_stream__a_run_failing_while_another_branch_streams_resets_that_branch(
    kit: Kit,
) -> None:
    started = asyncio.Event()

    @kit.step("babble")
    async def babble() -> None:
        stream = cairn.stream("tokens")
        for i in range(1000):
            await stream.write(i)
            started.set()
            await asyncio.sleep(0.01)

    @kit.step("refuse", retries=cairn.Retry(max_attempts=1))
    async def refuse() -> None:
        await started.wait()
        await asyncio.sleep(0.1)  # some of babble's chunks are stored
        raise cairn.FatalError("refused")

    @kit.workflow("streams.branches")
    async def flow() -> None:
        await asyncio.gather(babble(), refuse())

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="s-15")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        values = await _read_all(engine, "s-15")
    assert values[-1] == cairn.StreamReset(attempt=1, step_key="babble#1")
    assert values[:-1] == list(range(len(values) - 1)) and len(values) > 1
