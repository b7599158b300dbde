"""Finding runs: by run id prefix, creation time range and origin, and counting them by status."""

from __future__ import annotations

from cairn.store import Store
from cairn.store.programs import runs as run_ops
from cairn.store.records import RunQuery

from .kit import T0, execute, run_record


async def _ids(store: Store, **filters) -> list[str]:
    return [run.run_id for run in await store.read(run_ops.list_runs(RunQuery(**filters)))]


async def test_list_runs__by_run_id_prefix(store: Store) -> None:
    for n, run_id in enumerate(
        ["order-1", "order-10", "order-2", "order", "ORDER-1", "orders", "order-1/a", "x-order-1"]
    ):
        await store.write(run_ops.create_run(run_record(run_id, created_at=T0 + n)))
    await store.write(run_ops.create_run(run_record("order-1é", created_at=T0 + 20)))
    await store.write(run_ops.create_run(run_record("order-1\U0001f600", created_at=T0 + 21)))

    # By run id, descending: a page of a common prefix reads a page of its range.
    assert await _ids(store, run_id_prefix="order-1") == [
        "order-1\U0001f600",
        "order-1é",
        "order-10",
        "order-1/a",
        "order-1",
    ]
    assert await _ids(store, run_id_prefix="order-1é") == ["order-1é"]
    assert await _ids(store, run_id_prefix="ORDER") == ["ORDER-1"]  # case counts
    assert await _ids(store, run_id_prefix="order-3") == []
    assert await _ids(store, run_id_prefix="order-1", limit=2) == ["order-1\U0001f600", "order-1é"]
    # Paged on, as list_runs does: after the second row (its run id is what counts).
    after = await _ids(store, run_id_prefix="order-1", cursor=(T0 + 20, "order-1é"))
    assert after == ["order-10", "order-1/a", "order-1"]


async def test_list_runs__by_created_time_range(store: Store) -> None:
    for n in range(6):
        await store.write(run_ops.create_run(run_record(f"r{n}", created_at=T0 + n)))

    assert await _ids(store, since=T0 + 2, until=T0 + 4) == ["r3", "r2"]  # until excluded
    assert await _ids(store, until=T0 + 1) == ["r0"]
    assert await _ids(store, since=T0 + 4, until=T0 + 4) == []


async def test_list_runs__by_origin_and_unknown(store: Store) -> None:
    origins = ["api", "schedule", "trigger", "parent", None, "schedule"]
    for n, origin in enumerate(origins):
        await store.write(run_ops.create_run(run_record(f"r{n}", created_at=T0 + n, origin=origin)))

    assert await _ids(store, origin="schedule") == ["r5", "r1"]
    assert await _ids(store, origin="unknown") == ["r4"]
    assert await _ids(store, origin="fork") == []
    assert (await store.read(run_ops.get_run("r2"))).origin == "trigger"


async def test_count_runs__one_count_per_status_under_the_other_filters(
    store: Store, store_url: str
) -> None:
    statuses = ["COMPLETED", "COMPLETED", "FAILED", "PENDING", "COMPLETED", "FAILED"]
    for n, status in enumerate(statuses):
        workflow = "a" if n % 2 == 0 else "b"
        await store.write(
            run_ops.create_run(
                run_record(f"r{n}", status=status, created_at=T0 + n, workflow=workflow)
            )
        )
    execute(
        store_url,
        "INSERT INTO run_columns (run_id, name, value, created_at) VALUES (?, 'k', '1', ?)",
        ("r4", T0 + 4),
    )

    assert await store.read(run_ops.count_runs(RunQuery())) == {
        "COMPLETED": 3,
        "FAILED": 2,
        "PENDING": 1,
    }
    # The status filter is not applied: the page shows every status's count.
    assert await store.read(run_ops.count_runs(RunQuery(status="FAILED", workflow="a"))) == {
        "COMPLETED": 2,
        "FAILED": 1,
    }
    assert await store.read(run_ops.count_runs(RunQuery(since=T0 + 3, run_id_prefix="r"))) == {
        "PENDING": 1,
        "COMPLETED": 1,
        "FAILED": 1,
    }
    assert await store.read(run_ops.count_runs(RunQuery(columns={"k": "1"}))) == {"COMPLETED": 1}
    assert await store.read(run_ops.count_runs(RunQuery(workflow="none"))) == {}
    # With a limit, counting stops after that many runs.
    some = await store.read(run_ops.count_runs(RunQuery(workflow="a"), limit=2))
    assert sum(some.values()) == 2
    assert await store.read(run_ops.count_runs(RunQuery(workflow="a"), limit=4)) == {
        "COMPLETED": 2,
        "FAILED": 1,
    }


async def test_count_runs__without_filters_a_limit_bounds_each_status_on_its_own(
    store: Store,
) -> None:
    statuses = ["COMPLETED"] * 4 + ["FAILED"] * 2 + ["PENDING", "SLEEPING", "CANCELLED"]
    for n, status in enumerate(statuses):
        await store.write(run_ops.create_run(run_record(f"r{n}", status=status, created_at=T0 + n)))

    # Each status stops at the limit, so a common status does not eat the others' share.
    assert await store.read(run_ops.count_runs(RunQuery(), limit=2)) == {
        "COMPLETED": 2,
        "FAILED": 2,
        "PENDING": 1,
        "SLEEPING": 1,
        "CANCELLED": 1,
    }
    # The status filter is ignored here too; under the limit every count is exact.
    assert await store.read(run_ops.count_runs(RunQuery(status="FAILED"), limit=5)) == {
        "COMPLETED": 4,
        "FAILED": 2,
        "PENDING": 1,
        "SLEEPING": 1,
        "CANCELLED": 1,
    }
    assert await store.read(run_ops.count_runs(RunQuery(), limit=1)) == dict.fromkeys(
        ("COMPLETED", "FAILED", "PENDING", "SLEEPING", "CANCELLED"), 1
    )
