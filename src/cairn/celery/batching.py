"""The messages a dispatcher's look makes: which Celery queue, and how many run ids each.

A message costs Celery and the broker the same whatever it names (its receipt, a pool
thread, its acknowledgement; on Redis round trips), more than a short run costs cairn, so
the runs a look finds for one Celery queue go several to a message. What a message must
look like on the wire is publishing.py's and messages.py's.
"""

from __future__ import annotations

# Celery queue of runs on no workflow queue; a run on workflow queue Q goes to "cairn.Q",
# an attempt sent to step queue S to "cairn.step.S".
DEFAULT_QUEUE = "cairn"
RUN = "run"
RUNS = "runs"  # a batch message: several run ids
STEP = "step"
# The most run ids in one message (unless a worker has more threads: `Host.batch`), and
# how many messages a look's runs for one Celery queue are spread over at least (other
# workers get their share; no more than there are live workers: `Host`), once there are
# FEW ids for each: a worker takes up to (its threads x its batch) runs, the ones beyond
# its slots waiting for one, and a message of fewer runs than its worker has free slots
# executes them all at once anyway.
BATCH = 8
BATCH_LIMIT = 1000  # the most ids a "cairn.runs" message may name (messages.py checks)
SPREAD = 4
FEW = 4

# (RUN or STEP, its id, Celery queue) or (RUNS, their ids, Celery queue).
Message = tuple[str, str | list[str], str]
Key = tuple[str, str, float]  # (run id, status, mark) or (task id, STEP, claims)


def celery_queue(queue: str | None) -> str:
    """The Celery queue a run's message goes to."""
    return DEFAULT_QUEUE if queue is None else f"{DEFAULT_QUEUE}.{queue}"


def step_celery_queue(queue: str) -> str:
    """The Celery queue of the attempts sent to step queue `queue`."""
    return f"{DEFAULT_QUEUE}.{STEP}.{queue}"


def batches(
    keys: list[tuple[Key, str]], *, most: int = BATCH, spread: int = SPREAD
) -> list[Message]:
    """The messages that publish `keys`: runs in batches of up to `most` per queue, steps alone.

    A queue's runs are spread over `spread` messages at least (SPREAD at most), or as
    many as hold FEW each.
    """
    messages: list[Message] = []
    runs: dict[str, list[str]] = {}
    for key, queue in keys:
        if key[1] == STEP:
            messages.append((STEP, key[0], queue))
        else:
            runs.setdefault(queue, []).append(key[0])
    for queue, ids in runs.items():
        parts = max(1, min(spread, SPREAD, len(ids) // FEW))
        size = min(most, -(-len(ids) // parts))
        for start in range(0, len(ids), size):
            chunk = list(dict.fromkeys(ids[start : start + size]))
            messages.append((RUN, chunk[0], queue) if len(chunk) == 1 else (RUNS, chunk, queue))
    return messages
