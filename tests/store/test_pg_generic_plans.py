"""PostgreSQL only: pages with one best plan are read on connections that plan them once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import psycopg
import pytest

from cairn.store.postgres import generic_plans
from cairn.store.postgres.store import PostgresStore, conninfo
from cairn.store.programs import runs
from cairn.store.records import RunQuery

from .kit import T0, run_record


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    # The URL's own options must survive the generic plan's.
    store = PostgresStore(pg_url + "?options=" + quote("-c statement_timeout=12345"))
    await store.open()
    yield store
    await store.close()


def test_generic_conninfo__adds_the_setting_after_the_urls_own_options(pg_url: str) -> None:
    url = pg_url + "?options=" + quote("-c statement_timeout=12345")
    with psycopg.connect(generic_plans.generic_conninfo(conninfo(url))) as conn:
        assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("12345ms",)


async def test_list_runs__pages_read_past_the_prepare_threshold_stay_right(
    pg_store: PostgresStore,
) -> None:
    for n in range(6):
        run = run_record(f"r-{n}", created_at=T0 + n, status="FAILED" if n % 2 else "COMPLETED")
        await pg_store.write(runs.create_run(run))
    # More than psycopg's five executions before it prepares, so the cached plan serves.
    for _ in range(8):
        failed = await pg_store.read(runs.list_runs(RunQuery(status="FAILED", limit=2)))
        assert [run.run_id for run in failed] == ["r-5", "r-3"]
        everything = await pg_store.read(runs.list_runs(RunQuery(limit=10)))
        assert [run.run_id for run in everything] == [f"r-{n}" for n in range(5, -1, -1)]
        both = await pg_store.read(runs.list_runs(RunQuery(status="FAILED", origin="api")))
        assert both == []
