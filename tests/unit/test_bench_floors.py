"""bench.step_floor and bench.minimal_engine time cairn's real step rows, every one inserted.

The floor is only a floor if the statement it times is the one the engine runs and the
fence lets each row through; a schema or parameter change that made it insert nothing
would make it look fast.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench import minimal_engine, step_floor

from cairn.store._sql.runs import INSERT_STEP_OWNED


def test_step_floor__inserts_every_row_it_times(tmp_path: Path) -> None:
    path = str(tmp_path / "floor.db")

    assert step_floor.sqlite_step_row_us(path, commits=20, rounds=2) > 0

    conn = sqlite3.connect(path)
    (timed,) = conn.execute("SELECT count(*) FROM steps WHERE seq >= 100").fetchone()
    conn.close()
    assert timed == 200 + 2 * 20  # the warm-up batch, then each round's rows


def test_step_floor__times_the_fence_too_a_run_not_held_refuses_the_row(tmp_path: Path) -> None:
    path = str(tmp_path / "floor.db")
    step_floor.sqlite_step_row_us(path, commits=1, rounds=1)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE runs SET fence = fence + 1")
    (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    (row,) = step_floor._rows(run_id, 10_000, 1)

    assert conn.execute(INSERT_STEP_OWNED, row).rowcount == 0


def test_minimal_engine__writes_every_step_of_every_run_both_ways(tmp_path: Path) -> None:
    found = minimal_engine.measure(tmp_path, lambda: 10.0, runs=3, rounds=1)

    assert found["sequential_ratio"] > 0 and found["concurrent_ratio"] > 0
    conn = sqlite3.connect(str(tmp_path / "minimal.db"))
    (one_by_one,) = conn.execute("SELECT count(*) FROM steps WHERE run_id LIKE 's%'").fetchone()
    (at_once,) = conn.execute("SELECT count(*) FROM steps WHERE run_id LIKE 'c%'").fetchone()
    conn.close()
    assert (one_by_one, at_once) == (2 * 3 * 10, 2 * 200 * 10)  # the warm-up round, then one
