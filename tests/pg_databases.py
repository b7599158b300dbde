"""Fresh PostgreSQL databases for tests: copied one test ahead, dropped a few at a time.

Copying the migrated template (CREATE DATABASE ... TEMPLATE) takes 0.1 to 0.3 s, mostly
the server writing and syncing the copy, and each DROP DATABASE waits for a checkpoint
of its own. In the test's own time that is minutes over the suite's thousand PostgreSQL
tests. Here a thread copies the next test's database while a test runs, and drops the
used ones together, so that their checkpoints are shared. Each test still gets a
database no one has used, copied from the template; none is reused.

Each drop waiting together holds a connection of its own on the server, whose
`max_connections` (100) every test session on the machine shares: bursts of up to 15
connections in one `-n 2` session (two workers' eight), for the seconds a checkpoint
takes, beside its tests' own. Fewer at a time would share fewer checkpoints (each took
2 to 10 s on a loaded machine, and copies wait behind drops on this thread).
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future, ThreadPoolExecutor

DROPPED_TOGETHER = 8  # used databases left on the server before they are dropped


class Databases:
    """Copies of `template` on the server at `admin_url`, each handed out once."""

    def __init__(self, admin_url: str, template: str) -> None:
        self._admin_url = admin_url
        self._template = template
        # One thread, so copies and drops run in the order asked.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-databases")
        self._next: Future[str] = self._thread.submit(self._copy)
        self._used: list[str] = []
        self._drops: list[Future[None]] = []

    def take(self) -> str:
        """The name of a new copy of the template (and start copying the one after it)."""
        ready, self._next = self._next, self._thread.submit(self._copy)
        return ready.result()

    def give_back(self, name: str) -> None:
        """Drop database `name` soon, with whatever is still connected to it."""
        self._used.append(name)
        if len(self._used) >= DROPPED_TOGETHER:
            self._drops.append(self._thread.submit(self._drop_all, self._used))
            self._used = []

    def close(self) -> None:
        """Drop the copy no test took and those not dropped yet; raise what went wrong."""
        try:
            self._drop_all([*self._used, self._next.result()])
        finally:
            self._thread.shutdown(wait=True)
        for drop in self._drops:
            drop.result()

    def _copy(self) -> str:
        import psycopg  # the postgres extra: imported only where PostgreSQL is used

        name = f"cairn_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self._admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {self._template}")
        return name

    def _drop_all(self, names: list[str]) -> None:
        # Side by side: drops waiting at the same time share one checkpoint.
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            for done in [pool.submit(self._drop, name) for name in names]:
                done.result()

    def _drop(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self._admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
