"""Child Python processes a test starts, kills with SIGKILL and reaps.

The real-process tests (crash, transaction, seed, schedule, worker) each run a script of
their own against a database; what they share is here: how a child is started (cairn from
this checkout, no CAIRN_DATABASE_URL of the caller's), how a test waits for what the child
left behind without outliving it, and how a child is killed mid-run.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NoReturn

import pytest

import cairn

SRC = Path(cairn.__file__).resolve().parents[1]


class Spawned:
    """The processes one test started; `close` kills and reaps any left."""

    def __init__(self, *, deadline: float) -> None:
        self.deadline = deadline  # seconds a wait may take on a slow machine
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, script: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
        """`start_script`, the process kept to be reaped by `close`."""
        proc = start_script(script, *args, cwd=cwd)
        self.procs.append(proc)
        return proc

    def wait_for(
        self,
        proc: subprocess.Popen[str],
        what: str,
        ready: Callable[[], object],
        *,
        every: float = 0.002,
    ) -> None:
        """Poll `ready` until it holds; fail if `proc` exits or the deadline passes."""
        deadline = time.monotonic() + self.deadline
        while not ready():
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"process exited ({proc.returncode}) before {what}: {err[-2000:]}")
            if time.monotonic() > deadline:
                self.stuck(f"no {what} within {self.deadline}s")
            time.sleep(every)  # polling interval, not synchronisation

    def stuck(self, message: str) -> NoReturn:
        """Fail with `message` and what each process printed: the only trace of why."""
        tails = []
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)  # a stopped process cannot die until then
                proc.kill()
            _, err = proc.communicate(timeout=10)
            tails.append(f"--- pid {proc.pid} (exit {proc.returncode}):\n{err[-1500:]}")
        pytest.fail("\n".join([message, *tails]))

    @staticmethod
    def kill(proc: subprocess.Popen[str]) -> None:
        """SIGKILL: no cleanup, no atexit, no finally; then reap it and close its pipes."""
        proc.kill()
        proc.communicate(timeout=10)
        assert proc.returncode == -9

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            if proc.stdout is not None and not proc.stdout.closed:
                proc.communicate(timeout=10)  # reap it and close its pipes


def start_script(script: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
    """Run `script` with `args` under this interpreter, with cairn from this checkout."""
    path = [str(SRC), str(script.parent), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    env.pop("CAIRN_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_only_rows(db: Path, sql: str, params: Iterable[object] = ()) -> list[tuple[object, ...]]:
    """Rows of an SQLite file as it is on disk (read-only; empty until its tables exist)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return []  # no database yet
    try:
        return conn.execute(sql, tuple(params)).fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        return []
    finally:
        conn.close()


def effect_lines(effects: Path) -> list[str]:
    """The lines of a side-effect file ("work 3 pid=123"); none before the first."""
    if not effects.exists():
        return []
    return effects.read_text(encoding="utf-8").splitlines()


def effect_counts(effects: Path) -> Counter[str]:
    """How often each side effect happened ("work 3", "work 7 failed"), whatever the pid."""
    return Counter(line.rsplit(" pid=", 1)[0] for line in effect_lines(effects))


def effect_pids(effects: Path, effect: str) -> set[str]:
    """The processes that produced `effect` (the pids its lines end with)."""
    return {
        pid
        for text, _, pid in (line.rpartition(" pid=") for line in effect_lines(effects))
        if text == effect
    }
