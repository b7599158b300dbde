"""retention.next_batch: a prune's batch on SQLite follows the last one's pace."""

from __future__ import annotations

import pytest

from cairn.runtime.retention import BATCH_SECONDS, next_batch


@pytest.mark.parametrize(
    ("size", "took", "most", "expected"),
    [
        (100, 4 * BATCH_SECONDS, 500, 25),  # slow: as many as take BATCH_SECONDS
        (100, BATCH_SECONDS, 500, 100),
        (100, BATCH_SECONDS / 10, 500, 200),  # quick: at most twice as many
        (400, BATCH_SECONDS / 10, 500, 500),  # never past the caller's batch
        (3, 100 * BATCH_SECONDS, 500, 1),  # one run at least, however slow
        (10, 0.0, 500, 20),  # a clock that did not move
    ],
)
def test_next_batch__as_many_runs_as_take_the_aim_at_the_last_pace(
    size: int, took: float, most: int, expected: int
) -> None:
    assert next_batch(size, took, most) == expected
