"""VirtualClock: time moves only when told; sleepers wake as it passes their time."""

from __future__ import annotations

import asyncio

from cairn.clock import VirtualClock


async def test_next_due__the_earliest_sleeper_still_waiting() -> None:
    clock = VirtualClock(100.0)
    assert clock.next_due() is None
    late = asyncio.ensure_future(clock.sleep(30))
    early = asyncio.ensure_future(clock.sleep(10))
    await asyncio.sleep(0)
    assert clock.next_due() == 110.0
    clock.advance(10)
    await early
    assert clock.next_due() == 130.0 and not late.done()
    clock.advance(20)
    await late
    assert clock.next_due() is None
