"""SIGSTOP for tests that freeze a process, and SQLite's one lock that a freeze can keep.

A process frozen inside a SQLite write transaction keeps the database's write lock, and
that lock has no lease: every other writer waits for it until the process thaws, so no
worker could take its runs over. A test that means "a worker stopped past its lease" must
stop it outside a write (PostgreSQL has no such lock: its row locks go with the session).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path


def process_state(pid: int) -> str:
    """The one-letter state of process `pid` ("T" once stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def stop(pid: int) -> None:
    """SIGSTOP `pid` and return once it is stopped (the signal lands asynchronously)."""
    os.kill(pid, signal.SIGSTOP)
    while process_state(pid) not in ("T", "t", "?"):
        time.sleep(0.001)


def sqlite_writable(url: str, *, wait: float = 0.0) -> bool:
    """Whether a writer can take `url`'s write lock within `wait` seconds (SQLite only)."""
    probe = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=wait)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:  # database is locked: the stopped process holds it
        return False
    finally:
        probe.close()


def stop_outside_a_write(pid: int, url: str) -> int:
    """Stop `pid` at a moment it holds no SQLite write lock; return the tries it took.

    Each try that finds the lock held thaws the process for a few milliseconds, so the
    stop still lands close to the moment the test chose.
    """
    tries = 1
    stop(pid)
    while url.startswith("sqlite") and not sqlite_writable(url):
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.002)
        tries += 1
        stop(pid)
    return tries
