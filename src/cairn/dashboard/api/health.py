"""`GET /health`: 200 while the database answers, 503 when it does not; for load balancers.

It needs no token (load balancers and orchestrators hold none), so it says nothing but
that: the status and the schema version. The database must answer within DEADLINE, so a
probe never hangs on an outage (the store would otherwise retry a lost connection).

The answer comes at DEADLINE even when the read cannot end then: cancelling a query on
a frozen connection (a hung proxy, a stopped backend) waits until the store's stall
watch drops that connection, seconds later. The read is cut off and left to end in the
background; the probe does not wait for it.
"""

from __future__ import annotations

import asyncio

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target
from cairn.errors import StoreUnavailable
from cairn.store.programs import lifecycle

DEADLINE = 2.0  # seconds the database has to answer


# Reads cut off at the deadline, still ending (held so that they are not collected).
_CUT_OFF: set[asyncio.Future[int]] = set()


async def health(target: Target, call: Call) -> Reply:
    """`{"status": "ok", "schema_version": N}`; StoreUnavailable (503) otherwise."""
    call.query(())
    read = asyncio.ensure_future(
        target(lambda control: control.store.read(lifecycle.schema_version()))
    )
    try:
        done, _ = await asyncio.wait({read}, timeout=DEADLINE)
    finally:
        if not read.done():  # the deadline passed, or the caller went away
            read.cancel()
            _CUT_OFF.add(read)
            read.add_done_callback(_ended)
    if not done:
        raise StoreUnavailable(f"the database did not answer within {DEADLINE:g}s")
    try:
        version = read.result()
    except Exception as exc:
        # Its text may name hosts or paths: the answer gives none of it (replies.failure).
        raise StoreUnavailable(f"the database failed to answer: {exc}") from exc
    return Reply({"status": "ok", "schema_version": version})


def _ended(read: asyncio.Future[int]) -> None:
    _CUT_OFF.discard(read)
    if not read.cancelled():
        read.exception()  # seen: the probe has answered already


OPERATIONS = (
    Operation(
        "GET",
        "/health",
        health,
        "Whether the database answers (needs no dashboard token)",
        errors=(503,),
        public=True,
    ),
)
