"""A private PostgreSQL server for the scenarios that stop and start it.

The shared server on 5432 serves every other test (and other sessions on this machine);
stopping it would fail them. This one lives in a temporary directory, owned by the
`postgres` user (the server refuses to run as root), on a free port.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from tests.chaos.harness import free_port


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def problem() -> str | None:
    """Why a private server cannot run here, or None."""
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "initdb/pg_ctl are not installed (Debian package postgresql)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user to own a private server"
    return None


class PgCluster:
    """initdb, start, stop and restart one throw-away server."""

    def __init__(self) -> None:
        # Not under pytest's tmp_path: its parents are private to root, out of the
        # postgres user's reach.
        self.home = Path(tempfile.mkdtemp(prefix="cairn-chaos-pg-"))
        self.dir = self.home / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.user = pwd.getpwnam("postgres")
        self.stops = 0

    def _as_postgres(self, *command: str, timeout: float = 60) -> None:
        def demote() -> None:
            os.setgid(self.user.pw_gid)
            os.setuid(self.user.pw_uid)

        subprocess.run(command, preexec_fn=demote, check=True, capture_output=True, timeout=timeout)

    def init(self) -> None:
        self.dir.mkdir()
        os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        os.chmod(self.home, 0o755)
        self._as_postgres(
            str(_bin("initdb")), "-D", str(self.dir), "-A", "trust", "-U", "postgres", "--no-sync"
        )
        with open(self.dir / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.dir}'\nfsync = off\n"
                "max_connections = 200\n"
            )
        self.start()

    def start(self) -> None:
        self._as_postgres(
            str(_bin("pg_ctl")), "-D", str(self.dir), "-l", str(self.dir / "log"), "-w", "start"
        )

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server; "immediate" drops every connection like a crash would."""
        self._as_postgres(str(_bin("pg_ctl")), "-D", str(self.dir), "-m", mode, "-w", "stop")
        self.stops += 1

    def outage(self, seconds: float) -> None:
        self.stop()
        time.sleep(seconds)
        self.start()

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already down
        shutil.rmtree(self.home, ignore_errors=True)


def private_cluster() -> PgCluster:
    reason = problem()
    if reason is not None:
        from tests.conftest import IN_CI

        if IN_CI:
            pytest.fail(f"CI=true but a private PostgreSQL cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    cluster = PgCluster()
    cluster.init()
    return cluster
