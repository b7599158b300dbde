"""WAL checkpoints on a thread of their own, off the commit path.

SQLite normally checkpoints inside whichever commit pushes the WAL past 1000 pages, so
one step in a thousand pays for copying the WAL into the database file. Here the writer
connection never checkpoints; a daemon thread with its own connection does, passively
(never blocking writers), whenever the WAL has grown. sqlite3 releases the GIL meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading

WAL_BYTES = 4 * 1024 * 1024  # checkpoint once the WAL holds about 1000 pages


class Checkpointer:
    """Checkpoints `path`'s WAL in the background until `stop()`."""

    def __init__(self, path: str, *, interval: float = 0.2) -> None:
        self.path = path
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cairn-checkpoint", daemon=True)

    def start(self) -> None:
        """Begin checkpointing."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after a last checkpoint."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        try:
            while not self._stop.wait(self.interval):
                self._checkpoint(conn, force=False)
            self._checkpoint(conn, force=True)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection, *, force: bool) -> None:
        try:
            size = os.path.getsize(self.path + "-wal")
        except OSError:
            return
        if force or size >= WAL_BYTES:
            # A busy or locked database just means: try again next time.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
