"""PostgreSQL connections that stop answering: found, checked with the server, dropped.

A dead peer (a failover moving a virtual IP, a NAT or load balancer dropping the flow)
leaves a connection half-open: no error and no reply, for ever. Every connection cairn
opens asks the kernel to notice (`DEAD_PEER`: TCP keepalives and a TCP user timeout).
What still answers at the TCP level but never replies (a hung proxy or pooler) is found
here: a wait for a reply older than `stalled_after` has its server backend looked up on
a new connection. A backend still executing (a long statement, a wait for a lock) is left
alone. One that is idle (the reply was lost, or the request never arrived), or idle in a
transaction nobody will finish (terminated, so that its locks go), means the connection
is dead: its socket is shut down, its waiter meets a lost connection, and the work is
retried on a new one as after any lost connection (a write that may have landed is
checked first). A server that cannot be reached to ask is left to the TCP timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cairn import cancelling
from cairn.store.waits import Waits

log = logging.getLogger("cairn.store.postgres")

# libpq parameters every connection gets unless its URL says otherwise: connecting gives
# up after 10 s; an idle connection is probed after 5 s and dropped after 2 unanswered
# probes 2 s apart; data unacknowledged for 10 s ends the connection. A long statement
# is not cut: the server's kernel acknowledges what was sent, and answers the probes.
DEAD_PEER: dict[str, Any] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 10_000,
}

# A backend in these states is working on what it was sent: wait for it.
_WORKING = ("active", "fastpath function call")
# How long asking the server about stalled backends may take, at least.
_ASKING = 5.0


def with_dead_peer_detection(conninfo: str) -> str:
    """`conninfo` with `DEAD_PEER`'s parameters wherever it does not set them itself."""
    params = conninfo_to_dict(conninfo)
    for name, value in DEAD_PEER.items():
        params.setdefault(name, value)
    return make_conninfo("", **params)


def shut_down(conn: Any) -> None:
    """Shut a connection's socket down: whoever waits on it meets a lost connection."""
    with contextlib.suppress(psycopg.Error, OSError):
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


def _backend_pid(conn: Any) -> int | None:
    try:
        pid = conn.pgconn.backend_pid
    except psycopg.Error:
        return None
    return int(pid) if pid else None


class StallWatch:
    """Checks the connections whose waits last longer than `after` (see the module)."""

    def __init__(
        self,
        conninfo: str,
        where: str,
        waits: Waits,
        *,
        after: float,
        on_dropped: Callable[[], Awaitable[None]],
    ) -> None:
        self._conninfo = conninfo
        self._where = where
        self._waits = waits
        self.after = after
        self._on_dropped = on_dropped
        self._tick = min(1.0, after / 2)
        self._working: dict[int, float] = {}  # id(conn) -> when its backend was found busy
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start watching in the running loop."""
        self._task = asyncio.create_task(self._watch(), name="cairn-pg-stalls")

    async def stop(self) -> None:
        """Stop watching."""
        if self._task is not None:
            await cancelling.stop([self._task])  # its check may wait on a silent server
            self._task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._tick)
            try:
                await self.check()
            except Exception as exc:  # a bug here must not end the watching
                log.warning(
                    "cairn: checking stalled connections to %s failed: %s", self._where, exc
                )

    async def check(self) -> int:
        """Check the stalled connections now; how many were found dead and dropped."""
        now = time.monotonic()
        stalled: dict[int, tuple[Any, float, int]] = {}
        for wait in self._waits.older_than(self.after):
            key = id(wait.conn)
            if key in stalled or self._working.get(key, 0.0) > now - self.after:
                continue  # seen, or found busy a moment ago: ask again later
            pid = _backend_pid(wait.conn)
            if pid is not None:
                stalled[key] = (wait.conn, wait.since, pid)
        self._working = {k: t for k, t in self._working.items() if t > now - self.after}
        if not stalled:
            return 0
        states = await self._states([pid for _, _, pid in stalled.values()])
        if states is None:
            return 0  # the server cannot be asked: the TCP timeouts end a dead connection
        dropped = 0
        for key, (conn, since, pid) in stalled.items():
            state = states.get(pid)
            if state in _WORKING:
                self._working[key] = now
                continue
            shut_down(conn)
            dropped += 1
            log.warning(
                "cairn: a connection to %s got no reply for %.1f s and its server backend "
                "%s: dropped; its work goes on a new connection",
                self._where,
                now - since,
                "is gone"
                if state is None
                else f"is {state!r} (terminated)"
                if state.startswith("idle in transaction")
                else f"is {state!r} (the reply was lost)",
            )
        if dropped:
            await self._on_dropped()
        return dropped

    async def _states(self, pids: list[int]) -> dict[int, str] | None:
        """The state of each backend (absent: gone); None if the server cannot be asked."""
        asking = max(_ASKING, self.after)
        try:
            async with asyncio.timeout(asking):
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                async with conn:
                    cursor = await conn.execute(
                        "SELECT pid, state FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
                    )
                    rows = await cursor.fetchall()
                    states = {int(pid): str(state or "unknown") for pid, state in rows}
                    # Nobody will end these transactions: end them, and free their locks.
                    orphans = [p for p, s in states.items() if s.startswith("idle in transaction")]
                    if orphans:
                        await conn.execute(
                            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
                            (orphans,),
                        )
                    return states
        except (psycopg.Error, OSError, TimeoutError) as exc:
            # A frozen network is a TimeoutError, whose own text is empty.
            why = f"no answer within {asking:g} s" if isinstance(exc, TimeoutError) else exc
            log.warning("cairn: cannot check stalled connections to %s: %s", self._where, why)
            return None
