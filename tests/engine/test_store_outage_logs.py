"""What an engine's loops log while the database is away: one line each, no traceback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from cairn.errors import StoreUnavailable

from .kit import WAIT, Kit


async def test_outage__claim_and_schedule_loops_log_one_line_without_a_traceback(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    # With PostgreSQL behind a frozen proxy, `cairn worker` wrote "claiming runs failed;
    # retrying" and "scheduling failed; retrying" with a 30-line traceback each, every
    # 30 s, for as long as the database was away: an expected outage, not a bug.
    async with kit.engine(poll_interval=0.01) as engine:
        store: Any = engine.store
        real_read, real_write = store.read, store.write

        async def away(make: Any) -> Any:
            raise StoreUnavailable("database db: unreachable for 30s (connection refused)")

        store.read = store.write = away
        try:
            with caplog.at_level(logging.WARNING, logger="cairn"):
                async with asyncio.timeout(WAIT):
                    while not {"cairn.worker", "cairn.scheduler"} <= {
                        r.name for r in caplog.records if "failed" in r.getMessage()
                    }:
                        await asyncio.sleep(0.01)
        finally:
            store.read, store.write = real_read, real_write
    failed = [r for r in caplog.records if "failed" in r.getMessage()]
    assert failed
    for record in failed:
        assert record.exc_info is None, record.getMessage()
        assert record.getMessage().endswith(
            "failed (database db: unreachable for 30s (connection refused)); retrying"
        )
