"""Worker processes, faults and the side-effect log the chaos scenarios judge by.

A scenario starts workers (tests/chaos/worker.py) on one database, enqueues runs of
flow.ten_effects, injects a fault, and then `Chaos.verdict` checks the log:

- every run COMPLETED and every one of its ten steps left an "end" row;
- a step of a run started twice only if its first execution was in flight on a worker
  that a fault froze or killed at that moment (its start row is older than the fault's
  mark and that worker was the one faulted). Anything else ran twice while its workers
  were alive: the promise broken.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.stopped_processes import process_state

import cairn

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("CAIRN_CHAOS", "").lower() == "full"


def size(ci: int, full: int) -> int:
    """The scenario's size: small in `make test`, full in `make chaos`."""
    return full if FULL else ci


@dataclass(frozen=True)
class Fault:
    """A worker frozen or killed, and the last side-effect row written before it."""

    worker: str
    mark: int
    what: str


@dataclass
class Verdict:
    """What the log says after a scenario."""

    runs: int
    steps: int
    duplicates: list[tuple[str, int, str, str]] = field(default_factory=list)
    excused: int = 0  # steps cut off by a fault and run again, as the contract allows

    def __str__(self) -> str:
        return (
            f"{self.runs} runs, {self.steps} steps, {self.excused} cut-off steps run again, "
            f"{len(self.duplicates)} duplicates"
        )


class Chaos:
    """Workers on one database and the side-effect log they share."""

    def __init__(self, root: Path, url: str, *, lease: float = 2.0) -> None:
        self.root = root
        self.url = url
        self.lease = lease
        self.side = root / "side"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.faults: list[Fault] = []
        self._logs: dict[int, Path] = {}
        self._tags: dict[int, str] = {}

    # -- workers ---------------------------------------------------------------------

    def spawn(
        self,
        *,
        wrapper: list[str] | None = None,
        env: dict[str, str] | None = None,
        concurrency: int = 10,
        retry_for: float = 2.0,
        delay: float = 0.02,
        url: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a worker (optionally under `wrapper`, e.g. unshare) and wait until ready.

        `url`: where this worker connects (a proxy), if not the scenario's database.
        """
        full_env = {
            **os.environ,
            "CAIRN_SIDE_DIR": str(self.side),
            "CAIRN_STEP_DELAY": str(delay),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
            **(env or {}),
        }
        full_env.pop("CAIRN_DATABASE_URL", None)
        n = len(self.procs)
        full_env["CAIRN_WORKER_TAG"] = f"w{n}"
        out, err = self.root / f"worker-{n}.out", self.root / f"worker-{n}.log"
        command = [
            *(wrapper or []),
            sys.executable,
            "-m",
            "tests.chaos.worker",
            url or self.url,
            "--lease",
            str(self.lease),
            "--retry-for",
            str(retry_for),
            "--concurrency",
            str(concurrency),
        ]
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            proc = subprocess.Popen(
                command, env=full_env, stdout=stdout, stderr=stderr, start_new_session=True
            )
        self.procs.append(proc)
        self._logs[proc.pid] = err
        self._tags[proc.pid] = f"w{n}"
        deadline = time.monotonic() + 30
        while b"ready" not in out.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker did not start: {err.read_text()[-2000:]}")
            time.sleep(0.02)
        return proc

    def log_of(self, proc: subprocess.Popen[bytes]) -> str:
        return self._logs[proc.pid].read_text(errors="replace")

    def tag(self, proc: subprocess.Popen[bytes]) -> str:
        return self._tags[proc.pid]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                # The whole group: unshare ignores SIGTERM and waits for its child.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    # -- faults ----------------------------------------------------------------------

    def mark(self) -> int:
        """Now, on the clock the side-effect logs use."""
        return time.monotonic_ns()

    def rows(self) -> list[tuple[int, str, str, int, str]]:
        """Every side-effect line of every worker: (when, worker, run, step, phase)."""
        rows = []
        for path in self.side.glob("*.log"):
            for line in path.read_text().splitlines():
                when, run_id, step, phase = line.split()
                rows.append((int(when), path.stem, run_id, int(step), phase))
        return sorted(rows)

    def freeze(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGSTOP: the process is alive and holds what it held, but does nothing."""
        os.kill(proc.pid, signal.SIGSTOP)
        while process_state(proc.pid) != "T":  # the signal lands asynchronously
            time.sleep(0.001)
        self.faults.append(Fault(self.tag(proc), self.mark(), "SIGSTOP"))

    def thaw(self, proc: subprocess.Popen[bytes]) -> None:
        os.kill(proc.pid, signal.SIGCONT)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.kill()
        proc.wait()
        self.faults.append(Fault(self.tag(proc), self.mark(), "SIGKILL"))

    def effects_by(self, proc: subprocess.Popen[bytes]) -> int:
        """How many side-effect lines `proc` wrote."""
        path = self.side / f"{self.tag(proc)}.log"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def in_flight(self, proc: subprocess.Popen[bytes]) -> set[str]:
        """The runs whose latest line by `proc` is a step start: a step it is running."""
        latest: dict[str, str] = {}
        tag = self.tag(proc)
        for _, worker, run_id, _, phase in self.rows():
            if worker == tag:
                latest[run_id] = phase
        return {run_id for run_id, phase in latest.items() if phase == "start"}

    def wait_taken_over(self, run_ids: set[str], proc: subprocess.Popen[bytes]) -> None:
        """Until, after the last fault, another worker than `proc` logs one of `run_ids`."""
        deadline = time.monotonic() + 120
        tag, since = self.tag(proc), self.faults[-1].mark
        while not any(
            when > since and w != tag and r in run_ids for when, w, r, _, _ in self.rows()
        ):
            assert time.monotonic() < deadline, "nobody took over the frozen worker's runs"
            time.sleep(0.05)

    def wait_effects(self, count: int, proc: subprocess.Popen[bytes] | None = None) -> None:
        """Until `count` side-effect rows are logged (by `proc`, if given)."""
        deadline = time.monotonic() + 120
        while True:
            done = self.effects_by(proc) if proc is not None else len(self.rows())
            if done >= count:
                return
            assert time.monotonic() < deadline, f"only {done} of {count} effects logged"
            time.sleep(0.05)

    # -- runs ------------------------------------------------------------------------

    def enqueue(self, count: int, workflow: str = "chaos.ten") -> list[str]:
        from tests.chaos import flow

        chosen = {"chaos.ten": flow.ten_effects, "chaos.limited": flow.limited_effects}
        with cairn.Client(self.url) as client:
            return [client.start(chosen[workflow], i).run_id for i in range(count)]

    def wait_done(self, run_ids: list[str], timeout: float = 300) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        with cairn.Client(self.url) as client:
            while True:
                statuses = {r: client.get(r).status().value for r in run_ids}
                if all(s in ("COMPLETED", "FAILED", "CANCELLED") for s in statuses.values()):
                    return statuses
                if time.monotonic() > deadline:
                    pending = [r for r, s in statuses.items() if s != "COMPLETED"]
                    raise AssertionError(f"{len(pending)} runs unfinished: {pending[:5]}")
                time.sleep(0.2)

    def verdict(self, run_ids: list[str], timeout: float = 300) -> Verdict:
        """Wait for the runs, then judge the side-effect log (see the module docstring)."""
        statuses = self.wait_done(run_ids, timeout)
        bad = {r: s for r, s in statuses.items() if s != "COMPLETED"}
        assert not bad, f"{len(bad)} runs did not complete: {list(bad.items())[:5]}"
        starts: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
        ended: set[tuple[str, int]] = set()
        for row_id, worker, run_id, step, phase in self.rows():
            if phase == "start":
                starts[(run_id, step)].append((row_id, worker))
            else:
                ended.add((run_id, step))
        expected = {(r, s) for r in run_ids for s in range(10)}
        assert ended >= expected, f"{len(expected - ended)} steps never ended"
        verdict = Verdict(runs=len(run_ids), steps=len(expected))
        for (run_id, step), executions in starts.items():
            for (first_id, first), (_, second) in itertools.pairwise(executions):
                if self._cut_off(first_id, first):
                    verdict.excused += 1
                else:
                    verdict.duplicates.append((run_id, step, first, second))
        return verdict

    def story(self, verdict: Verdict) -> str:
        """The log lines and faults behind the duplicates, for an assertion message."""
        lines = [str(f) for f in self.faults]
        runs = sorted({d[0] for d in verdict.duplicates})[:3]
        lines += [str(row) for row in self.rows() if row[2] in runs]
        return "\n".join(lines)

    def journal_verdict(self, run_ids: list[str], timeout: float = 300) -> Verdict:
        """Judge by the journal: a step may start again only before its committed execution.

        For faults that leave a worker running (its connections hang, say): it may start
        steps after the fault whose results it can never commit, so the moment of the
        fault proves nothing. Each step's recorded result names the execution it came
        from; any start of that step after that one is a step run again although its
        outcome was committed (or while it ran elsewhere): a duplicate. Starts before it
        were cut off, their outcomes never recorded.
        """
        statuses = self.wait_done(run_ids, timeout)
        bad = {r: s for r, s in statuses.items() if s != "COMPLETED"}
        assert not bad, f"{len(bad)} runs did not complete: {list(bad.items())[:5]}"
        committed: dict[tuple[str, int], tuple[int, str]] = {}
        with cairn.Client(self.url) as client:
            for run_id in run_ids:
                for entry in client.history(run_id):
                    if entry.kind == "step" and isinstance(entry.result, dict):
                        key = (run_id, int(entry.result["step"]))
                        committed[key] = (int(entry.result["at"]), str(entry.result["by"]))
        expected = {(r, s) for r in run_ids for s in range(10)}
        assert set(committed) == expected, f"{len(expected - set(committed))} steps unrecorded"
        verdict = Verdict(runs=len(run_ids), steps=len(expected))
        for when, worker, run_id, step, phase in self.rows():
            if phase != "start" or (run_id, step) not in committed:
                continue
            at, by = committed[(run_id, step)]
            if when < at:
                verdict.excused += 1
            elif (when, worker) != (at, by):
                verdict.duplicates.append((run_id, step, by, worker))
        return verdict

    def _cut_off(self, row_id: int, worker: str) -> bool:
        """True if the execution logged at `row_id` by `worker` was in flight at a fault."""
        return any(f.worker == worker and row_id <= f.mark for f in self.faults)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
