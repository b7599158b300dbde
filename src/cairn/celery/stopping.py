"""How a Celery worker's warm shutdown ends: bounded, once cairn's engine has closed.

Celery's warm shutdown says goodbye to the broker (it cancels its consumers and closes
the connection), waiting for each answer up to the broker timeout: a broker that keeps
TCP open but answers nothing held the exit for a timeout per call (three on RabbitMQ).
Nothing cairn needs is left by then: its runs are handed back (or left to their lease,
said in a line), and its messages were acknowledged as their tasks started. So once the
engine has closed, Celery gets LINGER seconds more; then the process exits with status 0
(a warm shutdown's) and one line saying why.

The other way round, the interpreter must not begin its exit while the engine still hands
runs back: that shuts the event loop's thread pool down under the hand-back. Celery's
main thread therefore waits for the engine's stop at the end of its own.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from cairn.observability import logcontext

log = logcontext.logger("cairn.celery")

# Seconds Celery's shutdown may go on once the engine has closed.
LINGER = 3.0


def bound_exit(stopper: threading.Thread, linger: float = LINGER) -> threading.Thread:
    """Exit the process `linger` seconds after `stopper` (the engine's stop) has ended.

    A daemon thread, returned: a process that exits sooner ends it unnoticed.
    """

    def watch() -> None:
        stopper.join()
        threading.Event().wait(linger)
        log.warning(
            "cairn: Celery's shutdown still waits on the broker %gs after the engine "
            "closed (its runs are handed back); exiting without it",
            linger,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
        os._exit(0)

    watcher = threading.Thread(target=watch, name="cairn-celery-exit", daemon=True)
    watcher.start()
    return watcher
