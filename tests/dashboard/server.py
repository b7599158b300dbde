"""A `cairn dashboard` process: started on port 0, found by the line it announces."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.conftest import migrated

import cairn

SRC = Path(cairn.__file__).resolve().parents[1]
DEADLINE = 30.0  # seconds for the server to start; a healthy machine needs about one


def env_without_cairn(**extra: str) -> dict[str, str]:
    """The environment with no CAIRN_* setting, cairn's source on the path, and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


class Server:
    """A running dashboard process and what it wrote to stderr."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            found = re.search(r"(http://\S+?)/api/v1", line)
            if found and not self.url:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()  # the process ended: stop waiting

    def wait_ready(self) -> Server:
        if not self._ready.wait(DEADLINE) or not self.url:
            self.stop()
            pytest.fail(f"dashboard did not start: {self.stderr()}")
        return self

    @property
    def api(self) -> str:
        return f"{self.url}/api/v1"

    def stderr(self) -> str:
        return "\n".join(self.lines)

    def stop(self) -> int:
        """SIGTERM, and the exit code once it has shut down."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return self.proc.returncode


def start_server(
    url: str, cwd: Path, *extra: str, env: dict[str, str] | None = None, ready: bool = True
) -> Server:
    """`cairn dashboard --db URL --port 0 EXTRA...`, once it listens.

    The database is given cairn's schema first, as the worker beside a dashboard would:
    without workers, the dashboard refuses a database that has none.
    """
    migrated(url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn", "dashboard", "--db", url, "--port", "0", *extra],
        cwd=cwd,
        env=env or env_without_cairn(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = Server(proc)
    return server.wait_ready() if ready else server


def run_cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`cairn ARGS...` to completion."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "cairn", *args],
        cwd=cwd,
        env=env or env_without_cairn(),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert time.monotonic() - started < DEADLINE
    return proc
