"""Parents and children for the child-run process tests (`cairn worker -m ...child_flows`).

Every step appends a line to the file named by KIDS_EFFECTS (outside the store) and fsyncs
it: the counter that proves which steps ran how often, and in which process. A held child
waits for a file ``release-NAME`` next to it (never for time), looking for a cancellation
meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import cairn

EFFECTS = Path(os.environ.get("KIDS_EFFECTS", "effects.txt"))
ONE_AT_A_TIME = cairn.Queue("kids.one_at_a_time", concurrency=1)


def effect(line: str) -> None:
    """Append a line to the side-effect file and make it durable before going on."""
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


def released(name: str) -> bool:
    return EFFECTS.with_name(f"release-{name}").exists()


@cairn.step("note")
async def note(line: str) -> str:
    """A step whose only work is its side effect."""
    effect(line)
    return line


@cairn.step("hold")
async def hold(name: str) -> str:
    """Runs until the test releases `name`; a cancellation stops it early."""
    effect(f"{name} held")
    while not released(name):
        cairn.check_cancelled()
        await asyncio.sleep(0.005)
    return name


async def _kid(name: str) -> str:
    await note(f"{name} start")
    try:
        await hold(name)
    except cairn.Cancelled:
        async with cairn.shield():
            await note(f"{name} cleanup")
        raise
    if name.startswith("fail"):
        raise cairn.FatalError(f"{name} gives up")
    await note(f"{name} end")
    return f"{name} done"


@cairn.workflow("kids.child")
async def child(name: str) -> str:
    """A step, a step held until released (or cancelled), a step; cleanup on cancel."""
    return await _kid(name)


@cairn.workflow("kids.queued", queue=ONE_AT_A_TIME)
async def queued(name: str) -> str:
    """kids.child on a queue that runs one at a time."""
    return await _kid(name)


@cairn.workflow("kids.parent")
async def parent(
    awaited: list[str],
    detached: list[str],
    queued_names: list[str],
    tag: str = "parent",
    held: bool = False,
) -> list[str]:
    """Starts children (awaited, detached, and on the one-at-a-time queue) and awaits some.

    A child that fails or is cancelled is noted and the parent goes on. Its own side
    effects are "TAG start", "TAG end" and "TAG cleanup" (on cancel). `held`: once its
    children are started, it holds a step of its own until TAG is released.
    """
    await note(f"{tag} start")
    handles = [await cairn.start_child(child, name) for name in awaited]
    handles += [await cairn.start_child(queued, name) for name in queued_names]
    for name in detached:
        await cairn.start_child(child, name, detached=True)
    seen = []
    try:
        if held:
            await hold(tag)
        for handle in handles:
            try:
                seen.append(await handle.result())
            except cairn.ChildFailed as exc:
                await note(f"{tag} saw {exc.run_id} {exc.error_type}")
                seen.append(f"failed {exc.run_id}")
    except cairn.Cancelled:
        async with cairn.shield():
            await note(f"{tag} cleanup")
        raise
    await note(f"{tag} end")
    return seen


@cairn.workflow("kids.grand")
async def grand(names: list[str]) -> list[str]:
    """A parent of a parent: kids.parent with awaited children `names`."""
    await note("grand start")
    got = await parent(names, [], [])
    await note("grand end")
    return list(got)


@cairn.workflow("kids.looping")
async def looping(round_no: int, rounds: int) -> str:
    """Starts a child each round (not awaited), then continues as new; the last awaits one."""
    await note(f"loop {round_no}")
    handle = await cairn.start_child(child, f"loop{round_no}")
    if round_no < rounds:
        cairn.continue_as_new(round_no + 1, rounds)
    return str(await handle.result())


@cairn.workflow("kids.spinner")
async def spinner(round_no: int, rounds: int) -> int:
    """A short step a round, each round a run of its own (continue_as_new)."""
    await note(f"spin {round_no}")
    if round_no < rounds:
        cairn.continue_as_new(round_no + 1, rounds)
    await note("spin done")
    return round_no


@cairn.workflow("kids.spinning_parent")
async def spinning_parent(rounds: int) -> int:
    """Awaits a child that goes on as new every round."""
    await note("parent start")
    try:
        return int(await spinner(0, rounds))
    except cairn.Cancelled:
        async with cairn.shield():
            await note("parent cleanup")
        raise


@cairn.workflow("kids.slow_round", queue="kids.slow")
async def slow_round(round_no: int, rounds: int) -> int:
    """A step, then workflow code that blocks its worker's event loop until `round N` is
    released, then continue_as_new: a cancel or pause stored meanwhile is not seen by the
    worker before the run goes on as new."""
    await note(f"round {round_no}")
    effect(f"round {round_no} blocks")
    while not released(f"round{round_no}"):
        time.sleep(0.005)  # blocks the event loop: nothing reaches this run meanwhile
    if round_no < rounds:
        cairn.continue_as_new(round_no + 1, rounds)
    return round_no


@cairn.workflow("kids.slow_parent", queue="kids.parents")
async def slow_parent(rounds: int) -> int:
    """Awaits a kids.slow_round child (on a queue of its own: another worker runs it)."""
    await note("parent start")
    try:
        return int(await slow_round(0, rounds))
    except cairn.Cancelled:
        async with cairn.shield():
            await note("parent cleanup")
        raise
