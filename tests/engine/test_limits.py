"""Size and history limits: refused before anything is written, on both stores."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.errors import ConfigError, SerializationError
from cairn.store.programs import runs as run_ops

from .kit import WAIT, Kit

BIG = "x" * (2 * 1024 * 1024 + 1)  # one byte over the limit these tests set


def stored_text_over(url: str, size: int) -> list[str]:
    """Where the database holds a text longer than `size` (there should be none)."""
    found = []
    for table, column in (
        ("runs", "args"),
        ("runs", "result"),
        ("runs", "error"),
        ("steps", "result"),
        ("steps", "error"),
        ("steps", "input"),
        ("messages", "payload"),
    ):
        rows = execute(url, f"SELECT COUNT(*) FROM {table} WHERE LENGTH({column}) > ?", (size,))
        if rows[0][0]:
            found.append(f"{table}.{column}")
    return found


async def test_limits__arguments_over_the_limit_are_refused_and_nothing_stored(
    kit: Kit,
) -> None:
    @kit.workflow("lim.echo")
    async def echo(text: str) -> int:
        return len(text)

    assert cairn.Engine("memory://").limits.max_value_bytes == 100 * 1024 * 1024  # default
    async with kit.engine(max_value_size="2MiB") as engine:
        with pytest.raises(SerializationError) as caught:
            await engine.start(echo, BIG, run_id="too-big")
        assert await engine.store.read(run_ops.get_run("too-big")) is None
    message = str(caught.value)
    assert "arguments of workflow 'lim.echo'" in message
    assert "2.0 MiB (2097178 bytes)" in message and "max_value_size" in message
    assert execute(kit.url, "SELECT COUNT(*) FROM runs")[0][0] == 0


async def test_limits__a_step_result_over_the_limit_fails_the_run_and_is_not_stored(
    kit: Kit,
) -> None:
    @kit.step("lim.produce", retries=3)
    def produce(n: int) -> str:
        return "y" * n

    @kit.workflow("lim.producer")
    async def producer(n: int) -> int:
        return len(await produce(n))

    async with kit.engine(max_value_size="10KiB", warn_value_size="1KiB") as engine:
        ok = await engine.start(producer, 5000)
        assert await ok.result(timeout=WAIT) == 5000
        run = await engine.start(producer, 20_000)
        with pytest.raises(cairn.RunFailed) as caught:
            await run.result(timeout=WAIT)
    message = str(caught.value)
    assert "result of step 'lim.produce'" in message
    assert "19.5 KiB (20002 bytes)" in message and "10.0 KiB" in message
    assert stored_text_over(kit.url, 10 * 1024) == []


async def test_limits__an_event_payload_over_the_limit_is_refused_and_not_stored(
    kit: Kit,
) -> None:
    @kit.workflow("lim.waiter")
    async def waiter() -> int:
        return len(await cairn.wait_for_event("data", timeout="1h"))

    async with kit.engine(max_value_size="4KiB") as engine:
        run = await engine.start(waiter)
        await asyncio.sleep(0.2)
        with pytest.raises(SerializationError, match=r"payload of event 'data'.*over the limit"):
            await engine.send_event(run.run_id, "data", "z" * 5000)
        assert execute(kit.url, "SELECT COUNT(*) FROM messages")[0][0] == 0
        await engine.send_event(run.run_id, "data", "z" * 3000)
        assert await run.result(timeout=WAIT) == 3000
    assert stored_text_over(kit.url, 4 * 1024) == []


async def test_limits__a_value_over_the_warning_size_is_logged_and_stored(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    @kit.workflow("lim.echo2")
    async def echo(text: str) -> int:
        return len(text)

    caplog.set_level(logging.WARNING, logger="cairn.limits")
    async with kit.engine(warn_value_size="1KiB") as engine:
        run = await engine.start(echo, "w" * 2000)
        assert await run.result(timeout=WAIT) == 2000
    warned = [r.getMessage() for r in caplog.records if r.name == "cairn.limits"]
    assert any("arguments of workflow 'lim.echo2'" in w and "warn_value_size" in w for w in warned)


async def test_limits__a_history_past_max_history_fails_the_run_even_if_caught(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    @kit.step("lim.tick")
    def tick(i: int) -> int:
        return i

    @kit.workflow("lim.forever")
    async def forever(n: int) -> int:
        done = 0
        for i in range(n):
            try:
                done += await tick(i)
            except cairn.errors.HistoryTooLong:
                pass  # swallowed: the run fails all the same
        return done

    caplog.set_level(logging.WARNING, logger="cairn.limits")
    async with kit.engine(warn_history=3, max_history=5) as engine:
        short = await engine.start(forever, 5)
        assert await short.result(timeout=WAIT) == 10
        long = await engine.start(forever, 8)
        with pytest.raises(cairn.RunFailed) as caught:
            await long.result(timeout=WAIT)
        history = await engine.history(long.run_id)
    assert "more than 5 history entries (max_history)" in str(caught.value)
    assert "continue_as_new" in str(caught.value)
    assert len(history) == 5  # nothing past the limit was stored
    warned = [r.getMessage() for r in caplog.records if r.name == "cairn.limits"]
    assert any("4 history entries (warn_history)" in w for w in warned)


async def test_limits__continue_as_new_keeps_a_long_job_under_max_history(kit: Kit) -> None:
    @kit.step("lim.tick2")
    def tick(i: int) -> int:
        return i

    @kit.workflow("lim.batches")
    async def batches(start: int, total: int) -> int:
        for i in range(start, min(start + 4, total)):
            await tick(i)
        if start + 4 < total:
            cairn.continue_as_new(start + 4, total)
        return total

    async with kit.engine(max_history=5, warn_history=5) as engine:
        run = await engine.start(batches, 0, 20)
        assert await run.result(timeout=WAIT) == 20


def test_limits__read_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cairn]\nretention = "14d"\nmax_value_size = "1MiB"\nwarn_value_size = 1000\n'
        "warn_history = 100\nmax_history = 200\n"
    )
    monkeypatch.chdir(tmp_path)
    engine = cairn.Engine("sqlite:///:memory:")
    assert engine.retention == 14 * 86400
    assert (engine.limits.max_value_bytes, engine.limits.warn_value_bytes) == (1024**2, 1000)
    assert (engine.limits.warn_history, engine.limits.max_history) == (100, 200)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_value_size": "lots"}, "max_value_size must be a size such as '2MiB'"),
        ({"max_value_size": 0}, "max_value_size must be larger than zero"),
        (
            {"warn_value_size": "101MiB"},
            "warn_value_size (105906176 bytes) is above max_value_size",
        ),
        ({"max_history": -1}, "max_history must be a positive whole number"),
        ({"warn_history": 2.5}, "warn_history must be a positive whole number"),
        ({"warn_history": 60_000}, "warn_history (60000) is above max_history (50000)"),
    ],
)
def test_limits__a_bad_setting_is_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        cairn.Engine("sqlite:///:memory:", **options)
    assert message in str(caught.value)
