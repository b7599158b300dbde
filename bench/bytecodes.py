"""`python -m bench.bytecodes [RUNS] [TOP] [--run] [--seq]`: bytecodes and frames, by function.

Instruction counts (bench/instructions.py) say how much a step costs; this says where,
in the engine's own terms. With `sys.settrace` and `f_trace_opcodes` on the event loop's
thread it counts every bytecode executed and every frame entered or resumed (a coroutine
resumed counts again), per function, while RUNS runs (default 200) start at once: once
for ten-step runs, once for runs with no step. The difference over RUNS x 10 is the cost
of one step; the TOP functions (default 25) are listed by bytecodes per step. Tracing
slows the engine a hundredfold, so the engine's polls and looks are switched off (as
`bench.instructions --steady`) and only the loop's thread is counted: threads (the
checkpointer, heartbeats) are not traced.

`--run` counts the other half: a run with no step, per run (its start, its task, its
finish), all of it rather than a difference. `--seq` starts the RUNS runs one after
another instead (each awaited before the next starts), as `bench.instructions seq` does:
no group commit then, each write commits alone.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections import Counter
from types import CodeType, FrameType
from typing import Any

import cairn
from bench.workflows import STEPS, no_steps, ten_steps

Counts = tuple[Counter[CodeType], Counter[CodeType]]  # bytecodes, frames: by code object


def _quiet() -> None:
    """No background polls or looks: what is counted is the runs' own work."""
    from cairn.runtime import in_flight
    from cairn.store.sqlite.store import SqliteStore

    in_flight.LOOK = 1e9

    async def wait_for_work(self: SqliteStore, timeout: float) -> None:
        await self._signal.wait(timeout)

    SqliteStore.wait_for_work = wait_for_work  # type: ignore[method-assign]


async def _counted(workflow: Any, runs: int, seq: bool = False) -> Counts:
    ops: Counter[CodeType] = Counter()
    frames: Counter[CodeType] = Counter()

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        if event == "call":
            frames[frame.f_code] += 1
            frame.f_trace_opcodes = True
            return trace
        if event == "opcode":
            ops[frame.f_code] += 1
        return trace

    async def batch(engine: cairn.Engine, first: int, traced: bool) -> None:
        if traced:
            sys.settrace(trace)
        try:
            if seq:
                for i in range(runs):
                    await (await engine.start(workflow, first + i)).result()
                return
            handles = await asyncio.gather(
                *(engine.start(workflow, first + i) for i in range(runs))
            )
            await asyncio.gather(*(handle.result() for handle in handles))
        finally:
            sys.settrace(None)

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bench.db"
        async with cairn.Engine(url, workers=runs, poll_interval=60, lease="600s") as engine:
            await batch(engine, 0, False)  # warm-up: statement caches, imports
            await batch(engine, 100_000, True)
    return ops, frames


def _name(code: CodeType) -> str:
    module = code.co_filename.rsplit("/src/", 1)[-1].removesuffix(".py")
    return f"{module}:{code.co_qualname}"


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg not in ("--run", "--seq")]
    seq = "--seq" in sys.argv[1:]
    how = "one after another" if seq else "at once"
    runs = int(args[0]) if args else 200
    top = int(args[1]) if len(args) > 1 else 25
    _quiet()
    if "--run" in sys.argv[1:]:
        run_ops, run_frames = asyncio.run(_counted(no_steps, runs, seq))
        _print(f"{runs} runs with no step {how}, per run", run_ops, run_frames, runs, top)
        return
    steps_ops, steps_frames = asyncio.run(_counted(ten_steps, runs, seq))
    bare_ops, bare_frames = asyncio.run(_counted(no_steps, runs, seq))
    n = runs * STEPS
    steps_ops.subtract(bare_ops)  # negatives kept: a function a step run calls less often
    steps_frames.subtract(bare_frames)
    _print(f"{runs} runs {how}, per step", steps_ops, steps_frames, n, top)


def _print(
    title: str, ops_: Counter[CodeType], frames_: Counter[CodeType], n: int, top: int
) -> None:
    ops = {code: count / n for code, count in ops_.items()}
    frames = {code: count / n for code, count in frames_.items()}
    total_ops = sum(ops.values())
    total_frames = sum(frames.values())
    print(f"{title}: {total_ops:,.0f} bytecodes, {total_frames:.1f} frames")
    for code, count in sorted(ops.items(), key=lambda item: -item[1])[:top]:
        print(f"{count:8.1f} {frames.get(code, 0.0):6.2f}  {_name(code)}")


if __name__ == "__main__":
    main()
