"""`cairn worker --transport celery`: Celery's worker command, and its true exit status.

`Celery.worker_main` throws away the status Celery's worker ends with, so a worker that
stopped on an unrecoverable error would exit 0 and a supervisor that restarts on failure
would never restart it. `serve` runs the same command and returns that status.
"""

from __future__ import annotations

import os
from typing import Any


def worker_argv(queues: list[str], concurrency: int) -> list[str]:
    """Celery's worker command line for a cairn worker consuming `queues`."""
    return [
        "worker",
        *("--pool", "threads", "--concurrency", str(concurrency)),
        *("--queues", ",".join(queues), "--loglevel", "WARNING"),
        # cairn needs none of Celery's cluster chatter: no gossip, no start-up sync, no
        # event heartbeats (broker heartbeats stay on); remote control is off in the app.
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
        *("--hostname", f"cairn-{os.getpid()}@%h"),
    ]


def serve(app: Any, concurrency: int) -> int:
    """Run a Celery worker of `app` (cairn.celery.app) until it stops; its exit status."""
    from celery.bin.celery import celery as command

    # What Celery.start does, keeping the status click returns (standalone_mode=False).
    command.params[0].default = app
    try:
        code = command.main(args=worker_argv(app.cairn_queues, concurrency), standalone_mode=False)
    finally:
        command.params[0].default = None
    return code if isinstance(code, int) else 0
