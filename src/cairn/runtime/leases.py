"""Worker identity and liveness: heartbeats everywhere, process checks only where provable.

A worker is dead once its heartbeat is older than its own lease by the database's clock
(the claim decides that in SQL). A worker that can prove a neighbour's process is gone
expires it at once, so a restarted process recovers a killed one's runs without waiting
out the lease; it can prove that only for a process in its own PID namespace on the same
boot of the same kernel. A host name proves nothing: containers with host networking and
cloned machines share one, and a pid means nothing outside its namespace.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any

from cairn.store.records import RunRecord, WorkerRecord

HOST = socket.gethostname()


def new_worker_id() -> str:
    """A unique id that also says where the worker runs (host:pid:random)."""
    return f"{HOST}:{os.getpid()}:{secrets.token_hex(6)}"


def _read(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read().strip()
    except OSError:
        return None


def _start_ticks(pid: int | str) -> int | None:
    """When process `pid` started, in clock ticks since boot (None if unknown or gone)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Process:
    """Which process a worker is: its kernel boot, PID namespace, pid and start time."""

    boot_id: str
    pid_ns: str
    pid: int
    start_ticks: int

    def __str__(self) -> str:
        return f"{self.boot_id}/{self.pid_ns}/{self.pid}/{self.start_ticks}"

    @classmethod
    def parse(cls, text: str | None) -> Process | None:
        """The identity stored as `str(process)`, or None."""
        parts = (text or "").split("/")
        if len(parts) != 4:
            return None
        try:
            return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))
        except ValueError:
            return None


def this_process() -> Process | None:
    """This process's identity, or None where it cannot be known for sure.

    None without Linux's /proc, or when /proc belongs to another PID namespace than ours
    (`unshare --pid` without `--mount-proc`): pids read there would name other processes.
    """
    boot_id = _read("/proc/sys/kernel/random/boot_id")
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
        seen_as = int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return None
    pid = os.getpid()
    ticks = _start_ticks("self")
    if boot_id is None or ticks is None or seen_as != pid:
        return None
    return Process(boot_id, pid_ns, pid, ticks)


def provably_dead(worker: WorkerRecord, me: Process | None) -> bool:
    """True only if `worker`'s process is certainly gone.

    That is a neighbour in our PID namespace (and boot) whose pid is free, or taken by a
    process that started later.
    """
    theirs = Process.parse(worker.process)
    if me is None or theirs is None:
        return False
    if (theirs.boot_id, theirs.pid_ns) != (me.boot_id, me.pid_ns):
        return False  # another machine, boot or PID namespace: only its heartbeat tells
    return _start_ticks(theirs.pid) != theirs.start_ticks


def dead_neighbours(workers: list[WorkerRecord], *, me: str, process: Process | None) -> list[str]:
    """Ids of live-looking workers whose process is provably gone (see `provably_dead`)."""
    return [
        w.worker_id
        for w in workers
        if w.worker_id != me and w.heartbeat_at > 0 and provably_dead(w, process)
    ]


def may_judge_heartbeats(*, since: float, trouble_at: float, lease: float) -> bool:
    """True if a worker may take runs of others whose heartbeat merely looks too old.

    Only once it has itself seen the database answer for a whole lease: after a start
    (`since`, time.monotonic()) or after trouble (an outage, a long-held lock), the other
    workers' heartbeats could not be written either and are old for that reason alone.
    """
    now = time.monotonic()
    return now - since >= lease and now - trouble_at >= lease


def alive(worker: WorkerRecord, now: float) -> bool:
    """True if `worker` beat within its lease at `now` (this process's clock: skew counts)."""
    return worker.heartbeat_at > 0 and now - worker.heartbeat_at <= worker.lease


def known_workflows(workers: list[WorkerRecord]) -> set[str] | None:
    """The workflows live `workers` take from the queue.

    None if there is no live worker, or one does not say (it may know any workflow).
    """
    live = [worker for worker in workers if worker.heartbeat_at > 0]
    if not live or any(worker.workflows is None for worker in live):
        return None
    return {name for worker in live for name in json.loads(worker.workflows or "[]")}


def queues_column(runs: list[str] | None, steps: list[str]) -> str:
    """A worker's `queues` column: the run queues it serves (None: every one), its step queues."""
    return json.dumps({"runs": runs, "steps": steps})


def step_queues(worker: WorkerRecord) -> list[str] | None:
    """The step queues `worker` serves; None if its row does not say (an older cairn)."""
    try:
        found = json.loads(worker.queues or "")
    except ValueError:
        return None
    steps = found.get("steps") if isinstance(found, dict) else None
    return [str(name) for name in steps] if isinstance(steps, list) else None


def serves_step_queue(workers: list[WorkerRecord], queue: str, now: float) -> bool:
    """True if a live worker serves step queue `queue`, or may (its row does not say)."""
    for worker in workers:
        if alive(worker, now):
            steps = step_queues(worker)
            if steps is None or queue in steps:
                return True
    return False


def run_queues(worker: WorkerRecord) -> list[str] | None:
    """The run queues `worker` claims from; None: every one (or its row does not say)."""
    try:
        found = json.loads(worker.queues or "")
    except ValueError:
        return None
    runs = found.get("runs") if isinstance(found, dict) else found
    return [str(name) for name in runs] if isinstance(runs, list) else None


def orphaned(workers: list[WorkerRecord], run: RunRecord, now: float) -> dict[str, Any] | None:
    """Of a RUNNING run whose owner is not live at `now`, who can take it over; else None.

    The owner is `gone` (no worker row), `dead` (a neighbour saw its process end) or
    `silent` (no heartbeat within its lease, `silent_for` seconds since its last).
    `takers` says whether a live worker claims runs of its queue and workflow, as a
    claim filters them (a run on no queue is taken only by a worker of every queue);
    `blocked` names what none serves ("queue", "workflow") when there are none.
    """
    if run.status != "RUNNING" or run.owner is None:
        return None
    owner = next((w for w in workers if w.worker_id == run.owner), None)
    if owner is not None and alive(owner, now):
        return None
    beat = None if owner is None else owner.heartbeat_at or owner.last_heartbeat_at
    state = "gone" if owner is None else "silent" if owner.heartbeat_at > 0 else "dead"
    live = [w for w in workers if alive(w, now) and w.worker_id != run.owner]
    on_queue = [w for w in live if _takes(run_queues(w), run.queue)]
    takers = [w for w in on_queue if _takes(_names(w.workflows), run.workflow)]
    return {
        "owner": run.owner,
        "owner_state": state,
        "silent_for": None if beat is None else max(0.0, now - beat),
        "lease": None if owner is None else owner.lease,
        "takers": bool(takers),
        "blocked": None if takers else "workflow" if on_queue else "queue",
    }


def _names(text: str | None) -> list[str] | None:
    try:
        found = json.loads(text or "")
    except ValueError:
        return None
    return [str(name) for name in found] if isinstance(found, list) else None


def _takes(served: list[str] | None, name: str | None) -> bool:
    return served is None or (name is not None and name in served)
