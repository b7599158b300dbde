"""`cairn run --wait` (and `cairn workflows run`): keep executing a run here through its sleeps.

A run that goes to sleep is parked in the database like any other; here this process
waits for its wake time and claims it again by id (the claim's usual rules: a worker
elsewhere that takes it first wins, and is followed instead). A run waiting for its child
runs has them executed here too, each claimed by id when it is due (their sleeps waited
out as the run's own, and so a limit of their queue that holds them back). A run of a
queue, which its start leaves to workers, is claimed here by id the same way. A step on a
step queue, the run's or a child's, is waited for while a live worker serves that queue.
A wait for something from outside (an event, a hook, a human task, a step queue no live
worker serves, a resume), the run's or a child's, ends the waiting: the run is reported
as parked, with the command that moves it on.
"""

from __future__ import annotations

import asyncio
import time

from rich.console import Console

from cairn.cli.follow import Follower
from cairn.core import remote_steps
from cairn.models import RunStatus
from cairn.representation import words
from cairn.runtime import blocking, leases
from cairn.runtime.engine import Engine
from cairn.store.programs import workers as worker_ops
from cairn.store.records import RunRecord

# How often to look again while the run sleeps: a cancel or a worker elsewhere shows soon.
LOOK_EVERY = 1.0
# The statuses of a child run that this process may take up again when it is due.
_GOES_ON = (RunStatus.PENDING, RunStatus.SLEEPING, RunStatus.WAITING)


async def through_sleeps(
    engine: Engine, follower: Follower, run: RunRecord, console: Console, worker: str
) -> RunRecord:
    """Execute the followed run here each time it wakes, until it stops sleeping.

    Returns the run once it has finished or parked for anything but a sleep or a step
    that a live worker of its step queue will run. `worker` is the command that starts a
    worker able to go on with it, should this one stop waiting.
    """
    told: float | None = None
    stepped: str | None = None  # the step queue wait told about
    family = False  # children executed here: the run, woken by their ends, goes on here
    told_children: set[object] = set()
    while True:
        status = RunStatus(run.status)
        if status is RunStatus.WAITING and await _children_went_on(
            engine, run, console, told_children
        ):
            family = True
            run = await follower.follow()
            continue
        held_elsewhere = status is RunStatus.RUNNING and run.owner is not None
        step = _step_wait(run)
        if step is not None and step != stepped:
            queue = step.rpartition("@")[2]
            if not await _served(engine, queue):
                return run  # reported as parked, with the worker that would serve it
            stepped = step
            console.print(
                f"run {run.run_id} is WAITING for a worker of step queue '{queue}' to run step "
                f"'{step.rpartition('@')[0]}'; a live worker serves it: waiting here for it "
                f"(Ctrl-C stops waiting: the run stays stored for `{worker}`)",
                markup=False,
            )
        now = engine.clock.now()
        due = 0.0 if run.wake_at is None else run.wake_at - now
        # Woken by the step's report (due at once, or queued again) and not taken by a
        # worker elsewhere: it goes on here. So does a run of a queue, which its start
        # left to workers: taken by id, its queue's limits hold here too.
        woken = run.owner is None and (
            (status is RunStatus.PENDING and run.queue is not None)
            or (
                stepped is not None
                and (status is RunStatus.PENDING or (step is not None and run.wake_at is not None))
            )
            # Woken by its children's ends (due now), not a wait of its own with a deadline.
            or (family and (status is RunStatus.PENDING or (run.wake_at is not None and due <= 0)))
        )
        if not held_elsewhere and step is None and not woken and status is not RunStatus.SLEEPING:
            return run
        if status is RunStatus.SLEEPING and run.wake_at is not None and told != run.wake_at:
            told = run.wake_at
            console.print(
                f"run {run.run_id} is SLEEPING until {words.when(run.wake_at)} "
                f"(in {words.seconds(max(0.0, run.wake_at - now))}); waiting here to continue "
                f"it (Ctrl-C stops waiting: the run stays stored for `{worker}`)",
                markup=False,
            )
        taken = False
        if (woken or status is RunStatus.SLEEPING) and due <= 0 and engine.worker is not None:
            taken = await engine.worker.take(run.run_id)  # False: not claimable (yet)
        if not taken:
            if due <= 0 and (
                limit := blocking.held_by_queue(await engine.control.record(run.run_id))
            ):
                _tell(
                    console,
                    told_children,
                    f"{run.run_id} is {status.value}, held back by "
                    f"{limit['reason']}: waiting here to continue it",
                )
            pause = LOOK_EVERY if due <= 0 else min(LOOK_EVERY, due)
            try:
                await engine.control.wait(run.run_id, timeout=pause)
            except TimeoutError:
                pass
        run = await follower.follow()


async def through_chain(
    engine: Engine, follower: Follower, run: RunRecord, console: Console, worker: str
) -> RunRecord:
    """`through_sleeps`, then on through the runs the run continued as, executing each here.

    `result()` on any run of a chain waits for the chain's final result: so does this.
    Each new run is claimed by id (a worker elsewhere that takes it first is followed
    instead) and executed through its sleeps like the first. Returns the last run reached.
    """
    run = await through_sleeps(engine, follower, run, console, worker)
    while run.status == RunStatus.CONTINUED.value and run.continued_to and engine.worker:
        new = run.continued_to
        console.print(f"run {run.run_id} continued as new: {new}; following it here", markup=False)
        follower = Follower(engine.control, new, console)
        taking = asyncio.ensure_future(engine.worker.take(new))  # its steps shown as they run
        try:
            await follower.follow()
            await taking
        finally:
            taking.cancel()
        run = await through_sleeps(engine, follower, await follower.follow(), console, worker)
    return run


async def _children_went_on(
    engine: Engine, run: RunRecord, console: Console, told: set[object]
) -> bool:
    """Execute here what the run's unfinished descendants need; whether any went on.

    False when none is due, sleeping, held back by a limit of its queue, waiting for a
    step a live worker of its step queue serves, or held by a worker elsewhere: the run
    waits for something from outside (or for no child), and is reported as parked.
    """
    page = await engine.list_runs(tree=run.run_id, limit=1000)
    open_ids = [
        r.run_id for r in page if r.run_id != run.run_id and not RunStatus(r.status).finished
    ]
    if not open_ids or engine.worker is None:
        return False
    wake: float | None = None
    went_on = held = False
    for run_id in reversed(open_ids):  # oldest first: the order they were started in
        child = await engine.control.record(run_id)
        status = RunStatus(child.status)
        step = _step_wait(child)
        if status is RunStatus.RUNNING and child.owner is not None:
            held = True  # a worker elsewhere executes it: wait for it
        elif child.owner is None and status in _GOES_ON:
            # Due: new, or woken (its sleep over, or its own child ended). A wait for
            # something from outside, with or without a deadline, is left as it is.
            due = child.wake_at
            if status is RunStatus.PENDING or (due is not None and due <= engine.clock.now()):
                if await engine.worker.take(run_id):
                    went_on = True
                    continue
                # Not taken: a limit of its queue holds it back (it frees by itself, or
                # when a run elsewhere leaves its place), or a worker elsewhere took it.
                limit = blocking.held_by_queue(await engine.control.record(run_id))
                if limit is not None:
                    held = True
                    _tell(
                        console,
                        told,
                        f"{run.run_id} waits for child run {run_id}, held "
                        f"back by {limit['reason']}: waiting here to continue it",
                    )
            elif status is RunStatus.SLEEPING and due is not None:
                wake = due if wake is None else min(wake, due)
            elif step is not None and await _served(engine, step.rpartition("@")[2]):
                held = True  # its step's report wakes it: then it is due, and goes on here
                name, _, queue = step.rpartition("@")
                _tell(
                    console,
                    told,
                    f"{run.run_id} waits for child run {run_id}, WAITING for "
                    f"a worker of step queue '{queue}' to run step '{name}'; a live worker "
                    "serves it: waiting here for it",
                )
    if went_on:
        return True
    if wake is None and not held:
        return False
    if wake is not None:
        _tell(
            console,
            told,
            f"{run.run_id} waits for a child run that sleeps until "
            f"{words.when(wake)}: waiting here to continue it",
        )
    pause = LOOK_EVERY if wake is None else min(LOOK_EVERY, max(0.0, wake - engine.clock.now()))
    try:
        await engine.control.wait(run.run_id, timeout=pause)
    except TimeoutError:
        pass
    return True


def _tell(console: Console, told: set[object], line: str) -> None:
    """Print `run LINE` once (a wait told about already is not told again)."""
    if line not in told:
        told.add(line)
        console.print(f"run {line}", markup=False)


def _step_wait(run: RunRecord) -> str | None:
    """`NAME@QUEUE` of the step queue attempt the run is parked on, if it is."""
    kind, _, what = (run.waiting_for or "").partition(":")
    waiting = RunStatus(run.status) is RunStatus.WAITING
    return what if waiting and kind == remote_steps.WAITING and "@" in what else None


async def _served(engine: Engine, queue: str) -> bool:
    """Whether a live worker serves step queue `queue` (or may: its row does not say)."""
    workers = await engine.control.store.read(worker_ops.list_workers())
    # Heartbeats carry the database's real time, whatever clock the engine keeps.
    return leases.serves_step_queue(workers, queue, time.time())
