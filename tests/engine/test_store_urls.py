"""Engine() and Client on memory:// and file:///dir: the SQLite store by other names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import cairn


@cairn.step(name="urls.add")
async def add(a: int, b: int) -> int:
    return a + b


@cairn.workflow(name="urls.approve")
async def approve(a: int, b: int) -> dict[str, object]:
    total = await add(a, b)
    decision = await cairn.wait_for_event("decision", timeout="30s")
    return {"total": total, "decision": decision}


async def test_engine__memory_url_from_the_environment_runs_a_workflow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_DATABASE_URL", "memory://")
    async with cairn.Engine(poll_interval=0.05) as engine:
        assert engine.url == "memory://"
        handle = await engine.start(approve, 1, 2)
        await handle.send_event("decision", "yes")
        assert await handle.result(timeout=10) == {"total": 3, "decision": "yes"}


async def test_client__shares_the_memory_store_with_an_engine_of_its_process() -> None:
    async with cairn.Engine("memory://", poll_interval=0.05) as engine:
        client = await asyncio.to_thread(cairn.Client, "memory://")
        try:
            started = await asyncio.to_thread(client.start, approve, 2, 3)
            await asyncio.to_thread(started.send_event, "decision", "ok")
            result = await (await engine.get(started.run_id)).result(timeout=10)
            assert result == {"total": 5, "decision": "ok"}
            assert await asyncio.to_thread(started.result, 10) == result
        finally:
            await asyncio.to_thread(client.close)


async def test_engine__file_url_keeps_runs_for_the_next_engine(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'runs'}"
    async with cairn.Engine(url, poll_interval=0.05) as engine:
        handle = await engine.start(approve, 4, 5, run_id="kept")
        assert await handle.status() != cairn.RunStatus.COMPLETED
    assert (tmp_path / "runs" / "cairn.db").is_file()

    async with cairn.Engine(url, poll_interval=0.05) as engine:  # a restart, in effect
        handle = await engine.get("kept")
        await handle.send_event("decision", "later")
        assert await handle.result(timeout=10) == {"total": 9, "decision": "later"}


def test_celery_app__refuses_memory_its_workers_could_not_see() -> None:
    from cairn import celery as cairn_celery

    with pytest.raises(cairn.ConfigError, match=r"cairn\.celery .*'memory://' is this process"):
        cairn_celery.app("amqp://guest@localhost//", "memory://")
