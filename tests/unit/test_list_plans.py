"""Which runs pages have one best plan whatever their values (planned once on PostgreSQL)."""

from __future__ import annotations

import pytest

from cairn.store._sql import listing
from cairn.store.records import RunQuery


@pytest.mark.parametrize(
    "query",
    [
        RunQuery(),
        RunQuery(status="FAILED"),
        RunQuery(columns={"region": '"eu"'}),
        RunQuery(origin="schedule"),
        RunQuery(status="FAILED", since=1.0, until=2.0, cursor=(1.5, "r-1")),
        RunQuery(columns={"region": '"eu"'}, cursor=(1.5, "r-1")),
    ],
)
def test_one_plan_fits__a_page_read_in_the_order_of_its_one_filters_index(
    query: RunQuery,
) -> None:
    assert listing.one_plan_fits(query)


@pytest.mark.parametrize(
    "query",
    [
        RunQuery(status="FAILED", columns={"region": '"eu"'}),
        RunQuery(columns={"region": '"eu"', "customer": '"c-1"'}),
        RunQuery(status="FAILED", origin="api"),
        RunQuery(workflow="orders"),
        RunQuery(parent_id="r-1"),
        RunQuery(version="2"),
        RunQuery(run_id_prefix="order-"),
    ],
)
def test_one_plan_fits__not_where_how_rare_a_value_is_decides_the_plan(query: RunQuery) -> None:
    assert not listing.one_plan_fits(query)
