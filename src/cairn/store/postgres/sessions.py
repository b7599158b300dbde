"""cairn's PostgreSQL sessions: named, bounded when idle in a transaction, found when lost.

A transaction step's session whose client vanished before COMMIT (a network cut the
server did not see) stays "idle in transaction" on the server, holding the FOR KEY SHARE
that fences its run row. The run goes back to PENDING, and every claim's FOR UPDATE SKIP
LOCKED skips it until the server ends the session: by default only when TCP keepalives
give up, about two hours. So:

- every connection of cairn's pools sets `idle_in_transaction_session_timeout` when it
  connects (`IDLE_IN_TRANSACTION_TIMEOUT` seconds unless configured; a URL whose
  `options` set it keeps its own): the server itself ends such a session, and with it
  the lock, within that time;
- every connection is named (`application_name` "cairn", unless the URL names it), and a
  step's transaction names its worker ("cairn:<worker id>") while it is open;
- a claim that leaves candidates behind looks, now and then (`Sessions.check`), for
  PENDING runs locked by a session idle in transaction, and gives them the reason
  "locked by a session of worker W since T" (their `waiting_for`, cleared by the claim
  that takes the run), with a warning in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cairn.store.postgres import connections
from cairn.store.postgres.connections import Conn, Db

log = logging.getLogger("cairn.store.postgres")

# Seconds a session may stay idle inside a transaction before the server ends it. A
# transaction step's function must not leave its transaction idle that long.
IDLE_IN_TRANSACTION_TIMEOUT = 60.0
APPLICATION = "cairn"
_SETTING = "idle_in_transaction_session_timeout"
# A claim looks for locked runs at most this often (seconds), and counts a session as lost
# once it has been idle in its transaction this long.
CHECK_EVERY = 2.0
IDLE_FOR = 1.0
LOCKED_BY = "locked by a session of "

# Sessions of this database idle in a transaction (holding its xid) for IDLE_FOR seconds.
_IDLE_SESSIONS = (
    "SELECT backend_xid::text, application_name, pid, backend_start, state_change "
    "FROM pg_stat_activity WHERE datname = current_database() "
    "AND state IN ('idle in transaction', 'idle in transaction (aborted)') "
    "AND backend_xid IS NOT NULL AND state_change < clock_timestamp() - %s * interval '1 second'"
)
# Due PENDING runs whose row lock is held by one of those transactions.
_LOCKED_RUNS = (
    "SELECT run_id, xmax::text, waiting_for FROM runs WHERE status = 'PENDING' "
    "AND (wake_at IS NULL OR wake_at <= %s) AND xmax::text = ANY(%s)"
)
# Skips a row a live claim holds (FOR UPDATE); a key-share lock does not stop it.
_SET_REASON = (
    "UPDATE runs SET waiting_for = %s WHERE run_id IN (SELECT run_id FROM runs "
    "WHERE run_id = %s AND status = 'PENDING' FOR NO KEY UPDATE SKIP LOCKED)"
)


def conninfo(base: str) -> str:
    """`base` with cairn's `application_name`, unless it names its sessions itself."""
    params = conninfo_to_dict(base)
    params.setdefault("application_name", APPLICATION)
    return make_conninfo("", **params)


def idle_timeout(base: str, configured: float | None) -> float | None:
    """The timeout (seconds) to set on connect; None when the URL's `options` set it."""
    options = str(conninfo_to_dict(base).get("options") or "")
    if _SETTING in options or configured is None or configured <= 0:
        return None
    return configured


def _setting(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


async def configure(conn: Conn, seconds: float | None) -> None:
    """Set the idle timeout on a new pooled connection (a psycopg_pool `configure`)."""
    if seconds is not None:
        await conn.execute("SELECT set_config(%s, %s, false)", (_SETTING, _setting(seconds)))


def configure_sync(conn: Any, seconds: float | None) -> None:
    """`configure`, for a blocking connection."""
    if seconds is not None:
        conn.execute("SELECT set_config(%s, %s, false)", (_SETTING, _setting(seconds)))


def worker_name(owner: str) -> str:
    """What a step's transaction names its session: "cairn:<worker id>"."""
    return f"{APPLICATION}:{owner}"[:63]  # the server keeps 63 bytes


def reason(application_name: str, pid: int, since: datetime) -> str:
    """The reason shown for a run locked by session `pid`."""
    name = application_name or "?"
    who = (
        f"worker {name[len(APPLICATION) + 1 :]}"
        if name.startswith(APPLICATION + ":")
        else f"session {name!r}"
    )
    at = since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return f"{LOCKED_BY}{who} since {at} (pid {pid}, idle in transaction)"


class Sessions:
    """Finds runs locked by lost sessions for a store's claims (see the module)."""

    def __init__(self) -> None:
        self._last = 0.0

    async def check(self, db: Db, now: float) -> list[tuple[str, str]]:
        """Mark due PENDING runs locked by idle sessions; (run id, reason) of those marked.

        Does nothing if it looked less than CHECK_EVERY seconds ago.
        """
        clock = time.monotonic()
        if clock - self._last < CHECK_EVERY:
            return []
        self._last = clock
        sessions = await connections.retrying(
            db, lambda conn: _all(conn, _IDLE_SESSIONS, (IDLE_FOR,))
        )
        if not sessions:
            return []
        by_xid = {
            str(xid): (str(name or ""), int(pid), since) for xid, name, pid, _, since in sessions
        }
        locked = await connections.retrying(
            db, lambda conn: _all(conn, _LOCKED_RUNS, (now, list(by_xid)))
        )
        marked = []
        for run_id, xid, waiting_for in locked:
            name, pid, since = by_xid[str(xid)]
            text = reason(name, pid, since)
            if waiting_for != text:
                await connections.retrying(db, _set_reason(text, str(run_id)))
                log.warning(
                    "cairn: run %s is %s; claims skip it until that session ends (the "
                    "server ends it after idle_in_transaction_session_timeout)",
                    run_id,
                    text,
                )
            marked.append((str(run_id), text))
        return marked


def _set_reason(text: str, run_id: str) -> Callable[[Conn], Awaitable[None]]:
    async def work(conn: Conn) -> None:
        await conn.execute(_SET_REASON, (text, run_id))

    return work


async def _all(conn: Conn, text: str, params: Sequence[Any]) -> list[Any]:
    cursor = await conn.execute(text, params)
    return await cursor.fetchall()
