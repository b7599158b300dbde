"""Worker identity and liveness: heartbeats across machines, process checks on this one.

A worker on another machine is dead once its heartbeat is older than the lease. A worker on
this machine is dead as soon as its process is gone, so a restarted process recovers the
runs of a killed one at once instead of waiting out the lease.
"""

from __future__ import annotations

import json
import os
import socket
import uuid

from cairn.store.records import WorkerRecord

HOST = socket.gethostname()


def new_worker_id() -> str:
    """A unique id that also says where the worker runs."""
    return f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _boot_time() -> float | None:
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


_BOOT = _boot_time()
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_started_at(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), None if unknown or gone."""
    if _BOOT is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return _BOOT + int(fields[19]) / _TICKS


def process_alive(pid: int, registered_at: float) -> bool:
    """True if `pid` is alive and is the same process that registered at `registered_at`."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    started = process_started_at(pid)
    # A process that started after the worker registered is a reused pid.
    return started is None or started <= registered_at + 2.0


def dead_local_workers(workers: list[WorkerRecord], *, me: str) -> list[str]:
    """Ids of workers on this machine whose process is gone."""
    return [
        w.worker_id
        for w in workers
        if w.host == HOST
        and w.worker_id != me
        and w.heartbeat_at > 0
        and not process_alive(w.pid, w.started_at)
    ]


def known_workflows(workers: list[WorkerRecord]) -> set[str] | None:
    """The workflows live `workers` take from the queue.

    None if there is no live worker, or one does not say (it may know any workflow).
    """
    live = [worker for worker in workers if worker.heartbeat_at > 0]
    if not live or any(worker.workflows is None for worker in live):
        return None
    return {name for worker in live for name in json.loads(worker.workflows or "[]")}
