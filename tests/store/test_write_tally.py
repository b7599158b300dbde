"""Write tallies: a store counts the writes of work whose caller keeps a tally, only those."""

from __future__ import annotations

import asyncio

import pytest

from cairn.store import Store, write_tally
from cairn.store.programs import runs as run_ops

from .kit import run_record


async def test_write__counted_in_the_tally_kept_and_in_no_other(store: Store) -> None:
    tally, other = write_tally.Tally(), write_tally.Tally()

    async def counted() -> None:
        with write_tally.kept(tally):
            await store.write(run_ops.create_run(run_record("r1")))
            await store.write(run_ops.create_run(run_record("r2")))

    async def kept_idle() -> None:
        with write_tally.kept(other):
            await asyncio.sleep(0.05)  # kept while the others write: theirs are not its own

    await asyncio.gather(counted(), kept_idle(), store.write(run_ops.create_run(run_record("r3"))))
    await store.write(run_ops.create_run(run_record("r4")))

    assert (tally.asked, tally.withdrawn, tally.ended) == (2, 0, True)
    assert (other.asked, other.ended) == (0, True)
    assert not write_tally.ACTIVE


async def test_kept__ends_the_tally_when_the_work_raises() -> None:
    tally = write_tally.Tally()

    with pytest.raises(RuntimeError), write_tally.kept(tally):
        assert write_tally.ACTIVE == {tally}
        raise RuntimeError("boom")

    assert tally.ended
    assert not write_tally.ACTIVE
    assert write_tally.TALLY.get() is None
