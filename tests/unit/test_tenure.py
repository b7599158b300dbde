"""Tenure: how long a worker trusts, without asking, that it still holds its runs."""

from __future__ import annotations

import asyncio

import pytest

from cairn.core import tenure as tenure_module
from cairn.core.tenure import Tenure


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(tenure_module.time, "monotonic", fake)
    return fake


def test_tenure__trusted_for_two_thirds_of_the_lease_after_a_heartbeat(clock: Clock) -> None:
    tenure = Tenure(9.0)
    assert not tenure.trusts(tenure.epoch)  # nothing committed yet

    tenure.renewed(clock.now)
    epoch = tenure.epoch
    clock.now += 5.9

    assert tenure.trusts(epoch)
    clock.now += 0.2  # 6.1 s: past two thirds of 9 s
    assert not tenure.trusts(epoch)
    assert not tenure.fresh()


def test_tenure__beats_on_time_keep_the_epoch(clock: Clock) -> None:
    tenure = Tenure(9.0)
    tenure.renewed(clock.now)
    epoch = tenure.epoch
    for _ in range(10):
        clock.now += 3.0  # every lease / 3
        tenure.renewed(clock.now)

    assert tenure.epoch == epoch
    assert tenure.trusts(epoch)


def test_tenure__a_beat_after_a_gap_starts_a_new_epoch(clock: Clock) -> None:
    # The process was frozen (or the database away) past its trust: runs begun before the
    # gap must check their fence once before their next step, whatever comes next.
    tenure = Tenure(9.0)
    tenure.renewed(clock.now)
    before = tenure.epoch
    clock.now += 60.0

    tenure.renewed(clock.now)

    assert tenure.epoch == before + 1
    assert not tenure.trusts(before)
    assert tenure.trusts(tenure.epoch)


def test_tenure__a_beat_sent_in_time_but_landing_after_trust_lapsed_starts_a_new_epoch(
    clock: Clock,
) -> None:
    # Sent while trusted, committed only once the trust had run out (the database or the
    # network was slow): a claim may have taken runs meanwhile and committed before the
    # beat, so the runs begun before must check their fence once, as after a gap.
    tenure = Tenure(9.0)
    tenure.renewed(clock.now)
    before = tenure.epoch
    sent = clock.now + 3.0
    clock.now += 7.0  # past two thirds of 9 s when it lands

    tenure.renewed(sent)

    assert tenure.epoch == before + 1
    assert not tenure.trusts(before)
    assert tenure.trusts(tenure.epoch)


def test_tenure__a_late_landing_beat_never_shortens_trust(clock: Clock) -> None:
    tenure = Tenure(9.0)
    tenure.renewed(clock.now + 3)  # a later beat landed first
    tenure.renewed(clock.now)  # then an earlier one

    clock.now += 8.5
    assert tenure.trusts(tenure.epoch)


async def test_tenure__renewal_asks_for_a_beat_and_wakes_when_one_lands() -> None:
    tenure = Tenure(9.0)
    asked: list[bool] = []

    def beat() -> None:
        asked.append(True)
        tenure.renewed(asyncio.get_running_loop().time())
        asyncio.get_running_loop().call_soon(tenure.landed)

    tenure.request_beat = beat
    async with asyncio.timeout(2):
        await tenure.renewal(timeout=5)

    assert asked == [True]
