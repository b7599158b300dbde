"""`GET /health`: 200 while the database answers, 503 when it does not; for load balancers.

It needs no token (load balancers and orchestrators hold none), so it says nothing but
that: the status and the schema version. The database must answer within DEADLINE, so a
probe never hangs on an outage (the store would otherwise retry a lost connection).

The answer comes at DEADLINE even when the read cannot end then (see `target.within`:
the read is cut off and left to end in the background).
"""

from __future__ import annotations

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import Reply, UnansweredError
from cairn.dashboard.target import Target
from cairn.errors import StoreUnavailable
from cairn.store.programs import lifecycle

DEADLINE = 2.0  # seconds the database has to answer


async def health(target: Target, call: Call) -> Reply:
    """`{"status": "ok", "schema_version": N}`; StoreUnavailable (503) otherwise."""
    call.query(())
    try:
        version = await target(
            lambda control: control.store.read(lifecycle.schema_version()), deadline=DEADLINE
        )
    except UnansweredError:
        raise StoreUnavailable(f"the database did not answer within {DEADLINE:g}s") from None
    except Exception as exc:
        # Its text may name hosts or paths: the answer gives none of it (replies.failure).
        raise StoreUnavailable(f"the database failed to answer: {exc}") from exc
    return Reply({"status": "ok", "schema_version": version})


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
