"""Schedules across real processes: two engines fire each tick once; catch-up after a crash.

Each run appends its tick and process id to a file outside the database (see
schedule_worker.py), so a tick that ran twice, or never, shows there.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from tests.conftest import PG_URL, pg_problem, require_postgres

import cairn

from .spawned import start_script

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("schedule_worker.py")
# How many one-second ticks the two-engine test watches. The issue asks for a minute;
# CAIRN_SCHEDULE_SOAK_SECONDS shortens it for a quick local run.
SOAK = int(os.environ.get("CAIRN_SCHEDULE_SOAK_SECONDS", "60"))
DOWN = 5.0  # seconds no worker runs in the catch-up test: several ticks are missed


class Workspace:
    """A database, the effects file, a stop file, and the engine processes."""

    def __init__(self, root: Path, url: str) -> None:
        self.url = url
        self.effects = root / "effects.txt"
        self.stop = root / "stop"
        self.root = root
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, *extra: str) -> subprocess.Popen[str]:
        args = (self.url, str(self.effects), str(self.stop), *extra)
        proc = start_script(SCRIPT, *args, cwd=self.root)
        self.procs.append(proc)
        return proc

    def lines(self) -> list[tuple[float, int]]:
        """(tick, pid) of every run that recorded its effect, in file order."""
        if not self.effects.exists():
            return []
        found = []
        for line in self.effects.read_text(encoding="utf-8").splitlines():
            tick, pid = line.split()
            found.append((datetime.fromisoformat(tick).timestamp(), int(pid)))
        return found

    def wait_for(self, what: str, ready: Callable[[], bool], *, within: float) -> None:
        """Poll `ready`; fail if an engine process exits or `within` seconds pass."""
        deadline = time.monotonic() + within
        while not ready():
            for proc in self.procs:
                if proc.poll() is not None and proc.returncode != -9:
                    _, err = proc.communicate()
                    pytest.fail(f"engine exited ({proc.returncode}) before {what}: {err[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {within}s")
            time.sleep(0.05)  # polling interval, not synchronisation

    def stop_all(self) -> None:
        self.stop.touch()
        for proc in self.procs:
            if proc.returncode == -9:
                continue
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err[-2000:]

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()

    def runs(self) -> dict[float, cairn.RunStatus]:
        """Status of each run of the schedule, by tick (from its derived run id)."""
        with cairn.Client(self.url) as client:
            page = client.list_runs(workflow="soak.tick", limit=10_000)
        found = {}
        for run in page:
            assert run.run_id.startswith("sched:soak:"), run.run_id
            stamp = run.run_id.removeprefix("sched:soak:").replace("Z", "+00:00")
            found[datetime.fromisoformat(stamp).timestamp()] = run.status
        return found


@pytest.fixture
def ws(tmp_path: Path, store_url: str) -> Iterator[Workspace]:
    space = Workspace(tmp_path, store_url)
    yield space
    space.kill_all()


@pytest.fixture(scope="module")
def soaks(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Workspace]]:
    """Two engines on each store, all started at once: the stores' minutes of ticks overlap.

    A soak is a minute of waiting for the clock, one store's as good as the other's; side
    by side, the two take one minute rather than two. Each store's soak has a database
    and processes of its own.
    """
    urls = {"sqlite": f"sqlite:///{tmp_path_factory.mktemp('soak-db') / 'cairn.db'}"}
    databases = None
    if pg_problem() is None:  # else the postgres test fails (CI) or skips, as it says
        databases = request.getfixturevalue("pg_databases")
        database = databases.take()
        urls["postgres"] = f"{PG_URL.rsplit('/', 1)[0]}/{database}"
    spaces = {}
    for store, url in urls.items():
        spaces[store] = Workspace(tmp_path_factory.mktemp(f"soak-{store}"), url)
        spaces[store].spawn("--overlap", "allow")
        spaces[store].spawn("--overlap", "allow")
    yield spaces
    for space in spaces.values():
        space.kill_all()
    if databases is not None:
        databases.give_back(database)


def completed_runs(ws: Workspace) -> int:
    return sum(status == cairn.RunStatus.COMPLETED for status in ws.runs().values())


def contiguous(ticks: list[float]) -> bool:
    return all(b - a == 1.0 for a, b in itertools.pairwise(ticks))


@pytest.mark.timeout(SOAK + 90)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_two_engines__exactly_one_run_per_tick(soaks: dict[str, Workspace], store: str) -> None:
    if store == "postgres":
        require_postgres()
    ws = soaks[store]
    first, second = ws.procs
    ws.wait_for(
        f"{SOAK} ticks run", lambda: len({t for t, _ in ws.lines()}) >= SOAK, within=SOAK + 45
    )
    # A tick's effect is written before its run completes: on a loaded machine the last
    # one was still finishing when the engines were stopped (59 completed of 60).
    ws.wait_for(f"{SOAK} runs completed", lambda: completed_runs(ws) >= SOAK, within=30)
    ws.stop_all()
    lines = ws.lines()
    per_tick = Counter(tick for tick, _ in lines)
    assert [tick for tick, n in per_tick.items() if n > 1] == []  # no tick ran twice
    ticks = sorted(per_tick)
    assert contiguous(ticks), "a tick was missed"
    runs = ws.runs()
    completed = sorted(t for t, status in runs.items() if status == cairn.RunStatus.COMPLETED)
    assert set(completed) <= set(ticks)  # every completed run recorded its one effect
    assert set(ticks) <= set(runs)  # and every effect belongs to a run of its tick
    assert len(completed) >= SOAK
    by_pid = Counter(pid for _, pid in lines)
    assert set(by_pid) <= {first.pid, second.pid}
    print(f"{len(ticks)} ticks, one run each; runs executed per process: {dict(by_pid)}")


@pytest.mark.timeout(90)
def test_catchup__ticks_missed_while_no_engine_ran_run_once_each(ws: Workspace) -> None:
    crashed = ws.spawn("--overlap", "allow", "--catchup", "1h")
    ws.wait_for("3 ticks run", lambda: len({t for t, _ in ws.lines()}) >= 3, within=30)
    crashed.kill()  # SIGKILL: no cleanup; its worker row says it is alive
    crashed.communicate(timeout=10)
    killed_at = time.time()
    ws.wait_for(f"{DOWN}s of downtime", lambda: time.time() >= killed_at + DOWN, within=DOWN + 5)
    restarted_at = time.time()
    survivor = ws.spawn("--overlap", "allow", "--catchup", "1h")
    ws.wait_for(
        "ticks after the restart",
        lambda: any(tick >= restarted_at + 2 for tick, _ in ws.lines()),
        within=30,
    )
    ws.stop_all()
    lines = ws.lines()
    ticks = sorted({tick for tick, _ in lines})
    assert contiguous(ticks), "a tick was missed"
    # Ticks that fell due while no engine ran: the killed one cannot have fired them.
    missed = [t for t in ticks if killed_at < t < restarted_at]
    assert len(missed) >= int(DOWN) - 1
    per_tick = Counter(tick for tick, _ in lines)
    assert {t: per_tick[t] for t in missed} == {t: 1 for t in missed}
    assert {pid for tick, pid in lines if tick in missed} == {survivor.pid}
    assert all(
        status == cairn.RunStatus.COMPLETED for t, status in ws.runs().items() if t in missed
    )
    print(f"{len(missed)} ticks missed during {DOWN:.0f}s of downtime, each run once after")
