"""What the scheduler logs while a schedule's run outlasts its ticks: once, not per tick.

A poller every 30 s whose run sometimes takes ten minutes, or a soak's `every="1s"`,
used to log "schedule 'x': 0 tick(s) started, 1 skipped" on every tick it held back.
"""

from __future__ import annotations

import logging

import pytest

import cairn
from cairn.clock import VirtualClock

from .kit import WAIT, Kit
from .test_schedules import LEASE, START, _blocking, _is, at, fire, until


def _lines(caplog: pytest.LogCaptureFixture, schedule: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "cairn.scheduler" and f"schedule {schedule!r}" in record.getMessage()
    ]


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
async def test_overlap__ticks_held_back_by_one_run_are_logged_once(
    kit: Kit, caplog: pytest.LogCaptureFixture, overlap: str
) -> None:
    clock = VirtualClock(START)
    name = f"sched.quiet.{overlap}"
    _blocking(kit, name, overlap)
    with caplog.at_level(logging.INFO, logger="cairn.scheduler"):
        async with kit.engine(clock=clock, lease=LEASE) as engine:
            clock.advance(60)
            await fire(engine)
            first = await engine.get(f"sched:{name}:{at(60)}")
            await until(lambda: _is(first, cairn.RunStatus.WAITING), "first run waiting")
            for _ in range(5):
                clock.advance(60)
                await fire(engine)
            held = _lines(caplog, name)
            await first.send_event("release")
            await first.result(timeout=WAIT)
    assert len(held) == 1, held
    assert first.run_id in held[0] and "still active" in held[0], held
    assert f"overlap {overlap!r}" in held[0]
